#pragma once
// A linear layer or a LayerNorm whose bias may be absent (kNoNode: zero), as
// every block builder uses them.
#include "engine/graph/graph.h"
#include "formats/arch/gpt2_arch.h"  // arch::Affine

namespace kiln {

// y = W x (+ b)
NodeId linear(Graph& g, const arch::Affine<NodeId>& a, NodeId x);
// LayerNorm(x) * w (+ b)
NodeId layer_norm(Graph& g, const arch::Affine<NodeId>& a, NodeId x, float eps);

// The sinusoidal positions of "Attention Is All You Need", [dim, n_ctx] row-major:
// PE(pos, 2i) = sin(pos / 10000^(2i/dim)), PE(pos, 2i+1) = cos(the same angle), in double, rounded to float.
std::vector<float> sinusoidal_positions(int64_t dim, int64_t n_ctx);

}  // namespace kiln
