#include "engine/models/resident_weights.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/platform.h"
#include "engine/quant/interleave.h"

#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON  // the older BSD spelling
#endif

namespace kiln {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlignment = 64;  // every copied tensor starts on a cache line

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t round_down(size_t n, size_t to) { return n / to * to; }

size_t page_size() {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// `size` bytes of anonymous memory starting on a 2 MiB boundary, advised to be
// backed by huge pages where the system takes that advice (Linux's transparent
// huge pages; elsewhere the kernel picks page sizes itself). Throws when the
// system refuses the memory.
std::byte* map_huge_page_aligned(size_t size) {
    // Over-allocate by one huge page so the start can be aligned to one.
    void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        fail("model", "cannot allocate {:.1f} MiB for the copied weights: {}", mib(size), std::strerror(errno));
    auto* begin = static_cast<std::byte*>(raw);
    auto* aligned = reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(begin), kHugePage));
    // Trim the unaligned head and tail so that only the aligned range stays mapped.
    if (aligned > begin) ::munmap(begin, static_cast<size_t>(aligned - begin));
    const size_t tail = static_cast<size_t>(begin + size + kHugePage - (aligned + size));
    if (tail > 0) ::munmap(aligned + size, tail);
#if KILN_OS_LINUX && defined(MADV_HUGEPAGE)
    ::madvise(aligned, size, MADV_HUGEPAGE);  // advice only: without THP the copy still works
#endif
    return aligned;
}

// Once a tensor is copied, the mapped pages it was read from are no longer
// used: they leave this process's resident set (they stay in the page cache;
// a later read faults them back). Only the pages wholly inside the tensor, so
// a neighbour read from the mapping keeps its pages mapped. Never on bytes the
// caller owns (GgufFile::parse): MADV_DONTNEED would zero those. Elsewhere
// POSIX's advice, which the kernel may act on or not (glibc ignores it): the
// pages then stay resident until memory is short, the same bytes either way.
void release_mapped_pages(const GgufFile& file, std::span<const std::byte> bytes) {
    if (!file.is_mapped() || bytes.empty()) return;
    const auto begin = round_up(reinterpret_cast<uintptr_t>(bytes.data()), page_size());
    const auto end = round_down(reinterpret_cast<uintptr_t>(bytes.data() + bytes.size()), page_size());
    if (end <= begin) return;
#if KILN_OS_LINUX
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
    ::posix_madvise(reinterpret_cast<void*>(begin), end - begin, POSIX_MADV_DONTNEED);
#endif
}

std::string memlock_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
    if (limit.rlim_cur == RLIM_INFINITY) return "unlimited";
    return fmt::format("{} KiB", limit.rlim_cur / 1024);
}

}  // namespace

ResidentWeights::ResidentWeights(const GgufFile& file, WeightPlacement placement,
                                 const std::unordered_map<std::string, DType>& layouts,
                                 const std::function<bool(std::string_view)>& used) {
    residence_.placement = placement;
    // A copy for every tensor with --no-mmap; by default only for those the
    // kernels read rearranged.
    std::vector<std::pair<const GgufTensor*, std::optional<DType>>> to_copy;
    size_t total = 0;
    for (const GgufTensor& t : file.tensors()) {
        if (used && !used(t.name)) continue;
        const auto layout = layouts.find(t.name);
        std::optional<DType> rearranged;
        if (layout != layouts.end() && t.dims.size() == 2) rearranged = layout->second;
        if (t.data.empty() || (placement.mmap && !rearranged)) {
            residence_.mapped_bytes += t.data.size();
            continue;
        }
        to_copy.emplace_back(&t, rearranged);
        total += round_up(t.data.size(), kAlignment);
    }
    if (total > 0) {
        size_ = round_up(total, kHugePage);
        base_ = map_huge_page_aligned(size_);
    }
    try {
        size_t offset = 0;
        for (const auto& [t, rearranged] : to_copy) {
            if (rearranged) {
                quant::interleave_rows(*rearranged, t->data.data(), static_cast<int64_t>(t->dims[1]),
                                       static_cast<int64_t>(t->dims[0]), base_ + offset);
                layouts_.emplace(t, *rearranged);
            } else {
                std::memcpy(base_ + offset, t->data.data(), t->data.size());
            }
            release_mapped_pages(file, t->data);
            offsets_.emplace(t, offset);
            offset += round_up(t->data.size(), kAlignment);
            residence_.copies.push_back({t->name, rearranged.value_or(t->type), t->data.size()});
            residence_.copied_bytes += t->data.size();
        }
    } catch (...) {  // out of memory for the bookkeeping: the destructor will not run
        if (base_ != nullptr) ::munmap(base_, size_);
        throw;
    }
    if (base_ != nullptr) ::mprotect(base_, size_, PROT_READ);  // weights are never written
    if (placement.mlock) lock(file, used);
    // No madvise on the mapping: measured on the 134M Q8_0 file (2-core KVM
    // guest, kernel 6.18, ext4), MADV_HUGEPAGE, MADV_WILLNEED and
    // MADV_POPULATE_READ left tg64 within the noise (50-58 t/s either way) and
    // a cold-cache `kiln -n 4` at 0.27-0.42 s of wall time either way
    // (POPULATE_READ only moved 0.1-0.2 s of faults into the load), and
    // MADV_SEQUENTIAL made it slower (0.34-0.44 s). The kernel already maps the
    // page cache's large folios with 2 MiB entries where they are aligned
    // (FilePmdMapped: 46 of the 137 MiB, with or without MADV_HUGEPAGE).
}

ResidentWeights::~ResidentWeights() {
    if (base_ != nullptr) ::munmap(base_, size_);
}

// Locks the copies and the mapped pages of every tensor read from the mapping.
// The lock on mapped pages lasts as long as the mapping (another model of the
// same file may rely on it, and locks do not nest).
void ResidentWeights::lock(const GgufFile& file, const std::function<bool(std::string_view)>& used) {
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
    if (base_ != nullptr) ranges.emplace_back(reinterpret_cast<uintptr_t>(base_), reinterpret_cast<uintptr_t>(base_) + size_);
    for (const GgufTensor& t : file.tensors()) {
        if (t.data.empty() || copied(t) || (used && !used(t.name))) continue;
        const auto begin = reinterpret_cast<uintptr_t>(t.data.data());
        ranges.emplace_back(round_down(begin, page_size()), round_up(begin + t.data.size(), page_size()));
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uintptr_t, uintptr_t>> merged;
    for (const auto& r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
        else merged.push_back(r);
    }
    uint64_t wanted = 0;
    for (const auto& [begin, end] : merged) wanted += end - begin;
    for (const auto& [begin, end] : merged) {
        if (::mlock(reinterpret_cast<const void*>(begin), end - begin) != 0) {
            const int error = errno;
            fmt::print(stderr,
                       "warning: cannot lock the weights in RAM (mlock of {:.1f} MiB: {}; RLIMIT_MEMLOCK is {}, "
                       "'ulimit -l' raises it): running without the lock\n",
                       mib(wanted), std::strerror(error), memlock_limit());
            return;
        }
        residence_.locked_bytes += end - begin;
    }
}

DType ResidentWeights::type(const GgufTensor& t) const noexcept {
    const auto it = layouts_.find(&t);
    return it == layouts_.end() ? t.type : it->second;
}

const std::byte* ResidentWeights::data(const GgufTensor& t) const noexcept {
    const auto it = offsets_.find(&t);
    return it == offsets_.end() ? t.data.data() : base_ + it->second;
}

}  // namespace kiln
