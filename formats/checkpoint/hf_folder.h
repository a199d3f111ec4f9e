#pragma once
// A Hugging Face model folder: config.json, the weights (model.safetensors, or
// shards listed by model.safetensors.index.json's "weight_map"), and the
// tokenizer (tokenizer.json, tokenizer.model) when there.
//
// hf_checkpoint() reads config.json's "architectures" (or, without it,
// "model_type") and hands the folder to the reader for that architecture:
//   LlamaForCausalLM (model_type "llama") -> hf_llama.h, plus tokenizer.model
//       (SentencePiece) embedded as a "llama" tokenizer when present;
//   MistralForCausalLM (mistral)          -> hf_llama.h (llama), tokenizer.model likewise;
//   Qwen2ForCausalLM (qwen2)              -> hf_qwen2.h (no tokenizer embedded yet:
//       its tokenizer.json pre-tokenizer is not mapped);
//   Phi3ForCausalLM (phi3)                -> hf_phi3.h, tokenizer.model likewise;
//   GemmaForCausalLM / Gemma2ForCausalLM  -> hf_gemma.h, tokenizer.model likewise;
//   GPT2LMHeadModel (model_type "gpt2")   -> hf_gpt2.h, plus tokenizer.json
//       (byte-level BPE) embedded as a "gpt2" tokenizer when present.
// Anything else: kiln::Error("hf", ...) listing the architectures kiln reads.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "formats/checkpoint/checkpoint.h"
#include "formats/checkpoint/safetensors.h"

namespace kiln {

// The weights of a folder; `files` is what Checkpoint::source keeps alive.
struct HfWeights {
    struct Files {
        std::vector<SafetensorsFile> files;
    };
    std::shared_ptr<Files> shards;
    // Every tensor of every shard, by name, with the file holding it.
    std::map<std::string, std::pair<const SafetensorsTensor*, const SafetensorsFile*>> by_name;
};

// Parses a JSON file; kiln::Error("hf", ...) when it cannot be opened or parsed.
nlohmann::json read_hf_json(const std::filesystem::path& path);

// Opens model.safetensors or the shards of model.safetensors.index.json
// (shard names must be plain file names in the folder; every listed tensor
// must be in its shard; no tensor in two shards).
HfWeights open_hf_weights(const std::filesystem::path& folder);

Checkpoint hf_checkpoint(const std::filesystem::path& folder);

}  // namespace kiln
