#pragma once
// Colours for numbers. Both maps give exact white where a picture should show
// nothing: 0 in the sequential map (masked attention is exactly 0 and must look
// like the background), the middle in the diverging one.
#include "plot/canvas.h"

namespace kiln::plot {

// t in [0, 1] (clamped): white through blue to near black.
Colour sequential(double t);
// t in [-1, 1] (clamped): blue (−1) through white (0) to red (+1).
Colour diverging(double t);

inline constexpr Colour kWhite{1, 1, 1};
inline constexpr Colour kBlack{0, 0, 0};
inline constexpr Colour kGrey{0.45, 0.45, 0.45};  // never kFrame
inline constexpr Colour kFrame{0x80 / 255.0, 0x80 / 255.0, 0x80 / 255.0};  // around every map: tests count these
inline constexpr Colour kGridLine{0.87, 0.87, 0.87};
// Distinguishable line colours, in order of use.
Colour series_colour(int index);

}  // namespace kiln::plot
