#include "convert/convert.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>

#include "convert/export_safetensors.h"
#include "convert/export_torch.h"
#include "convert/loadable_check.h"
#include "convert/progress.h"
#include "engine/core/error.h"
#include "formats/arch/tensor_spec.h"
#include "formats/arch/transformer_arch.h"
#include "formats/checkpoint/gguf_checkpoint.h"
#include "formats/checkpoint/char_vocabulary.h"
#include "formats/checkpoint/hf_folder.h"
#include "formats/checkpoint/llama2c.h"
#include "formats/checkpoint/llama_state_dict.h"
#include "formats/checkpoint/nanogpt_state_dict.h"
#include "formats/checkpoint/tokenizer_source.h"
#include "formats/checkpoint/torch_checkpoint.h"
#include "formats/checkpoint/transformer_state_dict.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/io/atomic_folder.h"
#include "formats/io/regular_file.h"

namespace kiln::convert {

namespace {

// What the first bytes of a file say it is. Names are never trusted.
// TorchFolder: what --to safetensors writes for an encoder-decoder (a model.pt, no safetensors).
enum class InputFormat { Gguf, PyTorch, Llama2c, HuggingFace, TorchFolder, Unknown };

InputFormat detect(const std::filesystem::path& path) {
    if (std::filesystem::is_directory(path)) {
        if (std::filesystem::exists(path / "model.pt") && !std::filesystem::exists(path / "model.safetensors") &&
            !std::filesystem::exists(path / "model.safetensors.index.json"))
            return InputFormat::TorchFolder;
        return std::filesystem::exists(path / "config.json") ? InputFormat::HuggingFace : InputFormat::Unknown;
    }
    const std::string head = read_file_head(path, 256);  // enough for every header kiln recognizes
    const auto bytes = std::as_bytes(std::span(head.data(), head.size()));
    if (head.starts_with("GGUF")) return InputFormat::Gguf;
    if (looks_like_torch_checkpoint(bytes)) return InputFormat::PyTorch;
    if (looks_like_llama2c(bytes, std::filesystem::file_size(path))) return InputFormat::Llama2c;
    return InputFormat::Unknown;
}

constexpr std::string_view kKnownTorchModels =
    "llama2.c's model.py (tok_embeddings.weight, layers.N.attention.wq.weight, ...), nanoGPT's GPT "
    "(transformer.wte.weight, transformer.h.N.attn.c_attn.weight, ...) and torch.nn.Transformer seq2seq models "
    "(src_embed.weight, transformer.encoder.layers.N.self_attn.in_proj_weight, ...; see README)";

uint64_t vocab_rows(const Checkpoint& c) {
    for (const CheckpointTensor& t : c.tensors)
        if (t.name == arch::kTokenEmbedding && t.dims.size() == 2) return t.dims[1];
    return 0;
}

// A PyTorch checkpoint: which model it holds is told by the names of its tensors.
Checkpoint read_torch(const std::filesystem::path& input) {
    const TorchCheckpoint torch = read_torch_checkpoint(input);
    const std::string name = input.stem().string();
    Checkpoint c;
    if (find_state_dict_prefix(torch, "tok_embeddings.weight")) c = llama_checkpoint_from_state_dict(torch, name);
    else if (is_nanogpt_state_dict(torch)) c = nanogpt_checkpoint_from_state_dict(torch, name);
    else if (is_transformer_state_dict(torch)) c = transformer_checkpoint_from_state_dict(torch, name);
    else
        fail("pytorch", "{}: no model kiln knows in the checkpoint; kiln reads {}", input.string(), kKnownTorchModels);
    return c;
}

Checkpoint read_input(const ConvertOptions& o) {
    const InputFormat format = detect(o.input);
    switch (format) {
        case InputFormat::Gguf: return read_gguf_checkpoint(o.input);
        case InputFormat::PyTorch: return read_torch(o.input);
        case InputFormat::TorchFolder: return read_torch(o.input / "model.pt");
        case InputFormat::Llama2c: return read_llama2c(o.input, nullptr);
        case InputFormat::HuggingFace: return hf_checkpoint(o.input);
        case InputFormat::Unknown: break;
    }
    fail("convert", "cannot tell what kind of checkpoint '{}' is (kiln-convert reads GGUF files, llama2.c "
         ".bin checkpoints, PyTorch checkpoints (llama2.c, nanoGPT, torch.nn.Transformer seq2seq) and Hugging Face "
         "folders: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Phi3ForCausalLM, GemmaForCausalLM, "
         "Gemma2ForCausalLM, GPT2LMHeadModel)", o.input.string());
}

// --tokenizer's vocabulary joins any checkpoint that has none; a model written
// without one needs --no-tokenizer (neither kiln nor llama.cpp runs text through it).
void attach_tokenizer(Checkpoint& c, const ConvertOptions& o, std::FILE* log) {
    if (o.tokenizer) {
        if (o.no_tokenizer) fail("convert", "--tokenizer and --no-tokenizer contradict each other");
        if (has_tokenizer(c))
            fail("convert", "'{}' already holds a vocabulary; --tokenizer '{}' would replace it", o.input.string(),
                 o.tokenizer->string());
        add_tokenizer_file(c, *o.tokenizer, vocab_rows(c));
        return;
    }
    if (has_tokenizer(c) || o.to_safetensors) return;
    if (!o.no_tokenizer)
        fail("convert", "'{}' holds no tokenizer: give --tokenizer FILE (tokenizer.json, tokenizer.model, tokenizer.bin, "
             "meta.pkl or a GGUF with a vocabulary), or --no-tokenizer to write a model without one",
             o.input.string());
    std::fprintf(log, "note: writing '%s' without a tokenizer (--no-tokenizer): kiln and llama.cpp cannot run text "
                 "through it until one is added\n", o.output.string().c_str());
}

// Elements converted per step: bounds the float buffer (4 MiB) and paces the progress line.
constexpr uint64_t kChunkElements = uint64_t{1} << 20;

std::string megabytes(uint64_t bytes) { return fmt::format("{:.2f} MiB", bytes / 1048576.0); }

}  // namespace

ModelFacts model_facts(const std::vector<GgufEntry>& metadata) {
    auto find = [&](std::string_view key) -> const GgufValue* {
        for (const GgufEntry& e : metadata)
            if (e.key == key) return &e.value;
        return nullptr;
    };
    ModelFacts f;
    if (const GgufValue* v = find("general.architecture"); v && v->as_string()) f.architecture = *v->as_string();
    // A count may be one number or one per layer (llama.cpp then reads the first).
    auto count = [&](const std::string& key, uint32_t fallback) -> uint32_t {
        const GgufValue* v = find(key);
        if (v && v->as_array() && !v->as_array()->items.empty()) v = &v->as_array()->items[0];
        const std::optional<int64_t> n = v ? v->as_int() : std::nullopt;
        return n && *n >= 0 && *n <= UINT32_MAX ? static_cast<uint32_t>(*n) : fallback;
    };
    const std::string& a = f.architecture;
    f.n_layer = count(a + ".block_count", 0);
    f.n_head = count(a + ".attention.head_count", 0);
    f.n_head_kv = count(a + ".attention.head_count_kv", f.n_head);
    f.n_expert = count(a + ".expert_count", 0);
    return f;
}

void convert(const ConvertOptions& options, std::FILE* log) {
    const auto start = std::chrono::steady_clock::now();
    ConvertOptions o = options;
    // "-o out/" names the folder out.
    if (o.to_safetensors && o.output.filename().empty() && o.output.has_parent_path()) o.output = o.output.parent_path();
    const std::filesystem::path folder = o.output.has_parent_path() ? o.output.parent_path() : ".";
    if (!std::filesystem::is_directory(folder))
        fail("convert", "cannot write '{}': the folder '{}' does not exist", o.output.string(), folder.string());

    // A folder that is there already (and not empty) is refused before any reading.
    if (o.to_safetensors) AtomicFolder::check_target(o.output);

    Checkpoint in = read_input(o);
    attach_tokenizer(in, o, log);
    if (o.to_safetensors) {
        if (o.mix) fail("convert", "--type does not apply to --to safetensors (float tensors keep their type)");
        // The encoder-decoder has no Hugging Face class: it goes out as the torch.nn.Transformer checkpoint kiln reads.
        const auto arch = std::find_if(in.metadata.begin(), in.metadata.end(),
                                       [](const GgufEntry& e) { return e.key == "general.architecture"; });
        if (arch != in.metadata.end() && arch->value.as_string() && *arch->value.as_string() == arch::kTransformer)
            export_torch_folder(in, o.output, log);
        else
            export_hf_folder(in, o.output, log);
        return;
    }
    check_loadable(in, o.output.string());
    GgufWriter writer;
    std::string architecture = "(none)";
    for (const GgufEntry& e : in.metadata) {
        if (e.key == "general.file_type" || e.key == "general.quantization_version") continue;  // rewritten below
        if (e.key == "general.name" && o.name) continue;
        if (e.key == "general.architecture" && e.value.as_string()) architecture = *e.value.as_string();
        writer.set(e.key, e.value);
    }
    if (o.name) writer.set("general.name", *o.name);
    if (o.mix) writer.set("general.file_type", static_cast<uint32_t>(o.mix->file_type));

    // Every tensor's type first, so that a type kiln cannot write stops the
    // conversion before any work (and never leaves a wrong file).
    std::vector<TensorChoice> choices;
    if (o.mix) {
        std::vector<MixTensor> described;
        for (const CheckpointTensor& t : in.tensors) described.push_back({t.name, t.type, t.dims});
        choices = choose_tensor_types(*o.mix, model_facts(in.metadata), described);
    } else {
        // Without a mix every tensor keeps its type, except that 1-D ones are F32.
        for (const CheckpointTensor& t : in.tensors) {
            const bool one_dimensional = std::all_of(t.dims.begin() + std::min<size_t>(1, t.dims.size()), t.dims.end(),
                                                     [](uint64_t d) { return d == 1; });
            choices.push_back({one_dimensional ? DType::F32 : t.type});
        }
    }
    for (size_t i = 0; i < in.tensors.size(); ++i) {
        const CheckpointTensor& t = in.tensors[i];
        if (choices[i].type == t.type) continue;
        if (type_traits(t.type).to_float == nullptr)
            fail("convert", "tensor '{}' is {}, which kiln cannot read to convert", t.name, dtype_name(t.type));
        if (type_traits(choices[i].type).from_float_ref == nullptr)
            fail("convert", "tensor '{}' needs {} for --type {}, which kiln cannot write yet", t.name,
                 dtype_name(choices[i].type), o.mix->name);
    }

    std::vector<std::vector<std::byte>> converted;  // outlives writer.write()
    std::map<std::string, int> per_type;
    std::vector<std::string> fallbacks;
    uint64_t bytes_in = 0, bytes_out = 0, parameters = 0;
    bool any_quantized = false;
    uint64_t total_bytes = 0;
    for (const CheckpointTensor& t : in.tensors) total_bytes += t.data.size();
    Progress progress(log, total_bytes, isatty(fileno(log)) != 0);
    for (size_t i = 0; i < in.tensors.size(); ++i) {
        const CheckpointTensor& t = in.tensors[i];
        const std::string label = fmt::format("[{}/{}] {}", i + 1, in.tensors.size(), t.name);
        progress.update(bytes_in, label);
        const DType target = choices[i].type;
        if (choices[i].llama_refuses) fallbacks.push_back(t.name);
        const uint64_t elements = *checked_element_count(t.dims);
        std::span<const std::byte> data = t.data;
        if (target != t.type) {
            const TypeTraits& from = type_traits(t.type);
            const TypeTraits& to = type_traits(target);
            converted.emplace_back(*checked_bytes(target, elements));
            // Whole rows at a time (rows are whole blocks of both types), so the
            // progress line moves through a large tensor and the float buffer stays small.
            const uint64_t row = t.dims.empty() ? 1 : t.dims[0];
            const uint64_t rows = elements / std::max<uint64_t>(row, 1);
            const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkElements / std::max<uint64_t>(row, 1));
            const size_t row_in = static_cast<size_t>(row / from.block_size * from.block_bytes);
            const size_t row_out = static_cast<size_t>(row / to.block_size * to.block_bytes);
            std::vector<float> floats(static_cast<size_t>(std::min(rows, rows_per_chunk) * row));
            for (uint64_t r = 0; r < rows; r += rows_per_chunk) {
                const uint64_t n = std::min(rows_per_chunk, rows - r);
                const auto count = static_cast<int64_t>(n * row);
                from.to_float(t.data.data() + r * row_in, floats.data(), count);
                to.from_float_ref(floats.data(), converted.back().data() + r * row_out, count);
                progress.update(bytes_in + (r + n) * row_in, label);
            }
            data = converted.back();
        }
        writer.add_tensor(t.name, target, t.dims, data);
        ++per_type[std::string(dtype_name(target))];
        any_quantized = any_quantized || type_traits(target).quantized;
        bytes_in += t.data.size();
        bytes_out += data.size();
        parameters += elements;
    }
    if (any_quantized) writer.set("general.quantization_version", uint32_t{2});
    progress.status(fmt::format("[100%] writing {}", o.output.string()));
    writer.write(o.output);
    progress.clear();

    std::string types;
    for (const auto& [name, count] : per_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, name);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(log, "kiln-convert: {} -> {}: architecture {}, {} parameters, {} tensors ({}), {} in, {} out, {:.2f} s\n",
               o.input.string(), o.output.string(), architecture, parameters, in.tensors.size(), types,
               megabytes(bytes_in), megabytes(bytes_out), seconds);
    if (!fallbacks.empty())
        fmt::print(log, "kiln-convert: kept as f16, rows not whole {} blocks: {} (llama-quantize refuses these)\n",
                   dtype_name(o.mix->base), fmt::join(fallbacks, ", "));
}

}  // namespace kiln::convert
