#include "convert/export_safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/io/atomic_file.h"

namespace kiln::convert {

namespace {

const GgufValue* find_key(const Checkpoint& c, std::string_view key) {
    for (const GgufEntry& e : c.metadata)
        if (e.key == key) return &e.value;
    return nullptr;
}

int64_t int_key(const Checkpoint& c, std::string_view key) {
    const GgufValue* v = find_key(c, key);
    if (v == nullptr || !v->as_int()) fail("convert", "cannot export: metadata key '{}' is missing", key);
    return *v->as_int();
}

double number_key(const Checkpoint& c, std::string_view key, double fallback) {
    const GgufValue* v = find_key(c, key);
    return v != nullptr && v->as_number() ? *v->as_number() : fallback;
}

// llama.cpp name -> Hugging Face name.
std::string hf_name(const std::string& name) {
    static const std::map<std::string, std::string> kGlobal = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
    };
    static const std::map<std::string, std::string> kLayer = {
        {"attn_norm.weight", "input_layernorm.weight"},  {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},    {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
    };
    if (auto it = kGlobal.find(name); it != kGlobal.end()) return it->second;
    int layer = -1, used = 0;
    if (std::sscanf(name.c_str(), "blk.%d.%n", &layer, &used) == 1 && layer >= 0 && used > 0) {
        if (auto it = kLayer.find(name.substr(static_cast<size_t>(used))); it != kLayer.end())
            return fmt::format("model.layers.{}.{}", layer, it->second);
    }
    fail("convert", "cannot export tensor '{}': it is not part of the llama layout", name);
}

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

}  // namespace

void export_hf_llama(const Checkpoint& c, const std::filesystem::path& folder, std::FILE* log) {
    const GgufValue* arch = find_key(c, "general.architecture");
    if (arch == nullptr || arch->as_string() == nullptr || *arch->as_string() != "llama")
        fail("convert", "--to safetensors exports llama models; this one is '{}'",
             arch && arch->as_string() ? *arch->as_string() : std::string("(no architecture)"));
    const int64_t dim = int_key(c, "llama.embedding_length");
    const int64_t n_heads = int_key(c, "llama.attention.head_count");
    const GgufValue* kv = find_key(c, "llama.attention.head_count_kv");
    const int64_t n_kv_heads = kv && kv->as_int() ? *kv->as_int() : n_heads;
    const int64_t head_dim = dim / n_heads;

    std::vector<std::vector<std::byte>> owned;
    std::vector<SafetensorsTensor> tensors;
    bool tied = true;
    int64_t vocab = 0;
    for (const CheckpointTensor& t : c.tensors) {
        SafetensorsTensor out;
        out.name = hf_name(t.name);
        out.shape.assign(t.dims.rbegin(), t.dims.rend());  // ggml order reversed = PyTorch order
        if (t.name == "output.weight") tied = false;
        if (t.name == "token_embd.weight") vocab = static_cast<int64_t>(t.dims.at(1));
        std::span<const std::byte> data = t.data;
        out.type = t.type;
        if (t.type != DType::F32 && t.type != DType::F16 && t.type != DType::BF16) {
            const auto elements = *checked_element_count(t.dims);
            owned.emplace_back(elements * sizeof(float));
            type_traits(t.type).to_float(t.data.data(), reinterpret_cast<float*>(owned.back().data()),
                                         static_cast<int64_t>(elements));
            data = owned.back();
            out.type = DType::F32;
        }
        const bool is_q = t.name.ends_with(".attn_q.weight"), is_k = t.name.ends_with(".attn_k.weight");
        if (is_q || is_k) {
            const size_t rows = static_cast<size_t>(t.dims.at(1));
            owned.push_back(to_rotate_half(data, is_q ? n_heads : n_kv_heads, head_dim, data.size() / rows));
            data = owned.back();
        }
        out.data = data;
        tensors.push_back(std::move(out));
    }

    nlohmann::ordered_json config;
    config["architectures"] = {"LlamaForCausalLM"};
    config["model_type"] = "llama";
    config["hidden_size"] = dim;
    config["intermediate_size"] = int_key(c, "llama.feed_forward_length");
    config["num_hidden_layers"] = int_key(c, "llama.block_count");
    config["num_attention_heads"] = n_heads;
    config["num_key_value_heads"] = n_kv_heads;
    config["max_position_embeddings"] = int_key(c, "llama.context_length");
    config["rms_norm_eps"] = number_key(c, "llama.attention.layer_norm_rms_epsilon", 1e-5);
    config["rope_theta"] = number_key(c, "llama.rope.freq_base", 10000.0);
    config["vocab_size"] = vocab;
    config["tie_word_embeddings"] = tied;
    config["hidden_act"] = "silu";

    std::error_code ec;
    std::filesystem::create_directory(folder, ec);
    if (!std::filesystem::is_directory(folder))
        fail("convert", "cannot create the folder '{}'{}", folder.string(), ec ? ": " + ec.message() : "");
    write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});
    AtomicFile file(folder / "config.json");
    const std::string text = config.dump(2) + "\n";
    file.write(std::as_bytes(std::span(text.data(), text.size())));
    file.commit();
    fmt::print(log, "kiln-convert: wrote {} (config.json, model.safetensors: {} tensors)\n", folder.string(),
               tensors.size());
}

}  // namespace kiln::convert
