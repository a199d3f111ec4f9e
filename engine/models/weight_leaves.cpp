#include "engine/models/weight_leaves.h"

#include "engine/core/error.h"
#include "engine/models/model_tensors.h"

namespace kiln {

NodeId WeightLeaves::operator()(Graph& g, const arch::TensorSpec& spec) const {
    const GgufTensor* t = file_.find_tensor(spec.name);
    if (t == nullptr) {
        if (!spec.optional) fail("model", "{}: tensor '{}' is missing", file_.name(), spec.name);
        return kNoNode;
    }
    return model_tensors::leaf(g, *t, placement_.data(*t), placement_.type(*t));
}

}  // namespace kiln
