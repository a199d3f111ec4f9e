#pragma once
// Reverse-mode automatic differentiation on the static graph: the backward
// pass is appended to the same Graph as more nodes, made by each op's backward
// rule (OpDef::backward, beside the op's forward), so the executor plans and
// runs forward and backward as one graph.
#include <span>
#include <vector>

#include "engine/graph/graph.h"

namespace kiln::train {

// Appends the nodes computing the gradient of sum(output_grad ⊙ output) with
// respect to each parameter (State leaves holding F32 buffers). output_grad
// is a node shaped like output. Gradients of a node read by several others
// are summed. Returns the gradient node of each parameter, in order, each
// marked as a graph output and shaped like its parameter. Throws kiln::Error
// ("autodiff") when an op on the way has no backward rule, or a parameter
// does not influence the output.
std::vector<NodeId> append_backward(Graph& g, NodeId output, NodeId output_grad, std::span<const NodeId> params);

struct LossGradients {
    NodeId seed;                 // the input holding d loss / d loss = 1 (filled here)
    std::vector<NodeId> params;  // d loss / d parameter, as append_backward
};

// For a scalar loss (one element): seeds the backward pass with 1.
LossGradients append_loss_backward(Graph& g, NodeId loss, std::span<const NodeId> params);

}  // namespace kiln::train
