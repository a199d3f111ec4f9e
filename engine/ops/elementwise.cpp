// Element-wise ops: add, mul, scale, relu, silu, gelu, swiglu, exact gelu;
// the backward rules of those a training graph differentiates, with their
// gradient kernels (relu_grad, gelu_grad, gelu_erf_grad) and sum_rows, the
// gradient of a broadcast row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

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

// ---- gradient kernels: out = grad * f'(x); reference in double, fast in xsimd ----

using batch = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(batch::size);

// out[i] = f(x[i], g[i]) for a batch function f; the tail goes through a padded copy.
template <class F>
void map_grad(const float* x, const float* g, float* out, int64_t n, F f) noexcept {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        f(batch::load_unaligned(x + i), batch::load_unaligned(g + i)).store_unaligned(out + i);
    if (i < n) {
        alignas(64) float bx[kLanes] = {};
        alignas(64) float bg[kLanes] = {};
        const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
        std::memcpy(bx, x + i, bytes);
        std::memcpy(bg, g + i, bytes);
        f(batch::load_aligned(bx), batch::load_aligned(bg)).store_aligned(bx);
        std::memcpy(out + i, bx, bytes);
    }
}

// relu'(x) = 1 for x > 0, else 0 (torch's choice at 0).
void relu_grad_ref(const float* x, const float* g, float* out, int64_t n) noexcept {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? g[i] : 0.0f;
}
void relu_grad_fast(const float* x, const float* g, float* out, int64_t n) noexcept {
    map_grad(x, g, out, n, [](batch v, batch d) { return xsimd::select(v > batch(0.0f), d, batch(0.0f)); });
}

// gelu(x) = 0.5 x (1 + tanh u), u = c (x + 0.044715 x^3), c = sqrt(2/pi):
// gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2).
void gelu_grad_ref(const float* x, const float* g, float* out, int64_t n) noexcept {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double t = std::tanh(c * (v + 0.044715 * v * v * v));
        const double d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * v * v);
        out[i] = static_cast<float>(d * g[i]);
    }
}
// The same through sigmoid(z), z = 2u: 0.5 (1 + tanh u) = s, and
// 0.5 (1 - tanh^2 u) du/dx = s (1 - s) dz/dx with s (1 - s) = e / (1 + e)^2,
// e = exp(-|z|), which never overflows (as the forward kernel does).
void gelu_grad_fast(const float* x, const float* g, float* out, int64_t n) noexcept {
    const float k1 = static_cast<float>(2.0 * std::sqrt(2.0 / std::numbers::pi));
    const float k3 = static_cast<float>(2.0 * std::sqrt(2.0 / std::numbers::pi) * 0.044715);
    map_grad(x, g, out, n, [k1, k3](batch v, batch d) {
        const batch one(1.0f);
        const batch v2 = v * v;
        const batch z = v * xsimd::fma(batch(k3), v2, batch(k1));
        const batch dz = xsimd::fma(batch(3.0f * k3), v2, batch(k1));
        const batch e = xsimd::exp(-xsimd::abs(z));
        const batch inv = one / (one + e);
        const batch s = xsimd::select(z >= batch(0.0f), inv, e * inv);
        return d * xsimd::fma(v * e * inv * inv, dz, s);
    });
}

// gelu_erf'(x) = Phi(x) + x phi(x) = 0.5 erfc(-x / sqrt 2) + x exp(-x^2 / 2) / sqrt(2 pi).
void gelu_erf_grad_ref(const float* x, const float* g, float* out, int64_t n) noexcept {
    const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * std::numbers::pi);
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double d = 0.5 * std::erfc(-v / std::numbers::sqrt2) + v * std::exp(-0.5 * v * v) * inv_sqrt_2pi;
        out[i] = static_cast<float>(d * g[i]);
    }
}
void gelu_erf_grad_fast(const float* x, const float* g, float* out, int64_t n) noexcept {
    const float neg_inv_sqrt2 = static_cast<float>(-1.0 / std::numbers::sqrt2);
    const float inv_sqrt_2pi = static_cast<float>(1.0 / std::sqrt(2.0 * std::numbers::pi));
    map_grad(x, g, out, n, [=](batch v, batch d) {
        const batch cdf = batch(0.5f) * xsimd::erfc(v * batch(neg_inv_sqrt2));
        const batch pdf = xsimd::exp(batch(-0.5f) * v * v) * batch(inv_sqrt_2pi);
        return d * xsimd::fma(v, pdf, cdf);
    });
}

template <void (*kernel)(const float*, const float*, float*, int64_t) noexcept>
void run_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const Node& d = g.node(n.src[1]);
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) kernel(x.row(r), d.row(r), n.row(r), n.shape.ne[0]);
}

// Column sums. Threads split the columns, so every sum is one thread's, in row order.
void sum_rows_ref(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [c0, c1] = my_rows(n.shape.ne[0], ctx);
    for (int64_t c = c0; c < c1; ++c) {
        double total = 0.0;
        for (int64_t r = 0; r < x.shape.rows(); ++r) total += x.row(r)[c];
        n.row(0)[c] = static_cast<float>(total);
    }
}
// Whole rows are added into a float accumulator (vectorized), in chunks of columns.
void sum_rows_fast(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const auto [c0, c1] = my_rows(n.shape.ne[0], ctx);
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
NodeId relu(Graph& g, NodeId x) { return unary(g, OpKind::Relu, x); }
NodeId silu(Graph& g, NodeId x) { return unary(g, OpKind::Silu, x); }
NodeId gelu(Graph& g, NodeId x) { return unary(g, OpKind::GeluTanh, x); }
NodeId gelu_erf(Graph& g, NodeId x) { return unary(g, OpKind::GeluErf, x); }
NodeId relu_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::ReluGrad, x, grad); }
NodeId gelu_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::GeluTanhGrad, x, grad); }
NodeId gelu_erf_grad(Graph& g, NodeId x, NodeId grad) { return grad_node(g, OpKind::GeluErfGrad, x, grad); }
NodeId sum_rows(Graph& g, NodeId x) {
    require_type(OpKind::SumRows, g.node(x), DType::F32, "the input");
    return g.add(OpKind::SumRows, DType::F32, Shape::of({g.node(x).shape.ne[0]}), {x});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kAdd{OpKind::Add, MemoryEffects::OwnData, run_binary<kernels::add>, run_binary<kernels::ref::add>, nullptr, add_backward};
extern const OpDef kMul{OpKind::Mul, MemoryEffects::OwnData, run_binary<kernels::mul>, run_binary<kernels::ref::mul>, nullptr, mul_backward};
extern const OpDef kSwiGlu{OpKind::SwiGlu, MemoryEffects::OwnData, run_binary<kernels::swiglu>, run_binary<kernels::ref::swiglu>};
extern const OpDef kScale{OpKind::Scale, MemoryEffects::OwnData, run_scale<kernels::scale>, run_scale<kernels::ref::scale>, nullptr,
                          scale_backward};
extern const OpDef kRelu{OpKind::Relu, MemoryEffects::OwnData, run_unary<kernels::relu>, run_unary<kernels::ref::relu>, nullptr,
                         unary_backward<ops::relu_grad>};
extern const OpDef kSilu{OpKind::Silu, MemoryEffects::OwnData, run_unary<kernels::silu>, run_unary<kernels::ref::silu>};
extern const OpDef kGelu{OpKind::GeluTanh, MemoryEffects::OwnData, run_unary<kernels::gelu_tanh>, run_unary<kernels::ref::gelu_tanh>, nullptr,
                         unary_backward<ops::gelu_grad>};
extern const OpDef kGeluErf{OpKind::GeluErf, MemoryEffects::Unchecked, run_unary<kernels::gelu_erf>, run_unary<kernels::ref::gelu_erf>, nullptr,
                            unary_backward<ops::gelu_erf_grad>};
extern const OpDef kReluGrad{OpKind::ReluGrad, MemoryEffects::Unchecked, run_grad<relu_grad_fast>, run_grad<relu_grad_ref>};
extern const OpDef kGeluGrad{OpKind::GeluTanhGrad, MemoryEffects::Unchecked, run_grad<gelu_grad_fast>, run_grad<gelu_grad_ref>};
extern const OpDef kGeluErfGrad{OpKind::GeluErfGrad, MemoryEffects::Unchecked, run_grad<gelu_erf_grad_fast>, run_grad<gelu_erf_grad_ref>};
extern const OpDef kSumRows{OpKind::SumRows, MemoryEffects::Unchecked, sum_rows_fast, sum_rows_ref};
}  // namespace ops::defs

}  // namespace kiln
