#include "plot/loss_chart.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/core/error.h"
#include "plot/colour_map.h"
#include "plot/line_chart.h"

namespace kiln::plot {

void draw_loss_chart(const std::filesystem::path& path, const train::TrainLog& log, bool log_y) {
    using train::LogRow;
    if (log.rows().empty()) fail("plot", "the training log has no rows to draw");
    LineChart chart;
    chart.title = "kiln-train loss";
    chart.x_label = "step";
    chart.y_label = log_y ? "loss (log scale)" : "loss";
    chart.log_y = log_y;
    Series raw{"loss per step", {}, {}, {0.72, 0.72, 0.72}, 1.0};
    Series mean{"running mean of 50 steps", {}, {}, series_colour(0), 2.0};
    double window = 0;
    std::vector<double> finite;
    for (const LogRow& r : log.rows()) {
        raw.x.push_back(static_cast<double>(r.step));
        raw.y.push_back(r.loss);
        if (!std::isfinite(r.loss)) continue;
        finite.push_back(r.loss);
        window += r.loss;
        if (finite.size() > 50) window -= finite[finite.size() - 51];
        mean.x.push_back(static_cast<double>(r.step));
        mean.y.push_back(window / static_cast<double>(std::min<size_t>(finite.size(), 50)));
    }
    const auto points = [&](const char* name, std::optional<double> LogRow::*field, Colour colour, bool right) {
        Series s{name, {}, {}, colour, 2.0, true, right, right};
        for (const LogRow& r : log.rows())
            if (r.*field) s.x.push_back(static_cast<double>(r.step)), s.y.push_back(*(r.*field));
        return s;
    };
    chart.series = {raw, mean, points("eval train", &LogRow::eval_train, series_colour(2), false),
                    points("eval validation", &LogRow::eval_val, series_colour(1), false)};
    if (log.accuracy()) {
        chart.right_label = "held-out exact match";
        chart.series.push_back(points("exact match, greedy", &LogRow::greedy_match, series_colour(3), true));
        chart.series.push_back(points("exact match, beam search", &LogRow::beam_match, series_colour(4), true));
    }
    draw_line_chart(chart).save(path);
}

}  // namespace kiln::plot
