#include "engine/models/resident_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/quant/interleave.h"

namespace kiln {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlignment = 64;  // every tensor starts on a cache line

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool copy_wanted(size_t bytes) {
    const char* env = std::getenv("KILN_MMAP");
    if (env != nullptr && std::string_view(env) == "1") return false;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return false;
    return bytes <= static_cast<size_t>(pages) * static_cast<size_t>(page) / 2;
}

}  // namespace

ResidentWeights::ResidentWeights(const GgufFile& file, const std::unordered_map<std::string, DType>& layouts) {
    size_t total = 0;
    for (const GgufTensor& t : file.tensors()) total += round_up(t.data.size(), kAlignment);
    if (total == 0 || !copy_wanted(total)) return;
    const size_t size = round_up(total, kHugePage);
    // Over-allocate by one huge page so the start can be aligned to one.
    void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return;
    auto* begin = static_cast<std::byte*>(raw);
    auto* aligned = reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(begin), kHugePage));
    // Trim the unaligned head and tail so that only the aligned range stays mapped.
    if (aligned > begin) ::munmap(begin, static_cast<size_t>(aligned - begin));
    const size_t tail = static_cast<size_t>(begin + size + kHugePage - (aligned + size));
    if (tail > 0) ::munmap(aligned + size, tail);
    ::madvise(aligned, size, MADV_HUGEPAGE);  // advice only: without THP the copy still works
    base_ = aligned;
    size_ = size;
    size_t offset = 0;
    for (const GgufTensor& t : file.tensors()) {
        const auto layout = layouts.find(t.name);
        if (layout != layouts.end() && t.dims.size() == 2) {
            quant::interleave_rows(t.type, t.data.data(), static_cast<int64_t>(t.dims[1]),
                                   static_cast<int64_t>(t.dims[0]), base_ + offset);
            layouts_.emplace(&t, layout->second);
        } else if (!t.data.empty()) {
            std::memcpy(base_ + offset, t.data.data(), t.data.size());
        }
        offsets_.emplace(&t, offset);
        offset += round_up(t.data.size(), kAlignment);
    }
    ::mprotect(base_, size_, PROT_READ);  // weights are never written
}

ResidentWeights::~ResidentWeights() {
    if (base_ != nullptr) ::munmap(base_, size_);
}

DType ResidentWeights::type(const GgufTensor& t) const noexcept {
    const auto it = layouts_.find(&t);
    return it == layouts_.end() ? t.type : it->second;
}

const std::byte* ResidentWeights::data(const GgufTensor& t) const noexcept {
    if (base_ == nullptr) return t.data.data();
    const auto it = offsets_.find(&t);
    return it == offsets_.end() ? t.data.data() : base_ + it->second;
}

}  // namespace kiln
