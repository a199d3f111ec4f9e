#pragma once
// --no-mmap and --mlock, spelled and meant as llama.cpp's, for every tool that
// loads a model (engine/models/weight_placement.h).
#include <string_view>

#include "engine/models/weight_placement.h"

namespace kiln::cli {

// Takes the flag if it is one of these; false otherwise.
inline bool parse_placement_flag(std::string_view flag, WeightPlacement& placement) {
    if (flag == "--no-mmap") placement.mmap = false;
    else if (flag == "--mlock") placement.mlock = true;
    else return false;
    return true;
}

}  // namespace kiln::cli
