// Element-wise ops: add, mul, scale, relu, silu, gelu, swiglu, exact gelu;
// the backward rules of those a training graph differentiates, their gradient
// ops (relu_grad, gelu_grad, gelu_erf_grad, silu_grad: kernels in kernels/gradients.h) and
// sum_rows, the gradient of a broadcast row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "engine/kernels/gradients.h"
#include "engine/kernels/vector.h"
#include "engine/kernels/vector_ref.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

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
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(a.row(r), b.row(broadcast ? 0 : r), n.row(r), n.shape.ne[0]);
}

template <UnaryKernel kernel>
void run_unary(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), n.row(r), n.shape.ne[0]);
}

template <void (*kernel)(const float*, float, float*, int64_t) noexcept>
void run_scale(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float factor = n.param<ScaleParams>().factor;
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), factor, n.row(r), n.shape.ne[0]);
}

template <void (*kernel)(const float*, const float*, float*, int64_t) noexcept>
void run_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const Node& d = g.node(n.src[1]);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), d.row(r), n.row(r), n.shape.ne[0]);
}

// Column sums. Threads split the columns, so every sum is one thread's, in row order.
void sum_rows_ref(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [c0, c1] = split_range(n.shape.ne[0], ctx.ith, ctx.nth);
    for (int64_t c = c0; c < c1; ++c) {
        double total = 0.0;
        for (int64_t r = 0; r < x.shape.rows(); ++r) total += x.row(r)[c];
        n.row(0)[c] = static_cast<float>(total);
    }
}
// Whole rows are added into a float accumulator (vectorized), in chunks of columns.
void sum_rows_fast(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [c0, c1] = split_range(n.shape.ne[0], ctx.ith, ctx.nth);
    if (c0 >= c1) return;
    float* out = n.row(0) + c0;
    std::fill(out, out + (c1 - c0), 0.0f);
    for (int64_t r = 0; r < x.shape.rows(); ++r) kernels::add(out, x.row(r) + c0, out, c1 - c0);
}

bool is_broadcast(const Graph& g, const Node& n, int slot) {
    return g.node(n.src[slot]).shape.rows() == 1 && n.shape.rows() != 1;
}

Sources add_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = grad;
    if (wanted[1]) out[1] = is_broadcast(g, n, 1) ? ops::sum_rows(g, grad) : grad;
    return out;
}

Sources mul_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    const NodeId a = n.src[0], b = n.src[1];
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::mul(g, grad, b);
    if (wanted[1]) {
        const NodeId full = ops::mul(g, grad, a);
        out[1] = is_broadcast(g, n, 1) ? ops::sum_rows(g, full) : full;
    }
    return out;
}

// swiglu(gate, up) = silu(gate) * up.
Sources swiglu_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    const NodeId gate = n.src[0], up = n.src[1];
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::silu_grad(g, gate, ops::mul(g, grad, up));
    if (wanted[1]) out[1] = ops::mul(g, grad, ops::silu(g, gate));
    return out;
}

Sources scale_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::scale(g, grad, g.node(node).param<ScaleParams>().factor);
    return out;
}

template <NodeId (*grad_op)(Graph&, NodeId, NodeId)>
Sources unary_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = grad_op(g, g.node(node).src[0], grad);
    return out;
}

NodeId grad_node(Graph& g, OpKind op, NodeId x, NodeId grad) {
    require_type(op, g.node(x), DType::F32, "the input");
    require_type(op, g.node(grad), DType::F32, "the gradient");
    if (!(g.node(x).shape == g.node(grad).shape))
        shape_error(op, "input {} and gradient {} differ", g.node(x).shape.str(), g.node(grad).shape.str());
    return g.add(op, DType::F32, g.node(x).shape, {x, grad});
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
NodeId softcap(Graph& g, NodeId x, float cap) {
    if (!(cap > 0.0f) || !std::isfinite(cap)) detail::shape_error(OpKind::Softcap, "the cap {} must be positive", cap);
    return unary(g, OpKind::Softcap, x, ScaleParams{cap});
}
NodeId relu(Graph& g, NodeId x) { return unary(g, OpKind::Relu, x); }
NodeId silu(Graph& g, NodeId x) { return unary(g, OpKind::Silu, x); }
NodeId gelu(Graph& g, NodeId x) { return unary(g, OpKind::GeluTanh, x); }
NodeId gelu_erf(Graph& g, NodeId x) { return unary(g, OpKind::GeluErf, x); }
NodeId relu_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::ReluGrad, x, grad); }
NodeId gelu_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::GeluTanhGrad, x, grad); }
NodeId gelu_erf_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::GeluErfGrad, x, grad); }
NodeId silu_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::SiluGrad, x, grad); }
NodeId sum_rows(Graph& g, NodeId x) {
    require_type(OpKind::SumRows, g.node(x), DType::F32, "the input");
    return g.add(OpKind::SumRows, DType::F32, Shape::of({g.node(x).shape.ne[0]}), {x});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kAdd{OpKind::Add, MemoryEffects::OwnData, run_binary<kernels::add>, run_binary<kernels::ref::add>, nullptr, add_backward};
extern const OpDef kMul{OpKind::Mul, MemoryEffects::OwnData, run_binary<kernels::mul>, run_binary<kernels::ref::mul>, nullptr, mul_backward};
extern const OpDef kSwiGlu{OpKind::SwiGlu, MemoryEffects::OwnData, run_binary<kernels::swiglu>, run_binary<kernels::ref::swiglu>,
                           nullptr, swiglu_backward};
extern const OpDef kScale{OpKind::Scale, MemoryEffects::OwnData, run_scale<kernels::scale>, run_scale<kernels::ref::scale>, nullptr,
                          scale_backward};
// No backward: soft-capped models (Gemma 2) are not trained here.
extern const OpDef kSoftcap{OpKind::Softcap, MemoryEffects::OwnData, run_scale<kernels::softcap>,
                            run_scale<kernels::ref::softcap>};
extern const OpDef kRelu{OpKind::Relu, MemoryEffects::OwnData, run_unary<kernels::relu>, run_unary<kernels::ref::relu>, nullptr,
                         unary_backward<ops::relu_grad>};
extern const OpDef kSilu{OpKind::Silu, MemoryEffects::OwnData, run_unary<kernels::silu>, run_unary<kernels::ref::silu>, nullptr,
                         unary_backward<ops::silu_grad>};
extern const OpDef kGelu{OpKind::GeluTanh, MemoryEffects::OwnData, run_unary<kernels::gelu_tanh>, run_unary<kernels::ref::gelu_tanh>, nullptr,
                         unary_backward<ops::gelu_grad>};
extern const OpDef kGeluErf{OpKind::GeluErf, MemoryEffects::Unchecked, run_unary<kernels::gelu_erf>, run_unary<kernels::ref::gelu_erf>, nullptr,
                            unary_backward<ops::gelu_erf_grad>};
extern const OpDef kReluGrad{OpKind::ReluGrad, MemoryEffects::Unchecked, run_grad<kernels::relu_grad>, run_grad<kernels::ref::relu_grad>};
extern const OpDef kGeluGrad{OpKind::GeluTanhGrad, MemoryEffects::Unchecked, run_grad<kernels::gelu_tanh_grad>, run_grad<kernels::ref::gelu_tanh_grad>};
extern const OpDef kSiluGrad{OpKind::SiluGrad, MemoryEffects::Unchecked, run_grad<kernels::silu_grad>, run_grad<kernels::ref::silu_grad>};
extern const OpDef kGeluErfGrad{OpKind::GeluErfGrad, MemoryEffects::Unchecked, run_grad<kernels::gelu_erf_grad>, run_grad<kernels::ref::gelu_erf_grad>};
extern const OpDef kSumRows{OpKind::SumRows, MemoryEffects::Unchecked, sum_rows_fast, sum_rows_ref};
}  // namespace ops::defs

}  // namespace kiln
