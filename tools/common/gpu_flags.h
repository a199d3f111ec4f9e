#pragma once
// llama.cpp's GPU flags (-ngl, -mg, -sm, -ts), which command lines people share
// carry as a habit: kiln runs on the CPU, so it takes them, checks that their
// values are well formed, and says once on stderr that they change nothing.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tools/common/cli.h"

namespace kiln::cli {

class GpuFlags {
public:
    // Takes the flag and its value if it is a GPU flag; false otherwise. With
    // `lists` (kiln-bench, as llama-bench) values may be comma-separated lists.
    bool parse(std::string_view flag, Args& args, bool lists = false) {
        std::string_view name;
        if (flag == "-ngl" || flag == "--gpu-layers" || flag == "--n-gpu-layers") name = "-ngl";
        else if (flag == "-mg" || flag == "--main-gpu") name = "-mg";
        else if (flag == "-sm" || flag == "--split-mode") name = "-sm";
        else if (flag == "-ts" || flag == "--tensor-split") name = "-ts";
        else return false;
        const std::string_view value = args.value(flag);
        if (name == "-ts") {
            // Proportions per GPU, separated by ',' or '/' (llama.cpp's "3,1").
            for (std::string_view part : split(value, ",/")) parse_float(flag, part, 0, 1e9);
        } else {
            for (std::string_view part : lists ? split(value, ",") : std::vector<std::string_view>{value}) {
                if (name == "-sm") {
                    if (part != "none" && part != "layer" && part != "row")
                        usage_error("{} must be none, layer or row, got '{}'", flag, part);
                } else {
                    parse_int(flag, part, name == "-ngl" ? -1 : 0, 1 << 20);
                }
            }
        }
        if (given_.find(name) == std::string::npos) given_ += given_.empty() ? std::string(name) : ", " + std::string(name);
        return true;
    }

    // The one note, when any GPU flag was given.
    void note(std::string_view tool) const {
        if (!given_.empty())
            fmt::print(stderr, "{}: note: {} ignored: kiln runs on the CPU, there is no GPU to offload to\n", tool, given_);
    }

private:
    static std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
        std::vector<std::string_view> parts;
        size_t start = 0;
        while (true) {
            const size_t end = text.find_first_of(separators, start);
            parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
            if (end == std::string_view::npos) return parts;
            start = end + 1;
        }
    }

    std::string given_;
};

}  // namespace kiln::cli
