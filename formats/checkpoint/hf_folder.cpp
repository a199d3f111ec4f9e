#include "formats/checkpoint/hf_folder.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/hf_gpt2.h"
#include "formats/checkpoint/hf_gemma.h"
#include "formats/checkpoint/hf_llama.h"
#include "formats/checkpoint/hf_phi3.h"
#include "formats/checkpoint/hf_qwen2.h"
#include "formats/checkpoint/hf_tokenizer.h"
#include "formats/checkpoint/json_limits.h"
#include "formats/checkpoint/spm_model.h"
#include "formats/io/regular_file.h"

namespace kiln {

using nlohmann::json;

json read_hf_json(const std::filesystem::path& path) {
    return parse_json_bounded(read_regular_file(path), "hf", path.string());
}

HfWeights open_hf_weights(const std::filesystem::path& folder) {
    HfWeights w;
    w.shards = std::make_shared<HfWeights::Files>();
    auto& files = w.shards->files;
    const std::filesystem::path single = folder / "model.safetensors";
    const std::filesystem::path index = folder / "model.safetensors.index.json";
    if (std::filesystem::exists(single)) {
        files.push_back(SafetensorsFile::open(single));
    } else if (std::filesystem::exists(index)) {
        const json j = read_hf_json(index);
        const auto map = j.find("weight_map");
        if (map == j.end() || !map->is_object()) fail("hf", "{}: no \"weight_map\" object", index.string());
        std::map<std::string, size_t> shard_of_file;
        for (const auto& [name, file] : map->items()) {
            if (!file.is_string()) fail("hf", "{}: weight_map entry '{}' is not a file name", index.string(), printable(name));
            const std::string f = file.get<std::string>();
            // Shards are siblings of the index; a path would escape the folder.
            if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "..")
                fail("hf", "{}: shard name '{}' is not a plain file name", index.string(), printable(f));
            auto [it, fresh] = shard_of_file.emplace(f, files.size());
            if (fresh) files.push_back(SafetensorsFile::open(folder / f));
            if (files[it->second].find_tensor(name) == nullptr)
                fail("hf", "{}: tensor '{}' is listed in {} but that shard does not hold it", index.string(),
                     printable(name), printable(f));
        }
    } else {
        const bool bin = std::filesystem::exists(folder / "pytorch_model.bin") ||
                         std::filesystem::exists(folder / "pytorch_model.bin.index.json");
        fail("hf", "{}: neither model.safetensors nor model.safetensors.index.json is there{}", folder.string(),
             bin ? " (only pytorch_model.bin: kiln reads Hugging Face weights as safetensors; transformers' "
                   "save_pretrained(..., safe_serialization=True) writes them)"
                 : "");
    }
    // Indexed only now: pointers into `files` are stable once it stops growing.
    for (const SafetensorsFile& f : files)
        for (const SafetensorsTensor& t : f.tensors())
            if (!w.by_name.emplace(t.name, std::make_pair(&t, &f)).second)
                fail("hf", "{}: tensor '{}' is in more than one shard", f.path().string(), printable(t.name));
    return w;
}

namespace {

constexpr std::string_view kKnown =
    "LlamaForCausalLM (model_type llama), GPT2LMHeadModel (model_type gpt2), MistralForCausalLM (mistral), "
    "Qwen2ForCausalLM (qwen2), Phi3ForCausalLM (phi3), GemmaForCausalLM (gemma), Gemma2ForCausalLM (gemma2)";

// An architecture kiln reads: its class name, its model_type and its reader.
struct Reader {
    std::string_view architecture, model_type;
    Checkpoint (*read)(const std::filesystem::path&);
    bool spm;  // its tokenizer is tokenizer.model (SentencePiece)
};

constexpr Reader kReaders[] = {
    {"LlamaForCausalLM", "llama", hf_llama_checkpoint, true},
    {"MistralForCausalLM", "mistral", hf_llama_checkpoint, true},
    {"Qwen2ForCausalLM", "qwen2", hf_qwen2_checkpoint, false},
    {"Phi3ForCausalLM", "phi3", hf_phi3_checkpoint, true},
    {"GemmaForCausalLM", "gemma", hf_gemma_checkpoint, true},
    {"Gemma2ForCausalLM", "gemma2", hf_gemma_checkpoint, true},
};

// tokenizer_config.json's chat template and special tokens, when the folder
// has both it and a vocabulary.
void add_tokenizer_config(Checkpoint& c, const std::filesystem::path& folder) {
    const bool has_vocabulary = std::any_of(c.metadata.begin(), c.metadata.end(),
                                            [](const GgufEntry& e) { return e.key == "tokenizer.ggml.tokens"; });
    if (has_vocabulary && std::filesystem::exists(folder / "tokenizer_config.json"))
        add_hf_tokenizer_config(c, folder / "tokenizer_config.json");
}

uint64_t vocab_rows(const Checkpoint& c) {
    for (const CheckpointTensor& t : c.tensors)
        if (t.name == "token_embd.weight") return t.dims.size() == 2 ? t.dims[1] : 0;
    return 0;
}

}  // namespace

Checkpoint hf_checkpoint(const std::filesystem::path& given) {
    // A trailing '/' would leave filename() (general.name) empty.
    const std::filesystem::path folder = given.has_filename() ? given : given.parent_path();
    const std::filesystem::path config_path = folder / "config.json";
    const json config = read_hf_json(config_path);
    if (!config.is_object()) fail("hf", "{}: not a JSON object", config_path.string());
    std::vector<std::string> archs;
    if (const auto a = config.find("architectures"); a != config.end() && a->is_array())
        for (const json& item : *a)
            if (item.is_string()) archs.push_back(item.get<std::string>());
    std::string model_type;
    if (const auto m = config.find("model_type"); m != config.end() && m->is_string()) model_type = m->get<std::string>();
    for (const Reader& r : kReaders) {
        if (archs.empty() ? model_type != r.model_type : archs.size() != 1 || archs[0] != r.architecture) continue;
        Checkpoint c = r.read(folder);
        // SentencePiece where the family ships it; otherwise tokenizer.json
        // (Llama 3's, Qwen2's and SmolLM's byte-level BPE).
        if (r.spm && std::filesystem::exists(folder / "tokenizer.model"))
            add_spm_tokenizer(c, folder / "tokenizer.model", vocab_rows(c));
        else if (std::filesystem::exists(folder / "tokenizer.json"))
            add_hf_bpe_tokenizer(c, folder / "tokenizer.json", config, vocab_rows(c));
        add_tokenizer_config(c, folder);
        return c;
    }
    const bool gpt2 = archs.empty() ? model_type == "gpt2" : archs.size() == 1 && archs[0] == "GPT2LMHeadModel";
    if (gpt2) {
        Checkpoint c = hf_gpt2_checkpoint(folder, config);
        if (std::filesystem::exists(folder / "tokenizer.json"))
            add_hf_bpe_tokenizer(c, folder / "tokenizer.json", config, vocab_rows(c));
        add_tokenizer_config(c, folder);
        return c;
    }
    fail("hf", "{}: architectures [{}], model_type '{}': kiln reads {}", config_path.string(),
         printable(fmt::format("{}", fmt::join(archs, ", "))), printable(model_type), kKnown);
}

}  // namespace kiln
