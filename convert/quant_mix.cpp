#include "convert/quant_mix.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <numeric>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace kiln::convert {

namespace {

using FT = FileType;

constexpr std::array kMixes = {
    QuantMix{"f32", FT::AllF32, DType::F32},        QuantMix{"f16", FT::MostlyF16, DType::F16},
    QuantMix{"bf16", FT::MostlyBF16, DType::BF16},  QuantMix{"q8_0", FT::MostlyQ8_0, DType::Q8_0},
    QuantMix{"q4_0", FT::MostlyQ4_0, DType::Q4_0},  QuantMix{"q4_1", FT::MostlyQ4_1, DType::Q4_1},
    QuantMix{"q5_0", FT::MostlyQ5_0, DType::Q5_0},  QuantMix{"q5_1", FT::MostlyQ5_1, DType::Q5_1},
    QuantMix{"q2_k", FT::MostlyQ2_K, DType::Q2_K},  QuantMix{"q3_k_s", FT::MostlyQ3_K_S, DType::Q3_K},
    QuantMix{"q3_k_m", FT::MostlyQ3_K_M, DType::Q3_K}, QuantMix{"q3_k_l", FT::MostlyQ3_K_L, DType::Q3_K},
    QuantMix{"q4_k_s", FT::MostlyQ4_K_S, DType::Q4_K}, QuantMix{"q4_k_m", FT::MostlyQ4_K_M, DType::Q4_K},
    QuantMix{"q5_k_s", FT::MostlyQ5_K_S, DType::Q5_K}, QuantMix{"q5_k_m", FT::MostlyQ5_K_M, DType::Q5_K},
    QuantMix{"q6_k", FT::MostlyQ6_K, DType::Q6_K},  QuantMix{"iq4_nl", FT::MostlyIQ4_NL, DType::IQ4_NL},
    QuantMix{"iq4_xs", FT::MostlyIQ4_XS, DType::IQ4_XS},
};

bool same_text(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// ggml_n_dims: trailing dimensions of 1 do not count.
int dims_used(const std::vector<uint64_t>& dims) {
    int n = 1;
    for (size_t i = 1; i < dims.size(); ++i)
        if (dims[i] != 1) n = static_cast<int>(i) + 1;
    return n;
}

// Which tensors llama-quantize quantizes at all (llama_model_quantize_impl).
bool is_quantizable(const MixTensor& t) {
    const std::string_view n = t.name;
    if (!n.ends_with("weight") || dims_used(t.dims) < 2) return false;
    for (std::string_view kept : {"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "time_mix_first.weight",
                                  "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight",
                                  "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight"})
        if (contains(n, kept)) return false;
    return n != "position_embd.weight" && n != "token_types.weight";
}

// llama.cpp's model loader orders tensors by layer ("blk.N.", -1 for none),
// then by name; the per-layer counters below count in that order.
int layer_of(const std::string& name) {
    int layer = -1;
    std::sscanf(name.c_str(), "blk.%d.", &layer);
    return layer;
}

// "Some layers get more bits": the first and last eighth, and every third between.
bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

int64_t block_of(DType t) { return type_traits(t).block_size; }

struct RuleState {
    const QuantMix& mix;
    const ModelFacts& model;
    bool has_output = false;
    int n_attention_wv = 0, i_attention_wv = 0;
    int n_ffn_down = 0, i_ffn_down = 0;
    bool falcon() const { return model.architecture == "falcon"; }
    int n_gqa() const { return model.n_head_kv == 0 ? 0 : static_cast<int>(model.n_head / model.n_head_kv); }
    bool is(FT f) const { return mix.file_type == f; }
    // llama.cpp's LLM_TYPE_70B for Llama: 80 layers with grouped-query attention.
    bool is_70b() const {
        return model.architecture == "llama" && model.n_expert != 8 && model.n_layer == 80 &&
               model.n_head != model.n_head_kv;
    }
    // With more than one expert llama.cpp reads the layer from the name.
    int layer(int counter, const std::string& name) const {
        if (model.n_expert > 1) {
            const int l = layer_of(name);
            if (l < 0 || l >= static_cast<int>(model.n_layer))
                fail("convert", "cannot tell the layer of tensor '{}' (expected blk.N. with N below {})", name,
                     model.n_layer);
            return l;
        }
        return counter;
    }
};

// llama_tensor_get_type for the mixes kiln offers (the IQ1/IQ2/IQ3/TQ mixes,
// which need an importance matrix or types kiln lacks, are left out).
TensorChoice mix_type(RuleState& s, const MixTensor& t) {
    const std::string& name = t.name;
    const auto nx = static_cast<int64_t>(t.dims[0]);
    DType type = s.mix.base;
    if (name == "output.weight" || (!s.has_output && name == "token_embd.weight")) {
        if (s.falcon() || nx % block_of(type) != 0) type = DType::Q8_0;
        else if (type != DType::Q8_0) type = DType::Q6_K;
    } else if (name == "token_embd.weight") {
        // unchanged for every mix kiln offers
    } else if (contains(name, "attn_v.weight")) {
        if (s.is(FT::MostlyQ2_K)) type = s.n_gqa() >= 4 ? DType::Q4_K : DType::Q3_K;
        else if (s.is(FT::MostlyQ3_K_M)) type = s.i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
        else if (s.is(FT::MostlyQ3_K_L)) type = DType::Q5_K;
        else if ((s.is(FT::MostlyIQ4_NL) || s.is(FT::MostlyIQ4_XS)) && s.n_gqa() >= 4) type = DType::Q5_K;
        else if ((s.is(FT::MostlyQ4_K_M) || s.is(FT::MostlyQ5_K_M)) && use_more_bits(s.i_attention_wv, s.n_attention_wv))
            type = DType::Q6_K;
        else if (s.is(FT::MostlyQ4_K_S) && s.i_attention_wv < 4) type = DType::Q5_K;
        if (s.is_70b() && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
        if (s.model.n_expert == 8) type = DType::Q8_0;
        ++s.i_attention_wv;
    } else if (contains(name, "attn_k.weight")) {
        if (s.model.n_expert == 8) type = DType::Q8_0;
    } else if (contains(name, "attn_q.weight")) {
        // unchanged for every mix kiln offers
    } else if (contains(name, "ffn_down")) {
        const int i = s.layer(s.i_ffn_down, name), n = s.n_ffn_down;
        if (s.is(FT::MostlyQ2_K)) type = DType::Q3_K;
        else if (s.is(FT::MostlyQ3_K_M))
            type = i < n / 16 ? DType::Q5_K : !s.falcon() || use_more_bits(i, n) ? DType::Q4_K : DType::Q3_K;
        else if (s.is(FT::MostlyQ3_K_L)) type = s.falcon() ? DType::Q4_K : DType::Q5_K;
        else if (s.is(FT::MostlyQ4_K_M)) {
            if (s.falcon()) type = i < n / 16 ? DType::Q6_K : use_more_bits(i, n) ? DType::Q5_K : DType::Q4_K;
            else if (use_more_bits(i, n)) type = DType::Q6_K;
        } else if (i < n / 8 && (s.is(FT::MostlyIQ4_NL) || s.is(FT::MostlyIQ4_XS))) type = DType::Q5_K;
        else if (s.is(FT::MostlyQ5_K_M) && use_more_bits(i, n)) type = DType::Q6_K;
        else if (s.is(FT::MostlyQ4_K_S) && !s.falcon() && i < n / 8) type = DType::Q5_K;
        ++s.i_ffn_down;
    } else if (contains(name, "attn_output.weight")) {
        if (!s.falcon()) {
            if (s.model.n_expert == 8) {
                for (FT f : {FT::MostlyQ2_K, FT::MostlyQ3_K_S, FT::MostlyQ3_K_M, FT::MostlyIQ4_NL, FT::MostlyQ4_K_S,
                             FT::MostlyQ4_K_M, FT::MostlyIQ4_XS})
                    if (s.is(f)) type = DType::Q5_K;
            } else if (s.is(FT::MostlyQ2_K)) type = DType::Q3_K;
            else if (s.is(FT::MostlyQ3_K_M)) type = DType::Q4_K;
            else if (s.is(FT::MostlyQ3_K_L)) type = DType::Q5_K;
        } else if (s.is(FT::MostlyQ3_K_L)) {
            type = DType::Q4_K;
        }
    } else if (contains(name, "attn_qkv.weight")) {
        if (s.is(FT::MostlyQ3_K_M) || s.is(FT::MostlyQ3_K_L)) type = DType::Q4_K;
        else if (s.is(FT::MostlyQ4_K_M)) type = DType::Q5_K;
        else if (s.is(FT::MostlyQ5_K_M)) type = DType::Q6_K;
    }
    // ffn_gate / ffn_up only matter to the IQ3_XS mix.

    // Rows that are not whole blocks: the nearest type with smaller blocks.
    if (nx % block_of(type) == 0) return {type};
    switch (type) {
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::IQ4_XS: type = DType::IQ4_NL; break;
        case DType::Q4_K: type = DType::Q5_0; break;
        case DType::Q5_K: type = DType::Q5_1; break;
        case DType::Q6_K: type = DType::Q8_0; break;
        default: return {DType::F16, true};
    }
    if (nx % block_of(type) != 0) type = DType::F16;
    return {type};
}

}  // namespace

std::optional<QuantMix> find_quant_mix(std::string_view name) noexcept {
    for (const auto& [alias, full] : {std::pair{"q3_k", "q3_k_m"}, {"q4_k", "q4_k_m"}, {"q5_k", "q5_k_m"}})
        if (same_text(name, alias)) name = full;
    for (const QuantMix& m : kMixes)
        if (same_text(name, m.name)) return m;
    return std::nullopt;
}

std::string quant_mix_names() {
    std::string out;
    for (const QuantMix& m : kMixes) out += fmt::format("{}{}", out.empty() ? "" : ", ", m.name);
    return out;
}

std::vector<TensorChoice> choose_tensor_types(const QuantMix& mix, const ModelFacts& model,
                                              std::span<const MixTensor> tensors) {
    RuleState s{mix, model};
    for (const MixTensor& t : tensors) {
        const std::string_view n = t.name;
        if (contains(n, "attn_v.weight") || contains(n, "attn_qkv.weight") || contains(n, "attn_kv_b.weight"))
            ++s.n_attention_wv;
        else if (n == "output.weight")
            s.has_output = true;
    }
    s.n_ffn_down = static_cast<int>(model.n_layer);

    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
        return la != lb ? la < lb : tensors[a].name < tensors[b].name;
    });
    std::vector<TensorChoice> out(tensors.size());
    for (size_t i : order) {
        const MixTensor& t = tensors[i];
        if (dims_used(t.dims) < 2) out[i] = {DType::F32};
        else if (!is_quantizable(t)) out[i] = {t.type};
        else if (!type_traits(mix.base).quantized) out[i] = {mix.base};
        else out[i] = mix_type(s, t);
    }
    return out;
}

}  // namespace kiln::convert
