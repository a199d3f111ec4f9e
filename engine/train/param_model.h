#pragma once
// The parameters of a trainable model: named tensors (GGUF names, ggml
// shapes) in one flat F32 buffer, so the optimizer walks one array, the graph
// sees each tensor as a State leaf, and export copies tensors out as they are.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/train/adamw.h"

namespace kiln::train {

struct ParamTensor {
    std::string name;             // GGUF name, e.g. "blk.0.attn_qkv.weight"
    std::vector<uint64_t> dims;   // ggml order
    ParamSegment segment;         // place in the flat buffer; decay: weight decay applies
    bool is_matrix() const noexcept { return dims.size() == 2; }
};

class ParamModel {
public:
    // Trainers own their model as a ParamModel (causal_lm_trainer.h): the
    // destructor must reach the architecture's own.
    ParamModel() = default;
    ParamModel(const ParamModel&) = default;
    ParamModel(ParamModel&&) = default;
    ParamModel& operator=(const ParamModel&) = default;
    ParamModel& operator=(ParamModel&&) = default;
    virtual ~ParamModel() = default;

    const std::vector<ParamTensor>& tensors() const noexcept { return tensors_; }
    std::vector<ParamSegment> segments() const;
    std::vector<float>& data() noexcept { return data_; }
    const std::vector<float>& data() const noexcept { return data_; }
    // kiln::Error when there is no such tensor.
    float* tensor(const std::string& name);
    const ParamTensor* find(const std::string& name) const;

    // One State leaf per tensor (in order) over this model's buffer.
    std::vector<NodeId> add_states(Graph& g);
    // The node of `name` among add_states' result; kNoNode when the model has no such tensor.
    NodeId node_of(const std::vector<NodeId>& states, const std::string& name) const;

protected:
    void add(std::string name, std::vector<uint64_t> dims, bool decay);
    // Lays the tensors out (64-byte aligned) and zeroes the buffer; call after the last add().
    void allocate();

private:
    std::vector<ParamTensor> tensors_;
    std::vector<float> data_;
};

}  // namespace kiln::train
