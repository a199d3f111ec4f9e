// The one table of ops: adding an op means its own file plus one line here.
#include <array>

#include "engine/ops/op_def.h"

namespace kiln {

namespace ops::defs {
extern const OpDef kGetRows, kTakeRows, kAdd, kMul, kScale, kRelu, kSilu, kGelu, kSwiGlu, kRmsNorm, kLayerNorm,
    kSoftmax, kPrepare, kMatMul, kRope, kStoreKV, kAttention,
    // training
    kTranspose, kSumRows, kGetRowsGrad, kPadRows, kSliceColumns, kPadColumns, kReluGrad, kGeluGrad, kGeluErf,
    kGeluErfGrad, kLayerNormGrad, kSoftmaxGrad, kCrossEntropyRows, kCrossEntropyRowsGrad, kMeanLoss, kMeanLossGrad,
    kDropout, kBatchAttention, kBatchAttentionGrad;
}  // namespace ops::defs

const OpDef& op_def(OpKind kind) {
    using namespace ops::defs;
    static const std::array<const OpDef*, 36> table = {
        &kGetRows, &kTakeRows, &kAdd,     &kMul,     &kScale,  &kRelu,  &kSilu,    &kGelu,     &kSwiGlu,
        &kRmsNorm, &kLayerNorm, &kSoftmax, &kPrepare, &kMatMul, &kRope, &kStoreKV, &kAttention,
        &kTranspose, &kSumRows, &kGetRowsGrad, &kPadRows, &kSliceColumns, &kPadColumns, &kReluGrad, &kGeluGrad,
        &kGeluErf, &kGeluErfGrad, &kLayerNormGrad, &kSoftmaxGrad, &kCrossEntropyRows, &kCrossEntropyRowsGrad,
        &kMeanLoss, &kMeanLossGrad, &kDropout, &kBatchAttention, &kBatchAttentionGrad,
    };
    for (const OpDef* def : table)
        if (def->kind == kind) return *def;
    fail("graph", "op {} has no definition", op_name(kind));
}

}  // namespace kiln
