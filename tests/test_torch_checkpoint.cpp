// PyTorch checkpoints: the zip layer, the whitelist unpickler, tensors and
// plain values read from torch.save files (tests/reference/make_torch_fixtures.py,
// values compared exactly with tests/fixtures/torch/expected.gguf), hostile and
// broken archives, and llama2.c state dicts mapped to llama.cpp's layout.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <functional>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "formats/checkpoint/llama_state_dict.h"
#include "formats/checkpoint/pickle.h"
#include "formats/checkpoint/torch_checkpoint.h"
#include "formats/checkpoint/zip_archive.h"
#include "support/error_check.h"
#include "support/paths.h"
#include "support/sample_gguf.h"
#include "support/tensor_data.h"

using namespace kiln;
using namespace std::literals;
using test::Bytes;

namespace {

std::filesystem::path fixture(std::string_view name) { return test::fixtures_dir() / "torch" / name; }

Bytes bytes_of(std::string_view s) {
    Bytes b(s.size());
    if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
    return b;
}

template <typename T>
Bytes bytes_of_values(std::initializer_list<T> values) {
    Bytes b(values.size() * sizeof(T));
    std::memcpy(b.data(), std::data(values), b.size());
    return b;
}

// Little-endian appends, for hand-built zips and pickles.
struct Writer {
    Bytes b;
    template <typename T>
    Writer& put(T v) {
        const size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Writer& raw(std::string_view s) {
        b.insert(b.end(), reinterpret_cast<const std::byte*>(s.data()),
                 reinterpret_cast<const std::byte*>(s.data()) + s.size());
        return *this;
    }
    Writer& raw(const Bytes& bytes) {
        b.insert(b.end(), bytes.begin(), bytes.end());
        return *this;
    }
};

// A zip written the plain way (or with every size and offset in zip64 extra fields).
struct ZipBuilder {
    struct Item {
        std::string name;
        Bytes data;
        uint16_t method;
    };
    std::vector<Item> items;
    bool zip64 = false;
    std::string comment;

    ZipBuilder& add(std::string name, Bytes data, uint16_t method = 0) {
        items.push_back({std::move(name), std::move(data), method});
        return *this;
    }
    Bytes build() const {
        Writer w, cd;
        for (const Item& item : items) {
            const auto offset = static_cast<uint64_t>(w.b.size());
            const uint32_t crc = zip_crc32(item.data);
            w.put<uint32_t>(0x04034b50).put<uint16_t>(20).put<uint16_t>(0).put<uint16_t>(item.method);
            w.put<uint32_t>(0).put<uint32_t>(crc).put<uint32_t>(uint32_t(item.data.size()));
            w.put<uint32_t>(uint32_t(item.data.size())).put<uint16_t>(uint16_t(item.name.size())).put<uint16_t>(0);
            w.raw(item.name).raw(item.data);
            const uint32_t size32 = zip64 ? 0xffffffffu : uint32_t(item.data.size());
            cd.put<uint32_t>(0x02014b50).put<uint16_t>(45).put<uint16_t>(45).put<uint16_t>(0).put<uint16_t>(item.method);
            cd.put<uint32_t>(0).put<uint32_t>(crc).put<uint32_t>(size32).put<uint32_t>(size32);
            cd.put<uint16_t>(uint16_t(item.name.size())).put<uint16_t>(zip64 ? 28 : 0).put<uint16_t>(0);
            cd.put<uint16_t>(0).put<uint16_t>(0).put<uint32_t>(0).put<uint32_t>(zip64 ? 0xffffffffu : uint32_t(offset));
            cd.raw(item.name);
            if (zip64)
                cd.put<uint16_t>(1).put<uint16_t>(24).put<uint64_t>(item.data.size()).put<uint64_t>(item.data.size())
                    .put<uint64_t>(offset);
        }
        const auto cd_offset = static_cast<uint64_t>(w.b.size());
        w.raw(cd.b);
        const auto n = static_cast<uint64_t>(items.size());
        if (zip64) {
            const auto record = static_cast<uint64_t>(w.b.size());
            w.put<uint32_t>(0x06064b50).put<uint64_t>(44).put<uint16_t>(45).put<uint16_t>(45).put<uint32_t>(0);
            w.put<uint32_t>(0).put<uint64_t>(n).put<uint64_t>(n).put<uint64_t>(cd.b.size()).put<uint64_t>(cd_offset);
            w.put<uint32_t>(0x07064b50).put<uint32_t>(0).put<uint64_t>(record).put<uint32_t>(1);
        }
        w.put<uint32_t>(0x06054b50).put<uint16_t>(0).put<uint16_t>(0);
        w.put<uint16_t>(zip64 ? 0xffff : uint16_t(n)).put<uint16_t>(zip64 ? 0xffff : uint16_t(n));
        w.put<uint32_t>(zip64 ? 0xffffffffu : uint32_t(cd.b.size())).put<uint32_t>(zip64 ? 0xffffffffu : uint32_t(cd_offset));
        w.put<uint16_t>(uint16_t(comment.size())).raw(comment);
        return w.b;
    }
};

// Pickle opcodes written the way torch.save (protocol 2) writes them.
struct PickleWriter {
    Writer w;
    PickleWriter() { w.put<uint8_t>(0x80).put<uint8_t>(2); }
    PickleWriter& op(char c) {
        w.put<uint8_t>(static_cast<uint8_t>(c));
        return *this;
    }
    PickleWriter& global(std::string_view module, std::string_view name) {
        op('c').w.raw(module).raw("\n").raw(name).raw("\n");
        return *this;
    }
    PickleWriter& str(std::string_view s) {
        op('X').w.put<uint32_t>(uint32_t(s.size())).raw(s);
        return *this;
    }
    PickleWriter& integer(int32_t v) {
        op('J').w.put<int32_t>(v);
        return *this;
    }
    PickleWriter& ints(std::initializer_list<int32_t> values) {  // as a tuple
        op('(');
        for (int32_t v : values) integer(v);
        return op('t');
    }
    // _rebuild_tensor_v2(('storage', torch.<cls>, key, 'cpu', numel), offset, size, stride, False, OrderedDict())
    PickleWriter& tensor(std::string_view cls, std::string_view key, int32_t numel, int32_t offset,
                         std::initializer_list<int32_t> size, std::initializer_list<int32_t> stride) {
        global("torch._utils", "_rebuild_tensor_v2").op('(').op('(').str("storage").global("torch", cls).str(key);
        str("cpu").integer(numel).op('t').op('Q').integer(offset).ints(size).ints(stride).op('\x89');
        return global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    }
    Bytes done() {
        op('.');
        return w.b;
    }
};

// A torch.save-like archive "x.pt" holding `pickle` and storages x/data/<key>.
Bytes torch_zip(Bytes pickle, std::vector<std::pair<std::string, Bytes>> storages = {}) {
    ZipBuilder z;
    z.add("x/data.pkl", std::move(pickle));
    for (auto& [key, data] : storages) z.add("x/data/" + key, std::move(data));
    z.add("x/version", bytes_of("3\n"));
    return z.build();
}

TorchCheckpoint parse(const Bytes& bytes) { return parse_torch_checkpoint(bytes, "x.pt"); }

// {name: tensor} with one float32 storage "0" of `numel` elements.
Bytes one_tensor_pickle(int32_t numel, int32_t offset, std::initializer_list<int32_t> size,
                        std::initializer_list<int32_t> stride, std::string_view cls = "FloatStorage") {
    PickleWriter p;
    p.op('}').str("t").tensor(cls, "0", numel, offset, size, stride).op('s');
    return p.done();
}

std::vector<float> floats_of(const TorchTensor& t) {
    const size_t width = t.type == DType::F32 ? 4 : 2;
    std::vector<float> out(t.data.size() / width);
    for (size_t i = 0; i < out.size(); ++i) {
        if (t.type == DType::F32) {
            std::memcpy(&out[i], t.data.data() + 4 * i, 4);
        } else {
            uint16_t h;
            std::memcpy(&h, t.data.data() + 2 * i, 2);
            out[i] = t.type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
        }
    }
    return out;
}

const GgufFile& expected() {
    static const GgufFile f = GgufFile::open(fixture("expected.gguf"));
    return f;
}

// Every expected "<stem>/<name>" tensor is read back with the same shape and values.
void check_against_expected(const TorchCheckpoint& c, std::string_view stem) {
    size_t compared = 0;
    for (const GgufTensor& e : expected().tensors()) {
        if (!e.name.starts_with(std::string(stem) + "/")) continue;
        const std::string name = e.name.substr(stem.size() + 1);
        INFO(name);
        const TorchTensor* t = c.find_tensor(name);
        REQUIRE(t != nullptr);
        std::vector<uint64_t> dims(t->shape.rbegin(), t->shape.rend());
        if (dims.empty()) dims = {1};  // the script stores 0-dim tensors as (1,)
        CHECK(dims == e.dims);
        CHECK(floats_of(*t) == test::values_of<float>(e));
        ++compared;
    }
    CHECK(compared > 0);
}

bool inside(std::span<const std::byte> part, const Bytes& whole) {
    return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

// ------------------------------------------------------------------ zip

TEST_CASE("zip: torch.save's archive is indexed with zero-copy entries", "[pytorch]") {
    const ZipArchive z = ZipArchive::open(fixture("llama_f32.pt"));
    REQUIRE(z.find("llama_f32/data.pkl") != nullptr);
    CHECK(z.find("llama_f32/data/0") != nullptr);
    const auto version = z.entry("llama_f32/version");
    CHECK(std::string(reinterpret_cast<const char*>(version.data()), version.size()) == "3\n");
    for (const ZipEntry& e : z.entries()) {
        CHECK(e.method == 0);
        if (e.name.find("/data/") != std::string::npos) CHECK(e.data_offset % 64 == 0);  // torch's alignment
        CHECK(z.entry(e.name).data() == z.bytes().data() + e.data_offset);
    }
    CHECK_NOTHROW(z.checked_entry("llama_f32/data.pkl"));
    CHECK(zip_crc32(bytes_of("123456789")) == 0xcbf43926u);  // the standard check value
}

TEST_CASE("zip: plain and zip64 directories, comments", "[pytorch]") {
    for (bool zip64 : {false, true}) {
        ZipBuilder b;
        b.zip64 = zip64;
        b.comment = zip64 ? "" : "a comment with PK\x05\x06 inside";
        b.add("a/one", bytes_of("first")).add("a/two", bytes_of("second entry"));
        const Bytes bytes = b.build();
        const ZipArchive z = ZipArchive::parse(bytes, "t.zip");
        REQUIRE(z.entries().size() == 2);
        const auto two = z.checked_entry("a/two");
        CHECK(std::string(reinterpret_cast<const char*>(two.data()), two.size()) == "second entry");
        REQUIRE_ERROR(z.entry("a/three"), "has no entry 'a/three'");
    }
}

TEST_CASE("zip: unsafe and duplicate names are refused", "[pytorch]") {
    for (std::string_view name : {"../evil", "a/../../b", "/etc/passwd", "a\\b", "C:/x", ".."}) {
        const Bytes bytes = ZipBuilder().add(std::string(name), bytes_of("x")).build();
        REQUIRE_ERROR(ZipArchive::parse(bytes, "t.zip"), "points outside the archive");
    }
    CHECK_NOTHROW(ZipArchive::parse(ZipBuilder().add("a/..b/c..", bytes_of("x")).build(), "t.zip"));
    REQUIRE_ERROR(ZipArchive::parse(ZipBuilder().add("a", {}).add("a", {}).build(), "t.zip"),
                  "[zip] t.zip: entry 'a' appears twice");
    const std::string path = fixture("traversal.pt").string();
    REQUIRE_ERROR(read_torch_checkpoint(fixture("traversal.pt")),
                  "[zip] " + path + ": entry '../evil' points outside the archive");
}

TEST_CASE("zip: compressed, truncated and corrupt archives", "[pytorch]") {
    REQUIRE_ERROR(read_torch_checkpoint(fixture("deflated.pt")),
                  "entry 'views/data.pkl' is compressed (deflate); kiln reads only stored entries");
    REQUIRE_ERROR(read_torch_checkpoint(fixture("truncated.pt")), "end-of-central-directory record is missing");
    REQUIRE_ERROR(ZipArchive::parse(bytes_of("hello, this is not a zip file at all"), "t.zip"), "not a zip archive");
    REQUIRE_ERROR(ZipArchive::parse({}, "t.zip"), "the file is empty");

    const Bytes good = ZipBuilder().add("a/x", bytes_of("payload")).build();
    Bytes corrupt = good;
    corrupt[30 + 3] ^= std::byte{1};  // a data byte: the CRC no longer matches
    REQUIRE_ERROR(ZipArchive::parse(corrupt, "t.zip").checked_entry("a/x"), "is corrupt");
    Bytes renamed = good;
    renamed[30] = std::byte{'b'};  // the local header's name
    REQUIRE_ERROR(ZipArchive::parse(renamed, "t.zip"), "does not match the central directory");
    Bytes too_many = good;
    test::patch<uint16_t>(too_many, too_many.size() - 22 + 8, 5000);  // EOCD entry counts
    test::patch<uint16_t>(too_many, too_many.size() - 22 + 10, 5000);
    REQUIRE_ERROR(ZipArchive::parse(too_many, "t.zip"), "claims 5000 entries");
    Bytes long_entry = good;
    const size_t cd = good.size() - 22 - 46 - 3;
    test::patch<uint32_t>(long_entry, cd + 20, 1000);
    test::patch<uint32_t>(long_entry, cd + 24, 1000);
    REQUIRE_ERROR(ZipArchive::parse(long_entry, "t.zip"), "runs into the central directory");
}

TEST_CASE("zip: every truncation of a torch.save file fails cleanly", "[pytorch]") {
    const Bytes whole = test::read_file(fixture("views.pt"));
    CHECK_NOTHROW(parse_torch_checkpoint(whole, "views.pt"));
    for (size_t n = 0; n < whole.size(); ++n) {
        const Bytes cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK_THROWS_AS(parse_torch_checkpoint(cut, "views.pt"), Error);
    }
}

// ------------------------------------------------------------------ the unpickler

TEST_CASE("pickle: globals outside the whitelist are refused before anything runs", "[pytorch]") {
    const std::pair<std::string_view, std::string_view> hostile[] = {
        {"os", "system"}, {"builtins", "eval"}, {"subprocess", "Popen"}, {"__builtin__", "getattr"},
        {"posix", "system"}, {"torch", "load"}, {"torch._utils", "_rebuild_tensor"},
        {"numpy.core.multiarray", "_reconstruct"}, {"collections", "defaultdict"}};
    for (const auto& [module, name] : hostile) {
        const std::string expected = fmt::format(
            "[pytorch] evil.pkl: the pickle refers to {}.{}, which kiln will not load (only tensors, storages, dicts "
            "and plain values)",
            module, name);
        // GLOBAL followed by bytes that are not even opcodes: the refusal comes first.
        PickleWriter named;
        named.global(module, name).w.put<uint8_t>(0xff);
        CHECK(test::error_of([&] { pickle::unpickle(named.w.b, "evil.pkl"); }) == expected);
        PickleWriter stack;  // protocol 4's STACK_GLOBAL takes the names from the stack
        stack.str(module).str(name).w.put<uint8_t>(0x93).put<uint8_t>(0xff);
        CHECK(test::error_of([&] { pickle::unpickle(stack.w.b, "evil.pkl"); }) == expected);
    }
    const std::string path = fixture("hostile_os_system.pt").string();
    CHECK(test::error_of([&] { read_torch_checkpoint(fixture("hostile_os_system.pt")); }) ==
          "[pytorch] " + path +
              ": the pickle refers to os.system, which kiln will not load (only tensors, storages, dicts and plain "
              "values)");
    CHECK_FALSE(std::filesystem::exists("/tmp/kiln-pwned"));
}

TEST_CASE("pickle: plain values from every opcode that can make them", "[pytorch]") {
    Writer w;
    w.put<uint8_t>(0x80).put<uint8_t>(4).put<uint8_t>(0x95).put<uint64_t>(0);  // PROTO 4, FRAME
    w.raw("}").put<uint8_t>(0x94);                                              // EMPTY_DICT MEMOIZE (memo 0)
    w.raw("(");                                                                 // MARK for SETITEMS
    w.put<uint8_t>(0x8c).put<uint8_t>(1).raw("a").raw("K").put<uint8_t>(200);   // 'a': BININT1 200
    w.raw("U").put<uint8_t>(1).raw("b").raw("M").put<uint16_t>(60000);          // 'b': BININT2
    w.raw("X").put<uint32_t>(1).raw("c").raw("J").put<int32_t>(-7);             // 'c': BININT -7
    w.put<uint8_t>(0x8d).put<uint64_t>(1).raw("d").put<uint8_t>(0x8a).put<uint8_t>(8).put<int64_t>(-(int64_t{1} << 40));
    w.raw("T").put<int32_t>(1).raw("e").put<uint8_t>(0x8b).put<int32_t>(2).put<int16_t>(-2);  // LONG4 -2
    w.raw("X").put<uint32_t>(1).raw("f").raw("G");
    for (uint8_t byte : {0x3f, 0xf8, 0, 0, 0, 0, 0, 0}) w.put<uint8_t>(byte);  // 1.5, big-endian
    w.raw("X").put<uint32_t>(1).raw("g").raw("N");                             // None
    w.raw("X").put<uint32_t>(1).raw("h").put<uint8_t>(0x88);                   // True
    w.raw("X").put<uint32_t>(1).raw("i").raw("C").put<uint8_t>(2).raw("\x01\x02");  // bytes
    w.raw("X").put<uint32_t>(1).raw("j").raw("(").raw("K").put<uint8_t>(1).raw("G");
    for (uint8_t byte : {0x40, 0, 0, 0, 0, 0, 0, 0}) w.put<uint8_t>(byte);  // 2.0
    w.raw("l");                                                             // LIST [1, 2.0]
    w.raw("X").put<uint32_t>(1).raw("k").raw("]").raw("r").put<uint32_t>(7).raw("(");
    w.put<uint8_t>(0x88).put<uint8_t>(0x89).raw("e");                         // [True, False], memo 7
    w.raw("X").put<uint32_t>(1).raw("l").raw("j").put<uint32_t>(7);           // LONG_BINGET 7: the same list
    w.raw("X").put<uint32_t>(1).raw("m").put<uint8_t>(0x8a).put<uint8_t>(9).raw("\x01\x02\x03\x04\x05\x06\x07\x08\x09");
    w.raw("X").put<uint32_t>(1).raw("n").raw("(").raw("X").put<uint32_t>(1).raw("p").raw("K").put<uint8_t>(3).raw("d");
    w.raw("u");                                                               // SETITEMS
    w.raw("K").put<uint8_t>(9).raw("2").raw("0").raw("0");  // DUP, POP, POP: the dict is on top again
    w.raw("(").raw("1").raw(".");                             // MARK, POP_MARK, STOP
    const Bytes pkl = w.b;
    const TorchCheckpoint c = parse(torch_zip(pkl));
    const auto value = [&](std::string_view name) -> GgufValue {
        const GgufValue* v = c.find_value(name);
        INFO(name);
        REQUIRE(v != nullptr);
        return *v;
    };
    CHECK(value("a") == GgufValue(int64_t{200}));
    CHECK(value("b") == GgufValue(int64_t{60000}));
    CHECK(value("c") == GgufValue(int64_t{-7}));
    CHECK(value("d") == GgufValue(-(int64_t{1} << 40)));
    CHECK(value("e") == GgufValue(int64_t{-2}));
    CHECK(value("f") == GgufValue(1.5));
    CHECK(c.find_value("g") == nullptr);  // None has no GGUF value
    CHECK(value("h") == GgufValue(true));
    CHECK(value("i") == gguf_array(GgufType::UINT8, std::vector<uint8_t>{1, 2}));
    CHECK(value("j") == gguf_array(GgufType::FLOAT64, std::vector<double>{1.0, 2.0}));
    CHECK(value("k") == gguf_array(GgufType::BOOL, std::vector<bool>{true, false}));
    CHECK(value("l") == value("k"));
    CHECK(c.find_value("m") == nullptr);  // past int64
    CHECK(value("n.p") == GgufValue(int64_t{3}));
    CHECK(c.values.size() == 12);
}

TEST_CASE("pickle: malformed programs give one clear error each", "[pytorch]") {
    const auto program = [](std::string_view ops) {
        Writer w;
        w.put<uint8_t>(0x80).put<uint8_t>(2).raw(ops);
        return w.b;
    };
    const auto fails = [&](std::string_view ops, std::string_view fragment) {
        const Bytes b = program(ops);
        INFO(fmt::format("ops {:?}", ops.substr(0, 40)));
        const std::string message = test::error_of([&] { pickle::unpickle(b, "p.pkl"); });
        INFO(message);
        CHECK(message.rfind("[pytorch] p.pkl: ", 0) == 0);
        CHECK(message.find(fragment) != std::string::npos);
    };
    fails("", "ends without a STOP");
    fails("N", "ends without a STOP");
    fails(".", "pops from an empty stack");
    fails("(.", "pops from an empty stack");  // never across a MARK
    fails("X\x10\x00\x00\x00" "abc"sv, "BINUNICODE needs 16 bytes but the pickle has 3 left");
    fails("\x8d\xff\xff\xff\xff\xff\xff\xff\xff", "BINUNICODE8 needs");
    fails("h\x05", "memo slot 5, which was never stored");
    fails("i__main__\nX\n", "opcode INST (0x69) is not one kiln reads");
    fails("\x92", "opcode NEWOBJ_EX");
    fails("\x82\x01", "opcode EXT1");
    fails("\xff", "byte 0xff is not a pickle opcode");
    fails("}Na", "APPEND(S) on a dict");
    fails("]NNs", "SETITEM(S) on a list");
    fails("}(Nu", "odd number of values");
    fails("u", "without a MARK");
    fails("N]b", "BUILD sets the state of a None");
    fails("NN\x85R", "REDUCE calls a None");
    fails("ccollections\nOrderedDict\nN\x85R", "called with 1 arguments (expected none)");
    fails("ctorch\nFloatStorage\n)R", "only a type description");
    fails("ctorch._utils\n_rebuild_tensor_v2\nN\x85R", "called with 1 arguments (expected 6 or 7)");
    fails("X\x03\x00\x00\x00" "abcQ"sv, "persistent id is not torch's");
    fails("\x80\x06", "protocol 6");
    fails("\x8b\xff\xff\xff\xff", "LONG4 with a negative length");
    fails("\x95\x00\x01\x00\x00\x00\x00\x00\x00."sv, "FRAME of 256 bytes");
    fails("cos", "no end of line");
    fails(std::string(pickle::kMaxMarks + 1, '('), "MARKs are open");
    fails(std::string(pickle::kMaxStack + 1, 'N'), "stack grows past");
}

TEST_CASE("pickle: self-referencing and exponentially shared values are bounded", "[pytorch]") {
    // {'a': l} where l = [l]: legal pickle, infinitely deep as a tree.
    PickleWriter self;
    self.op('}').str("a").op(']').op('q').w.put<uint8_t>(0);
    self.op('h').w.put<uint8_t>(0);
    self.op('a').op('s');
    REQUIRE_ERROR(parse(torch_zip(self.done())), "nested more than 64 levels");

    // l0 = [0]; l(i+1) = [l(i), l(i)]: 2^40 leaves from a few hundred bytes.
    PickleWriter dag;
    dag.op('}').str("a").op(']').op('K').w.put<uint8_t>(0);
    dag.op('a').op('q').w.put<uint8_t>(0);
    for (uint8_t i = 1; i <= 40; ++i) {
        dag.op('0').op(']').op('(').op('h').w.put<uint8_t>(i - 1);  // POP the previous list: it lives in the memo
        dag.op('h').w.put<uint8_t>(i - 1);
        dag.op('e').op('q').w.put<uint8_t>(i);
    }
    dag.op('s');
    REQUIRE_ERROR(parse(torch_zip(dag.done())), "expands to more than");
}

// ------------------------------------------------------------------ torch checkpoints

TEST_CASE("torch: llama2.c train.py checkpoint, tensors and plain values", "[pytorch]") {
    const Bytes file = test::read_file(fixture("llama_f32.pt"));
    const TorchCheckpoint c = parse_torch_checkpoint(file, "llama_f32.pt");
    check_against_expected(c, "llama_f32");
    CHECK(c.tensors.size() == (3 + 9 * 2) + 2 + 1);  // model, optimizer, best_val_loss
    for (const TorchTensor& t : c.tensors) {
        CHECK(t.type == DType::F32);
        CHECK(inside(t.data, file));  // contiguous tensors are never copied
    }
    const TorchTensor& emb = *c.find_tensor("model.tok_embeddings.weight");
    const TorchTensor& out = *c.find_tensor("model.output.weight");
    CHECK(emb.shape == std::vector<int64_t>{64, 32});
    CHECK(out.data.data() == emb.data.data());  // tied: one storage
    CHECK(out.storage == emb.storage);
    CHECK(c.find_tensor("optimizer.state.0.step")->shape.empty());
    CHECK(c.find_tensor("best_val_loss") != nullptr);

    CHECK(*c.find_value("model_args.dim") == GgufValue(int64_t{32}));
    CHECK(*c.find_value("model_args.n_kv_heads") == GgufValue(int64_t{2}));
    CHECK(*c.find_value("model_args.norm_eps") == GgufValue(1e-5));
    CHECK(*c.find_value("model_args.dropout") == GgufValue(0.0));
    CHECK(*c.find_value("iter_num") == GgufValue(int64_t{5}));
    CHECK(*c.find_value("config.out_dir") == GgufValue("out"));
    CHECK(*c.find_value("config.compile") == GgufValue(false));
    CHECK(*c.find_value("optimizer.param_groups.0.betas") == gguf_array(GgufType::FLOAT64, std::vector<double>{0.9, 0.95}));
    CHECK(*c.find_value("optimizer.param_groups.0.params") ==
          gguf_array(GgufType::INT64, std::vector<int64_t>{0, 1, 2}));
    CHECK(*c.find_value("optimizer.param_groups.0.maximize") == GgufValue(false));
    CHECK(c.find_value("optimizer.param_groups.0.foreach") == nullptr);  // None
    CHECK(c.find_value("model._metadata") == nullptr);  // the state dict's attributes are not items
}

TEST_CASE("torch: float16 (protocol 4) and bfloat16 checkpoints", "[pytorch]") {
    for (auto [stem, type] : {std::pair{"llama_f16", DType::F16}, std::pair{"llama_bf16", DType::BF16}}) {
        const TorchCheckpoint c = read_torch_checkpoint(fixture(std::string(stem) + ".pt"));
        check_against_expected(c, stem);
        for (const TorchTensor& t : c.tensors) CHECK(t.type == type);
        CHECK(c.find_tensor("model.output.weight")->storage != c.find_tensor("model.tok_embeddings.weight")->storage);
    }
}

TEST_CASE("torch: views are materialized contiguous, copied only when they must be", "[pytorch]") {
    const Bytes file = test::read_file(fixture("views.pt"));
    const TorchCheckpoint c = parse_torch_checkpoint(file, "views.pt");
    check_against_expected(c, "views");
    const auto& t = [&](std::string_view name) -> const TorchTensor& { return *c.find_tensor(name); };
    CHECK(t("transposed").shape == std::vector<int64_t>{4, 3});
    CHECK(t("transposed").stride == std::vector<int64_t>{1, 4});
    CHECK_FALSE(inside(t("transposed").data, file));
    CHECK(t("transposed").storage == t("matrix").storage);
    CHECK(t("slice").storage_offset == 2);
    CHECK(t("slice").data.data() == t("base").data.data() + 2 * 4);  // zero-copy, shared storage
    CHECK(t("row").data.data() == t("matrix").data.data() + 4 * 4);
    CHECK_FALSE(inside(t("column").data, file));
    CHECK(t("expanded").stride == std::vector<int64_t>{0, 1});
    CHECK(t("scalar").shape.empty());
    CHECK(floats_of(t("scalar")) == std::vector<float>{3.5f});
    CHECK(t("empty").shape == std::vector<int64_t>{0, 3});
    CHECK(t("empty").data.empty());
}

TEST_CASE("torch: nn.Parameter is read as its tensor", "[pytorch]") {
    const TorchCheckpoint c = read_torch_checkpoint(fixture("parameter.pt"));
    check_against_expected(c, "parameter");
    CHECK(c.tensors.size() == 2);
}

TEST_CASE("torch: tensors and storages that do not add up", "[pytorch]") {
    const Bytes four = bytes_of_values<float>({1, 2, 3, 4});
    CHECK(floats_of(*parse(torch_zip(one_tensor_pickle(4, 1, {2}, {2}), {{"0", four}})).find_tensor("t")) ==
          std::vector<float>{2, 4});
    REQUIRE_ERROR(parse(torch_zip(one_tensor_pickle(4, 1, {2}, {3}), {{"0", four}})),
                  "tensor 't' (offset 1, shape (2), stride (3)) reaches element 4 of a storage of 4 elements");
    REQUIRE_ERROR(parse(torch_zip(one_tensor_pickle(5, 0, {5}, {1}), {{"0", four}})),
                  "has 16 bytes but should hold 5 float32 elements");
    REQUIRE_ERROR(parse(torch_zip(one_tensor_pickle(4, 0, {4}, {1}))), "needs storage entry 'x/data/0'");
    REQUIRE_ERROR(parse(torch_zip(one_tensor_pickle(2, 0, {2}, {1}, "LongStorage"), {{"0", four}})),
                  "tensor 't' has dtype int64; kiln reads float32, float16 and bfloat16 tensors");
    REQUIRE_ERROR(parse(torch_zip(one_tensor_pickle(4, 0, {2, 2}, {1}), {{"0", four}})), "2 sizes but 1 strides");
    REQUIRE_ERROR(parse(torch_zip(one_tensor_pickle(4, 0, {1 << 30, 1 << 30, 1 << 30}, {1, 1, 1}), {{"0", four}})),
                  "is too large");

    PickleWriter two_dtypes;
    two_dtypes.op('}').str("a").tensor("FloatStorage", "0", 4, 0, {4}, {1}).op('s');
    two_dtypes.str("b").tensor("HalfStorage", "0", 8, 0, {8}, {1}).op('s');
    REQUIRE_ERROR(parse(torch_zip(two_dtypes.done(), {{"0", four}})), "storage '0' is used as");

    PickleWriter clash;  // {"a.b": 1, "a": {"b": 2}}
    clash.op('}').op('(').str("a.b").integer(1).str("a").op('}').str("b").integer(2).op('s').op('u');
    REQUIRE_ERROR(parse(torch_zip(clash.done())), "two values are both named 'a.b'");
    PickleWriter tuple_key;
    tuple_key.op('}').ints({1}).integer(2).op('s');
    REQUIRE_ERROR(parse(torch_zip(tuple_key.done())), "has a tuple key");
    PickleWriter list_root;
    list_root.op(']');
    REQUIRE_ERROR(parse(torch_zip(list_root.done())), "holds a list, not a dict");
}

TEST_CASE("torch: archive-level problems", "[pytorch]") {
    const Bytes empty_dict = PickleWriter().op('}').done();
    CHECK(parse(torch_zip(empty_dict)).tensors.empty());
    REQUIRE_ERROR(parse(ZipBuilder().add("x/other", empty_dict).build()), "no <folder>/data.pkl entry");
    REQUIRE_ERROR(parse(ZipBuilder().add("x/data.pkl", empty_dict).add("y/data.pkl", empty_dict).build()),
                  "holds two pickles");
    REQUIRE_ERROR(parse(ZipBuilder().add("x/data.pkl", empty_dict).add("x/byteorder", bytes_of("big")).build()),
                  "byte order 'big'");
    CHECK_NOTHROW(parse(ZipBuilder().add("x/data.pkl", empty_dict).add("x/byteorder", bytes_of("little")).build()));
    Writer legacy;
    for (uint8_t b : {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e})
        legacy.put<uint8_t>(b);
    REQUIRE_ERROR(parse(legacy.b), "legacy torch.save format (PyTorch < 1.6)");
    CHECK(looks_like_torch_checkpoint(legacy.b));
    CHECK(looks_like_torch_checkpoint(test::read_file(fixture("views.pt"))));
    CHECK_FALSE(looks_like_torch_checkpoint(bytes_of("GGUF....")));
}

TEST_CASE("torch: corrupting any byte of a pickle never crashes", "[pytorch]") {
    const ZipArchive z = ZipArchive::open(fixture("views.pt"));
    const auto pkl = z.entry("views/data.pkl");
    std::vector<std::pair<std::string, Bytes>> storages;
    for (const ZipEntry& e : z.entries())
        if (e.name.starts_with("views/data/")) {
            const auto d = z.entry(e.name);
            storages.emplace_back(e.name.substr(11), Bytes(d.begin(), d.end()));
        }
    size_t failures = 0;
    for (size_t i = 0; i < pkl.size(); ++i) {
        for (uint8_t flip : {0x01, 0x80, 0xff}) {
            Bytes mutated(pkl.begin(), pkl.end());
            mutated[i] ^= std::byte{flip};
            try {
                parse(torch_zip(mutated, storages));
            } catch (const Error&) {
                ++failures;
            }
        }
    }
    CHECK(failures > pkl.size());  // most mutations are caught; none may crash
}

// ------------------------------------------------------------------ llama2.c state dicts

TEST_CASE("llama: a llama2.c checkpoint becomes llama.cpp's layout", "[pytorch]") {
    const TorchCheckpoint c = read_torch_checkpoint(fixture("llama_f32.pt"));
    const Checkpoint k = llama_checkpoint_from_state_dict(c, "tiny");
    const std::vector<GgufEntry> metadata = {
        {"general.architecture", GgufValue("llama")},
        {"general.name", GgufValue("tiny")},
        {"llama.context_length", GgufValue(uint32_t{128})},
        {"llama.embedding_length", GgufValue(uint32_t{32})},
        {"llama.feed_forward_length", GgufValue(uint32_t{64})},
        {"llama.attention.head_count", GgufValue(uint32_t{4})},
        {"llama.attention.head_count_kv", GgufValue(uint32_t{2})},
        {"llama.block_count", GgufValue(uint32_t{2})},
        {"llama.rope.dimension_count", GgufValue(uint32_t{8})},
        {"llama.attention.layer_norm_rms_epsilon", GgufValue(1e-5f)},
    };
    REQUIRE(k.metadata.size() == metadata.size());
    for (size_t i = 0; i < metadata.size(); ++i) {
        CHECK(k.metadata[i].key == metadata[i].key);
        CHECK(k.metadata[i].value == metadata[i].value);
    }
    const std::pair<std::string_view, std::string_view> layer_names[] = {
        {"attn_q", "attention.wq"}, {"attn_k", "attention.wk"},      {"attn_v", "attention.wv"},
        {"attn_output", "attention.wo"}, {"attn_norm", "attention_norm"}, {"ffn_gate", "feed_forward.w1"},
        {"ffn_down", "feed_forward.w2"}, {"ffn_up", "feed_forward.w3"},  {"ffn_norm", "ffn_norm"}};
    std::vector<std::pair<std::string, std::string>> names = {{"token_embd", "tok_embeddings"},
                                                              {"output_norm", "norm"}};  // output: tied, left out
    for (int layer = 0; layer < 2; ++layer)
        for (const auto& [gguf, torch] : layer_names)
            names.emplace_back(fmt::format("blk.{}.{}", layer, gguf), fmt::format("layers.{}.{}", layer, torch));
    REQUIRE(k.tensors.size() == names.size());
    for (size_t i = 0; i < names.size(); ++i) {
        const CheckpointTensor& t = k.tensors[i];
        CHECK(t.name == names[i].first + ".weight");
        const GgufTensor& e = expected().get_tensor("llama_f32/model." + names[i].second + ".weight");
        CHECK(t.dims == e.dims);  // ggml order: torch (out, in) -> [in, out]
        CHECK(t.type == DType::F32);
        REQUIRE(t.data.size() == e.data.size());
        CHECK(std::memcmp(t.data.data(), e.data.data(), e.data.size()) == 0);
        CHECK(t.data.data() == c.find_tensor("model." + names[i].second + ".weight")->data.data());
    }
    CHECK(k.tensors[0].dims == std::vector<uint64_t>{32, 64});
    CHECK(k.tensors[2].dims == std::vector<uint64_t>{32, 32});  // blk.0.attn_q
    CHECK(k.tensors[3].dims == std::vector<uint64_t>{32, 16});  // blk.0.attn_k
    CHECK(k.source == c.source);
}

TEST_CASE("llama: untied output, prefixes and hyper-parameters inferred from shapes", "[pytorch]") {
    const TorchCheckpoint f16 = read_torch_checkpoint(fixture("llama_f16.pt"));
    const Checkpoint k = llama_checkpoint_from_state_dict(f16, "tiny");
    REQUIRE(k.tensors.size() == 3 + 9 * 2);
    CHECK(k.tensors[2].name == "output.weight");
    CHECK(k.tensors[2].type == DType::F16);
    CHECK(k.tensors[2].dims == std::vector<uint64_t>{32, 64});

    const TorchCheckpoint base = read_torch_checkpoint(fixture("llama_f32.pt"));
    for (std::string_view prefix : {"", "_orig_mod.", "state_dict.", "model._orig_mod."}) {
        TorchCheckpoint c = base;
        for (TorchTensor& t : c.tensors)
            if (t.name.starts_with("model.")) t.name = std::string(prefix) + t.name.substr(6);
        std::erase_if(c.tensors, [](const TorchTensor& t) { return !t.name.ends_with(".weight"); });
        INFO(prefix);
        CHECK(llama_checkpoint_from_state_dict(c, "tiny").tensors.size() == 2 + 9 * 2);
    }

    TorchCheckpoint only_heads = base;  // model_args.n_heads is the one thing shapes cannot tell
    std::erase_if(only_heads.values, [](const GgufEntry& e) { return e.key != "model_args.n_heads"; });
    const Checkpoint inferred = llama_checkpoint_from_state_dict(only_heads, "tiny");
    const auto meta = [&](std::string_view key) {
        for (const GgufEntry& e : inferred.metadata)
            if (e.key == key) return e.value;
        FAIL("missing " << key);
        return GgufValue();
    };
    CHECK(meta("llama.context_length") == GgufValue(uint32_t{2048}));  // model.py's default
    CHECK(meta("llama.feed_forward_length") == GgufValue(uint32_t{64}));
    CHECK(meta("llama.attention.head_count_kv") == GgufValue(uint32_t{2}));
    CHECK(meta("llama.block_count") == GgufValue(uint32_t{2}));
    CHECK(meta("llama.attention.layer_norm_rms_epsilon") == GgufValue(1e-5f));
}

TEST_CASE("llama: missing tensors and shapes that contradict model_args", "[pytorch]") {
    const TorchCheckpoint base = read_torch_checkpoint(fixture("llama_f32.pt"));
    const auto with = [&](const std::function<void(TorchCheckpoint&)>& change) {
        TorchCheckpoint c = base;
        change(c);
        return c;
    };
    const auto set_arg = [](TorchCheckpoint& c, std::string_view key, std::optional<GgufValue> v) {
        std::erase_if(c.values, [&](const GgufEntry& e) { return e.key == key; });
        if (v) c.values.push_back({std::string(key), *v});
    };
    const std::optional<GgufValue> remove;

    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_heads", remove); }), "t"),
                  "model_args.n_heads is missing, and the number of attention heads cannot be inferred");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([](auto& c) {
                      std::erase_if(c.tensors, [](const TorchTensor& t) {
                          return t.name == "model.layers.1.attention.wk.weight";
                      });
                  }), "t"),
                  "tensor 'model.layers.1.attention.wk.weight' is missing");
    REQUIRE_ERROR(
        llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_kv_heads", int64_t{4}); }), "t"),
        "tensor 'model.layers.0.attention.wk.weight' has shape (16, 32) but the hyper-parameters");
    REQUIRE_ERROR(
        llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_kv_heads", int64_t{4}); }), "t"),
        "expect (32, 32)");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.hidden_dim", remove); }),
                                                   "t"),
                  "tensor 'model.layers.0.feed_forward.w1.weight' has shape (64, 32)");  // multiple_of 32 gives 96
    REQUIRE_ERROR(
        llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.vocab_size", int64_t{32000}); }),
                                         "t"),
        "tensor 'model.tok_embeddings.weight' has shape (64, 32)");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_layers", int64_t{1}); }),
                                                   "t"),
                  "is not part of a llama2.c model with 1 layers");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.n_layers", int64_t{3}); }),
                                                   "t"),
                  "model_args.n_layers is 3 but the tensors hold 2 layers ('model.layers.N.*')");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) { set_arg(c, "model_args.dim", "32"); }), "t"),
                  "model_args.dim is not a positive integer");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) {
                      TorchTensor bias = *c.find_tensor("model.norm.weight");
                      bias.name = "model.layers.0.attention.wq.bias";
                      c.tensors.push_back(bias);
                  }), "t"),
                  "tensor 'model.layers.0.attention.wq.bias' is not part of a llama2.c model");
    REQUIRE_ERROR(llama_checkpoint_from_state_dict(with([&](auto& c) {
                      for (TorchTensor& t : c.tensors) t.name = "other." + t.name;
                  }), "t"),
                  "no llama2.c model in the checkpoint");
}
