// The KV cache write and causal (grouped-query) attention over the cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/attention.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::my_rows;
using ops::detail::require_type;
using ops::detail::shape_error;

// Sources of an attention node.
enum AttentionSource { kQuery = 0, kKeys = 1, kValues = 2, kPositions = 3, kMask = 4 };

// Positions were validated by the model; one outside the cache is skipped
// rather than written out of bounds.
void run_store_kv(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& cache = g.node(n.src[0]);
    const Node& x = g.node(n.src[1]);
    const int32_t* positions = g.node(n.src[2]).row<int32_t>(0);
    const auto [r0, r1] = my_rows(x.shape.rows(), ctx);
    for (int64_t r = r0; r < r1; ++r) {
        if (positions[r] < 0 || positions[r] >= cache.shape.rows()) continue;
        std::memcpy(cache.row<std::byte>(positions[r]), x.row<std::byte>(r), x.row_bytes);
    }
}

// Work is split over (token, head) pairs: a decode step still has n_heads items.
template <decltype(&kernels::attend) kernel>
void run_attention(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& q = g.node(n.src[kQuery]);
    const Node& k = g.node(n.src[kKeys]);
    const Node& v = g.node(n.src[kValues]);
    const int32_t* positions = g.node(n.src[kPositions]).row<int32_t>(0);
    const Node* mask = n.src[kMask] == kNoNode ? nullptr : &g.node(n.src[kMask]);
    const AttentionParams& p = n.param<AttentionParams>();
    const int64_t group = p.n_heads / p.n_kv_heads;
    const int64_t n_ctx = k.shape.rows();
    const auto [i0, i1] = my_rows(q.shape.rows() * p.n_heads, ctx);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t t = item / p.n_heads, h = item % p.n_heads, kv_head = h / group;
        const int64_t kv_len = std::clamp<int64_t>(int64_t{positions[t]} + 1, 0, n_ctx);
        const uint8_t* valid = nullptr;
        if (mask != nullptr) valid = mask->row<uint8_t>(mask->shape.rows() == 1 ? 0 : t);
        kernel(q.row(t) + h * p.head_dim, k.row(0) + kv_head * p.head_dim, static_cast<size_t>(k.shape.ne[0]),
               v.row(0) + kv_head * p.head_dim, static_cast<size_t>(v.shape.ne[0]), kv_len, p.head_dim, p.scale,
               valid, n.row(t) + h * p.head_dim, ctx.scratch);
    }
}

size_t attention_scratch(const Graph& g, const Node& n) {
    return static_cast<size_t>(g.node(n.src[kKeys]).shape.rows());
}

}  // namespace

namespace ops {

NodeId store_kv(Graph& g, NodeId cache, NodeId x, NodeId positions) {
    const Node& c = g.node(cache);
    const Node& xn = g.node(x);
    if (c.op != OpKind::State && c.op != OpKind::StoreKV)
        shape_error(OpKind::StoreKV, "the cache must be a state node");
    require_type(OpKind::StoreKV, xn, c.type, "the rows");
    require_type(OpKind::StoreKV, g.node(positions), DType::I32, "the positions");
    if (xn.shape.ne[0] != c.shape.ne[0])
        shape_error(OpKind::StoreKV, "rows {} do not fit the cache {}", xn.shape.str(), c.shape.str());
    if (g.node(positions).shape.elements() != xn.shape.rows())
        shape_error(OpKind::StoreKV, "{} positions for {} rows", g.node(positions).shape.elements(), xn.shape.rows());
    return g.add(OpKind::StoreKV, c.type, c.shape, {cache, x, positions});
}

NodeId attention(Graph& g, NodeId q, NodeId k_cache, NodeId v_cache, NodeId positions, NodeId mask, int64_t n_heads,
                 int64_t n_kv_heads, int64_t head_dim) {
    const OpKind op = OpKind::Attention;
    const Node& qn = g.node(q);
    const Node& kn = g.node(k_cache);
    const Node& vn = g.node(v_cache);
    require_type(op, qn, DType::F32, "the queries");
    require_type(op, kn, DType::F32, "the key cache");
    require_type(op, vn, DType::F32, "the value cache");
    require_type(op, g.node(positions), DType::I32, "the positions");
    if (n_heads < 1 || n_kv_heads < 1 || head_dim < 1 || n_heads % n_kv_heads != 0)
        shape_error(op, "{} query heads cannot share {} key/value heads", n_heads, n_kv_heads);
    if (qn.shape.ne[0] != n_heads * head_dim)
        shape_error(op, "queries {} are not {} heads of {}", qn.shape.str(), n_heads, head_dim);
    if (kn.shape.ne[0] != n_kv_heads * head_dim || !(kn.shape == vn.shape))
        shape_error(op, "caches {} and {} are not {} heads of {}", kn.shape.str(), vn.shape.str(), n_kv_heads, head_dim);
    if (g.node(positions).shape.elements() != qn.shape.rows())
        shape_error(op, "{} positions for {} queries", g.node(positions).shape.elements(), qn.shape.rows());
    if (mask != kNoNode) {
        const Node& m = g.node(mask);
        require_type(op, m, DType::I8, "the mask");
        if (m.shape.ne[0] != kn.shape.rows() || (m.shape.rows() != 1 && m.shape.rows() != qn.shape.rows()))
            shape_error(op, "mask {} does not cover {} cache rows for {} queries", m.shape.str(), kn.shape.rows(),
                        qn.shape.rows());
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    return g.add(op, DType::F32, qn.shape, {q, k_cache, v_cache, positions, mask},
                 AttentionParams{n_heads, n_kv_heads, head_dim, scale});
}

}  // namespace ops

namespace ops::defs {
extern const OpDef kStoreKV{OpKind::StoreKV, run_store_kv, run_store_kv};
extern const OpDef kAttention{OpKind::Attention, run_attention<kernels::attend>, run_attention<kernels::ref::attend>,
                       attention_scratch};
}  // namespace ops::defs

}  // namespace kiln
