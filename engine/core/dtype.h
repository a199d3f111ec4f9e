#pragma once
// Tensor element types, numbered exactly as ggml/GGUF number them, and one
// traits table that describes each as data: block size, bytes per block, and the
// reference conversions to and from float. Everything that needs to know how big
// a row of some type is, or how to read it, asks this table.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kiln {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    // kiln's own in-memory layouts, never in a file: a K-quant tensor's rows
    // interleaved 16 at a time for the kernels (quant/interleave.h). Their ids
    // are outside ggml's range, and find_type_traits never returns them.
    Q4_0_R16 = 0x10000 + 2,
    Q8_0_R16 = 0x10000 + 8,
    Q4_K_R16 = 0x10000 + 12,
    Q5_K_R16 = 0x10000 + 13,
    Q6_K_R16 = 0x10000 + 14,
    // Q6_K_R16 with each code's 6 bits whole in one byte (a fourth code's bits
    // spread over the tops of three): fewer instructions to unpack on AVX2.
    Q6_K_R16B = 0x10000 + 32 + 14,
};

// Converts n elements (a multiple of block_size) of this type to float.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
// The plain reference quantizer: n floats (a multiple of block_size) to this type.
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeTraits {
    DType type;
    std::string_view name;       // as ggml prints it: "f32", "q8_0", ...
    int64_t block_size;          // elements per block (1 for plain types)
    size_t block_bytes;          // bytes per block
    bool quantized;
    ToFloatFn to_float;          // nullptr: kiln knows the layout but cannot compute with it
    FromFloatFn from_float_ref;  // nullptr: kiln cannot produce this type
};

// Traits of a type id read from a file; nullptr when the id is not a ggml type.
const TypeTraits* find_type_traits(uint32_t id) noexcept;
// Traits of a known type.
const TypeTraits& type_traits(DType type) noexcept;
// All types in the table, in id order.
std::span<const TypeTraits> all_type_traits() noexcept;
// "q8_0" -> DType::Q8_0 (case-insensitive); nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name) noexcept;
inline std::string_view dtype_name(DType type) noexcept { return type_traits(type).name; }

// Bytes taken by `count` elements of `type`. nullopt when count is not a multiple
// of the block size or the result does not fit in 63 bits.
std::optional<uint64_t> checked_bytes(DType type, uint64_t count) noexcept;

// Product of dims; nullopt on overflow past 2^63 - 1.
std::optional<uint64_t> checked_element_count(std::span<const uint64_t> dims) noexcept;

}  // namespace kiln
