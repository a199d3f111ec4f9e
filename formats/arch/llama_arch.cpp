#include "formats/arch/llama_arch.h"

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "formats/arch/hparams.h"

namespace kiln::arch {

namespace {

// The keys after "<architecture>.", as llama.cpp names them for every architecture.
constexpr const char* kContextLength = "context_length";
constexpr const char* kEmbeddingLength = "embedding_length";
constexpr const char* kFeedForwardLength = "feed_forward_length";
constexpr const char* kBlockCount = "block_count";
constexpr const char* kHeadCount = "attention.head_count";
constexpr const char* kHeadCountKv = "attention.head_count_kv";
constexpr const char* kRopeDimensionCount = "rope.dimension_count";
constexpr const char* kRmsEpsilon = "attention.layer_norm_rms_epsilon";
constexpr const char* kRopeFreqBase = "rope.freq_base";
constexpr float kDefaultRopeBase = 10000.0f;  // llama.cpp's, when the key is absent

}  // namespace

std::string LlamaParams::key(std::string_view suffix) const { return fmt::format("{}.{}", arch, suffix); }

LlamaParams LlamaParams::read(const MetadataView& f, std::string_view architecture) {
    const std::string arch = f.get_string("general.architecture");
    if (arch != architecture) fail("model", "{}: architecture '{}' is not {}", f.name(), arch, architecture);
    LlamaParams p;
    p.arch = arch;
    const auto key = [&](const char* suffix) { return p.key(suffix); };
    p.name = string_or(f, "general.name", "");
    p.dim = positive(f, key(kEmbeddingLength));
    p.n_layers = positive(f, key(kBlockCount));
    p.n_heads = positive(f, key(kHeadCount));
    p.n_kv_heads = positive_or(f, key(kHeadCountKv), p.n_heads);
    p.ffn_dim = positive(f, key(kFeedForwardLength));
    p.n_ctx_train = positive(f, key(kContextLength));
    if (p.dim % p.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), p.dim, p.n_heads);
    p.n_rot = positive_or(f, key(kRopeDimensionCount), p.head_dim());
    p.norm_eps = number_or(f, key(kRmsEpsilon), p.norm_eps);
    p.rope_base = number_or(f, key(kRopeFreqBase), kDefaultRopeBase);

    // llama.cpp has no vocabulary-size key for llama: the embedding's columns are the vocabulary.
    const std::string embd_name = llama_tensor_specs(p).front().name;
    const std::vector<uint64_t>* embd = f.tensor_dims(embd_name);
    if (embd == nullptr) fail("model", "{}: tensor '{}' is missing", f.name(), embd_name);
    if (embd->size() != 2 || (*embd)[0] != static_cast<uint64_t>(p.dim))
        fail("model", "{}: tensor '{}' has shape [{}], expected [{}, n_vocab]", f.name(), embd_name,
             fmt::join(*embd, ", "), p.dim);
    p.n_vocab = static_cast<int64_t>((*embd)[1]);
    p.validate(f.name());
    return p;
}

void LlamaParams::validate(const std::string& where) const {
    if (dim % n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", where, dim, n_heads);
    if (n_kv_heads < 1 || n_heads % n_kv_heads != 0)
        fail("model", "{}: {} heads cannot share {} key/value heads", where, n_heads, n_kv_heads);
    if (n_rot > head_dim() || n_rot % 2 != 0)
        fail("model", "{}: {} {} does not fit heads of {}", where, key(kRopeDimensionCount), n_rot, head_dim());
}

std::vector<GgufEntry> LlamaParams::metadata(LlamaKeyOrder order) const {
    const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
    std::vector<GgufEntry> md = {
        {"general.architecture", GgufValue(arch)},
        {"general.name", GgufValue(name)},
        {key(kContextLength), u32(n_ctx_train)},
        {key(kEmbeddingLength), u32(dim)},
        {key(kFeedForwardLength), u32(ffn_dim)},
    };
    if (order == LlamaKeyOrder::HfConverter) {
        md.push_back({key(kHeadCount), u32(n_heads)});
        md.push_back({key(kHeadCountKv), u32(n_kv_heads)});
        md.push_back({key(kBlockCount), u32(n_layers)});
    } else {
        md.push_back({key(kBlockCount), u32(n_layers)});
        md.push_back({key(kHeadCount), u32(n_heads)});
        md.push_back({key(kHeadCountKv), u32(n_kv_heads)});
    }
    md.push_back({key(kRopeDimensionCount), u32(n_rot)});
    md.push_back({key(kRmsEpsilon), GgufValue(norm_eps)});
    if (rope_base != kDefaultRopeBase) md.push_back({key(kRopeFreqBase), GgufValue(rope_base)});
    return md;
}

std::vector<TensorSpec> llama_tensor_specs(const LlamaParams& p) {
    std::vector<TensorSpec> specs;
    llama_tensors<int>(p, [&](TensorSpec s) {
        specs.push_back(std::move(s));
        return 0;
    });
    return specs;
}

LlamaTensors<std::string> llama_tensor_names(const LlamaParams& p) {
    return llama_tensors<std::string>(p, [](const TensorSpec& s) { return s.name; });
}

}  // namespace kiln::arch
