#pragma once
// -b/--batch-size and -ub/--ubatch-size with llama.cpp's meaning: a prompt is
// handed to the model in logical batches of at most -b tokens, each computed
// in physical batches of at most -ub (llama.cpp: 2048 and 512). kiln computes
// what it is handed in one graph, so the prompt goes in pieces of
// min(-b, -ub) tokens: the bound on the activations' memory for long prompts.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "tools/common/cli.h"

namespace kiln::cli {

class BatchFlags {
public:
    static constexpr int64_t kDefaultBatch = 2048, kDefaultUbatch = 512;

    // Takes the flag and its value if it is one of these; false otherwise.
    bool parse(std::string_view flag, Args& args) {
        if (flag == "-b" || flag == "--batch-size") batch_ = parse_int(flag, args.value(flag), 1, 1 << 20);
        else if (flag == "-ub" || flag == "--ubatch-size") ubatch_ = parse_int(flag, args.value(flag), 1, 1 << 20);
        else return false;
        return true;
    }
    // Prompt tokens per evaluation.
    int64_t tokens_per_eval() const noexcept { return std::min(batch_, ubatch_); }

private:
    int64_t batch_ = kDefaultBatch, ubatch_ = kDefaultUbatch;
};

}  // namespace kiln::cli
