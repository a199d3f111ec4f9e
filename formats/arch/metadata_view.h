#pragma once
// What an architecture's hyper-parameters are read from: a GGUF file, or the
// metadata and tensor shapes a converter holds before it writes them (the
// safetensors export reads a checkpoint that never was a file). The getters
// fail with the GGUF reader's messages.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.h"

namespace kiln::arch {

class MetadataView {
public:
    virtual ~MetadataView() = default;
    // Starts messages: the file's name, or what the metadata came from.
    virtual const std::string& name() const = 0;
    virtual const GgufValue* find(std::string_view key) const = 0;
    // The ggml dims of tensor `tensor`, or nullptr when there is no such tensor.
    virtual const std::vector<uint64_t>* tensor_dims(std::string_view tensor) const = 0;
    // Every metadata key, in order.
    virtual std::vector<std::string_view> keys() const = 0;
    // How many tensors there are (a bound on how many layers they can make up).
    virtual size_t tensor_count() const = 0;

    std::string get_string(std::string_view key) const;
    int64_t get_int(std::string_view key) const;
    double get_number(std::string_view key) const;
};

class FileMetadata final : public MetadataView {
public:
    explicit FileMetadata(const GgufFile& file) : file_(file) {}
    const std::string& name() const override { return file_.name(); }
    const GgufValue* find(std::string_view key) const override { return file_.find(key); }
    const std::vector<uint64_t>* tensor_dims(std::string_view tensor) const override;
    std::vector<std::string_view> keys() const override;
    size_t tensor_count() const override { return file_.tensors().size(); }

private:
    const GgufFile& file_;
};

class EntryMetadata final : public MetadataView {
public:
    struct Tensor {
        std::string name;
        std::vector<uint64_t> dims;
    };
    EntryMetadata(std::string name, std::span<const GgufEntry> entries, std::vector<Tensor> tensors);
    const std::string& name() const override { return name_; }
    const GgufValue* find(std::string_view key) const override;
    const std::vector<uint64_t>* tensor_dims(std::string_view tensor) const override;
    std::vector<std::string_view> keys() const override;
    size_t tensor_count() const override { return tensors_.size(); }

private:
    std::string name_;
    std::span<const GgufEntry> entries_;
    std::map<std::string, std::vector<uint64_t>, std::less<>> tensors_;
};

}  // namespace kiln::arch
