#include "engine/train/schedule.h"

#include <cmath>
#include <numbers>

namespace kiln::train {

double LrSchedule::at(int64_t step) const noexcept {
    if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup + 1);
    if (step >= decay_steps) return min_lr;
    const double ratio = static_cast<double>(step - warmup) / static_cast<double>(decay_steps - warmup);
    const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
    return min_lr + coeff * (lr - min_lr);
}

}  // namespace kiln::train
