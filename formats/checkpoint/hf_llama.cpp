#include "formats/checkpoint/hf_llama.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/hf_folder.h"
#include "formats/arch/llama_arch.h"
#include "formats/checkpoint/safetensors.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr std::string_view kArchitecture = "LlamaForCausalLM";
// llama.cpp's RoPE base when llama.rope.freq_base is absent.
constexpr double kDefaultRopeTheta = 10000.0;

constexpr auto& kLayerMembers = arch::kLlamaLayerMembers<std::string>;

std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

class Mapper {
public:
    explicit Mapper(std::filesystem::path folder) : folder_(std::move(folder)) {}

    Checkpoint run() {
        read_config();
        open_weights();
        check_tensor_names();

        Checkpoint out;
        const arch::LlamaParams p = params();
        out.metadata = p.metadata();
        const arch::LlamaTensors<std::string> names = arch::llama_tensor_names(p);
        const arch::LlamaTensors<std::string> hf = hf_llama_names(p.n_layers);
        add(out, hf.token_embd, names.token_embd, {vocab_, dim_});
        add(out, hf.output_norm, names.output_norm, {dim_});
        if (!tied_) add(out, hf.output, names.output, {vocab_, dim_});
        const uint64_t q = n_heads_ * head_dim_, kv = n_kv_heads_ * head_dim_;
        const std::vector<uint64_t> expected[] = {{q, dim_},       {kv, dim_},      {kv, dim_},      {dim_, q},
                                                  {dim_},          {hidden_, dim_}, {dim_, hidden_}, {hidden_, dim_},
                                                  {dim_}};
        for (uint64_t layer = 0; layer < n_layers_; ++layer) {
            for (size_t i = 0; i < std::size(kLayerMembers); ++i) {
                add(out, hf.layers[layer].*kLayerMembers[i], names.layers[layer].*kLayerMembers[i], expected[i]);
                if (i == 0) unpermute(out, n_heads_);
                if (i == 1) unpermute(out, n_kv_heads_);
            }
        }
        out.source = shards_;
        return out;
    }

private:
    uint64_t get_count(const json& config, std::string_view key, std::optional<uint64_t> fallback = {}) const {
        const auto it = config.find(key);
        if (it == config.end() || it->is_null()) {
            if (fallback) return *fallback;
            fail("hf", "{}: \"{}\" is missing", config_path_.string(), key);
        }
        if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 ||
            it->get<uint64_t>() > std::numeric_limits<uint32_t>::max())
            fail("hf", "{}: \"{}\" is not a positive integer below 2^32", config_path_.string(), key);
        return it->get<uint64_t>();
    }

    double get_number(const json& config, std::string_view key, double fallback) const {
        const auto it = config.find(key);
        if (it == config.end() || it->is_null()) return fallback;
        if (!it->is_number() || !(it->get<double>() > 0))
            fail("hf", "{}: \"{}\" is not a positive number", config_path_.string(), key);
        return it->get<double>();
    }

    void read_config() {
        config_path_ = folder_ / "config.json";
        const json config = read_hf_json(config_path_);
        if (!config.is_object()) fail("hf", "{}: not a JSON object", config_path_.string());
        const auto arch = config.find("architectures");
        std::vector<std::string> archs;
        if (arch != config.end() && arch->is_array())
            for (const json& a : *arch)
                if (a.is_string()) archs.push_back(a.get<std::string>());
        if (archs.size() != 1 || archs[0] != kArchitecture)
            fail("hf", "{}: architectures is [{}]; kiln supports only [\"{}\"]", config_path_.string(),
                 printable(fmt::format("{}", fmt::join(archs, ", "))), kArchitecture);
        if (const auto s = config.find("rope_scaling"); s != config.end() && !s->is_null())
            fail("hf", "{}: rope_scaling is set; kiln supports only plain RoPE", config_path_.string());

        dim_ = get_count(config, "hidden_size");
        n_layers_ = get_count(config, "num_hidden_layers");
        n_heads_ = get_count(config, "num_attention_heads");
        n_kv_heads_ = get_count(config, "num_key_value_heads", n_heads_);  // HF's default: no GQA
        hidden_ = get_count(config, "intermediate_size");
        vocab_ = get_count(config, "vocab_size");
        context_ = get_count(config, "max_position_embeddings");
        norm_eps_ = get_number(config, "rms_norm_eps", 1e-6);
        rope_theta_ = get_number(config, "rope_theta", kDefaultRopeTheta);
        if (dim_ % n_heads_ != 0)
            fail("hf", "{}: hidden_size {} is not a multiple of num_attention_heads {}", config_path_.string(), dim_,
                 n_heads_);
        head_dim_ = dim_ / n_heads_;
        if (head_dim_ % 2 != 0) fail("hf", "{}: the head size {} is odd; RoPE needs pairs", config_path_.string(), head_dim_);
        if (const auto hd = config.find("head_dim"); hd != config.end() && !hd->is_null() && *hd != head_dim_)
            fail("hf", "{}: head_dim {} differs from hidden_size / num_attention_heads = {}", config_path_.string(),
                 hd->dump(), head_dim_);
        if (n_heads_ % n_kv_heads_ != 0)
            fail("hf", "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", config_path_.string(),
                 n_heads_, n_kv_heads_);
        const auto tie = config.find("tie_word_embeddings");
        tied_ = tie != config.end() && tie->is_boolean() && tie->get<bool>();
    }

    void open_weights() {
        HfWeights w = open_hf_weights(folder_);
        shards_ = std::move(w.shards);
        by_name_ = std::move(w.by_name);
    }

    void check_tensor_names() const {
        const arch::LlamaTensors<std::string> hf = hf_llama_names(static_cast<int64_t>(n_layers_));
        std::set<std::string> known = {hf.token_embd, hf.output_norm, hf.output};
        for (const arch::LlamaLayerTensors<std::string>& layer : hf.layers)
            for (auto member : kLayerMembers) known.insert(layer.*member);
        for (const auto& [name, where] : by_name_) {
            // Older transformers saved the RoPE frequency table; it is recomputed.
            if (known.contains(name) || name.ends_with(".self_attn.rotary_emb.inv_freq")) continue;
            fail("hf", "{}: tensor '{}' is not part of a LlamaForCausalLM with {} layers", where.second->path().string(),
                 printable(name), n_layers_);
        }
    }

    void add(Checkpoint& out, const std::string& hf, std::string gguf, const std::vector<uint64_t>& expected) const {
        const auto it = by_name_.find(hf);
        if (it == by_name_.end()) fail("hf", "{}: tensor '{}' is missing", folder_.string(), hf);
        const SafetensorsTensor& t = *it->second.first;
        if (t.shape != expected)
            fail("hf", "{}: tensor '{}' has shape {} but config.json ({}) expects {}", it->second.second->path().string(),
                 printable(hf), shape_text(t.shape), hyper_text(), shape_text(expected));
        CheckpointTensor ct{std::move(gguf), t.type, {}, t.data};
        for (size_t d = t.shape.size(); d-- > 0;) ct.dims.push_back(t.shape[d]);
        out.tensors.push_back(std::move(ct));
    }

    // The last tensor added is (n_head * head_dim, dim), HF's rotate-half row
    // order. Within a head, HF row j*hd/2 + i holds Meta's row 2i + j; whole rows
    // move, so the dtype does not matter.
    void unpermute(Checkpoint& out, uint64_t n_head) const {
        CheckpointTensor& t = out.tensors.back();
        const size_t row_bytes = t.data.size() / (n_head * head_dim_);
        const uint64_t half = head_dim_ / 2;
        std::vector<std::byte> buf(t.data.size());
        for (uint64_t h = 0; h < n_head; ++h)
            for (uint64_t i = 0; i < half; ++i)
                for (uint64_t j = 0; j < 2; ++j) {
                    const uint64_t from = h * head_dim_ + j * half + i, to = h * head_dim_ + 2 * i + j;
                    std::memcpy(buf.data() + to * row_bytes, t.data.data() + from * row_bytes, row_bytes);
                }
        t.data = out.own(std::move(buf));
    }

    std::string hyper_text() const {
        return fmt::format("hidden_size {}, num_hidden_layers {}, num_attention_heads {}, num_key_value_heads {}, "
                           "intermediate_size {}, vocab_size {}",
                           dim_, n_layers_, n_heads_, n_kv_heads_, hidden_, vocab_);
    }

    arch::LlamaParams params() const {
        const auto i = [](uint64_t v) { return static_cast<int64_t>(v); };
        arch::LlamaParams p;
        p.name = folder_.filename().string();
        p.n_vocab = i(vocab_);
        p.n_ctx_train = i(context_);
        p.dim = i(dim_);
        p.n_layers = i(n_layers_);
        p.n_heads = i(n_heads_);
        p.n_kv_heads = i(n_kv_heads_);
        p.ffn_dim = i(hidden_);
        p.n_rot = i(head_dim_);
        p.norm_eps = static_cast<float>(norm_eps_);
        p.rope_base = static_cast<float>(rope_theta_);
        return p;
    }

    std::filesystem::path folder_;
    std::filesystem::path config_path_;
    std::shared_ptr<HfWeights::Files> shards_;
    std::map<std::string, std::pair<const SafetensorsTensor*, const SafetensorsFile*>> by_name_;
    uint64_t dim_ = 0, n_layers_ = 0, n_heads_ = 0, n_kv_heads_ = 0, head_dim_ = 0, hidden_ = 0, vocab_ = 0;
    uint64_t context_ = 0;
    double norm_eps_ = 0, rope_theta_ = 0;
    bool tied_ = false;
};

}  // namespace

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
    }
    return t;
}

Checkpoint hf_llama_checkpoint(const std::filesystem::path& folder) {
    // A trailing '/' would leave filename() (general.name) empty.
    return Mapper(folder.has_filename() ? folder : folder.parent_path()).run();
}

}  // namespace kiln
