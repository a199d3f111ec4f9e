// Malformed GGUF files: every one must give one clear kiln::Error naming the
// file and the problem, never a crash, a hang or a huge allocation. The corpus
// is generated here from a valid sample file.
#include <catch2/catch.hpp>

#include <random>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "support/sample_gguf.h"

using namespace kiln;
using test::Bytes;
using test::ByteWriter;

namespace {

// Parses `bytes` expecting failure; returns the error message.
std::string parse_error(const Bytes& bytes) {
    try {
        GgufFile::parse(bytes, "bad.gguf");
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("the malformed file was accepted");
    return {};
}

void require_error(const Bytes& bytes, std::string_view fragment) {
    const std::string message = parse_error(bytes);
    INFO(message);
    CHECK(message.find(fragment) != std::string::npos);
    CHECK(message.rfind("[gguf] bad.gguf: ", 0) == 0);  // component and file come first
    CHECK(message.find('\n') == std::string::npos);     // one line
}

// Offset of the u64 length that precedes a key or tensor name in the file.
size_t length_field_of(const Bytes& bytes, std::string_view text) { return test::find_text(bytes, text) - 8; }

// Offset just after a tensor's name: its n_dims field.
size_t tensor_info_of(const Bytes& bytes, std::string_view name) { return test::find_text(bytes, name) + name.size(); }

// A file with one metadata entry whose value is `value_bytes` of GGUF type `type`.
Bytes one_entry_file(uint32_t type, const Bytes& value_bytes) {
    ByteWriter w;
    w.put<uint32_t>(kGgufMagic).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
    w.str("key").put<uint32_t>(type);
    w.bytes.insert(w.bytes.end(), value_bytes.begin(), value_bytes.end());
    return w.bytes;
}

constexpr uint64_t k2to62 = uint64_t{1} << 62;

}  // namespace

TEST_CASE("the sample the corpus is made from is valid", "[gguf][malformed]") {
    const Bytes bytes = test::make_sample_gguf();
    CHECK_NOTHROW(GgufFile::parse(bytes, "sample.gguf"));
}

TEST_CASE("header problems", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    require_error({}, "the file is empty");
    Bytes magic = good;
    magic[0] = std::byte{'X'};
    require_error(magic, "not a GGUF file");
    require_error(Bytes(good.begin(), good.begin() + 2), "not a GGUF file");
    Bytes v1 = good;
    test::patch<uint32_t>(v1, 4, 1);
    require_error(v1, "version 1 is not supported");
    Bytes v9 = good;
    test::patch<uint32_t>(v9, 4, 9);
    require_error(v9, "unknown GGUF version 9");
    Bytes big_endian = good;
    test::patch<uint32_t>(big_endian, 4, 0x03000000);
    require_error(big_endian, "big-endian");
}

TEST_CASE("truncation at every offset gives a clear error", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    // Padding after the last tensor is not needed: cut anywhere before the data ends.
    const GgufFile sample = GgufFile::parse(good, "sample.gguf");
    const GgufTensor& last = sample.get_tensor("tensor.q");
    const size_t data_end = static_cast<size_t>(last.data.data() + last.data.size() - good.data());
    CHECK_NOTHROW(GgufFile::parse(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(data_end)), "x"));
    for (size_t size = 0; size < data_end; ++size) {
        const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size));
        const std::string message = parse_error(cut);
        INFO("cut at " << size << ": " << message);
        const bool names_it = message.find("truncated") != std::string::npos ||
                              message.find("past the end") != std::string::npos ||
                              message.find("longer than") != std::string::npos ||
                              message.find("cannot fit") != std::string::npos ||
                              message.find("empty") != std::string::npos ||
                              message.find("not a GGUF file") != std::string::npos;
        CHECK(names_it);
    }
    // A few landmarks, so the kind of error is checked where it is known.
    require_error(Bytes(good.begin(), good.begin() + 10), "the tensor count");
    const size_t in_key = test::find_text(good, "kiln.dup.b") + 3;
    require_error(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(in_key)), "longer than");
    const size_t in_tensor_table = tensor_info_of(good, "tensor.q") + 6;
    require_error(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(in_tensor_table)),
                  "tensor 'tensor.q' needs");
    require_error(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(data_end) - 1),
                  "'tensor.q' (68 bytes at data offset");
}

TEST_CASE("absurd counts are refused before anything is allocated", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    Bytes tensors = good;
    test::patch<uint64_t>(tensors, 8, k2to62);
    require_error(tensors, "4611686018427387904 tensor infos, which cannot fit");
    Bytes kvs = good;
    test::patch<uint64_t>(kvs, 16, k2to62);
    require_error(kvs, "4611686018427387904 metadata entries, which cannot fit");
    Bytes array = good;
    // kiln.array.i32: key, then u32 value type (9), u32 element type, u64 count.
    const size_t count_at = test::find_text(array, "kiln.array.i32") + 14 + 4 + 4;
    REQUIRE(test::peek<uint64_t>(array, count_at) == 3);
    test::patch<uint64_t>(array, count_at, k2to62);
    require_error(array, "cannot fit");
    Bytes strings = good;
    test::patch<uint64_t>(strings, length_field_of(strings, "kiln.string"), k2to62);
    require_error(strings, "longer than the");
    Bytes long_value = good;
    const size_t value_length = test::find_text(long_value, "héllo") - 8;
    test::patch<uint64_t>(long_value, value_length, good.size());
    require_error(long_value, "metadata key 'kiln.string' is a string of");
}

TEST_CASE("bad value types, bools and nesting", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    Bytes type = good;
    const size_t type_at = test::find_text(type, "kiln.u8") + 7;
    REQUIRE(test::peek<uint32_t>(type, type_at) == 0);
    test::patch<uint32_t>(type, type_at, 13);
    require_error(type, "metadata key 'kiln.u8' has unknown value type 13");
    Bytes element = good;
    test::patch<uint32_t>(element, test::find_text(element, "kiln.array.i32") + 14 + 4, 99);
    require_error(element, "unknown value type 99");
    require_error(one_entry_file(7, {std::byte{2}}), "bool with value 2");

    // 100 arrays, each holding the next.
    ByteWriter deep;
    for (int i = 0; i < 100; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
    deep.put<uint32_t>(0).put<uint64_t>(0);
    require_error(one_entry_file(9, deep.bytes), "nests arrays more than");
}

TEST_CASE("duplicate keys and tensor names", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    Bytes keys = good;
    keys[test::find_text(keys, "kiln.dup.b") + 9] = std::byte{'a'};
    require_error(keys, "metadata key 'kiln.dup.a' appears twice");
    Bytes names = good;
    names[test::find_text(names, "tensor.b") + 7] = std::byte{'a'};
    require_error(names, "tensor 'tensor.a' appears twice");
}

TEST_CASE("alignment must be a power of two given as u32", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    const size_t value_at = test::find_text(good, "general.alignment") + 17 + 4;
    REQUIRE(test::peek<uint32_t>(good, value_at) == 32);
    for (uint32_t bad : {0u, 3u, 48u}) {
        Bytes b = good;
        test::patch<uint32_t>(b, value_at, bad);
        require_error(b, "expected a power of two");
    }
    Bytes typed = good;
    test::patch<uint32_t>(typed, value_at - 4, 5);  // declared as i32 instead of u32
    require_error(typed, "general.alignment has type i32");
}

TEST_CASE("tensor infos: dimensions, types, offsets", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    const size_t a = tensor_info_of(good, "tensor.a");  // n_dims=2, dims 3 2, type, offset
    REQUIRE(test::peek<uint32_t>(good, a) == 2);

    Bytes dims = good;
    test::patch<uint32_t>(dims, a, 5);
    require_error(dims, "tensor 'tensor.a' has 5 dimensions");

    Bytes overflow = good;
    test::patch<uint64_t>(overflow, a + 4, uint64_t{1} << 32);
    test::patch<uint64_t>(overflow, a + 12, uint64_t{1} << 32);
    require_error(overflow, "whose product overflows");

    Bytes huge = good;
    test::patch<uint64_t>(huge, a + 4, uint64_t{1} << 61);
    require_error(huge, "is too large");

    Bytes type = good;
    test::patch<uint32_t>(type, a + 20, 4);  // a removed ggml type id
    require_error(type, "unknown tensor type id 4");
    test::patch<uint32_t>(type, a + 20, 0xFFFFFFFF);
    require_error(type, "unknown tensor type id 4294967295");

    Bytes past = good;
    test::patch<uint64_t>(past, a + 24, uint64_t{1} << 40);
    require_error(past, "ends past the end of the file");
    test::patch<uint64_t>(past, a + 24, ~uint64_t{0} - 31);  // aligned, and offset + size wraps around
    require_error(past, "ends past the end of the file");

    Bytes unaligned = good;
    test::patch<uint64_t>(unaligned, a + 24, 8);
    require_error(unaligned, "not a multiple of the alignment 32");

    Bytes overlap = good;
    const size_t b = tensor_info_of(good, "tensor.b");  // n_dims=1, dim, type, offset
    test::patch<uint64_t>(overlap, b + 16, 0);
    require_error(overlap, "overlap");

    Bytes block = good;
    const size_t q = tensor_info_of(good, "tensor.q");
    test::patch<uint64_t>(block, q + 4, 48);  // q8_0 rows must be whole blocks of 32
    require_error(block, "not a multiple of the q8_0 block size 32");
}

TEST_CASE("random byte flips never crash the reader", "[gguf][malformed]") {
    const Bytes good = test::make_sample_gguf();
    std::mt19937_64 rng(12345);
    size_t rejected = 0;
    for (int round = 0; round < 20000; ++round) {
        Bytes b = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < flips; ++i) b[rng() % b.size()] ^= static_cast<std::byte>(1 + rng() % 255);
        try {
            const GgufFile f = GgufFile::parse(b, "flipped.gguf");
            for (const GgufTensor& t : f.tensors()) {
                // Whatever parses must keep its promises: views inside the file.
                REQUIRE(t.data.data() >= b.data());
                REQUIRE(t.data.data() + t.data.size() <= b.data() + b.size());
            }
        } catch (const Error& e) {
            ++rejected;
            REQUIRE(std::string_view(e.what()).find('\n') == std::string_view::npos);
        }
    }
    // Most flips land in metadata values or tensor data and are harmless; many are not.
    CHECK(rejected > 1000);
}
