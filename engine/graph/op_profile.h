#pragma once
// Where a graph's time goes, per step label and per thread: set KILN_PROFILE=1
// and every executor adds up, for each thread, the time spent computing each
// kind of step and the time spent waiting at barriers; the table goes to
// stderr when the process exits. Off by default (one branch per step).
#include <string>

namespace kiln::op_profile {

bool enabled() noexcept;

// A step's row in the table ("MatMul ffn_up.weight", "Attention", ...);
// called while no graph runs (executor construction).
int row_of(const std::string& label);

// Called by thread `ith` of a run only, for its own column.
void add_compute(int ith, int row, double seconds) noexcept;
void add_wait(int ith, double seconds) noexcept;

}  // namespace kiln::op_profile
