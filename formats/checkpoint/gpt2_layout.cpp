#include "formats/checkpoint/gpt2_layout.h"

#include <cstring>
#include <set>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/arch/gpt2_arch.h"
#include "formats/checkpoint/layer_count.h"

namespace kiln {
namespace {

std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

// Which part of a block a tensor is, and how to check and name it.
using Names = arch::Affine<std::string>;
using LayerNames = arch::Gpt2LayerTensors<std::string>;
struct LayerTensor {
    std::string_view source;    // after "h.N."
    Names LayerNames::*layer;   // the gpt2 descriptor's layer part
    std::string Names::*which;  // its weight or bias
    bool required;
    bool matrix;  // an nn.Linear weight (Conv1D in HF: stored transposed)
};
// In the order llama.cpp's converter writes a gpt2 block.
constexpr LayerTensor kLayerTensors[] = {
    {"ln_1.weight", &LayerNames::attn_norm, &Names::weight, true, false},
    {"ln_1.bias", &LayerNames::attn_norm, &Names::bias, false, false},
    {"attn.c_attn.weight", &LayerNames::attn_qkv, &Names::weight, true, true},
    {"attn.c_attn.bias", &LayerNames::attn_qkv, &Names::bias, false, false},
    {"attn.c_proj.weight", &LayerNames::attn_output, &Names::weight, true, true},
    {"attn.c_proj.bias", &LayerNames::attn_output, &Names::bias, false, false},
    {"ln_2.weight", &LayerNames::ffn_norm, &Names::weight, true, false},
    {"ln_2.bias", &LayerNames::ffn_norm, &Names::bias, false, false},
    {"mlp.c_fc.weight", &LayerNames::ffn_up, &Names::weight, true, true},
    {"mlp.c_fc.bias", &LayerNames::ffn_up, &Names::bias, false, false},
    {"mlp.c_proj.weight", &LayerNames::ffn_down, &Names::weight, true, true},
    {"mlp.c_proj.bias", &LayerNames::ffn_down, &Names::bias, false, false},
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
        const arch::Gpt2Params& p = s_.hp;
        const auto d = static_cast<uint64_t>(p.dim), f = static_cast<uint64_t>(p.ffn_dim),
                   vocab = static_cast<uint64_t>(p.n_vocab), ctx = static_cast<uint64_t>(p.n_ctx_train);
        Checkpoint out;
        out.metadata = p.metadata();
        const auto names = arch::gpt2_tensors<std::string>(p, [](const arch::TensorSpec& s) { return s.name; });
        const SourceTensor& wte = required("wte.weight");
        add(out, wte, names.token_embd, {vocab, d}, false);
        add(out, required("wpe.weight"), names.position_embd, {ctx, d}, false);
        const std::vector<uint64_t> expected[] = {{d}, {d}, {3 * d, d}, {3 * d}, {d, d}, {d},
                                                  {d}, {d}, {f, d},     {f},     {d, f}, {d}};
        for (int64_t layer = 0; layer < p.n_layers; ++layer) {
            for (size_t i = 0; i < std::size(kLayerTensors); ++i) {
                const LayerTensor& lt = kLayerTensors[i];
                const std::string name = fmt::format("h.{}.{}", layer, lt.source);
                const SourceTensor* t = find(name);
                if (t == nullptr) {
                    if (lt.required) missing(name);
                    continue;
                }
                add(out, *t, names.layers[static_cast<size_t>(layer)].*lt.layer.*lt.which, expected[i], lt.matrix);
            }
        }
        add(out, required("ln_f.weight"), names.output_norm.weight, {d}, false);
        if (const SourceTensor* b = find("ln_f.bias")) add(out, *b, names.output_norm.bias, {d}, false);
        if (s_.head_required) required("lm_head.weight");
        // A tied head is written as well, as a second view of wte: llama.cpp's gpt2
        // loader requires output.weight (its own converter duplicates it too).
        const SourceTensor* head = find("lm_head.weight");
        add(out, head && !tied(*head, wte) ? *head : wte, names.output, {vocab, d}, false);
        return out;
    }

private:
    const SourceTensor* find(const std::string& name) const {
        const auto it = s_.tensors.find(name);
        return it == s_.tensors.end() ? nullptr : &it->second;
    }

    [[noreturn]] void missing(const std::string& name) const {
        fail(s_.component, "{}: tensor '{}' is missing (a GPT-2 model with {} layers needs it)", s_.path, name,
             s_.hp.n_layers);
    }

    const SourceTensor& required(const std::string& name) const {
        const SourceTensor* t = find(name);
        if (t == nullptr) missing(name);
        return *t;
    }

    void check_names() const {
        std::set<std::string> known = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", "lm_head.weight"};
        for (int64_t layer = 0; layer < s_.hp.n_layers; ++layer) {
            for (const LayerTensor& lt : kLayerTensors) known.insert(fmt::format("h.{}.{}", layer, lt.source));
            known.insert(fmt::format("h.{}.attn.bias", layer));         // causal-mask buffer
            known.insert(fmt::format("h.{}.attn.masked_bias", layer));  // HF's masking constant
        }
        for (const auto& [name, t] : s_.tensors) {
            if (known.contains(name)) continue;
            if (name.starts_with("h."))
                fail(s_.component, "{}: tensor '{}' is not part of a GPT-2 model with {} layers", s_.path,
                     printable(t.name), s_.hp.n_layers);
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

void check_gpt2_layer_count(const Gpt2Source& source, std::string_view stated_by) {
    LayerCount layers("h.");
    for (const auto& [name, t] : source.tensors) layers.see(name);
    layers.check(static_cast<uint64_t>(std::max<int64_t>(source.hp.n_layers, 0)), source.component, source.path,
                 stated_by);
}

Checkpoint gpt2_checkpoint(const Gpt2Source& source) {
    const arch::Gpt2Params& p = source.hp;
    check_gpt2_layer_count(source, "the layer count");
    for (int64_t v : {p.n_ctx_train, p.dim, p.ffn_dim, p.n_layers, p.n_heads, p.n_vocab})
        if (v <= 0 || v > 0xffffffff)
            fail(source.component, "{}: a hyper-parameter is {}, out of range ({})", source.path, v, source.hyper_text);
    if (p.dim % p.n_heads != 0)
        fail(source.component, "{}: the embedding size {} is not a multiple of the {} heads", source.path,
             p.dim, p.n_heads);
    return Builder(source).run();
}

}  // namespace kiln
