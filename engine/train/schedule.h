#pragma once
// Learning rate: linear warmup, then cosine decay to a minimum (nanoGPT's get_lr).
#include <cstdint>

namespace kiln::train {

struct LrSchedule {
    double lr = 1e-3;          // peak
    double min_lr = 1e-4;      // reached at decay_steps and kept after
    int64_t warmup = 100;      // steps of linear warmup
    int64_t decay_steps = 2000;

    // The rate of optimizer step `step` (0-based).
    double at(int64_t step) const noexcept;
};

}  // namespace kiln::train
