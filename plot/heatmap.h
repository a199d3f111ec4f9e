#pragma once
// Heatmaps: one large map with its rows and columns labelled (an attention map
// with the tokens along both axes, a position table), or grids of small
// labelled maps (every layer and head of a model). Cells are drawn on whole
// pixels, so a cell's colour is exact (no blending with its neighbours), and
// every map has a one-pixel kFrame border.
#include <cstdint>
#include <string>
#include <vector>

#include "plot/canvas.h"

namespace kiln::plot {

// rows × cols numbers, row-major.
struct Matrix {
    int64_t rows = 0, cols = 0;
    std::vector<float> values;
    float at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
};

enum class Scale {
    Probability,  // [0, 1], sequential: 0 is white
    Signed,       // [−m, m] with m the largest |value|, diverging: 0 is white
};

struct HeatmapPicture {
    std::string title;
    std::string row_axis, col_axis;             // axis names ("query", "key")
    std::vector<std::string> row_labels, col_labels;  // empty: numbers every few cells
    Scale scale = Scale::Probability;
};

// One map, as large as fits about 900 pixels, with a colour bar.
Picture draw_heatmap(const Matrix& m, const HeatmapPicture& how);

// A grid of maps: `maps` holds rows × cols maps in row-major order, each drawn
// with its label above it ("L0 H3"). A picture may hold several grids, one
// above the other, each under its own title (an encoder-decoder's encoder,
// decoder and cross attention).
struct MapGrid {
    std::string title;
    int64_t rows = 0, cols = 0;
    std::vector<Matrix> maps;
    std::vector<std::string> labels;
};
Picture draw_heatmap_grids(const std::string& title, const std::vector<MapGrid>& grids, Scale scale = Scale::Probability);

// The pixel size of one map's cells in a grid picture, and of the grid's maps
// (exposed for the tests, which find the maps by their frames).
int grid_cell_pixels(int64_t rows, int64_t cols);

}  // namespace kiln::plot
