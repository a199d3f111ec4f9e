#include "engine/train/train_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "engine/core/error.h"
#include "formats/io/atomic_file.h"

namespace kiln::train {

namespace {

constexpr const char* kHeader = "step,loss,lr,grad_norm,tokens_per_s,eval_train_loss,eval_val_loss";
constexpr const char* kAccuracyColumns = ",greedy_exact_match,beam_exact_match";

std::string header(bool accuracy) { return std::string(kHeader) + (accuracy ? kAccuracyColumns : ""); }

void write_text(const std::filesystem::path& path, const std::string& text) {
    AtomicFile file(path);
    file.write({reinterpret_cast<const std::byte*>(text.data()), text.size()});
    file.commit();
}

std::string optional_number(const std::optional<double>& v) { return v ? fmt::format("{:.6f}", *v) : ""; }

}  // namespace

std::string format_duration(double seconds) {
    const auto s = static_cast<int64_t>(seconds);
    if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
    if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

void TrainLog::write_csv(const std::filesystem::path& path) const {
    std::string text = header(accuracy_) + "\n";
    for (const LogRow& r : rows_) {
        text += fmt::format("{},{:.6f},{:.6e},{:.6f},{:.1f},{},{}", r.step, r.loss, r.lr, r.grad_norm, r.tokens_per_s,
                            optional_number(r.eval_train), optional_number(r.eval_val));
        if (accuracy_) text += fmt::format(",{},{}", optional_number(r.greedy_match), optional_number(r.beam_match));
        text += "\n";
    }
    write_text(path, text);
}

TrainLog TrainLog::read_csv(const std::filesystem::path& path, int64_t last_step, bool accuracy) {
    TrainLog log(accuracy);
    std::ifstream in(path);
    if (!in) return log;
    std::string line;
    if (!std::getline(in, line) || line != header(accuracy))
        fail("log", "{} is not a kiln-train CSV log{}", path.string(), accuracy ? " with accuracy columns" : "");
    while (std::getline(in, line)) {
        std::vector<std::string> cells;
        std::stringstream ss(line);
        std::string cell;
        while (std::getline(ss, cell, ',')) cells.push_back(cell);
        if (!line.empty() && line.back() == ',') cells.emplace_back();
        if (cells.size() != (accuracy ? 9u : 7u)) fail("log", "{}: malformed row '{}'", path.string(), line);
        try {
            LogRow r;
            r.step = std::stoll(cells[0]);
            r.loss = std::stod(cells[1]);
            r.lr = std::stod(cells[2]);
            r.grad_norm = std::stod(cells[3]);
            r.tokens_per_s = std::stod(cells[4]);
            if (!cells[5].empty()) r.eval_train = std::stod(cells[5]);
            if (!cells[6].empty()) r.eval_val = std::stod(cells[6]);
            if (accuracy && !cells[7].empty()) r.greedy_match = std::stod(cells[7]);
            if (accuracy && !cells[8].empty()) r.beam_match = std::stod(cells[8]);
            if (r.step <= last_step) log.rows_.push_back(r);
        } catch (const std::exception&) {
            fail("log", "{}: malformed row '{}'", path.string(), line);
        }
    }
    return log;
}

TrainLog TrainLog::read_any_csv(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::string first;
    if (!in || !std::getline(in, first)) fail("log", "cannot read {} (missing or empty)", path.string());
    const bool accuracy = first == header(true);
    if (!accuracy && first != header(false)) fail("log", "{} is not a kiln-train CSV log (its header differs)", path.string());
    return read_csv(path, std::numeric_limits<int64_t>::max(), accuracy);
}

}  // namespace kiln::train
