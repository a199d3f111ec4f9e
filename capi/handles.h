#pragma once
// What the C API's opaque handles hold. A model's parts are shared, so that a
// context keeps the weights and tokenizer alive after kiln_model_free.
#include <memory>
#include <string>
#include <vector>

#include "engine/models/causal_lm.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/thread_pool.h"
#include "formats/gguf/gguf_file.h"
#include "formats/tokenizer/tokenizer.h"

namespace kiln::capi {

struct LoadedModel {
    std::shared_ptr<const GgufFile> file;
    std::unique_ptr<CausalLm> lm;
    std::unique_ptr<Tokenizer> tokenizer;
};

}  // namespace kiln::capi

struct kiln_model {
    std::shared_ptr<const kiln::capi::LoadedModel> loaded;
};

struct kiln_context {
    std::shared_ptr<const kiln::capi::LoadedModel> loaded;
    std::unique_ptr<kiln::CausalSession> session;
    std::unique_ptr<kiln::ThreadPool> pool;
    std::vector<float> logits;  // the last decode's rows, n x n_vocab
    int64_t rows = 0;
};

struct kiln_sampler {
    kiln::Sampler sampler;
};
