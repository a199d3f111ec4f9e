#pragma once
#include <optional>
// Looking up and checking a model's tensors in a GGUF
// file, and turning tensors into graph leaves. Every failure is a
// kiln::Error("model", ...) naming the file, the tensor or key, and what was expected.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "formats/arch/tensor_spec.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::model_tensors {

using Role = arch::TensorRole;

// The tensor `name` with exactly `dims`, or nullptr when it is absent and not required.
const GgufTensor* find(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& dims, Role role,
                       bool required = true);
// The tensor of an architecture's spec (nullptr when it is optional and absent).
inline const GgufTensor* find(const GgufFile& f, const arch::TensorSpec& spec) {
    return find(f, spec.name, spec.dims, spec.role, !spec.optional);
}
// A head tied to the token embedding `embd_name` ([dim, n_vocab]): it must be a matrix kiln multiplies with.
const GgufTensor* find_tied_head(const GgufFile& f, int64_t dim, int64_t n_vocab, const std::string& embd_name);

// Rope frequency factors (rope_freqs.weight, f32): the angles are divided by
// them, so each must be finite and positive; kiln::Error naming the first that is not.
void check_rope_factors(const GgufFile& f, const GgufTensor& factors);

// The tensor as a weight leaf of g (1-D or 2-D): its bytes in the file
// mapping, or at `data` when given (a copy of them, e.g. in huge pages).
NodeId leaf(Graph& g, const GgufTensor& t, const std::byte* data = nullptr, std::optional<DType> type = std::nullopt);
// Rows [first, first + count) of a 2-D weight leaf (or elements of a 1-D one)
// as a leaf of its own: how a fused QKV matrix splits into Q, K and V without a copy.
NodeId leaf_rows(Graph& g, NodeId weight, int64_t first, int64_t count);

// Sum of elements and of bytes over all tensors of the file.
uint64_t parameter_count(const GgufFile& f) noexcept;
uint64_t weight_bytes(const GgufFile& f) noexcept;

}  // namespace kiln::model_tensors
