#include "engine/distributed/collective.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "engine/core/error.h"

namespace kiln {

void Collective::require_same(std::string_view what, uint64_t hash) {
    std::vector<uint64_t> all(static_cast<size_t>(size()));
    gather_all(hash, all);
    for (size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0])
            throw CollectiveError("mpi", fmt::format("rank {} has a different {} from rank 0's (hash {:016x}, rank 0 "
                                                     "{:016x}): every rank must read the same bytes",
                                                     r, what, all[r], all[0]));
}

void SingleProcess::send(std::span<const std::byte>, int to) {
    fail("mpi", "a single process has no rank {} to send to", to);
}

void SingleProcess::receive(std::span<std::byte>, int from) {
    fail("mpi", "a single process has no rank {} to receive from", from);
}

Share share_of(int64_t count, int rank, int size) noexcept {
    const int64_t base = count / size, extra = count % size;
    const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
    return {begin, begin + base + (rank < extra ? 1 : 0)};
}

namespace {

constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;

inline uint64_t mix(uint64_t h) noexcept {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return h;
}

}  // namespace

uint64_t content_hash(std::span<const std::byte> bytes, uint64_t seed) noexcept {
    uint64_t lane[4] = {seed ^ 0x243f6a8885a308d3ULL, seed ^ 0x13198a2e03707344ULL, seed ^ 0xa4093822299f31d0ULL,
                        seed ^ 0x082efa98ec4e6c89ULL};
    const std::byte* p = bytes.data();
    size_t left = bytes.size();
    while (left >= 32) {
        for (int i = 0; i < 4; ++i) {
            uint64_t w;
            std::memcpy(&w, p + 8 * i, 8);
            lane[i] = (lane[i] ^ w) * kMul;
            lane[i] ^= lane[i] >> 32;
        }
        p += 32;
        left -= 32;
    }
    uint64_t h = mix(lane[0]) ^ (mix(lane[1]) * 3) ^ (mix(lane[2]) * 5) ^ (mix(lane[3]) * 7);
    for (size_t i = 0; i < left; ++i) h = (h ^ static_cast<uint64_t>(p[i])) * kMul;
    return mix(h ^ bytes.size());
}

uint64_t file_content_hash(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("mpi", "cannot read {}: {}", path.string(), std::strerror(errno));
    std::vector<std::byte> piece(size_t{4} << 20);
    uint64_t hash = 0;
    // Whole pieces (a short read is topped up), so that every rank hashes the same pieces.
    for (bool end = false; !end;) {
        size_t filled = 0;
        while (filled < piece.size()) {
            const ssize_t got = ::read(fd, piece.data() + filled, piece.size() - filled);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                const int error = errno;
                ::close(fd);
                fail("mpi", "cannot read {}: {}", path.string(), std::strerror(error));
            }
            if (got == 0) {
                end = true;
                break;
            }
            filled += static_cast<size_t>(got);
        }
        if (filled > 0) hash = content_hash(std::span(piece.data(), filled), hash);
    }
    ::close(fd);
    return hash;
}

}  // namespace kiln
