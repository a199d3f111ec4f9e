#include "engine/train/causal_train_graph.h"

#include "engine/ops/ops.h"
#include "engine/train/autodiff.h"

namespace kiln::train {

std::unique_ptr<CausalTrainGraph> build_causal_train_graph(ParamModel& model, int64_t batch, int64_t context,
                                                           bool training, float dropout, const CausalForward& forward) {
    auto out = std::make_unique<CausalTrainGraph>();
    out->batch = batch;
    out->context = context;
    Graph& g = out->graph;
    out->params = model.add_states(g);
    const int64_t rows = batch * context;
    out->tokens = g.input("tokens", DType::I32, Shape::of({rows}));
    out->positions = g.input("positions", DType::I32, Shape::of({rows}));
    out->targets = g.input("targets", DType::I32, Shape::of({rows}));
    int32_t* pos = g.node(out->positions).row<int32_t>(0);
    for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(r % context);
    const bool use_dropout = training && dropout > 0.0f;
    if (use_dropout) out->dropout_seed = g.input("dropout_seed", DType::I32, Shape::of({4}));
    BatchKeyValues attention(batch, use_dropout ? dropout : 0.0f, out->dropout_seed);
    BlockContext ctx;
    ctx.tokens = out->tokens;
    ctx.positions = out->positions;
    ctx.n = rows;
    ctx.attention = &attention;
    if (use_dropout) ctx.dropout = Dropout{out->dropout_seed, dropout};
    out->logits = forward(g, out->params, ctx);
    out->loss = finish_train_graph(g, out->logits, out->targets, out->params, training, out->grads);
    return out;
}

NodeId finish_train_graph(Graph& g, NodeId logits, NodeId targets, const std::vector<NodeId>& params, bool training,
                          std::vector<NodeId>& grads) {
    const NodeId loss = ops::cross_entropy(g, logits, targets, -1);
    if (training) {
        grads = append_loss_backward(g, loss, params).params;
    } else {
        g.mark_output(loss);
        g.mark_output(logits);
    }
    g.plan();
    return loss;
}

}  // namespace kiln::train
