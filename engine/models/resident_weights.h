#pragma once
// A model's weights where the load policy (weight_placement.h) puts them: the
// file mapping, with copies in anonymous memory only of the tensors that need
// one.
//
// By default (mmap) kiln computes from the mapping: no copy, nothing counted
// twice when two processes serve the same file, and the kernel may drop the
// pages under memory pressure. Tensors named in `layouts` are the exception:
// the kernels read them rearranged (quant/interleave.h), so each is written
// in that layout into anonymous memory, and the mapped pages it came from are
// released from this process's resident set.
//
// With --no-mmap every tensor is copied into anonymous memory advised to use
// 2 MiB pages (transparent huge pages, madvise mode). Decoding streams every
// weight once per token; from a file mapping that is one 4 KiB page after
// another, each a TLB miss, and under a hypervisor each miss walks two page
// tables. The copy costs a memcpy at load and keeps the weights out of the
// page cache's reach (README: "Weights in memory" has the figures).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/models/weight_placement.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

class ResidentWeights {
public:
    // Throws kiln::Error when the memory for the copies cannot be had.
    // `used`, when given, names the tensors this process computes with (one
    // stage of a layer split): the others are never copied, rearranged or
    // locked, so their pages of the mapping are never touched.
    ResidentWeights(const GgufFile& file, WeightPlacement placement,
                    const std::unordered_map<std::string, DType>& layouts = {},
                    const std::function<bool(std::string_view)>& used = {});
    ~ResidentWeights();
    ResidentWeights(const ResidentWeights&) = delete;
    ResidentWeights& operator=(const ResidentWeights&) = delete;

    // The bytes of tensor `t` of the file: its copy when it has one.
    const std::byte* data(const GgufTensor& t) const noexcept;
    // The type data(t) holds: a layout from `layouts`, or the file's type.
    DType type(const GgufTensor& t) const noexcept;
    // Whether `t` is read from a copy (else from the file mapping).
    bool copied(const GgufTensor& t) const noexcept { return offsets_.contains(&t); }
    const WeightResidence& residence() const noexcept { return residence_; }

private:
    void lock(const GgufFile& file, const std::function<bool(std::string_view)>& used);

    std::byte* base_ = nullptr;  // the copies, one anonymous mapping
    size_t size_ = 0;
    std::unordered_map<const GgufTensor*, size_t> offsets_;
    std::unordered_map<const GgufTensor*, DType> layouts_;
    WeightResidence residence_;
};

}  // namespace kiln
