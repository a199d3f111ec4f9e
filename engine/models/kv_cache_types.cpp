#include "engine/models/kv_cache_types.h"

#include <utility>

#include "engine/core/error.h"

namespace kiln {

bool kv_cache_type_supported(DType type) noexcept {
    return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 ||
           type == DType::Q4_0;
}

void check_cache_types(CacheTypes types, int64_t head_dim) {
    for (auto [type, what] : {std::pair{types.k, "key"}, std::pair{types.v, "value"}}) {
        if (!kv_cache_type_supported(type))
            fail("model", "a {} cache of type {} is not supported (f32, f16, bf16, q8_0 and q4_0 are)", what,
                 dtype_name(type));
        const int64_t block = type_traits(type).block_size;
        if (head_dim > 0 && head_dim % block != 0)
            fail("model", "a {} {} cache needs a head size that is a multiple of {}, but this model's head size is {}",
                 dtype_name(type), what, block, head_dim);
    }
}

size_t cache_row_bytes(DType type, int64_t kv_dim) {
    const auto bytes = checked_bytes(type, static_cast<uint64_t>(kv_dim));
    if (!bytes)
        fail("model", "a cached row of {} values is not a whole number of {} blocks of {}", kv_dim, dtype_name(type),
             type_traits(type).block_size);
    return static_cast<size_t>(*bytes);
}

}  // namespace kiln
