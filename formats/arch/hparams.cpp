#include "formats/arch/hparams.h"

#include <fmt/format.h>

#include "engine/core/error.h"
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

}  // namespace kiln::arch
