#pragma once
// What every training (and evaluation) graph has, whatever the model: the
// parameter leaves and their gradients, the dropout seed input, the logits and
// the mean loss. Trainers run any of them through these alone.
#include <cstdint>
#include <vector>

#include "engine/graph/graph.h"

namespace kiln::train {

struct TrainGraph {
    Graph graph;
    NodeId dropout_seed = kNoNode;  // I32[2]; kNoNode when the graph has no dropout
    NodeId logits = kNoNode, loss = kNoNode;
    std::vector<NodeId> params;  // per model tensor, in order
    std::vector<NodeId> grads;   // per model tensor (training graphs only)

    // Writes the dropout seed input (ignored when the graph has no dropout).
    void set_dropout_seed(uint64_t seed);
    float loss_value() const { return *graph.node(loss).row(0); }
};

}  // namespace kiln::train
