#pragma once
// The trainer's random numbers: SplitMix64, whose whole state is one 64-bit
// word, so a checkpoint stores it exactly and a resumed run draws the same
// batches as an uninterrupted one.
#include <cmath>
#include <cstdint>
#include <numbers>

namespace kiln::train {

class Rng {
public:
    explicit Rng(uint64_t seed = 0) : state_(seed) {}

    uint64_t next() noexcept {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform in [0, n), n >= 1 (the modulo bias is below 2^-40 for the n used here).
    uint64_t below(uint64_t n) noexcept { return next() % n; }
    // Uniform in (0, 1).
    double uniform() noexcept { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
    // Standard normal (Box-Muller; one draw per call, two uniforms).
    double normal() noexcept {
        const double u = uniform(), v = uniform();
        return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
    }

    uint64_t state() const noexcept { return state_; }
    void set_state(uint64_t s) noexcept { state_ = s; }

private:
    uint64_t state_;
};

}  // namespace kiln::train
