#pragma once
// llama.cpp's sampling flags, shared by kiln (how it samples) and kiln-server
// (what a request that leaves a field out gets): --temp, --top-k, --top-p,
// --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
// --frequency-penalty, -l/--logit-bias ID+B and -s/--seed (-1: random).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "engine/runtime/sampler.h"
#include "tools/common/cli.h"

namespace kiln::cli {

// llama.cpp's --logit-bias: TOKEN_ID followed by +BIAS or -BIAS ("15043+1",
// "15043-inf" bans the token).
inline LogitBias parse_logit_bias(std::string_view flag, std::string_view text) {
    const size_t sign = text.find_first_of("+-");
    if (sign == 0 || sign == std::string_view::npos)
        usage_error("{} expects TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 15043-inf), got '{}'", flag, text);
    const int64_t id = parse_int(flag, text.substr(0, sign), 0, std::numeric_limits<int32_t>::max());
    const std::string_view amount = text.substr(sign + 1);
    const float magnitude = amount == "inf" ? INFINITY : static_cast<float>(parse_float(flag, amount, 0, 1e6));
    return {static_cast<int32_t>(id), text[sign] == '-' ? -magnitude : magnitude};
}

class SamplingFlags {
public:
    explicit SamplingFlags(const SamplerParams& defaults) : params_(defaults) {}

    // Takes the flag (and its value) if it is one of these; false otherwise.
    bool parse(std::string_view flag, Args& args) {
        SamplerParams& p = params_;
        if (flag == "--temp") {
            p.temperature = static_cast<float>(parse_float(flag, args.value(flag), 0, 100));
            temperature_given_ = true;
        } else if (flag == "--top-k") {
            p.top_k = static_cast<int32_t>(parse_int(flag, args.value(flag), 0, 1 << 30));
        } else if (flag == "--top-p") {
            p.top_p = static_cast<float>(parse_float(flag, args.value(flag), 0, 1));
        } else if (flag == "--min-p") {
            p.min_p = static_cast<float>(parse_float(flag, args.value(flag), 0, 1));
        } else if (flag == "--repeat-penalty") {
            p.repeat_penalty = static_cast<float>(parse_float(flag, args.value(flag), 0.01, 100));
            penalty_given_ = true;
        } else if (flag == "--repeat-last-n") {
            p.repeat_last_n = static_cast<int32_t>(parse_int(flag, args.value(flag), -1, 1 << 24));
        } else if (flag == "--presence-penalty") {
            p.presence_penalty = static_cast<float>(parse_float(flag, args.value(flag), -100, 100));
            penalty_given_ = true;
        } else if (flag == "--frequency-penalty") {
            p.frequency_penalty = static_cast<float>(parse_float(flag, args.value(flag), -100, 100));
            penalty_given_ = true;
        } else if (flag == "-l" || flag == "--logit-bias") {
            p.logit_bias.push_back(parse_logit_bias(flag, args.value(flag)));
            penalty_given_ = true;
        } else if (flag == "-s" || flag == "--seed") {
            // -1 is llama.cpp's "pick one at random", the default (scripts pass it).
            const int64_t seed = parse_int(flag, args.value(flag), -1);
            p.seed = static_cast<uint64_t>(std::max<int64_t>(seed, 0));
            seed_given_ = seed >= 0;
        } else {
            return false;
        }
        return true;
    }

    const SamplerParams& params() const noexcept { return params_; }
    bool seed_given() const noexcept { return seed_given_; }
    bool temperature_given() const noexcept { return temperature_given_; }
    // A penalty or bias flag (beam search uses none of them).
    bool penalty_given() const noexcept { return penalty_given_; }

private:
    SamplerParams params_;
    bool seed_given_ = false, temperature_given_ = false, penalty_given_ = false;
};

}  // namespace kiln::cli
