#include "convert/export_safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/arch/llama_arch.h"
#include "formats/checkpoint/hf_llama.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/io/atomic_file.h"

namespace kiln::convert {

namespace {

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
    std::vector<arch::EntryMetadata::Tensor> shapes;
    for (const CheckpointTensor& t : c.tensors) shapes.push_back({t.name, t.dims});
    const arch::EntryMetadata metadata("the model", c.metadata, std::move(shapes));
    const std::string architecture = metadata.find("general.architecture") && metadata.find("general.architecture")->as_string()
                                         ? metadata.get_string("general.architecture")
                                         : std::string("(no architecture)");
    if (architecture != arch::kLlama)
        fail("convert", "--to safetensors exports llama models; this one is '{}'", architecture);
    const arch::LlamaParams p = arch::LlamaParams::read(metadata);
    if (p.n_rot != p.head_dim())
        fail("convert", "cannot export: RoPE on {} of {} head dimensions has no Hugging Face equivalent", p.n_rot,
             p.head_dim());

    // llama.cpp name -> Hugging Face name, walking both bindings of the descriptor.
    const arch::LlamaTensors<std::string> gguf = arch::llama_tensor_names(p), hf = hf_llama_names(p.n_layers);
    std::map<std::string, std::string> hf_name = {
        {gguf.token_embd, hf.token_embd}, {gguf.output_norm, hf.output_norm}, {gguf.output, hf.output}};
    for (size_t l = 0; l < gguf.layers.size(); ++l)
        for (auto member : arch::kLlamaLayerMembers<std::string>) hf_name[gguf.layers[l].*member] = hf.layers[l].*member;
    std::set<std::string> rotated;  // Q and K: back to HF's rotate-half row order
    for (const arch::LlamaLayerTensors<std::string>& layer : gguf.layers) rotated.insert({layer.attn_q, layer.attn_k});

    std::vector<std::vector<std::byte>> owned;
    std::vector<SafetensorsTensor> tensors;
    bool tied = true;
    for (const CheckpointTensor& t : c.tensors) {
        SafetensorsTensor out;
        const auto name = hf_name.find(t.name);
        if (name == hf_name.end()) fail("convert", "cannot export tensor '{}': it is not part of the llama layout", t.name);
        out.name = name->second;
        out.shape.assign(t.dims.rbegin(), t.dims.rend());  // ggml order reversed = PyTorch order
        if (t.name == gguf.output) tied = false;
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
        if (rotated.contains(t.name)) {
            const size_t rows = static_cast<size_t>(t.dims.at(1));
            const int64_t heads = static_cast<int64_t>(rows) / p.head_dim();
            owned.push_back(to_rotate_half(data, heads, p.head_dim(), data.size() / rows));
            data = owned.back();
        }
        out.data = data;
        tensors.push_back(std::move(out));
    }

    nlohmann::ordered_json config;
    config["architectures"] = {"LlamaForCausalLM"};
    config["model_type"] = "llama";
    config["hidden_size"] = p.dim;
    config["intermediate_size"] = p.ffn_dim;
    config["num_hidden_layers"] = p.n_layers;
    config["num_attention_heads"] = p.n_heads;
    config["num_key_value_heads"] = p.n_kv_heads;
    config["max_position_embeddings"] = p.n_ctx_train;
    config["rms_norm_eps"] = static_cast<double>(p.norm_eps);
    config["rope_theta"] = static_cast<double>(p.rope_base);
    config["vocab_size"] = p.n_vocab;
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
