#include "formats/arch/transformer_arch.h"

#include "engine/core/error.h"
#include "formats/arch/hparams.h"

namespace kiln::arch {

namespace {

constexpr const char* kContextLength = "transformer.context_length";
constexpr const char* kEmbeddingLength = "transformer.embedding_length";
constexpr const char* kFeedForwardLength = "transformer.feed_forward_length";
constexpr const char* kEncoderBlockCount = "transformer.encoder.block_count";
constexpr const char* kDecoderBlockCount = "transformer.decoder.block_count";
constexpr const char* kHeadCount = "transformer.attention.head_count";
constexpr const char* kNormEpsilon = "transformer.attention.layer_norm_epsilon";
constexpr const char* kNormFirst = "transformer.norm_first";
constexpr const char* kFfnActivation = "transformer.ffn_activation";

}  // namespace

TransformerParams TransformerParams::read(const MetadataView& f) {
    const std::string arch = f.get_string("general.architecture");
    if (arch != kTransformer) fail("model", "{}: architecture '{}' is not transformer", f.name(), arch);
    TransformerParams p;
    p.name = string_or(f, "general.name", "");
    p.dim = positive(f, kEmbeddingLength);
    p.ffn_dim = positive(f, kFeedForwardLength);
    p.n_encoder_layers = block_count(f, kEncoderBlockCount);
    p.n_decoder_layers = block_count(f, kDecoderBlockCount);
    p.n_heads = positive(f, kHeadCount);
    p.n_ctx = positive(f, kContextLength);
    p.norm_eps = positive_number_or(f, kNormEpsilon, 1e-5f);
    if (!(p.norm_eps > 0)) fail("model", "{}: {} must be positive", f.name(), kNormEpsilon);
    p.norm_first = bool_or(f, kNormFirst, false);
    const std::string act = string_or(f, kFfnActivation, "relu");
    if (act == "relu")
        p.activation = Activation::Relu;
    else if (act == "gelu")
        p.activation = Activation::Gelu;
    else
        fail("model", "{}: {} '{}' is not one of relu, gelu", f.name(), kFfnActivation, act);
    if (p.dim % p.n_heads != 0) fail("model", "{}: width {} is not a multiple of {} heads", f.name(), p.dim, p.n_heads);
    const std::string embd_name = transformer_tensor_specs(p).front().name;
    const std::vector<uint64_t>* embd = f.tensor_dims(embd_name);
    if (embd == nullptr) fail("model", "{}: tensor '{}' is missing", f.name(), embd_name);
    if (embd->size() != 2) fail("model", "{}: tensor '{}' must be 2-D", f.name(), embd_name);
    p.n_vocab = static_cast<int64_t>((*embd)[1]);
    return p;
}

std::vector<GgufEntry> TransformerParams::metadata() const {
    const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
    return {
        {"general.architecture", GgufValue(std::string(kTransformer))},
        {"general.name", GgufValue(name)},
        {kContextLength, u32(n_ctx)},
        {kEmbeddingLength, u32(dim)},
        {kFeedForwardLength, u32(ffn_dim)},
        {kEncoderBlockCount, u32(n_encoder_layers)},
        {kDecoderBlockCount, u32(n_decoder_layers)},
        {kHeadCount, u32(n_heads)},
        {kNormEpsilon, GgufValue(norm_eps)},
        {kNormFirst, GgufValue(norm_first)},
        {kFfnActivation, GgufValue(std::string(activation == Activation::Gelu ? "gelu" : "relu"))},
    };
}

std::vector<TensorSpec> transformer_tensor_specs(const TransformerParams& p) {
    std::vector<TensorSpec> specs;
    transformer_tensors<int>(p, [&](TensorSpec s) {
        specs.push_back(std::move(s));
        return 0;
    });
    return specs;
}

TransformerTensors<std::string> transformer_tensor_names(const TransformerParams& p) {
    return transformer_tensors<std::string>(p, [](const TensorSpec& s) { return s.name; });
}

}  // namespace kiln::arch
