// The one table of ops: adding an op means its own file plus one line here.
#include <array>

#include "engine/ops/op_def.h"

namespace kiln {

namespace ops::defs {
extern const OpDef kGetRows, kTakeRows, kAdd, kMul, kScale, kRelu, kSilu, kGelu, kSwiGlu, kRmsNorm, kLayerNorm,
    kSoftmax, kPrepare, kMatMul, kRope, kStoreKV, kAttention;
}  // namespace ops::defs

const OpDef& op_def(OpKind kind) {
    using namespace ops::defs;
    static const std::array<const OpDef*, 17> table = {
        &kGetRows, &kTakeRows, &kAdd,     &kMul,     &kScale,  &kRelu,  &kSilu,    &kGelu,     &kSwiGlu,
        &kRmsNorm, &kLayerNorm, &kSoftmax, &kPrepare, &kMatMul, &kRope, &kStoreKV, &kAttention,
    };
    for (const OpDef* def : table)
        if (def->kind == kind) return *def;
    fail("graph", "op {} has no definition", op_name(kind));
}

}  // namespace kiln
