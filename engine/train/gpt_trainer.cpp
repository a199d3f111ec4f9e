#include "engine/train/gpt_trainer.h"

namespace kiln::train {

namespace {

std::unique_ptr<CausalTrainGraph> gpt_graph(ParamModel& model, int64_t batch, int64_t context, bool training,
                                            float dropout) {
    return build_gpt_graph(static_cast<GptModel&>(model), batch, context, training, dropout);
}

}  // namespace

GptTrainer::GptTrainer(const TrainOptions& options, ThreadPool& pool)
    : CausalLmTrainer(fresh_model<GptModel>(options, options.model, options.decay_embeddings), options.model.context,
                      options, gpt_graph, pool),
      options_(options) {}

}  // namespace kiln::train
