#include "formats/arch/metadata_view.h"

#include "engine/core/error.h"
#include "engine/core/printable.h"

namespace kiln::arch {

std::string MetadataView::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("gguf", "{}: metadata key '{}' is missing", name(), printable(key));
    if (const std::string* s = v->as_string()) return *s;
    fail("gguf", "{}: metadata key '{}' has type {} (expected str)", name(), key, gguf_type_name(v->type()));
}

int64_t MetadataView::get_int(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("gguf", "{}: metadata key '{}' is missing", name(), printable(key));
    if (auto i = v->as_int()) return *i;
    fail("gguf", "{}: metadata key '{}' has type {} (expected an integer)", name(), key, gguf_type_name(v->type()));
}

double MetadataView::get_number(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("gguf", "{}: metadata key '{}' is missing", name(), printable(key));
    if (auto d = v->as_number()) return *d;
    fail("gguf", "{}: metadata key '{}' has type {} (expected a number)", name(), key, gguf_type_name(v->type()));
}

const std::vector<uint64_t>* FileMetadata::tensor_dims(std::string_view tensor) const {
    const GgufTensor* t = file_.find_tensor(tensor);
    return t == nullptr ? nullptr : &t->dims;
}

std::vector<std::string_view> FileMetadata::keys() const {
    std::vector<std::string_view> out;
    for (const GgufEntry& e : file_.metadata()) out.push_back(e.key);
    return out;
}

std::vector<std::string_view> EntryMetadata::keys() const {
    std::vector<std::string_view> out;
    for (const GgufEntry& e : entries_) out.push_back(e.key);
    return out;
}

EntryMetadata::EntryMetadata(std::string name, std::span<const GgufEntry> entries, std::vector<Tensor> tensors)
    : name_(std::move(name)), entries_(entries) {
    for (Tensor& t : tensors) tensors_.emplace(std::move(t.name), std::move(t.dims));
}

const GgufValue* EntryMetadata::find(std::string_view key) const {
    for (const GgufEntry& e : entries_)
        if (e.key == key) return &e.value;
    return nullptr;
}

const std::vector<uint64_t>* EntryMetadata::tensor_dims(std::string_view tensor) const {
    const auto it = tensors_.find(tensor);
    return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace kiln::arch
