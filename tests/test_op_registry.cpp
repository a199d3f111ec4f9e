// The op registry: every OpKind the list in engine/graph/op_list.h generates
// has a definition in the table, found by its kind, with a name of its own and
// its memory effects declared.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "engine/ops/op_def.h"

using namespace kiln;

TEST_CASE("every computed op has its own definition and name", "[graph][registry]") {
    std::set<std::string> names;
    for (size_t k = kFirstComputedOp; k < static_cast<size_t>(OpKind::Count); ++k) {
        const auto kind = static_cast<OpKind>(k);
        INFO("op " << op_name(kind));
        const OpDef& def = op_def(kind);
        CHECK(def.kind == kind);  // the op file defines the OpDef the list names
        CHECK(def.forward != nullptr);
        CHECK(def.reference != nullptr);
        // Declared: a value-initialized (forgotten) effects field is 0, no enumerator.
        CHECK((def.effects == MemoryEffects::OwnData || def.effects == MemoryEffects::Unchecked));
        CHECK(names.insert(op_name(kind)).second);
    }
    CHECK(names.size() == kComputedOpCount);
}

TEST_CASE("leaves have no definition", "[graph][registry]") {
    CHECK_THROWS_WITH(op_def(OpKind::Input), Catch::Contains("input"));
    CHECK_THROWS(op_def(OpKind::Weight));
    CHECK_THROWS(op_def(OpKind::State));
}
