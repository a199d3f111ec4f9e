#include "engine/train/train_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
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

// Training loss per step (thin, grey), its running mean (blue) and the
// evaluated training (green) and validation (red) losses as points; with
// accuracy columns also the held-out exact match, greedy (orange) and beam
// search (purple), as lines against a 0..100% axis on the right.
void TrainLog::write_svg(const std::filesystem::path& path) const {
    constexpr double W = 800, H = 480, left = 60, top = 30, bottom = 50;
    const double right = accuracy_ ? 50 : 20;
    double lo = 1e300, hi = -1e300;
    int64_t last = 1;
    for (const LogRow& r : rows_) {
        if (std::isfinite(r.loss)) lo = std::min(lo, r.loss), hi = std::max(hi, r.loss);
        for (const auto& e : {r.eval_train, r.eval_val})
            if (e) lo = std::min(lo, *e), hi = std::max(hi, *e);
        last = std::max(last, r.step);
    }
    if (!(hi > lo)) lo = 0, hi = 1;
    const auto x = [&](double step) { return left + (W - left - right) * step / static_cast<double>(last); };
    const auto y = [&](double loss) { return top + (H - top - bottom) * (hi - loss) / (hi - lo); };
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n"
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        "<text x=\"{}\" y=\"18\">kiln-train loss (grey: per step, blue: running mean of 50, green: eval train, red: eval validation)</text>\n",
        W, H, left);
    if (accuracy_)
        svg += fmt::format("<text x=\"{}\" y=\"{}\">held-out exact match, right axis (orange: greedy, purple: beam search)</text>\n",
                           left, H - 30);
    for (int i = 0; i <= 4; ++i) {
        const double v = lo + (hi - lo) * i / 4.0;
        svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"5\" y=\"{:.1f}\">{:.3f}</text>\n",
                           left, W - right, y(v), y(v), y(v) + 4, v);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\">step {}</text>\n", W / 2, H - 15, last);
    const auto polyline = [&](const std::vector<std::pair<double, double>>& pts, const char* colour, double width) {
        if (pts.empty()) return;
        svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" points=\"", colour, width);
        for (auto [s, l] : pts) svg += fmt::format("{:.1f},{:.1f} ", x(s), y(l));
        svg += "\"/>\n";
    };
    std::vector<std::pair<double, double>> raw, mean;
    double window = 0.0;
    for (size_t i = 0; i < rows_.size(); ++i) {
        if (!std::isfinite(rows_[i].loss)) continue;
        raw.emplace_back(rows_[i].step, rows_[i].loss);
        window += rows_[i].loss;
        if (raw.size() > 50) window -= raw[raw.size() - 51].second;
        mean.emplace_back(rows_[i].step, window / static_cast<double>(std::min<size_t>(raw.size(), 50)));
    }
    polyline(raw, "#bbb", 1);
    polyline(mean, "#1f5fbf", 2);
    for (const LogRow& r : rows_) {
        if (r.eval_train) svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#2a2\"/>\n", x(r.step), y(*r.eval_train));
        if (r.eval_val) svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#d22\"/>\n", x(r.step), y(*r.eval_val));
    }
    if (accuracy_) {
        const auto y_percent = [&](double fraction) { return top + (H - top - bottom) * (1.0 - fraction); };
        for (int i = 0; i <= 4; ++i)
            svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}%</text>\n", W - right + 5, y_percent(i / 4.0) + 4, 25 * i);
        const auto accuracy_line = [&](std::optional<double> LogRow::*field, const char* colour) {
            std::string points;
            for (const LogRow& r : rows_)
                if (r.*field) points += fmt::format("{:.1f},{:.1f} ", x(r.step), y_percent(*(r.*field)));
            if (!points.empty())
                svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, points);
        };
        accuracy_line(&LogRow::greedy_match, "#e80");
        accuracy_line(&LogRow::beam_match, "#82c");
    }
    svg += "</svg>\n";
    write_text(path, svg);
}

}  // namespace kiln::train
