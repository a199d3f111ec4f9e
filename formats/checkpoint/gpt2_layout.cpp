#include "formats/checkpoint/gpt2_layout.h"

#include <cstring>
#include <set>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"

namespace kiln {
namespace {

std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

// Which part of a block a tensor is, and how to check and name it.
struct LayerTensor {
    std::string_view source;  // after "h.N."
    std::string_view gguf;    // after "blk.N."
    bool required;
    bool matrix;  // an nn.Linear weight (Conv1D in HF: stored transposed)
};
// In the order llama.cpp's converter writes a gpt2 block.
constexpr LayerTensor kLayerTensors[] = {
    {"ln_1.weight", "attn_norm.weight", true, false},
    {"ln_1.bias", "attn_norm.bias", false, false},
    {"attn.c_attn.weight", "attn_qkv.weight", true, true},
    {"attn.c_attn.bias", "attn_qkv.bias", false, false},
    {"attn.c_proj.weight", "attn_output.weight", true, true},
    {"attn.c_proj.bias", "attn_output.bias", false, false},
    {"ln_2.weight", "ffn_norm.weight", true, false},
    {"ln_2.bias", "ffn_norm.bias", false, false},
    {"mlp.c_fc.weight", "ffn_up.weight", true, true},
    {"mlp.c_fc.bias", "ffn_up.bias", false, false},
    {"mlp.c_proj.weight", "ffn_down.weight", true, true},
    {"mlp.c_proj.bias", "ffn_down.bias", false, false},
};

// Rows of `rows` x `cols` elements of `element_size` bytes, transposed.
std::vector<std::byte> transpose(std::span<const std::byte> data, uint64_t rows, uint64_t cols, size_t element_size) {
    std::vector<std::byte> out(data.size());
    for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < cols; ++c)
            std::memcpy(out.data() + (c * rows + r) * element_size, data.data() + (r * cols + c) * element_size,
                        element_size);
    return out;
}

class Builder {
public:
    explicit Builder(const Gpt2Source& s) : s_(s) {}

    Checkpoint run() {
        check_names();
        const Gpt2HyperParameters& p = s_.hp;
        const uint64_t d = p.embedding_length, f = p.feed_forward_length;
        Checkpoint out;
        out.metadata = gpt2_metadata(p);
        const SourceTensor& wte = required("wte.weight");
        add(out, wte, "token_embd.weight", {p.vocab_size, d}, false);
        add(out, required("wpe.weight"), "position_embd.weight", {p.context_length, d}, false);
        const std::vector<uint64_t> expected[] = {{d}, {d}, {3 * d, d}, {3 * d}, {d, d}, {d},
                                                  {d}, {d}, {f, d},     {f},     {d, f}, {d}};
        for (uint64_t layer = 0; layer < p.block_count; ++layer) {
            for (size_t i = 0; i < std::size(kLayerTensors); ++i) {
                const LayerTensor& lt = kLayerTensors[i];
                const std::string name = fmt::format("h.{}.{}", layer, lt.source);
                const SourceTensor* t = find(name);
                if (t == nullptr) {
                    if (lt.required) missing(name);
                    continue;
                }
                add(out, *t, fmt::format("blk.{}.{}", layer, lt.gguf), expected[i], lt.matrix);
            }
        }
        add(out, required("ln_f.weight"), "output_norm.weight", {d}, false);
        if (const SourceTensor* b = find("ln_f.bias")) add(out, *b, "output_norm.bias", {d}, false);
        if (s_.head_required) required("lm_head.weight");
        // A tied head is written as well, as a second view of wte: llama.cpp's gpt2
        // loader requires output.weight (its own converter duplicates it too).
        const SourceTensor* head = find("lm_head.weight");
        add(out, head && !tied(*head, wte) ? *head : wte, "output.weight", {p.vocab_size, d}, false);
        return out;
    }

private:
    const SourceTensor* find(const std::string& name) const {
        const auto it = s_.tensors.find(name);
        return it == s_.tensors.end() ? nullptr : &it->second;
    }

    [[noreturn]] void missing(const std::string& name) const {
        fail(s_.component, "{}: tensor '{}' is missing (a GPT-2 model with {} layers needs it)", s_.path, name,
             s_.hp.block_count);
    }

    const SourceTensor& required(const std::string& name) const {
        const SourceTensor* t = find(name);
        if (t == nullptr) missing(name);
        return *t;
    }

    void check_names() const {
        std::set<std::string> known = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", "lm_head.weight"};
        for (uint64_t layer = 0; layer < s_.hp.block_count; ++layer) {
            for (const LayerTensor& lt : kLayerTensors) known.insert(fmt::format("h.{}.{}", layer, lt.source));
            known.insert(fmt::format("h.{}.attn.bias", layer));         // causal-mask buffer
            known.insert(fmt::format("h.{}.attn.masked_bias", layer));  // HF's masking constant
        }
        for (const auto& [name, t] : s_.tensors) {
            if (known.contains(name)) continue;
            if (name.starts_with("h."))
                fail(s_.component, "{}: tensor '{}' is not part of a GPT-2 model with {} layers", s_.path,
                     printable(t.name), s_.hp.block_count);
            fail(s_.component, "{}: tensor '{}' is not part of a GPT-2 model (an unknown architecture?)", s_.path,
                 printable(t.name));
        }
    }

    static bool tied(const SourceTensor& a, const SourceTensor& b) {
        if (a.type != b.type || a.shape != b.shape) return false;
        if (a.storage != nullptr && a.storage == b.storage && a.storage_offset == b.storage_offset) return true;
        return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0;
    }

    void add(Checkpoint& out, const SourceTensor& t, std::string gguf, std::vector<uint64_t> expected, bool matrix) const {
        const bool transposed = matrix && s_.conv1d;
        if (transposed) std::swap(expected[0], expected[1]);
        if (t.shape != expected)
            fail(s_.component, "{}: tensor '{}' has shape {} but the hyper-parameters ({}) expect {}{}", s_.path,
                 printable(t.name), shape_text(t.shape), s_.hyper_text, shape_text(expected),
                 transposed ? " (Conv1D: (in, out))" : "");
        CheckpointTensor ct{std::move(gguf), t.type, {}, t.data};
        if (transposed) {
            ct.data = out.own(transpose(t.data, t.shape[0], t.shape[1], type_traits(t.type).block_bytes));
            ct.dims = {t.shape[0], t.shape[1]};  // ggml [in, out] = torch (out, in)
        } else {
            for (size_t i = t.shape.size(); i-- > 0;) ct.dims.push_back(t.shape[i]);
        }
        out.tensors.push_back(std::move(ct));
    }

    const Gpt2Source& s_;
};

}  // namespace

std::vector<GgufEntry> gpt2_metadata(const Gpt2HyperParameters& p) {
    const auto u32 = [](uint64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
    return {
        {"general.architecture", GgufValue("gpt2")},
        {"general.name", GgufValue(p.name)},
        {"gpt2.context_length", u32(p.context_length)},
        {"gpt2.embedding_length", u32(p.embedding_length)},
        {"gpt2.feed_forward_length", u32(p.feed_forward_length)},
        {"gpt2.block_count", u32(p.block_count)},
        {"gpt2.attention.head_count", u32(p.head_count)},
        {"gpt2.attention.layer_norm_epsilon", GgufValue(static_cast<float>(p.norm_eps))},
    };
}

Checkpoint gpt2_checkpoint(const Gpt2Source& source) {
    const Gpt2HyperParameters& p = source.hp;
    for (uint64_t v : {p.context_length, p.embedding_length, p.feed_forward_length, p.block_count, p.head_count,
                       p.vocab_size})
        if (v == 0 || v > 0xffffffffu)
            fail(source.component, "{}: a hyper-parameter is {}, out of range ({})", source.path, v, source.hyper_text);
    if (p.embedding_length % p.head_count != 0)
        fail(source.component, "{}: the embedding size {} is not a multiple of the {} heads", source.path,
             p.embedding_length, p.head_count);
    return Builder(source).run();
}

}  // namespace kiln
