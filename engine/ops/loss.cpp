// Cross-entropy, fused with a stable log-softmax: per-row losses (threaded
// over rows), their mean over the counted targets, and the gradients of both.
// Splitting the mean out keeps every kernel row-parallel; the mean itself is
// a sum over n floats.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/kernels/gradients.h"
#include "engine/kernels/vector.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

enum LossSource { kLogits = 0, kTargets = 1, kRowGrads = 2 };

bool counted(int32_t target, int32_t ignore_index) { return target != ignore_index; }
bool in_vocab(int32_t target, int64_t vocab) { return target >= 0 && target < vocab; }

// A target outside the vocabulary (and not ignored) gives NaN: the trainer's
// NaN check then stops instead of reading outside the row.
template <float (*row_loss)(const float*, int64_t, int32_t)>
void run_cross_entropy_rows(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& logits = g.node(n.src[kLogits]);
    const int32_t* targets = g.node(n.src[kTargets]).row<int32_t>(0);
    const int32_t ignore = n.param<LossParams>().ignore_index;
    const int64_t vocab = logits.shape.ne[0];
    const auto [r0, r1] = split_range(logits.shape.rows(), ctx.ith, ctx.nth);
    float* out = n.row(0);
    for (int64_t r = r0; r < r1; ++r) {
        if (!counted(targets[r], ignore)) out[r] = 0.0f;
        else if (!in_vocab(targets[r], vocab)) out[r] = std::numeric_limits<float>::quiet_NaN();
        else out[r] = row_loss(logits.row(r), vocab, targets[r]);
    }
}

template <void (*row_grad_fn)(const float*, int64_t, int32_t, float, float*)>
void run_cross_entropy_rows_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& logits = g.node(n.src[kLogits]);
    const int32_t* targets = g.node(n.src[kTargets]).row<int32_t>(0);
    const float* row_grads = g.node(n.src[kRowGrads]).row(0);
    const int32_t ignore = n.param<LossParams>().ignore_index;
    const int64_t vocab = n.shape.ne[0];
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        if (!counted(targets[r], ignore) || !in_vocab(targets[r], vocab)) {
            std::memset(n.row(r), 0, n.row_bytes);
            continue;
        }
        row_grad_fn(logits.row(r), vocab, targets[r], row_grads[r], n.row(r));
    }
}

int64_t count_targets(const int32_t* targets, int64_t n, int32_t ignore) {
    return std::count_if(targets, targets + n, [ignore](int32_t t) { return counted(t, ignore); });
}

// One thread sums: n is the number of tokens of a batch, a few thousand at most.
void run_mean_loss(const Graph& g, const Node& n, const ExecContext& ctx) {
    if (ctx.ith != 0) return;
    const Node& rows = g.node(n.src[0]);
    const int32_t* targets = g.node(n.src[1]).row<int32_t>(0);
    const int64_t count = count_targets(targets, rows.shape.elements(), n.param<LossParams>().ignore_index);
    double total = 0.0;
    for (int64_t r = 0; r < rows.shape.elements(); ++r) total += rows.row(0)[r];
    n.row(0)[0] = count == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(count));
}

void run_mean_loss_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const float grad = g.node(n.src[0]).row(0)[0];
    const int32_t* targets = g.node(n.src[1]).row<int32_t>(0);
    const int32_t ignore = n.param<LossParams>().ignore_index;
    const int64_t count = count_targets(targets, n.shape.elements(), ignore);
    const float share = count == 0 ? 0.0f : static_cast<float>(static_cast<double>(grad) / static_cast<double>(count));
    const auto [r0, r1] = split_range(n.shape.elements(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) n.row(0)[r] = counted(targets[r], ignore) ? share : 0.0f;
}

Sources cross_entropy_rows_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[kLogits])
        out[kLogits] = ops::cross_entropy_rows_grad(g, n.src[kLogits], n.src[kTargets], grad,
                                                    n.param<LossParams>().ignore_index);
    return out;
}

Sources mean_loss_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::mean_loss_grad(g, grad, n.src[1], n.param<LossParams>().ignore_index);
    return out;
}

void check_targets(OpKind op, const Graph& g, NodeId targets, int64_t rows) {
    const Node& t = g.node(targets);
    require_type(op, t, DType::I32, "the targets");
    if (t.shape.elements() != rows) shape_error(op, "{} targets for {} rows", t.shape.elements(), rows);
}

}  // namespace

namespace ops {
NodeId cross_entropy_rows(Graph& g, NodeId logits, NodeId targets, int32_t ignore_index) {
    const OpKind op = OpKind::CrossEntropyRows;
    require_type(op, g.node(logits), DType::F32, "the logits");
    if (g.node(logits).shape.rank > 2) shape_error(op, "the logits {} must be a matrix", g.node(logits).shape.str());
    check_targets(op, g, targets, g.node(logits).shape.rows());
    return g.add(op, DType::F32, Shape::of({g.node(logits).shape.rows()}), {logits, targets}, LossParams{ignore_index});
}

NodeId cross_entropy_rows_grad(Graph& g, NodeId logits, NodeId targets, NodeId row_grads, int32_t ignore_index) {
    const OpKind op = OpKind::CrossEntropyRowsGrad;
    require_type(op, g.node(logits), DType::F32, "the logits");
    require_type(op, g.node(row_grads), DType::F32, "the row gradients");
    const int64_t rows = g.node(logits).shape.rows();
    check_targets(op, g, targets, rows);
    if (g.node(row_grads).shape.elements() != rows)
        shape_error(op, "{} row gradients for {} rows", g.node(row_grads).shape.elements(), rows);
    return g.add(op, DType::F32, g.node(logits).shape, {logits, targets, row_grads}, LossParams{ignore_index});
}

NodeId mean_loss(Graph& g, NodeId row_losses, NodeId targets, int32_t ignore_index) {
    const OpKind op = OpKind::MeanLoss;
    require_type(op, g.node(row_losses), DType::F32, "the losses");
    check_targets(op, g, targets, g.node(row_losses).shape.elements());
    return g.add(op, DType::F32, Shape::of({1}), {row_losses, targets}, LossParams{ignore_index});
}

NodeId mean_loss_grad(Graph& g, NodeId grad, NodeId targets, int32_t ignore_index) {
    const OpKind op = OpKind::MeanLossGrad;
    require_type(op, g.node(grad), DType::F32, "the gradient");
    if (g.node(grad).shape.elements() != 1) shape_error(op, "the gradient {} must be one value", g.node(grad).shape.str());
    require_type(op, g.node(targets), DType::I32, "the targets");
    return g.add(op, DType::F32, Shape::of({g.node(targets).shape.elements()}), {grad, targets},
                 LossParams{ignore_index});
}

NodeId cross_entropy(Graph& g, NodeId logits, NodeId targets, int32_t ignore_index) {
    return mean_loss(g, cross_entropy_rows(g, logits, targets, ignore_index), targets, ignore_index);
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kCrossEntropyRows{OpKind::CrossEntropyRows, MemoryEffects::Unchecked, run_cross_entropy_rows<kernels::cross_entropy>,
                                     run_cross_entropy_rows<kernels::ref::cross_entropy>, nullptr,
                                     cross_entropy_rows_backward};
extern const OpDef kCrossEntropyRowsGrad{OpKind::CrossEntropyRowsGrad, MemoryEffects::Unchecked,
                                         run_cross_entropy_rows_grad<kernels::cross_entropy_grad>,
                                         run_cross_entropy_rows_grad<kernels::ref::cross_entropy_grad>};
extern const OpDef kMeanLoss{OpKind::MeanLoss, MemoryEffects::Unchecked, run_mean_loss, run_mean_loss, nullptr, mean_loss_backward};
extern const OpDef kMeanLossGrad{OpKind::MeanLossGrad, MemoryEffects::Unchecked, run_mean_loss_grad, run_mean_loss_grad};
}  // namespace ops::defs

}  // namespace kiln
