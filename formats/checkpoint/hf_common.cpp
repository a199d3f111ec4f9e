#include "formats/checkpoint/hf_common.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/layer_count.h"

namespace kiln {

using nlohmann::json;

HfConfig::HfConfig(std::filesystem::path folder, json config) : folder_(std::move(folder)), config_(std::move(config)) {
    if (!config_.is_object()) fail("hf", "{}: not a JSON object", where());
}

const json* HfConfig::find(std::string_view key) const {
    const auto it = config_.find(key);
    return it == config_.end() || it->is_null() ? nullptr : &*it;
}

uint64_t HfConfig::count(std::string_view key, std::optional<uint64_t> fallback) const {
    const json* v = find(key);
    if (v == nullptr) {
        if (fallback) return *fallback;
        fail("hf", "{}: \"{}\" is missing", where(), key);
    }
    if (!v->is_number_unsigned() || v->get<uint64_t>() == 0 || v->get<uint64_t>() > std::numeric_limits<uint32_t>::max())
        fail("hf", "{}: \"{}\" is not a positive integer below 2^32", where(), key);
    return v->get<uint64_t>();
}

uint64_t HfConfig::count_or_zero(std::string_view key, uint64_t fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number_unsigned() || v->get<uint64_t>() > std::numeric_limits<uint32_t>::max())
        fail("hf", "{}: \"{}\" is not an integer from 0 to 2^32 - 1", where(), key);
    return v->get<uint64_t>();
}

double HfConfig::number(std::string_view key, std::optional<double> fallback) const {
    const json* v = find(key);
    if (v == nullptr) {
        if (fallback) return *fallback;
        fail("hf", "{}: \"{}\" is missing", where(), key);
    }
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
        fail("hf", "{}: \"{}\" is not a positive number", where(), key);
    return v->get<double>();
}

bool HfConfig::flag(std::string_view key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail("hf", "{}: \"{}\" is not true or false", where(), key);
    return v->get<bool>();
}

std::string HfConfig::text(std::string_view key, std::string_view fallback) const {
    const json* v = find(key);
    if (v == nullptr) return std::string(fallback);
    if (!v->is_string()) fail("hf", "{}: \"{}\" is not a string", where(), key);
    return v->get<std::string>();
}

std::string HfConfig::architecture() const {
    const json* a = find("architectures");
    if (a == nullptr || !a->is_array() || a->size() != 1 || !(*a)[0].is_string()) return "";
    return (*a)[0].get<std::string>();
}

HfTensorSource::HfTensorSource(const std::filesystem::path& folder) : folder_(folder), weights_(open_hf_weights(folder)) {}

std::string hf_shape_text(const std::vector<uint64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

CheckpointTensor& HfTensorSource::take(Checkpoint& out, const std::string& hf, std::string gguf,
                                       const std::vector<uint64_t>& expected, const std::string& hyper) {
    const auto it = weights_.by_name.find(hf);
    if (it == weights_.by_name.end()) fail("hf", "{}: tensor '{}' is missing", folder_.string(), hf);
    const SafetensorsTensor& t = *it->second.first;
    if (t.shape != expected)
        fail("hf", "{}: tensor '{}' has shape {} but config.json ({}) expects {}", it->second.second->path().string(),
             printable(hf), hf_shape_text(t.shape), hyper, hf_shape_text(expected));
    used_.insert(hf);
    CheckpointTensor ct{std::move(gguf), t.type, {}, t.data};
    for (size_t d = t.shape.size(); d-- > 0;) ct.dims.push_back(t.shape[d]);
    out.tensors.push_back(std::move(ct));
    return out.tensors.back();
}

void HfTensorSource::check_layers(uint64_t declared, std::string_view key) const {
    LayerCount layers("model.layers.");
    for (const auto& [name, where] : weights_.by_name) layers.see(name);
    layers.check(declared, "hf", folder_.string(), fmt::format("config.json's {}", key));
}

void HfTensorSource::refuse_leftovers(std::string_view what) const {
    for (const auto& [name, where] : weights_.by_name) {
        if (used_.contains(name) || name.ends_with(".rotary_emb.inv_freq")) continue;
        fail("hf", "{}: tensor '{}' is not part of {}", where.second->path().string(), printable(name), what);
    }
}

void hf_unpermute_rows(Checkpoint& out, CheckpointTensor& t, uint64_t n_head, uint64_t head_dim) {
    const size_t row_bytes = t.data.size() / (n_head * head_dim);
    const uint64_t half = head_dim / 2;
    std::vector<std::byte> buf(t.data.size());
    for (uint64_t h = 0; h < n_head; ++h)
        for (uint64_t i = 0; i < half; ++i)
            for (uint64_t j = 0; j < 2; ++j) {
                const uint64_t from = h * head_dim + j * half + i, to = h * head_dim + 2 * i + j;
                std::memcpy(buf.data() + to * row_bytes, t.data.data() + from * row_bytes, row_bytes);
            }
    t.data = out.own(std::move(buf));
}

void hf_set_metadata(Checkpoint& c, const std::string& key, GgufValue value) {
    for (GgufEntry& e : c.metadata)
        if (e.key == key) {
            e.value = std::move(value);
            return;
        }
    c.metadata.push_back({key, std::move(value)});
}

void hf_drop_metadata(Checkpoint& c, const std::string& key) {
    std::erase_if(c.metadata, [&](const GgufEntry& e) { return e.key == key; });
}

std::string hf_rope_scaling_type(const HfConfig& config) {
    const json* s = config.find("rope_scaling");
    if (s == nullptr) return "";
    if (!s->is_object()) fail("hf", "{}: \"rope_scaling\" is not an object", config.where());
    for (const char* key : {"rope_type", "type"})
        if (const auto t = s->find(key); t != s->end() && !t->is_null()) {
            if (!t->is_string()) fail("hf", "{}: rope_scaling.{} is not a string", config.where(), key);
            return t->get<std::string>();
        }
    fail("hf", "{}: rope_scaling has neither \"rope_type\" nor \"type\"", config.where());
}

}  // namespace kiln
