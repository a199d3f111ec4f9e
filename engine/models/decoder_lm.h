#pragma once
// Any decoder-only architecture as a CausalLm: the file, its weights placed
// once (resident_weights.h: one policy for every architecture), and sessions
// whose graphs the architecture's block builder fills, reading keys and values
// from the sessions' KV caches.
#include <memory>

#include "engine/models/causal_lm.h"
#include "engine/models/decoder.h"
#include "engine/models/resident_weights.h"

namespace kiln {

class DecoderLm final : public CausalLm {
public:
    DecoderLm(std::shared_ptr<const GgufFile> file, std::unique_ptr<DecoderArch> arch, WeightPlacement placement = {});

    const ModelInfo& info() const noexcept override { return info_; }
    const WeightResidence& weight_residence() const noexcept override { return placement_->residence(); }
    std::unique_ptr<CausalSession> new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                               CacheTypes cache_types = {}) const override;

    const DecoderArch& arch() const noexcept { return *arch_; }
    const GgufFile& file() const noexcept { return *file_; }
    // The weights as graph leaves, for graphs built outside a session (attention_weights.h).
    const WeightLeaves& leaves() const noexcept { return leaves_; }
    // Where the computation reads tensor t from: its copy or the file mapping.
    const std::byte* tensor_data(const GgufTensor& t) const noexcept { return placement_->data(t); }

private:
    std::shared_ptr<const GgufFile> file_;
    std::unique_ptr<DecoderArch> arch_;
    std::unique_ptr<ResidentWeights> placement_;
    WeightLeaves leaves_;
    ModelInfo info_;
};

}  // namespace kiln
