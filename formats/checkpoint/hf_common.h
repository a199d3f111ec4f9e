#pragma once
// What the Hugging Face readers (hf_llama, hf_qwen2, hf_gemma, hf_phi3) share:
// config.json's values read with one-line errors that name the key, and the
// folder's safetensors tensors handed out as checked views under their GGUF
// names, with every tensor of the folder accounted for (one left over is
// refused by name). Errors are kiln::Error("hf", ...).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/checkpoint/checkpoint.h"
#include "formats/checkpoint/hf_folder.h"

namespace kiln {

class HfConfig {
public:
    HfConfig(std::filesystem::path folder, nlohmann::json config);

    const nlohmann::json& raw() const noexcept { return config_; }
    const std::filesystem::path& folder() const noexcept { return folder_; }
    std::string where() const { return (folder_ / "config.json").string(); }
    // The value of `key`, or nullptr when absent or null.
    const nlohmann::json* find(std::string_view key) const;
    // A positive integer below 2^32; `fallback` when absent or null, else an error.
    uint64_t count(std::string_view key, std::optional<uint64_t> fallback = {}) const;
    // A non-negative integer below 2^32 (0 allowed); `fallback` when absent or null.
    uint64_t count_or_zero(std::string_view key, uint64_t fallback) const;
    // A positive finite number; `fallback` when absent or null (no fallback: an error).
    double number(std::string_view key, std::optional<double> fallback = {}) const;
    bool flag(std::string_view key, bool fallback) const;
    // A string, or `fallback` when absent or null.
    std::string text(std::string_view key, std::string_view fallback) const;
    // The one entry of "architectures" (empty when absent).
    std::string architecture() const;

private:
    std::filesystem::path folder_;
    nlohmann::json config_;
};

// The folder's tensors; take() hands each out once.
class HfTensorSource {
public:
    explicit HfTensorSource(const std::filesystem::path& folder);

    bool has(const std::string& hf) const { return weights_.by_name.contains(hf); }
    // A view of `hf` (its dtype kept) as `gguf`, appended to `out`; `expected`
    // is the PyTorch shape config.json implies (`hyper` describes the config in
    // the error). Missing or misshapen: an error naming the tensor.
    CheckpointTensor& take(Checkpoint& out, const std::string& hf, std::string gguf,
                           const std::vector<uint64_t>& expected, const std::string& hyper);
    // Marks a tensor the reader drops on purpose (when present).
    void drop(const std::string& hf) { used_.insert(hf); }
    // Any tensor not taken or dropped: an error naming it and `what` (e.g. "a
    // Qwen2ForCausalLM with 2 layers"). Names ending in `.rotary_emb.inv_freq`
    // (a buffer older transformers saved) are ignored, as llama.cpp ignores them.
    void refuse_leftovers(std::string_view what) const;
    // Refuses config.json's `key` of `declared` layers when the weights hold
    // fewer distinct "model.layers.N." indices: checked before the count
    // builds names or drives loops (formats/checkpoint/layer_count.h).
    void check_layers(uint64_t declared, std::string_view key) const;
    // Keeps the mappings alive (Checkpoint::source).
    std::shared_ptr<HfWeights::Files> shards() const { return weights_.shards; }

private:
    std::filesystem::path folder_;
    HfWeights weights_;
    std::set<std::string> used_;
};

std::string hf_shape_text(const std::vector<uint64_t>& shape);

// HF's rotate-half row order of a (n_head * head_dim, ...) tensor back to
// llama.cpp's adjacent pairs (convert_hf_to_gguf's LlamaModel.permute): within
// a head, HF row j*hd/2 + i holds row 2i + j. Whole rows move (any dtype;
// biases are rows of one element). Replaces t.data with an owned copy.
void hf_unpermute_rows(Checkpoint& out, CheckpointTensor& t, uint64_t n_head, uint64_t head_dim);

// Replaces metadata entry `key` (or appends it).
void hf_set_metadata(Checkpoint& c, const std::string& key, GgufValue value);
void hf_drop_metadata(Checkpoint& c, const std::string& key);

// The single rope_scaling type of config.json: rope_scaling.rope_type, else
// .type; "" when rope_scaling is absent or null. Refuses a non-object.
std::string hf_rope_scaling_type(const HfConfig& config);

}  // namespace kiln
