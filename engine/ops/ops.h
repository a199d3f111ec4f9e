#pragma once
// The graph's op API: each function appends one node (or two, for matmul with
// quantized weights) and returns it. Shapes are checked here, when the node is
// made, and a mismatch throws kiln::Error naming the op and both shapes.
#include "engine/graph/graph.h"

namespace kiln::ops {

// Rows of a table (any storage type) picked by I32 ids [n] -> F32 [ne0, n].
NodeId get_rows(Graph& g, NodeId table, NodeId ids);
// Rows [first, first + count) of x, copied.
NodeId take_rows(Graph& g, NodeId x, int64_t first, int64_t count);

// Element-wise; b may be a single row broadcast over every row of a.
NodeId add(Graph& g, NodeId a, NodeId b);
NodeId mul(Graph& g, NodeId a, NodeId b);
NodeId scale(Graph& g, NodeId x, float factor);
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

// Rotary embedding of x [n_heads * head_dim, n] at I32 positions [n].
NodeId rope(Graph& g, NodeId x, NodeId positions, int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base);

// Writes x [kv_dim, n] into rows positions[t] of a cache state [kv_dim, n_ctx];
// returns the cache (read it through this node so the write comes first).
NodeId store_kv(Graph& g, NodeId cache, NodeId x, NodeId positions);

// Causal attention of q [n_heads * head_dim, n] at I32 positions [n] over the
// caches [n_kv_heads * head_dim, n_ctx]: token t sees cache rows 0..positions[t].
// mask (optional, I8 [n_ctx] or [n_ctx, n]): cache rows with 0 are not attended.
NodeId attention(Graph& g, NodeId q, NodeId k_cache, NodeId v_cache, NodeId positions, NodeId mask, int64_t n_heads,
                 int64_t n_kv_heads, int64_t head_dim);

}  // namespace kiln::ops
