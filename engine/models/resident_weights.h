#pragma once
// A model's weights copied out of the file mapping into anonymous memory
// backed by 2 MiB pages (transparent huge pages, madvise mode).
//
// Decoding streams every weight once per token. From a file mapping that is
// one 4 KiB page after another, each a TLB miss, and under a hypervisor each
// miss walks two page tables; 2 MiB pages cut the misses 512-fold. On the
// 2-core KVM machine kiln is tuned on, streaming reads ran ~10% faster from
// huge pages than from the mapped file. The copy costs a memcpy at load
// (~0.1 s per 500 MB) and the memory of the weights a second time (the file's
// page cache stays evictable).
//
// Skipped, leaving the file mapping in use, when KILN_MMAP=1 is set, when the
// weights exceed half the physical memory, or when the memory cannot be had.
//
// The copy is also where matrices are rearranged for the kernels: tensors
// named in `layouts` are written in that layout (quant/interleave.h) instead
// of the file's bytes. Without a copy every tensor keeps the file's layout.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "formats/gguf/gguf_file.h"

namespace kiln {

class ResidentWeights {
public:
    explicit ResidentWeights(const GgufFile& file, const std::unordered_map<std::string, DType>& layouts = {});
    ~ResidentWeights();
    ResidentWeights(const ResidentWeights&) = delete;
    ResidentWeights& operator=(const ResidentWeights&) = delete;

    // The bytes of tensor `t` of the file: the copy when there is one.
    const std::byte* data(const GgufTensor& t) const noexcept;
    bool copied() const noexcept { return base_ != nullptr; }
    // The type data(t) holds: a layout from `layouts`, or the file's type.
    DType type(const GgufTensor& t) const noexcept;

private:
    std::byte* base_ = nullptr;
    size_t size_ = 0;
    std::unordered_map<const GgufTensor*, size_t> offsets_;
    std::unordered_map<const GgufTensor*, DType> layouts_;
};

}  // namespace kiln
