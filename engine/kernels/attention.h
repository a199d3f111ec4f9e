#pragma once
// Scaled dot-product attention of one query head over cached keys and values.
#include <cstddef>
#include <cstdint>

#include "engine/core/dtype.h"

namespace kiln::kernels {

// out[d] = Σ_j p_j v_j[d] with p = softmax_j(s_j), s_j = scale · q·k_j, over
// the kv positions j in [kv_start, kv_len) for which kv_valid[j] != 0 (kv_valid
// may be null: all valid). Causal masking is the caller's choice of kv_len, a
// sliding window its choice of kv_start. With softcap > 0 the scores are
// capped first: s_j -> softcap · tanh(s_j / softcap) (Gemma 2). Key j starts at
// k + j*k_stride, value j at v + j*v_stride (strides in floats). When no
// position is valid the output is all zeros, never NaN. scratch holds
// attend_block_scratch(kv_len) floats.
void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch, float softcap = 0.0f,
            int64_t kv_start = 0) noexcept;

// A block of queries that read the same key/value head (consecutive tokens of
// one head, or the heads of one grouped-query group): each chunk of keys and
// values is loaded once for all of them. Each query has its own kv_len and mask.
struct AttentionQuery {
    const float* q;
    int64_t kv_len;
    const uint8_t* kv_valid;  // may be null: all valid
    float* out;
    int64_t kv_start = 0;     // keys before it are outside the query's window
};
constexpr int kMaxBlockQueries = 16;

// Keys are taken a chunk at a time (FlashAttention's tiling with an online
// softmax): chunk c holds keys [c * kAttentionChunk, (c + 1) * kAttentionChunk).
// A chunk's scores are exponentiated against the chunk's own maximum and its
// value rows summed with those weights, giving per query a partial result
// (max m_c, Σ exp(s - m_c), Σ exp(s - m_c) v); the partials are folded into
// the query's running result in chunk order, rescaled to the larger maximum.
// So no buffer grows with the cache, a chunk of keys and values is read once
// for every query of a block, and the chunks of one query can be computed by
// different threads (attend_chunk) and folded afterwards
// (merge_attention_chunks) with the same bits as attend_block.
constexpr int64_t kAttentionChunk = 256;

// Same results as attend() on each query alone, bit for bit, whatever the
// block it is in. scratch holds attend_block_scratch(max kv_len) floats.
void attend_block(const AttentionQuery* queries, int n_queries, const float* k, size_t k_stride, const float* v,
                  size_t v_stride, int64_t head_dim, float scale, float* scratch, float softcap = 0.0f) noexcept;
// Floats of scratch that attend, attend_block and ref::attend need for keys
// up to max_kv_len.
size_t attend_block_scratch(int64_t max_kv_len) noexcept;

// One head of a KV cache: row j at data + j * stride elements, of one of the
// cache types: F32 floats, the bits of F16 or BF16 numbers, or Q8_0/Q4_0
// blocks (ggml's layouts; head_dim and stride are then multiples of 32, and
// data is the head's first block). Rows are read as they are stored, each
// element widened or dequantized exactly as it is loaded, so any cache gives
// the bits of an F32 cache holding the same (rounded) values.
struct CacheHead {
    const void* data;
    size_t stride;  // in elements
    DType type;
};
// Whether attend_block reads caches of this type.
bool attention_cache_type(DType type) noexcept;
void attend_block(const AttentionQuery* queries, int n_queries, CacheHead k, CacheHead v, int64_t head_dim,
                  float scale, float* scratch, float softcap = 0.0f) noexcept;

// A query's partial result over some chunks, as attention_partial_doubles()
// doubles: [max score, Σ weights, Σ weight · v[0], ..., Σ weight · v[head_dim-1]];
// a max of -inf means no key of those chunks is used (the rest is unread).
size_t attention_partial_doubles(int64_t head_dim) noexcept;
// Chunks [0, n) cover every key the queries use.
int64_t attention_chunks(const AttentionQuery* queries, int n_queries) noexcept;
// The split form of attend_block: the partial result of chunk `chunk` alone
// for each query, query i's at partials + i * attention_partial_doubles(head_dim).
void attend_chunk(const AttentionQuery* queries, int n_queries, CacheHead k, CacheHead v, int64_t head_dim,
                  float scale, int64_t chunk, double* partials, float* scratch, float softcap = 0.0f) noexcept;
// Folds one query's chunk partials 0..n_chunks-1 (chunk_stride doubles apart)
// in order, as attend_block does, and writes the query's head_dim outputs
// (zeros when no key was used): the bits attend_block gives that query.
void merge_attention_chunks(const double* partials, int64_t n_chunks, size_t chunk_stride, int64_t head_dim,
                            float* out) noexcept;

namespace ref {
void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride, int64_t kv_len,
            int64_t head_dim, float scale, const uint8_t* kv_valid, float* out, float* scratch, float softcap = 0.0f,
            int64_t kv_start = 0) noexcept;
}  // namespace ref

}  // namespace kiln::kernels
