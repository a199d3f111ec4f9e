#pragma once
// --layer-split [P,P,...] (kiln, kiln-perplexity): split the model by layers
// across the ranks of an mpirun job, in proportion to the optional P (one per
// rank; default: equal bytes per rank). engine/distributed/layer_pipeline.h.
#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include "tools/common/cli.h"

namespace kiln::cli {

struct LayerSplitFlag {
    bool on = false;
    std::vector<double> weights;  // empty: equal bytes

    // Takes --layer-split and, when the next argument is a list of positive
    // numbers, that list. Returns whether `flag` was it.
    bool parse(std::string_view flag, Args& args) {
        if (flag != "--layer-split") return false;
        on = true;
        const std::string_view next = args.peek();
        if (next.empty() || !(next[0] >= '0' && next[0] <= '9')) return true;
        args.next();
        weights.clear();
        for (size_t at = 0; at <= next.size();) {
            const size_t comma = std::min(next.find(',', at), next.size());
            const std::string_view part = next.substr(at, comma - at);
            double value = 0;
            const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
            if (part.empty() || ec != std::errc() || end != part.data() + part.size() || !(value > 0))
                usage_error("--layer-split expects positive proportions such as 3,1, got '{}'", next);
            weights.push_back(value);
            at = comma + 1;
        }
        return true;
    }
};

}  // namespace kiln::cli
