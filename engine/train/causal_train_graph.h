#pragma once
// The training (and evaluation) graph of any decoder-only model over its
// parameters: `batch` windows of `context` tokens as rows [width, batch *
// context], the architecture's block builder with sequence attention (causal,
// each window on its own) and dropout, the mean cross-entropy, and for
// training the backward pass to every parameter.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/models/block_context.h"
#include "engine/train/param_model.h"
#include "engine/train/train_graph.h"

namespace kiln::train {

struct CausalTrainGraph : TrainGraph {
    int64_t batch = 0, context = 0;
    NodeId tokens = kNoNode, positions = kNoNode, targets = kNoNode;

    int32_t* token_data() { return graph.node(tokens).row<int32_t>(0); }
    int32_t* target_data() { return graph.node(targets).row<int32_t>(0); }
};

// The architecture's forward pass over the graph's parameter leaves (one per
// model tensor, in the model's order): returns the logits [n_vocab, rows].
using CausalForward = std::function<NodeId(Graph& g, const std::vector<NodeId>& params, const BlockContext& ctx)>;

// Appends the mean cross-entropy of `logits` against I32 `targets` (-1:
// ignored) and, when training, the backward pass to every parameter (the
// gradients go to `grads`); otherwise keeps loss and logits as outputs. Plans g.
NodeId finish_train_graph(Graph& g, NodeId logits, NodeId targets, const std::vector<NodeId>& params, bool training,
                          std::vector<NodeId>& grads);

// Builds (and plans) the graph. training: with dropout (p > 0) and the backward pass.
std::unique_ptr<CausalTrainGraph> build_causal_train_graph(ParamModel& model, int64_t batch, int64_t context,
                                                           bool training, float dropout, const CausalForward& forward);

}  // namespace kiln::train
