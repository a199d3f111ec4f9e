#pragma once
// Copies fixture tensors out of a GGUF file as plain vectors.
#include <cstring>
#include <vector>

#include "formats/gguf/gguf_file.h"

namespace kiln::test {

template <typename T>
std::vector<T> values_of(const GgufTensor& t) {
    std::vector<T> out(t.data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), t.data.data(), out.size() * sizeof(T));
    return out;
}

}  // namespace kiln::test
