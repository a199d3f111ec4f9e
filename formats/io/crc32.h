#pragma once
// CRC-32 as zip, gzip and PNG compute it (IEEE 802.3 polynomial, reflected,
// inverted): the zip reader checks entries with it, and kiln's training
// checkpoints carry one of their tensor data.
#include <cstddef>
#include <cstdint>
#include <span>

namespace kiln {

// Continues a CRC-32 over more bytes: crc32_update(crc32_update(0, a), b) == crc32(a then b).
uint32_t crc32_update(uint32_t crc, std::span<const std::byte> data) noexcept;

inline uint32_t crc32(std::span<const std::byte> data) noexcept { return crc32_update(0, data); }

}  // namespace kiln
