#include "engine/train/llama_trainer.h"

namespace kiln::train {

namespace {

std::unique_ptr<CausalTrainGraph> llama_graph(ParamModel& model, int64_t batch, int64_t context, bool training,
                                              float dropout) {
    return build_llama_train_graph(static_cast<LlamaTrainModel&>(model), batch, context, training, dropout);
}

}  // namespace

LlamaTrainer::LlamaTrainer(const LlamaTrainOptions& options, ThreadPool& pool)
    : CausalLmTrainer(fresh_model<LlamaTrainModel>(options, options.model, options.tied, options.decay_embeddings),
                      options.model.n_ctx_train, options, llama_graph, pool) {}

}  // namespace kiln::train
