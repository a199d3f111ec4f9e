// Row selection: embedding lookup (get_rows) and copying a range of rows
// (slice_rows), with their gradients: scatter-add into the table (get_rows_grad)
// and zero-padding (pad_rows).
#include <cstring>

#include "engine/kernels/vector.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

// Ids were validated by whoever filled the input; an id out of range still
// never reads outside the table: its row comes out as zeros.
void run_get_rows(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& table = g.node(n.src[0]);
    const Node& ids = g.node(n.src[1]);
    const auto to_float = type_traits(table.type).to_float;
    const int64_t width = n.shape.ne[0];
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        const int32_t id = ids.row<int32_t>(0)[r];
        if (id < 0 || id >= table.shape.rows()) {
            std::memset(n.row(r), 0, static_cast<size_t>(width) * sizeof(float));
            continue;
        }
        to_float(table.row<std::byte>(id), n.row(r), width);
    }
}

void run_slice_rows(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int64_t first = n.param<RowsParams>().first;
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) std::memcpy(n.row<std::byte>(r), x.row<std::byte>(first + r), n.row_bytes);
}

// Each thread owns a range of table rows and walks all ids in order, adding
// those that land in its range: no two threads write one row, and each row's
// sum is taken in id order whatever the thread count.
template <bool fast>
void run_get_rows_grad(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& grad = g.node(n.src[0]);
    const int32_t* ids = g.node(n.src[1]).row<int32_t>(0);
    const int64_t width = n.shape.ne[0];
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    if (r0 >= r1) return;
    std::memset(n.row(r0), 0, static_cast<size_t>(r1 - r0) * n.row_bytes);
    for (int64_t t = 0; t < grad.shape.rows(); ++t) {
        const int64_t id = ids[t];
        if (id < r0 || id >= r1) continue;
        float* out = n.row(id);
        const float* src = grad.row(t);
        if constexpr (fast) {
            kernels::add(out, src, out, width);
        } else {
            for (int64_t i = 0; i < width; ++i) out[i] += src[i];
        }
    }
}

void run_pad_rows(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int64_t first = n.param<RowsParams>().first, count = x.shape.rows();
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        if (r >= first && r < first + count) std::memcpy(n.row<std::byte>(r), x.row<std::byte>(r - first), n.row_bytes);
        else std::memset(n.row<std::byte>(r), 0, n.row_bytes);
    }
}

Sources get_rows_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) {
        const Node& table = g.node(n.src[0]);
        if (table.type != DType::F32)
            fail("autodiff", "get_rows: gradients need an F32 table, got {}", dtype_name(table.type));
        out[0] = ops::get_rows_grad(g, grad, n.src[1], table.shape.rows());
    }
    return out;
}

Sources slice_rows_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::pad_rows(g, grad, n.param<RowsParams>().first, g.node(n.src[0]).shape.rows());
    return out;
}

Sources pad_rows_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::slice_rows(g, grad, n.param<RowsParams>().first, g.node(n.src[0]).shape.rows());
    return out;
}

}  // namespace

namespace ops {
NodeId get_rows_grad(Graph& g, NodeId grad, NodeId ids, int64_t table_rows) {
    const OpKind op = OpKind::GetRowsGrad;
    const Node& d = g.node(grad);
    require_type(op, d, DType::F32, "the gradient");
    require_type(op, g.node(ids), DType::I32, "the ids");
    if (d.shape.rank > 2 || g.node(ids).shape.elements() != d.shape.rows())
        shape_error(op, "{} ids for gradient rows {}", g.node(ids).shape.elements(), d.shape.str());
    return g.add(op, DType::F32, Shape::of({d.shape.ne[0], table_rows}), {grad, ids});
}

NodeId pad_rows(Graph& g, NodeId x, int64_t first, int64_t total) {
    const Node& n = g.node(x);
    if (n.shape.rank > 2 || first < 0 || first + n.shape.rows() > total)
        shape_error(OpKind::PadRows, "{} placed at row {} does not fit {} rows", n.shape.str(), first, total);
    return g.add(OpKind::PadRows, n.type, Shape::of({n.shape.ne[0], total}), {x}, RowsParams{first});
}

NodeId get_rows(Graph& g, NodeId table, NodeId ids) {
    const Node& t = g.node(table);
    const Node& i = g.node(ids);
    require_type(OpKind::GetRows, i, DType::I32, "the ids");
    if (type_traits(t.type).to_float == nullptr)
        shape_error(OpKind::GetRows, "tables of type {} cannot be read", dtype_name(t.type));
    if (i.shape.rows() != 1) shape_error(OpKind::GetRows, "ids must be one row, got {}", i.shape.str());
    return g.add(OpKind::GetRows, DType::F32, Shape::of({t.shape.ne[0], i.shape.ne[0]}), {table, ids});
}

NodeId slice_rows(Graph& g, NodeId x, int64_t first, int64_t count) {
    const Node& n = g.node(x);
    if (n.shape.rank > 2 || first < 0 || count < 1 || first + count > n.shape.rows())
        shape_error(OpKind::SliceRows, "rows [{}, {}) are not inside {}", first, first + count, n.shape.str());
    return g.add(OpKind::SliceRows, n.type, Shape::of({n.shape.ne[0], count}), {x}, RowsParams{first});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kGetRows{OpKind::GetRows, MemoryEffects::OwnData, run_get_rows, run_get_rows, nullptr, get_rows_backward};
extern const OpDef kSliceRows{OpKind::SliceRows, MemoryEffects::OwnData, run_slice_rows, run_slice_rows, nullptr, slice_rows_backward};
extern const OpDef kGetRowsGrad{OpKind::GetRowsGrad, MemoryEffects::Unchecked, run_get_rows_grad<true>, run_get_rows_grad<false>};
extern const OpDef kPadRows{OpKind::PadRows, MemoryEffects::Unchecked, run_pad_rows, run_pad_rows, nullptr, pad_rows_backward};
}  // namespace ops::defs

}  // namespace kiln
