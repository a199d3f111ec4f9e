#pragma once
// Private to the kernels: the table of entry points one kernel target gives.
//
// The kernel sources (kernels/targets.cmake lists them) are compiled once per
// target: the baseline of the architecture, and on x86-64 also AVX2 and
// AVX-512 VNNI. Each target's objects are linked into one object whose only
// global symbol is its table function (KILN_KERNEL_TARGET_ENTRY, extern "C");
// every other symbol in it, the inline functions and templates of the headers
// it includes among them, is made local. So the AVX-512 copy of an inline
// function can never stand in for the baseline copy that the rest of the
// program calls, which would stop a machine without AVX-512 with an illegal
// instruction. dispatch.cpp picks one table at start-up (KILN_KERNELS or the
// best this CPU runs) and the public kernel functions call through it.
#include <cstddef>
#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/rope_spec.h"

namespace kiln::kernels::detail {

struct KernelTable {
    const char* name;
    // The best matmul set compiled into the target that this CPU runs.
    const MatmulKernels* (*matmul_set)() noexcept;
    // A second set for the same row kernels, offered as a target of its own:
    // the "amx" set (AVX-512 targets only; nullptr elsewhere). The function
    // returns nullptr where this CPU or its operating system cannot run it.
    // tile_built says whether the target's compiler flags gave it that set.
    const char* tile_target_name;
    bool (*tile_built)() noexcept;
    const MatmulKernels* (*tile_matmul_set)() noexcept;

    // vector.h
    void (*add)(const float*, const float*, float*, int64_t) noexcept;
    void (*mul)(const float*, const float*, float*, int64_t) noexcept;
    void (*scale)(const float*, float, float*, int64_t) noexcept;
    void (*softcap)(const float*, float, float*, int64_t) noexcept;
    void (*relu)(const float*, float*, int64_t) noexcept;
    void (*silu)(const float*, float*, int64_t) noexcept;
    void (*gelu_tanh)(const float*, float*, int64_t) noexcept;
    void (*gelu_erf)(const float*, float*, int64_t) noexcept;
    void (*swiglu)(const float*, const float*, float*, int64_t) noexcept;
    void (*rms_norm)(const float*, const float*, float, float*, int64_t) noexcept;
    void (*layer_norm)(const float*, const float*, const float*, float, float*, int64_t) noexcept;
    void (*softmax)(const float*, float*, int64_t) noexcept;
    void (*rope)(float*, const RopeSpec&, int64_t, const float*) noexcept;
    float (*dot)(const float*, const float*, int64_t) noexcept;

    // convert.h
    void (*fp32_to_fp16_row)(const float*, uint16_t*, int64_t) noexcept;

    // attention.h
    void (*attend)(const float*, const float*, size_t, const float*, size_t, int64_t, int64_t, float, const uint8_t*,
                   float*, float*, float, int64_t) noexcept;
    size_t (*attend_block_scratch)(int64_t) noexcept;
    size_t (*attention_partial_doubles)(int64_t) noexcept;
    int64_t (*attention_chunks)(const AttentionQuery*, int) noexcept;
    bool (*attention_cache_type)(DType) noexcept;
    void (*attend_block_f32)(const AttentionQuery*, int, const float*, size_t, const float*, size_t, int64_t, float,
                             float*, float) noexcept;
    void (*attend_block_cache)(const AttentionQuery*, int, CacheHead, CacheHead, int64_t, float, float*,
                               float) noexcept;
    void (*attend_chunk)(const AttentionQuery*, int, CacheHead, CacheHead, int64_t, float, int64_t, double*, float*,
                         float) noexcept;
    void (*merge_attention_chunks)(const double*, int64_t, size_t, int64_t, float*) noexcept;

    // gradients.h
    void (*relu_grad)(const float*, const float*, float*, int64_t) noexcept;
    void (*gelu_tanh_grad)(const float*, const float*, float*, int64_t) noexcept;
    void (*gelu_erf_grad)(const float*, const float*, float*, int64_t) noexcept;
    void (*silu_grad)(const float*, const float*, float*, int64_t) noexcept;
    void (*rms_norm_grad)(const float*, const float*, const float*, float, float*, int64_t);
    void (*layer_norm_grad)(const float*, const float*, const float*, float, float*, int64_t);
    void (*softmax_grad)(const float*, const float*, float*, int64_t);
    float (*cross_entropy)(const float*, int64_t, int32_t);
    void (*cross_entropy_grad)(const float*, int64_t, int32_t, float, float*);
};

}  // namespace kiln::kernels::detail
