#include "formats/arch/hparams.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/arch/tensor_spec.h"

namespace kiln::arch {

std::string block_tensor(int64_t layer, std::string_view suffix) { return fmt::format("blk.{}.{}", layer, suffix); }

int64_t positive(const MetadataView& f, const std::string& key) {
    const int64_t v = f.get_int(key);
    if (v < 1 || v > (int64_t{1} << 24)) fail("model", "{}: {} is {} (out of range)", f.name(), key, v);
    return v;
}

int64_t positive_or(const MetadataView& f, const std::string& key, int64_t fallback) {
    return f.find(key) ? positive(f, key) : fallback;
}

float number_or(const MetadataView& f, const std::string& key, float fallback) {
    return f.find(key) ? static_cast<float>(f.get_number(key)) : fallback;
}

float positive_number_or(const MetadataView& f, const std::string& key, float fallback) {
    const float v = number_or(f, key, fallback);
    if (!std::isfinite(v) || v <= 0.0f) fail("model", "{}: {} is {} (it must be a positive finite number)", f.name(), key, v);
    return v;
}

int64_t block_count(const MetadataView& f, const std::string& key) {
    const int64_t n = positive(f, key);
    // A file of no tensors (a vocabulary-only GGUF) is refused next, by its
    // first missing tensor, before anything is built per layer.
    if (f.tensor_count() > 0 && static_cast<uint64_t>(n) > f.tensor_count())
        fail("model", "{}: {} is {} but the file holds only {} tensors (each block has several)", f.name(), key, n,
             f.tensor_count());
    return n;
}

bool bool_or(const MetadataView& f, const std::string& key, bool fallback) {
    const GgufValue* v = f.find(key);
    if (v == nullptr) return fallback;
    const std::optional<bool> b = v->as_bool();
    if (!b) fail("model", "{}: {} must be a bool", f.name(), key);
    return *b;
}

std::string string_or(const MetadataView& f, const std::string& key, const std::string& fallback) {
    return f.find(key) ? f.get_string(key) : fallback;
}

void refuse_unknown_keys(const MetadataView& f, std::string_view architecture,
                         std::initializer_list<std::string_view> known, std::initializer_list<std::string_view> more_known) {
    for (std::string_view key : f.keys()) {
        if (key.size() <= architecture.size() || !key.starts_with(architecture) || key[architecture.size()] != '.')
            continue;
        const std::string_view suffix = key.substr(architecture.size() + 1);
        const auto is = [&](std::string_view k) { return k == suffix; };
        if (std::ranges::any_of(known, is) || std::ranges::any_of(more_known, is)) continue;
        fail("model", "{}: metadata key '{}' is not implemented by kiln's {} (it may change the model's math; refusing "
             "rather than ignoring it)", f.name(), printable(key), architecture);
    }
}

}  // namespace kiln::arch
