#include "engine/train/autodiff.h"

#include "engine/core/error.h"
#include "engine/ops/op_def.h"
#include "engine/ops/ops.h"

namespace kiln::train {

std::vector<NodeId> append_backward(Graph& g, NodeId output, NodeId output_grad, std::span<const NodeId> params) {
    const size_t forward_size = g.size();
    if (output < 0 || static_cast<size_t>(output) >= forward_size) fail("autodiff", "output node {} does not exist", output);
    if (!(g.node(output_grad).shape == g.node(output).shape))
        fail("autodiff", "output gradient {} is not shaped like the output {}", g.node(output_grad).shape.str(),
             g.node(output).shape.str());
    // Which nodes depend on a parameter: only those need gradients.
    std::vector<bool> needs(forward_size, false);
    for (NodeId p : params) {
        const Node& n = g.node(p);
        if (n.op != OpKind::State || n.type != DType::F32)
            fail("autodiff", "parameter {} must be an F32 state, got {} {}", n.name, op_name(n.op), dtype_name(n.type));
        needs[static_cast<size_t>(p)] = true;
    }
    for (size_t i = 0; i < forward_size; ++i) {
        const Node& n = g.node(static_cast<NodeId>(i));
        if (n.is_leaf()) continue;
        for (NodeId s : n.src)
            if (s != kNoNode && needs[static_cast<size_t>(s)]) needs[i] = true;
    }

    // Sources always precede their readers, so walking ids downwards visits a
    // node only after every reader has contributed its part of the gradient.
    std::vector<NodeId> grad(forward_size, kNoNode);
    grad[static_cast<size_t>(output)] = output_grad;
    for (size_t i = static_cast<size_t>(output) + 1; i-- > 0;) {
        const NodeId id = static_cast<NodeId>(i);
        if (grad[i] == kNoNode || !needs[i] || g.node(id).is_leaf()) continue;
        const OpKind op = g.node(id).op;
        const OpDef& def = op_def(op);
        if (def.backward == nullptr) fail("autodiff", "op {} has no backward rule", op_name(op));
        SourceMask wanted{};
        const Sources src = g.node(id).src;
        for (size_t s = 0; s < kMaxSources; ++s) wanted[s] = src[s] != kNoNode && needs[static_cast<size_t>(src[s])];
        const Sources parts = def.backward(g, id, grad[i], wanted);
        for (size_t s = 0; s < kMaxSources; ++s) {
            if (!wanted[s]) continue;
            const NodeId part = parts[s];
            if (part == kNoNode) fail("autodiff", "op {} gave no gradient for its source {}", op_name(op), s);
            const auto to = static_cast<size_t>(src[s]);
            if (!(g.node(part).shape == g.node(src[s]).shape))
                fail("autodiff", "op {}: gradient {} of source {} is not shaped like it ({})", op_name(op),
                     g.node(part).shape.str(), s, g.node(src[s]).shape.str());
            grad[to] = grad[to] == kNoNode ? part : ops::add(g, grad[to], part);
        }
    }

    std::vector<NodeId> result;
    result.reserve(params.size());
    for (NodeId p : params) {
        const NodeId d = grad[static_cast<size_t>(p)];
        if (d == kNoNode) fail("autodiff", "parameter {} does not influence the output", g.node(p).name);
        g.mark_output(d);
        result.push_back(d);
    }
    g.mark_output(output);
    return result;
}

LossGradients append_loss_backward(Graph& g, NodeId loss, std::span<const NodeId> params) {
    if (g.node(loss).shape.elements() != 1)
        fail("autodiff", "the loss must be one value, got {}", g.node(loss).shape.str());
    LossGradients out;
    out.seed = g.input("loss_grad", DType::F32, g.node(loss).shape);
    *g.node(out.seed).row(0) = 1.0f;
    out.params = append_backward(g, loss, out.seed, params);
    return out;
}

}  // namespace kiln::train
