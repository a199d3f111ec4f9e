#include "engine/train/train_graph.h"

namespace kiln::train {

void TrainGraph::set_dropout_seed(uint64_t seed) {
    if (dropout_seed == kNoNode) return;
    int32_t* s = graph.node(dropout_seed).row<int32_t>(0);
    s[0] = static_cast<int32_t>(static_cast<uint32_t>(seed));
    s[1] = static_cast<int32_t>(static_cast<uint32_t>(seed >> 32));
    if (graph.node(dropout_seed).shape.elements() == 4) {
        s[2] = static_cast<int32_t>(first_sequence);
        s[3] = static_cast<int32_t>(sequences);
    }
}

}  // namespace kiln::train
