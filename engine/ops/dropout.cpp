// Inverted dropout for training. The keep/drop decision of element i is a
// hash of (seed, salt, i) (kernels/dropout.h): no generator state is shared
// between threads, the mask is the same for any thread count, and the
// backward pass (dropout of the gradient with the same seed and salt)
// reproduces it exactly. The salt is the forward node's index, so the dropout
// nodes of one graph, which share one seed input, draw independent masks
// (without it every same-shaped dropout of a model, e.g. each layer's
// residual, would drop the same elements).
#include "engine/kernels/dropout.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

// The hash key of a node: its seed input mixed with its salt.
uint64_t key_of(const Graph& g, const Node& n) {
    return kernels::dropout::key(g.node(n.src[1]).row<int32_t>(0), n.param<DropoutParams>().salt,
                                 kernels::dropout::kElementDomain);
}

NodeId add_dropout(Graph& g, NodeId x, NodeId seed, float p, uint64_t salt);

template <decltype(&kernels::dropout::apply) kernel>
void run_dropout(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float p = n.param<DropoutParams>().p;
    const uint64_t key = key_of(g, n);
    const int64_t width = n.shape.ne[0];
    // A seed of 4 values (low, high, first sequence, sequences) places this
    // graph's batch of seed[3] sequences at sequence seed[2] of a larger one
    // (a rank's share of a data-parallel batch): the elements are numbered
    // as in that batch, so the masks are the ones one process draws.
    uint64_t first = 0;
    if (const Node& seed = g.node(n.src[1]); seed.shape.elements() == 4) {
        const int32_t* s = seed.row<int32_t>(0);
        if (s[3] > 0) first = static_cast<uint64_t>(s[2]) * static_cast<uint64_t>(n.shape.elements() / s[3]);
    }
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), n.row(r), width, key, first + static_cast<uint64_t>(r * width), p);
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
    if (g.node(seed).shape.elements() != 2 && g.node(seed).shape.elements() != 4)
        shape_error(op, "the seed {} must be 2 or 4 values", g.node(seed).shape.str());
    if (!(p >= 0.0f && p < 1.0f)) shape_error(op, "probability {} is outside [0, 1)", p);
    if (p == 0.0f) return x;
    return g.add(op, DType::F32, g.node(x).shape, {x, seed}, DropoutParams{p, salt});
}

}  // namespace

namespace ops {
NodeId dropout(Graph& g, NodeId x, NodeId seed, float p) { return add_dropout(g, x, seed, p, static_cast<uint64_t>(g.size())); }
}  // namespace ops

namespace ops::defs {
extern const OpDef kDropout{OpKind::Dropout, MemoryEffects::Unchecked, run_dropout<kernels::dropout::apply>, run_dropout<kernels::ref::dropout::apply>, nullptr, dropout_backward};
}  // namespace ops::defs

}  // namespace kiln
