#pragma once
// SHA-256 (FIPS 180-4), so tests can compare tensor bytes with hashes that a
// reference script computed with Python's hashlib.
#include <cstddef>
#include <span>
#include <string>

namespace kiln::test {

// Lower-case hex digest of `data`.
std::string sha256_hex(std::span<const std::byte> data);

}  // namespace kiln::test
