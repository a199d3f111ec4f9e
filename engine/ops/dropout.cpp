// Inverted dropout for training. The keep/drop decision of element i is a
// hash of (seed, salt, i): no generator state is shared between threads, the
// mask is the same for any thread count, and the backward pass (dropout of
// the gradient with the same seed and salt) reproduces it exactly. The salt
// is the forward node's index, so the dropout nodes of one graph, which share
// one seed input, draw independent masks (without it every same-shaped
// dropout of a model, e.g. each layer's residual, would drop the same elements).
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::my_rows;
using ops::detail::require_type;
using ops::detail::shape_error;

// SplitMix64's finalizer: a bijection that mixes every input bit into every output bit.
inline uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits, from the element index.
inline float uniform(uint64_t seed, uint64_t index) {
    return static_cast<float>(mix(seed + index * 0x9e3779b97f4a7c15ULL) >> 40) * (1.0f / 16777216.0f);
}

// The hash key of a node: its seed input mixed with its salt.
uint64_t seed_of(const Graph& g, const Node& n) {
    const int32_t* s = g.node(n.src[1]).row<int32_t>(0);
    const uint64_t seed =
        static_cast<uint64_t>(static_cast<uint32_t>(s[0])) | (static_cast<uint64_t>(static_cast<uint32_t>(s[1])) << 32);
    return mix(seed ^ mix(n.param<DropoutParams>().salt + 0xbb67ae8584caa73bULL));
}

NodeId add_dropout(Graph& g, NodeId x, NodeId seed, float p, uint64_t salt);

void dropout_ref(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float p = n.param<DropoutParams>().p;
    const uint64_t seed = seed_of(g, n);
    const int64_t width = n.shape.ne[0];
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t i = 0; i < width; ++i) {
            const bool keep = uniform(seed, static_cast<uint64_t>(r * width + i)) >= p;
            n.row(r)[i] = keep ? x.row(r)[i] / (1.0f - p) : 0.0f;
        }
}

// Branch-free, so that the compiler vectorizes the integer hash.
void dropout_fast(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float p = n.param<DropoutParams>().p;
    const uint64_t seed = seed_of(g, n);
    const int64_t width = n.shape.ne[0];
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) {
        const float* in = x.row(r);
        float* out = n.row(r);
        const uint64_t base = static_cast<uint64_t>(r * width);
        for (int64_t i = 0; i < width; ++i) {
            const float keep = uniform(seed, base + static_cast<uint64_t>(i)) >= p ? 1.0f : 0.0f;
            out[i] = keep * (in[i] / (1.0f - p));
        }
    }
}

Sources dropout_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = add_dropout(g, grad, n.src[1], n.param<DropoutParams>().p, n.param<DropoutParams>().salt);
    return out;
}

NodeId add_dropout(Graph& g, NodeId x, NodeId seed, float p, uint64_t salt) {
    const OpKind op = OpKind::Dropout;
    require_type(op, g.node(x), DType::F32, "the input");
    require_type(op, g.node(seed), DType::I32, "the seed");
    if (g.node(seed).shape.elements() != 2) shape_error(op, "the seed {} must be 2 values", g.node(seed).shape.str());
    if (!(p >= 0.0f && p < 1.0f)) shape_error(op, "probability {} is outside [0, 1)", p);
    if (p == 0.0f) return x;
    return g.add(op, DType::F32, g.node(x).shape, {x, seed}, DropoutParams{p, salt});
}

}  // namespace

namespace ops {
NodeId dropout(Graph& g, NodeId x, NodeId seed, float p) { return add_dropout(g, x, seed, p, static_cast<uint64_t>(g.size())); }
}  // namespace ops

namespace ops::defs {
extern const OpDef kDropout{OpKind::Dropout, MemoryEffects::Unchecked, dropout_fast, dropout_ref, nullptr, dropout_backward};
}  // namespace ops::defs

}  // namespace kiln
