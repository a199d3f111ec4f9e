// kiln-convert --to safetensors for the encoder-decoder: FOLDER/model.pt, a
// torch.save checkpoint of a torch.nn.Transformer seq2seq model, written by
// kiln's own zip and pickle writers. Checked against kiln's readers (GGUF ->
// model.pt -> GGUF keeps every tensor's bytes and every metadata key) and,
// where /usr/bin/python3 has torch, against PyTorch itself
// (tests/reference/check_torch_export.py): torch.load(weights_only=True), a
// strict load into nn.Transformer, logits equal to kiln's, and every tensor
// equal to the original checkpoint's. Failures leave no folder behind.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/models/transformer.h"
#include "engine/runtime/thread_pool.h"
#include "formats/checkpoint/torch_checkpoint.h"
#include "formats/checkpoint/torch_writer.h"
#include "formats/checkpoint/zip_archive.h"
#include "formats/checkpoint/zip_writer.h"
#include "formats/gguf/gguf_file.h"
#include "formats/gguf/gguf_writer.h"
#include "formats/io/atomic_file.h"
#include "support/paths.h"
#include "support/run_tool.h"
#include "support/sample_gguf.h"
#include "support/tensor_data.h"

using namespace kiln;
using test::shell_quote;

namespace {

const std::filesystem::path kPython = "/usr/bin/python3";

test::ToolRun convert_ok(const std::string& args) {
    test::ToolRun run = test::run_tool("kiln-convert", args);
    INFO(args << "\n" << run.err);
    REQUIRE(run.status == 0);
    return run;
}

std::filesystem::path to_gguf(const std::filesystem::path& in, const std::filesystem::path& out,
                              const std::string& extra = "") {
    convert_ok(fmt::format("{} -o {} {}", shell_quote(in.string()), shell_quote(out.string()), extra));
    return out;
}

std::string export_folder(const std::filesystem::path& in, const std::filesystem::path& folder) {
    return convert_ok(fmt::format("{} -o {} --to safetensors", shell_quote(in.string()), shell_quote(folder.string())))
        .err;
}

// A shell command's stdout (and its exit status).
std::pair<int, std::string> capture(const std::string& command) {
    std::string out;
    std::FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool python_has_torch() {
    static const bool has = std::filesystem::exists(kPython) &&
                            capture(fmt::format("{} -c 'import torch, numpy' 2>/dev/null", kPython.string())).first == 0;
    return has;
}

std::string check_script() { return (test::source_dir() / "tests" / "reference" / "check_torch_export.py").string(); }

void check_same_model(const GgufFile& a, const GgufFile& b) {
    std::map<std::string, GgufValue> ma, mb;
    for (const GgufEntry& e : a.metadata()) ma.insert_or_assign(e.key, e.value);
    for (const GgufEntry& e : b.metadata()) mb.insert_or_assign(e.key, e.value);
    for (const auto& [key, value] : ma) {
        INFO(key);
        REQUIRE(mb.contains(key));
        CHECK(mb.at(key) == value);
    }
    for (const auto& [key, value] : mb) {
        INFO(key);
        CHECK(ma.contains(key));
    }
    REQUIRE(a.tensors().size() == b.tensors().size());
    for (const GgufTensor& t : a.tensors()) {
        INFO(t.name);
        const GgufTensor& u = b.get_tensor(t.name);
        CHECK(u.type == t.type);
        CHECK(u.dims == t.dims);
        CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
    }
}

// `from` rewritten: `edit` may change the metadata and the tensor list (views into `from` or `keep`).
struct Rewrite {
    std::vector<GgufEntry> metadata;
    std::vector<GgufTensor> tensors;
    std::vector<std::vector<std::byte>> keep;
};
template <typename Edit>
std::filesystem::path rewrite(const std::filesystem::path& from, const std::filesystem::path& to, Edit edit) {
    const GgufFile f = GgufFile::open(from);
    Rewrite r{{f.metadata().begin(), f.metadata().end()}, {f.tensors().begin(), f.tensors().end()}, {}};
    r.keep.reserve(16);
    edit(r);
    GgufWriter w;
    for (const GgufEntry& e : r.metadata) w.set(e.key, e.value);
    for (const GgufTensor& t : r.tensors) w.add_tensor(t.name, t.type, t.dims, t.data);
    w.write(to);
    return to;
}

// Everything in a folder, by name: what a failed export must not have added.
std::set<std::string> listing(const std::filesystem::path& folder) {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(folder)) out.insert(e.path().filename().string());
    return out;
}

const std::filesystem::path& transformer_fixtures() {
    static const std::filesystem::path p = test::fixtures_dir() / "transformer";
    return p;
}

}  // namespace

TEST_CASE("export_pt: the zip writer's entries are stored, 64-byte aligned and read back, plain and zip64",
          "[export_pt][zip]") {
    const bool zip64 = GENERATE(false, true);
    test::TempDir dir;
    const auto path = dir.path() / "a.zip";
    std::map<std::string, std::vector<std::byte>> entries;
    for (size_t size : {0, 1, 63, 64, 65, 1000}) {
        std::vector<std::byte> data(size);
        for (size_t i = 0; i < size; ++i) data[i] = static_cast<std::byte>((i * 37 + size) & 0xff);
        entries[fmt::format("archive/data/{}", size)] = std::move(data);
    }
    {
        AtomicFile file(path);
        ZipWriter zip(file, zip64);
        for (const auto& [name, data] : entries) zip.add(name, data);
        CHECK_THROWS_WITH(zip.add("archive/data/1", {}), Catch::Contains("cannot add entry 'archive/data/1' twice"));
        zip.finish();
        file.commit();
    }
    const ZipArchive z = ZipArchive::open(path);
    REQUIRE(z.entries().size() == entries.size());
    for (const auto& [name, data] : entries) {
        INFO(name);
        const ZipEntry* e = z.find(name);
        REQUIRE(e != nullptr);
        CHECK(e->data_offset % 64 == 0);
        const auto got = z.checked_entry(name);
        CHECK(std::equal(got.begin(), got.end(), data.begin(), data.end()));
    }
    // The zip64 end records (signature PK\6\6) are there exactly when asked for.
    const auto bytes = test::read_file(path);
    const std::byte sig[] = {std::byte{'P'}, std::byte{'K'}, std::byte{6}, std::byte{6}};
    CHECK((std::search(bytes.begin(), bytes.end(), std::begin(sig), std::end(sig)) != bytes.end()) == zip64);
    // Python's zipfile: an independent reader, with CRC checks.
    if (std::filesystem::exists(kPython)) {
        const auto [status, out] = capture(fmt::format(
            "{} -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; "
            "print(\" \".join(\"%s:%d\" % (i.filename, i.file_size) for i in z.infolist()))' {}",
            kPython.string(), shell_quote(path.string())));
        CHECK(status == 0);
        CHECK(out == "archive/data/0:0 archive/data/1:1 archive/data/1000:1000 archive/data/63:63 archive/data/64:64 "
                     "archive/data/65:65\n");
    }
}

TEST_CASE("export_pt: torch.load and kiln read back what the torch writer writes", "[export_pt][pickle]") {
    using namespace pickle;
    test::TempDir dir;
    const auto path = dir.path() / "values.pt";
    // Storage "0": 6 float32 values; "w" views all of it as (2, 3); "tail" views elements 4..5.
    const std::vector<float> f32 = {1.5f, -2.0f, 0.25f, 3.0f, -0.125f, 1e-3f};
    const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3800};   // 1, -2, 0.5
    const std::vector<uint16_t> bf16 = {0x3f80, 0x4040};          // 1, 3
    const std::vector<float> scalar = {7.0f};
    const auto bytes = [](const auto& v) { return std::as_bytes(std::span(v)); };
    const std::vector<TorchStorage> storages = {{"0", bytes(f32)}, {"1", bytes(f16)}, {"2", bytes(bf16)}, {"3", bytes(scalar)}};
    PickleDict state{{}, true};
    state.items.emplace_back("w", TensorRecord{"0", TorchDType::Float32, 6, 0, {2, 3}, {3, 1}});
    state.items.emplace_back("tail", TensorRecord{"0", TorchDType::Float32, 6, 4, {2}, {1}});
    state.items.emplace_back("half", TensorRecord{"1", TorchDType::Float16, 3, 0, {3}, {1}});
    state.items.emplace_back("brain", TensorRecord{"2", TorchDType::BFloat16, 2, 0, {1, 2}, {2, 1}});
    state.items.emplace_back("scalar", TensorRecord{"3", TorchDType::Float32, 1, 0, {}, {}});
    PickleDict root;
    root.items.emplace_back("model", std::move(state));
    root.items.emplace_back("ints", PickleList{0, 255, 256, 65535, 65536, -1, int64_t{-2147483648}, int64_t{1} << 40,
                                               -(int64_t{1} << 40), int64_t{9223372036854775807}});
    root.items.emplace_back("flags", PickleTuple{{true, false, PickleValue()}});
    root.items.emplace_back("text", PickleList{"", "héllo", "<s>"});
    root.items.emplace_back("nested", PickleDict{{{"a", PickleTuple{{1, 2, 3, 4}}}, {"b", PickleTuple{{}}}}, false});
    write_torch_checkpoint(path, root, storages);

    // kiln's reader.
    const TorchCheckpoint c = read_torch_checkpoint(path);
    REQUIRE(c.tensors.size() == 5);
    const TorchTensor* w = c.find_tensor("model.w");
    REQUIRE(w != nullptr);
    CHECK(w->shape == std::vector<int64_t>{2, 3});
    CHECK(std::equal(w->data.begin(), w->data.end(), bytes(f32).begin(), bytes(f32).end()));
    const TorchTensor* tail = c.find_tensor("model.tail");
    REQUIRE(tail != nullptr);
    CHECK(tail->storage == w->storage);
    CHECK(tail->storage_offset == 4);
    CHECK(test::values_of<float>(GgufTensor{"", DType::F32, {2}, 0, 2, tail->data}) == std::vector<float>{-0.125f, 1e-3f});
    CHECK(c.find_tensor("model.half")->type == DType::F16);
    CHECK(c.find_tensor("model.brain")->type == DType::BF16);
    CHECK(c.find_tensor("model.scalar")->shape.empty());
    CHECK(c.find_value("ints")->as_array()->items.size() == 10);
    CHECK(c.find_value("ints")->as_array()->items[9].as_int() == INT64_C(9223372036854775807));
    CHECK(c.find_value("ints")->as_array()->items[6].as_int() == INT64_C(-2147483648));
    CHECK(*c.find_value("text")->as_array()->items[1].as_string() == "héllo");
    CHECK(c.find_value("nested.a")->as_array()->items.size() == 4);
    CHECK(c.find_value("flags.0")->as_bool() == true);
    CHECK(c.find_value("flags.1")->as_bool() == false);

    // A string that is not UTF-8 is refused, and nothing is written.
    const auto bad = dir.path() / "bad.pt";
    CHECK_THROWS_WITH(write_torch_checkpoint(bad, PickleDict{{{"s", std::string("\xff")}}, false}, {}),
                      Catch::Contains("not UTF-8"));
    CHECK_THROWS_WITH(write_torch_checkpoint(bad, PickleDict{{{"t", TensorRecord{"9", TorchDType::Float32, 1, 0, {1}, {1}}}}, false}, {}),
                      Catch::Contains("storage '9', which is not written"));
    CHECK_FALSE(std::filesystem::exists(bad));

    if (!python_has_torch()) {
        WARN("/usr/bin/python3 has no torch: torch.load of the archive not checked");
        return;
    }
    const auto [status, out] = capture(fmt::format("{} {} archive --weights-only {}", kPython.string(),
                                                   shell_quote(check_script()), shell_quote(path.string())));
    INFO(out);
    REQUIRE(status == 0);
    CHECK(out.find("verdict: ok") != std::string::npos);
    CHECK(out.find("entries: archive/data.pkl archive/data/0 archive/data/1 archive/data/2 archive/data/3 "
                   "archive/version archive/byteorder\n") != std::string::npos);
    CHECK(out.find("root['model'] = OrderedDict(5)\n") != std::string::npos);
    CHECK(out.find("root['model']['w'] = tensor float32 [2, 3] ['1.5', '-2', '0.25', '3', '-0.125', "
                   "'0.00100000005']\n") != std::string::npos);
    CHECK(out.find("root['model']['tail'] = tensor float32 [2] ['-0.125', '0.00100000005'] storage-of root['model']['w']\n") !=
          std::string::npos);
    CHECK(out.find("root['model']['half'] = tensor float16 [3] ['1', '-2', '0.5']\n") != std::string::npos);
    CHECK(out.find("root['model']['brain'] = tensor bfloat16 [1, 2] ['1', '3']\n") != std::string::npos);
    CHECK(out.find("root['model']['scalar'] = tensor float32 [] ['7']\n") != std::string::npos);
    CHECK(out.find("root['ints'] = list(10)\n") != std::string::npos);
    for (const char* v : {"[0] = 0\n", "[1] = 255\n", "[2] = 256\n", "[3] = 65535\n", "[4] = 65536\n", "[5] = -1\n",
                          "[6] = -2147483648\n", "[7] = 1099511627776\n", "[8] = -1099511627776\n",
                          "[9] = 9223372036854775807\n"})
        CHECK(out.find(std::string("root['ints']") + v) != std::string::npos);
    CHECK(out.find("root['flags'] = tuple(3)\nroot['flags'][0] = True\nroot['flags'][1] = False\nroot['flags'][2] = None\n") !=
          std::string::npos);
    CHECK(out.find("root['text'][1] = 'héllo'\n") != std::string::npos);
    CHECK(out.find("root['nested'] = dict(2)\nroot['nested']['a'] = tuple(4)\n") != std::string::npos);
    CHECK(out.find("root['nested']['b'] = tuple(0)\n") != std::string::npos);

    // A float (BINFLOAT) loads with weights_only=False, and the zip64 form loads too.
    const auto floats = dir.path() / "floats.pt";
    write_torch_checkpoint(floats, PickleDict{{{"eps", 1e-6}, {"x", -0.5}}, false}, {}, true);
    const auto [status2, out2] = capture(fmt::format("{} {} archive {}", kPython.string(), shell_quote(check_script()),
                                                     shell_quote(floats.string())));
    INFO(out2);
    CHECK(out2.find("root['eps'] = 1e-06\nroot['x'] = -0.5\n") != std::string::npos);
    CHECK(out2.find("verdict: ok") != std::string::npos);
}

TEST_CASE("export_pt: GGUF -> model.pt -> GGUF keeps every tensor and every metadata key", "[export_pt][convert]") {
    const std::string variant = GENERATE("postln_relu", "postln_relu_f16", "postln_relu_bf16", "preln_gelu_shared");
    INFO(variant);
    test::TempDir dir;
    const bool f16 = variant.ends_with("_f16"), bf16 = variant.ends_with("_bf16");
    const std::string fixture = f16 || bf16 ? "postln_relu" : variant;
    auto original = to_gguf(transformer_fixtures() / (fixture + ".pt"), dir.path() / (fixture + ".gguf"));
    if (f16 || bf16) {
        // Matrices and tables f16 (bf16), vectors f32; converted once more without --type, so that no
        // general.file_type remains (a conversion without --type never writes one).
        const auto mixed = to_gguf(original, dir.path() / "mixed.gguf", f16 ? "--type f16" : "--type bf16");
        original = to_gguf(mixed, dir.path() / (fixture + ".gguf.half"));
        const GgufFile f = GgufFile::open(original);
        CHECK(f.get_tensor("enc.blk.0.attn_q.weight").type == (f16 ? DType::F16 : DType::BF16));
        CHECK(f.get_tensor("enc.blk.0.attn_q.bias").type == DType::F32);
    }
    const auto folder = dir.path() / "out" / fixture;
    std::filesystem::create_directories(folder.parent_path());
    const std::string log = export_folder(original, folder);
    INFO(log);
    CHECK(log.find(fmt::format("kiln-convert: wrote {} (model.pt: a torch.nn.Transformer state dict, ", folder.string())) !=
          std::string::npos);
    CHECK(log.find("itos of 30 tokens") != std::string::npos);
    CHECK(log.find("; config.json)") != std::string::npos);
    CHECK(log.find("note:") == std::string::npos);
    CHECK(listing(folder) == std::set<std::string>{"config.json", "model.pt"});
    CHECK(listing(folder.parent_path()) == std::set<std::string>{fixture});

    const auto back = to_gguf(folder / "model.pt", dir.path() / "back.gguf");
    check_same_model(GgufFile::open(original), GgufFile::open(back));
    // The folder itself converts too (it has model.pt and no safetensors).
    check_same_model(GgufFile::open(original), GgufFile::open(to_gguf(folder, dir.path() / "back_folder.gguf")));

    // Tied modules share one storage in the state dict, as nn.Module.state_dict() saves them.
    const TorchCheckpoint pt = read_torch_checkpoint(folder / "model.pt");
    const TorchTensor* src = pt.find_tensor("model.src_embed.weight");
    const TorchTensor* tgt = pt.find_tensor("model.tgt_embed.weight");
    const TorchTensor* gen = pt.find_tensor("model.generator.weight");
    REQUIRE((src && tgt && gen));
    const bool shared = variant == "preln_gelu_shared";
    CHECK((src->storage == tgt->storage) == shared);
    CHECK((gen->storage == tgt->storage) == shared);
    CHECK((log.find("tgt_embed = src_embed, generator.weight = tgt_embed.weight") != std::string::npos) == shared);
    CHECK(pt.find_tensor("model.transformer.encoder.layers.1.self_attn.in_proj_weight")->shape ==
          std::vector<int64_t>{96, 32});
    CHECK(pt.find_tensor("model.transformer.decoder.layers.0.multihead_attn.in_proj_bias")->shape ==
          std::vector<int64_t>{96});
    CHECK(*pt.find_value("name")->as_string() == fixture);
    CHECK(pt.find_value("model_args.layer_norm_eps") == nullptr);  // torch's default: left out (see export_torch.h)

    std::ifstream in(folder / "config.json");
    const auto config = nlohmann::json::parse(in);
    CHECK(config["architecture"] == "transformer");
    CHECK(config["d_model"] == 32);
    CHECK(config["nhead"] == 4);
    CHECK(config["num_encoder_layers"] == 2);
    CHECK(config["dim_feedforward"] == 64);
    CHECK(config["max_len"] == 32);
    CHECK(config["norm_first"] == shared);
    CHECK(config["activation"] == (shared ? "gelu" : "relu"));
    CHECK(config["layer_norm_eps"] == 1e-5);
    CHECK(config["tied_embeddings"] == shared);
    CHECK(config["bos_token_id"] == 1);
}

TEST_CASE("export_pt: a SentencePiece vocabulary goes beside model.pt and comes back with --tokenizer",
          "[export_pt][convert][tokenizer]") {
    test::TempDir dir;
    const auto base = to_gguf(transformer_fixtures() / "postln_relu.pt", dir.path() / "base.gguf");
    // 30 pieces, as many as the model's rows: <unk>, <s>, </s>, then "▁" and a..z.
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81"};
    for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c);
    std::vector<float> scores;
    std::vector<int32_t> types = {2, 3, 3};
    for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(i < 3 ? 0.0f : -static_cast<float>(i));
    types.resize(tokens.size(), 1);
    const auto spm = rewrite(base, dir.path() / "spm.gguf", [&](Rewrite& r) {
        std::erase_if(r.metadata, [](const GgufEntry& e) { return e.key.starts_with("tokenizer."); });
        r.metadata.push_back({"tokenizer.ggml.model", GgufValue("llama")});
        r.metadata.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, tokens)});
        r.metadata.push_back({"tokenizer.ggml.scores", gguf_array(GgufType::FLOAT32, scores)});
        r.metadata.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types)});
        r.metadata.push_back({"tokenizer.ggml.unknown_token_id", GgufValue(uint32_t{0})});
        r.metadata.push_back({"tokenizer.ggml.bos_token_id", GgufValue(uint32_t{1})});
        r.metadata.push_back({"tokenizer.ggml.eos_token_id", GgufValue(uint32_t{2})});
    });
    const auto folder = dir.path() / "out";
    const std::string log = export_folder(spm, folder);
    INFO(log);
    CHECK(log.find("no itos: the vocabulary is in tokenizer.model, tokenizer_config.json") != std::string::npos);
    CHECK(log.find("convert back with --tokenizer FOLDER/tokenizer.model") != std::string::npos);
    CHECK(listing(folder) == std::set<std::string>{"config.json", "model.pt", "tokenizer.model", "tokenizer_config.json"});
    std::ifstream in(folder / "config.json");
    const auto config = nlohmann::json::parse(in);
    CHECK(config["bos_token_id"] == 1);
    CHECK(config["eos_token_id"] == 2);
    CHECK(read_torch_checkpoint(folder / "model.pt").find_value("itos.0") == nullptr);

    const auto back = to_gguf(folder / "model.pt", dir.path() / "back.gguf",
                              "--tokenizer " + shell_quote((folder / "tokenizer.model").string()));
    // Every key of the original comes back with its value (kiln's SentencePiece reader adds llama.cpp's defaults).
    const GgufFile original = GgufFile::open(spm), round = GgufFile::open(back);
    for (const GgufEntry& e : original.metadata()) {
        INFO(e.key);
        REQUIRE(round.find(e.key) != nullptr);
        CHECK(*round.find(e.key) == e.value);
    }
    for (const GgufTensor& t : original.tensors()) {
        INFO(t.name);
        const GgufTensor& u = round.get_tensor(t.name);
        CHECK(std::equal(u.data.begin(), u.data.end(), t.data.begin(), t.data.end()));
    }
}

TEST_CASE("export_pt: PyTorch loads model.pt with weights_only and strict names, and its logits are kiln's",
          "[export_pt][convert][torch]") {
    if (!python_has_torch()) {
        WARN("/usr/bin/python3 has no torch: the PyTorch side of the export is not checked");
        return;
    }
    const std::string name = GENERATE("postln_relu", "preln_gelu_shared");
    INFO(name);
    test::TempDir dir;
    const auto original = to_gguf(transformer_fixtures() / (name + ".pt"), dir.path() / (name + ".gguf"));
    const auto folder = dir.path() / "out";
    export_folder(original, folder);

    // kiln's decoder logits for the reference's first source and prefix, from the GGUF.
    const GgufFile reference = GgufFile::open(transformer_fixtures() / (name + "_reference.gguf"));
    const auto source = test::values_of<int32_t>(reference.get_tensor("s0.tokens"));
    const auto prefix = test::values_of<int32_t>(reference.get_tensor("s0.prefix"));
    const TransformerModel model(std::make_shared<GgufFile>(GgufFile::open(original)));
    ThreadPool pool(2);
    TransformerSession session(model, 1, 32, 1, 32);
    const std::vector<std::vector<int32_t>> sources{source};
    session.encode(sources, pool);
    const std::vector<int32_t> slots(prefix.size(), 0);
    const auto logits = session.decode(prefix, slots, pool);
    const auto logits_path = dir.path() / "kiln_logits.f32";
    test::write_file(logits_path, std::as_bytes(logits));

    const auto join = [](const std::vector<int32_t>& ids) { return fmt::format("{}", fmt::join(ids, ",")); };
    const auto [status, out] = capture(fmt::format(
        "{} {} model {} --logits {} --source {} --prefix {} --original {} 2>&1", kPython.string(),
        shell_quote(check_script()), shell_quote((folder / "model.pt").string()), shell_quote(logits_path.string()),
        join(source), join(prefix), shell_quote((transformer_fixtures() / (name + ".pt")).string())));
    INFO(out);
    CHECK(status == 0);
    CHECK(out.find("verdict: ok") != std::string::npos);
    CHECK(out.find("original: every tensor, model_args, itos and specials equal") != std::string::npos);
    const bool shared = name == "preln_gelu_shared";
    CHECK(out.find(fmt::format("tied: tgt_embed=src_embed {}, generator=tgt_embed {}", shared ? "True" : "False",
                               shared ? "True" : "False")) != std::string::npos);
}

TEST_CASE("export_pt: quantized tensors go out as float32, with a note", "[export_pt][convert]") {
    test::TempDir dir;
    const auto f32 = to_gguf(transformer_fixtures() / "postln_relu.pt", dir.path() / "f32.gguf");
    const auto q8 = to_gguf(f32, dir.path() / "q8.gguf", "--type q8_0");
    const auto folder = dir.path() / "out";
    const std::string log = export_folder(q8, folder);
    CHECK(log.find("quantized tensors are written as float32 (dequantized)") != std::string::npos);
    CHECK(log.find("metadata model.pt has no place for is left out: general.file_type, general.quantization_version") !=
          std::string::npos);
    const GgufFile q = GgufFile::open(q8);
    const GgufTensor& wq = q.get_tensor("enc.blk.0.attn_q.weight");
    REQUIRE(wq.type == DType::Q8_0);
    const TorchCheckpoint pt = read_torch_checkpoint(folder / "model.pt");
    const TorchTensor* fused = pt.find_tensor("model.transformer.encoder.layers.0.self_attn.in_proj_weight");
    REQUIRE(fused != nullptr);
    CHECK(fused->type == DType::F32);
    // Q's rows, the first third: Q8_0 blocks (an fp16 scale d, 32 int8 q) as d * q.
    const auto values = test::values_of<float>(GgufTensor{"", DType::F32, {}, 0, 0, fused->data});
    for (size_t block = 0; block < 32 * 32 / 32; ++block) {
        const std::byte* b = wq.data.data() + block * 34;
        uint16_t half = 0;
        std::memcpy(&half, b, 2);
        // fp16 -> float by hand: these scales are normal numbers.
        const int exponent = (half >> 10) & 0x1f;
        const float scale = std::ldexp(1.0f + static_cast<float>(half & 0x3ff) / 1024.0f, exponent - 15) *
                            ((half & 0x8000) ? -1.0f : 1.0f);
        for (size_t i = 0; i < 32; ++i)
            CHECK(values[block * 32 + i] == scale * static_cast<float>(static_cast<int8_t>(b[2 + i])));
    }
}

TEST_CASE("export_pt: refusals name the problem and leave nothing behind", "[export_pt][convert]") {
    test::TempDir dir;
    const auto base = to_gguf(transformer_fixtures() / "postln_relu.pt", dir.path() / "base.gguf");
    const auto out_parent = dir.path() / "out";
    std::filesystem::create_directories(out_parent);
    const auto refused = [&](const std::filesystem::path& gguf, const std::string& message,
                             const std::string& folder_name = "m") {
        const auto before = listing(out_parent);
        const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --to safetensors", shell_quote(gguf.string()),
                                                                     shell_quote((out_parent / folder_name).string())));
        INFO(run.err);
        CHECK(run.status == 1);
        CHECK(run.err.find(message) != std::string::npos);
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
        CHECK(listing(out_parent) == before);
    };
    refused(rewrite(base, dir.path() / "extra.gguf",
                    [](Rewrite& r) {
                        r.keep.push_back(std::vector<std::byte>(16));
                        r.tensors.push_back({"enc.blk.0.extra.weight", DType::F32, {4}, 0, 4, r.keep.back()});
                    }),
            "cannot export tensor 'enc.blk.0.extra.weight': it is not part of the transformer layout");
    refused(rewrite(base, dir.path() / "bias.gguf",
                    [](Rewrite& r) { std::erase_if(r.tensors, [](const GgufTensor& t) { return t.name == "dec.blk.1.cross_attn_k.bias"; }); }),
            "cannot export transformer.decoder.layers.1.multihead_attn.in_proj_bias: the model has biases on some of "
            "Q, K and V only");
    refused(rewrite(base, dir.path() / "mixed.gguf",
                    [](Rewrite& r) {
                        for (GgufTensor& t : r.tensors)
                            if (t.name == "enc.blk.0.attn_v.weight") {
                                const auto floats = test::values_of<float>(t);
                                r.keep.emplace_back(floats.size() * 2);
                                type_traits(DType::F16).from_float_ref(floats.data(), r.keep.back().data(),
                                                                        static_cast<int64_t>(floats.size()));
                                t.type = DType::F16;
                                t.data = r.keep.back();
                            }
                    }),
            "'enc.blk.0.attn_q.weight' is f32 but 'enc.blk.0.attn_v.weight' is f16, and torch holds them as one tensor");
    refused(rewrite(base, dir.path() / "missing.gguf",
                    [](Rewrite& r) { std::erase_if(r.tensors, [](const GgufTensor& t) { return t.name == "enc.blk.1.ffn_up.weight"; }); }),
            "cannot export: the model lacks tensor 'enc.blk.1.ffn_up.weight'");

    // An existing folder with anything in it, or a file of that name: refused for both exports.
    std::filesystem::create_directories(out_parent / "full");
    test::write_file(out_parent / "full" / "keep.txt", std::as_bytes(std::span("x", 1)));
    refused(base, "cannot write the folder '" + (out_parent / "full").string() + "': it exists and is not empty", "full");
    test::write_file(out_parent / "file", std::as_bytes(std::span("x", 1)));
    refused(base, "cannot write the folder '" + (out_parent / "file").string() + "': a file of that name exists", "file");
    const auto gpt2 = to_gguf(test::fixtures_dir() / "gpt2" / "gpt2_hf", dir.path() / "gpt2.gguf");
    refused(gpt2, "it exists and is not empty", "full");
    // A missing parent folder.
    const auto run = test::run_tool("kiln-convert", fmt::format("{} -o {} --to safetensors", shell_quote(base.string()),
                                                                 shell_quote((dir.path() / "no" / "m").string())));
    CHECK(run.status == 1);
    CHECK(run.err.find("does not exist") != std::string::npos);
    // An empty folder is taken (and filled), also named with a trailing '/'.
    std::filesystem::create_directories(out_parent / "empty");
    export_folder(base, out_parent / "empty");
    CHECK(listing(out_parent / "empty") == std::set<std::string>{"config.json", "model.pt"});
    std::filesystem::create_directories(out_parent / "slash");
    export_folder(base, (out_parent / "slash").string() + "/");
    export_folder(base, (out_parent / "new").string() + "/");
    CHECK(listing(out_parent / "slash") == std::set<std::string>{"config.json", "model.pt"});
    CHECK(listing(out_parent / "new") == std::set<std::string>{"config.json", "model.pt"});
}

TEST_CASE("export_pt: a full disk during --to safetensors leaves no folder, for both exports", "[export_pt][convert]") {
    test::TempDir dir;
    const auto transformer = to_gguf(transformer_fixtures() / "postln_relu.pt", dir.path() / "t.gguf");
    const auto gpt2 = to_gguf(test::fixtures_dir() / "gpt2" / "gpt2_hf", dir.path() / "gpt2.gguf");
    const auto out_parent = dir.path() / "out";
    std::filesystem::create_directories(out_parent);
    for (const auto& in : {transformer, gpt2}) {
        INFO(in);
        // A file size limit of 64 KiB (ulimit -f counts 512-byte blocks in sh) makes write() fail with EFBIG,
        // as a full disk fails it with ENOSPC; SIGXFSZ is ignored so that the error reaches kiln-convert.
        const std::string command = fmt::format(
            "sh -c \"trap '' XFSZ; ulimit -f 128; exec {} {} -o {} --to safetensors\" 2>&1",
            test::tool_command("kiln-convert"), shell_quote(in.string()),
            shell_quote((out_parent / "m").string()));
        const auto [status, out] = capture(command);
        INFO(out);
        CHECK(status == 1);
        CHECK(out.find("File too large") != std::string::npos);
        CHECK(listing(out_parent).empty());
    }
}
