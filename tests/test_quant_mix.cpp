// kiln-convert --type <mix> against llama-quantize: tests/reference/
// make_quant_mix_fixtures.py ran llama-quantize (llama.cpp c392e509, no importance
// matrix) on three small F16 Llama models for every mix and stored each output
// tensor's type and SHA-256, and general.file_type, in tests/fixtures/quant_mixes.json.
// kiln's rule must choose the same type for every tensor; where kiln has the
// reference quantizers of every type a mix uses, its bytes must be the same too.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/quant_mix.h"
#include "engine/core/dtype.h"
#include "engine/models/llama.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/sha256.h"

using namespace kiln;
using nlohmann::json;

namespace {

const json& fixture() {
    static const json j = [] {
        std::ifstream in(test::fixtures_dir() / "quant_mixes.json");
        REQUIRE(in);
        return json::parse(in);
    }();
    return j;
}

DType dtype_of(const std::string& name) {
    const std::optional<DType> t = parse_dtype(name);
    REQUIRE(t);
    return *t;
}

std::vector<convert::MixTensor> tensors_of(const json& input) {
    std::vector<convert::MixTensor> out;
    for (const json& t : input["tensors"])
        out.push_back({t[0].get<std::string>(), dtype_of(t[1].get<std::string>()), t[2].get<std::vector<uint64_t>>()});
    return out;
}

convert::ModelFacts facts_of(const json& input) {
    const json& f = input["facts"];
    return {f["architecture"].get<std::string>(), f["block_count"].get<uint32_t>(), f["head_count"].get<uint32_t>(),
            f["head_count_kv"].get<uint32_t>(), f["expert_count"].get<uint32_t>()};
}

convert::QuantMix mix_named(const std::string& name) {
    const auto m = convert::find_quant_mix(name);
    REQUIRE(m);
    return *m;
}

std::string short_hash(std::span<const std::byte> data) { return test::sha256_hex(data).substr(0, 16); }

// The script's values (see its docstring): exact in float32, so any program
// that follows the recipe gets the same bits.
uint32_t mix32(uint32_t x) {
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    x *= 0x297A2D39u;
    x ^= x >> 15;
    return x;
}

std::vector<float> synthetic_values(uint32_t k, uint64_t n, uint64_t row_len) {
    std::vector<float> v(n);
    for (uint64_t i = 0; i < n; ++i) {
        const uint32_t h = mix32(static_cast<uint32_t>(i) * 0x9E3779B1u + (k + 1) * 0x85EBCA77u);
        const float u = static_cast<float>(h >> 8) / 16777216.0f;
        v[i] = (u * 2.0f - 1.0f) * std::ldexp(1.0f, -static_cast<int>((i / row_len) % 5));
    }
    return v;
}

// The input model `name` of the fixture, written under `dir`.
std::filesystem::path write_input(const std::string& name, const std::filesystem::path& dir) {
    const std::filesystem::path path = dir / (name + ".gguf");
    if (name == "stories260K") {  // the script made it F16 with llama-quantize
        convert::ConvertOptions o;
        o.input = test::shared_models_dir() / "stories260K.gguf";
        o.no_tokenizer = true;
        o.output = path;
        o.mix = mix_named("f16");
        std::FILE* log = std::tmpfile();
        convert::convert(o, log);
        std::fclose(log);
        return path;
    }
    const json& input = fixture()["inputs"][name];
    const convert::ModelFacts f = facts_of(input);
    GgufWriter w;
    w.set("general.architecture", std::string("llama"));
    w.set("llama.block_count", f.n_layer);
    w.set("llama.attention.head_count", f.n_head);
    w.set("llama.attention.head_count_kv", f.n_head_kv);
    // What kiln's Llama loader needs besides: widths from the tensors' shapes.
    const auto tensors = tensors_of(input);
    auto width = [&](const std::string& tensor, size_t axis) {
        for (const auto& t : tensors)
            if (t.name == tensor) return static_cast<uint32_t>(t.dims[axis]);
        FAIL("no " << tensor);
        return uint32_t{0};
    };
    const uint32_t dim = width("token_embd.weight", 0);
    w.set("llama.embedding_length", dim);
    w.set("llama.feed_forward_length", width("blk.0.ffn_gate.weight", 1));
    w.set("llama.context_length", uint32_t{128});
    w.set("llama.rope.dimension_count", dim / f.n_head);
    w.set("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set("llama.vocab_size", width("token_embd.weight", 1));
    std::vector<std::vector<std::byte>> data;
    uint32_t k = 0;
    for (const convert::MixTensor& t : tensors) {
        const uint64_t n = *checked_element_count(t.dims);
        const std::vector<float> values = synthetic_values(k++, n, t.dims[0]);
        data.emplace_back(*checked_bytes(t.type, n));
        type_traits(t.type).from_float_ref(values.data(), data.back().data(), static_cast<int64_t>(n));
        w.add_tensor(t.name, t.type, t.dims, data.back());
    }
    w.write(path);
    return path;
}

std::filesystem::path convert_to(const std::filesystem::path& in, const std::string& mix, const std::filesystem::path& out) {
    convert::ConvertOptions o;
    o.input = in;
    o.no_tokenizer = true;
    o.output = out;
    o.mix = mix_named(mix);
    std::FILE* log = std::tmpfile();
    convert::convert(o, log);
    std::fclose(log);
    return out;
}

// Whether kiln can write every type the rule picks for this mix and input.
bool kiln_writes_all(const std::vector<convert::TensorChoice>& choices, const std::vector<convert::MixTensor>& tensors) {
    for (size_t i = 0; i < choices.size(); ++i)
        if (choices[i].type != tensors[i].type && type_traits(choices[i].type).from_float_ref == nullptr) return false;
    return true;
}

}  // namespace

TEST_CASE("quant mixes: names, file types and llama.cpp's names for them", "[quant_mix]") {
    CHECK(mix_named("q4_k_m").file_type == FileType::MostlyQ4_K_M);
    CHECK(mix_named("Q4_K").file_type == FileType::MostlyQ4_K_M);  // llama-quantize's alias
    CHECK(mix_named("q3_k").file_type == FileType::MostlyQ3_K_M);
    CHECK(mix_named("IQ4_XS").base == DType::IQ4_XS);
    CHECK_FALSE(convert::find_quant_mix("q4_k_x"));
    CHECK_FALSE(convert::find_quant_mix("q8_k"));
    CHECK(file_type_name(15) == "Q4_K - Medium");
    CHECK(file_type_name(0) == "all F32");
    CHECK(file_type_name(25) == "IQ4_NL - 4.5 bpw");
    CHECK(file_type_name(4) == "unknown, may not work");
    const std::vector<DType> f32_model = {DType::F32, DType::F32};
    CHECK(describe_file_type(std::nullopt, f32_model) == "all F32 (guessed)");
    const std::vector<DType> q4k = {DType::F32, DType::Q4_K, DType::Q4_K, DType::Q6_K};
    CHECK(describe_file_type(std::nullopt, q4k) == "Q4_K - Medium (guessed)");
    CHECK(describe_file_type(17, q4k) == "Q5_K - Medium");
}

TEST_CASE("quant mixes: kiln picks llama-quantize's type for every tensor", "[quant_mix]") {
    const json& f = fixture();
    REQUIRE(f["mixes"].size() == 19);
    for (const auto& [mix_name, per_input] : f["mixes"].items()) {
        const convert::QuantMix mix = mix_named(mix_name);
        for (const auto& [input_name, expected] : per_input.items()) {
            INFO(mix_name << " on " << input_name);
            const json& input = f["inputs"][input_name];
            const auto tensors = tensors_of(input);
            const auto choices = convert::choose_tensor_types(mix, facts_of(input), tensors);
            bool refused = false;
            for (const auto& c : choices) refused = refused || c.llama_refuses;
            if (expected.contains("error")) {
                CHECK(expected["error"].get<std::string>() == "Unsupported tensor size encountered");
                CHECK(refused);
                continue;
            }
            CHECK_FALSE(refused);
            CHECK(expected["file_type"].get<uint32_t>() == static_cast<uint32_t>(mix.file_type));
            REQUIRE(expected["tensors"].size() == tensors.size());
            for (size_t i = 0; i < tensors.size(); ++i) {
                INFO(tensors[i].name);
                CHECK(dtype_name(choices[i].type) == expected["tensors"][tensors[i].name][0].get<std::string>());
            }
        }
    }
}

TEST_CASE("quant mixes: kiln-convert writes llama-quantize's bytes", "[quant_mix]") {
    const json& f = fixture();
    test::TempDir dir;
    std::map<std::string, std::filesystem::path> inputs;
    for (const auto& [name, input] : f["inputs"].items()) {
        INFO("input " << name);
        inputs[name] = write_input(name, dir.path());
        const GgufFile file = GgufFile::open(inputs[name]);
        for (const GgufTensor& t : file.tensors()) {
            INFO(t.name);
            REQUIRE(short_hash(t.data) == input["sha256"][t.name].get<std::string>().substr(0, 16));
        }
    }
    std::vector<std::string> proven, partly, waiting;
    for (const auto& [mix_name, per_input] : f["mixes"].items()) {
        const convert::QuantMix mix = mix_named(mix_name);
        bool all = true;
        std::vector<std::string> compared;
        for (const auto& [input_name, expected] : per_input.items()) {
            if (expected.contains("error")) continue;  // llama-quantize wrote nothing to compare with
            const auto tensors = tensors_of(f["inputs"][input_name]);
            if (!kiln_writes_all(convert::choose_tensor_types(mix, facts_of(f["inputs"][input_name]), tensors), tensors)) {
                all = false;
                continue;
            }
            INFO(mix_name << " on " << input_name);
            const auto out = convert_to(inputs[input_name], mix_name, dir.path() / (mix_name + "." + input_name + ".gguf"));
            const GgufFile file = GgufFile::open(out);
            CHECK(file.get_int("general.file_type") == expected["file_type"].get<int64_t>());
            REQUIRE(file.tensors().size() == expected["tensors"].size());
            for (const GgufTensor& t : file.tensors()) {
                INFO(t.name);
                CHECK(dtype_name(t.type) == expected["tensors"][t.name][0].get<std::string>());
                CHECK(short_hash(t.data) == expected["tensors"][t.name][1].get<std::string>());
            }
            std::filesystem::remove(out);
            compared.push_back(input_name);
        }
        if (all) proven.push_back(mix_name);
        else if (!compared.empty()) partly.push_back(fmt::format("{} ({})", mix_name, fmt::join(compared, ", ")));
        else waiting.push_back(mix_name);
    }
    WARN("byte-identical to llama-quantize on every input: " << fmt::format("{}", fmt::join(proven, " ")));
    WARN("byte-identical on the inputs named, the others need a missing quantizer: " << fmt::format("{}", fmt::join(partly, " ")));
    WARN("not yet comparable (a type without a reference quantizer): " << fmt::format("{}", fmt::join(waiting, " ")));
    const std::set<std::string> done(proven.begin(), proven.end());
    for (const char* mix : {"f32", "f16", "bf16", "q8_0"}) CHECK(done.count(mix) == 1);
}

TEST_CASE("quant mixes: a quantized file re-quantized is dequantize-then-quantize", "[quant_mix]") {
    test::TempDir dir;
    // The brief's case is Q4_K_M -> Q8_0; until kiln writes every type of
    // q4_k_m, a q4_0 file (q4_0 and q8_0 tensors) takes its place.
    const json& f = fixture();
    const std::string input = "gqa4_8layers";
    const auto tensors = tensors_of(f["inputs"][input]);
    const bool have_q4_k_m =
        kiln_writes_all(convert::choose_tensor_types(mix_named("q4_k_m"), facts_of(f["inputs"][input]), tensors), tensors);
    const std::string first_mix = have_q4_k_m ? "q4_k_m" : "q4_0";
    const std::string source_name = have_q4_k_m ? input : "odd_rows_tied";
    if (!have_q4_k_m) WARN("q4_k_m needs quantizers kiln lacks; re-quantizing a q4_0 file instead");
    const auto quantized = convert_to(write_input(source_name, dir.path()), first_mix, dir.path() / "first.gguf");
    const auto requantized = convert_to(quantized, "q8_0", dir.path() / "second.gguf");

    const auto source = std::make_shared<GgufFile>(GgufFile::open(quantized));
    const auto result = std::make_shared<GgufFile>(GgufFile::open(requantized));
    CHECK(result->get_int("general.file_type") == 7);
    bool any_requantized = false;
    for (const GgufTensor& s : source->tensors()) {
        INFO(s.name << " " << dtype_name(s.type));
        const GgufTensor& r = result->get_tensor(s.name);
        if (s.dims.size() < 2 || s.dims[1] == 1) {
            CHECK(r.type == DType::F32);
            continue;
        }
        REQUIRE(r.type == DType::Q8_0);
        if (s.type == DType::Q8_0) {
            CHECK(std::ranges::equal(r.data, s.data));  // already the type: copied
            continue;
        }
        const uint64_t n = *checked_element_count(s.dims);
        std::vector<float> floats(n);
        type_traits(s.type).to_float(s.data.data(), floats.data(), static_cast<int64_t>(n));
        std::vector<std::byte> expected(*checked_bytes(DType::Q8_0, n));
        type_traits(DType::Q8_0).from_float_ref(floats.data(), expected.data(), static_cast<int64_t>(n));
        CHECK(std::ranges::equal(r.data, expected));
        any_requantized = true;
    }
    CHECK(any_requantized);
    const auto model = load_llama_decoder(*result);  // loads as a model
    CHECK(llama_params(*model).n_layers == f["inputs"][source_name]["facts"]["block_count"].get<int64_t>());
}

TEST_CASE("quant mixes: kiln-convert inspect prints llama.cpp's file type name", "[quant_mix]") {
    test::TempDir dir;
    const std::string stories = test::shell_quote((test::shared_models_dir() / "stories260K.gguf").string());
    const auto plain = test::run_tool("kiln-convert", "inspect " + stories);
    REQUIRE(plain.status == 0);
    CHECK(plain.out.find("\nfile type: all F32 (guessed)\n") != std::string::npos);  // no general.file_type
    const std::string q8 = test::shell_quote((dir.path() / "q8.gguf").string());
    REQUIRE(test::run_tool("kiln-convert", stories + " -o " + q8 + " --type Q8_0").status == 0);
    const auto run = test::run_tool("kiln-convert", "inspect " + q8);
    REQUIRE(run.status == 0);
    CHECK(run.out.find("\nfile type: Q8_0\n") != std::string::npos);
}

TEST_CASE("quant mixes: a type kiln cannot write yet stops kiln-convert with one line", "[quant_mix]") {
    // Any mix with a type that has no reference quantizer in the traits table will do.
    const json& f = fixture();
    const auto tensors = tensors_of(f["inputs"]["stories260K"]);
    const auto facts = facts_of(f["inputs"]["stories260K"]);
    for (const auto& [mix_name, per_input] : f["mixes"].items()) {
        const auto choices = convert::choose_tensor_types(mix_named(mix_name), facts, tensors);
        size_t missing = choices.size();
        for (size_t i = 0; i < choices.size() && missing == choices.size(); ++i)
            if (choices[i].type != tensors[i].type && !type_traits(choices[i].type).from_float_ref) missing = i;
        if (missing == choices.size()) continue;
        test::TempDir dir;
        const auto out = dir.path() / "out.gguf";
        const auto run = test::run_tool(
            "kiln-convert", test::shell_quote((test::shared_models_dir() / "stories260K.gguf").string()) + " -o " +
                                test::shell_quote(out.string()) + " --type " + mix_name);
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(fmt::format("tensor '{}' needs {} for --type {}", tensors[missing].name,
                                       dtype_name(choices[missing].type), mix_name)) != std::string::npos);
        CHECK(run.err.find('\n') == run.err.size() - 1);
        CHECK_FALSE(std::filesystem::exists(out));
        return;
    }
    WARN("kiln writes every type of every mix: nothing left to refuse");
}
