// Element-wise ops: add, mul, scale, relu, silu, gelu, swiglu.
#include "engine/kernels/vector.h"
#include "engine/kernels/vector_ref.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::my_rows;
using ops::detail::require_type;
using ops::detail::shape_error;

// b is either shaped like a or a single row broadcast over a's rows.
NodeId binary(Graph& g, OpKind op, NodeId a, NodeId b) {
    const Node& x = g.node(a);
    const Node& y = g.node(b);
    require_type(op, x, DType::F32, "the first operand");
    require_type(op, y, DType::F32, "the second operand");
    if (!(x.shape == y.shape) && !(y.shape.ne[0] == x.shape.ne[0] && y.shape.rows() == 1))
        shape_error(op, "shapes {} and {} differ (the second may also be one row of {})", x.shape.str(),
                    y.shape.str(), x.shape.ne[0]);
    return g.add(op, DType::F32, x.shape, {a, b});
}

NodeId unary(Graph& g, OpKind op, NodeId x, OpParams params = NoParams{}) {
    require_type(op, g.node(x), DType::F32, "the input");
    return g.add(op, DType::F32, g.node(x).shape, {x}, params);
}

using BinaryKernel = void (*)(const float*, const float*, float*, int64_t) noexcept;
using UnaryKernel = void (*)(const float*, float*, int64_t) noexcept;

template <BinaryKernel kernel>
void run_binary(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& a = g.node(n.src[0]);
    const Node& b = g.node(n.src[1]);
    const bool broadcast = b.shape.rows() == 1;
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(a.row(r), b.row(broadcast ? 0 : r), n.row(r), n.shape.ne[0]);
}

template <UnaryKernel kernel>
void run_unary(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), n.row(r), n.shape.ne[0]);
}

template <void (*kernel)(const float*, float, float*, int64_t) noexcept>
void run_scale(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float factor = n.param<ScaleParams>().factor;
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), factor, n.row(r), n.shape.ne[0]);
}

}  // namespace

namespace ops {
NodeId add(Graph& g, NodeId a, NodeId b) { return binary(g, OpKind::Add, a, b); }
NodeId mul(Graph& g, NodeId a, NodeId b) { return binary(g, OpKind::Mul, a, b); }
NodeId swiglu(Graph& g, NodeId gate, NodeId up) {
    if (!(g.node(gate).shape == g.node(up).shape))
        detail::shape_error(OpKind::SwiGlu, "gate {} and up {} differ", g.node(gate).shape.str(), g.node(up).shape.str());
    return binary(g, OpKind::SwiGlu, gate, up);
}
NodeId scale(Graph& g, NodeId x, float factor) { return unary(g, OpKind::Scale, x, ScaleParams{factor}); }
NodeId relu(Graph& g, NodeId x) { return unary(g, OpKind::Relu, x); }
NodeId silu(Graph& g, NodeId x) { return unary(g, OpKind::Silu, x); }
NodeId gelu(Graph& g, NodeId x) { return unary(g, OpKind::GeluTanh, x); }
}  // namespace ops

namespace ops::defs {
extern const OpDef kAdd{OpKind::Add, run_binary<kernels::add>, run_binary<kernels::ref::add>};
extern const OpDef kMul{OpKind::Mul, run_binary<kernels::mul>, run_binary<kernels::ref::mul>};
extern const OpDef kSwiGlu{OpKind::SwiGlu, run_binary<kernels::swiglu>, run_binary<kernels::ref::swiglu>};
extern const OpDef kScale{OpKind::Scale, run_scale<kernels::scale>, run_scale<kernels::ref::scale>};
extern const OpDef kRelu{OpKind::Relu, run_unary<kernels::relu>, run_unary<kernels::ref::relu>};
extern const OpDef kSilu{OpKind::Silu, run_unary<kernels::silu>, run_unary<kernels::ref::silu>};
extern const OpDef kGelu{OpKind::GeluTanh, run_unary<kernels::gelu_tanh>, run_unary<kernels::ref::gelu_tanh>};
}  // namespace ops::defs

}  // namespace kiln
