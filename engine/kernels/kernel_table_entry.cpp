// The table of one kernel target (kernel_table.h): compiled into every target
// with its instruction-set flags, where the kernel functions named below are
// that target's own copies. The build names the entry function
// (KILN_KERNEL_TARGET_ENTRY), the target (KILN_KERNEL_TARGET_NAME) and which
// matmul sets the target's objects hold (KILN_KERNELS_WITH_AVX2 and so on).
#include "engine/kernels/attention.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/gradients.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/matmul_impl.h"
#include "engine/kernels/vector.h"

#if !defined(KILN_KERNEL_TARGET_ENTRY) || !defined(KILN_KERNEL_TARGET_NAME)
#error "kernel_table_entry.cpp is compiled by engine/kernels/targets.cmake, once per kernel target"
#endif

namespace kiln::kernels::detail {
#if KILN_KERNELS_WITH_NEON
const MatmulKernels* neon_matmul_kernels() noexcept;
#endif
namespace {

// The best of the target's matmul sets that this CPU runs; the scalar
// reference when the target has none of its own.
const MatmulKernels* best_matmul_set() noexcept {
#if KILN_KERNELS_WITH_AVX512
    if (const MatmulKernels* set = avx512_vnni_matmul_kernels()) return set;
#endif
#if KILN_KERNELS_WITH_AVX2
    if (const MatmulKernels* set = avx2_matmul_kernels()) return set;
#endif
#if KILN_KERNELS_WITH_NEON
    if (const MatmulKernels* set = neon_matmul_kernels()) return set;
#endif
    return &scalar_matmul_kernels();
}

constexpr KernelTable kTable{
    .name = KILN_KERNEL_TARGET_NAME,
    .matmul_set = best_matmul_set,
#if KILN_KERNELS_WITH_AVX512
    .tile_target_name = "amx",
    .tile_built = amx_matmul_built,
    .tile_matmul_set = amx_matmul_kernels,
#else
    .tile_target_name = nullptr,
    .tile_built = nullptr,
    .tile_matmul_set = nullptr,
#endif
    .add = add,
    .mul = mul,
    .scale = scale,
    .softcap = softcap,
    .relu = relu,
    .silu = silu,
    .gelu_tanh = gelu_tanh,
    .gelu_erf = gelu_erf,
    .swiglu = swiglu,
    .rms_norm = rms_norm,
    .layer_norm = layer_norm,
    .softmax = softmax,
    .rope = rope,
    .dot = dot,
    .fp32_to_fp16_row = fp32_to_fp16_row,
    .attend = attend,
    .attend_block_scratch = attend_block_scratch,
    .attention_partial_doubles = attention_partial_doubles,
    .attention_chunks = attention_chunks,
    .attention_cache_type = attention_cache_type,
    .attend_block_f32 = attend_block,
    .attend_block_cache = attend_block,
    .attend_chunk = attend_chunk,
    .merge_attention_chunks = merge_attention_chunks,
    .relu_grad = relu_grad,
    .gelu_tanh_grad = gelu_tanh_grad,
    .gelu_erf_grad = gelu_erf_grad,
    .silu_grad = silu_grad,
    .rms_norm_grad = rms_norm_grad,
    .layer_norm_grad = layer_norm_grad,
    .softmax_grad = softmax_grad,
    .cross_entropy = cross_entropy,
    .cross_entropy_grad = cross_entropy_grad,
};

}  // namespace
}  // namespace kiln::kernels::detail

// The one global symbol of the target's object (targets.cmake keeps it and
// makes every other symbol local).
extern "C" const kiln::kernels::detail::KernelTable* KILN_KERNEL_TARGET_ENTRY() noexcept {
    return &kiln::kernels::detail::kTable;
}
