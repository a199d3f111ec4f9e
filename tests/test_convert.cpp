// kiln-convert: the quantization policy, GGUF re-quantization checked by
// running the results, and outputs that are whole or absent.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "convert/convert.h"
#include "engine/models/architectures.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/tensor_data.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::string model() { return (test::shared_models_dir() / "stories260K.gguf").string(); }

size_t files_in(const std::filesystem::path& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
    return n;
}

double perplexity(const std::filesystem::path& gguf, const std::filesystem::path& text) {
    const auto run = test::run_tool("kiln-perplexity", fmt::format("-m {} -f {} -c 64 -t 2 --score-all", shell_quote(gguf.string()),
                                                                   shell_quote(text.string())));
    INFO(run.err);
    REQUIRE(run.status == 0);
    double ppl = 0;
    REQUIRE(std::sscanf(run.out.c_str(), "PPL = %lf", &ppl) == 1);
    return ppl;
}

}  // namespace

TEST_CASE("quantization policy: matrices take the type, the rest stays float", "[convert]") {
    using convert::MixTensor;
    const convert::ModelFacts llama{"llama", 1, 2, 2, 0};
    const std::vector<MixTensor> tensors = {{"blk.0.attn_q.weight", DType::F32, {64, 512}},
                                            {"blk.0.attn_norm.weight", DType::F32, {64}},
                                            {"blk.0.attn_k.weight", DType::F16, {64, 1}},  // 1-D in disguise
                                            {"blk.0.ffn_down.weight", DType::F32, {172, 64}},
                                            {"position_embd.weight", DType::BF16, {64, 64}}};  // never quantized
    const auto q8 = convert::choose_tensor_types(*convert::find_quant_mix("q8_0"), llama, tensors);
    CHECK(q8[0].type == DType::Q8_0);
    CHECK(q8[1].type == DType::F32);
    CHECK(q8[2].type == DType::F32);
    CHECK(q8[3].type == DType::F16);  // 172 is not whole blocks of 32: llama-quantize refuses, kiln keeps f16
    CHECK(q8[3].llama_refuses);
    CHECK(q8[4].type == DType::BF16);
    const auto bf16 = convert::choose_tensor_types(*convert::find_quant_mix("bf16"), llama, tensors);
    CHECK(bf16[3].type == DType::BF16);  // float types have no blocks
    CHECK_FALSE(bf16[3].llama_refuses);
}

TEST_CASE("GGUF in, GGUF out: a plain copy is byte-identical", "[convert]") {
    test::TempDir dir;
    const auto out = dir.path() / "copy.gguf";
    const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {}", shell_quote(model()), shell_quote(out.string())));
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(test::read_file(out) == test::read_file(model()));
    CHECK(run.err.find("architecture llama, 292800 parameters, 48 tensors (48 f32)") != std::string::npos);
}

TEST_CASE("re-quantized models run, and Q8_0 stays within 0.5% of F32 perplexity", "[convert]") {
    test::TempDir dir;
    const auto text = dir.path() / "text.txt";
    const auto corpus = test::read_file(test::shared_dir() / "data" / "tinyshakespeare.txt");
    test::write_file(text, std::span(corpus).subspan(500000, 40000));  // far from the start used elsewhere
    const double base = perplexity(model(), text);
    for (const char* type : {"f16", "bf16", "q8_0", "q4_0"}) {
        const auto out = dir.path() / fmt::format("model-{}.gguf", type);
        const auto run = test::run_tool("kiln-convert",
                                        fmt::format("{} -o {} --type {}", shell_quote(model()), shell_quote(out.string()), type));
        INFO(type << ": " << run.err);
        REQUIRE(run.status == 0);
        const GgufFile f = GgufFile::open(out);
        CHECK(f.get_tensor("blk.0.attn_q.weight").type == *parse_dtype(type));
        CHECK(f.get_tensor("blk.0.attn_norm.weight").type == DType::F32);
        const double ppl = perplexity(out, text);
        const double change = ppl / base - 1;
        WARN(fmt::format("{}: PPL {:.4f} vs f32 {:.4f} ({:+.3f}%)", type, ppl, base, change * 100));
        if (std::string_view(type) == "q8_0") CHECK(std::abs(change) < 0.005);
        if (std::string_view(type) == "q4_0") {
            CHECK(std::abs(change) < 0.10);  // coarse, but a broken quantizer is far worse
            CHECK(run.err.find("kept as f16, rows not whole q4_0 blocks: blk.0.ffn_down.weight") != std::string::npos);
        } else {
            CHECK(std::abs(change) < 0.005);
        }
    }
}

TEST_CASE("failed conversions leave nothing at the output path", "[convert]") {
    test::TempDir dir;
    const auto out = dir.path() / "out.gguf";
    auto expect_failure = [&](const std::string& args, int status, std::string_view fragment) {
        const auto run = test::run_tool("kiln-convert", args);
        INFO(run.err);
        CHECK(run.status == status);
        CHECK(run.err.find(fragment) != std::string::npos);
        CHECK(run.err.find('\n') == run.err.size() - 1);
        CHECK_FALSE(std::filesystem::exists(out));
        CHECK(files_in(dir.path()) == 0);
    };
    const auto cut = test::TempDir();
    const auto bytes = test::read_file(model());
    test::write_file(cut.path() / "cut.gguf", std::span(bytes).first(bytes.size() - 1000));
    expect_failure(fmt::format("{} -o {}", shell_quote((cut.path() / "cut.gguf").string()), shell_quote(out.string())), 1,
                   "past the end of the file");
    test::write_file(cut.path() / "notes.txt", std::as_bytes(std::span("just some text", 14)));
    expect_failure(fmt::format("{} -o {}", shell_quote((cut.path() / "notes.txt").string()), shell_quote(out.string())),
                   1, "cannot tell what kind of checkpoint");
    expect_failure(fmt::format("{} -o {}", shell_quote(model()), shell_quote((dir.path() / "no" / "x.gguf").string())), 1,
                   "does not exist");
    expect_failure(fmt::format("{} -o {} --type q9_k", shell_quote(model()), shell_quote(out.string())), 2,
                   "--type must be one of f32, f16, bf16, q8_0, q4_0,");
    expect_failure(fmt::format("{}", shell_quote(model())), 2, "expected -o OUT.gguf");
}

TEST_CASE("PyTorch checkpoints convert to GGUF files whose logits match PyTorch", "[convert][pytorch]") {
    test::TempDir dir;
    const GgufFile ref = GgufFile::open(test::fixtures_dir() / "torch" / "llama_f32_logits.gguf");
    const auto tokens = test::values_of<int32_t>(ref.get_tensor("tokens"));
    const auto want = test::values_of<float>(ref.get_tensor("logits"));
    // float16/bfloat16 checkpoints hold rounded weights: their logits move by about the rounding.
    for (auto [stem, tolerance] : {std::pair{"llama_f32", 1e-4f}, std::pair{"llama_f16", 2e-2f}, std::pair{"llama_bf16", 1e-1f}}) {
        const auto out = dir.path() / fmt::format("{}.gguf", stem);
        const auto input = test::fixtures_dir() / "torch" / fmt::format("{}.pt", stem);
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --no-tokenizer", shell_quote(input.string()),
                                                                    shell_quote(out.string())));
        INFO(stem << ": " << run.err);
        REQUIRE(run.status == 0);
        auto file = std::make_shared<const GgufFile>(GgufFile::open(out));
        const auto model = load_causal_lm(file);
        auto ctx = model->new_session(32, 1, Executor::Mode::Fast);
        ThreadPool pool(2);
        const auto logits = ctx->eval(tokens, pool, /*all_logits=*/true);
        REQUIRE(logits.size() == want.size());
        float worst = 0;
        for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(logits[i] - want[i]));
        CHECK(worst < tolerance);
    }
}

TEST_CASE("hostile or broken PyTorch files are refused and write nothing", "[convert][pytorch]") {
    test::TempDir dir;
    const auto out = dir.path() / "out.gguf";
    for (auto [file, fragment] : {std::pair{"hostile_os_system.pt", "refers to os.system"},
                                  std::pair{"traversal.pt", "points outside the archive"},
                                  std::pair{"truncated.pt", "[zip]"},
                                  std::pair{"deflated.pt", "deflate"}}) {
        const auto input = test::fixtures_dir() / "torch" / file;
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {}", shell_quote(input.string()),
                                                                    shell_quote(out.string())));
        INFO(file << ": " << run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(fragment) != std::string::npos);
        CHECK(run.err.find('\n') == run.err.size() - 1);
        CHECK(std::filesystem::is_empty(dir.path()));
    }
    CHECK_FALSE(std::filesystem::exists("/tmp/kiln-pwned"));
}

TEST_CASE("llama2.c checkpoints convert to GGUF files that generate the same greedy text", "[convert][llama2c]") {
    test::TempDir dir;
    const auto out = dir.path() / "from-bin.gguf";
    const auto bin = test::shared_models_dir() / "stories260K.bin";
    const auto tok = test::shared_models_dir() / "tok512.bin";
    const auto convert = test::run_tool("kiln-convert", fmt::format("{} --tokenizer {} -o {}", shell_quote(bin.string()),
                                                                    shell_quote(tok.string()), shell_quote(out.string())));
    INFO(convert.err);
    REQUIRE(convert.status == 0);
    const std::string args = "-p 'Once upon a time' -n 100 --temp 0 -t 2";
    const auto converted = test::run_tool("kiln", fmt::format("-m {} {}", shell_quote(out.string()), args));
    const auto original = test::run_tool("kiln", fmt::format("-m {} {}", shell_quote(model()), args));
    REQUIRE(converted.status == 0);
    REQUIRE(original.status == 0);
    CHECK(converted.out == original.out);
    CHECK(converted.out.size() > 200);  // a real story, not an empty or cut-short one
    // Without a tokenizer the weights convert only when --no-tokenizer says so
    // (the file then holds no vocabulary, and the note says what that means).
    const auto bare = dir.path() / "bare.gguf";
    const auto refused = test::run_tool("kiln-convert", fmt::format("{} -o {}", shell_quote(bin.string()), shell_quote(bare.string())));
    CHECK(refused.status == 1);
    CHECK(refused.err.find("holds no tokenizer: give --tokenizer FILE") != std::string::npos);
    CHECK(refused.err.find('\n') == refused.err.size() - 1);
    CHECK_FALSE(std::filesystem::exists(bare));
    const auto written = test::run_tool("kiln-convert", fmt::format("{} -o {} --no-tokenizer", shell_quote(bin.string()),
                                                                    shell_quote(bare.string())));
    REQUIRE(written.status == 0);
    CHECK(written.err.find("without a tokenizer (--no-tokenizer)") != std::string::npos);
    CHECK(GgufFile::open(bare).find("tokenizer.ggml.tokens") == nullptr);
    // A vocabulary is never replaced behind the user's back.
    const auto misuse = test::run_tool("kiln-convert", fmt::format("{} --tokenizer {} -o {}", shell_quote(model()),
                                                                   shell_quote(tok.string()), shell_quote(bare.string())));
    CHECK(misuse.status == 1);
    CHECK(misuse.err.find("already holds a vocabulary; --tokenizer") != std::string::npos);
}

TEST_CASE("Hugging Face Llama folders convert to the same tensors llama.cpp's file holds", "[convert][safetensors]") {
    // The fixture folder is stories260K in HF's layout (q/k rows permuted for rotate-half RoPE).
    test::TempDir dir;
    const auto out = dir.path() / "from-hf.gguf";
    const auto folder = test::fixtures_dir() / "safetensors" / "stories260K_hf";
    const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {}", shell_quote(folder.string()),
                                                                shell_quote(out.string())));
    INFO(run.err);
    REQUIRE(run.status == 0);
    const GgufFile converted = GgufFile::open(out);
    const GgufFile original = GgufFile::open(model());
    REQUIRE(converted.tensors().size() == original.tensors().size());
    for (const GgufTensor& t : original.tensors()) {
        INFO(t.name);
        const GgufTensor& u = converted.get_tensor(t.name);
        CHECK(u.dims == t.dims);
        CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
    }
    CHECK(converted.get_int("llama.attention.head_count_kv") == 4);
}

TEST_CASE("export to safetensors and back is lossless for float models", "[convert][safetensors]") {
    test::TempDir dir;
    const auto folder = dir.path() / "hf";
    const auto back = dir.path() / "back.gguf";
    auto convert = [&](const std::string& args) {
        const auto run = test::run_tool("kiln-convert", args);
        INFO(run.err);
        REQUIRE(run.status == 0);
    };
    convert(fmt::format("{} -o {} --to safetensors", shell_quote(model()), shell_quote(folder.string())));
    // The exported folder holds HF's layout: the same bytes as the independently made fixture folder.
    const auto fixture = test::fixtures_dir() / "safetensors" / "stories260K_hf";
    const SafetensorsFile exported = SafetensorsFile::open(folder / "model.safetensors");
    const SafetensorsFile reference = SafetensorsFile::open(fixture / "model.safetensors");
    REQUIRE(exported.tensors().size() == reference.tensors().size());
    for (const SafetensorsTensor& t : reference.tensors()) {
        INFO(t.name);
        const SafetensorsTensor* e = exported.find_tensor(t.name);
        REQUIRE(e != nullptr);
        CHECK(e->shape == t.shape);
        CHECK(std::equal(e->data.begin(), e->data.end(), t.data.begin(), t.data.end()));
    }
    // And back to GGUF: every tensor as llama.cpp wrote it, the vocabulary from the folder's tokenizer.model.
    convert(fmt::format("{} -o {}", shell_quote(folder.string()), shell_quote(back.string())));
    const GgufFile original = GgufFile::open(model());
    const GgufFile round_trip = GgufFile::open(back);
    for (const GgufTensor& t : original.tensors()) {
        INFO(t.name);
        const GgufTensor& u = round_trip.get_tensor(t.name);
        CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
    }
    CHECK(round_trip.get_string("tokenizer.ggml.model") == "llama");
    CHECK(round_trip.find("tokenizer.ggml.tokens")->as_array()->items.size() == 512);
    const auto bad = test::run_tool("kiln-convert", fmt::format("{} -o {} --to onnx", shell_quote(model()),
                                                                shell_quote(folder.string())));
    CHECK(bad.status == 2);
}
