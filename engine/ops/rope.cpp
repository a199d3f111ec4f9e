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

using RopeKernel = void (*)(float*, const kernels::RopeSpec&, int64_t, const float*) noexcept;

template <RopeKernel kernel>
void run_rope(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int32_t* positions = g.node(n.src[1]).row<int32_t>(0);
    const RopeParams& p = n.param<RopeParams>();
    const float* freq_factors = n.src[2] != kNoNode ? g.node(n.src[2]).row<float>(0) : nullptr;
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(n.row(r), x.row(r), n.row_bytes);
        // The inverse rotation is the rotation of the negated position: cos is
        // even and sin odd, so the angles are exactly the forward's, negated.
        const int64_t pos = p.inverse ? -static_cast<int64_t>(positions[r]) : positions[r];
        kernel(n.row(r), p.spec, pos, freq_factors);
    }
}

// The rotation is orthogonal: its gradient is the inverse rotation of the gradient.
Sources rope_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) {
        RopeParams p = n.param<RopeParams>();
        p.inverse = !p.inverse;
        out[0] = g.add(OpKind::Rope, DType::F32, g.node(grad).shape, {grad, n.src[1], n.src[2]}, p);
    }
    return out;
}

}  // namespace

namespace ops {
NodeId rope(Graph& g, NodeId x, NodeId positions, const kernels::RopeSpec& spec, NodeId freq_factors) {
    const Node& xn = g.node(x);
    const Node& pn = g.node(positions);
    require_type(OpKind::Rope, xn, DType::F32, "the input");
    require_type(OpKind::Rope, pn, DType::I32, "the positions");
    if (xn.shape.ne[0] != spec.n_heads * spec.head_dim)
        shape_error(OpKind::Rope, "rows of {} are not {} heads of {}", xn.shape.ne[0], spec.n_heads, spec.head_dim);
    if (spec.n_rot < 0 || spec.n_rot > spec.head_dim || spec.n_rot % 2 != 0)
        shape_error(OpKind::Rope, "{} rotated dimensions do not fit heads of {} (an even count up to it)", spec.n_rot,
                    spec.head_dim);
    if (pn.shape.elements() != xn.shape.rows())
        shape_error(OpKind::Rope, "{} positions for {} rows", pn.shape.elements(), xn.shape.rows());
    if (spec.ext_factor != 0.0f && spec.n_ctx_orig <= 0)
        shape_error(OpKind::Rope, "YaRN scaling needs the original context length (got {})", spec.n_ctx_orig);
    if (freq_factors != kNoNode) {
        const Node& fn = g.node(freq_factors);
        require_type(OpKind::Rope, fn, DType::F32, "the frequency factors");
        if (fn.shape.elements() != spec.n_rot / 2)
            shape_error(OpKind::Rope, "{} frequency factors for {} rotated pairs", fn.shape.elements(), spec.n_rot / 2);
    }
    return g.add(OpKind::Rope, DType::F32, xn.shape, {x, positions, freq_factors}, RopeParams{spec});
}

NodeId rope(Graph& g, NodeId x, NodeId positions, int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base) {
    kernels::RopeSpec spec;
    spec.n_heads = n_heads;
    spec.head_dim = head_dim;
    spec.n_rot = n_rot;
    spec.freq_base = freq_base;
    return rope(g, x, positions, spec);
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kRope{OpKind::Rope, MemoryEffects::OwnData, run_rope<kernels::rope>, run_rope<kernels::ref::rope>, nullptr,
                         rope_backward};
}  // namespace ops::defs

}  // namespace kiln
