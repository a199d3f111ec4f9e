// Normalizations and softmax, one row at a time, with the backward rules of
// layer_norm and softmax and their gradient kernels.
#include <cmath>
#include <vector>

#include "engine/kernels/simd.h"
#include "engine/kernels/vector.h"
#include "engine/kernels/vector_ref.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::my_rows;
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
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), w, n.param<NormParams>().eps, n.row(r), n.shape.ne[0]);
}

template <decltype(&kernels::layer_norm) kernel>
void run_layer_norm(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float* w = n.src[1] == kNoNode ? nullptr : g.node(n.src[1]).row(0);
    const float* b = n.src[2] == kNoNode ? nullptr : g.node(n.src[2]).row(0);
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), w, b, n.param<NormParams>().eps, n.row(r), n.shape.ne[0]);
}

template <decltype(&kernels::softmax) kernel>
void run_softmax(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), n.row(r), n.shape.ne[0]);
}

// ---- layer_norm's dx: with xhat = (x - mean) * rstd and dxhat = grad * weight,
// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)). ----

void layer_norm_grad_row_ref(const float* x, const float* w, const float* grad, float eps, float* out, int64_t n) {
    double mean = 0.0;
    for (int64_t i = 0; i < n; ++i) mean += x[i];
    mean /= static_cast<double>(n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= static_cast<double>(n);
    const double rstd = 1.0 / std::sqrt(var + eps);
    double sum_d = 0.0, sum_dx = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(grad[i]) * (w ? w[i] : 1.0f);
        sum_d += d;
        sum_dx += d * (x[i] - mean) * rstd;
    }
    const double mean_d = sum_d / static_cast<double>(n), mean_dx = sum_dx / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(grad[i]) * (w ? w[i] : 1.0f);
        out[i] = static_cast<float>(rstd * (d - mean_d - (x[i] - mean) * rstd * mean_dx));
    }
}

using batch = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(batch::size);

// Sum of f(i) over the row: vector lanes for the body, scalars for the tail.
template <class Vec, class One>
float row_sum(int64_t n, Vec vec, One one) {
    batch acc(0.0f);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) acc += vec(i);
    float total = xsimd::hadd(acc);
    for (; i < n; ++i) total += one(i);
    return total;
}

// Float lanes: rows are a model's width (hundreds), where float sums lose
// nothing a gradient notices; the test bounds the difference to the reference.
void layer_norm_grad_row_fast(const float* x, const float* w, const float* grad, float eps, float* out, int64_t n) {
    const auto ld = [](const float* p) { return batch::load_unaligned(p); };
    const float mean = row_sum(n, [&](int64_t i) { return ld(x + i); }, [&](int64_t i) { return x[i]; }) / n;
    const batch mv(mean);
    const float var = row_sum(
                          n,
                          [&](int64_t i) {
                              const batch d = ld(x + i) - mv;
                              return d * d;
                          },
                          [&](int64_t i) { return (x[i] - mean) * (x[i] - mean); }) /
                      n;
    const float rstd = 1.0f / std::sqrt(var + eps);
    const batch rv(rstd);
    const auto dvec = [&](int64_t i) { return w ? ld(grad + i) * ld(w + i) : ld(grad + i); };
    const auto done = [&](int64_t i) { return w ? grad[i] * w[i] : grad[i]; };
    const float mean_d = row_sum(n, dvec, done) / n;
    const float mean_dx = row_sum(
                              n, [&](int64_t i) { return dvec(i) * (ld(x + i) - mv) * rv; },
                              [&](int64_t i) { return done(i) * (x[i] - mean) * rstd; }) /
                          n;
    const batch md(mean_d), mdx(mean_dx);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        (rv * (dvec(i) - md - (ld(x + i) - mv) * rv * mdx)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = rstd * (done(i) - mean_d - (x[i] - mean) * rstd * mean_dx);
}

template <void (*kernel)(const float*, const float*, const float*, float, float*, int64_t)>
void run_layer_norm_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const float* w = n.src[1] == kNoNode ? nullptr : g.node(n.src[1]).row(0);
    const Node& grad = g.node(n.src[2]);
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r)
        kernel(x.row(r), w, grad.row(r), n.param<NormParams>().eps, n.row(r), n.shape.ne[0]);
}

// ---- softmax's dx = y * (grad - sum(grad * y)) ----

void softmax_grad_row_ref(const float* y, const float* grad, float* out, int64_t n) {
    double dot = 0.0;
    for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(y[i]) * grad[i];
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(y[i] * (grad[i] - dot));
}

void softmax_grad_row_fast(const float* y, const float* grad, float* out, int64_t n) {
    const auto ld = [](const float* p) { return batch::load_unaligned(p); };
    const float dot = row_sum(n, [&](int64_t i) { return ld(y + i) * ld(grad + i); }, [&](int64_t i) { return y[i] * grad[i]; });
    const batch dv(dot);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) (ld(y + i) * (ld(grad + i) - dv)).store_unaligned(out + i);
    for (; i < n; ++i) out[i] = y[i] * (grad[i] - dot);
}

template <void (*kernel)(const float*, const float*, float*, int64_t)>
void run_softmax_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& y = g.node(n.src[0]);
    const Node& grad = g.node(n.src[1]);
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(y.row(r), grad.row(r), n.row(r), n.shape.ne[0]);
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
extern const OpDef kRmsNorm{OpKind::RmsNorm, MemoryEffects::OwnData, run_rms_norm<kernels::rms_norm>, run_rms_norm<kernels::ref::rms_norm>};
extern const OpDef kLayerNorm{OpKind::LayerNorm, MemoryEffects::OwnData, run_layer_norm<kernels::layer_norm>,
                              run_layer_norm<kernels::ref::layer_norm>, nullptr, layer_norm_backward};
extern const OpDef kSoftmax{OpKind::Softmax, MemoryEffects::OwnData, run_softmax<kernels::softmax>, run_softmax<kernels::ref::softmax>, nullptr,
                            softmax_backward};
extern const OpDef kLayerNormGrad{OpKind::LayerNormGrad, MemoryEffects::Unchecked, run_layer_norm_grad<layer_norm_grad_row_fast>,
                                  run_layer_norm_grad<layer_norm_grad_row_ref>};
extern const OpDef kSoftmaxGrad{OpKind::SoftmaxGrad, MemoryEffects::Unchecked, run_softmax_grad<softmax_grad_row_fast>,
                                run_softmax_grad<softmax_grad_row_ref>};
}  // namespace ops::defs

}  // namespace kiln
