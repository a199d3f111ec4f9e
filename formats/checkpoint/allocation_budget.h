#pragma once
// How much memory reading one untrusted file may build. A parser that bounds
// how many values it visits can still build a lot per visit: a pickle value
// stored once in the memo and fetched a thousand times costs three bytes per
// fetch, yet each fetch may copy the whole value. Charging every byte a reader
// materialises (strings, list and dict entries, copies of memoised values,
// tensors gathered into new buffers) against a budget proportional to the
// file's size keeps a failing read within a small multiple of the input,
// whatever the file says.
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

class AllocationBudget {
public:
    // Room for everything a real file of this size needs (its values are
    // small; tensors stay in the mapping), and a little more. Half of the
    // 64 MiB + 4x input that a failing read's whole process must stay within,
    // leaving the rest for the program itself and the allocator's slack.
    static constexpr uint64_t kBase = uint64_t{32} << 20;
    static constexpr uint64_t kPerInputByte = 2;

    // `component` and `where` (the file) start the error message.
    AllocationBudget(uint64_t input_bytes, std::string component, std::string where);

    // Counts `bytes` more; past the budget: kiln::Error naming `what` was being built.
    void charge(uint64_t bytes, std::string_view what);

    uint64_t limit() const noexcept { return limit_; }
    uint64_t used() const noexcept { return used_; }

private:
    uint64_t input_bytes_, limit_, used_ = 0;
    std::string component_, where_;
};

}  // namespace kiln
