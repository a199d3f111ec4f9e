#pragma once
// The one list of computed ops. It generates the OpKind enum and op_name()
// (engine/graph/graph.h/.cpp) and the registry table (engine/ops/registry.cpp),
// so the three cannot disagree. Adding an op means its own file (builder,
// OpDef with forward, reference, effects and backward) plus one line here.
//
// X(Kind, "name", definition): the OpKind enumerator, the name used in errors
// and profiles, and the OpDef the op file defines in kiln::ops::defs.
#define KILN_OPS(X)                                                                            \
    X(GetRows, "get_rows", kGetRows)                                                           \
    X(SliceRows, "slice_rows", kSliceRows)                                                     \
    X(Add, "add", kAdd)                                                                        \
    X(Mul, "mul", kMul)                                                                        \
    X(Scale, "scale", kScale)                                                                  \
    X(Softcap, "softcap", kSoftcap)                         /* cap * tanh(x / cap) */          \
    X(Relu, "relu", kRelu)                                                                     \
    X(Silu, "silu", kSilu)                                                                     \
    X(GeluTanh, "gelu", kGelu)                                                                 \
    X(SwiGlu, "swiglu", kSwiGlu)                                                               \
    X(RmsNorm, "rms_norm", kRmsNorm)                                                           \
    X(LayerNorm, "layer_norm", kLayerNorm)                                                     \
    X(Softmax, "softmax", kSoftmax)                                                            \
    X(PrepareActivations, "prepare_activations", kPrepare)                                     \
    X(MatMul, "matmul", kMatMul)                                                               \
    X(Rope, "rope", kRope)                                                                     \
    X(StoreKV, "store_kv", kStoreKV)                                                           \
    X(CachedAttention, "cached_attention", kCachedAttention)                                   \
    /* training: backward kernels and ops only a training graph uses */                        \
    X(Transpose, "transpose", kTranspose)                   /* [a, b] -> [b, a] */             \
    X(SumRows, "sum_rows", kSumRows)                        /* [n, rows] -> [n]: column sums */ \
    X(GetRowsGrad, "get_rows_grad", kGetRowsGrad)           /* scatter-add of row gradients */ \
    X(PadRows, "pad_rows", kPadRows)                        /* gradient of slice_rows */       \
    X(SliceColumns, "slice_columns", kSliceColumns)         /* columns [first, first + n) */   \
    X(PadColumns, "pad_columns", kPadColumns)               /* gradient of slice_columns */    \
    X(ReluGrad, "relu_grad", kReluGrad)                                                        \
    X(GeluTanhGrad, "gelu_grad", kGeluGrad)                                                    \
    X(GeluErf, "gelu_erf", kGeluErf)                        /* exact GELU */                   \
    X(GeluErfGrad, "gelu_erf_grad", kGeluErfGrad)                                              \
    X(LayerNormGrad, "layer_norm_grad", kLayerNormGrad)     /* dx of layer_norm */             \
    X(RmsNormGrad, "rms_norm_grad", kRmsNormGrad)           /* dx of rms_norm */               \
    X(SiluGrad, "silu_grad", kSiluGrad)                                                        \
    X(SoftmaxGrad, "softmax_grad", kSoftmaxGrad)                                               \
    X(CrossEntropyRows, "cross_entropy_rows", kCrossEntropyRows)                               \
    X(CrossEntropyRowsGrad, "cross_entropy_rows_grad", kCrossEntropyRowsGrad)                  \
    X(MeanLoss, "mean_loss", kMeanLoss)                     /* mean over non-ignored targets */ \
    X(MeanLossGrad, "mean_loss_grad", kMeanLossGrad)                                           \
    X(Dropout, "dropout", kDropout)                                                            \
    X(SequenceAttention, "sequence_attention", kSequenceAttention)   /* B sequences of rows */ \
    X(SequenceAttentionGrad, "sequence_attention_grad", kSequenceAttentionGrad)
