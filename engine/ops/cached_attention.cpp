// The KV cache write and causal (grouped-query) attention over the cache.
// Keys and values each have their own cache type: F32, F16, BF16, Q8_0 or
// Q4_0 (ggml's layouts). New rows are rounded or quantized as they are
// written; attention reads the stored rows directly (the fast kernel widens or
// dequantizes each element as it loads it; the reference widens a head's rows
// into scratch with the types' reference conversions first), so the kernels
// see exactly the values an F32 cache holding the rounded rows would hold.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/core/half.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/convert.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln {
namespace {

using ops::detail::require_type;
using ops::detail::shape_error;

// Sources of an attention node.
enum AttentionSource { kQuery = 0, kKeys = 1, kValues = 2, kPositions = 3, kMask = 4 };

bool block_type(DType t) noexcept { return type_traits(t).block_size > 1; }

// Bytes from a cache row's start to element `first` (a multiple of the block size).
size_t offset_bytes(DType t, int64_t first) noexcept {
    const TypeTraits& tt = type_traits(t);
    return static_cast<size_t>(first / tt.block_size) * tt.block_bytes;
}

// Positions were validated by the model; one outside the cache is skipped
// rather than written out of bounds. F16 rows are rounded to nearest even:
// the fast path with F16C, the reference with the scalar conversion (the same
// bits). BF16, Q8_0 and Q4_0 rows go through the reference conversions of
// engine/quant (ggml's quantize_row_*_ref): a row is written once per token
// and layer, next to the matrix products that made it.
template <bool Fast>
void run_store_kv(const Graph& g, const Node& n, const ExecContext& ctx) {
    const Node& cache = g.node(n.src[0]);
    const Node& x = g.node(n.src[1]);
    const int32_t* positions = g.node(n.src[2]).row<int32_t>(0);
    const int64_t width = x.shape.ne[0];
    const FromFloatFn convert = type_traits(cache.type).from_float_ref;
    const auto [r0, r1] = split_range(x.shape.rows(), ctx.ith, ctx.nth);
    for (int64_t r = r0; r < r1; ++r) {
        if (positions[r] < 0 || positions[r] >= cache.shape.rows()) continue;
        if (cache.type == DType::F32) {
            std::memcpy(cache.row<std::byte>(positions[r]), x.row<std::byte>(r), x.row_bytes);
        } else if (cache.type == DType::F16 && Fast) {
            kernels::fp32_to_fp16_row(x.row(r), cache.row<uint16_t>(positions[r]), width);
        } else {
            convert(x.row(r), cache.row<std::byte>(positions[r]), width);
        }
    }
}

// For the reference path: one key/value head of a cache as float rows, an F32
// cache's own rows, or another type's rows widened or dequantized (by the
// type's reference conversion) into the thread's scratch as they are first needed.
class HeadRows {
public:
    HeadRows(const Node& cache, int64_t head_dim, float* scratch) noexcept
        : cache_(cache), head_dim_(head_dim), scratch_(scratch) {}

    // Rows [0, n) of head `head`: returns the first row; stride() floats apart.
    const float* rows(int64_t head, int64_t n) noexcept {
        if (cache_.type == DType::F32) return cache_.row(0) + head * head_dim_;
        if (head != head_) head_ = head, widened_ = 0;
        const ToFloatFn to_float = type_traits(cache_.type).to_float;
        const size_t offset = offset_bytes(cache_.type, head * head_dim_);
        for (; widened_ < n; ++widened_)
            to_float(cache_.row<std::byte>(widened_) + offset, scratch_ + widened_ * head_dim_, head_dim_);
        return scratch_;
    }
    size_t stride() const noexcept {
        return static_cast<size_t>(cache_.type == DType::F32 ? cache_.shape.ne[0] : head_dim_);
    }
    // Scratch floats a cache of this type needs.
    static size_t scratch_floats(const Node& cache, int64_t head_dim) noexcept {
        return cache.type == DType::F32 ? 0 : static_cast<size_t>(cache.shape.rows() * head_dim);
    }

private:
    const Node& cache_;
    int64_t head_dim_;
    float* scratch_;
    int64_t head_ = -1, widened_ = 0;
};

struct AttentionInputs {
    const Node& q;
    const Node& k;
    const Node& v;
    const int32_t* positions;
    const Node* mask;
    const CachedAttentionParams& p;

    AttentionInputs(const Graph& g, const Node& n)
        : q(g.node(n.src[kQuery])),
          k(g.node(n.src[kKeys])),
          v(g.node(n.src[kValues])),
          positions(g.node(n.src[kPositions]).row<int32_t>(0)),
          mask(n.src[kMask] == kNoNode ? nullptr : &g.node(n.src[kMask])),
          p(n.param<CachedAttentionParams>()) {}

    // Token t attends to cache rows [0, kv_len(t)), those its mask row allows.
    int64_t kv_len(int64_t t) const noexcept {
        return std::clamp<int64_t>(int64_t{positions[t]} + 1, 0, k.shape.rows());
    }
    // The first row in token t's sliding window (0 without one).
    int64_t kv_start(int64_t t) const noexcept {
        return p.window > 0 ? std::max<int64_t>(0, int64_t{positions[t]} - p.window + 1) : 0;
    }
    const uint8_t* valid(int64_t t) const noexcept {
        return mask == nullptr ? nullptr : mask->row<uint8_t>(mask->shape.rows() == 1 ? 0 : t);
    }
};

// A thread's scratch: the kernel's, then the widened key rows and the widened
// value rows of one head (caches other than F32 only).
size_t kernel_scratch_floats(const Node& keys) noexcept { return kernels::attend_block_scratch(keys.shape.rows()); }

struct WidenedHeads {
    HeadRows k, v;
    WidenedHeads(const AttentionInputs& in, float* scratch)
        : k(in.k, in.p.head_dim, scratch + kernel_scratch_floats(in.k)),
          v(in.v, in.p.head_dim, scratch + kernel_scratch_floats(in.k) + HeadRows::scratch_floats(in.k, in.p.head_dim)) {}
};

// The scalar reference: one query at a time, work split over (token, head).
void run_attention_reference(const Graph& g, const Node& n, const ExecContext& ctx) {
    const AttentionInputs in(g, n);
    const CachedAttentionParams& p = in.p;
    const int64_t group = p.n_heads / p.n_kv_heads;
    WidenedHeads heads(in, ctx.scratch);
    const auto [i0, i1] = split_range(in.q.shape.rows() * p.n_heads, ctx.ith, ctx.nth);
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t t = item / p.n_heads, h = item % p.n_heads, kv_head = h / group;
        const int64_t kv_len = in.kv_len(t);
        const float* keys = heads.k.rows(kv_head, kv_len);
        const float* values = heads.v.rows(kv_head, kv_len);
        kernels::ref::attend(in.q.row(t) + h * p.head_dim, keys, heads.k.stride(), values, heads.v.stride(), kv_len,
                             p.head_dim, p.scale, in.valid(t), n.row(t) + h * p.head_dim, ctx.scratch, p.softcap,
                             in.kv_start(t));
    }
}

// The first j in [from, end) with valid[j] != 0, or end: eight mask bytes at
// a time over the (long) runs of another sequence's rows.
int64_t first_allowed(const uint8_t* valid, int64_t from, int64_t end) noexcept {
    int64_t j = from;
    for (uint64_t word = 0; j + 8 <= end; j += 8) {
        std::memcpy(&word, valid + j, sizeof word);
        if (word != 0) break;
    }
    while (j < end && valid[j] == 0) ++j;
    return j;
}

// The fast path: the queries reading one key/value head, in (token, head of
// the group) order, go to attend_block kMaxBlockQueries at a time, so each
// chunk of key and value rows is loaded once per block instead of once per
// query.
//
// With a mask (several sequences in one cache, as the server's slots are),
// each token's keys start at its mask's first allowed row rather than row 0:
// the rows before belong to other sequences, and the kernel skips the chunks
// a query cannot reach instead of scoring them to drop the scores.
struct AttentionBlocks {
    const AttentionInputs& in;
    const Node& out;
    int64_t group, per_head, blocks;
    std::vector<int64_t> first_key;  // per token: kv_start, or its mask's first allowed row after it
    // Per token: its mask (if any), or null when the mask allows every row of
    // [first_key, kv_len). A batched step's tokens each see one slot's rows,
    // contiguous, and the kernel's unmasked path (keys used by every query of
    // a tile) is far faster than checking each key: the same keys, the same bits.
    std::vector<const uint8_t*> mask_of;

    AttentionBlocks(const AttentionInputs& inputs, const Node& n)
        : in(inputs),
          out(n),
          group(in.p.n_heads / in.p.n_kv_heads),
          per_head(in.q.shape.rows() * group),
          blocks((per_head + kernels::kMaxBlockQueries - 1) / kernels::kMaxBlockQueries),
          first_key(static_cast<size_t>(in.q.shape.rows())),
          mask_of(static_cast<size_t>(in.q.shape.rows())) {
        for (int64_t t = 0; t < in.q.shape.rows(); ++t) {
            int64_t j = in.kv_start(t);
            const uint8_t* valid = in.valid(t);
            if (valid != nullptr) {
                j = first_allowed(valid, j, in.kv_len(t));
                if (std::find(valid + j, valid + std::max(j, in.kv_len(t)), uint8_t{0}) == valid + std::max(j, in.kv_len(t)))
                    valid = nullptr;  // every row from the first allowed one on is allowed
            }
            first_key[static_cast<size_t>(t)] = j;
            mask_of[static_cast<size_t>(t)] = valid;
        }
    }

    int64_t items() const noexcept { return in.p.n_kv_heads * blocks; }
    int64_t max_kv_len() const noexcept {
        int64_t n = 0;
        for (int64_t t = 0; t < in.q.shape.rows(); ++t) n = std::max(n, in.kv_len(t));
        return n;
    }
    // The queries of item `item` (block item % blocks of head item / blocks); returns how many.
    int item_queries(int64_t item, kernels::AttentionQuery* q) const noexcept {
        return queries(item / blocks, item % blocks, q);
    }
    // The queries of block b of head kv_head; returns how many.
    int queries(int64_t kv_head, int64_t b, kernels::AttentionQuery* q) const noexcept {
        int nq = 0;
        for (int64_t i = b * kernels::kMaxBlockQueries; i < std::min(per_head, (b + 1) * kernels::kMaxBlockQueries); ++i) {
            const int64_t t = i / group, h = kv_head * group + i % group;
            q[nq++] = {in.q.row(t) + h * in.p.head_dim, in.kv_len(t), mask_of[static_cast<size_t>(t)],
                       out.row(t) + h * in.p.head_dim, first_key[static_cast<size_t>(t)]};
        }
        return nq;
    }
    kernels::CacheHead head_of(const Node& cache, int64_t kv_head) const noexcept {
        return kernels::CacheHead{cache.row<std::byte>(0) + offset_bytes(cache.type, kv_head * in.p.head_dim),
                                  static_cast<size_t>(cache.shape.ne[0]), cache.type};
    }
};

// A decode step (a few query rows) over a long cache is split by chunks of
// keys rather than by heads: each thread takes a contiguous range of chunks
// and, within each chunk, every (head, query block) item in turn
// (kernels::attend_chunk), so it walks the cache rows in memory order, all
// heads of a row together; a split by heads reads each head's slice of every
// row (a quarter of each 512-byte F16 row for TinyLlama) in its own pass. With
// the caches out of the last-level cache (kiln-attention-bench --layers 22,
// depth 4096, one thread, on a 2-core EPYC VM that scatters by tens of
// percent) the chunk split took 1,060-1,460 us per layer against 1,614 for the
// head split, and a decode step at depth 4096 of the 1.1B Q4_K_M model ran 7-23%
// faster with it and the grouped score tile together. The threads' partial results are
// folded afterwards (merge_attention_chunks) with the bits attend_block gives.
// Only for a few query rows, which bounds the shared scratch the partials need.
constexpr int64_t kSplitMaxRows = 4;

// Queries per block (the partials' slots): fewer than kMaxBlockQueries when
// the step has fewer queries per key/value head.
int64_t block_slots(int64_t per_head) noexcept { return std::min<int64_t>(kernels::kMaxBlockQueries, per_head); }

size_t split_partials_doubles(const Node& q, const Node& k, const CachedAttentionParams& p) noexcept {
    if (q.shape.rows() > kSplitMaxRows) return 0;
    const int64_t per_head = q.shape.rows() * (p.n_heads / p.n_kv_heads);
    const int64_t blocks = (per_head + kernels::kMaxBlockQueries - 1) / kernels::kMaxBlockQueries;
    const int64_t chunks = (k.shape.rows() + kernels::kAttentionChunk - 1) / kernels::kAttentionChunk;
    return static_cast<size_t>(p.n_kv_heads * blocks * chunks * block_slots(per_head)) *
           kernels::attention_partial_doubles(p.head_dim);
}

bool split_by_chunks(const AttentionBlocks& ab, const ExecContext& ctx) noexcept {
    if (ctx.shared == nullptr || ctx.pool == nullptr) return false;
    return split_partials_doubles(ab.in.q, ab.in.k, ab.in.p) > 0 && ab.max_kv_len() > 2 * kernels::kAttentionChunk;
}

// Units (chunk, item) are split evenly over the threads, chunk-major; each
// writes its queries' partials to ctx.shared: [item][chunk][query slot].
// After a barrier, the queries are split over the threads, each folding its
// chunks.
void run_attention_split(const AttentionBlocks& ab, const ExecContext& ctx) {
    const CachedAttentionParams& p = ab.in.p;
    const int64_t chunks = (ab.max_kv_len() + kernels::kAttentionChunk - 1) / kernels::kAttentionChunk;
    const size_t pd = kernels::attention_partial_doubles(p.head_dim);
    const int64_t slots = block_slots(ab.per_head);
    const size_t chunk_stride = static_cast<size_t>(slots) * pd;
    const size_t item_stride = static_cast<size_t>(chunks) * chunk_stride;
    // Another node's fold may still read the shared scratch: the executor
    // elides barriers between independent nodes.
    ctx.pool->barrier();
    const auto [u0, u1] = split_range(ab.items() * chunks, ctx.ith, ctx.nth);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t c = u / ab.items(), item = u % ab.items(), kv_head = item / ab.blocks;
        kernels::AttentionQuery queries[kernels::kMaxBlockQueries];
        const int nq = ab.item_queries(item, queries);
        kernels::attend_chunk(queries, nq, ab.head_of(ab.in.k, kv_head), ab.head_of(ab.in.v, kv_head), p.head_dim,
                              p.scale, c, ctx.shared + static_cast<size_t>(item) * item_stride + c * chunk_stride,
                              ctx.scratch, p.softcap);
    }
    ctx.pool->barrier();
    const auto [o0, o1] = split_range(ab.items() * slots, ctx.ith, ctx.nth);
    for (int64_t o = o0; o < o1; ++o) {
        const int64_t item = o / slots, i = o % slots;
        kernels::AttentionQuery queries[kernels::kMaxBlockQueries];
        if (i >= ab.item_queries(item, queries)) continue;
        kernels::merge_attention_chunks(ctx.shared + static_cast<size_t>(item) * item_stride + static_cast<size_t>(i) * pd,
                                        chunks, chunk_stride, p.head_dim, queries[i].out);
    }
}

// Otherwise each thread takes whole blocks. A causal prompt's later tokens
// read more keys, so blocks are handed out by cost (the keys from each
// token's first allowed row to its position)
// rather than by count: with equal counts the thread holding the last tokens
// did about three times the work of the other.
void run_attention_blocks(const Graph& g, const Node& n, const ExecContext& ctx) {
    const AttentionInputs in(g, n);
    const AttentionBlocks ab(in, n);
    if (split_by_chunks(ab, ctx)) return run_attention_split(ab, ctx);
    const CachedAttentionParams& p = in.p;
    constexpr int64_t kBlock = kernels::kMaxBlockQueries;
    constexpr int64_t kBlockOverhead = 16;  // in keys: the per-block work that does not scale with them
    const auto cost = [&](int64_t b) {
        int64_t keys = kBlockOverhead;
        for (int64_t i = b * kBlock; i < std::min(ab.per_head, (b + 1) * kBlock); ++i) {
            const int64_t t = i / ab.group;
            keys += std::max<int64_t>(0, in.kv_len(t) - ab.first_key[static_cast<size_t>(t)]);
        }
        return keys;
    };
    int64_t per_head_cost = 0;
    for (int64_t b = 0; b < ab.blocks; ++b) per_head_cost += cost(b);
    const int64_t total = per_head_cost * p.n_kv_heads;
    const int64_t lo = total * ctx.ith / ctx.nth, hi = total * (ctx.ith + 1) / ctx.nth;

    int64_t start = 0;
    for (int64_t kv_head = 0; kv_head < p.n_kv_heads && start < hi; ++kv_head) {
        for (int64_t b = 0; b < ab.blocks && start < hi; ++b) {
            const int64_t c = cost(b);
            const bool mine = start >= lo;
            start += c;
            if (!mine) continue;
            kernels::AttentionQuery queries[kBlock];
            const int nq = ab.queries(kv_head, b, queries);
            kernels::attend_block(queries, nq, ab.head_of(in.k, kv_head), ab.head_of(in.v, kv_head), p.head_dim,
                                  p.scale, ctx.scratch, p.softcap);
        }
    }
}

size_t attention_shared_doubles(const Graph& g, const Node& n) {
    return split_partials_doubles(g.node(n.src[kQuery]), g.node(n.src[kKeys]), n.param<CachedAttentionParams>());
}

size_t attention_scratch(const Graph& g, const Node& n) {
    const Node& k = g.node(n.src[kKeys]);
    const int64_t head_dim = n.param<CachedAttentionParams>().head_dim;
    return kernel_scratch_floats(k) + HeadRows::scratch_floats(k, head_dim) +
           HeadRows::scratch_floats(g.node(n.src[kValues]), head_dim);
}

}  // namespace

namespace ops {

NodeId store_kv(Graph& g, NodeId cache, NodeId x, NodeId positions) {
    const Node& c = g.node(cache);
    const Node& xn = g.node(x);
    if (c.op != OpKind::State && c.op != OpKind::StoreKV)
        shape_error(OpKind::StoreKV, "the cache must be a state node");
    require_type(OpKind::StoreKV, xn, DType::F32, "the rows");
    if (!kernels::attention_cache_type(c.type))
        shape_error(OpKind::StoreKV, "a cache of type {} is not supported (f32, f16, bf16, q8_0 and q4_0 are)",
                    dtype_name(c.type));
    require_type(OpKind::StoreKV, g.node(positions), DType::I32, "the positions");
    if (xn.shape.ne[0] != c.shape.ne[0])
        shape_error(OpKind::StoreKV, "rows {} do not fit the cache {}", xn.shape.str(), c.shape.str());
    if (g.node(positions).shape.elements() != xn.shape.rows())
        shape_error(OpKind::StoreKV, "{} positions for {} rows", g.node(positions).shape.elements(), xn.shape.rows());
    return g.add(OpKind::StoreKV, c.type, c.shape, {cache, x, positions});
}

NodeId cached_attention(Graph& g, NodeId q, NodeId k_cache, NodeId v_cache, NodeId positions, NodeId mask, int64_t n_heads,
                        int64_t n_kv_heads, int64_t head_dim, const AttentionOptions& options) {
    const OpKind op = OpKind::CachedAttention;
    const Node& qn = g.node(q);
    const Node& kn = g.node(k_cache);
    const Node& vn = g.node(v_cache);
    require_type(op, qn, DType::F32, "the queries");
    for (const Node* cache : {&kn, &vn}) {
        if (!kernels::attention_cache_type(cache->type))
            shape_error(op, "a cache of type {} is not supported (f32, f16, bf16, q8_0 and q4_0 are)",
                        dtype_name(cache->type));
        // A head must be whole blocks: the kernel addresses it by its first block.
        const int64_t block = type_traits(cache->type).block_size;
        if (block_type(cache->type) && head_dim % block != 0)
            shape_error(op, "a {} cache needs a head size that is a multiple of {}, got {}", dtype_name(cache->type),
                        block, head_dim);
    }
    require_type(op, g.node(positions), DType::I32, "the positions");
    if (n_heads < 1 || n_kv_heads < 1 || head_dim < 1 || n_heads % n_kv_heads != 0)
        shape_error(op, "{} query heads cannot share {} key/value heads", n_heads, n_kv_heads);
    if (qn.shape.ne[0] != n_heads * head_dim)
        shape_error(op, "queries {} are not {} heads of {}", qn.shape.str(), n_heads, head_dim);
    if (kn.shape.ne[0] != n_kv_heads * head_dim || kn.shape.ne[0] != vn.shape.ne[0] ||
        kn.shape.rows() != vn.shape.rows())
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
    if (!(options.scale >= 0.0f) || !(options.softcap >= 0.0f) || options.window < 0)
        shape_error(op, "scale {}, soft cap {} and window {} must not be negative", options.scale, options.softcap,
                    options.window);
    const float scale = options.scale > 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
    return g.add(op, DType::F32, qn.shape, {q, k_cache, v_cache, positions, mask},
                 CachedAttentionParams{n_heads, n_kv_heads, head_dim, scale, options.softcap, options.window});
}

}  // namespace ops

namespace ops::defs {
// OwnData holds for attention's split form too: the shared scratch it writes
// is fenced by its own barriers (run_attention_split).
extern const OpDef kStoreKV{OpKind::StoreKV, MemoryEffects::OwnData, run_store_kv<true>, run_store_kv<false>};
extern const OpDef kCachedAttention{OpKind::CachedAttention, MemoryEffects::OwnData, run_attention_blocks,
                                    run_attention_reference, attention_scratch, nullptr, nullptr,
                                    attention_shared_doubles};
}  // namespace ops::defs

}  // namespace kiln
