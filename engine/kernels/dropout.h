#pragma once
// Dropout's keep/drop decisions, shared by the dropout op and sequence attention's
// probability dropout: element i of a node is kept when uniform(key, i) >= p.
// A hash of (seed, salt, index) rather than a generator: no state is shared
// between threads, the mask is the same for any thread count, and a backward
// pass regenerates it from the same seed and salt instead of storing it.
#include <cstdint>

namespace kiln::kernels::dropout {

// SplitMix64's finalizer: a bijection that mixes every input bit into every output bit.
inline uint64_t mix(uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Constants that keep the masks of different kinds of dropout node apart
// under one seed and salt (the first words of SHA-256's initial hash).
inline constexpr uint64_t kElementDomain = 0xbb67ae8584caa73bULL;    // the dropout op
inline constexpr uint64_t kAttentionDomain = 0x6a09e667f3bcc909ULL;  // attention probabilities

// The hash key of one node: the run's seed (an I32[2] input: low, high words)
// mixed with the node's salt and its kind's domain.
inline uint64_t key(const int32_t* seed, uint64_t salt, uint64_t domain) noexcept {
    const uint64_t s =
        static_cast<uint64_t>(static_cast<uint32_t>(seed[0])) | (static_cast<uint64_t>(static_cast<uint32_t>(seed[1])) << 32);
    return mix(s ^ mix(salt + domain));
}

// Uniform in [0, 1) with 24 bits, from the element's index.
inline float uniform(uint64_t key, uint64_t index) noexcept {
    return static_cast<float>(mix(key + index * 0x9e3779b97f4a7c15ULL) >> 40) * (1.0f / 16777216.0f);
}

// out[i] = in[i] / (1 - p) where element first_index + i is kept, else 0, for
// i in [0, n). Branch-free, so that the compiler vectorizes the integer hash.
void apply(const float* in, float* out, int64_t n, uint64_t key, uint64_t first_index, float p) noexcept;

}  // namespace kiln::kernels::dropout

namespace kiln::kernels::ref::dropout {

// The scalar twin of kernels::dropout::apply (same values; a dropped negative
// element is +0 here where the fast kernel gives -0).
void apply(const float* in, float* out, int64_t n, uint64_t key, uint64_t first_index, float p) noexcept;

}  // namespace kiln::kernels::ref::dropout
