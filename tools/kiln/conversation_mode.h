#pragma once
// kiln's conversation mode (-cnv), as llama-cli's: the model's chat template,
// one KV cache kept across turns, replies streamed as they are generated.
#include <memory>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/models/kv_cache_types.h"
#include "engine/models/weight_placement.h"
#include "engine/runtime/sampler.h"

namespace kiln {
class GgufFile;
}

namespace kiln::tool {

struct ConversationOptions {
    std::string model_path;
    std::string system_prompt;              // -sys
    std::string first_message;              // -p: the first user message
    bool has_first_message = false;
    std::string chat_template_file;         // overrides the model's template
    std::string chat_template;              // --chat-template's text; overrides the model's too
    int64_t tokens_per_eval = 512;          // prompt tokens per evaluation (-b/-ub)
    std::vector<std::string> stop_strings;  // -r: a reply ends where one appears (not shown)
    int64_t n_predict = -1;                 // per reply; -1: until an end-of-turn token or the context is full
    bool ignore_eos = false;
    int64_t threads = 1;
    int64_t ctx = 0;                        // 0: the model's, at most 4096
    SamplerParams sampling;
    CacheTypes cache_types{DType::F16};
    WeightPlacement placement;              // --no-mmap, --mlock
    bool verbose = false;                   // -v: the load report on stderr
};

// Runs the conversation on stdin/stdout: on a terminal with a "> " prompt,
// Ctrl-C stopping a reply and a second Ctrl-C (or one at the prompt) leaving;
// otherwise one user message per input line and one reply per output line.
// "/exit" or the end of input ends it. Returns the exit status.
int run_conversation(const ConversationOptions& options, std::shared_ptr<const GgufFile> file);

}  // namespace kiln::tool
