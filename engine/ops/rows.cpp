// Row selection: embedding lookup (get_rows) and copying a range of rows (take_rows).
#include <cstring>

#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::my_rows;
using ops::detail::require_type;
using ops::detail::shape_error;

// Ids were validated by whoever filled the input; an id out of range still
// never reads outside the table: its row comes out as zeros.
void run_get_rows(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& table = g.node(n.src[0]);
    const Node& ids = g.node(n.src[1]);
    const auto to_float = type_traits(table.type).to_float;
    const int64_t width = n.shape.ne[0];
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) {
        const int32_t id = ids.row<int32_t>(0)[r];
        if (id < 0 || id >= table.shape.rows()) {
            std::memset(n.row(r), 0, static_cast<size_t>(width) * sizeof(float));
            continue;
        }
        to_float(table.row<std::byte>(id), n.row(r), width);
    }
}

void run_take_rows(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& x = g.node(n.src[0]);
    const int64_t first = n.param<RowsParams>().first;
    const auto [r0, r1] = my_rows(n.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) std::memcpy(n.row<std::byte>(r), x.row<std::byte>(first + r), n.row_bytes);
}

}  // namespace

namespace ops {
NodeId get_rows(Graph& g, NodeId table, NodeId ids) {
    const Node& t = g.node(table);
    const Node& i = g.node(ids);
    require_type(OpKind::GetRows, i, DType::I32, "the ids");
    if (type_traits(t.type).to_float == nullptr)
        shape_error(OpKind::GetRows, "tables of type {} cannot be read", dtype_name(t.type));
    if (i.shape.rows() != 1) shape_error(OpKind::GetRows, "ids must be one row, got {}", i.shape.str());
    return g.add(OpKind::GetRows, DType::F32, Shape::of({t.shape.ne[0], i.shape.ne[0]}), {table, ids});
}

NodeId take_rows(Graph& g, NodeId x, int64_t first, int64_t count) {
    const Node& n = g.node(x);
    if (n.shape.rank > 2 || first < 0 || count < 1 || first + count > n.shape.rows())
        shape_error(OpKind::TakeRows, "rows [{}, {}) are not inside {}", first, first + count, n.shape.str());
    return g.add(OpKind::TakeRows, n.type, Shape::of({n.shape.ne[0], count}), {x}, RowsParams{first});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kGetRows{OpKind::GetRows, run_get_rows, run_get_rows};
extern const OpDef kTakeRows{OpKind::TakeRows, run_take_rows, run_take_rows};
}  // namespace ops::defs

}  // namespace kiln
