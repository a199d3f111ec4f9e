// The architecture descriptors (formats/arch/) against the one loader
// (engine/models/architectures.h): a file written from a descriptor's
// metadata() and tensor table reads back to the same hyper-parameters and
// loads as a model; the loader names what it cannot run.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "engine/models/architectures.h"
#include "engine/models/transformer.h"
#include "formats/arch/gpt2_arch.h"
#include "formats/arch/llama_arch.h"
#include "formats/arch/transformer_arch.h"
#include "formats/gguf/gguf_writer.h"

using namespace kiln;

namespace {

// A GGUF of the metadata and every tensor of `specs` (zeros; optional ones left
// out when `with_optional` is false), parsed back.
std::shared_ptr<const GgufFile> file_of(const std::vector<GgufEntry>& metadata, const std::vector<arch::TensorSpec>& specs,
                                        bool with_optional, std::vector<std::vector<std::byte>>& data) {
    GgufWriter w;
    for (const GgufEntry& e : metadata) w.set(e.key, e.value);
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    for (const arch::TensorSpec& s : specs) {
        if (s.optional && !with_optional) continue;
        if (s.name == "rope_freqs.weight") continue;  // zeros are no valid factors
        uint64_t n = 1;
        for (uint64_t d : s.dims) n *= d;
        data.emplace_back(n * sizeof(float));
        w.add_tensor(s.name, DType::F32, s.dims, data.back());
    }
    data.push_back(w.to_bytes());  // the parsed file reads these bytes (moving `data` keeps every buffer in place)
    return std::make_shared<const GgufFile>(GgufFile::parse(data.back(), "descriptor.gguf"));
}

}  // namespace

TEST_CASE("a llama written from its descriptor reads back and loads", "[architectures]") {
    arch::LlamaParams p;
    p.name = "tiny";
    p.n_vocab = 11;
    p.n_ctx_train = 32;
    p.dim = 24;
    p.n_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.ffn_dim = 40;
    p.n_rot = 4;
    p.norm_eps = 1e-6f;
    p.rope_base = 500000.0f;
    const bool tied = GENERATE(false, true);
    std::vector<std::vector<std::byte>> data;
    const auto file = file_of(p.metadata(), arch::llama_tensor_specs(p), !tied, data);
    const arch::LlamaParams q = arch::LlamaParams::read(*file);
    CHECK(q.name == p.name);
    CHECK(q.n_vocab == p.n_vocab);
    CHECK(q.n_ctx_train == p.n_ctx_train);
    CHECK(q.dim == p.dim);
    CHECK(q.n_layers == p.n_layers);
    CHECK(q.n_heads == p.n_heads);
    CHECK(q.n_kv_heads == p.n_kv_heads);
    CHECK(q.ffn_dim == p.ffn_dim);
    CHECK(q.n_rot == p.n_rot);
    CHECK(q.norm_eps == p.norm_eps);
    CHECK(q.rope_base == p.rope_base);
    const auto model = load_causal_lm(file);
    CHECK(model->info().architecture == "llama");
    CHECK(model->info().n_vocab == 11);
    CHECK(check_model(*file) == "llama");
}

TEST_CASE("a gpt2 written from its descriptor reads back and loads", "[architectures]") {
    arch::Gpt2Params p;
    p.name = "tiny";
    p.n_vocab = 13;
    p.n_ctx_train = 16;
    p.dim = 12;
    p.n_layers = 2;
    p.n_heads = 3;
    p.ffn_dim = 48;
    p.norm_eps = 1e-4f;
    const bool with_optional = GENERATE(false, true);  // biases and an untied head, or none of them
    std::vector<std::vector<std::byte>> data;
    const auto file = file_of(p.metadata(), arch::gpt2_tensor_specs(p), with_optional, data);
    const arch::Gpt2Params q = arch::Gpt2Params::read(*file);
    CHECK(q.n_vocab == p.n_vocab);
    CHECK(q.n_ctx_train == p.n_ctx_train);
    CHECK(q.dim == p.dim);
    CHECK(q.n_layers == p.n_layers);
    CHECK(q.n_heads == p.n_heads);
    CHECK(q.ffn_dim == p.ffn_dim);
    CHECK(q.norm_eps == p.norm_eps);
    const auto model = load_causal_lm(file);
    CHECK(model->info().architecture == "gpt2");
    CHECK(model->info().n_ctx_train == 16);
}

TEST_CASE("a transformer written from its descriptor reads back and loads", "[architectures]") {
    arch::TransformerParams p;
    p.n_vocab = 9;
    p.n_ctx = 8;
    p.dim = 8;
    p.n_encoder_layers = 1;
    p.n_decoder_layers = 2;
    p.n_heads = 2;
    p.ffn_dim = 16;
    p.norm_first = true;
    p.activation = arch::TransformerParams::Activation::Gelu;
    std::vector<std::vector<std::byte>> data;
    const auto file = file_of(p.metadata(), arch::transformer_tensor_specs(p), GENERATE(false, true), data);
    const arch::TransformerParams q = arch::TransformerParams::read(*file);
    CHECK(q.n_encoder_layers == 1);
    CHECK(q.n_decoder_layers == 2);
    CHECK(q.norm_first);
    CHECK(q.activation == arch::TransformerParams::Activation::Gelu);
    CHECK(is_seq2seq(*file));
    CHECK(check_model(*file) == "transformer");
    const auto model = load_seq2seq(file);
    CHECK(model->config().bos == 1);
    CHECK_THROWS_WITH(load_causal_lm(file), Catch::Contains("is an encoder-decoder model, not a decoder-only one"));
}

TEST_CASE("the loader names an architecture it does not run and lists those it does", "[architectures]") {
    arch::LlamaParams p;
    p.n_vocab = 5, p.n_ctx_train = 4, p.dim = 8, p.n_layers = 1, p.n_heads = 2, p.n_kv_heads = 2, p.ffn_dim = 8,
    p.n_rot = 4;
    std::vector<GgufEntry> md = p.metadata();
    md[0].value = GgufValue("mamba");
    std::vector<std::vector<std::byte>> data;
    const auto file = file_of(md, arch::llama_tensor_specs(p), false, data);
    CHECK_THROWS_WITH(load_causal_lm(file), Catch::Contains("architecture 'mamba' is not supported (supported: llama, gpt2") &&
                                                Catch::Contains("transformer)"));
    CHECK_THROWS_WITH(check_model(*file), Catch::Contains("architecture 'mamba' is not supported"));
    CHECK_THROWS_WITH(load_seq2seq(file), Catch::Contains("'mamba' is not an encoder-decoder model"));
}

TEST_CASE("a tensor of the wrong shape is refused with its name and both shapes", "[architectures]") {
    arch::LlamaParams p;
    p.n_vocab = 5, p.n_ctx_train = 4, p.dim = 8, p.n_layers = 1, p.n_heads = 2, p.n_kv_heads = 2, p.ffn_dim = 8,
    p.n_rot = 4;
    std::vector<arch::TensorSpec> specs = arch::llama_tensor_specs(p);
    for (arch::TensorSpec& s : specs)
        if (s.name == "blk.0.ffn_up.weight") s.dims = {8, 9};
    std::vector<std::vector<std::byte>> data;
    const auto file = file_of(p.metadata(), specs, false, data);
    CHECK_THROWS_WITH(check_model(*file), Catch::Contains("tensor 'blk.0.ffn_up.weight' has shape [8, 9], expected [8, 8]"));
}
