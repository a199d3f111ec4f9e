#include "plot/colour_map.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace kiln::plot {

namespace {

struct Stop {
    double at;
    Colour c;
};

template <size_t N>
Colour interpolate(const std::array<Stop, N>& stops, double t) {
    if (!(t > stops.front().at)) return stops.front().c;  // NaN too
    for (size_t i = 1; i < N; ++i) {
        if (t <= stops[i].at) {
            const double f = (t - stops[i - 1].at) / (stops[i].at - stops[i - 1].at);
            const Colour& a = stops[i - 1].c;
            const Colour& b = stops[i].c;
            return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f};
        }
    }
    return stops.back().c;
}

}  // namespace

Colour sequential(double t) {
    static constexpr std::array<Stop, 5> stops{{{0.0, {1, 1, 1}},
                                                {0.15, {0.78, 0.86, 0.94}},
                                                {0.4, {0.42, 0.68, 0.84}},
                                                {0.7, {0.13, 0.44, 0.71}},
                                                {1.0, {0.03, 0.15, 0.35}}}};
    return interpolate(stops, t);
}

Colour diverging(double t) {
    static constexpr std::array<Stop, 5> stops{{{-1.0, {0.02, 0.19, 0.38}},
                                                {-0.5, {0.40, 0.66, 0.81}},
                                                {0.0, {1, 1, 1}},
                                                {0.5, {0.94, 0.54, 0.38}},
                                                {1.0, {0.40, 0.0, 0.12}}}};
    return interpolate(stops, t);
}

Colour series_colour(int index) {
    static constexpr std::array<Colour, 8> colours{{{0.12, 0.37, 0.75},
                                                    {0.84, 0.15, 0.16},
                                                    {0.17, 0.63, 0.17},
                                                    {1.0, 0.5, 0.05},
                                                    {0.58, 0.40, 0.74},
                                                    {0.55, 0.34, 0.29},
                                                    {0.89, 0.47, 0.76},
                                                    {0.09, 0.75, 0.81}}};
    return colours[static_cast<size_t>(std::abs(index)) % colours.size()];
}

}  // namespace kiln::plot
