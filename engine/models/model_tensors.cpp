#include "engine/models/model_tensors.h"

#include <cmath>
#include <cstring>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/kernels/matmul.h"
#include "engine/quant/interleave.h"

namespace kiln::model_tensors {

const GgufTensor* find(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& dims, Role role,
                       bool required) {
    const GgufTensor* t = f.find_tensor(name);
    if (t == nullptr) {
        if (!required) return nullptr;
        fail("model", "{}: tensor '{}' is missing", f.name(), name);
    }
    if (t->dims != dims)
        fail("model", "{}: tensor '{}' has shape [{}], expected [{}]", f.name(), name, fmt::join(t->dims, ", "),
             fmt::join(dims, ", "));
    switch (role) {
        case Role::Matrix:
            if (!kernels::matmul_supports(t->type))
                fail("model", "{}: tensor '{}' has type {}, which kiln cannot multiply with (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_K-q6_K)",
                     f.name(), name, dtype_name(t->type));
            break;
        case Role::Norm:
        case Role::Bias:
            if (t->type != DType::F32)
                fail("model", "{}: tensor '{}' has type {} (norm weights and biases must be f32)", f.name(), name,
                     dtype_name(t->type));
            break;
        case Role::Table:
            if (type_traits(t->type).to_float == nullptr)
                fail("model", "{}: tensor '{}' has type {}, which kiln cannot read", f.name(), name, dtype_name(t->type));
            break;
    }
    return t;
}

const GgufTensor* find_tied_head(const GgufFile& f, int64_t dim, int64_t n_vocab, const std::string& embd_name) {
    return find(f, embd_name, {static_cast<uint64_t>(dim), static_cast<uint64_t>(n_vocab)}, Role::Matrix);
}

void check_rope_factors(const GgufFile& f, const GgufTensor& factors) {
    const auto n = static_cast<int64_t>(factors.dims.at(0));
    for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, factors.data.data() + i * static_cast<int64_t>(sizeof(float)), sizeof(float));
        if (!std::isfinite(v) || v <= 0.0f)
            fail("model", "{}: tensor '{}' holds {} at {} (rope frequency factors must be finite and positive)",
                 f.name(), factors.name, v, i);
    }
}

NodeId leaf(Graph& g, const GgufTensor& t, const std::byte* data, std::optional<DType> type) {
    Shape shape = t.dims.size() == 1 ? Shape::of({static_cast<int64_t>(t.dims[0])})
                                     : Shape::of({static_cast<int64_t>(t.dims[0]), static_cast<int64_t>(t.dims[1])});
    return g.weight(t.name, type.value_or(t.type), shape, data != nullptr ? data : t.data.data());
}

NodeId leaf_rows(Graph& g, NodeId weight, int64_t first, int64_t count) {
    const Node& w = g.node(weight);
    if (w.op != OpKind::Weight) fail("graph", "{} is not a weight leaf", w.name);
    const int64_t ne0 = w.shape.ne[0];
    if (w.shape.rank == 1) {
        // Elements of a vector (a bias): f32, so any element is a valid start.
        if (w.type != DType::F32) fail("graph", "{}: a vector's rows must be f32", w.name);
        const bool whole = first == 0 && count == ne0;
        return g.weight(whole ? w.name : fmt::format("{}[{}:{}]", w.name, first, first + count), w.type,
                        Shape::of({count}), w.data + static_cast<size_t>(first) * sizeof(float));
    }
    const bool whole = first == 0 && count == w.shape.ne[1];
    // Interleaved rows come in groups: a view must take whole ones.
    if (quant::is_interleaved(w.type) && (first % quant::kInterleaveRows != 0 || count % quant::kInterleaveRows != 0))
        fail("graph", "{}: rows {}..{} split a group of the {} layout", w.name, first, first + count,
             dtype_name(w.type));
    return g.weight(whole ? w.name : fmt::format("{}[{}:{}]", w.name, first, first + count), w.type,
                    Shape::of({ne0, count}), w.data + static_cast<size_t>(first) * row_bytes_of(w.type, ne0));
}

uint64_t parameter_count(const GgufFile& f) noexcept {
    uint64_t n = 0;
    for (const GgufTensor& t : f.tensors()) n += t.elements;
    return n;
}

uint64_t weight_bytes(const GgufFile& f) noexcept {
    uint64_t n = 0;
    for (const GgufTensor& t : f.tensors()) n += t.data.size();
    return n;
}

}  // namespace kiln::model_tensors
