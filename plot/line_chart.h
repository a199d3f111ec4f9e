#pragma once
// Line charts: numbered axes with ticks and grid lines, a legend, an optional
// logarithmic y axis, and an optional second y axis on the right (0..100% for
// the reverse task's exact-match columns of a training log). The x axis may
// be numbers or named categories (kiln-bench's cache types).
#include <string>
#include <vector>

#include "plot/canvas.h"

namespace kiln::plot {

struct Series {
    std::string name;
    std::vector<double> x, y;  // NaN or infinite points are left out
    Colour colour{};
    double width = 2.0;
    bool markers = false;      // a dot at each point (sparse series: evaluations)
    bool line = true;
    bool right_axis = false;   // against the right-hand axis
};

struct LineChart {
    std::string title, x_label, y_label, right_label;  // right_label: the right axis (empty: none)
    std::vector<std::string> x_categories;             // non-empty: x values are indices into these
    bool log_y = false;
    double right_min = 0, right_max = 1;  // the right axis's range
    bool right_percent = true;            // its ticks as percentages of right_max - right_min
    std::vector<Series> series;
};

// Throws kiln::Error when no series has a finite point (and, with log_y, a positive one).
Picture draw_line_chart(const LineChart& chart, int width = 900, int height = 540);

// "Nice" tick values covering [lo, hi] (about `count` of them), for the tests too.
std::vector<double> nice_ticks(double lo, double hi, int count = 6);

}  // namespace kiln::plot
