#include "formats/checkpoint/hf_llama.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/hf_common.h"
#include "formats/checkpoint/json_limits.h"

namespace kiln {
namespace {

using nlohmann::json;

// llama.cpp's RoPE base when <arch>.rope.freq_base is absent.
constexpr double kDefaultRopeTheta = 10000.0;

constexpr auto& kLayerMembers = arch::kLlamaLayerMembers<std::string>;

// The rope_scaling object's number `key` (positive), or `fallback`.
double scaling_number(const HfConfig& c, const json& s, std::string_view key, std::optional<double> fallback) {
    const auto it = s.find(key);
    if (it == s.end() || it->is_null()) {
        if (fallback) return *fallback;
        fail("hf", "{}: rope_scaling.{} is missing", c.where(), key);
    }
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
        fail("hf", "{}: rope_scaling.{} is not a positive number", c.where(), key);
    return it->get<double>();
}

// Llama 3.1's per-frequency divisors, as convert_hf_to_gguf's
// LlamaModel.generate_extra_tensors computes them (in float32, as its torch
// code does): 1 for wavelengths under original/high_freq_factor, `factor` over
// original/low_freq_factor, a smooth blend between.
std::vector<float> llama3_factors(const HfConfig& c, const json& s, uint64_t head_dim, double theta) {
    const auto factor = static_cast<float>(scaling_number(c, s, "factor", 8.0));
    const auto low = static_cast<float>(scaling_number(c, s, "low_freq_factor", 1.0));
    const auto high = static_cast<float>(scaling_number(c, s, "high_freq_factor", 4.0));
    // Hugging Face keeps original_max_position_embeddings inside rope_scaling
    // (modeling_rope_utils reads it there); the converter of this llama.cpp
    // version looks for it beside max_position_embeddings. Both are read, the
    // rope_scaling one first; 8192 (both's default) without either.
    double original = 8192.0;
    if (const auto it = s.find("original_max_position_embeddings"); it != s.end() && !it->is_null())
        original = scaling_number(c, s, "original_max_position_embeddings", {});
    else if (c.find("original_max_position_embeddings") != nullptr)
        original = static_cast<double>(c.count("original_max_position_embeddings"));
    if (low == high) fail("hf", "{}: rope_scaling's low_freq_factor and high_freq_factor are equal", c.where());
    return hf_llama3_rope_factors(factor, low, high, original, head_dim, theta);
}

class Mapper {
public:
    Mapper(const HfConfig& config, HfLlamaKind kind) : c_(config), kind_(kind), source_(config.folder()) {}

    Checkpoint run() {
        read_config();
        source_.check_layers(n_layers_, "num_hidden_layers");
        Checkpoint out;
        const arch::LlamaParams p = params();
        out.metadata = p.metadata();
        // convert_hf_to_gguf writes rope.dimension_count for llama only (LlamaModel).
        if (kind_ == HfLlamaKind::Qwen2) hf_drop_metadata(out, p.key("rope.dimension_count"));
        const arch::LlamaTensors<std::string> names = arch::llama_tensor_names(p);
        const arch::LlamaTensors<std::string> hf = hf_llama_names(p.n_layers);
        const std::string hyper = hyper_text();
        source_.take(out, hf.token_embd, names.token_embd, {vocab_, dim_}, hyper);
        source_.take(out, hf.output_norm, names.output_norm, {dim_}, hyper);
        if (tied_) source_.drop(hf.output);  // some exports keep the tied copy; llama.cpp reuses token_embd
        else source_.take(out, hf.output, names.output, {vocab_, dim_}, hyper);
        const uint64_t q = n_heads_ * head_dim_, kv = n_kv_heads_ * head_dim_;
        const std::vector<uint64_t> expected[] = {{q, dim_},       {kv, dim_},      {kv, dim_},      {dim_, q},
                                                  {dim_},          {hidden_, dim_}, {dim_, hidden_}, {hidden_, dim_},
                                                  {dim_}};
        const bool permute = kind_ == HfLlamaKind::Llama;
        for (uint64_t layer = 0; layer < n_layers_; ++layer) {
            for (size_t i = 0; i < std::size(kLayerMembers); ++i) {
                CheckpointTensor& t =
                    source_.take(out, hf.layers[layer].*kLayerMembers[i], names.layers[layer].*kLayerMembers[i], expected[i], hyper);
                if (permute && i == 0) hf_unpermute_rows(out, t, n_heads_, head_dim_);
                if (permute && i == 1) hf_unpermute_rows(out, t, n_kv_heads_, head_dim_);
            }
            const arch::LlamaLayerBiases<std::string>&gb = names.biases[layer], &hb = hf.biases[layer];
            if (qkv_bias_) {
                CheckpointTensor& bq = source_.take(out, hb.attn_q, gb.attn_q, {q}, hyper);
                if (permute) hf_unpermute_rows(out, bq, n_heads_, head_dim_);
                CheckpointTensor& bk = source_.take(out, hb.attn_k, gb.attn_k, {kv}, hyper);
                if (permute) hf_unpermute_rows(out, bk, n_kv_heads_, head_dim_);
                source_.take(out, hb.attn_v, gb.attn_v, {kv}, hyper);
            }
            if (output_bias_) source_.take(out, hb.attn_output, gb.attn_output, {dim_}, hyper);
            if (mlp_bias_) {
                source_.take(out, hb.ffn_gate, gb.ffn_gate, {hidden_}, hyper);
                source_.take(out, hb.ffn_down, gb.ffn_down, {dim_}, hyper);
                source_.take(out, hb.ffn_up, gb.ffn_up, {hidden_}, hyper);
            }
        }
        // Llama 3.1's factors (head_dim / 2 of them) only now that the
        // tensors have confirmed head_dim; written first, as llama.cpp does.
        if (!llama3_scaling_.is_null()) {
            const std::vector<float> factors = llama3_factors(c_, llama3_scaling_, head_dim_, rope_theta_);
            std::vector<std::byte> bytes(factors.size() * sizeof(float));
            std::memcpy(bytes.data(), factors.data(), bytes.size());
            out.tensors.insert(out.tensors.begin(), CheckpointTensor{names.rope_freqs, DType::F32, {factors.size()},
                                                                     out.own(std::move(bytes))});
        }
        source_.refuse_leftovers(
            kind_ == HfLlamaKind::Qwen2
                ? fmt::format("a {} with {} layers", architecture_, n_layers_)
                : fmt::format("a {} with {} layers (attention_bias {}, mlp_bias {})", architecture_, n_layers_,
                              output_bias_, mlp_bias_));
        out.source = source_.shards();
        return out;
    }

private:
    void read_config() {
        architecture_ = c_.architecture().empty() ? c_.text("model_type", "?") : c_.architecture();
        dim_ = c_.count("hidden_size");
        n_layers_ = c_.count("num_hidden_layers");
        n_heads_ = c_.count("num_attention_heads");
        n_kv_heads_ = c_.count("num_key_value_heads", n_heads_);  // HF's default: no GQA
        hidden_ = c_.count("intermediate_size");
        vocab_ = c_.count("vocab_size");
        context_ = c_.count("max_position_embeddings");
        norm_eps_ = c_.number("rms_norm_eps", 1e-6);
        rope_theta_ = c_.number("rope_theta", kDefaultRopeTheta);
        if (c_.find("head_dim") != nullptr) {
            head_dim_ = c_.count("head_dim");
        } else {
            if (dim_ % n_heads_ != 0)
                fail("hf", "{}: hidden_size {} is not a multiple of num_attention_heads {} (and head_dim is not set)",
                     c_.where(), dim_, n_heads_);
            head_dim_ = dim_ / n_heads_;
        }
        if (head_dim_ % 2 != 0) fail("hf", "{}: the head size {} is odd; RoPE needs pairs", c_.where(), head_dim_);
        if (n_heads_ % n_kv_heads_ != 0)
            fail("hf", "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", c_.where(), n_heads_,
                 n_kv_heads_);
        tied_ = c_.flag("tie_word_embeddings", false);
        if (kind_ == HfLlamaKind::Qwen2) {
            // Qwen2 always has q/k/v biases and no others.
            qkv_bias_ = true;
            // HF's Qwen2 windows layers from max_window_layers on when this is
            // set; llama.cpp's converter ignores it, so its file would attend
            // differently: refused.
            if (c_.flag("use_sliding_window", false))
                fail("hf", "{}: use_sliding_window is true: Qwen2's per-layer sliding window has no qwen2 GGUF key",
                     c_.where());
        } else {
            qkv_bias_ = output_bias_ = c_.flag("attention_bias", false);
            mlp_bias_ = c_.flag("mlp_bias", false);
            // MistralForCausalLM's config carries sliding_window (4096 in
            // Mistral 7B v0.1, null later). llama.cpp's converter ignores it
            // (it registers Mistral as LlamaModel) and its llama attends over
            // the whole context; kiln does as llama.cpp does.
        }
        read_rope_scaling();
    }

    void read_rope_scaling() {
        const std::string type = hf_rope_scaling_type(c_);
        if (type.empty() || type == "default") return;
        const json& s = *c_.find("rope_scaling");
        if (type == "linear") {
            scaling_.type = arch::RopeScaling::Type::Linear;
            scaling_.factor = static_cast<float>(scaling_number(c_, s, "factor", {}));
        } else if (type == "yarn") {
            scaling_.type = arch::RopeScaling::Type::Yarn;
            scaling_.factor = static_cast<float>(scaling_number(c_, s, "factor", {}));
            scaling_.original_context = static_cast<int64_t>(
                scaling_number(c_, s, "original_max_position_embeddings", static_cast<double>(context_)));
            // kiln's (llama.cpp's) YaRN has HF's defaults for these; other values are refused by name.
            const std::pair<const char*, double> defaults[] = {{"beta_fast", 32.0}, {"beta_slow", 1.0}};
            for (const auto& [key, value] : defaults)
                if (scaling_number(c_, s, key, value) != value)
                    fail("hf", "{}: rope_scaling.{} is {}; kiln's YaRN uses {}", c_.where(), key, json_excerpt(s[key]), value);
            for (const char* key : {"attention_factor", "mscale", "mscale_all_dim"})
                if (const auto it = s.find(key); it != s.end() && !it->is_null())
                    fail("hf", "{}: rope_scaling.{} is set; kiln converts YaRN with its default attention factor only",
                         c_.where(), key);
        } else if (type == "llama3" && kind_ == HfLlamaKind::Llama) {
            llama3_scaling_ = s;  // checked here, used once the tensors confirm head_dim
            llama3_factors(c_, s, 2, rope_theta_);
        } else {
            fail("hf", "{}: rope_scaling type '{}' is not one kiln converts for {} (linear, yarn{})", c_.where(),
                 printable(type), architecture_, kind_ == HfLlamaKind::Llama ? ", llama3" : "");
        }
    }

    std::string hyper_text() const {
        return fmt::format("hidden_size {}, num_hidden_layers {}, num_attention_heads {}, num_key_value_heads {}, "
                           "intermediate_size {}, vocab_size {}",
                           dim_, n_layers_, n_heads_, n_kv_heads_, hidden_, vocab_);
    }

    arch::LlamaParams params() const {
        const auto i = [](uint64_t v) { return static_cast<int64_t>(v); };
        arch::LlamaParams p;
        if (kind_ == HfLlamaKind::Qwen2) p.arch = "qwen2";
        p.name = c_.folder().filename().string();
        p.n_vocab = i(vocab_);
        p.n_ctx_train = i(context_);
        p.dim = i(dim_);
        p.n_layers = i(n_layers_);
        p.n_heads = i(n_heads_);
        p.n_kv_heads = i(n_kv_heads_);
        p.ffn_dim = i(hidden_);
        p.n_rot = i(head_dim_);
        if (head_dim_ * n_heads_ != dim_) p.key_length = i(head_dim_);
        p.norm_eps = static_cast<float>(norm_eps_);
        p.rope_base = static_cast<float>(rope_theta_);
        p.rope_scaling = scaling_;
        p.qkv_bias = kind_ == HfLlamaKind::Qwen2;
        return p;
    }

    const HfConfig& c_;
    HfLlamaKind kind_;
    HfTensorSource source_;
    std::string architecture_;
    uint64_t dim_ = 0, n_layers_ = 0, n_heads_ = 0, n_kv_heads_ = 0, head_dim_ = 0, hidden_ = 0, vocab_ = 0;
    uint64_t context_ = 0;
    double norm_eps_ = 0, rope_theta_ = 0;
    bool tied_ = false, qkv_bias_ = false, output_bias_ = false, mlp_bias_ = false;
    arch::RopeScaling scaling_;
    json llama3_scaling_;
};

}  // namespace

std::vector<float> hf_llama3_rope_factors(double factor_d, double low_d, double high_d, double original,
                                          uint64_t head_dim, double theta) {
    const auto factor = static_cast<float>(factor_d), low = static_cast<float>(low_d), high = static_cast<float>(high_d);
    const auto old_context = static_cast<float>(original);
    const float low_wavelen = old_context / low, high_wavelen = old_context / high;
    const auto base = static_cast<float>(theta);
    const auto dim = static_cast<float>(head_dim);
    std::vector<float> out;
    for (uint64_t i = 0; i < head_dim; i += 2) {
        const float freq = 1.0f / std::pow(base, static_cast<float>(i) / dim);
        const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
        if (wavelen < high_wavelen) {
            out.push_back(1.0f);
        } else if (wavelen > low_wavelen) {
            out.push_back(factor);
        } else {
            const float smooth = (old_context / wavelen - low) / (high - low);
            out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
        }
    }
    return out;
}

arch::LlamaTensors<std::string> hf_llama_names(int64_t n_layers) {
    arch::LlamaTensors<std::string> t;
    t.token_embd = "model.embed_tokens.weight";
    t.output_norm = "model.norm.weight";
    t.output = "lm_head.weight";
    for (int64_t i = 0; i < n_layers; ++i) {
        const auto name = [i](std::string_view part) { return fmt::format("model.layers.{}.{}", i, part); };
        arch::LlamaLayerTensors<std::string> l;
        l.attn_q = name("self_attn.q_proj.weight");
        l.attn_k = name("self_attn.k_proj.weight");
        l.attn_v = name("self_attn.v_proj.weight");
        l.attn_output = name("self_attn.o_proj.weight");
        l.attn_norm = name("input_layernorm.weight");
        l.ffn_gate = name("mlp.gate_proj.weight");
        l.ffn_down = name("mlp.down_proj.weight");
        l.ffn_up = name("mlp.up_proj.weight");
        l.ffn_norm = name("post_attention_layernorm.weight");
        t.layers.push_back(std::move(l));
        arch::LlamaLayerBiases<std::string> b;
        b.attn_q = name("self_attn.q_proj.bias");
        b.attn_k = name("self_attn.k_proj.bias");
        b.attn_v = name("self_attn.v_proj.bias");
        b.attn_output = name("self_attn.o_proj.bias");
        b.ffn_gate = name("mlp.gate_proj.bias");
        b.ffn_down = name("mlp.down_proj.bias");
        b.ffn_up = name("mlp.up_proj.bias");
        t.biases.push_back(std::move(b));
    }
    return t;
}

namespace {
std::string c_model_type(const HfConfig& c) {
    const json* m = c.find("model_type");
    return m != nullptr && m->is_string() ? m->get<std::string>() : "";
}
}  // namespace

Checkpoint hf_llama_family_checkpoint(const HfConfig& config, HfLlamaKind kind) { return Mapper(config, kind).run(); }

Checkpoint hf_llama_checkpoint(const std::filesystem::path& given) {
    // A trailing '/' would leave filename() (general.name) empty.
    const std::filesystem::path folder = given.has_filename() ? given : given.parent_path();
    const HfConfig config(folder, read_hf_json(folder / "config.json"));
    const std::string a = config.architecture();
    const std::string model_type = c_model_type(config);
    if (a != "LlamaForCausalLM" && a != "MistralForCausalLM" &&
        !(a.empty() && (model_type == "llama" || model_type == "mistral"))) {
        std::vector<std::string> archs;
        if (const json* j = config.find("architectures"); j != nullptr && j->is_array())
            for (const json& item : *j)
                if (item.is_string()) archs.push_back(item.get<std::string>());
        fail("hf", "{}: architectures is [{}]; this reader takes [\"LlamaForCausalLM\"] or [\"MistralForCausalLM\"]",
             config.where(), printable(fmt::format("{}", fmt::join(archs, ", "))));
    }
    return Mapper(config, HfLlamaKind::Llama).run();
}

}  // namespace kiln
