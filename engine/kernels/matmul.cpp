// What matmul needs to know about types, the matmul sets of the kernel targets
// (kernel_targets.h chooses the target), and the per-thread scratch memory.
#include "engine/kernels/matmul.h"

#include <array>
#include <memory>
#include <new>
#include <string>

#include "engine/kernels/kernel_table.h"
#include "engine/kernels/kernel_targets.h"
#include "engine/kernels/matmul_impl.h"
#include "engine/quant/interleave.h"

namespace kiln::kernels {

DType vec_dot_type(DType weight_type) noexcept {
    // Quantized weights meet int8 activations so the inner loop is an integer
    // dot product; float weights keep float activations (no precision lost).
    switch (weight_type) {
        case DType::Q8_0:
        case DType::Q8_0_R16:
        case DType::Q4_0:
        case DType::Q4_0_R16:
        case DType::Q5_0:
        case DType::IQ4_NL: return DType::Q8_0;
        case DType::Q4_1:
        case DType::Q5_1: return DType::Q8_1;
        case DType::IQ4_XS:
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q4_K_R16:
        case DType::Q5_K:
        case DType::Q5_K_R16:
        case DType::Q6_K:
        case DType::Q6_K_R16:
        case DType::Q6_K_R16B: return DType::Q8_K;
        default: return DType::F32;
    }
}

size_t prepared_row_bytes(DType weight_type, int64_t k) noexcept {
    const DType t = vec_dot_type(weight_type);
    const TypeTraits& traits = type_traits(t);
    return static_cast<size_t>(k / traits.block_size) * traits.block_bytes;
}

bool matmul_supports(DType weight_type) noexcept {
    switch (weight_type) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q8_0_R16:
        case DType::Q4_0:
        case DType::Q4_0_R16:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::IQ4_NL:
        case DType::IQ4_XS:
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q4_K_R16:
        case DType::Q5_K:
        case DType::Q5_K_R16:
        case DType::Q6_K:
        case DType::Q6_K_R16:
        case DType::Q6_K_R16B: return true;
        default: return false;
    }
}

std::optional<DType> weight_layout(const MatmulKernels& set, DType type, int64_t rows) noexcept {
    if (rows % quant::kInterleaveRows != 0) return std::nullopt;
    return set.layout_for(type);
}

namespace {

// The matmul sets of the kernel targets this CPU runs, best first, each once.
struct Registry {
    std::array<const MatmulKernels*, 8> sets{};
    size_t count = 0;
};

const Registry& registry() noexcept {
    static const Registry r = [] {
        Registry out;
        for (std::string_view name : available_kernel_targets()) {
            const std::string target(name);
            const MatmulKernels* set = detail::select_kernel_target(target.c_str(), nullptr)->matmul_set();
            bool seen = false;
            for (size_t i = 0; i < out.count; ++i) seen |= out.sets[i] == set;
            if (!seen && out.count < out.sets.size()) out.sets[out.count++] = set;
        }
        return out;
    }();
    return r;
}

}  // namespace

std::span<const MatmulKernels* const> available_matmul_kernels() noexcept {
    const Registry& r = registry();
    return {r.sets.data(), r.count};
}

const MatmulKernels& active_matmul_kernels() noexcept {
    // Chosen once, with the kernel target (KILN_KERNELS).
    static const MatmulKernels& active = *detail::active_kernel_table().matmul_set();
    return active;
}

namespace detail {

std::byte* thread_scratch(size_t bytes) noexcept {
    struct AlignedFree {
        void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
    };
    thread_local std::unique_ptr<std::byte[], AlignedFree> buffer;
    thread_local size_t capacity = 0;
    if (bytes == 0) bytes = 64;  // a valid pointer even for empty operands
    if (bytes > capacity) {
        // Grow geometrically so a sequence of slightly larger shapes allocates rarely.
        const size_t want = round_up(bytes > capacity * 2 ? bytes : capacity * 2, 4096);
        buffer.reset();
        capacity = 0;
        auto* p = static_cast<std::byte*>(::operator new[](want, std::align_val_t{64}, std::nothrow));
        if (p == nullptr) return nullptr;
        buffer.reset(p);
        capacity = want;
    }
    return buffer.get();
}

}  // namespace detail
}  // namespace kiln::kernels
