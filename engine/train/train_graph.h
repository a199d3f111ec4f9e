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
    NodeId dropout_seed = kNoNode;  // I32[4]; kNoNode when the graph has no dropout
    // Where this graph's sequences sit in the batch of the whole step (a
    // rank's share of a data-parallel batch): the dropout masks follow it.
    int64_t first_sequence = 0, sequences = 0;
    NodeId logits = kNoNode, loss = kNoNode;
    std::vector<NodeId> params;  // per model tensor, in order
    std::vector<NodeId> grads;   // per model tensor (training graphs only)

    // Writes the dropout seed input (ignored when the graph has no dropout):
    // the seed, then first_sequence and sequences.
    void set_dropout_seed(uint64_t seed);
    float loss_value() const { return *graph.node(loss).row(0); }
};

}  // namespace kiln::train
