#include "plot/heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/core/error.h"
#include "plot/colour_map.h"

namespace kiln::plot {

namespace {

Colour colour_of(float v, Scale scale, double range) {
    if (scale == Scale::Probability) return sequential(v);
    return diverging(range > 0 ? v / range : 0.0);
}

double range_of(const Matrix& m) {
    double range = 0;
    for (float v : m.values)
        if (std::isfinite(v)) range = std::max(range, static_cast<double>(std::fabs(v)));
    return range;
}

// The cells at whole pixels from (x, y), `cell` pixels each, inside a frame.
void paint_cells(Canvas& c, const Matrix& m, int x, int y, int cell_w, int cell_h, Scale scale, double range) {
    for (int64_t r = 0; r < m.rows; ++r)
        for (int64_t k = 0; k < m.cols; ++k)
            c.fill_rect(x + static_cast<double>(k * cell_w), y + static_cast<double>(r * cell_h), cell_w, cell_h,
                        colour_of(m.at(r, k), scale, range));
    const double w = static_cast<double>(m.cols * cell_w), h = static_cast<double>(m.rows * cell_h);
    c.fill_rect(x - 1, y - 1, w + 2, 1, kFrame);
    c.fill_rect(x - 1, y + h, w + 2, 1, kFrame);
    c.fill_rect(x - 1, y - 1, 1, h + 2, kFrame);
    c.fill_rect(x + w, y - 1, 1, h + 2, kFrame);
}

void check_matrix(const Matrix& m) {
    if (m.rows < 1 || m.cols < 1 || m.values.size() != static_cast<size_t>(m.rows * m.cols))
        fail("plot", "a heatmap of {}x{} with {} values", m.rows, m.cols, m.values.size());
}

// Ticks every `step` cells so that labels do not overlap.
int64_t label_step(int64_t count, int cell, double font) {
    int64_t step = 1;
    while (static_cast<double>(step * cell) < font * 1.2 && step < count) step *= 2;
    return step;
}

void colour_bar(Canvas& c, double x, double y, double h, Scale scale, double range) {
    const int steps = static_cast<int>(h);
    for (int i = 0; i < steps; ++i) {
        const double t = 1.0 - (i + 0.5) / steps;
        const Colour col = scale == Scale::Probability ? sequential(t) : diverging(2 * t - 1);
        c.fill_rect(x, y + i, 14, 1, col);
    }
    c.fill_rect(x - 1, y - 1, 16, 1, kGrey);
    c.fill_rect(x - 1, y + h, 16, 1, kGrey);
    c.fill_rect(x - 1, y - 1, 1, h + 2, kGrey);
    c.fill_rect(x + 14, y - 1, 1, h + 2, kGrey);
    const double top = scale == Scale::Probability ? 1.0 : range;
    const double bottom = scale == Scale::Probability ? 0.0 : -range;
    c.text(x + 20, y + 4, fmt::format("{:.3g}", top), 11);
    c.text(x + 20, y + h / 2 + 4, fmt::format("{:.3g}", (top + bottom) / 2), 11);
    c.text(x + 20, y + h + 4, fmt::format("{:.3g}", bottom), 11);
}

}  // namespace

Picture draw_heatmap(const Matrix& m, const HeatmapPicture& how) {
    check_matrix(m);
    const int cell_w = static_cast<int>(std::clamp<int64_t>(900 / m.cols, 1, 40));
    const int cell_h = static_cast<int>(std::clamp<int64_t>(900 / m.rows, 1, 40));
    const double font = std::clamp(std::min(cell_w, cell_h) * 0.8, 9.0, 13.0);
    Canvas probe(1, 1);
    double row_label_w = 0, col_label_h = 0;
    const auto label = [](const std::vector<std::string>& labels, int64_t i) {
        return labels.empty() ? fmt::format("{}", i) : labels[static_cast<size_t>(i)];
    };
    for (int64_t r = 0; r < m.rows; ++r) row_label_w = std::max(row_label_w, probe.text_width(label(how.row_labels, r), font));
    for (int64_t k = 0; k < m.cols; ++k) col_label_h = std::max(col_label_h, probe.text_width(label(how.col_labels, k), font));
    row_label_w = std::min(row_label_w, 220.0);
    col_label_h = std::min(col_label_h, 220.0);
    const int left = static_cast<int>(row_label_w) + 40, top = 44;
    const int map_w = static_cast<int>(m.cols * cell_w), map_h = static_cast<int>(m.rows * cell_h);
    const int width = std::max(left + map_w + 90, left + static_cast<int>(probe.text_width(how.title, 15, true)) + 20);
    const int height = top + map_h + static_cast<int>(col_label_h) + 40;
    Canvas c(width, height);
    c.text(left, 24, how.title, 15, kBlack, Align::Left, 0, true);
    const double range = range_of(m);
    paint_cells(c, m, left, top, cell_w, cell_h, how.scale, range);
    const int64_t row_step = label_step(m.rows, cell_h, font), col_step = label_step(m.cols, cell_w, font);
    for (int64_t r = 0; r < m.rows; r += row_step)
        c.text(left - 6, top + (static_cast<double>(r) + 0.5) * cell_h + font * 0.35, label(how.row_labels, r), font, kBlack,
               Align::Right);
    for (int64_t k = 0; k < m.cols; k += col_step)
        c.text(left + (static_cast<double>(k) + 0.5) * cell_w + font * 0.35, top + map_h + 6, label(how.col_labels, k), font,
               kBlack, Align::Right, -std::numbers::pi / 2);
    c.text(14, top + map_h / 2.0, how.row_axis, 12, kGrey, Align::Centre, -std::numbers::pi / 2);
    c.text(left + map_w / 2.0, height - 10, how.col_axis, 12, kGrey, Align::Centre);
    colour_bar(c, left + map_w + 16, top, std::min(map_h, 300), how.scale, range);
    return c.encode();
}

int grid_cell_pixels(int64_t rows, int64_t cols) {
    return static_cast<int>(std::clamp<int64_t>(160 / std::max(rows, cols), 1, 24));
}

Picture draw_heatmap_grids(const std::string& title, const std::vector<MapGrid>& grids, Scale scale) {
    constexpr int kGap = 14, kLabel = 16, kSection = 28, kMargin = 16;
    int width = 0, height = 40;
    for (const MapGrid& grid : grids) {
        if (grid.rows < 1 || grid.cols < 1 || grid.maps.size() != static_cast<size_t>(grid.rows * grid.cols) ||
            grid.labels.size() != grid.maps.size())
            fail("plot", "a grid of {}x{} maps with {} maps and {} labels", grid.rows, grid.cols, grid.maps.size(),
                 grid.labels.size());
        const Matrix& first = grid.maps.front();
        for (const Matrix& m : grid.maps) check_matrix(m);
        const int cell = grid_cell_pixels(first.rows, first.cols);
        const int map_w = static_cast<int>(first.cols * cell), map_h = static_cast<int>(first.rows * cell);
        width = std::max(width, 2 * kMargin + static_cast<int>(grid.cols) * (std::max(map_w, 60) + kGap));
        height += kSection + static_cast<int>(grid.rows) * (map_h + kLabel + kGap);
    }
    Canvas probe(1, 1);
    width = std::max({width, 480, kMargin + static_cast<int>(probe.text_width(title, 15, true)) + 20});
    Canvas c(width, height);
    c.text(kMargin, 24, title, 15, kBlack, Align::Left, 0, true);
    double range = 0;
    for (const MapGrid& grid : grids)
        for (const Matrix& m : grid.maps) range = std::max(range, range_of(m));
    int y = 40;
    for (const MapGrid& grid : grids) {
        const Matrix& first = grid.maps.front();
        const int cell = grid_cell_pixels(first.rows, first.cols);
        const int map_w = static_cast<int>(first.cols * cell), map_h = static_cast<int>(first.rows * cell);
        const int pitch_x = std::max(map_w, 60) + kGap, pitch_y = map_h + kLabel + kGap;
        if (!grid.title.empty()) c.text(kMargin, y + 18, grid.title, 13, kBlack, Align::Left, 0, true);
        y += kSection;
        for (int64_t r = 0; r < grid.rows; ++r)
            for (int64_t k = 0; k < grid.cols; ++k) {
                const size_t i = static_cast<size_t>(r * grid.cols + k);
                const int x0 = kMargin + static_cast<int>(k) * pitch_x, y0 = y + static_cast<int>(r) * pitch_y;
                c.text(x0, y0 + 11, grid.labels[i], 10, kBlack);
                paint_cells(c, grid.maps[i], x0, y0 + kLabel, cell, cell, scale, range);
            }
        y += static_cast<int>(grid.rows) * pitch_y;
    }
    return c.encode();
}

}  // namespace kiln::plot
