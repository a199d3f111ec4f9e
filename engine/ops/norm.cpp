// Normalizations and softmax, one row at a time, with the backward rules of
// rms_norm, layer_norm and softmax and their gradient ops (kernels in kernels/gradients.h).
#include <cmath>
#include <vector>

#include "engine/kernels/gradients.h"
#include "engine/kernels/vector.h"
#include "engine/kernels/vector_ref.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

void check_row_param(Graph& g, OpKind op, NodeId x, NodeId p, const char* role) {
    if (p == kNoNode) return;
    const Node& w = g.node(p);
    require_type(op, w, DType::F32, role);
    if (w.shape.elements() != g.node(x).shape.ne[0])
        shape_error(op, "{} {} does not match rows of {}", role, w.shape.str(), g.node(x).shape.str());
}

template <decltype(&kernels::rms_norm) kernel>
void run_rms_norm(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float* w = n.src[1] == kNoNode ? nullptr : g.node(n.src[1]).row(0);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), w, n.param<NormParams>().eps, n.row(r), n.shape.ne[0]);
}

template <decltype(&kernels::layer_norm) kernel>
void run_layer_norm(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float* w = n.src[1] == kNoNode ? nullptr : g.node(n.src[1]).row(0);
    const float* b = n.src[2] == kNoNode ? nullptr : g.node(n.src[2]).row(0);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), w, b, n.param<NormParams>().eps, n.row(r), n.shape.ne[0]);
}

template <decltype(&kernels::softmax) kernel>
void run_softmax(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), n.row(r), n.shape.ne[0]);
}

template <void (*kernel)(const float*, const float*, const float*, float, float*, int64_t)>
void run_norm_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float* w = n.src[1] == kNoNode ? nullptr : g.node(n.src[1]).row(0);
    const Node& grad = g.node(n.src[2]);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r)
        kernel(x.row(r), w, grad.row(r), n.param<NormParams>().eps, n.row(r), n.shape.ne[0]);
}

template <void (*kernel)(const float*, const float*, float*, int64_t)>
void run_softmax_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& y = g.node(n.src[0]);
    const Node& grad = g.node(n.src[1]);
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) kernel(y.row(r), grad.row(r), n.row(r), n.shape.ne[0]);
}

// d/dweight = column sums of grad * x r (rms_norm without its weight).
Sources rms_norm_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    const NodeId x = n.src[0], weight = n.src[1];
    const float eps = n.param<NormParams>().eps;
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::rms_norm_grad(g, x, weight, grad, eps);
    if (wanted[1]) out[1] = ops::sum_rows(g, ops::mul(g, grad, ops::rms_norm(g, x, kNoNode, eps)));
    return out;
}

// d/dweight = column sums of grad * xhat; d/dbias = column sums of grad.
Sources layer_norm_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    const NodeId x = n.src[0], weight = n.src[1];
    const float eps = n.param<NormParams>().eps;
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::layer_norm_grad(g, x, weight, grad, eps);
    if (wanted[1]) out[1] = ops::sum_rows(g, ops::mul(g, grad, ops::layer_norm(g, x, kNoNode, kNoNode, eps)));
    if (wanted[2]) out[2] = ops::sum_rows(g, grad);
    return out;
}

Sources softmax_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::softmax_grad(g, node, grad);
    return out;
}

void check_same_shape(Graph& g, OpKind op, NodeId a, NodeId b, const char* what) {
    if (!(g.node(a).shape == g.node(b).shape))
        shape_error(op, "{} {} and gradient {} differ", what, g.node(a).shape.str(), g.node(b).shape.str());
}

}  // namespace

namespace ops {
NodeId layer_norm_grad(Graph& g, NodeId x, NodeId weight, NodeId grad, float eps) {
    const OpKind op = OpKind::LayerNormGrad;
    require_type(op, g.node(x), DType::F32, "the input");
    require_type(op, g.node(grad), DType::F32, "the gradient");
    check_row_param(g, op, x, weight, "the weight");
    check_same_shape(g, op, x, grad, "input");
    return g.add(op, DType::F32, g.node(x).shape, {x, weight, grad}, NormParams{eps});
}
NodeId rms_norm_grad(Graph& g, NodeId x, NodeId weight, NodeId grad, float eps) {
    const OpKind op = OpKind::RmsNormGrad;
    require_type(op, g.node(x), DType::F32, "the input");
    require_type(op, g.node(grad), DType::F32, "the gradient");
    check_row_param(g, op, x, weight, "the weight");
    check_same_shape(g, op, x, grad, "input");
    return g.add(op, DType::F32, g.node(x).shape, {x, weight, grad}, NormParams{eps});
}
NodeId softmax_grad(Graph& g, NodeId y, NodeId grad) {
    const OpKind op = OpKind::SoftmaxGrad;
    require_type(op, g.node(y), DType::F32, "the softmax output");
    require_type(op, g.node(grad), DType::F32, "the gradient");
    check_same_shape(g, op, y, grad, "softmax output");
    return g.add(op, DType::F32, g.node(y).shape, {y, grad});
}
NodeId rms_norm(Graph& g, NodeId x, NodeId weight, float eps) {
    require_type(OpKind::RmsNorm, g.node(x), DType::F32, "the input");
    check_row_param(g, OpKind::RmsNorm, x, weight, "the weight");
    return g.add(OpKind::RmsNorm, DType::F32, g.node(x).shape, {x, weight}, NormParams{eps});
}
NodeId layer_norm(Graph& g, NodeId x, NodeId weight, NodeId bias, float eps) {
    require_type(OpKind::LayerNorm, g.node(x), DType::F32, "the input");
    check_row_param(g, OpKind::LayerNorm, x, weight, "the weight");
    check_row_param(g, OpKind::LayerNorm, x, bias, "the bias");
    return g.add(OpKind::LayerNorm, DType::F32, g.node(x).shape, {x, weight, bias}, NormParams{eps});
}
NodeId softmax(Graph& g, NodeId x) {
    require_type(OpKind::Softmax, g.node(x), DType::F32, "the input");
    return g.add(OpKind::Softmax, DType::F32, g.node(x).shape, {x});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kRmsNorm{OpKind::RmsNorm, MemoryEffects::OwnData, run_rms_norm<kernels::rms_norm>,
                            run_rms_norm<kernels::ref::rms_norm>, nullptr, rms_norm_backward};
extern const OpDef kLayerNorm{OpKind::LayerNorm, MemoryEffects::OwnData, run_layer_norm<kernels::layer_norm>,
                              run_layer_norm<kernels::ref::layer_norm>, nullptr, layer_norm_backward};
extern const OpDef kSoftmax{OpKind::Softmax, MemoryEffects::OwnData, run_softmax<kernels::softmax>, run_softmax<kernels::ref::softmax>, nullptr,
                            softmax_backward};
extern const OpDef kLayerNormGrad{OpKind::LayerNormGrad, MemoryEffects::Unchecked, run_norm_grad<kernels::layer_norm_grad>,
                                  run_norm_grad<kernels::ref::layer_norm_grad>};
extern const OpDef kRmsNormGrad{OpKind::RmsNormGrad, MemoryEffects::Unchecked, run_norm_grad<kernels::rms_norm_grad>,
                                run_norm_grad<kernels::ref::rms_norm_grad>};
extern const OpDef kSoftmaxGrad{OpKind::SoftmaxGrad, MemoryEffects::Unchecked, run_softmax_grad<kernels::softmax_grad>,
                                run_softmax_grad<kernels::ref::softmax_grad>};
}  // namespace ops::defs

}  // namespace kiln
