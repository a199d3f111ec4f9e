#pragma once
// The Llama architecture (RMSNorm, RoPE, SwiGLU, grouped-query attention) from
// a GGUF file with llama.cpp's metadata keys and tensor names. Weights are used
// in whatever type they are stored, from the file mapping or a huge-page copy
// of it (resident_weights.h).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/graph/graph.h"
#include "engine/models/causal_lm.h"
#include "engine/models/resident_weights.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

struct LlamaConfig {
    int64_t n_vocab = 0;
    int64_t dim = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t head_dim = 0;
    int64_t ffn_dim = 0;
    int64_t n_ctx_train = 0;
    int64_t n_rot = 0;
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;

    int64_t kv_dim() const noexcept { return n_kv_heads * head_dim; }
};

class LlamaModel {
public:
    // Validates the architecture, hyper-parameters and every tensor's presence,
    // type and shape; throws kiln::Error ("[model] ...") naming what is wrong.
    explicit LlamaModel(std::shared_ptr<const GgufFile> file);

    const LlamaConfig& config() const noexcept { return config_; }
    const GgufFile& file() const noexcept { return *file_; }
    // Parameters and bytes of weights (what a decode step reads).
    uint64_t parameter_count() const noexcept;
    uint64_t weight_bytes() const noexcept;

    struct Layer {
        const GgufTensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
    };
    const GgufTensor& token_embedding() const noexcept { return *token_embd_; }
    const GgufTensor& output_norm() const noexcept { return *output_norm_; }
    const GgufTensor& output() const noexcept { return *output_; }
    const std::vector<Layer>& layers() const noexcept { return layers_; }
    // Where the computation reads tensor t from: a huge-page copy of the
    // weights (resident_weights.h) or the file mapping itself.
    const std::byte* tensor_data(const GgufTensor& t) const noexcept { return resident_->data(t); }
    bool weights_copied() const noexcept { return resident_->copied(); }

private:
    std::shared_ptr<const GgufFile> file_;
    LlamaConfig config_;
    const GgufTensor* token_embd_ = nullptr;
    const GgufTensor* output_norm_ = nullptr;
    const GgufTensor* output_ = nullptr;  // token_embd_ when the head is tied
    std::vector<Layer> layers_;
    std::unique_ptr<ResidentWeights> resident_;
};

// A session of n_slots sequences of n_ctx positions over `model` (which must outlive it).
std::unique_ptr<CausalSession> new_llama_session(const LlamaModel& model, int64_t n_ctx, int64_t n_slots,
                                                 Executor::Mode mode, DType cache_type = DType::F32);

// One sequence of a LlamaModel: slot 0 of a LlamaLm session (kept for the
// callers that hold a LlamaModel rather than a CausalLm).
class LlamaContext {
public:
    LlamaContext(const LlamaModel& model, int64_t n_ctx, Executor::Mode mode = Executor::Mode::Fast,
                 DType cache_type = DType::F32);

    // Appends tokens at positions n_past()..; returns the logits of the last
    // token ([n_vocab]) or, with all_logits, of every token ([n, n_vocab]).
    // Throws when a token id is out of range or the tokens do not fit the context.
    std::span<const float> eval(std::span<const int32_t> tokens, ThreadPool& pool, bool all_logits = false) {
        return session_->eval(tokens, pool, all_logits);
    }
    int64_t n_past() const { return session_->n_past(0); }
    int64_t n_ctx() const noexcept { return session_->n_ctx(); }
    void reset() { session_->reset(); }

private:
    std::unique_ptr<CausalSession> session_;
};

// LlamaModel as a CausalLm (engine/models/causal_lm.h): sessions with sequence slots.
class LlamaLm final : public CausalLm {
public:
    explicit LlamaLm(std::shared_ptr<const GgufFile> file);
    const ModelInfo& info() const noexcept override { return info_; }
    std::unique_ptr<CausalSession> new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                               DType cache_type = DType::F32) const override;
    const LlamaModel& model() const noexcept { return model_; }

private:
    LlamaModel model_;
    ModelInfo info_;
};

}  // namespace kiln
