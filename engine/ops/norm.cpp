// Normalizations and softmax, one row at a time.
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

}  // namespace

namespace ops {
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
extern const OpDef kRmsNorm{OpKind::RmsNorm, run_rms_norm<kernels::rms_norm>, run_rms_norm<kernels::ref::rms_norm>};
extern const OpDef kLayerNorm{OpKind::LayerNorm, run_layer_norm<kernels::layer_norm>, run_layer_norm<kernels::ref::layer_norm>};
extern const OpDef kSoftmax{OpKind::Softmax, run_softmax<kernels::softmax>, run_softmax<kernels::ref::softmax>};
}  // namespace ops::defs

}  // namespace kiln
