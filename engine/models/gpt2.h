#pragma once
// The GPT-2 architecture (llama.cpp's "gpt2": learned positions, pre-LayerNorm
// blocks, fused QKV, GELU (tanh) MLP, final LayerNorm, head tied to the token
// embedding unless output.weight is present). The small character-level GPTs
// of nanoGPT-style tutorials are the same shape; their biases may be absent.
#include <memory>
#include <vector>

#include "engine/models/causal_lm.h"

namespace kiln {

struct Gpt2Config {
    int64_t n_vocab = 0;
    int64_t dim = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t head_dim = 0;
    int64_t ffn_dim = 0;
    int64_t n_ctx_train = 0;  // rows of the position embedding
    float norm_eps = 1e-5f;
};

class Gpt2Model : public CausalLm {
public:
    // Validates hyper-parameters and every tensor's presence, type and shape.
    explicit Gpt2Model(std::shared_ptr<const GgufFile> file);

    const ModelInfo& info() const noexcept override { return info_; }
    std::unique_ptr<CausalSession> new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                               DType cache_type = DType::F32) const override;
    const Gpt2Config& config() const noexcept { return config_; }

    // A LayerNorm or linear layer; bias is null when the file has none.
    struct Affine {
        const GgufTensor* weight;
        const GgufTensor* bias;
    };
    struct Layer {
        Affine attn_norm, qkv, attn_out, ffn_norm, up, down;
    };
    const GgufTensor& token_embedding() const noexcept { return *token_embd_; }
    const GgufTensor& position_embedding() const noexcept { return *position_embd_; }
    const Affine& output_norm() const noexcept { return output_norm_; }
    const GgufTensor& output() const noexcept { return *output_; }
    const std::vector<Layer>& layers() const noexcept { return layers_; }

private:
    std::shared_ptr<const GgufFile> file_;
    Gpt2Config config_;
    ModelInfo info_;
    const GgufTensor* token_embd_ = nullptr;
    const GgufTensor* position_embd_ = nullptr;
    const GgufTensor* output_ = nullptr;  // token_embd_ when tied
    Affine output_norm_{};
    std::vector<Layer> layers_;
};

}  // namespace kiln
