#include "plot/canvas.h"

#include <cairo.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/io/atomic_file.h"

namespace kiln::plot {

Canvas::Canvas(int width, int height) : width_(width), height_(height) {
    if (width < 1 || height < 1 || width > 32767 || height > 32767)
        fail("plot", "a picture of {}x{} pixels: each side must be 1..32767", width, height);
    surface_ = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    if (cairo_surface_status(surface_) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surface_);
        fail("plot", "cannot make a {}x{} picture: {}", width, height,
             cairo_status_to_string(cairo_surface_status(surface_)));
    }
    cr_ = cairo_create(surface_);
    fill_rect(0, 0, width, height, {1, 1, 1});
}

Canvas::~Canvas() {
    cairo_destroy(cr_);
    cairo_surface_destroy(surface_);
}

void Canvas::fill_rect(double x, double y, double w, double h, Colour c) {
    cairo_set_source_rgb(cr_, c.r, c.g, c.b);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
}

void Canvas::line(double x0, double y0, double x1, double y1, Colour c, double width) {
    cairo_set_source_rgb(cr_, c.r, c.g, c.b);
    cairo_set_line_width(cr_, width);
    cairo_move_to(cr_, x0, y0);
    cairo_line_to(cr_, x1, y1);
    cairo_stroke(cr_);
}

namespace {

void select_font(cairo_t* cr, double size, bool bold) {
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

}  // namespace

double Canvas::text_width(std::string_view s, double size, bool bold) {
    select_font(cr_, size, bold);
    const std::string text(s);
    cairo_text_extents_t e;
    cairo_text_extents(cr_, text.c_str(), &e);
    return e.x_advance;
}

double Canvas::text(double x, double y, std::string_view s, double size, Colour c, Align align, double angle, bool bold) {
    const double w = text_width(s, size, bold);
    const std::string text(s);
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    cairo_rotate(cr_, angle);
    const double shift = align == Align::Left ? 0.0 : align == Align::Centre ? -w / 2 : -w;
    cairo_move_to(cr_, shift, 0);
    cairo_set_source_rgb(cr_, c.r, c.g, c.b);
    cairo_show_text(cr_, text.c_str());
    cairo_restore(cr_);
    return w;
}

Picture Canvas::encode() const {
    cairo_surface_flush(surface_);
    Picture picture;
    const auto append = [](void* closure, const unsigned char* data, unsigned int length) {
        auto* out = static_cast<std::vector<unsigned char>*>(closure);
        out->insert(out->end(), data, data + length);
        return CAIRO_STATUS_SUCCESS;
    };
    const cairo_status_t status = cairo_surface_write_to_png_stream(surface_, append, &picture.png);
    if (status != CAIRO_STATUS_SUCCESS) fail("plot", "cannot encode a PNG: {}", cairo_status_to_string(status));
    return picture;
}

void Picture::save(const std::filesystem::path& path) const {
    AtomicFile file(path);
    file.write({reinterpret_cast<const std::byte*>(png.data()), png.size()});
    file.commit();
}

}  // namespace kiln::plot
