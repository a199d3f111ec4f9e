#pragma once
// Looking up and checking a model's tensors and hyper-parameters in a GGUF
// file, and turning tensors into graph leaves. Every failure is a
// kiln::Error("model", ...) naming the file, the tensor or key, and what was expected.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "formats/gguf/gguf_file.h"

namespace kiln::model_tensors {

enum class Role {
    Matrix,  // multiplied with: any type the matmul kernels take
    Vector,  // norm weights and biases: f32
    Table,   // embedding rows: any type that converts to float
};

// The tensor `name` with exactly `dims`, or nullptr when it is absent and not required.
const GgufTensor* find(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& dims, Role role,
                       bool required = true);

// An integer hyper-parameter in [1, 2^24].
int64_t positive(const GgufFile& f, const std::string& key);
// A float hyper-parameter, or `fallback` when the key is absent.
float number_or(const GgufFile& f, const std::string& key, float fallback);
// A bool hyper-parameter, or `fallback` when the key is absent.
bool bool_or(const GgufFile& f, const std::string& key, bool fallback);

// The tensor as a weight leaf of g (1-D or 2-D): its bytes in the file
// mapping, or at `data` when given (a copy of them, e.g. in huge pages).
NodeId leaf(Graph& g, const GgufTensor& t, const std::byte* data = nullptr);
// Rows [first, first + count) of a 2-D tensor (or elements of a 1-D one) as a
// leaf of its own: how a fused QKV matrix splits into Q, K and V without a copy.
NodeId leaf_rows(Graph& g, const GgufTensor& t, int64_t first, int64_t count);

// Sum of elements and of bytes over all tensors of the file.
uint64_t parameter_count(const GgufFile& f) noexcept;
uint64_t weight_bytes(const GgufFile& f) noexcept;

}  // namespace kiln::model_tensors
