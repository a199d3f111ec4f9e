#pragma once
// Reading PyTorch checkpoints: the zip archives torch.save writes (PyTorch
// >= 1.6), without running any of the pickle inside.
//
// Such an archive holds one folder (named after the file torch.save wrote):
//   <folder>/data.pkl      the pickled object; storages are persistent ids
//                          ('storage', torch.<Type>Storage, key, location, numel)
//   <folder>/data/<key>    each storage's raw bytes, little-endian, stored
//                          uncompressed and 64-byte aligned
//   <folder>/version, and (newer torch) <folder>/byteorder, .data/...
// data.pkl is decoded by the whitelist unpickler (formats/checkpoint/pickle.h):
// anything but dicts, lists, tuples, plain values, storages and tensors is
// refused with an error naming the class or function it refers to.
//
// The object must be a dict. Nested dicts and lists flatten to dotted names:
// {"model": {"a.weight": t}} gives tensor "model.a.weight", a list's items
// are named by index ("optimizer.param_groups.0.lr"). Leaves:
//   tensor (float32, float16, bfloat16) -> TorchTensor; other dtypes throw,
//                                          naming the tensor
//   int -> INT64, float -> FLOAT64, bool -> BOOL, str -> STRING,
//   bytes -> array of UINT8, torch dtype (e.g. torch.float16) -> STRING
//   "torch.float16"; a list or tuple of only ints/floats/bools/strings (ints
//   and floats mixed become FLOAT64; an empty list is an empty INT64 array)
//   -> an array of those
//   None and integers too big for int64 -> left out (GGUF has no such value)
// Two leaves with the same dotted name throw.
//
// Tensor data stays in the mapping when the tensor is contiguous and aligned
// to its element size (torch's layout for every parameter); a view that is
// not (a transpose, a strided slice, an expand) is copied into contiguous
// row-major order. Everything (mapping and copies) is owned by `source`,
// which Checkpoints built from this one share.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

struct TorchTensor {
    std::string name;             // dotted, e.g. "model.layers.0.attention.wq.weight"
    DType type = DType::F32;      // F32, F16 or BF16
    std::vector<int64_t> shape;   // torch order: shape.back() varies fastest; empty for a 0-dim tensor
    std::span<const std::byte> data;  // contiguous row-major, shape's product elements
    // Where the values came from, so callers can tell shared storage (tied
    // weights) from equal values: storage key, offset (elements), strides as saved.
    std::string storage;
    int64_t storage_offset = 0;
    std::vector<int64_t> stride;
};

struct TorchCheckpoint {
    std::string path;                 // the file, as given: starts error messages
    std::vector<TorchTensor> tensors;  // in the pickle's order
    std::vector<GgufEntry> values;     // non-tensor leaves, in the pickle's order
    std::shared_ptr<const void> source;  // keeps the mapping and any copies alive

    const TorchTensor* find_tensor(std::string_view name) const noexcept;
    const GgufValue* find_value(std::string_view name) const noexcept;
};

// Maps and reads a torch.save file. Throws kiln::Error ("[pytorch] ..." for the
// archive's contents, "[zip] ..." for its structure, "[io] ..." for the file).
TorchCheckpoint read_torch_checkpoint(const std::filesystem::path& path);
// The same from bytes owned by the caller (they must outlive the result and any
// Checkpoint built from it); `name` is used in error messages.
TorchCheckpoint parse_torch_checkpoint(std::span<const std::byte> bytes, std::string name);

// Where a model's state dict sits: the prefix ("", "model.", "state_dict.",
// each optionally followed by torch.compile's "_orig_mod.") under which the
// tensor `marker` (e.g. "tok_embeddings.weight") exists; none when absent.
std::optional<std::string> find_state_dict_prefix(const TorchCheckpoint& checkpoint, std::string_view marker);

// Content-based detection: a zip archive ("PK\3\4", what torch.save writes
// since 1.6) or the legacy pre-1.6 format (a pickle of torch's magic number),
// which read_torch_checkpoint refuses with a hint.
bool looks_like_torch_checkpoint(std::span<const std::byte> head) noexcept;

}  // namespace kiln
