// Attention for training: `batch` independent sequences laid out as rows
// [n_heads * head_dim, batch * len], causal (decoder self-attention) or not
// (encoder self-attention, cross-attention with its own key length), with an
// optional key padding mask, and its backward kernel.
//
// The backward pass recomputes the attention probabilities P of each
// (sequence, head) instead of storing them (they would be the largest tensors
// of a training graph), then with dO the output gradient:
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP - rowsum(P ⊙ dP)),
//   dQ = scale · dS K,  dK = scale · dSᵀ Q.
// One (sequence, head) pair is one work item: items write disjoint slices, so
// threads never share an output row slice and the sums are in a fixed order.
// The gradient node lists q, k, v and the mask as its own sources (not just
// the attention node), so the planner keeps them alive until it has run.
//
// Attention dropout (nanoGPT's attn_dropout, torch's MultiheadAttention
// dropout; training only): each probability P_ij is kept with probability
// 1 - p and scaled by 1/(1-p), i.e. multiplied by F_ij ∈ {0, 1/(1-p)}, and the
// output is (P ⊙ F) V. The keep decision is a hash of (seed, node salt, index
// of (sequence, head, query, key)), as the dropout op's, so the gradient
// kernel regenerates F instead of storing it. Backward: dV = (P ⊙ F)ᵀ dO and
// dP = (dO Vᵀ) ⊙ F, then dS as above. With p = 0 none of this runs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/kernels/attention.h"
#include "engine/kernels/dropout.h"
#include "engine/kernels/vector.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

enum Source { kQuery = 0, kKeys = 1, kValues = 2, kMask = 3, kGrad = 4 };

// The dropout factors F_ij of one node: 0 with probability p, else 1/(1-p).
struct DropMask {
    float p = 0.0f, keep_scale = 1.0f;
    uint64_t key = 0;
    int64_t heads = 1, q_len = 1, kv_len = 1;
    int64_t first_sequence = 0;

    DropMask(const Graph& g, const SequenceAttentionParams& params, int64_t q_len_, int64_t kv_len_)
        : heads(params.n_heads), q_len(q_len_), kv_len(kv_len_) {
        if (params.dropout <= 0.0f) return;
        p = params.dropout;
        keep_scale = 1.0f / (1.0f - p);
        const Node& seed = g.node(params.dropout_seed);
        // A seed of 4 values places this graph's batch at sequence seed[2] of
        // a larger one (a rank's share of a data-parallel batch): its masks
        // are that batch's rows'.
        if (seed.shape.elements() == 4) first_sequence = seed.row<int32_t>(0)[2];
        key = kernels::dropout::key(seed.row<int32_t>(0), params.dropout_salt,
                                    kernels::dropout::kAttentionDomain);
    }
    bool enabled() const noexcept { return p > 0.0f; }
    // Uniform in [0, 1) with 24 bits from the element's index, compared with p.
    float factor(int64_t b, int64_t h, int64_t i, int64_t j) const noexcept {
        const auto index = static_cast<uint64_t>((((first_sequence + b) * heads + h) * q_len + i) * kv_len + j);
        const float u = kernels::dropout::uniform(key, index);
        return u >= p ? keep_scale : 0.0f;
    }
};

struct Layout {
    int64_t heads, kv_heads, group, head_dim, batch, q_len, kv_len;
    bool causal;
    float scale;
    const Node *q, *k, *v, *mask;

    // From a sequence_attention node or its gradient node: both have q, k, v, mask in the same slots.
    Layout(const Graph& g, const Node& attention) {
        const SequenceAttentionParams& p = attention.param<SequenceAttentionParams>();
        heads = p.n_heads;
        kv_heads = p.n_kv_heads;
        group = heads / kv_heads;
        head_dim = p.head_dim;
        batch = p.batch;
        causal = p.causal;
        scale = p.scale;
        q = &g.node(attention.src[kQuery]);
        k = &g.node(attention.src[kKeys]);
        v = &g.node(attention.src[kValues]);
        mask = attention.src[kMask] == kNoNode ? nullptr : &g.node(attention.src[kMask]);
        q_len = q->shape.rows() / batch;
        kv_len = k->shape.rows() / batch;
    }
    const float* q_at(int64_t b, int64_t i, int64_t h) const { return q->row(b * q_len + i) + h * head_dim; }
    // Keys and values of query head h: its group's key/value head.
    const float* k_at(int64_t b, int64_t j, int64_t h) const { return k->row(b * kv_len + j) + (h / group) * head_dim; }
    const float* v_at(int64_t b, int64_t j, int64_t h) const { return v->row(b * kv_len + j) + (h / group) * head_dim; }
    const uint8_t* valid(int64_t b) const { return mask == nullptr ? nullptr : mask->row<uint8_t>(b); }
    int64_t visible(int64_t i) const { return causal ? std::min(i + 1, kv_len) : kv_len; }
    bool allowed(int64_t b, int64_t i, int64_t j) const {
        const uint8_t* ok = valid(b);
        return j < visible(i) && (ok == nullptr || ok[j] != 0);
    }
};

using kernels::dot;

// y += a x (vectorized by the compiler: no reduction).
void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// The forward pass with dropout, plain: every sum in double.
void attend_with_dropout_ref(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Layout L(g, n);
    const DropMask F(g, n.param<SequenceAttentionParams>(), L.q_len, L.kv_len);
    std::vector<double> p(static_cast<size_t>(L.kv_len));
    std::vector<double> out(static_cast<size_t>(L.head_dim));
    const auto [i0, i1] = split_range(L.batch * L.q_len * L.heads, ctx.ith, ctx.nth);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t h = item % L.heads, row = item / L.heads;
        const int64_t b = row / L.q_len, i = row % L.q_len;
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < L.kv_len; ++j) {
            p[j] = -std::numeric_limits<double>::infinity();
            if (!L.allowed(b, i, j)) continue;
            double s = 0.0;
            for (int64_t d = 0; d < L.head_dim; ++d) s += static_cast<double>(L.q_at(b, i, h)[d]) * L.k_at(b, j, h)[d];
            p[j] = s * L.scale;
            max = std::max(max, p[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < L.kv_len; ++j) {
            p[j] = max == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(p[j] - max);
            sum += p[j];
        }
        std::fill(out.begin(), out.end(), 0.0);
        for (int64_t j = 0; j < L.kv_len; ++j) {
            const double weight = sum > 0.0 ? p[j] / sum * F.factor(b, h, i, j) : 0.0;
            for (int64_t d = 0; d < L.head_dim; ++d) out[d] += weight * L.v_at(b, j, h)[d];
        }
        float* y = n.row(row) + h * L.head_dim;
        for (int64_t d = 0; d < L.head_dim; ++d) y[d] = static_cast<float>(out[d]);
    }
}

// The forward pass with dropout, fast: float scores in SIMD lanes, the
// probabilities in scratch, masked and dropped keys skipped.
void attend_with_dropout_fast(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Layout L(g, n);
    const DropMask F(g, n.param<SequenceAttentionParams>(), L.q_len, L.kv_len);
    float* p = ctx.scratch;
    const auto [i0, i1] = split_range(L.batch * L.q_len * L.heads, ctx.ith, ctx.nth);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t h = item % L.heads, row = item / L.heads;
        const int64_t b = row / L.q_len, i = row % L.q_len;
        const float* q = L.q_at(b, i, h);
        float* y = n.row(row) + h * L.head_dim;
        std::fill(y, y + L.head_dim, 0.0f);
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < L.kv_len; ++j) {
            p[j] = L.allowed(b, i, j) ? L.scale * dot(q, L.k_at(b, j, h), L.head_dim) : -std::numeric_limits<float>::infinity();
            max = std::max(max, p[j]);
        }
        if (max == -std::numeric_limits<float>::infinity()) continue;
        float sum = 0.0f;
        for (int64_t j = 0; j < L.kv_len; ++j) {
            p[j] = std::exp(p[j] - max);
            sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < L.kv_len; ++j) {
            const float weight = p[j] * inv * F.factor(b, h, i, j);
            if (weight != 0.0f) axpy(weight, L.v_at(b, j, h), y, L.head_dim);
        }
    }
}

template <decltype(&kernels::attend) kernel, decltype(&attend_with_dropout_ref) with_dropout>
void run_sequence_attention(const Graph& g, const Node& n, const ExecContext& ctx) {
    if (n.param<SequenceAttentionParams>().dropout > 0.0f) return with_dropout(g, n, ctx);
    const Layout L(g, n);
    const auto [i0, i1] = split_range(L.batch * L.q_len * L.heads, ctx.ith, ctx.nth);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t h = item % L.heads, row = item / L.heads;
        const int64_t b = row / L.q_len, i = row % L.q_len;
        kernel(L.q_at(b, i, h), L.k_at(b, 0, h), static_cast<size_t>(L.k->shape.ne[0]), L.v_at(b, 0, h),
               static_cast<size_t>(L.v->shape.ne[0]), L.visible(i), L.head_dim, L.scale, L.valid(b),
               n.row(row) + h * L.head_dim, ctx.scratch, 0.0f, 0);
    }
}

size_t forward_scratch(const Graph& g, const Node& n) {
    return kernels::attend_block_scratch(Layout(g, n).kv_len);  // at least kv_len: the dropout path's too
}

// Output rows of the gradient node: dq, then dk, then dv (of key/value head kvh).
struct GradRows {
    const Node& out;
    const Layout& L;
    float* dq(int64_t b, int64_t i, int64_t h) const { return out.row(b * L.q_len + i) + h * L.head_dim; }
    float* dk(int64_t b, int64_t j, int64_t kvh) const {
        return out.row(L.batch * L.q_len + b * L.kv_len + j) + kvh * L.head_dim;
    }
    float* dv(int64_t b, int64_t j, int64_t kvh) const {
        return out.row(L.batch * (L.q_len + L.kv_len) + b * L.kv_len + j) + kvh * L.head_dim;
    }
};

// The plain reference: every sum in double, straight from the formulas. One
// work item is a (sequence, key/value head): the query heads of its group add
// their dK and dV into the same rows.
void sequence_attention_grad_ref(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Layout L(g, n);
    const DropMask F(g, n.param<SequenceAttentionParams>(), L.q_len, L.kv_len);
    const Node& grad = g.node(n.src[kGrad]);
    const GradRows out{n, L};
    const int64_t T = L.q_len, S = L.kv_len, D = L.head_dim;
    std::vector<double> P(static_cast<size_t>(T * S)), dS(static_cast<size_t>(T * S));
    std::vector<double> dK(static_cast<size_t>(S * D)), dV(static_cast<size_t>(S * D));
    const auto [i0, i1] = split_range(L.batch * L.kv_heads, ctx.ith, ctx.nth);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t b = item / L.kv_heads, kvh = item % L.kv_heads;
        std::fill(dK.begin(), dK.end(), 0.0);
        std::fill(dV.begin(), dV.end(), 0.0);
        for (int64_t h = kvh * L.group; h < (kvh + 1) * L.group; ++h) {
            const auto dO = [&](int64_t i) { return grad.row(b * T + i) + h * D; };
            for (int64_t i = 0; i < T; ++i) {
                double max = -std::numeric_limits<double>::infinity();
                for (int64_t j = 0; j < S; ++j) {
                    double s = -std::numeric_limits<double>::infinity();
                    if (L.allowed(b, i, j)) {
                        s = 0.0;
                        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(L.q_at(b, i, h)[d]) * L.k_at(b, j, h)[d];
                        s *= L.scale;
                    }
                    P[i * S + j] = s;
                    max = std::max(max, s);
                }
                double sum = 0.0;
                for (int64_t j = 0; j < S; ++j) {
                    P[i * S + j] = max == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(P[i * S + j] - max);
                    sum += P[i * S + j];
                }
                for (int64_t j = 0; j < S; ++j) P[i * S + j] = sum > 0.0 ? P[i * S + j] / sum : 0.0;
                double row = 0.0;
                for (int64_t j = 0; j < S; ++j) {
                    double dp = 0.0;
                    for (int64_t d = 0; d < D; ++d) dp += static_cast<double>(dO(i)[d]) * L.v_at(b, j, h)[d];
                    if (F.enabled()) dp *= F.factor(b, h, i, j);
                    dS[i * S + j] = dp;
                    row += P[i * S + j] * dp;
                }
                for (int64_t j = 0; j < S; ++j) dS[i * S + j] = P[i * S + j] * (dS[i * S + j] - row);
            }
            for (int64_t i = 0; i < T; ++i)
                for (int64_t d = 0; d < D; ++d) {
                    double s = 0.0;
                    for (int64_t j = 0; j < S; ++j) s += dS[i * S + j] * L.k_at(b, j, h)[d];
                    out.dq(b, i, h)[d] = static_cast<float>(s * L.scale);
                }
            for (int64_t j = 0; j < S; ++j)
                for (int64_t d = 0; d < D; ++d)
                    for (int64_t i = 0; i < T; ++i) {
                        dK[j * D + d] += dS[i * S + j] * L.q_at(b, i, h)[d];
                        dV[j * D + d] += P[i * S + j] * (F.enabled() ? F.factor(b, h, i, j) : 1.0) * dO(i)[d];
                    }
        }
        for (int64_t j = 0; j < S; ++j)
            for (int64_t d = 0; d < D; ++d) {
                out.dk(b, j, kvh)[d] = static_cast<float>(dK[j * D + d] * L.scale);
                out.dv(b, j, kvh)[d] = static_cast<float>(dV[j * D + d]);
            }
    }
}

// The fast path: float dot products in SIMD lanes, masked keys skipped (their
// probability is exactly 0), products as axpy rows over head_dim.
void sequence_attention_grad_fast(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Layout L(g, n);
    const DropMask F(g, n.param<SequenceAttentionParams>(), L.q_len, L.kv_len);
    const Node& grad = g.node(n.src[kGrad]);
    const GradRows out{n, L};
    const int64_t T = L.q_len, S = L.kv_len, D = L.head_dim;
    float* P = ctx.scratch;
    float* dS = ctx.scratch + T * S;
    // One work item is a (sequence, key/value head); the query heads of its
    // group add their dK and dV into the same rows, one head after the other.
    const auto [i0, i1] = split_range(L.batch * L.kv_heads, ctx.ith, ctx.nth);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t b = item / L.kv_heads, kvh = item % L.kv_heads;
        const uint8_t* ok = L.valid(b);
        for (int64_t j = 0; j < S; ++j) {
            std::fill(out.dk(b, j, kvh), out.dk(b, j, kvh) + D, 0.0f);
            std::fill(out.dv(b, j, kvh), out.dv(b, j, kvh) + D, 0.0f);
        }
        for (int64_t h = kvh * L.group; h < (kvh + 1) * L.group; ++h) {
        for (int64_t i = 0; i < T; ++i) {
            float* p = P + i * S;
            float* ds = dS + i * S;
            const float* q = L.q_at(b, i, h);
            const float* dO = grad.row(b * T + i) + h * D;
            const int64_t visible = L.visible(i);
            float max = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < S; ++j) {
                const bool allowed = j < visible && (ok == nullptr || ok[j] != 0);
                p[j] = allowed ? L.scale * dot(q, L.k_at(b, j, h), D) : -std::numeric_limits<float>::infinity();
                max = std::max(max, p[j]);
            }
            if (max == -std::numeric_limits<float>::infinity()) {
                std::fill(p, p + S, 0.0f);
                std::fill(ds, ds + S, 0.0f);
                continue;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < S; ++j) {
                p[j] = std::exp(p[j] - max);
                sum += p[j];
            }
            const float inv = 1.0f / sum;
            float row = 0.0f;
            for (int64_t j = 0; j < S; ++j) {
                p[j] *= inv;
                ds[j] = p[j] == 0.0f ? 0.0f : dot(dO, L.v_at(b, j, h), D);
                if (F.enabled()) ds[j] *= F.factor(b, h, i, j);
                row += p[j] * ds[j];
            }
            for (int64_t j = 0; j < S; ++j) ds[j] = p[j] * (ds[j] - row) * L.scale;
            // dS is done: from here on P holds the dropped probabilities (for dV).
            if (F.enabled())
                for (int64_t j = 0; j < S; ++j) p[j] *= F.factor(b, h, i, j);
        }
        for (int64_t i = 0; i < T; ++i) {
            float* dq = out.dq(b, i, h);
            std::fill(dq, dq + D, 0.0f);
            for (int64_t j = 0; j < S; ++j)
                if (dS[i * S + j] != 0.0f) axpy(dS[i * S + j], L.k_at(b, j, h), dq, D);
        }
        for (int64_t j = 0; j < S; ++j) {
            float* dk = out.dk(b, j, kvh);
            float* dv = out.dv(b, j, kvh);
            for (int64_t i = 0; i < T; ++i) {
                if (dS[i * S + j] != 0.0f) axpy(dS[i * S + j], L.q_at(b, i, h), dk, D);
                if (P[i * S + j] != 0.0f) axpy(P[i * S + j], grad.row(b * T + i) + h * D, dv, D);
            }
        }
        }
    }
}

size_t grad_scratch(const Graph& g, const Node& n) {
    const Layout L(g, n);
    return static_cast<size_t>(2 * L.q_len * L.kv_len);
}

Sources sequence_attention_backward(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted) {
    const Node& n = g.node(node);
    const Layout L(g, n);
    const NodeId all = ops::sequence_attention_grad(g, node, grad);
    Sources out = ops::detail::no_gradients();
    const int64_t q_rows = L.batch * L.q_len, kv_rows = L.batch * L.kv_len;
    // dK and dV fill the first kv_heads * head_dim columns of their rows.
    const auto kv_part = [&](int64_t first) {
        const NodeId rows = ops::slice_rows(g, all, first, kv_rows);
        return L.kv_heads == L.heads ? rows : ops::slice_columns(g, rows, 0, L.kv_heads * L.head_dim);
    };
    if (wanted[kQuery]) out[kQuery] = ops::slice_rows(g, all, 0, q_rows);
    if (wanted[kKeys]) out[kKeys] = kv_part(q_rows);
    if (wanted[kValues]) out[kValues] = kv_part(q_rows + kv_rows);
    return out;
}

}  // namespace

namespace ops {

NodeId sequence_attention(Graph& g, NodeId q, NodeId k, NodeId v, NodeId key_mask, int64_t n_heads, int64_t n_kv_heads,
                          int64_t head_dim, int64_t batch, bool causal, float dropout, NodeId dropout_seed) {
    const OpKind op = OpKind::SequenceAttention;
    const Node& qn = g.node(q);
    const Node& kn = g.node(k);
    const Node& vn = g.node(v);
    require_type(op, qn, DType::F32, "the queries");
    require_type(op, kn, DType::F32, "the keys");
    require_type(op, vn, DType::F32, "the values");
    if (n_heads < 1 || head_dim < 1 || batch < 1) shape_error(op, "{} heads of {} in {} sequences", n_heads, head_dim, batch);
    if (n_kv_heads < 1 || n_heads % n_kv_heads != 0)
        shape_error(op, "{} query heads cannot share {} key/value heads", n_heads, n_kv_heads);
    const int64_t width = n_heads * head_dim, kv_width = n_kv_heads * head_dim;
    if (qn.shape.ne[0] != width || kn.shape.ne[0] != kv_width || vn.shape.ne[0] != kv_width)
        shape_error(op, "q {} is not {} heads of {}, or k {}, v {} not {} heads", qn.shape.str(), n_heads, head_dim,
                    kn.shape.str(), vn.shape.str(), n_kv_heads);
    if (qn.shape.rank > 2 || kn.shape.rank > 2 || !(kn.shape == vn.shape))
        shape_error(op, "keys {} and values {} must be matrices of one shape", kn.shape.str(), vn.shape.str());
    if (qn.shape.rows() % batch != 0 || kn.shape.rows() % batch != 0)
        shape_error(op, "{} query rows and {} key rows are not {} sequences", qn.shape.rows(), kn.shape.rows(), batch);
    const int64_t q_len = qn.shape.rows() / batch, kv_len = kn.shape.rows() / batch;
    if (causal && q_len != kv_len) shape_error(op, "causal attention needs as many keys ({}) as queries ({})", kv_len, q_len);
    if (key_mask != kNoNode) {
        const Node& m = g.node(key_mask);
        require_type(op, m, DType::I8, "the key mask");
        if (m.shape.ne[0] != kv_len || m.shape.rows() != batch)
            shape_error(op, "key mask {} is not [{}, {}]", m.shape.str(), kv_len, batch);
    }
    if (!(dropout >= 0.0f && dropout < 1.0f)) shape_error(op, "dropout probability {} is outside [0, 1)", dropout);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    if (dropout == 0.0f) {
        SequenceAttentionParams params{n_heads, head_dim, batch, causal, scale};
        params.n_kv_heads = n_kv_heads;
        return g.add(op, DType::F32, qn.shape, {q, k, v, key_mask}, params);
    }
    // The seed must keep its buffer for the gradient node, which reads it
    // through the parameters: an Input (never placed in the arena).
    if (dropout_seed == kNoNode || g.node(dropout_seed).op != OpKind::Input)
        shape_error(op, "attention dropout needs a seed input");
    require_type(op, g.node(dropout_seed), DType::I32, "the dropout seed");
    if (g.node(dropout_seed).shape.elements() != 2 && g.node(dropout_seed).shape.elements() != 4)
        shape_error(op, "the dropout seed {} must be 2 or 4 values", g.node(dropout_seed).shape.str());
    // The salt: the node's own index, so that every attention node of a graph
    // draws its own masks from the one seed.
    const auto salt = static_cast<uint64_t>(g.size());
    SequenceAttentionParams params{n_heads, head_dim, batch, causal, scale, dropout, dropout_seed, salt};
    params.n_kv_heads = n_kv_heads;
    return g.add(op, DType::F32, qn.shape, {q, k, v, key_mask, dropout_seed}, params);
}

NodeId sequence_attention_grad(Graph& g, NodeId attention, NodeId grad) {
    const OpKind op = OpKind::SequenceAttentionGrad;
    const Node& a = g.node(attention);
    if (a.op != OpKind::SequenceAttention) shape_error(op, "the first source must be a sequence_attention node");
    require_type(op, g.node(grad), DType::F32, "the gradient");
    if (!(g.node(grad).shape == a.shape))
        shape_error(op, "gradient {} does not match the output {}", g.node(grad).shape.str(), a.shape.str());
    const int64_t rows = a.shape.rows() + 2 * g.node(a.src[kKeys]).shape.rows();
    return g.add(op, DType::F32, Shape::of({a.shape.ne[0], rows}),
                 {a.src[kQuery], a.src[kKeys], a.src[kValues], a.src[kMask], grad}, a.params);
}

}  // namespace ops

namespace ops::defs {
extern const OpDef kSequenceAttention{OpKind::SequenceAttention, MemoryEffects::Unchecked,
                                   run_sequence_attention<kernels::attend, attend_with_dropout_fast>,
                                   run_sequence_attention<kernels::ref::attend, attend_with_dropout_ref>, forward_scratch,
                                   sequence_attention_backward};
extern const OpDef kSequenceAttentionGrad{OpKind::SequenceAttentionGrad, MemoryEffects::Unchecked, sequence_attention_grad_fast, sequence_attention_grad_ref,
                                       grad_scratch};
}  // namespace ops::defs

}  // namespace kiln
