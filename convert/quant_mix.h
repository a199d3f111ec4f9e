#pragma once
// The quantization mixes of llama-quantize (q4_k_m, q3_k_s, q8_0, ...) and its
// rule for the type of each tensor in a mix without an importance matrix:
// which tensors are quantized at all, which get more bits (output.weight,
// attn_v and ffn_down of some layers), and the fallback type for rows that are
// not whole blocks. Follows llama_tensor_get_type and llama_model_quantize_impl
// in llama.cpp c392e509 (src/llama-quant.cpp), so that a kiln file of a mix has
// the same tensor types as llama-quantize's.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/quant/file_type.h"

namespace kiln::convert {

struct QuantMix {
    std::string_view name;  // as kiln-convert --type takes it: "q4_k_m"
    FileType file_type;     // written as general.file_type
    DType base;             // the type of most matrices
};

// The mix called `name` (case-insensitive; q3_k, q4_k and q5_k mean their _m
// mixes, as in llama-quantize); nullopt when kiln knows no such mix.
std::optional<QuantMix> find_quant_mix(std::string_view name) noexcept;
// Every mix name kiln-convert --type takes, for messages.
std::string quant_mix_names();

// What the rule needs to know about the model.
struct ModelFacts {
    std::string architecture;  // general.architecture
    uint32_t n_layer = 0;      // <arch>.block_count
    uint32_t n_head = 0;       // <arch>.attention.head_count
    uint32_t n_head_kv = 0;    // <arch>.attention.head_count_kv (n_head when absent)
    uint32_t n_expert = 0;     // <arch>.expert_count
};

struct MixTensor {
    std::string name;
    DType type;                   // the input's type
    std::vector<uint64_t> dims;  // ggml order: dims[0] is the row length
};

struct TensorChoice {
    DType type;
    // llama-quantize stops with "Unsupported tensor size" here (the rows are not
    // whole blocks of the chosen type and it has no smaller type for it); kiln
    // writes F16 instead and says so.
    bool llama_refuses = false;
};

// The type of every tensor (same order as `tensors`) in `mix`. Tensors that are
// not quantized keep their type, except 1-D ones, which kiln always writes as F32
// (llama.cpp's converters write them as F32, so its files are unchanged by this).
std::vector<TensorChoice> choose_tensor_types(const QuantMix& mix, const ModelFacts& model,
                                              std::span<const MixTensor> tensors);

}  // namespace kiln::convert
