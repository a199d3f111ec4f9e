#pragma once
// Layer counts that a file states (config.json's num_hidden_layers, a torch
// checkpoint's model_args, the index in a tensor name such as
// "layers.4000000000.attention.wq.weight") drive loops and per-layer name
// tables. Taken on trust, 2^32 - 1 layers would build billions of names before
// the first missing tensor is noticed. So the count is checked against the
// tensors the file really holds, first: a file cannot describe more layers
// than it has distinct layer indices, and the indices are counted, never
// taken as a maximum.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace kiln {

class LayerCount {
public:
    // Tensors of layer N are named "<prefix>N.<rest>".
    explicit LayerCount(std::string prefix) : prefix_(std::move(prefix)) {}

    // Notes the layer index of `tensor_name`, if it has one.
    void see(std::string_view tensor_name);
    // How many distinct layers the names seen hold.
    uint64_t found() const noexcept { return indices_.size(); }
    const std::string& prefix() const noexcept { return prefix_; }

    // Refuses `declared` layers (from `source`, e.g. "config.json's
    // num_hidden_layers") when the tensors hold fewer distinct layers:
    // kiln::Error(component, "<where>: ...").
    void check(uint64_t declared, std::string_view component, const std::string& where, std::string_view source) const;

private:
    std::string prefix_;
    std::set<uint64_t> indices_;
};

}  // namespace kiln
