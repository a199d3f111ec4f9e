// Builds the sample GGUF file (kept free of Catch2 so the fuzzer's seed tool can use it).
#include <random>

#include "formats/gguf/gguf_writer.h"
#include "support/sample_gguf.h"

namespace kiln::test {

Bytes make_sample_gguf() {
    GgufWriter w;
    w.set("general.architecture", "kiln-sample");
    w.set("general.alignment", uint32_t{32});
    w.set("kiln.u8", uint8_t{200});
    w.set("kiln.i8", int8_t{-100});
    w.set("kiln.u16", uint16_t{60000});
    w.set("kiln.i16", int16_t{-30000});
    w.set("kiln.u32", uint32_t{4000000000u});
    w.set("kiln.i32", int32_t{-2000000000});
    w.set("kiln.f32", 1.5f);
    w.set("kiln.bool", true);
    w.set("kiln.string", "héllo\nworld");
    w.set("kiln.u64", uint64_t{1} << 60);
    w.set("kiln.i64", int64_t{-(int64_t{1} << 60)});
    w.set("kiln.f64", 2.25);
    w.set("kiln.array.i32", gguf_array<int32_t>(GgufType::INT32, {1, -2, 3}));
    w.set("kiln.array.str", gguf_array<std::string>(GgufType::STRING, {"a", "", "ccc"}));
    GgufArray nested{GgufType::ARRAY, {}};
    nested.items.push_back(gguf_array<float>(GgufType::FLOAT32, {0.5f, -0.25f}));
    nested.items.push_back(gguf_array<float>(GgufType::FLOAT32, {}));
    w.set("kiln.array.nested", nested);
    w.set("kiln.dup.a", uint8_t{1});
    w.set("kiln.dup.b", uint8_t{2});

    Bytes data_a(6 * 4), data_b(5 * 2), data_q(2 * 34);
    std::mt19937 rng(7);
    for (Bytes* d : {&data_a, &data_b, &data_q})
        for (std::byte& b : *d) b = static_cast<std::byte>(rng() & 0x3f);  // small values: no NaN patterns
    w.add_tensor("tensor.a", DType::F32, {3, 2}, data_a);
    w.add_tensor("tensor.b", DType::F16, {5}, data_b);
    w.add_tensor("tensor.q", DType::Q8_0, {64}, data_q);
    return w.to_bytes();
}

}  // namespace kiln::test
