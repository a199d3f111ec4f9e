// Moving values around without arithmetic: transpose, column slices and the
// zero-padding that is their gradient. Training graphs use them to split a
// fused QKV projection into heads' inputs and to form matmul gradients, which
// the engine's row-major GEMM computes from transposed operands.
#include <algorithm>
#include <cstring>

#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

// out [b, a] row j, column i = x row i, column j. Threads split output rows.
void transpose_ref(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int64_t cols = n.shape.ne[0];
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t j = r0; j < r1; ++j)
        for (int64_t i = 0; i < cols; ++i) n.row(j)[i] = x.row(i)[j];
}

// Square tiles, so that both the reads and the writes of a tile stay in cache
// lines already loaded (the plain loop reads one float per source line).
void transpose_fast(const Graph& g, const Node& n, const ExecContext& ctx) {
    constexpr int64_t kTile = 16;
    const Node& x = g.node(n.src[0]);
    const int64_t cols = n.shape.ne[0];
    const int64_t rows = n.shape.rows();
    const auto [t0, t1] = split_range((rows + kTile - 1) / kTile, ctx.ith, ctx.nth);
    for (int64_t jt = t0 * kTile; jt < std::min(rows, t1 * kTile); jt += kTile) {
        const int64_t j_end = std::min(rows, jt + kTile);
        for (int64_t it = 0; it < cols; it += kTile) {
            const int64_t i_end = std::min(cols, it + kTile);
            for (int64_t i = it; i < i_end; ++i) {
                const float* src = x.row(i);
                for (int64_t j = jt; j < j_end; ++j) n.row(j)[i] = src[j];
            }
        }
    }
}

void run_slice_columns(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int64_t first = n.param<RowsParams>().first;
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) std::memcpy(n.row(r), x.row(r) + first, n.row_bytes);
}

void run_pad_columns(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int64_t first = n.param<RowsParams>().first, count = x.shape.ne[0], total = n.shape.ne[0];
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        float* out = n.row(r);
        std::fill(out, out + first, 0.0f);
        std::memcpy(out + first, x.row(r), x.row_bytes);
        std::fill(out + first + count, out + total, 0.0f);
    }
}

Sources transpose_backward(Graph& g, NodeId, NodeId grad, const SourceMask& wanted) {
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::transpose(g, grad);
    return out;
}

Sources slice_columns_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::pad_columns(g, grad, n.param<RowsParams>().first, g.node(n.src[0]).shape.ne[0]);
    return out;
}

Sources pad_columns_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::slice_columns(g, grad, n.param<RowsParams>().first, g.node(n.src[0]).shape.ne[0]);
    return out;
}

void require_matrix(OpKind op, const Node& x) {
    require_type(op, x, DType::F32, "the input");
    if (x.shape.rank > 2) shape_error(op, "the input {} must be a matrix", x.shape.str());
}

}  // namespace

namespace ops {
NodeId transpose(Graph& g, NodeId x) {
    const Node& n = g.node(x);
    require_matrix(OpKind::Transpose, n);
    return g.add(OpKind::Transpose, DType::F32, Shape::of({n.shape.ne[1], n.shape.ne[0]}), {x});
}

NodeId slice_columns(Graph& g, NodeId x, int64_t first, int64_t count) {
    const Node& n = g.node(x);
    require_matrix(OpKind::SliceColumns, n);
    if (first < 0 || count < 1 || first + count > n.shape.ne[0])
        shape_error(OpKind::SliceColumns, "columns [{}, {}) are not inside {}", first, first + count, n.shape.str());
    return g.add(OpKind::SliceColumns, DType::F32, Shape::of({count, n.shape.ne[1]}), {x}, RowsParams{first});
}

NodeId pad_columns(Graph& g, NodeId x, int64_t first, int64_t total) {
    const Node& n = g.node(x);
    require_matrix(OpKind::PadColumns, n);
    if (first < 0 || first + n.shape.ne[0] > total)
        shape_error(OpKind::PadColumns, "{} placed at column {} does not fit {} columns", n.shape.str(), first, total);
    return g.add(OpKind::PadColumns, DType::F32, Shape::of({total, n.shape.ne[1]}), {x}, RowsParams{first});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kTranspose{OpKind::Transpose, MemoryEffects::Unchecked, transpose_fast, transpose_ref, nullptr, transpose_backward};
extern const OpDef kSliceColumns{OpKind::SliceColumns, MemoryEffects::Unchecked, run_slice_columns, run_slice_columns, nullptr,
                                 slice_columns_backward};
extern const OpDef kPadColumns{OpKind::PadColumns, MemoryEffects::Unchecked, run_pad_columns, run_pad_columns, nullptr, pad_columns_backward};
}  // namespace ops::defs

}  // namespace kiln
