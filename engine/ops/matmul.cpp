// Matrix products: activations prepared once (quantized to Q8_0 for int8
// weights) in their own node, then each thread multiplies its share of weight rows.
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

// Weight rows are handed out in whole row tiles of the kernels
// (kernels::matmul_row_tile), so the split never changes the results.

void prepare(const Graph& g, const Node& n, const ExecContext& ctx, const kernels::MatmulKernels& k) {
    const Node& x = g.node(n.src[0]);
    const DType weight_type = g.node(n.src[1]).type;
    const auto [r0, r1] = split_range(n.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) k.prepare_row(weight_type, x.row(r), n.shape.ne[0], n.row<std::byte>(r));
}

void multiply(const Graph& g, const Node& n, const ExecContext& ctx, const kernels::MatmulKernels& k) {
    const Node& w = g.node(n.src[0]);
    const Node& x = g.node(n.src[1]);
    const int64_t m = n.shape.ne[0];
    const int64_t granule = kernels::matmul_row_tile(w.type, n.shape.rows());
    const int64_t granules = (m + granule - 1) / granule;
    const auto [g0, g1] = split_range(granules, ctx.ith, ctx.nth);
    const int64_t r0 = g0 * granule, r1 = std::min(m, g1 * granule);
    if (r0 >= r1) return;
    k.matmul(w.type, w.shape.ne[0], w.data, w.row_bytes, r0, r1, x.data, x.row_bytes, n.shape.rows(), n.row(0), m,
             nullptr);
}

// With more than one thread, the fast forward hands weight rows out in
// chunks claimed at run time (kernels::RowClaims) instead of one fixed share
// per thread. On a shared machine, or a laptop with other work, one thread's
// share often takes longer than the other's (its core is interrupted, or draws
// less bandwidth): with fixed shares the fast thread then idles at the
// barrier, with chunks it takes over the rest. Each thread still packs a
// batch's tokens only once. Chunks are whole row tiles of the kernels, so the
// results are the bits a fixed split gives.
//
// A GEMM's chunk is one panel of 32 rows: its work (tens of microseconds for
// the 110M model's products) dwarfs the one atomic add that claims it, and the
// threads then finish within one panel of each other. With four chunks per
// thread a prompt's 2048-row products ended up to 256 rows apart, which cost
// 7% of both threads' time in barrier waits at pp128 (KILN_PROFILE). Decode
// products take 16 chunks per thread: on a shared 2-core AMD EPYC, 1.1B
// Q4_K_M (interleaved rows, one weight stream per chunk) spent 12-33% of both
// threads' time in barrier waits with 4 (tg32 20-27 t/s), 4-6% with 16 (29-30
// t/s); 32 and 64 were no better, and a Q8_0 file (plain rows, a stream per
// row of a tile) ran the same with 4 or 16.
constexpr int64_t kDecodeChunksPerThread = 16;

void run_matmul_claiming(const Graph& g, const Node& n, const ExecContext& ctx, std::atomic<int64_t>& next) {
    const Node& w = g.node(n.src[0]);
    const Node& x = g.node(n.src[1]);
    const int64_t m = n.shape.ne[0];
    const bool decode = n.shape.rows() < kernels::kGemmMinTokens;
    const int64_t tile = kernels::matmul_row_tile(w.type, n.shape.rows());
    const int64_t tiles = (m + tile - 1) / tile;
    const int64_t chunk_tiles = decode ? std::max<int64_t>(1, tiles / (ctx.nth * kDecodeChunksPerThread)) : 1;
    const kernels::RowClaims claims{&next, chunk_tiles * tile, ctx.ith};
    ctx.matmul->matmul(w.type, w.shape.ne[0], w.data, w.row_bytes, 0, m, x.data, x.row_bytes, n.shape.rows(), n.row(0),
                       m, &claims);
}

void run_prepare(const Graph& g, const Node& n, const ExecContext& ctx) { prepare(g, n, ctx, *ctx.matmul); }
void ref_prepare(const Graph& g, const Node& n, const ExecContext& ctx) {
    prepare(g, n, ctx, kernels::scalar_matmul_kernels());
}
void run_matmul(const Graph& g, const Node& n, const ExecContext& ctx) { multiply(g, n, ctx, *ctx.matmul); }
void ref_matmul(const Graph& g, const Node& n, const ExecContext& ctx) {
    multiply(g, n, ctx, kernels::scalar_matmul_kernels());
}

// Y = X · Wᵀ (rows of Y are tokens): dX = dY · W and dW = dYᵀ · X. The engine's
// GEMM multiplies two row-major operands along their rows, so both products
// run on transposed copies (cheap next to the products): dX = matmul(Wᵀ, dY),
// dW = matmul(Xᵀ, dYᵀ). Only F32 weights and activations are differentiable.
Sources matmul_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    const NodeId w = n.src[0], x = n.src[1];
    if (g.node(w).type != DType::F32 || g.node(x).type != DType::F32)
        fail("autodiff", "matmul: gradients need F32 weights, got {}", dtype_name(g.node(w).type));
    Sources out = ops::detail::no_gradients();
    if (wanted[0]) out[0] = ops::matmul(g, ops::transpose(g, x), ops::transpose(g, grad));
    if (wanted[1]) out[1] = ops::matmul(g, ops::transpose(g, w), grad);
    return out;
}

}  // namespace

namespace ops {
NodeId matmul(Graph& g, NodeId w, NodeId x) {
    const Node& wn = g.node(w);
    const Node& xn = g.node(x);
    require_type(OpKind::MatMul, xn, DType::F32, "the activations");
    if (!kernels::matmul_supports(wn.type))
        shape_error(OpKind::MatMul, "weights of type {} are not supported (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_K, q3_K, q4_K, q5_K, q6_K are)",
                    dtype_name(wn.type));
    if (wn.shape.rank > 2 || wn.shape.ne[0] != xn.shape.ne[0])
        shape_error(OpKind::MatMul, "weights {} do not fit activations {} (rows of {} expected)", wn.shape.str(),
                    xn.shape.str(), xn.shape.ne[0]);
    const DType prepared_type = kernels::vec_dot_type(wn.type);
    NodeId prepared = x;
    if (prepared_type != DType::F32) {
        if (xn.shape.ne[0] % type_traits(prepared_type).block_size != 0)
            shape_error(OpKind::MatMul, "rows of {} are not whole {} blocks", xn.shape.ne[0], dtype_name(prepared_type));
        prepared = g.add(OpKind::PrepareActivations, prepared_type, xn.shape, {x, w});
    }
    const Shape out = Shape::of({wn.shape.ne[1], xn.shape.rows()});
    return g.add(OpKind::MatMul, DType::F32, out, {w, prepared});
}
}  // namespace ops

namespace ops::defs {
extern const OpDef kPrepare{OpKind::PrepareActivations, MemoryEffects::OwnData, run_prepare, ref_prepare};
extern const OpDef kMatMul{OpKind::MatMul, MemoryEffects::OwnData, run_matmul, ref_matmul, nullptr, matmul_backward,
                          run_matmul_claiming};
}  // namespace ops::defs

}  // namespace kiln
