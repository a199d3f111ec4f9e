// Rotary position embedding at per-token positions (an I32 input), and its
// backward: the inverse rotation.
#include <cstring>

#include "engine/kernels/vector.h"
#include "engine/kernels/vector_ref.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

template <decltype(&kernels::rope) kernel>
void run_rope(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int32_t* positions = g.node(n.src[1]).row<int32_t>(0);
    const RopeParams& p = n.param<RopeParams>();
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(n.row(r), x.row(r), n.row_bytes);
        // The inverse rotation is the rotation of the negated position: cos is
        // even and sin odd, so the angles are exactly the forward's, negated.
        const int64_t pos = p.inverse ? -static_cast<int64_t>(positions[r]) : positions[r];
        kernel(n.row(r), p.n_heads, p.head_dim, p.n_rot, pos, p.freq_base);
    }
}

// The rotation is orthogonal: its gradient is the inverse rotation of the gradient.
Sources rope_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) {
        RopeParams p = n.param<RopeParams>();
        p.inverse = !p.inverse;
        out[0] = g.add(OpKind::Rope, DType::F32, g.node(grad).shape, {grad, n.src[1]}, p);
    }
    return out;
}

}  // namespace

namespace ops {
NodeId rope(Graph& g, NodeId x, NodeId positions, int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base) {
    const Node& xn = g.node(x);
    const Node& pn = g.node(positions);
    require_type(OpKind::Rope, xn, DType::F32, "the input");
    require_type(OpKind::Rope, pn, DType::I32, "the positions");
    if (xn.shape.ne[0] != n_heads * head_dim)
        shape_error(OpKind::Rope, "rows of {} are not {} heads of {}", xn.shape.ne[0], n_heads, head_dim);
    if (n_rot < 0 || n_rot > head_dim || n_rot % 2 != 0)
        shape_error(OpKind::Rope, "{} rotated dimensions do not fit heads of {} (an even count up to it)", n_rot, head_dim);
    if (pn.shape.elements() != xn.shape.rows())
        shape_error(OpKind::Rope, "{} positions for {} rows", pn.shape.elements(), xn.shape.rows());
    return g.add(OpKind::Rope, DType::F32, xn.shape, {x, positions}, RopeParams{n_heads, head_dim, n_rot, freq_base});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kRope{OpKind::Rope, MemoryEffects::OwnData, run_rope<kernels::rope>, run_rope<kernels::ref::rope>, nullptr,
                         rope_backward};
}  // namespace ops::defs

}  // namespace kiln
