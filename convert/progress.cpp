#include "convert/progress.h"

#include <fmt/format.h>

namespace kiln::convert {

namespace {
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
double mib(uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }
}  // namespace

Progress::Progress(std::FILE* out, uint64_t total_bytes, bool enabled)
    : out_(out), total_(total_bytes), enabled_(enabled) {}

void Progress::update(uint64_t done, std::string_view what) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_ < kRedrawInterval) return;
    last_ = now;
    const double percent = total_ == 0 ? 100.0 : 100.0 * static_cast<double>(done) / static_cast<double>(total_);
    fmt::print(out_, "\r\033[K[{:3.0f}%] {:.1f} / {:.1f} MiB  {}", percent, mib(done), mib(total_), what);
    std::fflush(out_);
}

void Progress::status(std::string_view what) {
    if (!enabled_) return;
    fmt::print(out_, "\r\033[K{}", what);
    std::fflush(out_);
}

void Progress::clear() {
    if (!enabled_) return;
    fmt::print(out_, "\r\033[K");
    std::fflush(out_);
}

}  // namespace kiln::convert
