#pragma once
// The trainer's record: one row per optimizer step, written as CSV (and drawn
// as a PNG loss curve next to the model by plot/loss_chart.h). Both files are
// rewritten whole (atomically) each time, so they are always complete.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kiln::train {

struct LogRow {
    int64_t step = 0;  // 1-based: the row of optimizer step `step`
    double loss = 0.0, lr = 0.0, grad_norm = 0.0, tokens_per_s = 0.0;
    std::optional<double> eval_train, eval_val;  // when evaluated after this step
    // Held-out exact match (fractions), greedy and beam search: logs with accuracy columns only.
    std::optional<double> greedy_match, beam_match;
};

// A duration as the trainer reports it: "42s", "3m07s", "1h05m".
std::string format_duration(double seconds);

class TrainLog {
public:
    // accuracy: two more columns (greedy_exact_match, beam_exact_match), drawn
    // against a percentage axis on the right of the loss chart.
    explicit TrainLog(bool accuracy = false) : accuracy_(accuracy) {}
    std::vector<LogRow>& rows() noexcept { return rows_; }
    const std::vector<LogRow>& rows() const noexcept { return rows_; }
    bool accuracy() const noexcept { return accuracy_; }
    void write_csv(const std::filesystem::path& path) const;
    // Rows of an earlier CSV up to and including `last_step` (for --resume);
    // a missing file gives no rows, a malformed one (or one with other
    // columns) kiln::Error.
    static TrainLog read_csv(const std::filesystem::path& path, int64_t last_step, bool accuracy = false);
    // Every row of a CSV of either kind, told by its header (kiln-viz train);
    // a missing, empty or malformed file is kiln::Error.
    static TrainLog read_any_csv(const std::filesystem::path& path);

private:
    std::vector<LogRow> rows_;
    bool accuracy_;
};

}  // namespace kiln::train
