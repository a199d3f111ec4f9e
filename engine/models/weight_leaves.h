#pragma once
// A model file's tensors as leaves of a graph, read from where the loader
// placed the weights (resident_weights.h: the file mapping, or a copy).
#include "engine/graph/graph.h"
#include "engine/models/resident_weights.h"
#include "formats/arch/tensor_spec.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

class WeightLeaves {
public:
    WeightLeaves(const GgufFile& file, const ResidentWeights& placement) : file_(file), placement_(placement) {}
    // The leaf of the tensor `spec` names; kNoNode when an optional tensor is absent.
    NodeId operator()(Graph& g, const arch::TensorSpec& spec) const;

private:
    const GgufFile& file_;
    const ResidentWeights& placement_;
};

}  // namespace kiln
