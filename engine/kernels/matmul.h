#pragma once
// Matrix products with weights in any computable storage type and float
// activations. Weights are stored as ggml stores them: row r of W holds the k
// inputs of output r, so out = X · Wᵀ.
//
// Activations are first "prepared" once per matmul into the format the weight
// type's dot product consumes (vec_dot_type): float stays float for F32/F16/BF16
// weights; for Q8_0/Q4_0 weights each activation row is quantized to Q8_0 and
// the dot products run on int8 blocks. Several kernel sets exist (scalar
// reference, AVX2, AVX-512 VNNI); each kernel target (kernel_targets.h) has
// one, and the target chosen at start-up decides the set.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

#include "engine/core/dtype.h"
#include "engine/quant/interleave.h"

namespace kiln::kernels {

// The activation type a weight type's dot product consumes (F32, Q8_0, or Q8_K
// for the K-quants Q2_K..Q6_K).
DType vec_dot_type(DType weight_type) noexcept;
// Bytes of one prepared activation row of k elements for this weight type.
size_t prepared_row_bytes(DType weight_type, int64_t k) noexcept;

// Weight rows handed out while a product runs, so that a thread slowed down
// by the machine does not hold the others at the next barrier: chunk c covers
// rows [r0 + c * chunk_rows, r0 + (c + 1) * chunk_rows) of the call's [r0, r1).
// Every thread of a run calls matmul with the same arguments and its own
// `first` chunk (its thread index); then each claims the next unclaimed chunk
// from *next (which starts at the number of threads) until none is left. A
// chunk is done by exactly one thread, and each output row's arithmetic does
// not depend on which thread or chunk computed it when chunk_rows is a
// multiple of the kernels' row tile (32). A thread packs its activations once
// per call, not once per chunk.
struct RowClaims {
    std::atomic<int64_t>* next;
    int64_t chunk_rows;
    int64_t first;
};

// The row tile of the kernels: the rows of W they compute together. Products
// of kGemmMinTokens tokens or more run the GEMM kernels, on panels of 32 rows;
// fewer run the decode kernels, on groups of 4. Work splits (the matmul op's,
// static or claimed) hand out whole tiles, so that every output row gets the
// same arithmetic whichever thread computes it: results are the same bits for
// any thread count.
// Interleaved weights (16 rows together) are computed a whole group at a time.
inline constexpr int64_t kGemmMinTokens = 4;
constexpr int64_t matmul_row_tile(DType weight_type, int64_t n_tokens) noexcept {
    if (n_tokens >= kGemmMinTokens) return 32;
    // kiln's own layouts have ids from 0x10000 on (dtype.h).
    return static_cast<uint32_t>(weight_type) >= 0x10000 ? 16 : 4;
}

struct MatmulKernels {
    std::string_view name;  // "scalar", "avx2", "avx512-vnni", ...

    // Converts one row of k floats into vec_dot_type(weight_type) (a plain copy
    // for float weights, Q8_0 quantization for quantized ones). k must be a
    // multiple of the weight type's block size.
    void (*prepare_row)(DType weight_type, const float* x, int64_t k, void* out);

    // out[t * out_stride + r] = dot(W row r, X row t) for r in [r0, r1) and
    // t in [0, n_tokens). W rows are w_stride bytes apart, prepared X rows are
    // x_stride bytes apart. Thread-safe for disjoint row ranges. With claims,
    // the rows of [r0, r1) this thread computes are claimed as it goes (see
    // RowClaims); with nullptr, all of [r0, r1).
    void (*matmul)(DType weight_type, int64_t k, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                   const void* x, size_t x_stride, int64_t n_tokens, float* out, int64_t out_stride,
                   const RowClaims* claims);

    // The interleaved layouts (quant/interleave.h) this set has fast kernels
    // for, so that the loader should rearrange weights into them: bit
    // (layout - kInterleavedBase) for each (see layout_bits).
    uint64_t interleaved_layouts = 0;

    // The layout this set keeps weights of the plain type in, if it has one.
    std::optional<DType> layout_for(DType plain) const noexcept {
        for (const auto& l : quant::kInterleavedLayouts)
            if (l.plain == plain && (interleaved_layouts >> layout_bit(l.layout) & 1u) != 0) return l.layout;
        return std::nullopt;
    }
    static constexpr uint32_t layout_bit(DType layout) noexcept {
        return static_cast<uint32_t>(layout) - static_cast<uint32_t>(kInterleavedBase);
    }
    static constexpr DType kInterleavedBase = static_cast<DType>(0x10000);
};

// The interleaved_layouts bits of a list of layouts.
constexpr uint64_t layout_bits(std::initializer_list<DType> layouts) noexcept {
    uint64_t bits = 0;
    for (DType t : layouts) bits |= uint64_t{1} << MatmulKernels::layout_bit(t);
    return bits;
}

// The layout a matrix of `rows` rows of `type` should be stored in for `set`:
// its interleaved layout when the set runs one and the rows fill whole groups;
// nullopt to keep the file's.
std::optional<DType> weight_layout(const MatmulKernels& set, DType type, int64_t rows) noexcept;

// Whether kiln can multiply with weights of this type (F32, F16, BF16, the
// legacy quants, IQ4_NL/XS, Q2_K..Q6_K and the interleaved layouts). W rows of
// an interleaved type are addressed as the plain type's rows: w_stride is the
// plain row's bytes, and r0 / r1 are multiples of 16 (matmul_row_tile).
bool matmul_supports(DType weight_type) noexcept;

// The plain scalar reference set (always available).
const MatmulKernels& scalar_matmul_kernels() noexcept;
// The sets of the kernel targets this CPU runs, in the targets' order (the scalar set last).
std::span<const MatmulKernels* const> available_matmul_kernels() noexcept;
// The set of the kernel target in use (KILN_KERNELS, else the best this CPU runs).
const MatmulKernels& active_matmul_kernels() noexcept;

}  // namespace kiln::kernels
