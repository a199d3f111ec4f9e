#pragma once
// The storage types of a decoder's KV cache, keys and values each their own
// (llama.cpp's -ctk/-ctv): F32, F16 (half the memory and half the bytes a
// generated token reads back; llama.cpp's default), BF16, Q8_0 (about a
// quarter of F32) or Q4_0 (about an eighth), the block types in ggml's
// layouts. A row is rounded or quantized once, when its token is evaluated.
#include <cstdint>

#include "engine/core/dtype.h"

namespace kiln {

struct CacheTypes {
    DType k = DType::F32;
    DType v = DType::F32;

    constexpr CacheTypes() = default;
    // One type for both (implicit, so a caller may still name one DType).
    constexpr CacheTypes(DType both) : k(both), v(both) {}  // NOLINT(google-explicit-constructor)
    constexpr CacheTypes(DType keys, DType values) : k(keys), v(values) {}
    friend constexpr bool operator==(CacheTypes, CacheTypes) = default;
};

// Whether a KV cache may hold this type.
bool kv_cache_type_supported(DType type) noexcept;

// Throws kiln::Error naming the problem when a type is not a cache type, or a
// block type's 32-element blocks do not tile a head of head_dim values (each
// head is read as whole blocks; head_dim 0 = unknown, not checked).
void check_cache_types(CacheTypes types, int64_t head_dim);

// Bytes of one cached row of kv_dim values of this type.
size_t cache_row_bytes(DType type, int64_t kv_dim);

}  // namespace kiln
