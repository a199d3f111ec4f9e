#include "formats/checkpoint/nanogpt_state_dict.h"

#include <charconv>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/gpt2_layout.h"
#include "formats/checkpoint/layer_count.h"

namespace kiln {
namespace {

constexpr std::string_view kMarker = "transformer.wte.weight";
constexpr double kNanoGptNormEps = 1e-5;  // F.layer_norm's default, which model.py uses

class Mapper {
public:
    Mapper(const TorchCheckpoint& c, std::string_view name) : c_(c), name_(name) {}

    Checkpoint run() {
        prefix_ = *find_state_dict_prefix(c_, kMarker);
        Gpt2Source s;
        s.component = "pytorch";
        s.path = c_.path;
        collect(s);
        read_hyper_parameters(s);
        // Before check_bias walks the layers: model_args.n_layer must be backed by tensors.
        check_gpt2_layer_count(s, "model_args.n_layer");
        check_bias(s);
        Checkpoint out = gpt2_checkpoint(s);
        out.source = c_.source;
        return out;
    }

private:
    // Every tensor under the prefix, renamed the way gpt2_layout.h expects.
    void collect(Gpt2Source& s) const {
        for (const TorchTensor& t : c_.tensors) {
            if (!t.name.starts_with(prefix_)) continue;
            std::string_view rest = std::string_view(t.name).substr(prefix_.size());
            if (rest.starts_with("transformer.")) {
                rest.remove_prefix(std::string_view("transformer.").size());
            } else if (!rest.starts_with("lm_head.")) {
                // With no prefix the top level also holds a training checkpoint's
                // other entries; only names that look like model weights count.
                if (prefix_.empty() && !rest.ends_with(".weight") && !rest.ends_with(".bias")) continue;
                fail("pytorch", "{}: tensor '{}' is not part of nanoGPT's model (an unknown architecture?)", c_.path,
                     printable(t.name));
            }
            // Tied tensors share a storage key; the first tensor using a key stands for it.
            SourceTensor st{t.name, t.type, {}, t.data, storage_id(t.storage), static_cast<uint64_t>(t.storage_offset)};
            for (int64_t d : t.shape) st.shape.push_back(static_cast<uint64_t>(d));
            s.tensors.emplace(std::string(rest), std::move(st));
        }
    }

    const void* storage_id(const std::string& key) const {
        for (const TorchTensor& t : c_.tensors)
            if (t.storage == key) return &t.storage;
        return nullptr;
    }

    std::optional<uint64_t> arg(std::string_view key) {
        const std::string full = fmt::format("model_args.{}", key);
        const GgufValue* v = c_.find_value(full);
        if (v == nullptr) return std::nullopt;
        const std::optional<int64_t> i = v->type() == GgufType::INT64 ? v->as_int() : std::nullopt;
        if (!i || *i <= 0 || *i > std::numeric_limits<uint32_t>::max())
            fail("pytorch", "{}: {} is not a positive integer below 2^32", c_.path, full);
        args_text_ += fmt::format("{}{} {}", args_text_.empty() ? "" : ", ", key, *i);
        return static_cast<uint64_t>(*i);
    }

    // Distinct layer indices, counted: a name's index is no count (h.4000000000.ln_1.weight is one layer).
    uint64_t layers_found(const Gpt2Source& s) const {
        LayerCount layers("h.");
        for (const auto& [name, t] : s.tensors) layers.see(name);
        return layers.found();
    }

    uint64_t dim_of(const Gpt2Source& s, const std::string& name, size_t dim) const {
        const auto it = s.tensors.find(name);
        if (it == s.tensors.end()) fail("pytorch", "{}: tensor '{}{}' is missing", c_.path, prefix_, name);
        if (it->second.shape.size() != 2)
            fail("pytorch", "{}: tensor '{}' is {}-D, not a matrix", c_.path, printable(it->second.name),
                 it->second.shape.size());
        return it->second.shape[dim];
    }

    void read_hyper_parameters(Gpt2Source& s) {
        arch::Gpt2Params& p = s.hp;
        p.name = std::string(name_);
        const std::optional<uint64_t> heads = arg("n_head");
        if (!heads)
            fail("pytorch",
                 "{}: model_args.n_head is missing, and the number of attention heads cannot be inferred from tensor "
                 "shapes",
                 c_.path);
        p.n_heads = *heads;
        p.dim = arg("n_embd").value_or(dim_of(s, "wte.weight", 1));
        p.n_vocab = arg("vocab_size").value_or(dim_of(s, "wte.weight", 0));
        p.n_ctx_train = arg("block_size").value_or(dim_of(s, "wpe.weight", 0));
        p.n_layers = arg("n_layer").value_or(layers_found(s));
        if (p.n_layers == 0) fail("pytorch", "{}: the state dict has no layers ('{}transformer.h.0.*')", c_.path, prefix_);
        // A GPT2LMHeadModel state dict (pytorch_model.bin) keeps Conv1D's (in, out):
        // told by c_attn being (d, 3d) rather than nn.Linear's (3d, d).
        const auto d = static_cast<uint64_t>(p.dim);
        s.conv1d = dim_of(s, "h.0.attn.c_attn.weight", 0) == d && dim_of(s, "h.0.attn.c_attn.weight", 1) == 3 * d;
        p.ffn_dim = dim_of(s, "h.0.mlp.c_fc.weight", s.conv1d ? 1 : 0);
        p.norm_eps = kNanoGptNormEps;
        s.hyper_text = fmt::format("n_embd {}, n_layer {}, n_head {}, vocab_size {}, block_size {}, mlp {}{}",
                                   p.dim, p.n_layers, p.n_heads, p.n_vocab, p.n_ctx_train,
                                   p.ffn_dim,
                                   args_text_.empty() ? "; no model_args, inferred from shapes"
                                                      : fmt::format("; model_args gave {}", args_text_));
    }

    // model_args.bias says which of the two nanoGPT variants this is.
    void check_bias(const Gpt2Source& s) const {
        const GgufValue* v = c_.find_value("model_args.bias");
        if (v == nullptr) return;
        const std::optional<bool> bias = v->as_bool();
        if (!bias) fail("pytorch", "{}: model_args.bias is not a bool", c_.path);
        for (int64_t layer = 0; layer < s.hp.n_layers; ++layer) {
            for (std::string_view part : {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
                const std::string name = fmt::format("h.{}.{}.bias", layer, part);
                const bool present = s.tensors.contains(name);
                if (*bias && !present)
                    fail("pytorch", "{}: tensor '{}transformer.{}' is missing (model_args.bias is True)", c_.path,
                         prefix_, name);
                if (!*bias && present)
                    fail("pytorch", "{}: tensor '{}transformer.{}' is there but model_args.bias is False", c_.path,
                         prefix_, name);
            }
        }
    }

    const TorchCheckpoint& c_;
    std::string_view name_;
    std::string prefix_;
    std::string args_text_;
};

}  // namespace

bool is_nanogpt_state_dict(const TorchCheckpoint& checkpoint) {
    return find_state_dict_prefix(checkpoint, kMarker).has_value();
}

Checkpoint nanogpt_checkpoint_from_state_dict(const TorchCheckpoint& checkpoint, std::string_view name) {
    if (!is_nanogpt_state_dict(checkpoint))
        fail("pytorch", "{}: no nanoGPT model in the checkpoint (no '{}')", checkpoint.path, kMarker);
    return Mapper(checkpoint, name).run();
}

}  // namespace kiln
