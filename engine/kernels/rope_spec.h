#pragma once
// What a rotary position embedding does, as llama.cpp's files describe it: which
// dimensions rotate together, how the angles are scaled (linear interpolation,
// YaRN), per-frequency factors (Llama 3.1's rope_freqs), and the magnitude
// scale. Shared by the fast kernel (vector.h), its scalar twin (vector_ref.h)
// and the rope op, so the three compute one definition of the angle.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace kiln::kernels {

// Which two values of a head form a rotated pair.
enum class RopeStyle : uint8_t {
    Adjacent,  // (x[2i], x[2i+1]): llama.cpp's rope mode 0 (llama, minicpm)
    Neox,      // (x[i], x[i + n_rot/2]): mode 2 (GPT-NeoX, qwen2, phi3, gemma)
};

struct RopeSpec {
    int64_t n_heads = 0, head_dim = 0, n_rot = 0;
    float freq_base = 10000.0f;
    RopeStyle style = RopeStyle::Adjacent;
    // Angles are multiplied by freq_scale (1/factor of linear and YaRN scaling).
    float freq_scale = 1.0f;
    // YaRN: ext_factor > 0 blends the unscaled angle back in for the fast
    // frequencies (ramp between the corrected dimensions of beta_fast and
    // beta_slow over n_ctx_orig) and grows the magnitude by 1 + 0.1 ln(1/freq_scale).
    float ext_factor = 0.0f;
    float beta_fast = 32.0f, beta_slow = 1.0f;
    int64_t n_ctx_orig = 0;
    // cos and sin are multiplied by it (llama.cpp's attn_factor).
    float attn_factor = 1.0f;

    bool plain() const noexcept { return freq_scale == 1.0f && ext_factor == 0.0f && attn_factor == 1.0f; }
};

// The YaRN ramp's pair-index range [low, high], computed as ggml does (in
// float, floor/ceil, clamped to the rotated dimensions) so the ramp's corners
// fall on the same pairs.
struct YarnRange {
    float low = 0.0f, high = 0.0f;
};

inline YarnRange yarn_range(const RopeSpec& s) noexcept {
    const auto corr = [&](float rotations) {
        return static_cast<float>(s.n_rot) *
               std::log(static_cast<float>(s.n_ctx_orig) / (rotations * 2.0f * std::numbers::pi_v<float>)) /
               (2.0f * std::log(s.freq_base));
    };
    YarnRange r;
    r.low = std::max(0.0f, std::floor(corr(s.beta_fast)));
    r.high = std::min(static_cast<float>(s.n_rot - 1), std::ceil(corr(s.beta_slow)));
    return r;
}

// The scaled angle of pair i, given its unscaled angle theta (pos * base^(-2i/n_rot)
// divided by the pair's frequency factor), in double.
inline double scaled_rope_angle(const RopeSpec& s, const YarnRange& r, int64_t i, double theta) noexcept {
    const double interp = static_cast<double>(s.freq_scale) * theta;
    if (s.ext_factor == 0.0f) return interp;
    const float y = (static_cast<float>(i) - r.low) / std::max(0.001f, r.high - r.low);
    const double ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * s.ext_factor;
    return interp * (1.0 - ramp) + theta * ramp;
}

// The factor cos and sin are multiplied by.
inline double rope_magnitude(const RopeSpec& s) noexcept {
    double m = s.attn_factor;
    if (s.ext_factor != 0.0f) m *= 1.0 + 0.1 * std::log(1.0 / static_cast<double>(s.freq_scale));
    return m;
}

}  // namespace kiln::kernels
