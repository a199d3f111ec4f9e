// kiln-convert for the GPT-2 family (nanoGPT .pt, Hugging Face GPT2LMHeadModel)
// and torch.nn.Transformer seq2seq checkpoints: every converted tensor equals
// the one the PyTorch scripts computed from the torch modules
// (tests/reference/make_gpt2_fixtures.py, make_transformer_fixtures.py:
// expected_tensors.gguf), quantized outputs follow the policy, and bad
// checkpoints give one clear error.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <functional>
#include <set>

#include "engine/core/error.h"
#include "formats/checkpoint/gpt2_layout.h"
#include "formats/checkpoint/hf_folder.h"
#include "formats/checkpoint/nanogpt_state_dict.h"
#include "formats/checkpoint/torch_checkpoint.h"
#include "formats/checkpoint/transformer_state_dict.h"
#include "formats/gguf/gguf_file.h"
#include "support/error_check.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::filesystem::path gpt2_fixture(std::string_view name) { return test::fixtures_dir() / "gpt2" / name; }
std::filesystem::path transformer_fixture(std::string_view name) { return test::fixtures_dir() / "transformer" / name; }

// Converts with the CLI; returns the output path.
std::filesystem::path convert(const test::TempDir& dir, const std::filesystem::path& input, const std::string& extra = "") {
    const auto out = dir.path() / (input.stem().string() + ".gguf");
    // The checks are on the weights: inputs without a vocabulary are written without one.
    const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --no-tokenizer {}", shell_quote(input.string()),
                                                                shell_quote(out.string()), extra));
    INFO(run.err);
    REQUIRE(run.status == 0);
    return out;
}

// Every "<stem>/<name>" tensor of `expected` is in `converted` with the same
// dims and bytes, and `converted` holds nothing else.
void check_tensors(const GgufFile& converted, const GgufFile& expected, const std::string& stem) {
    std::set<std::string> names;
    for (const GgufTensor& e : expected.tensors()) {
        if (!e.name.starts_with(stem + "/")) continue;
        const std::string name = e.name.substr(stem.size() + 1);
        names.insert(name);
        INFO(stem << ": " << name);
        const GgufTensor* t = converted.find_tensor(name);
        REQUIRE(t != nullptr);
        CHECK(t->type == DType::F32);
        CHECK(t->dims == e.dims);
        REQUIRE(t->data.size() == e.data.size());
        CHECK(std::memcmp(t->data.data(), e.data.data(), e.data.size()) == 0);
    }
    REQUIRE(!names.empty());
    for (const GgufTensor& t : converted.tensors()) {
        INFO(stem << ": extra tensor " << t.name);
        CHECK(names.contains(t.name));
    }
}

int64_t meta_int(const GgufFile& f, std::string_view key) { return f.get_int(key); }

}  // namespace

TEST_CASE("nanoGPT checkpoints become gpt2 GGUF files holding exactly the torch tensors", "[convert][gpt2]") {
    test::TempDir dir;
    const GgufFile expected = GgufFile::open(gpt2_fixture("expected_tensors.gguf"));
    const GgufFile converted = GgufFile::open(convert(dir, gpt2_fixture("nanogpt_bias.pt")));
    check_tensors(converted, expected, "nanogpt_bias");  // tied: output.weight = wte; attn.bias buffers dropped
    CHECK(converted.get_string("general.architecture") == "gpt2");
    CHECK(converted.get_string("general.name") == "nanogpt_bias");
    CHECK(meta_int(converted, "gpt2.context_length") == 64);
    CHECK(meta_int(converted, "gpt2.embedding_length") == 48);
    CHECK(meta_int(converted, "gpt2.feed_forward_length") == 192);
    CHECK(meta_int(converted, "gpt2.block_count") == 3);
    CHECK(meta_int(converted, "gpt2.attention.head_count") == 4);
    CHECK(converted.get_number("gpt2.attention.layer_norm_epsilon") == Approx(1e-5).epsilon(1e-6));
    CHECK(converted.find("tokenizer.ggml.model") == nullptr);  // weights only without --tokenizer

    // bias=False and torch.compile's "_orig_mod." prefix: no bias tensors at all.
    const GgufFile nobias = GgufFile::open(convert(dir, gpt2_fixture("nanogpt_nobias_compiled.pt")));
    CHECK(nobias.tensors().size() == 2 + 6 * 3 + 2);
    for (const GgufTensor& t : nobias.tensors()) CHECK_FALSE(t.name.ends_with(".bias"));
    // Tied: output.weight repeats token_embd.weight (llama.cpp's gpt2 loader requires the tensor).
    const GgufTensor& head = nobias.get_tensor("output.weight");
    const GgufTensor& embd = nobias.get_tensor("token_embd.weight");
    CHECK(std::equal(head.data.begin(), head.data.end(), embd.data.begin(), embd.data.end()));
}

TEST_CASE("GPT2LMHeadModel state dicts in .pt files: Conv1D matrices are told by shape and transposed back",
          "[convert][gpt2]") {
    // nanogpt_bias.pt with its four matrices per layer re-laid out as HF's Conv1D (in, out).
    TorchCheckpoint c = read_torch_checkpoint(gpt2_fixture("nanogpt_bias.pt"));
    std::vector<std::vector<std::byte>> transposed;
    transposed.reserve(c.tensors.size());
    for (TorchTensor& t : c.tensors) {
        const bool conv = t.name.ends_with("c_attn.weight") || t.name.ends_with("c_proj.weight") ||
                          t.name.ends_with("c_fc.weight");
        if (!conv) continue;
        const auto rows = static_cast<size_t>(t.shape[0]), cols = static_cast<size_t>(t.shape[1]);
        std::vector<std::byte> out(t.data.size());
        for (size_t r = 0; r < rows; ++r)
            for (size_t col = 0; col < cols; ++col)
                std::memcpy(out.data() + (col * rows + r) * 4, t.data.data() + (r * cols + col) * 4, 4);
        transposed.push_back(std::move(out));
        t.data = transposed.back();
        t.shape = {t.shape[1], t.shape[0]};
    }
    const Checkpoint k = nanogpt_checkpoint_from_state_dict(c, "hf_bin");
    const GgufFile expected = GgufFile::open(gpt2_fixture("expected_tensors.gguf"));
    size_t compared = 0;
    for (const CheckpointTensor& t : k.tensors) {
        INFO(t.name);
        const GgufTensor& e = expected.get_tensor("nanogpt_bias/" + t.name);
        CHECK(t.dims == e.dims);
        REQUIRE(t.data.size() == e.data.size());
        CHECK(std::memcmp(t.data.data(), e.data.data(), e.data.size()) == 0);
        ++compared;
    }
    CHECK(compared == 3 * 12 + 5);
}

TEST_CASE("Hugging Face GPT-2 folders: Conv1D transposed back, tied and untied heads", "[convert][gpt2][safetensors]") {
    test::TempDir dir;
    const GgufFile expected = GgufFile::open(gpt2_fixture("expected_tensors.gguf"));
    const GgufFile untied = GgufFile::open(convert(dir, gpt2_fixture("gpt2_hf_untied")));
    check_tensors(untied, expected, "gpt2_hf_untied");
    CHECK(untied.get_string("general.name") == "gpt2_hf_untied");
    CHECK(meta_int(untied, "gpt2.context_length") == 64);
    CHECK(meta_int(untied, "gpt2.feed_forward_length") == 192);  // n_inner null: 4 * n_embd

    const GgufFile tied = GgufFile::open(convert(dir, gpt2_fixture("gpt2_hf")));
    const GgufTensor& head = tied.get_tensor("output.weight");
    const GgufTensor& embd = tied.get_tensor("token_embd.weight");
    CHECK(std::equal(head.data.begin(), head.data.end(), embd.data.begin(), embd.data.end()));
    CHECK(tied.tensors().size() == untied.tensors().size());
    const GgufTensor& untied_head = untied.get_tensor("output.weight");
    const GgufTensor& untied_embd = untied.get_tensor("token_embd.weight");
    CHECK_FALSE(std::equal(untied_head.data.begin(), untied_head.data.end(), untied_embd.data.begin(), untied_embd.data.end()));
    // The same Conv1D transposition: the QKV matrix is [d, 3d] in ggml order.
    CHECK(tied.get_tensor("blk.2.attn_qkv.weight").dims == std::vector<uint64_t>{48, 144});
    CHECK(tied.get_tensor("blk.0.ffn_down.weight").dims == std::vector<uint64_t>{192, 48});
}

TEST_CASE("torch.nn.Transformer seq2seq checkpoints: in_proj split into Q, K, V", "[convert][transformer]") {
    test::TempDir dir;
    const GgufFile expected = GgufFile::open(transformer_fixture("expected_tensors.gguf"));
    const GgufFile post = GgufFile::open(convert(dir, transformer_fixture("postln_relu.pt")));
    check_tensors(post, expected, "postln_relu");  // separate embeddings, untied generator
    CHECK(post.get_string("general.architecture") == "transformer");
    CHECK(meta_int(post, "transformer.context_length") == 32);
    CHECK(meta_int(post, "transformer.embedding_length") == 32);
    CHECK(meta_int(post, "transformer.feed_forward_length") == 64);
    CHECK(meta_int(post, "transformer.encoder.block_count") == 2);
    CHECK(meta_int(post, "transformer.decoder.block_count") == 2);
    CHECK(meta_int(post, "transformer.attention.head_count") == 4);
    CHECK(post.get_number("transformer.attention.layer_norm_epsilon") == Approx(1e-5).epsilon(1e-6));
    CHECK(post.find("transformer.norm_first")->as_bool() == false);
    CHECK(post.get_string("transformer.ffn_activation") == "relu");

    const GgufFile pre = GgufFile::open(convert(dir, transformer_fixture("preln_gelu_shared.pt")));
    check_tensors(pre, expected, "preln_gelu_shared");  // one embedding, tied generator: no dec.token_embd, no output.weight
    CHECK(pre.find("transformer.norm_first")->as_bool() == true);
    CHECK(pre.get_string("transformer.ffn_activation") == "gelu");
}

TEST_CASE("quantized gpt2 and transformer outputs follow the policy", "[convert][gpt2][transformer]") {
    test::TempDir dir;
    for (const auto& [input, type] : {std::pair{gpt2_fixture("nanogpt_bias.pt"), DType::Q8_0},
                                      std::pair{gpt2_fixture("gpt2_hf_untied"), DType::Q4_0},
                                      std::pair{transformer_fixture("postln_relu.pt"), DType::Q8_0}}) {
        const std::string name(dtype_name(type));
        const GgufFile f = GgufFile::open(convert(dir, input, "--type " + name));
        INFO(input.string() << " as " << name);
        for (const GgufTensor& t : f.tensors()) {
            INFO(t.name);
            const bool matrix = t.dims.size() == 2 && t.dims[1] > 1;
            if (!matrix) CHECK(t.type == DType::F32);  // norms, biases
            else if (t.name == "position_embd.weight") CHECK(t.type == DType::F32);  // llama-quantize never quantizes it
            else if (t.dims[0] % 32 == 0) CHECK(t.type == type);
            else CHECK(t.type == DType::F16);  // rows that are not whole blocks
        }
        CHECK(f.get_int("general.file_type") == (type == DType::Q8_0 ? 7 : 2));
    }
}

TEST_CASE("gpt2: missing tensors, wrong shapes and unknown names", "[convert][gpt2]") {
    const TorchCheckpoint base = read_torch_checkpoint(gpt2_fixture("nanogpt_bias.pt"));
    const auto with = [&](const std::function<void(TorchCheckpoint&)>& change) {
        TorchCheckpoint c = base;
        change(c);
        return c;
    };
    const auto set_arg = [](TorchCheckpoint& c, std::string_view key, std::optional<GgufValue> v) {
        std::erase_if(c.values, [&](const GgufEntry& e) { return e.key == key; });
        if (v) c.values.push_back({std::string(key), *v});
    };
    const auto drop = [](TorchCheckpoint& c, std::string_view name) {
        std::erase_if(c.tensors, [&](const TorchTensor& t) { return t.name == name; });
    };
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_head", {}); }), "t"),
                  "model_args.n_head is missing");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { drop(c, "model.transformer.h.1.mlp.c_fc.weight"); }), "t"),
                  "tensor 'h.1.mlp.c_fc.weight' is missing");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { drop(c, "model.transformer.h.2.ln_1.bias"); }), "t"),
                  "'model.transformer.h.2.ln_1.bias' is missing (model_args.bias is True)");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.bias", false); }), "t"),
                  "is there but model_args.bias is False");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_embd", int64_t{64}); }), "t"),
                  "tensor 'model.transformer.wte.weight' has shape (65, 48) but the hyper-parameters");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.block_size", int64_t{1024}); }), "t"),
                  "'model.transformer.wpe.weight' has shape (64, 48)");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_layer", int64_t{2}); }), "t"),
                  "is not part of a GPT-2 model with 2 layers");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_head", int64_t{5}); }), "t"),
                  "not a multiple of the 5 heads");
    REQUIRE_ERROR(nanogpt_checkpoint_from_state_dict(with([&](auto& c) {
                      c.tensors.push_back(c.tensors.front());
                      c.tensors.back().name = "model.transformer.rotary.inv_freq";
                  }), "t"),
                  "tensor 'model.transformer.rotary.inv_freq' is not part of a GPT-2 model");
}

TEST_CASE("transformer: missing tensors, wrong shapes and hyper-parameters", "[convert][transformer]") {
    const TorchCheckpoint base = read_torch_checkpoint(transformer_fixture("postln_relu.pt"));
    const auto with = [&](const std::function<void(TorchCheckpoint&)>& change) {
        TorchCheckpoint c = base;
        change(c);
        return c;
    };
    const auto set_arg = [](TorchCheckpoint& c, std::string_view key, std::optional<GgufValue> v) {
        std::erase_if(c.values, [&](const GgufEntry& e) { return e.key == key; });
        if (v) c.values.push_back({std::string(key), *v});
    };
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.nhead", {}); }), "t"),
                  "model_args.nhead is missing");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.activation", "swish"); }), "t"),
                  "model_args.activation must be \"relu\" or \"gelu\"");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.dim_feedforward", int64_t{128}); }), "t"),
                  "tensor 'model.transformer.encoder.layers.0.linear1.weight' has shape (64, 32) but the hyper-parameters");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.num_decoder_layers", int64_t{3}); }), "t"),
                  "model_args.num_decoder_layers is 3 but the tensors hold 2 layers");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.num_encoder_layers", int64_t{1}); }), "t"),
                  "is not part of a torch.nn.Transformer seq2seq model with 1 encoder");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.d_model", int64_t{16}); }), "t"),
                  "'model.src_embed.weight' has shape (30, 32)");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([](auto& c) {
                      for (TorchTensor& t : c.tensors)
                          if (t.name == "model.tgt_embed.weight") t.shape = {15, 64};
                  }), "t"),
                  "one shared vocabulary");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([](auto& c) {
                      std::erase_if(c.tensors, [](const TorchTensor& t) { return t.name == "model.generator.weight"; });
                  }), "t"),
                  "'model.generator.weight' is missing");
    REQUIRE_ERROR(transformer_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "specials.eos", "<eos>"); }), "t"),
                  "specials.eos is '<eos>', which is not in itos");
}

TEST_CASE("kiln-convert names the architectures it knows and writes nothing on errors", "[convert][gpt2]") {
    test::TempDir dir, work;
    const auto out = dir.path() / "out.gguf";
    const auto expect_failure = [&](const std::filesystem::path& input, const std::string& extra, std::string_view fragment) {
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} {}", shell_quote(input.string()),
                                                                    shell_quote(out.string()), extra));
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(fragment) != std::string::npos);
        CHECK(run.err.find('\n') == run.err.size() - 1);
        CHECK(std::filesystem::is_empty(dir.path()));
    };
    // A PyTorch checkpoint of some other model: the error lists the known ones.
    expect_failure(test::fixtures_dir() / "torch" / "views.pt", "", "no model kiln knows in the checkpoint; kiln reads llama2.c");
    expect_failure(test::fixtures_dir() / "torch" / "views.pt", "", "torch.nn.Transformer seq2seq");

    // A Hugging Face folder of another architecture.
    const auto copy_folder = [&](const std::string& name) {
        const auto to = work.path() / name;
        std::filesystem::copy(gpt2_fixture("gpt2_hf"), to);
        return to;
    };
    // A copy of the folder whose config.json has `from` replaced by `to`.
    const auto edited_folder = [&](const std::string& name, const std::string& from, const std::string& to) {
        const auto folder = copy_folder(name);
        std::string config;
        {
            std::ifstream in(folder / "config.json");
            config.assign(std::istreambuf_iterator<char>(in), {});
        }
        const size_t at = config.find(from);
        REQUIRE(at != std::string::npos);
        config.replace(at, from.size(), to);
        std::ofstream(folder / "config.json") << config;
        return folder;
    };
    const auto bert = copy_folder("bert");
    {
        std::ofstream(bert / "config.json") << R"({"architectures": ["BertModel"], "model_type": "bert"})";
    }
    expect_failure(bert, "", "kiln reads LlamaForCausalLM (model_type llama), GPT2LMHeadModel (model_type gpt2)");

    // Untied in config.json, but the file has no lm_head.weight.
    const auto untied = edited_folder("untied", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    expect_failure(untied, "", "tensor 'lm_head.weight' is missing");

    // A config that contradicts the tensors: Conv1D shapes are named as stored.
    const auto wide = edited_folder("wide", "\"n_inner\": null", "\"n_inner\": 100");
    expect_failure(wide, "", "tensor 'transformer.h.0.mlp.c_fc.weight' has shape (48, 192) but the hyper-parameters");

    // Another activation.
    const auto relu = edited_folder("relu", "\"gelu_new\"", "\"relu\"");
    expect_failure(relu, "", "activation_function 'relu' is not the tanh GELU");

    // Weights only as pytorch_model.bin: the error says what kiln reads instead.
    const auto bin = work.path() / "bin";
    std::filesystem::create_directory(bin);
    std::filesystem::copy(gpt2_fixture("gpt2_hf") / "config.json", bin / "config.json");
    std::filesystem::copy(test::fixtures_dir() / "torch" / "views.pt", bin / "pytorch_model.bin");
    expect_failure(bin, "", "only pytorch_model.bin: kiln reads Hugging Face weights as safetensors");
}
