#include "formats/checkpoint/allocation_budget.h"

#include <limits>

#include "engine/core/error.h"

namespace kiln {

AllocationBudget::AllocationBudget(uint64_t input_bytes, std::string component, std::string where)
    : input_bytes_(input_bytes),
      limit_(input_bytes > (std::numeric_limits<uint64_t>::max() - kBase) / kPerInputByte
                 ? std::numeric_limits<uint64_t>::max()
                 : kBase + kPerInputByte * input_bytes),
      component_(std::move(component)),
      where_(std::move(where)) {}

void AllocationBudget::charge(uint64_t bytes, std::string_view what) {
    if (bytes <= limit_ - used_) {
        used_ += bytes;
        return;
    }
    fail(component_, "{}: building {} would take more than {} MiB of memory, more than a file of {} bytes can need "
         "(values shared and repeated many times: a hostile or corrupt file?)",
         where_, what, limit_ >> 20, input_bytes_);
}

}  // namespace kiln
