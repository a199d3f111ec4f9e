#pragma once
// A trainable encoder-decoder Transformer in the layout of docs/architectures.md, transformer
// (architecture "transformer"): one shared vocabulary and embedding (also the
// tied output projection), embeddings times sqrt(d) plus sinusoidal
// positions, pre-LN (or post-LN) blocks with q/k/v/o projections, cross
// attention in the decoder, relu or exact-GELU feed-forward, final norms.
//
// The graph runs `batch` pairs at once: sources [d, batch * src_len] with a key
// padding mask, targets [d, batch * tgt_len] (teacher forcing: the decoder
// input is [bos] + target, the labels target + [eos], padding ignored).
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/train/param_model.h"
#include "engine/train/rng.h"
#include "engine/train/train_graph.h"
#include "formats/arch/transformer_arch.h"

namespace kiln::train {

struct Seq2SeqConfig {
    int64_t vocab = 0;
    int64_t context = 16;  // longest source and longest target (positions)
    int64_t width = 64;
    int64_t encoder_layers = 2, decoder_layers = 2;
    int64_t heads = 4;
    int64_t ffn = 256;
    bool norm_first = true;
    bool gelu = false;  // false: relu
    float eps = 1e-5f;

    void validate() const;
    // The trainer's configuration of a transformer file's hyper-parameters.
    static Seq2SeqConfig of(const arch::TransformerParams& p);
};

class Seq2SeqModel : public ParamModel {
public:
    explicit Seq2SeqModel(Seq2SeqConfig config);
    // Matrices Xavier-uniform (as torch.nn.Transformer), embedding N(0, d^-1/2), norms 1, biases 0.
    void initialize(Rng& rng);
    const Seq2SeqConfig& config() const noexcept { return config_; }
    // The same model in the transformer architecture's terms (formats/arch/transformer_arch.h).
    arch::TransformerParams params() const;

private:
    Seq2SeqConfig config_;
};

struct Seq2SeqGraph : TrainGraph {
    int64_t batch = 0, src_len = 0, tgt_len = 0;
    NodeId source = kNoNode, source_mask = kNoNode, decoder_input = kNoNode, labels = kNoNode;

    int32_t* source_data() { return graph.node(source).row<int32_t>(0); }
    int8_t* mask_data() { return graph.node(source_mask).row<int8_t>(0); }
    int32_t* decoder_input_data() { return graph.node(decoder_input).row<int32_t>(0); }
    int32_t* label_data() { return graph.node(labels).row<int32_t>(0); }
};

// Labels of -1 are ignored (padding). training: with the backward pass, and
// with dropout p > 0 where torch.nn.Transformer has it (attention
// probabilities, each sublayer's output, the feed-forward's hidden layer)
// and on the embeddings (as the positional encoding of its tutorials).
std::unique_ptr<Seq2SeqGraph> build_seq2seq_graph(Seq2SeqModel& model, int64_t batch, int64_t src_len, int64_t tgt_len,
                                                  bool training, float dropout = 0.0f);

}  // namespace kiln::train
