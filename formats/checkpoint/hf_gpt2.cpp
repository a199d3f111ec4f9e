#include "formats/checkpoint/hf_gpt2.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/gpt2_layout.h"
#include "formats/checkpoint/hf_folder.h"
#include "formats/checkpoint/json_limits.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr std::string_view kTanhGelus[] = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};

class Reader {
public:
    Reader(std::filesystem::path folder, const json& config) : folder_(std::move(folder)), config_(config) {
        config_path_ = (folder_ / "config.json").string();
    }

    Checkpoint run() {
        Gpt2Source s;
        s.component = "hf";
        s.path = folder_.string();
        s.conv1d = true;
        read_config(s);
        HfWeights w = open_hf_weights(folder_);
        for (const auto& [name, where] : w.by_name) {
            std::string_view key = name;
            if (key.starts_with("transformer.")) key.remove_prefix(std::string_view("transformer.").size());
            const SafetensorsTensor& t = *where.first;
            SourceTensor st{name, t.type, t.shape, t.data, nullptr, 0};
            if (!s.tensors.emplace(std::string(key), std::move(st)).second)
                fail("hf", "{}: tensor '{}' appears with and without the 'transformer.' prefix", s.path, printable(name));
        }
        Checkpoint out = gpt2_checkpoint(s);
        out.source = w.shards;
        return out;
    }

private:
    uint64_t count(std::initializer_list<std::string_view> keys, std::optional<uint64_t> fallback = {}) const {
        for (std::string_view key : keys) {
            const auto it = config_.find(key);
            if (it == config_.end() || it->is_null()) continue;
            if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 ||
                it->get<uint64_t>() > std::numeric_limits<uint32_t>::max())
                fail("hf", "{}: \"{}\" is not a positive integer below 2^32", config_path_, key);
            return it->get<uint64_t>();
        }
        if (fallback) return *fallback;
        fail("hf", "{}: \"{}\" is missing", config_path_, *keys.begin());
    }

    void read_config(Gpt2Source& s) const {
        arch::Gpt2Params& p = s.hp;
        p.name = folder_.filename().string();
        p.dim = count({"n_embd", "hidden_size"});
        p.n_layers = count({"n_layer", "num_hidden_layers"});
        p.n_heads = count({"n_head", "num_attention_heads"});
        p.n_ctx_train = count({"n_positions", "n_ctx", "max_position_embeddings"});
        p.n_vocab = count({"vocab_size"});
        p.ffn_dim = count({"n_inner"}, 4 * p.dim);
        p.norm_eps = 1e-5;
        if (const auto e = config_.find("layer_norm_epsilon"); e != config_.end() && !e->is_null()) {
            if (!e->is_number() || !(e->get<double>() > 0) || e->get<double>() >= 1)
                fail("hf", "{}: \"layer_norm_epsilon\" is not a number in (0, 1)", config_path_);
            p.norm_eps = e->get<double>();
        }
        if (const auto a = config_.find("activation_function"); a != config_.end() && !a->is_null()) {
            const std::string name = a->is_string() ? a->get<std::string>() : json_excerpt(*a);
            if (std::find(std::begin(kTanhGelus), std::end(kTanhGelus), name) == std::end(kTanhGelus))
                fail("hf", "{}: activation_function '{}' is not the tanh GELU kiln's gpt2 uses (gelu_new)", config_path_,
                     printable(name));
        }
        if (const auto x = config_.find("scale_attn_by_inverse_layer_idx"); x != config_.end() && x->is_boolean() && x->get<bool>())
            fail("hf", "{}: scale_attn_by_inverse_layer_idx is true; kiln scales attention by 1/sqrt(head_dim) only",
                 config_path_);
        const auto tie = config_.find("tie_word_embeddings");
        const bool tied = tie == config_.end() || !tie->is_boolean() || tie->get<bool>();  // HF's default: tied
        s.head_required = !tied;
        s.hyper_text = fmt::format("n_embd {}, n_layer {}, n_head {}, n_positions {}, vocab_size {}, n_inner {}{}",
                                   p.dim, p.n_layers, p.n_heads, p.n_ctx_train, p.n_vocab,
                                   p.ffn_dim, tied ? "" : ", untied lm_head");
    }

    std::filesystem::path folder_;
    const json& config_;
    std::string config_path_;
};

}  // namespace

Checkpoint hf_gpt2_checkpoint(const std::filesystem::path& folder, const nlohmann::json& config) {
    return Reader(folder, config).run();
}

}  // namespace kiln
