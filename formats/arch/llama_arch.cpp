#include "formats/arch/llama_arch.h"

#include <fmt/ranges.h>

#include <cmath>

#include "engine/core/error.h"
#include "engine/core/printable.h"
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
constexpr const char* kKeyLength = "attention.key_length";
constexpr const char* kValueLength = "attention.value_length";
constexpr const char* kVocabSize = "vocab_size";
constexpr const char* kExpertCount = "expert_count";
constexpr const char* kExpertUsedCount = "expert_used_count";
constexpr const char* kCausal = "attention.causal";
constexpr const char* kRopeScalingType = "rope.scaling.type";
constexpr const char* kRopeScalingFactor = "rope.scaling.factor";
constexpr const char* kRopeScaleLinear = "rope.scale_linear";  // the older name of the factor
constexpr const char* kRopeScalingOrigCtx = "rope.scaling.original_context_length";
constexpr const char* kRopeScalingAttnFactor = "rope.scaling.attn_factor";
constexpr const char* kRopeScalingFinetuned = "rope.scaling.finetuned";
constexpr float kDefaultRopeBase = 10000.0f;  // llama.cpp's, when the key is absent

// llama.cpp's reading: the type defaults to linear, whose factor defaults to
// 1 (no scaling); "none" never scales; the factor may be under its old name.
RopeScaling read_rope_scaling(const MetadataView& f, const LlamaParams& p) {
    const auto key = [&](const char* suffix) { return p.key(suffix); };
    RopeScaling r;
    const std::string type = string_or(f, key(kRopeScalingType), "linear");
    if (type == "none")
        r.type = RopeScaling::Type::None;
    else if (type == "linear")
        r.type = RopeScaling::Type::Linear;
    else if (type == "yarn")
        r.type = RopeScaling::Type::Yarn;
    else
        fail("model", "{}: {} is '{}': kiln implements rope scaling 'none', 'linear' and 'yarn'", f.name(),
             key(kRopeScalingType), printable(type));
    const char* factor_key = f.find(key(kRopeScalingFactor)) != nullptr ? kRopeScalingFactor : kRopeScaleLinear;
    const float factor = number_or(f, key(factor_key), 0.0f);
    if (!std::isfinite(factor) || factor < 0.0f)
        fail("model", "{}: {} is {} (a positive factor, or 0 for none)", f.name(), key(factor_key), factor);
    r.factor = factor == 0.0f || r.type == RopeScaling::Type::None ? 1.0f : factor;
    r.original_context = positive_or(f, key(kRopeScalingOrigCtx), p.n_ctx_train);
    r.attn_factor = number_or(f, key(kRopeScalingAttnFactor), 1.0f);
    if (!std::isfinite(r.attn_factor) || r.attn_factor <= 0.0f)
        fail("model", "{}: {} is {} (a positive factor)", f.name(), key(kRopeScalingAttnFactor), r.attn_factor);
    r.finetuned = bool_or(f, key(kRopeScalingFinetuned), false);
    if (r.type == RopeScaling::Type::Linear && r.factor == 1.0f) r.type = RopeScaling::Type::None;
    return r;
}

}  // namespace

std::string LlamaParams::key(std::string_view suffix) const { return fmt::format("{}.{}", arch, suffix); }

LlamaParams LlamaParams::read(const MetadataView& f, std::string_view architecture,
                              std::initializer_list<std::string_view> more_keys) {
    const std::string arch = f.get_string("general.architecture");
    if (arch != architecture) fail("model", "{}: architecture '{}' is not {}", f.name(), arch, architecture);
    LlamaParams p;
    p.arch = arch;
    const auto key = [&](const char* suffix) { return p.key(suffix); };
    p.name = string_or(f, "general.name", "");
    p.dim = positive(f, key(kEmbeddingLength));
    p.n_layers = block_count(f, key(kBlockCount));
    p.n_heads = positive(f, key(kHeadCount));
    p.n_kv_heads = positive_or(f, key(kHeadCountKv), p.n_heads);
    p.ffn_dim = positive(f, key(kFeedForwardLength));
    p.n_ctx_train = positive(f, key(kContextLength));
    refuse_unknown_keys(f, arch,
                        {kContextLength, kEmbeddingLength, kFeedForwardLength, kBlockCount, kHeadCount, kHeadCountKv,
                         kRopeDimensionCount, kRmsEpsilon, kRopeFreqBase, kKeyLength, kValueLength, kVocabSize,
                         kExpertCount, kExpertUsedCount, kCausal, kRopeScalingType, kRopeScalingFactor, kRopeScaleLinear,
                         kRopeScalingOrigCtx, kRopeScalingAttnFactor, kRopeScalingFinetuned},
                        more_keys);
    if (f.find(key(kKeyLength)) != nullptr || f.find(key(kValueLength)) != nullptr) {
        const int64_t k_len = positive(f, key(kKeyLength)), v_len = positive(f, key(kValueLength));
        if (k_len != v_len)
            fail("model", "{}: {} {} differs from {} {} (kiln needs keys and values of one head size)", f.name(),
                 key(kKeyLength), k_len, key(kValueLength), v_len);
        if (k_len * p.n_heads != p.dim || p.dim % p.n_heads != 0) p.key_length = k_len;
    }
    if (p.key_length == 0 && p.dim % p.n_heads != 0)
        fail("model", "{}: width {} is not a multiple of {} heads", f.name(), p.dim, p.n_heads);
    if (f.find(key(kExpertCount)) != nullptr && f.get_int(key(kExpertCount)) != 0)
        fail("model", "{}: {} is {}: mixture-of-experts layers are not implemented", f.name(), key(kExpertCount),
             f.get_int(key(kExpertCount)));
    if (!bool_or(f, key(kCausal), true))
        fail("model", "{}: {} is false: non-causal attention is not implemented", f.name(), key(kCausal));
    p.n_rot = positive_or(f, key(kRopeDimensionCount), p.head_dim());
    p.norm_eps = positive_number_or(f, key(kRmsEpsilon), p.norm_eps);
    p.rope_base = positive_number_or(f, key(kRopeFreqBase), kDefaultRopeBase);
    p.rope_scaling = read_rope_scaling(f, p);

    // llama.cpp has no vocabulary-size key for llama: the embedding's columns are the vocabulary.
    const std::string embd_name(kTokenEmbedding);
    const std::vector<uint64_t>* embd = f.tensor_dims(embd_name);
    if (embd == nullptr) fail("model", "{}: tensor '{}' is missing", f.name(), embd_name);
    if (embd->size() != 2 || (*embd)[0] != static_cast<uint64_t>(p.dim))
        fail("model", "{}: tensor '{}' has shape [{}], expected [{}, n_vocab]", f.name(), embd_name,
             fmt::join(*embd, ", "), p.dim);
    p.n_vocab = static_cast<int64_t>((*embd)[1]);
    if (f.find(key(kVocabSize)) != nullptr && f.get_int(key(kVocabSize)) != p.n_vocab)
        fail("model", "{}: {} is {} but '{}' has {} rows", f.name(), key(kVocabSize), f.get_int(key(kVocabSize)),
             embd_name, p.n_vocab);
    p.validate(f.name());
    return p;
}

void LlamaParams::validate(const std::string& where) const {
    if (key_length == 0 && dim % n_heads != 0)
        fail("model", "{}: width {} is not a multiple of {} heads", where, dim, n_heads);
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
    if (key_length != 0) {
        md.push_back({key(kKeyLength), u32(key_length)});
        md.push_back({key(kValueLength), u32(key_length)});
    }
    if (rope_scaling.type != RopeScaling::Type::None) {
        md.push_back({key(kRopeScalingType),
                      GgufValue(std::string(rope_scaling.type == RopeScaling::Type::Yarn ? "yarn" : "linear"))});
        md.push_back({key(kRopeScalingFactor), GgufValue(rope_scaling.factor)});
        if (rope_scaling.type == RopeScaling::Type::Yarn)
            md.push_back({key(kRopeScalingOrigCtx), u32(rope_scaling.original_context)});
        if (rope_scaling.attn_factor != 1.0f) md.push_back({key(kRopeScalingAttnFactor), GgufValue(rope_scaling.attn_factor)});
    }
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
