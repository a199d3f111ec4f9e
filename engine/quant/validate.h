#pragma once
// What llama.cpp's --check-tensors checks (ggml_validate_row_data): that
// every float value of an f32/f16/bf16/f64 tensor, and every fp16 scale
// (d, and the minimum m/dmin where the type has one) of every block of a
// quantized tensor, is finite. A NaN or an infinity there would otherwise
// only show up later as NaN logits, far from its cause.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "engine/core/dtype.h"

namespace kiln::quant {

struct InvalidBlock {
    uint64_t block;           // index of the block (the element, for plain float types)
    std::string_view field;   // "value", "d", "m" or "dmin"
    std::string_view problem; // "NaN" or "inf"
};

// The first block of `data` (whole blocks of `type`) holding a NaN or an
// infinity; nullopt when all are finite or `type` has nothing to check
// (integer types, and types kiln has no block layout for).
std::optional<InvalidBlock> find_invalid_block(DType type, std::span<const std::byte> data);

}  // namespace kiln::quant
