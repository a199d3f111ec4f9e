#include "plot/line_chart.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <limits>

#include "engine/core/error.h"
#include "plot/colour_map.h"

namespace kiln::plot {

std::vector<double> nice_ticks(double lo, double hi, int count) {
    if (!(hi > lo)) return {lo};
    const double raw = (hi - lo) / std::max(count - 1, 1);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = magnitude;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * magnitude >= raw) {
            step = m * magnitude;
            break;
        }
    std::vector<double> ticks;
    for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
        ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    return ticks;
}

namespace {

struct Range {
    double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
    void take(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
    bool empty() const { return !(hi >= lo); }
};

std::string tick_text(double v) {
    if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3)) return fmt::format("{:.2g}", v);
    return fmt::format("{:g}", v);
}

}  // namespace

Picture draw_line_chart(const LineChart& chart, int width, int height) {
    const bool right = !chart.right_label.empty();
    const bool categories = !chart.x_categories.empty();
    Range xr, yr;
    for (const Series& s : chart.series)
        for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
            if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
            if (!s.right_axis && chart.log_y && !(s.y[i] > 0)) continue;
            xr.take(s.x[i]);
            if (!s.right_axis) yr.take(chart.log_y ? std::log10(s.y[i]) : s.y[i]);
        }
    if (xr.empty() || yr.empty())
        fail("plot", "'{}': nothing to draw (no finite{} points)", chart.title, chart.log_y ? ", positive" : "");
    if (categories) xr = {-0.5, static_cast<double>(chart.x_categories.size()) - 0.5};
    if (!(xr.hi > xr.lo)) xr = {xr.lo - 1, xr.hi + 1};
    else if (!categories) xr = {xr.lo - (xr.hi - xr.lo) * 0.02, xr.hi + (xr.hi - xr.lo) * 0.02};  // whole end markers
    if (!(yr.hi > yr.lo)) yr = {yr.lo - 0.5, yr.hi + 0.5};
    // A little room above and below the data.
    const double pad = (yr.hi - yr.lo) * 0.05;
    yr = {yr.lo - pad, yr.hi + pad};

    const double left = 78, top = 44, right_margin = right ? 70 : 24;
    const double pw = width - left - right_margin;
    // The legend sits below the plot: as many columns as its longest name allows (at most 3).
    Canvas probe(1, 1);
    double longest = 0;
    for (const Series& s : chart.series) longest = std::max(longest, probe.text_width(s.name, 11));
    const int columns = static_cast<int>(std::clamp(std::floor(pw / (longest + 44)), 1.0, 3.0));
    const double legend_rows = std::ceil(static_cast<double>(chart.series.size()) / columns);
    // Room for two rows of legend; more rows make the picture taller, never the plot smaller.
    const double extra_rows = std::max(0.0, legend_rows - 2);
    Canvas c(width, height + static_cast<int>(18 * extra_rows));
    const double ph = height - top - 56 - 36;
    const auto px = [&](double x) { return left + pw * (x - xr.lo) / (xr.hi - xr.lo); };
    const auto py = [&](double y) {
        const double v = chart.log_y ? std::log10(y) : y;
        return top + ph * (yr.hi - v) / (yr.hi - yr.lo);
    };
    const auto py_right = [&](double y) {
        return top + ph * (chart.right_max - y) / (chart.right_max - chart.right_min);
    };
    // The title in one line: smaller type when it is long.
    double title_size = 15;
    while (title_size > 9 && left + c.text_width(chart.title, title_size, true) > width - 8) title_size -= 1;
    c.text(left, 26, chart.title, title_size, kBlack, Align::Left, 0, true);

    // y ticks: numbers, or decades (and 2, 5 between them when few decades) on a log axis.
    std::vector<double> y_ticks;
    if (chart.log_y) {
        const double decades = yr.hi - yr.lo;
        for (double e = std::floor(yr.lo); e <= std::ceil(yr.hi); ++e)
            for (double m : decades < 1 ? std::vector<double>{1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9}
                            : decades < 2.5 ? std::vector<double>{1, 2, 5}
                                            : std::vector<double>{1}) {
                const double v = m * std::pow(10.0, e);
                if (std::log10(v) >= yr.lo && std::log10(v) <= yr.hi) y_ticks.push_back(v);
            }
    } else {
        y_ticks = nice_ticks(yr.lo, yr.hi);
    }
    for (double v : y_ticks) {
        const double y = py(v);
        if (y < top - 0.5 || y > top + ph + 0.5) continue;
        c.line(left, y, left + pw, y, kGridLine);
        c.line(left - 5, y, left, y, kBlack);
        c.text(left - 8, y + 4, tick_text(v), 11, kBlack, Align::Right);
    }
    if (categories) {
        for (size_t i = 0; i < chart.x_categories.size(); ++i) {
            const double x = px(static_cast<double>(i));
            c.line(x, top + ph, x, top + ph + 5, kBlack);
            c.text(x, top + ph + 18, chart.x_categories[i], 11, kBlack, Align::Centre);
        }
    } else {
        for (double v : nice_ticks(xr.lo, xr.hi, 8)) {
            const double x = px(v);
            if (x < left - 0.5 || x > left + pw + 0.5) continue;
            c.line(x, top, x, top + ph, kGridLine);
            c.line(x, top + ph, x, top + ph + 5, kBlack);
            c.text(x, top + ph + 18, tick_text(v), 11, kBlack, Align::Centre);
        }
    }
    if (right) {
        for (int i = 0; i <= 4; ++i) {
            const double v = chart.right_min + (chart.right_max - chart.right_min) * i / 4.0;
            const double y = py_right(v);
            c.line(left + pw, y, left + pw + 5, y, kBlack);
            c.text(left + pw + 8, y + 4, chart.right_percent ? fmt::format("{}%", 25 * i) : tick_text(v), 11);
        }
        c.text(width - 12, top + ph / 2, chart.right_label, 12, kBlack, Align::Centre, std::numbers::pi / 2);
    }
    c.line(left, top + ph, left + pw, top + ph, kBlack);
    c.line(left, top, left, top + ph, kBlack);
    if (right) c.line(left + pw, top, left + pw, top + ph, kBlack);
    c.text(left + pw / 2, top + ph + 38, chart.x_label, 12, kBlack, Align::Centre);
    c.text(18, top + ph / 2, chart.y_label, 12, kBlack, Align::Centre, -std::numbers::pi / 2);

    // The data, clipped to the plot area.
    cairo_t* cr = c.cr();
    cairo_save(cr);
    cairo_rectangle(cr, left, top, pw, ph);
    cairo_clip(cr);
    for (const Series& s : chart.series) {
        const auto y_of = [&](double y) { return s.right_axis ? py_right(y) : py(y); };
        const auto usable = [&](size_t i) {
            return std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && (s.right_axis || !chart.log_y || s.y[i] > 0);
        };
        const size_t n = std::min(s.x.size(), s.y.size());
        cairo_set_source_rgb(cr, s.colour.r, s.colour.g, s.colour.b);
        if (s.line) {
            cairo_set_line_width(cr, s.width);
            cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
            bool pen_down = false;
            for (size_t i = 0; i < n; ++i) {
                if (!usable(i)) {
                    pen_down = false;
                    continue;
                }
                if (pen_down) cairo_line_to(cr, px(s.x[i]), y_of(s.y[i]));
                else cairo_move_to(cr, px(s.x[i]), y_of(s.y[i]));
                pen_down = true;
            }
            cairo_stroke(cr);
        }
        if (s.markers)
            for (size_t i = 0; i < n; ++i)
                if (usable(i)) {
                    cairo_arc(cr, px(s.x[i]), y_of(s.y[i]), 3.5, 0, 2 * std::numbers::pi);
                    cairo_fill(cr);
                }
    }
    cairo_restore(cr);

    // The legend: a short line or dot, then the name.
    const double column = pw / columns;
    for (size_t i = 0; i < chart.series.size(); ++i) {
        const Series& s = chart.series[i];
        const double x = left + column * static_cast<double>(i % static_cast<size_t>(columns));
        const double y = top + ph + 58 + 18 * std::floor(static_cast<double>(i) / columns);
        if (s.line) c.line(x, y - 4, x + 22, y - 4, s.colour, s.width);
        if (s.markers) {
            cairo_set_source_rgb(cr, s.colour.r, s.colour.g, s.colour.b);
            cairo_arc(cr, x + 11, y - 4, 3.5, 0, 2 * std::numbers::pi);
            cairo_fill(cr);
        }
        c.text(x + 28, y, s.name, 11);
    }
    return c.encode();
}

}  // namespace kiln::plot
