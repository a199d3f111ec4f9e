#include "engine/train/param_model.h"

#include "engine/core/error.h"

namespace kiln::train {

namespace {

// Tensors start on 64-byte boundaries (16 floats), as the engine's own buffers.
constexpr size_t kAlignFloats = 16;

Shape shape_of(const std::vector<uint64_t>& dims) {
    Shape s;
    s.rank = static_cast<int>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) s.ne[i] = static_cast<int64_t>(dims[i]);
    return s;
}

}  // namespace

void ParamModel::add(std::string name, std::vector<uint64_t> dims, bool decay) {
    ParamTensor t;
    t.name = std::move(name);
    t.dims = std::move(dims);
    t.segment.count = 1;
    for (uint64_t x : t.dims) t.segment.count *= static_cast<size_t>(x);
    t.segment.decay = decay;
    tensors_.push_back(std::move(t));
}

void ParamModel::allocate() {
    size_t total = 0;
    for (ParamTensor& t : tensors_) {
        t.segment.offset = total;
        total += (t.segment.count + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    }
    data_.assign(total, 0.0f);
}

std::vector<ParamSegment> ParamModel::segments() const {
    std::vector<ParamSegment> s;
    for (const ParamTensor& t : tensors_) s.push_back(t.segment);
    return s;
}

const ParamTensor* ParamModel::find(const std::string& name) const {
    for (const ParamTensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

float* ParamModel::tensor(const std::string& name) {
    const ParamTensor* t = find(name);
    if (t == nullptr) fail("train", "the model has no tensor {}", name);
    return data_.data() + t->segment.offset;
}

std::vector<NodeId> ParamModel::add_states(Graph& g) {
    std::vector<NodeId> nodes;
    for (const ParamTensor& t : tensors_)
        nodes.push_back(g.state(t.name, DType::F32, shape_of(t.dims), data_.data() + t.segment.offset));
    return nodes;
}

NodeId ParamModel::node_of(const std::vector<NodeId>& states, const std::string& name) const {
    for (size_t i = 0; i < tensors_.size(); ++i)
        if (tensors_[i].name == name) return states[i];
    return kNoNode;
}

}  // namespace kiln::train
