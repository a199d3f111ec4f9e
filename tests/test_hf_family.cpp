// kiln-convert on Hugging Face folders of llama's family and its relatives
// (tests/reference/make_hf_family_fixtures.py): LlamaForCausalLM with llama3,
// linear and YaRN rope scaling, head_dim, attention and MLP biases;
// MistralForCausalLM; Qwen2ForCausalLM; Phi3ForCausalLM (with LongRoPE);
// GemmaForCausalLM (BF16) and Gemma2ForCausalLM. Each folder is converted with
// the CLI, loaded, and its logits for a 40-token prompt checked within 1e-4 of
// a float64 PyTorch forward of the Hugging Face weights; what cannot be
// converted faithfully is refused with one line naming it; and HF -> GGUF ->
// HF -> GGUF is lossless.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "formats/checkpoint/hf_folder.h"
#include "formats/checkpoint/safetensors.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/tensor_data.h"

using namespace kiln;
using test::shell_quote;

namespace {

std::filesystem::path hf_fixture(const std::string& name) { return test::fixtures_dir() / "hf_family" / name; }

// kiln-convert ARGS; the run must succeed.
void convert_ok(const std::string& args) {
    const test::ToolRun run = test::run_tool("kiln-convert", args);
    INFO(args << "\n" << run.err);
    REQUIRE(run.status == 0);
}

std::filesystem::path to_gguf(const test::TempDir& dir, const std::filesystem::path& folder, const std::string& file) {
    const auto out = dir.path() / file;
    // The fixture folders hold weights only.
    convert_ok(fmt::format("{} -o {} --no-tokenizer", shell_quote(folder.string()), shell_quote(out.string())));
    return out;
}

const GgufValue* find_key(const GgufFile& f, const std::string& key) {
    for (const GgufEntry& e : f.metadata())
        if (e.key == key) return &e.value;
    return nullptr;
}

// A copy of fixture `name` under `dir` (same folder name), for editing.
std::filesystem::path copy_fixture(const test::TempDir& dir, const std::string& name) {
    const auto to = dir.path() / name;
    std::filesystem::create_directories(to);
    for (const auto& e : std::filesystem::directory_iterator(hf_fixture(name)))
        std::filesystem::copy_file(e.path(), to / e.path().filename());
    return to;
}

nlohmann::json read_config(const std::filesystem::path& folder) {
    std::ifstream in(folder / "config.json");
    return nlohmann::json::parse(in);
}

void write_config(const std::filesystem::path& folder, const nlohmann::json& config) {
    std::ofstream(folder / "config.json") << config.dump(2);
}

// The error hf_checkpoint() gives for `folder` ("(converted)" when none).
std::string hf_error(const std::filesystem::path& folder) {
    try {
        hf_checkpoint(folder);
    } catch (const Error& e) {
        return e.what();
    }
    return "(converted)";
}

}  // namespace

TEST_CASE("hf family: converted folders give PyTorch's logits", "[hf_family][convert]") {
    const auto [name, arch] = GENERATE(table<std::string, std::string>({{"llama3", "llama"},
                                                                       {"llama_linear", "llama"},
                                                                       {"mistral_yarn", "llama"},
                                                                       {"qwen2", "qwen2"},
                                                                       {"phi3", "phi3"},
                                                                       {"phi3_longrope", "phi3"},
                                                                       {"gemma2", "gemma2"},
                                                                       {"gemma", "gemma"}}));
    INFO(name);
    test::TempDir dir;
    const auto gguf = to_gguf(dir, hf_fixture(name), name + ".gguf");
    const auto file = std::make_shared<const GgufFile>(GgufFile::open(gguf));
    const GgufFile ref = GgufFile::open(hf_fixture(name + "_reference.gguf"));
    const auto tokens = test::values_of<int32_t>(ref.get_tensor("tokens"));
    const auto want = test::values_of<float>(ref.get_tensor("logits"));
    CHECK(check_model(*file) == arch);
    const auto model = load_causal_lm(file);
    REQUIRE(want.size() == tokens.size() * static_cast<size_t>(model->info().n_vocab));
    ThreadPool pool(2);
    const auto mode = GENERATE(Executor::Mode::Fast, Executor::Mode::Reference);
    auto session = model->new_session(64, 1, mode);
    const std::span<const float> all = session->eval(tokens, pool, true);
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(all[i] - want[i]));
    INFO("mode " << static_cast<int>(mode));
    CHECK(worst < 1e-4f);
    // Token by token through the KV cache.
    const auto vocab = static_cast<size_t>(model->info().n_vocab);
    auto stepped = model->new_session(64, 1, mode);
    worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const std::span<const float> one = stepped->eval(std::span(&tokens[t], 1), pool);
        for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, std::abs(one[v] - want[t * vocab + v]));
    }
    CHECK(worst < 1e-4f);
}

TEST_CASE("hf family: the GGUF holds llama.cpp's tensors and keys", "[hf_family][convert]") {
    test::TempDir dir;
    const auto open = [&](const std::string& name) { return GgufFile::open(to_gguf(dir, hf_fixture(name), name + ".gguf")); };
    const auto u32 = [](const GgufValue* v) { return v != nullptr && v->as_int() ? *v->as_int() : -1; };
    const auto num = [](const GgufValue* v) { return v != nullptr && v->as_number() ? *v->as_number() : -1.0; };
    const auto str = [](const GgufValue* v) { return v != nullptr && v->as_string() ? *v->as_string() : std::string("(none)"); };

    const GgufFile llama3 = open("llama3");
    REQUIRE(llama3.find_tensor("rope_freqs.weight") != nullptr);
    CHECK(llama3.tensors().front().name == "rope_freqs.weight");
    const auto freqs = test::values_of<float>(*llama3.find_tensor("rope_freqs.weight"));
    REQUIRE(freqs.size() == 6);
    CHECK(freqs[0] == 1.0f);  // the three regimes: fast, blended, slow
    CHECK(freqs[1] == Approx(2.821810816269713).epsilon(1e-6));
    CHECK(freqs[5] == 8.0f);
    CHECK(find_key(llama3, "llama.rope.scaling.type") == nullptr);
    CHECK(num(find_key(llama3, "llama.rope.freq_base")) == 500000.0);

    const GgufFile linear = open("llama_linear");
    CHECK(u32(find_key(linear, "llama.attention.key_length")) == 12);
    CHECK(u32(find_key(linear, "llama.attention.value_length")) == 12);
    CHECK(u32(find_key(linear, "llama.rope.dimension_count")) == 12);
    CHECK(str(find_key(linear, "llama.rope.scaling.type")) == "linear");
    CHECK(num(find_key(linear, "llama.rope.scaling.factor")) == 2.5);
    for (const char* t : {"blk.1.attn_q.bias", "blk.1.attn_k.bias", "blk.1.attn_v.bias", "blk.1.attn_output.bias",
                          "blk.1.ffn_gate.bias", "blk.1.ffn_up.bias", "blk.1.ffn_down.bias"})
        CHECK(linear.find_tensor(t) != nullptr);
    CHECK(linear.find_tensor("output.weight") == nullptr);

    const GgufFile yarn = open("mistral_yarn");
    CHECK(str(find_key(yarn, "general.architecture")) == "llama");
    CHECK(str(find_key(yarn, "llama.rope.scaling.type")) == "yarn");
    CHECK(num(find_key(yarn, "llama.rope.scaling.factor")) == 4.0);
    CHECK(u32(find_key(yarn, "llama.rope.scaling.original_context_length")) == 64);
    CHECK(find_key(yarn, "llama.attention.sliding_window") == nullptr);

    const GgufFile qwen2 = open("qwen2");
    CHECK(qwen2.find_tensor("output.weight") == nullptr);
    CHECK(qwen2.find_tensor("blk.0.attn_q.bias") != nullptr);
    CHECK(qwen2.find_tensor("blk.0.attn_output.bias") == nullptr);
    CHECK(find_key(qwen2, "qwen2.rope.dimension_count") == nullptr);
    CHECK(num(find_key(qwen2, "qwen2.rope.freq_base")) == 1e6);
    {
        // Not permuted: q_proj's bytes as stored.
        const SafetensorsFile hf = SafetensorsFile::open(hf_fixture("qwen2") / "model.safetensors");
        const auto* q = hf.find_tensor("model.layers.0.self_attn.q_proj.weight");
        const GgufTensor* g = qwen2.find_tensor("blk.0.attn_q.weight");
        REQUIRE(g->data.size() == q->data.size());
        CHECK(std::memcmp(g->data.data(), q->data.data(), q->data.size()) == 0);
    }

    const GgufFile phi3 = open("phi3");
    CHECK(u32(find_key(phi3, "phi3.attention.sliding_window")) == 5);
    CHECK(u32(find_key(phi3, "phi3.rope.scaling.original_context_length")) == 96);
    CHECK(num(find_key(phi3, "phi3.rope.freq_base")) == 10000.0);
    CHECK(find_key(phi3, "phi3.rope.scaling.attn_factor") == nullptr);
    CHECK(phi3.find_tensor("rope_factors_long.weight") == nullptr);
    const GgufFile longrope = open("phi3_longrope");
    CHECK(u32(find_key(longrope, "phi3.attention.sliding_window")) == 0);
    CHECK(num(find_key(longrope, "phi3.rope.scaling.attn_factor")) ==
          Approx(std::sqrt(1 + std::log(4.0) / std::log(32.0))).epsilon(1e-6));
    CHECK(longrope.find_tensor("rope_factors_long.weight")->dims == std::vector<uint64_t>{6});
    CHECK(longrope.find_tensor("rope_factors_short.weight") != nullptr);
    CHECK(longrope.find_tensor("blk.1.attn_qkv.weight")->dims == std::vector<uint64_t>{48, 48 + 2 * 48});
    CHECK(longrope.find_tensor("blk.1.ffn_up.weight")->dims == std::vector<uint64_t>{48, 80});

    const GgufFile gemma2 = open("gemma2");
    CHECK(u32(find_key(gemma2, "gemma2.attention.key_length")) == 12);
    CHECK(u32(find_key(gemma2, "gemma2.attention.sliding_window")) == 6);
    CHECK(num(find_key(gemma2, "gemma2.attn_logit_softcapping")) == 8.0);
    CHECK(num(find_key(gemma2, "gemma2.final_logit_softcapping")) == 4.0);
    CHECK(gemma2.find_tensor("blk.25.post_ffw_norm.weight") != nullptr);
    CHECK(gemma2.find_tensor("output.weight") == nullptr);
    {
        // Norms are HF's weight + 1.
        const SafetensorsFile hf = SafetensorsFile::open(hf_fixture("gemma2") / "model.safetensors");
        const auto bytes = hf.find_tensor("model.layers.3.pre_feedforward_layernorm.weight")->data;
        std::vector<float> w(bytes.size() / sizeof(float));
        std::memcpy(w.data(), bytes.data(), bytes.size());
        const auto g = test::values_of<float>(*gemma2.find_tensor("blk.3.ffn_norm.weight"));
        REQUIRE(w.size() == g.size());
        for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == w[i] + 1.0f);
    }
    const GgufFile gemma = open("gemma");
    CHECK(u32(find_key(gemma, "gemma.attention.key_length")) == 16);  // written even when it is width / heads... here 32/4 = 8
    CHECK(gemma.find_tensor("blk.0.attn_q.weight")->type == DType::BF16);
    CHECK(gemma.find_tensor("blk.0.ffn_norm.weight")->type == DType::F32);
    CHECK(find_key(gemma, "gemma.attn_logit_softcapping") == nullptr);
}

TEST_CASE("hf family: what cannot be converted faithfully is refused in one line", "[hf_family][convert]") {
    test::TempDir dir;
    const auto edit_config = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
        const auto folder = copy_fixture(dir, name);
        nlohmann::json c = read_config(folder);
        edit(c);
        write_config(folder, c);
        return folder;
    };
    // The folder `name` with its safetensors rewritten: tensor `drop` left out, `add` (a vector of 4) added.
    const auto edit_tensors = [&](const std::string& name, const std::string& drop, const std::string& add) {
        const auto folder = copy_fixture(dir, name);
        const SafetensorsFile in = SafetensorsFile::open(hf_fixture(name) / "model.safetensors");
        std::vector<SafetensorsTensor> tensors;
        for (const SafetensorsTensor& t : in.tensors())
            if (t.name != drop) tensors.push_back(t);
        static const float four[4] = {1, 2, 3, 4};
        if (!add.empty()) tensors.push_back({add, DType::F32, {4}, std::as_bytes(std::span(four))});
        std::filesystem::remove(folder / "model.safetensors");
        write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});
        return folder;
    };
    const auto check_refused = [](const std::filesystem::path& folder, const std::string& message) {
        const std::string error = hf_error(folder);
        INFO(error);
        CHECK(error.find(message) != std::string::npos);
        CHECK(error.find('\n') == std::string::npos);
        std::filesystem::remove_all(folder);
    };

    SECTION("an unknown rope_scaling type") {
        check_refused(edit_config("llama3", [](auto& c) { c["rope_scaling"]["rope_type"] = "dynamic"; }),
                      "rope_scaling type 'dynamic' is not one kiln converts for LlamaForCausalLM (linear, yarn, llama3)");
        check_refused(edit_config("qwen2", [](auto& c) { c["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}}; }),
                      "rope_scaling type 'llama3' is not one kiln converts for Qwen2ForCausalLM (linear, yarn)");
        check_refused(edit_config("phi3_longrope", [](auto& c) { c["rope_scaling"]["type"] = "yarn"; }),
                      "rope_scaling type 'yarn' is not one kiln converts for Phi3ForCausalLM (longrope, su)");
        check_refused(edit_config("gemma", [](auto& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; }),
                      "rope_scaling type 'linear': kiln's GemmaForCausalLM has plain RoPE");
        check_refused(edit_config("mistral_yarn", [](auto& c) { c["rope_scaling"]["attention_factor"] = 1.3; }),
                      "rope_scaling.attention_factor is set");
        check_refused(edit_config("mistral_yarn", [](auto& c) { c["rope_scaling"]["beta_fast"] = 16; }),
                      "rope_scaling.beta_fast is 16; kiln's YaRN uses 32");
        check_refused(edit_config("phi3_longrope", [](auto& c) { c["rope_scaling"]["short_factor"] = {1.0, 2.0}; }),
                      "rope_scaling.short_factor has 2 factors; heads of 12 need 6");
    }
    SECTION("query_pre_attn_scalar that kiln's gemma2 would not use") {
        check_refused(edit_config("gemma2", [](auto& c) { c["query_pre_attn_scalar"] = 8; }),
                      "query_pre_attn_scalar is 8 but kiln's gemma2 of 26 layers scales queries by 1/sqrt(12)");
        check_refused(edit_config("gemma2", [](auto& c) { c.erase("query_pre_attn_scalar"); }),
                      "query_pre_attn_scalar is 256 (default) but kiln's gemma2 of 26 layers scales queries by 1/sqrt(12)");
        check_refused(edit_config("gemma2", [](auto& c) { c["num_hidden_layers"] = 4; }),
                      "query_pre_attn_scalar 12: kiln (as llama.cpp) derives the query scale from the layer count");
        check_refused(edit_config("gemma2", [](auto& c) { c["final_logit_softcapping"] = nullptr; }),
                      "\"final_logit_softcapping\" is missing or null; kiln's gemma2 always soft-caps");
    }
    SECTION("a missing tensor") {
        check_refused(edit_tensors("qwen2", "model.layers.1.self_attn.k_proj.bias", ""),
                      "tensor 'model.layers.1.self_attn.k_proj.bias' is missing");
        check_refused(edit_tensors("phi3", "model.layers.0.mlp.gate_up_proj.weight", ""),
                      "tensor 'model.layers.0.mlp.gate_up_proj.weight' is missing");
        check_refused(edit_tensors("gemma2", "model.layers.7.post_feedforward_layernorm.weight", ""),
                      "tensor 'model.layers.7.post_feedforward_layernorm.weight' is missing");
        check_refused(edit_config("llama_linear", [](auto& c) { c["mlp_bias"] = false; c["attention_bias"] = false; }),
                      "tensor 'model.layers.0.mlp.down_proj.bias' is not part of a LlamaForCausalLM with 2 layers");
    }
    SECTION("an unexpected tensor") {
        check_refused(edit_tensors("llama3", "", "model.layers.0.self_attn.o_proj.bias"),
                      "tensor 'model.layers.0.self_attn.o_proj.bias' is not part of a LlamaForCausalLM with 2 layers "
                      "(attention_bias false, mlp_bias false)");
        check_refused(edit_tensors("qwen2", "", "model.layers.1.self_attn.o_proj.bias"),
                      "tensor 'model.layers.1.self_attn.o_proj.bias' is not part of a Qwen2ForCausalLM with 2 layers");
        check_refused(edit_tensors("gemma", "", "model.layers.0.self_attn.q_norm.weight"),
                      "tensor 'model.layers.0.self_attn.q_norm.weight' is not part of a GemmaForCausalLM with 2 layers");
        check_refused(edit_tensors("phi3", "", "model.layers.0.self_attn.q_proj.weight"),
                      "tensor 'model.layers.0.self_attn.q_proj.weight' is not part of a Phi3ForCausalLM with 2 layers");
    }
    SECTION("other settings kiln's architectures cannot express") {
        check_refused(edit_config("qwen2", [](auto& c) { c["use_sliding_window"] = true; }),
                      "use_sliding_window is true");
        check_refused(edit_config("phi3", [](auto& c) { c["partial_rotary_factor"] = 0.75; }),
                      "partial_rotary_factor is 0.75");
        check_refused(edit_config("gemma", [](auto& c) { c["hidden_activation"] = "gelu"; }),
                      "hidden_activation 'gelu'");
    }
    SECTION("model_type alone picks the reader") {
        for (const std::string name : {"qwen2", "gemma2", "phi3", "mistral_yarn"}) {
            INFO(name);
            const auto folder = edit_config(name, [](auto& c) { c.erase("architectures"); });
            const Checkpoint ck = hf_checkpoint(folder);
            const GgufValue* a = nullptr;
            for (const GgufEntry& e : ck.metadata)
                if (e.key == "general.architecture") a = &e.value;
            REQUIRE(a != nullptr);
            CHECK(*a->as_string() == (name == "mistral_yarn" ? std::string("llama") : name));
            std::filesystem::remove_all(folder);
        }
    }
    SECTION("gemma's F16 norms get + 1 in F16, as the converter's torch code adds it") {
        const auto folder = copy_fixture(dir, "gemma2");
        const SafetensorsFile in = SafetensorsFile::open(hf_fixture("gemma2") / "model.safetensors");
        std::vector<SafetensorsTensor> tensors;
        std::vector<std::vector<uint16_t>> halves;
        halves.reserve(in.tensors().size());
        for (const SafetensorsTensor& t : in.tensors()) {
            tensors.push_back(t);
            if (!t.name.ends_with("norm.weight")) continue;
            std::vector<float> f(t.data.size() / 4);
            std::memcpy(f.data(), t.data.data(), t.data.size());
            halves.emplace_back();
            for (float v : f) halves.back().push_back(fp32_to_fp16(v));
            tensors.back().type = DType::F16;
            tensors.back().data = std::as_bytes(std::span(halves.back()));
        }
        std::filesystem::remove(folder / "model.safetensors");
        write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});
        const Checkpoint ck = hf_checkpoint(folder);
        const SafetensorsFile f16 = SafetensorsFile::open(folder / "model.safetensors");
        for (const CheckpointTensor& t : ck.tensors) {
            if (t.name != "blk.0.attn_norm.weight") continue;
            const SafetensorsTensor* h = f16.find_tensor("model.layers.0.input_layernorm.weight");
            REQUIRE(t.type == DType::F32);
            for (size_t i = 0; i < h->shape[0]; ++i) {
                uint16_t x;
                float y;
                std::memcpy(&x, h->data.data() + 2 * i, 2);
                std::memcpy(&y, t.data.data() + 4 * i, 4);
                CHECK(y == fp16_to_fp32(fp32_to_fp16(fp16_to_fp32(x) + 1.0f)));
            }
        }
    }
    SECTION("phi3 with a tied head: output.weight is the embedding's bytes") {
        const auto folder = edit_tensors("phi3", "lm_head.weight", "");
        nlohmann::json c = read_config(folder);
        c["tie_word_embeddings"] = true;
        write_config(folder, c);
        const Checkpoint ck = hf_checkpoint(folder);
        const CheckpointTensor *embd = nullptr, *out = nullptr;
        for (const CheckpointTensor& t : ck.tensors) {
            if (t.name == "token_embd.weight") embd = &t;
            if (t.name == "output.weight") out = &t;
        }
        REQUIRE(embd != nullptr);
        REQUIRE(out != nullptr);
        CHECK(out->data.data() == embd->data.data());  // a second view, no copy
        CHECK(out->dims == embd->dims);
    }
    SECTION("the CLI says it on one line and exits 1") {
        const auto folder = edit_config("llama3", [](auto& c) { c["rope_scaling"]["rope_type"] = "longrope"; });
        const test::ToolRun run = test::run_tool(
            "kiln-convert", fmt::format("{} -o {}", shell_quote(folder.string()), shell_quote((dir.path() / "x.gguf").string())));
        CHECK(run.status == 1);
        CHECK(run.err.find("rope_scaling type 'longrope' is not one kiln converts") != std::string::npos);
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
        CHECK_FALSE(std::filesystem::exists(dir.path() / "x.gguf"));
    }
}

namespace {

// Every tensor of `a` in `b` (in the same order when `ordered`), with the same
// type, dims and bytes (`close` names ones compared within `tolerance` of
// their magnitude, or of 1 when `absolute`, instead).
void check_same_tensors(const GgufFile& a, const GgufFile& b, bool ordered, const std::set<std::string>& close = {},
                        float tolerance = 1e-6f, bool absolute = false) {
    REQUIRE(a.tensors().size() == b.tensors().size());
    for (size_t i = 0; i < a.tensors().size(); ++i) {
        const GgufTensor& t = a.tensors()[i];
        INFO(t.name);
        if (ordered) CHECK(b.tensors()[i].name == t.name);
        const GgufTensor* found = b.find_tensor(t.name);
        REQUIRE(found != nullptr);
        const GgufTensor& u = *found;
        CHECK(u.type == t.type);
        CHECK(u.dims == t.dims);
        REQUIRE(u.data.size() == t.data.size());
        if (close.contains(t.name)) {
            const auto x = test::values_of<float>(t), y = test::values_of<float>(u);
            for (size_t j = 0; j < x.size(); ++j)
                CHECK(std::abs(x[j] - y[j]) <= tolerance * (absolute ? 1.0f : std::abs(x[j])));
        } else {
            CHECK(std::memcmp(u.data.data(), t.data.data(), t.data.size()) == 0);
        }
    }
}

}  // namespace

TEST_CASE("hf family: HF -> GGUF -> HF -> GGUF is lossless", "[hf_family][convert][safetensors]") {
    const std::string name = GENERATE("llama3", "llama_linear", "mistral_yarn", "qwen2", "phi3", "phi3_longrope",
                                      "gemma2", "gemma");
    INFO(name);
    test::TempDir dir;
    const auto first = to_gguf(dir, hf_fixture(name), "first.gguf");
    const auto folder = dir.path() / "exported" / name;  // the same folder name: the same general.name
    std::filesystem::create_directories(folder.parent_path());
    convert_ok(fmt::format("{} -o {} --to safetensors", shell_quote(first.string()), shell_quote(folder.string())));
    const auto second = to_gguf(dir, folder, "second.gguf");
    // The whole file, metadata and tensors, byte for byte.
    CHECK(test::read_file(first) == test::read_file(second));
    check_same_tensors(GgufFile::open(first), GgufFile::open(second), true);

    // And the exported folder holds the original's tensors (Gemma's norms within float rounding of w+1-1).
    const SafetensorsFile original = SafetensorsFile::open(hf_fixture(name) / "model.safetensors");
    const SafetensorsFile exported = SafetensorsFile::open(folder / "model.safetensors");
    CHECK(exported.tensors().size() == original.tensors().size());
    const bool gemma = name.starts_with("gemma");
    for (const SafetensorsTensor& t : original.tensors()) {
        INFO(t.name);
        const SafetensorsTensor* e = exported.find_tensor(t.name);
        REQUIRE(e != nullptr);
        CHECK(e->shape == t.shape);
        if (gemma && t.name.ends_with("norm.weight")) {
            CHECK(e->type == DType::F32);
            std::vector<float> x(e->data.size() / 4), w(x.size());
            std::memcpy(x.data(), e->data.data(), e->data.size());
            for (size_t i = 0; i < w.size(); ++i) {
                uint16_t h = 0;
                float f = 0;
                if (t.type == DType::BF16) {
                    std::memcpy(&h, t.data.data() + 2 * i, 2);
                    const uint32_t bits = uint32_t{h} << 16;
                    std::memcpy(&f, &bits, 4);
                } else {
                    std::memcpy(&f, t.data.data() + 4 * i, 4);
                }
                CHECK(std::abs(x[i] - f) <= 2e-7f);
            }
        } else {
            CHECK(e->type == t.type);
            CHECK(std::equal(e->data.begin(), e->data.end(), t.data.begin(), t.data.end()));
        }
    }
    const nlohmann::json config = read_config(folder);
    const nlohmann::json given = read_config(hf_fixture(name));
    CHECK(config["architectures"] == (name == "mistral_yarn" ? nlohmann::json{"LlamaForCausalLM"} : given["architectures"]));
    if (name == "llama3") CHECK(config["rope_scaling"] == given["rope_scaling"]);
    if (name == "phi3_longrope") {
        // The factors as float32 values (the file's), written as their shortest decimals.
        CHECK(config["rope_scaling"]["type"] == "longrope");
        for (const char* key : {"long_factor", "short_factor"}) {
            REQUIRE(config["rope_scaling"][key].size() == given["rope_scaling"][key].size());
            for (size_t i = 0; i < given["rope_scaling"][key].size(); ++i)
                CHECK(config["rope_scaling"][key][i].get<float>() == given["rope_scaling"][key][i].get<float>());
        }
    }
    if (name == "gemma2") CHECK(config["query_pre_attn_scalar"] == 12);
}

TEST_CASE("hf family: llama.cpp-layout GGUFs export to HF and come back with the same tensors",
          "[hf_family][convert][safetensors]") {
    const std::string name = GENERATE("llama_family/qwen2", "llama_family/llama3", "llama_family/llama_linear",
                                      "gemma/gemma2", "gemma/gemma", "phi3/phi3", "phi3/phi3_longrope");
    INFO(name);
    test::TempDir dir;
    const auto gguf = test::fixtures_dir() / (name + ".gguf");
    const auto folder = dir.path() / "hf";
    convert_ok(fmt::format("{} -o {} --to safetensors", shell_quote(gguf.string()), shell_quote(folder.string())));
    const auto back = to_gguf(dir, folder, "back.gguf");
    const GgufFile a = GgufFile::open(gguf), b = GgufFile::open(back);
    // llama3's table was computed in float64 by its script; the export finds Llama 3's parameters and the
    // HF reader recomputes it in float32 (as convert_hf_to_gguf does).
    if (name.starts_with("gemma/")) {
        // These random norms (1 + 0.2 N(0,1)) include values under 0.5, where x - 1 in F32 (HF's weight)
        // rounds: within float rounding of 1 then. Norms from Hugging Face weights (BF16, or x - 1 exact)
        // come back bit for bit (the HF -> GGUF -> HF -> GGUF test).
        std::set<std::string> norms;
        for (const GgufTensor& t : a.tensors())
            if (t.name.ends_with("norm.weight")) norms.insert(t.name);
        check_same_tensors(a, b, false, norms, 1.2e-7f, true);
    } else {
        check_same_tensors(a, b, false, {"rope_freqs.weight"});
    }
    // Every key the HF converter writes is the file's, with its value.
    for (const GgufEntry& e : b.metadata()) {
        if (e.key == "general.name") continue;
        INFO(e.key);
        const GgufValue* v = find_key(a, e.key);
        REQUIRE(v != nullptr);
        if (v->as_number() && e.value.as_number()) CHECK(*v->as_number() == Approx(*e.value.as_number()).epsilon(1e-6));
        else CHECK(*v == e.value);
    }
}

TEST_CASE("hf family: --to safetensors refuses what Hugging Face cannot say", "[hf_family][convert][safetensors]") {
    test::TempDir dir;
    const auto refused = [&](const std::string& fixture, const std::string& message) {
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --to safetensors",
                                                                     shell_quote((test::fixtures_dir() / fixture).string()),
                                                                     shell_quote((dir.path() / "hf").string())));
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(message) != std::string::npos);
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
    };
    // YaRN with an attention factor of 0.95 besides the default.
    refused("llama_family/llama_yarn.gguf", "llama.rope.scaling.attn_factor 0.95 (a YaRN attention factor");
    refused("minicpm/tiny_minicpm.gguf", "--to safetensors exports llama, qwen2, phi3, gemma, gemma2, gpt2 and transformer models; this one is");
}

TEST_CASE("hf family: --help names the Hugging Face architectures", "[hf_family][convert]") {
    const test::ToolRun run = test::run_tool("kiln-convert", "--help");
    CHECK(run.status == 0);
    for (const char* a : {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Phi3ForCausalLM",
                          "GemmaForCausalLM", "Gemma2ForCausalLM", "GPT2LMHeadModel"})
        CHECK(run.out.find(a) != std::string::npos);
}
