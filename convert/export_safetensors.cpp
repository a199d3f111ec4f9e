#include "convert/export_safetensors.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <set>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/arch/gemma_arch.h"
#include "formats/arch/gpt2_arch.h"
#include "formats/arch/llama_arch.h"
#include "formats/arch/phi3_arch.h"
#include "formats/arch/qwen2_arch.h"
#include "formats/checkpoint/hf_llama.h"
#include "formats/checkpoint/hf_tokenizer_writer.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/io/atomic_file.h"
#include "formats/io/atomic_folder.h"

namespace kiln::convert {

namespace {

using Json = nlohmann::ordered_json;

// HF's rotate-half RoPE wants, within each head, the first elements of every
// pair first and the second elements after: HF row h*d + s*(d/2) + p holds
// llama.cpp row h*d + 2p + s. Whole rows move, so any row type works.
std::vector<std::byte> to_rotate_half(std::span<const std::byte> rows, int64_t n_heads, int64_t head_dim,
                                      size_t row_bytes) {
    std::vector<std::byte> out(rows.size());
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t p = 0; p < head_dim / 2; ++p)
            for (int64_t s = 0; s < 2; ++s) {
                const auto from = static_cast<size_t>(h * head_dim + 2 * p + s);
                const auto to = static_cast<size_t>(h * head_dim + s * (head_dim / 2) + p);
                std::memcpy(out.data() + to * row_bytes, rows.data() + from * row_bytes, row_bytes);
            }
    return out;
}

// A float as config.json should show it: its shortest decimal (1e-05, not
// 9.999999747378752e-06), which reads back as the same float.
double shortest(float f) { return std::stod(fmt::format("{}", f)); }

enum class Transform { None, RotateHalf, MinusOne, Transpose };

struct Target {
    std::string hf;
    Transform transform = Transform::None;
};

// What one architecture's export decides: each GGUF tensor's HF name (and
// change), the tensors that go into config.json instead, and config.json.
struct Plan {
    std::map<std::string, Target> targets;
    std::set<std::string> into_config;
    Json config;
    int64_t head_dim = 0;
    std::vector<std::pair<std::string, uint64_t>> zeros;  // HF tensors the file lacks (gpt2's absent biases): F32 zeros
    std::vector<std::string> notes;
};

std::vector<float> floats_of(const CheckpointTensor& t) {
    const auto elements = *checked_element_count(t.dims);
    std::vector<float> out(elements);
    if (type_traits(t.type).to_float == nullptr)
        fail("convert", "cannot export tensor '{}': kiln cannot read {} values", t.name, dtype_name(t.type));
    type_traits(t.type).to_float(t.data.data(), out.data(), static_cast<int64_t>(elements));
    return out;
}

const CheckpointTensor* find(const Checkpoint& c, const std::string& name) {
    for (const CheckpointTensor& t : c.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

// The keys every llama-shaped config.json has.
void base_config(Json& config, const arch::LlamaParams& p, std::string_view architecture, std::string_view model_type) {
    config["architectures"] = {architecture};
    config["model_type"] = model_type;
    config["hidden_size"] = p.dim;
    config["intermediate_size"] = p.ffn_dim;
    config["num_hidden_layers"] = p.n_layers;
    config["num_attention_heads"] = p.n_heads;
    config["num_key_value_heads"] = p.n_kv_heads;
    config["max_position_embeddings"] = p.n_ctx_train;
    config["rms_norm_eps"] = shortest(p.norm_eps);
    config["rope_theta"] = shortest(p.rope_base);
    config["vocab_size"] = p.n_vocab;
}

// llama.* rope.scaling linear / yarn as HF's rope_scaling (null without).
Json rope_scaling_config(const arch::LlamaParams& p) {
    using T = arch::RopeScaling::Type;
    const arch::RopeScaling& r = p.rope_scaling;
    if (r.type == T::None) {
        if (r.attn_factor != 1.0f)
            fail("convert", "cannot export: {} {} without rope scaling has no Hugging Face equivalent",
                 p.key("rope.scaling.attn_factor"), r.attn_factor);
        return nullptr;
    }
    Json s;
    s["rope_type"] = r.type == T::Linear ? "linear" : "yarn";
    s["factor"] = shortest(r.factor);
    if (r.type == T::Yarn) s["original_max_position_embeddings"] = r.original_context;
    if (r.attn_factor != 1.0f)
        fail("convert", "cannot export: {} {} (a YaRN attention factor besides the default) is not one kiln's "
             "Hugging Face reader takes back", p.key("rope.scaling.attn_factor"), r.attn_factor);
    return s;
}

// rope_freqs.weight as rope_scaling llama3: Llama 3's low_freq_factor 1 and
// high_freq_factor 4, the factor its slowest frequencies get, and the
// original context that reproduce the table (within float rounding); refused otherwise.
Json llama3_scaling(const CheckpointTensor& t, const arch::LlamaParams& p) {
    const std::vector<float> want = floats_of(t);
    float factor = 1.0f;
    for (float f : want) factor = std::max(factor, f);
    std::vector<double> candidates = {8192.0};
    const auto dim = static_cast<float>(p.n_rot);
    double max_one = 0, min_full = 1e30;
    for (size_t i = 0; i < want.size(); ++i) {
        const float freq = 1.0f / std::pow(static_cast<float>(p.rope_base), static_cast<float>(2 * i) / dim);
        const double wavelen = 2.0f * std::numbers::pi_v<float> / freq;
        if (want[i] == 1.0f) max_one = std::max(max_one, wavelen);
        else if (want[i] == factor) min_full = std::min(min_full, wavelen);
        else {
            // 1/r = 1/f + s (1 - 1/f), s = original / wavelen - 1 over (4 - 1)
            const double s = (1.0 / want[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
            const double original = std::round((s * 3.0 + 1.0) * wavelen);
            for (double d : {-1.0, 0.0, 1.0}) candidates.push_back(original + d);
        }
    }
    if (min_full < 1e30) candidates.push_back(std::floor(min_full));
    candidates.push_back(std::floor(4 * max_one) + 1);
    for (double original : candidates) {
        if (original < 1) continue;
        // Within float rounding: the table's writer may have computed in double, or its pow rounded differently.
        const std::vector<float> got =
            hf_llama3_rope_factors(factor, 1.0, 4.0, original, static_cast<uint64_t>(p.n_rot), p.rope_base);
        bool same = got.size() == want.size();
        for (size_t i = 0; same && i < got.size(); ++i) same = std::abs(got[i] - want[i]) <= 1e-6f * want[i];
        if (!same) continue;
        Json s;
        s["rope_type"] = "llama3";
        s["factor"] = shortest(factor);
        s["low_freq_factor"] = 1.0;
        s["high_freq_factor"] = 4.0;
        s["original_max_position_embeddings"] = static_cast<int64_t>(original);
        return s;
    }
    fail("convert", "cannot export rope_freqs.weight: it is not Llama 3's table (low_freq_factor 1, high_freq_factor 4) "
         "for any factor and original context, so Hugging Face's rope_scaling cannot say it");
}

// llama and qwen2: the llama descriptor's tensors under hf_llama's names.
Plan llama_plan(const Checkpoint& c, const arch::MetadataView& metadata, bool qwen2) {
    const arch::LlamaParams p = qwen2 ? arch::read_qwen2_params(metadata) : arch::LlamaParams::read(metadata);
    if (p.n_rot != p.head_dim())
        fail("convert", "cannot export: RoPE on {} of {} head dimensions has no Hugging Face equivalent", p.n_rot,
             p.head_dim());
    Plan plan;
    plan.head_dim = p.head_dim();
    const arch::LlamaTensors<std::string> gguf = arch::llama_tensor_names(p), hf = hf_llama_names(p.n_layers);
    const Transform qk = qwen2 ? Transform::None : Transform::RotateHalf;
    plan.targets = {{gguf.token_embd, {hf.token_embd}}, {gguf.output_norm, {hf.output_norm}}, {gguf.output, {hf.output}}};
    // Which optional biases the file has: HF's classes have all of a group or none, in every layer.
    const auto has = [&](const std::string& name) { return find(c, name) != nullptr; };
    int attention = -1, mlp = -1;
    const auto group = [&](int& seen, std::initializer_list<std::string> names, std::string_view what) {
        size_t n = 0;
        for (const std::string& name : names) n += has(name);
        if (n != 0 && n != names.size())
            fail("convert", "cannot export: {} has only some of its {} biases; {} has all or none", *names.begin(),
                 what, qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
        if (seen != -1 && seen != (n != 0))
            fail("convert", "cannot export: {} biases in some layers only ({})", what, *names.begin());
        seen = n != 0;
    };
    for (size_t l = 0; l < gguf.layers.size(); ++l) {
        const auto& g = gguf.layers[l];
        const auto& h = hf.layers[l];
        for (auto member : arch::kLlamaLayerMembers<std::string>) plan.targets[g.*member] = {h.*member};
        plan.targets[g.attn_q].transform = plan.targets[g.attn_k].transform = qk;
        const auto& gb = gguf.biases[l];
        const auto& hb = hf.biases[l];
        plan.targets[gb.attn_q] = {hb.attn_q, qk};
        plan.targets[gb.attn_k] = {hb.attn_k, qk};
        plan.targets[gb.attn_v] = {hb.attn_v};
        if (qwen2) {
            // Qwen2's q/k/v biases are the descriptor's required ones; it has no others.
            for (const std::string& name : {gb.attn_output, gb.ffn_gate, gb.ffn_up, gb.ffn_down})
                if (has(name)) fail("convert", "cannot export tensor '{}': Qwen2ForCausalLM has no such bias", name);
        } else {
            plan.targets[gb.attn_output] = {hb.attn_output};
            plan.targets[gb.ffn_gate] = {hb.ffn_gate};
            plan.targets[gb.ffn_down] = {hb.ffn_down};
            plan.targets[gb.ffn_up] = {hb.ffn_up};
            group(attention, {gb.attn_q, gb.attn_k, gb.attn_v, gb.attn_output}, "attention (q, k, v, o)");
            group(mlp, {gb.ffn_gate, gb.ffn_up, gb.ffn_down}, "MLP (gate, up, down)");
        }
    }
    Json& config = plan.config;
    base_config(config, p, qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM", qwen2 ? "qwen2" : "llama");
    if (p.key_length != 0) config["head_dim"] = p.key_length;
    config["tie_word_embeddings"] = !has(gguf.output);
    config["hidden_act"] = "silu";
    if (qwen2) {
        config["use_sliding_window"] = false;
    } else {
        config["attention_bias"] = attention == 1;
        config["mlp_bias"] = mlp == 1;
    }
    config["rope_scaling"] = rope_scaling_config(p);
    if (const CheckpointTensor* freqs = find(c, gguf.rope_freqs)) {
        if (qwen2) fail("convert", "cannot export rope_freqs.weight: Qwen2ForCausalLM has no llama3 rope scaling");
        if (!config["rope_scaling"].is_null())
            fail("convert", "cannot export: rope_freqs.weight and {} together", p.key("rope.scaling.type"));
        config["rope_scaling"] = llama3_scaling(*freqs, p);
        plan.into_config.insert(gguf.rope_freqs);
    }
    return plan;
}

Plan phi3_plan(const Checkpoint& c, const arch::MetadataView& metadata) {
    const arch::Phi3Params p = arch::Phi3Params::read(metadata);
    const arch::LlamaParams& l = p.llama;
    Plan plan;
    plan.head_dim = l.head_dim();
    plan.targets = {{std::string(arch::kTokenEmbedding), {"model.embed_tokens.weight"}},
                    {"output_norm.weight", {"model.norm.weight"}},
                    {"output.weight", {"lm_head.weight"}}};
    for (int64_t i = 0; i < l.n_layers; ++i) {
        const auto g = [i](std::string_view s) { return fmt::format("blk.{}.{}", i, s); };
        const auto h = [i](std::string_view s) { return fmt::format("model.layers.{}.{}", i, s); };
        plan.targets[g("attn_norm.weight")] = {h("input_layernorm.weight")};
        plan.targets[g("attn_qkv.weight")] = {h("self_attn.qkv_proj.weight")};
        plan.targets[g("attn_output.weight")] = {h("self_attn.o_proj.weight")};
        plan.targets[g("ffn_norm.weight")] = {h("post_attention_layernorm.weight")};
        plan.targets[g("ffn_up.weight")] = {h("mlp.gate_up_proj.weight")};
        plan.targets[g("ffn_down.weight")] = {h("mlp.down_proj.weight")};
    }
    if (l.rope_scaling.type != arch::RopeScaling::Type::None)
        fail("convert", "cannot export: {} is set; Phi3ForCausalLM's rope scaling is LongRoPE's factors only",
             l.key("rope.scaling.type"));
    Json& config = plan.config;
    base_config(config, l, "Phi3ForCausalLM", "phi3");
    config["original_max_position_embeddings"] = l.rope_scaling.original_context;
    config["tie_word_embeddings"] = false;
    config["hidden_act"] = "silu";
    config["sliding_window"] = p.sliding_window == 0 ? Json(nullptr) : Json(p.sliding_window);
    const CheckpointTensor *lf = find(c, "rope_factors_long.weight"), *sf = find(c, "rope_factors_short.weight");
    // HF derives the attention factor from the contexts; the file's must be that one.
    const double scale = static_cast<double>(l.n_ctx_train) / static_cast<double>(l.rope_scaling.original_context);
    const double attn = lf != nullptr && scale > 1.0
                            ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(l.rope_scaling.original_context)))
                            : 1.0;
    if (std::abs(l.rope_scaling.attn_factor - attn) > 1e-6 * attn)
        fail("convert", "cannot export: {} is {} but Hugging Face's Phi3 derives {} from the contexts",
             l.key("rope.scaling.attn_factor"), l.rope_scaling.attn_factor, attn);
    config["rope_scaling"] = nullptr;
    if (lf != nullptr && sf != nullptr) {
        Json s;
        s["type"] = "longrope";
        for (const auto& [key, t] : {std::pair{"long_factor", lf}, std::pair{"short_factor", sf}}) {
            Json list = Json::array();
            for (float f : floats_of(*t)) list.push_back(shortest(f));
            s[key] = list;
        }
        config["rope_scaling"] = s;
        plan.into_config.insert({lf->name, sf->name});
    }
    return plan;
}

Plan gemma_plan(const arch::MetadataView& metadata) {
    const arch::GemmaParams p = arch::GemmaParams::read(metadata);
    const arch::LlamaParams& l = p.llama;
    Plan plan;
    plan.head_dim = l.head_dim();
    plan.targets = {{std::string(arch::kTokenEmbedding), {"model.embed_tokens.weight"}},
                    {"output_norm.weight", {"model.norm.weight", Transform::MinusOne}}};
    for (int64_t i = 0; i < l.n_layers; ++i) {
        const auto g = [i](std::string_view s) { return fmt::format("blk.{}.{}", i, s); };
        const auto h = [i](std::string_view s) { return fmt::format("model.layers.{}.{}", i, s); };
        plan.targets[g("attn_norm.weight")] = {h("input_layernorm.weight"), Transform::MinusOne};
        plan.targets[g("attn_q.weight")] = {h("self_attn.q_proj.weight")};
        plan.targets[g("attn_k.weight")] = {h("self_attn.k_proj.weight")};
        plan.targets[g("attn_v.weight")] = {h("self_attn.v_proj.weight")};
        plan.targets[g("attn_output.weight")] = {h("self_attn.o_proj.weight")};
        plan.targets[g("ffn_gate.weight")] = {h("mlp.gate_proj.weight")};
        plan.targets[g("ffn_up.weight")] = {h("mlp.up_proj.weight")};
        plan.targets[g("ffn_down.weight")] = {h("mlp.down_proj.weight")};
        if (p.gemma2) {
            plan.targets[g("post_attention_norm.weight")] = {h("post_attention_layernorm.weight"), Transform::MinusOne};
            plan.targets[g("ffn_norm.weight")] = {h("pre_feedforward_layernorm.weight"), Transform::MinusOne};
            plan.targets[g("post_ffw_norm.weight")] = {h("post_feedforward_layernorm.weight"), Transform::MinusOne};
        } else {
            plan.targets[g("ffn_norm.weight")] = {h("post_attention_layernorm.weight"), Transform::MinusOne};
        }
    }
    if (l.rope_scaling.type != arch::RopeScaling::Type::None)
        fail("convert", "cannot export: {} is set; Hugging Face's Gemma has plain RoPE", l.key("rope.scaling.type"));
    if (l.n_rot != l.head_dim())
        fail("convert", "cannot export: RoPE on {} of {} head dimensions has no Hugging Face equivalent", l.n_rot,
             l.head_dim());
    Json& config = plan.config;
    base_config(config, l, p.gemma2 ? "Gemma2ForCausalLM" : "GemmaForCausalLM", p.gemma2 ? "gemma2" : "gemma");
    config["head_dim"] = l.head_dim();
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["tie_word_embeddings"] = true;
    if (p.gemma2) {
        // The scale kiln uses, 1/sqrt(query_pre_attn_scalar): the layer-count rule of GemmaParams.
        config["query_pre_attn_scalar"] = l.n_layers == 46 ? l.dim / l.n_heads : l.head_dim();
        config["attn_logit_softcapping"] = shortest(p.attn_softcap);
        config["final_logit_softcapping"] = shortest(p.final_softcap);
        config["sliding_window"] = p.sliding_window;
    }
    return plan;
}

// gpt2 -> GPT2LMHeadModel: Conv1D matrices stored (in, out), so the four
// per-layer matrices are transposed back; a head equal to the token embedding
// (or absent) is tied; absent biases (nanoGPT's bias=False) are zeros, which
// GPT2LMHeadModel cannot do without.
Plan gpt2_plan(const Checkpoint& c, const arch::MetadataView& metadata) {
    const arch::Gpt2Params p = arch::Gpt2Params::read(metadata);
    Plan plan;
    const arch::Gpt2Tensors<arch::TensorSpec> g =
        arch::gpt2_tensors<arch::TensorSpec>(p, [](const arch::TensorSpec& s) { return s; });
    size_t zeros = 0;
    const auto affine = [&](const arch::Affine<arch::TensorSpec>& a, const std::string& hf, bool conv1d) {
        plan.targets[a.weight.name] = {hf + ".weight", conv1d ? Transform::Transpose : Transform::None};
        plan.targets[a.bias.name] = {hf + ".bias"};
        if (find(c, a.bias.name) == nullptr) {
            plan.zeros.emplace_back(hf + ".bias", a.bias.dims.at(0));
            ++zeros;
        }
    };
    plan.targets[g.token_embd.name] = {"transformer.wte.weight"};
    plan.targets[g.position_embd.name] = {"transformer.wpe.weight"};
    for (size_t i = 0; i < g.layers.size(); ++i) {
        const auto& l = g.layers[i];
        const std::string h = fmt::format("transformer.h.{}.", i);
        affine(l.attn_norm, h + "ln_1", false);
        affine(l.attn_qkv, h + "attn.c_attn", true);
        affine(l.attn_output, h + "attn.c_proj", true);
        affine(l.ffn_norm, h + "ln_2", false);
        affine(l.ffn_up, h + "mlp.c_fc", true);
        affine(l.ffn_down, h + "mlp.c_proj", true);
    }
    affine(g.output_norm, "transformer.ln_f", false);
    if (zeros != 0)
        plan.notes.push_back(fmt::format("{} biases the model lacks are written as zeros (GPT2LMHeadModel has every "
                                         "bias); read back, they are zero tensors", zeros));
    // Tied: no head, or the head is the embedding's bytes (kiln and llama.cpp's converters duplicate it).
    const CheckpointTensor* embd = find(c, g.token_embd.name);
    const CheckpointTensor* head = find(c, g.output.name);
    const bool tied = head == nullptr || (embd != nullptr && head->type == embd->type && head->dims == embd->dims &&
                                          std::equal(head->data.begin(), head->data.end(), embd->data.begin(),
                                                     embd->data.end()));
    if (tied) plan.into_config.insert(g.output.name);
    else plan.targets[g.output.name] = {"lm_head.weight"};
    Json& config = plan.config;
    config["activation_function"] = "gelu_new";
    config["architectures"] = {"GPT2LMHeadModel"};
    config["bos_token_id"] = nullptr;  // set from the vocabulary, if any
    config["eos_token_id"] = nullptr;
    config["layer_norm_epsilon"] = shortest(p.norm_eps);
    config["model_type"] = "gpt2";
    config["n_ctx"] = p.n_ctx_train;
    config["n_embd"] = p.dim;
    config["n_head"] = p.n_heads;
    config["n_inner"] = p.ffn_dim == 4 * p.dim ? Json(nullptr) : Json(p.ffn_dim);
    config["n_layer"] = p.n_layers;
    config["n_positions"] = p.n_ctx_train;
    config["tie_word_embeddings"] = tied;
    config["vocab_size"] = p.n_vocab;
    return plan;
}

}  // namespace

void export_hf_folder(const Checkpoint& c, const std::filesystem::path& folder, std::FILE* log) {
    std::vector<arch::EntryMetadata::Tensor> shapes;
    for (const CheckpointTensor& t : c.tensors) shapes.push_back({t.name, t.dims});
    const arch::EntryMetadata metadata("the model", c.metadata, std::move(shapes));
    const std::string architecture = metadata.find("general.architecture") && metadata.find("general.architecture")->as_string()
                                         ? metadata.get_string("general.architecture")
                                         : std::string("(no architecture)");
    Plan plan;
    if (architecture == arch::kLlama) plan = llama_plan(c, metadata, false);
    else if (architecture == arch::kQwen2) plan = llama_plan(c, metadata, true);
    else if (architecture == arch::kPhi3) plan = phi3_plan(c, metadata);
    else if (architecture == arch::kGemma || architecture == arch::kGemma2) plan = gemma_plan(metadata);
    else if (architecture == arch::kGpt2) plan = gpt2_plan(c, metadata);
    else
        fail("convert", "--to safetensors exports llama, qwen2, phi3, gemma, gemma2, gpt2 and transformer models; "
             "this one is '{}'", architecture);
    // The vocabulary's files, decided (or refused) before anything is written.
    const HfTokenizerFiles vocabulary = hf_tokenizer_files(c.metadata, architecture);
    for (const auto& [key, id] : vocabulary.special_ids.items()) plan.config[key] = id;
    if (architecture == arch::kQwen2 && vocabulary.model == "llama")
        plan.notes.push_back("kiln reads a Qwen2ForCausalLM folder's tokenizer.json only: the tokenizer.model written "
                             "here does not come back (give --tokenizer when converting the folder)");

    std::vector<std::vector<std::byte>> owned;
    std::vector<SafetensorsTensor> tensors;
    for (const CheckpointTensor& t : c.tensors) {
        if (plan.into_config.contains(t.name)) continue;
        const auto target = plan.targets.find(t.name);
        if (target == plan.targets.end())
            fail("convert", "cannot export tensor '{}': it is not part of the {} layout", t.name, architecture);
        SafetensorsTensor out;
        out.name = target->second.hf;
        out.shape.assign(t.dims.rbegin(), t.dims.rend());  // ggml order reversed = PyTorch order
        std::span<const std::byte> data = t.data;
        out.type = t.type;
        const bool is_float = t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16;
        if (!is_float || target->second.transform == Transform::MinusOne) {
            std::vector<float> values = floats_of(t);
            if (target->second.transform == Transform::MinusOne)
                for (float& v : values) v -= 1.0f;
            owned.emplace_back(values.size() * sizeof(float));
            std::memcpy(owned.back().data(), values.data(), owned.back().size());
            data = owned.back();
            out.type = DType::F32;
        }
        if (target->second.transform == Transform::Transpose) {
            // ggml [in, out] (rows of `in`) -> Conv1D's (in, out): out.shape is ggml's dims unreversed.
            const size_t in = static_cast<size_t>(t.dims.at(0)), rows = static_cast<size_t>(t.dims.at(1));
            const size_t size = data.size() / (in * rows);
            std::vector<std::byte> transposed(data.size());
            for (size_t r = 0; r < rows; ++r)
                for (size_t i = 0; i < in; ++i)
                    std::memcpy(transposed.data() + (i * rows + r) * size, data.data() + (r * in + i) * size, size);
            owned.push_back(std::move(transposed));
            data = owned.back();
            out.shape = {t.dims[0], t.dims[1]};
        }
        if (target->second.transform == Transform::RotateHalf) {
            const size_t rows = static_cast<size_t>(t.dims.size() == 1 ? t.dims[0] : t.dims.at(1));
            const int64_t heads = static_cast<int64_t>(rows) / plan.head_dim;
            owned.push_back(to_rotate_half(data, heads, plan.head_dim, data.size() / rows));
            data = owned.back();
        }
        out.data = data;
        tensors.push_back(std::move(out));
    }
    for (const auto& [name, length] : plan.zeros) {
        owned.emplace_back(length * sizeof(float));  // zero bytes are 0.0f
        tensors.push_back({name, DType::F32, {length}, owned.back()});
    }

    // Written into a temporary folder renamed into place at the end: a failure
    // (a full disk) leaves neither a folder nor some of its files behind.
    AtomicFolder out(folder);
    write_safetensors(out.path() / "model.safetensors", tensors, {{"format", "pt"}});
    AtomicFile file(out.path() / "config.json");
    const std::string text = plan.config.dump(2) + "\n";
    file.write(std::as_bytes(std::span(text.data(), text.size())));
    file.commit();
    std::string written;
    for (const auto& [name, bytes] : vocabulary.files) {
        AtomicFile f(out.path() / name);
        f.write(std::as_bytes(std::span(bytes.data(), bytes.size())));
        f.commit();
        written += ", " + name;
    }
    if (!vocabulary.special_ids.empty()) {
        // As transformers' save_pretrained writes it for a model config with special ids.
        Json generation;
        generation["_from_model_config"] = true;
        for (const auto& [key, id] : vocabulary.special_ids.items()) generation[key] = id;
        AtomicFile f(out.path() / "generation_config.json");
        const std::string g = generation.dump(2) + "\n";
        f.write(std::as_bytes(std::span(g.data(), g.size())));
        f.commit();
        written += ", generation_config.json";
    }
    out.commit();
    fmt::print(log, "kiln-convert: wrote {} (config.json, model.safetensors: {} tensors{})\n", folder.string(),
               tensors.size(), written);
    for (const std::string& note : plan.notes) fmt::print(log, "note: {}\n", note);
    if (!vocabulary.has_vocabulary)
        fmt::print(log, "note: the model has no vocabulary: no tokenizer files written\n");
    for (const std::string& note : vocabulary.notes) fmt::print(log, "note: {}\n", note);
}

}  // namespace kiln::convert
