#pragma once
// Decodes a trained encoder-decoder with the inference engine, exactly as
// `kiln --beams K` decodes the exported file: the model's GGUF bytes (the very
// bytes write_seq2seq_model writes) are parsed into a TransformerModel, whose
// session encodes the source once and advances the hypotheses of
// engine/runtime/beam_search with its KV cache. K = 1 is greedy decoding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/models/transformer.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::train {

class InferenceDecoder {
public:
    // `gguf`: a transformer model file's bytes (copied). Up to `max_beams` beams.
    InferenceDecoder(std::vector<std::byte> gguf, int32_t max_beams);

    // The best hypothesis for `source` (its tokens, ending with EOS) found with
    // `beams` beams, length penalty 1 and at most context tokens, without its EOS.
    std::vector<int32_t> decode(const std::vector<int32_t>& source, int32_t beams, ThreadPool& pool);

    const TransformerConfig& config() const noexcept { return model_->config(); }

private:
    struct AlignedDelete {
        void operator()(std::byte* p) const noexcept;
    };
    // The file's bytes at a 64-byte aligned address, so that every tensor is
    // as aligned as in a mapped file (the GGUF aligns them within the file).
    std::unique_ptr<std::byte[], AlignedDelete> bytes_;
    std::shared_ptr<const GgufFile> file_;
    std::unique_ptr<TransformerModel> model_;
    std::unique_ptr<TransformerSession> session_;
    int32_t max_beams_;
};

}  // namespace kiln::train
