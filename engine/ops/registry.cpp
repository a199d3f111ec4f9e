// The registry table, generated from the one list of ops (engine/graph/op_list.h):
// entry i is the definition of OpKind kFirstComputedOp + i.
#include <array>

#include "engine/ops/op_def.h"

namespace kiln {

namespace ops::defs {
#define KILN_OP_DECLARE(kind, name, def) extern const OpDef def;
KILN_OPS(KILN_OP_DECLARE)
#undef KILN_OP_DECLARE
}  // namespace ops::defs

namespace {
#define KILN_OP_ENTRY(kind, name, def) &ops::defs::def,
const std::array kTable{KILN_OPS(KILN_OP_ENTRY)};
#undef KILN_OP_ENTRY
static_assert(kTable.size() == kComputedOpCount, "op_list.h generates both the enum and this table");
}  // namespace

const OpDef& op_def(OpKind kind) {
    const auto index = static_cast<size_t>(kind) - kFirstComputedOp;
    if (static_cast<size_t>(kind) < kFirstComputedOp || index >= kTable.size())
        fail("graph", "op {} has no definition", op_name(kind));
    return *kTable[index];
}

}  // namespace kiln
