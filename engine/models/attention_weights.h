#pragma once
// The attention probabilities of a model, for looking at them (kiln-viz).
// The attention kernels never form the probabilities (they fold the softmax
// into the weighted sum of the values), and the inference sessions are left
// exactly as they are: recording builds a graph of its own for one forward
// pass over the whole sequence, with a KeyValueReader that keeps each layer's
// queries and keys (after RoPE) as graph outputs. The probabilities are then
// computed on the side, in double, with the scale, soft cap, causal mask and
// sliding window the model's attention uses; masked positions are exactly 0
// and every row sums to 1.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/models/block_context.h"

namespace kiln {

class DecoderLm;
class ThreadPool;
class TransformerModel;

// Probabilities [layers, heads, queries, keys], row-major.
struct AttentionMaps {
    int64_t layers = 0, heads = 0, queries = 0, keys = 0;
    std::vector<float> p;
    float at(int64_t layer, int64_t head, int64_t query, int64_t key) const {
        return p[static_cast<size_t>(((layer * heads + head) * queries + query) * keys + key)];
    }
};

// One head-layout's softmax(q·k·scale) over the keys each query may see, in
// double: q [n_q rows of n_heads * head_dim], k [n_k rows of n_kv_heads *
// head_dim]. causal: query i (at position query_offset + i) sees keys
// 0..query_offset + i, and with heads.window > 0 only the last `window` of
// them. Appends [n_heads, n_q, n_k] to `out`.
void attention_probabilities(std::span<const float> q, std::span<const float> k, int64_t n_q, int64_t n_k,
                             const HeadLayout& heads, bool causal, int64_t query_offset, std::vector<float>& out);

// Every layer's self-attention over `tokens` (one sequence from position 0,
// at most the model's context for learned positions) in one pass.
AttentionMaps record_decoder_attention(const DecoderLm& lm, std::span<const int32_t> tokens, ThreadPool& pool);

// An encoder-decoder's three kinds: the encoder's self-attention over the
// source, the decoder's causal self-attention over the target, and the
// decoder's cross-attention from the target to the source.
struct Seq2SeqAttention {
    AttentionMaps encoder, decoder, cross;
};
Seq2SeqAttention record_seq2seq_attention(const TransformerModel& model, std::span<const int32_t> source,
                                          std::span<const int32_t> target, ThreadPool& pool);

}  // namespace kiln
