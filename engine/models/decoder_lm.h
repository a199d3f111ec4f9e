#pragma once
// Any decoder-only architecture as a CausalLm: the file, its weights placed
// once (resident_weights.h: one policy for every architecture), and sessions
// whose graphs the architecture's block builder fills, reading keys and values
// from the sessions' KV caches.
#include <memory>
#include <string_view>

#include "engine/models/causal_lm.h"
#include "engine/models/decoder.h"
#include "engine/models/resident_weights.h"

namespace kiln {

class SlotDecoderSession;

// Whether a stage of a model of n_layers blocks computes with tensor `name`:
// its blocks' tensors ("blk.N."), the embeddings in the first stage (and in
// the last when the head is tied to them), the output norm and head in the
// last, and any other tensor of the whole model (rope factors) in every stage.
bool layer_stage_uses(const GgufFile& file, int64_t n_layers, const LayerStage& stage, std::string_view name);

class DecoderLm final : public CausalLm {
public:
    // stage: the blocks this process computes when the model is split by
    // layers across processes (layer_pipeline.h); only their tensors (and the
    // embeddings in the first stage, the head in the last) are placed, and
    // sessions cache only their layers. The default is the whole model.
    DecoderLm(std::shared_ptr<const GgufFile> file, std::unique_ptr<DecoderArch> arch, WeightPlacement placement = {},
              LayerStage stage = {});

    const ModelInfo& info() const noexcept override { return info_; }
    const WeightResidence& weight_residence() const noexcept override { return placement_->residence(); }
    std::unique_ptr<CausalSession> new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                               CacheTypes cache_types = {}) const override;

    // A session of this model's stage (the whole model by default).
    std::unique_ptr<SlotDecoderSession> new_stage_session(int64_t n_ctx, Executor::Mode mode,
                                                          CacheTypes cache_types = {}) const;
    const LayerStage& stage() const noexcept { return stage_; }
    // Whether the stage computes with tensor `name`.
    bool stage_uses(std::string_view name) const;

    const DecoderArch& arch() const noexcept { return *arch_; }
    const GgufFile& file() const noexcept { return *file_; }
    // The weights as graph leaves, for graphs built outside a session (attention_weights.h).
    const WeightLeaves& leaves() const noexcept { return leaves_; }
    // Where the computation reads tensor t from: its copy or the file mapping.
    const std::byte* tensor_data(const GgufTensor& t) const noexcept { return placement_->data(t); }

private:
    std::shared_ptr<const GgufFile> file_;
    std::unique_ptr<DecoderArch> arch_;
    LayerStage stage_;
    std::unique_ptr<ResidentWeights> placement_;
    WeightLeaves leaves_;
    ModelInfo info_;
};

}  // namespace kiln
