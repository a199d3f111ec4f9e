#pragma once
// A white picture of a given size to draw on with Cairo, encoded as a PNG in
// memory (Picture) and saved through an AtomicFile: the target holds either
// the complete new picture or what it held before, never part of one.
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

typedef struct _cairo cairo_t;
typedef struct _cairo_surface cairo_surface_t;

namespace kiln::plot {

struct Colour {
    double r = 0, g = 0, b = 0;
};

enum class Align { Left, Centre, Right };

// An encoded PNG in memory: drawn first, written once every picture and file
// of a command is ready, so that a failure while drawing writes nothing.
struct Picture {
    std::vector<unsigned char> png;
    // Writes the bytes atomically; throws kiln::Error naming the path.
    void save(const std::filesystem::path& path) const;
};

class Canvas {
public:
    // Throws kiln::Error when the size is not 1..32767 pixels each way (Cairo's limit).
    Canvas(int width, int height);
    ~Canvas();
    Canvas(const Canvas&) = delete;
    Canvas& operator=(const Canvas&) = delete;

    int width() const noexcept { return width_; }
    int height() const noexcept { return height_; }
    cairo_t* cr() const noexcept { return cr_; }

    void fill_rect(double x, double y, double w, double h, Colour c);
    void line(double x0, double y0, double x1, double y1, Colour c, double width = 1.0);
    // Text with its baseline's anchor at (x, y), aligned as asked; `angle` in
    // radians (−π/2 writes upwards). Returns the text's advance width.
    double text(double x, double y, std::string_view s, double size, Colour c = {}, Align align = Align::Left,
                double angle = 0.0, bool bold = false);
    double text_width(std::string_view s, double size, bool bold = false);

    // The picture as a PNG; throws kiln::Error when Cairo cannot encode it.
    Picture encode() const;

private:
    int width_, height_;
    cairo_surface_t* surface_ = nullptr;
    cairo_t* cr_ = nullptr;
};

}  // namespace kiln::plot
