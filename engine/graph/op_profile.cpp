#include "engine/graph/op_profile.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace kiln::op_profile {

namespace {

constexpr int kMaxThreads = 64;
constexpr int kMaxRows = 256;

struct Cell {
    double seconds = 0;
    long calls = 0;
};

class Table {
public:
    ~Table() {
        if (labels_.empty()) return;
        int threads = 0;
        for (int t = 0; t < kMaxThreads; ++t)
            for (size_t r = 0; r < labels_.size(); ++r)
                if (cells_[t][r].calls > 0) threads = t + 1;
        std::vector<size_t> order(labels_.size());
        std::iota(order.begin(), order.end(), 0);
        const auto total = [&](size_t r) {
            double s = 0;
            for (int t = 0; t < threads; ++t) s += cells_[t][r].seconds;
            return s;
        };
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return total(a) > total(b); });
        double all = 0;
        for (size_t r = 0; r < labels_.size(); ++r) all += total(r);
        for (int t = 0; t < threads; ++t) all += wait_[t];
        std::fprintf(stderr, "\nKILN_PROFILE: seconds per thread (compute, then barrier waits)\n%-40s %10s", "step",
                     "calls");
        for (int t = 0; t < threads; ++t) std::fprintf(stderr, "   thread %-3d", t);
        std::fprintf(stderr, "  share\n");
        for (size_t r : order) {
            if (total(r) == 0) continue;
            std::fprintf(stderr, "%-40s %10ld", labels_[r].c_str(), cells_[0][r].calls);
            for (int t = 0; t < threads; ++t) std::fprintf(stderr, "   %10.4f", cells_[t][r].seconds);
            std::fprintf(stderr, "  %5.1f%%\n", 100.0 * total(r) / all);
        }
        std::fprintf(stderr, "%-40s %10s", "(barrier wait)", "");
        double waits = 0;
        for (int t = 0; t < threads; ++t) {
            std::fprintf(stderr, "   %10.4f", wait_[t]);
            waits += wait_[t];
        }
        std::fprintf(stderr, "  %5.1f%%\n", 100.0 * waits / all);
    }

    int row_of(const std::string& label) {
        const auto it = std::find(labels_.begin(), labels_.end(), label);
        if (it != labels_.end()) return static_cast<int>(it - labels_.begin());
        if (labels_.size() + 1 >= static_cast<size_t>(kMaxRows)) return kMaxRows - 1;  // "(other)"
        labels_.push_back(label);
        return static_cast<int>(labels_.size()) - 1;
    }

    void add(int ith, int row, double seconds) noexcept {
        if (ith < 0 || ith >= kMaxThreads) return;
        cells_[ith][row].seconds += seconds;
        cells_[ith][row].calls += 1;
    }

    void wait(int ith, double seconds) noexcept {
        if (ith >= 0 && ith < kMaxThreads) wait_[ith] += seconds;
    }

private:
    std::vector<std::string> labels_;
    std::vector<std::array<Cell, kMaxRows>> cells_ = std::vector<std::array<Cell, kMaxRows>>(kMaxThreads);
    std::array<double, kMaxThreads> wait_{};
};

Table& table() {
    static Table t;
    return t;
}

}  // namespace

bool enabled() noexcept {
    static const bool on = [] {
        const char* v = std::getenv("KILN_PROFILE");
        return v != nullptr && *v != '\0' && *v != '0';
    }();
    return on;
}

int row_of(const std::string& label) { return table().row_of(label); }
void add_compute(int ith, int row, double seconds) noexcept { table().add(ith, row, seconds); }
void add_wait(int ith, double seconds) noexcept { table().wait(ith, seconds); }

}  // namespace kiln::op_profile
