#include "formats/arch/gpt2_arch.h"

#include "engine/core/error.h"
#include "formats/arch/hparams.h"

namespace kiln::arch {

namespace {

constexpr const char* kContextLength = "gpt2.context_length";
constexpr const char* kEmbeddingLength = "gpt2.embedding_length";
constexpr const char* kFeedForwardLength = "gpt2.feed_forward_length";
constexpr const char* kBlockCount = "gpt2.block_count";
constexpr const char* kHeadCount = "gpt2.attention.head_count";
constexpr const char* kNormEpsilon = "gpt2.attention.layer_norm_epsilon";

}  // namespace

Gpt2Params Gpt2Params::read(const MetadataView& f) {
    const std::string arch = f.get_string("general.architecture");
    if (arch != kGpt2) fail("model", "{}: architecture '{}' is not gpt2", f.name(), arch);
    Gpt2Params p;
    p.name = string_or(f, "general.name", "");
    p.dim = positive(f, kEmbeddingLength);
    p.n_layers = block_count(f, kBlockCount);
    p.n_heads = positive(f, kHeadCount);
    p.ffn_dim = positive(f, kFeedForwardLength);
    p.n_ctx_train = positive(f, kContextLength);
    p.norm_eps = positive_number_or(f, kNormEpsilon, 1e-5f);
    const auto suffix = [](std::string_view key) { return key.substr(kGpt2.size() + 1); };
    refuse_unknown_keys(f, kGpt2,
                        {suffix(kContextLength), suffix(kEmbeddingLength), suffix(kFeedForwardLength),
                         suffix(kBlockCount), suffix(kHeadCount), suffix(kNormEpsilon)});
    if (!(p.norm_eps > 0)) fail("model", "{}: {} must be positive", f.name(), kNormEpsilon);
    if (p.dim % p.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), p.dim, p.n_heads);
    const std::string embd_name = gpt2_tensor_specs(p).front().name;
    const std::vector<uint64_t>* embd = f.tensor_dims(embd_name);
    if (embd == nullptr) fail("model", "{}: tensor '{}' is missing", f.name(), embd_name);
    if (embd->size() != 2) fail("model", "{}: tensor '{}' must be 2-D", f.name(), embd_name);
    p.n_vocab = static_cast<int64_t>((*embd)[1]);
    return p;
}

std::vector<GgufEntry> Gpt2Params::metadata() const {
    const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
    return {
        {"general.architecture", GgufValue(std::string(kGpt2))},
        {"general.name", GgufValue(name)},
        {kContextLength, u32(n_ctx_train)},
        {kEmbeddingLength, u32(dim)},
        {kFeedForwardLength, u32(ffn_dim)},
        {kBlockCount, u32(n_layers)},
        {kHeadCount, u32(n_heads)},
        {kNormEpsilon, GgufValue(norm_eps)},
    };
}

std::vector<TensorSpec> gpt2_tensor_specs(const Gpt2Params& p) {
    std::vector<TensorSpec> specs;
    gpt2_tensors<int>(p, [&](TensorSpec s) {
        specs.push_back(std::move(s));
        return 0;
    });
    return specs;
}

}  // namespace kiln::arch
