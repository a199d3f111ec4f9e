#pragma once
// The graph's op API: each function appends one node (or two, for matmul with
// quantized weights) and returns it. Shapes are checked here, when the node is
// made, and a mismatch throws kiln::Error naming the op and both shapes.
#include "engine/graph/graph.h"

namespace kiln::ops {

// Rows of a table (any storage type) picked by I32 ids [n] -> F32 [ne0, n].
NodeId get_rows(Graph& g, NodeId table, NodeId ids);
// Rows [first, first + count) of x, copied.
NodeId slice_rows(Graph& g, NodeId x, int64_t first, int64_t count);

// Element-wise; b may be a single row broadcast over every row of a.
NodeId add(Graph& g, NodeId a, NodeId b);
NodeId mul(Graph& g, NodeId a, NodeId b);
NodeId scale(Graph& g, NodeId x, float factor);
// cap * tanh(x / cap): Gemma 2's soft-capping of logits.
NodeId softcap(Graph& g, NodeId x, float cap);
NodeId relu(Graph& g, NodeId x);
NodeId silu(Graph& g, NodeId x);
NodeId gelu(Graph& g, NodeId x);  // tanh form
NodeId swiglu(Graph& g, NodeId gate, NodeId up);

// Per row; weight (and bias) may be kNoNode.
NodeId rms_norm(Graph& g, NodeId x, NodeId weight, float eps);
NodeId layer_norm(Graph& g, NodeId x, NodeId weight, NodeId bias, float eps);
NodeId softmax(Graph& g, NodeId x);

// x [k, n] times weights w [k, m] (m rows of k) -> [m, n]. For Q8_0/Q4_0
// weights the activations are quantized to Q8_0 once, in a node of their own.
NodeId matmul(Graph& g, NodeId w, NodeId x);

// Rotary embedding of x [n_heads * head_dim, n] at I32 positions [n], as
// `spec` says (engine/kernels/rope_spec.h); freq_factors, when given, is an F32
// [n_rot / 2] the angles are divided by (Llama 3.1's rope_freqs.weight).
NodeId rope(Graph& g, NodeId x, NodeId positions, const kernels::RopeSpec& spec, NodeId freq_factors = kNoNode);
// Mode 0, no scaling.
NodeId rope(Graph& g, NodeId x, NodeId positions, int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base);

// Writes x [kv_dim, n] into rows positions[t] of a cache state [kv_dim, n_ctx];
// returns the cache (read it through this node so the write comes first).
NodeId store_kv(Graph& g, NodeId cache, NodeId x, NodeId positions);

// Attention for inference (sequence_attention below is the training form):
// causal attention of q [n_heads * head_dim, n] at I32 positions [n] over the
// caches [n_kv_heads * head_dim, n_ctx]: token t sees cache rows 0..positions[t].
// mask (optional, I8 [n_ctx] or [n_ctx, n]): cache rows with 0 are not attended.
// Options: the score scale (0: 1/sqrt(head_dim)), a soft cap of the scores
// (Gemma 2), a sliding window (token t sees rows (positions[t] - window, positions[t]]).
struct AttentionOptions {
    float scale = 0.0f;
    float softcap = 0.0f;
    int64_t window = 0;
};
NodeId cached_attention(Graph& g, NodeId q, NodeId k_cache, NodeId v_cache, NodeId positions, NodeId mask, int64_t n_heads,
                        int64_t n_kv_heads, int64_t head_dim, const AttentionOptions& options = {});

// ---- Training: ops a training graph adds, most of them backward kernels. ----

// F32 [a, b] -> [b, a].
NodeId transpose(Graph& g, NodeId x);
// Column sums of F32 [n, rows] -> [n]: the gradient of a row broadcast by add/mul.
NodeId sum_rows(Graph& g, NodeId x);
// Gradient of get_rows: row r of grad [ne0, n] is added into row ids[r] of a
// [ne0, table_rows] result that is zero elsewhere (ids out of range add nothing).
NodeId get_rows_grad(Graph& g, NodeId grad, NodeId ids, int64_t table_rows);
// x [ne0, count] placed at rows [first, first + count) of a [ne0, total] result, zeros elsewhere.
NodeId pad_rows(Graph& g, NodeId x, int64_t first, int64_t total);
// Columns [first, first + count) of every row of F32 x.
NodeId slice_columns(Graph& g, NodeId x, int64_t first, int64_t count);
// x [count, rows] placed at columns [first, first + count) of a [total, rows] result, zeros elsewhere.
NodeId pad_columns(Graph& g, NodeId x, int64_t first, int64_t total);

// Element-wise gradients: grad * f'(x).
NodeId relu_grad(Graph& g, NodeId x, NodeId grad);
NodeId gelu_grad(Graph& g, NodeId x, NodeId grad);  // tanh form
NodeId gelu_erf(Graph& g, NodeId x);               // exact GELU, as torch.nn.functional.gelu
NodeId gelu_erf_grad(Graph& g, NodeId x, NodeId grad);

// dx of layer_norm(x, weight, any bias, eps); weight may be kNoNode.
NodeId rms_norm_grad(Graph& g, NodeId x, NodeId weight, NodeId grad, float eps);
NodeId silu_grad(Graph& g, NodeId x, NodeId grad);
NodeId layer_norm_grad(Graph& g, NodeId x, NodeId weight, NodeId grad, float eps);
// dx of y = softmax(x), from y itself: y * (grad - Σ grad·y).
NodeId softmax_grad(Graph& g, NodeId y, NodeId grad);

// Mean cross-entropy of logits [V, n] against I32 targets [n] -> [1], computed
// as a stable log-softmax per row. Targets equal to ignore_index (padding) do
// not count; with no counted target the loss is 0.
NodeId cross_entropy(Graph& g, NodeId logits, NodeId targets, int32_t ignore_index = -1);
// Its parts: per-row losses [n] (0 where ignored), their mean over counted rows, and gradients.
NodeId cross_entropy_rows(Graph& g, NodeId logits, NodeId targets, int32_t ignore_index);
NodeId cross_entropy_rows_grad(Graph& g, NodeId logits, NodeId targets, NodeId row_grads, int32_t ignore_index);
NodeId mean_loss(Graph& g, NodeId row_losses, NodeId targets, int32_t ignore_index);
NodeId mean_loss_grad(Graph& g, NodeId grad, NodeId targets, int32_t ignore_index);

// Inverted dropout: each element is zeroed with probability p, the rest scaled
// by 1 / (1 - p). The mask is a hash of the I32 seed input [2] (fill it before
// each run) and the element's index, so it does not depend on threads, and the
// backward pass reproduces it. p = 0 is the identity.
NodeId dropout(Graph& g, NodeId x, NodeId seed, float p);

// Attention for training (cached_attention above is the inference form):
// attention within each of `batch` independent whole sequences: q [n_heads * head_dim, batch * q_len],
// k and v [n_kv_heads * head_dim, batch * kv_len] (sequence b is rows b*len ..); with
// fewer key/value heads than query heads (grouped-query attention), query head h
// reads key/value head h / (n_heads / n_kv_heads), as cached_attention.
// Causal: query i sees keys 0..i (q_len == kv_len). key_mask (optional, I8
// [kv_len, batch]): keys with 0 are not attended (padding). Scale 1/sqrt(head_dim).
// dropout > 0 (training): attention-probability dropout with the I32 seed
// input [2] (as the dropout op's); each such node draws its own masks.
NodeId sequence_attention(Graph& g, NodeId q, NodeId k, NodeId v, NodeId key_mask, int64_t n_heads, int64_t n_kv_heads,
                          int64_t head_dim, int64_t batch, bool causal, float dropout = 0.0f,
                          NodeId dropout_seed = kNoNode);
// Gradients of a sequence_attention node: dq, dk, dv stacked as rows
// [n_heads * head_dim, batch * q_len + 2 * batch * kv_len] (slice_rows splits
// them; dk and dv rows use their first n_kv_heads * head_dim columns).
NodeId sequence_attention_grad(Graph& g, NodeId attention, NodeId grad);

}  // namespace kiln::ops
