#include "formats/checkpoint/llama_state_dict.h"

#include <charconv>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/layer_count.h"
#include "formats/arch/llama_arch.h"

namespace kiln {
namespace {

// model.py's ModelArgs defaults for what shapes cannot tell.
constexpr int64_t kDefaultMaxSeqLen = 2048;
constexpr double kDefaultNormEps = 1e-5;

// model.py buffers that older versions saved; recomputed by every runtime.
constexpr std::string_view kRopeBuffers[] = {"freqs_cos", "freqs_sin", "freqs_cis"};

using LayerNames = arch::LlamaLayerTensors<std::string>;
struct LayerTensor {
    std::string_view torch;         // after "layers.N."
    std::string LayerNames::*gguf;  // the llama descriptor's tensor
};
// In the order llama.cpp's converters write a block.
constexpr LayerTensor kLayerTensors[] = {
    {"attention.wq.weight", &LayerNames::attn_q},      {"attention.wk.weight", &LayerNames::attn_k},
    {"attention.wv.weight", &LayerNames::attn_v},      {"attention.wo.weight", &LayerNames::attn_output},
    {"attention_norm.weight", &LayerNames::attn_norm}, {"feed_forward.w1.weight", &LayerNames::ffn_gate},
    {"feed_forward.w2.weight", &LayerNames::ffn_down}, {"feed_forward.w3.weight", &LayerNames::ffn_up},
    {"ffn_norm.weight", &LayerNames::ffn_norm},
};

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

class Mapper {
public:
    Mapper(const TorchCheckpoint& c, std::string_view name) : c_(c), name_(name) {}

    Checkpoint run() {
        find_prefix();
        read_hyper_parameters();
        check_tensor_names();

        Checkpoint out;
        out.source = c_.source;
        const arch::LlamaParams p = params();
        out.metadata = p.metadata();
        const arch::LlamaTensors<std::string> names = arch::llama_tensor_names(p);
        const TorchTensor& emb = tensor("tok_embeddings.weight");
        add(out, emb, names.token_embd, {vocab_, dim_});
        add(out, tensor("norm.weight"), names.output_norm, {dim_});
        if (const TorchTensor* output = c_.find_tensor(prefix_ + "output.weight"); output && !tied(*output, emb))
            add(out, *output, names.output, {vocab_, dim_});
        const int64_t q = n_heads_ * head_dim_, kv = n_kv_heads_ * head_dim_;
        const std::vector<int64_t> expected[] = {{q, dim_}, {kv, dim_}, {kv, dim_},      {dim_, q},     {dim_},
                                                 {hidden_, dim_}, {dim_, hidden_}, {hidden_, dim_}, {dim_}};
        for (int64_t layer = 0; layer < n_layers_; ++layer) {
            for (size_t i = 0; i < std::size(kLayerTensors); ++i) {
                const TorchTensor& t = tensor(fmt::format("layers.{}.{}", layer, kLayerTensors[i].torch));
                add(out, t, names.layers[static_cast<size_t>(layer)].*kLayerTensors[i].gguf, expected[i]);
            }
        }
        return out;
    }

private:
    void find_prefix() {
        for (std::string_view outer : {"", "model.", "state_dict."}) {
            for (std::string_view compiled : {"", "_orig_mod."}) {
                const std::string prefix = std::string(outer) + std::string(compiled);
                if (c_.find_tensor(prefix + "tok_embeddings.weight") != nullptr) {
                    prefix_ = prefix;
                    return;
                }
            }
        }
        fail("pytorch",
             "{}: no llama2.c model in the checkpoint: there is no tensor 'tok_embeddings.weight' at the top level or "
             "under 'model.' or 'state_dict.' (with or without torch.compile's '_orig_mod.')",
             c_.path);
    }

    const TorchTensor& tensor(std::string_view name) const {
        const std::string full = prefix_ + std::string(name);
        const TorchTensor* t = c_.find_tensor(full);
        if (t == nullptr) fail("pytorch", "{}: tensor '{}' is missing", c_.path, printable(full));
        return *t;
    }

    std::optional<int64_t> arg(std::string_view key) const {
        const std::string full = fmt::format("model_args.{}", key);
        const GgufValue* v = c_.find_value(full);
        if (v == nullptr) return std::nullopt;  // absent, or None in the pickle
        const std::optional<int64_t> i = v->type() == GgufType::INT64 ? v->as_int() : std::nullopt;
        if (!i || *i <= 0 || *i > std::numeric_limits<uint32_t>::max())
            fail("pytorch", "{}: {} is not a positive integer below 2^32", c_.path, full);
        args_text_ += fmt::format("{}{} {}", args_text_.empty() ? "" : ", ", key, *i);
        return i;
    }

    // Layers present: the distinct N of the "layers.N." tensors under the prefix
    // (counted, so one tensor named layers.4000000000.* is one layer, not 4e9).
    LayerCount layers_found() const {
        LayerCount layers(prefix_ + "layers.");
        for (const TorchTensor& t : c_.tensors) layers.see(t.name);
        return layers;
    }

    void read_hyper_parameters() {
        const TorchTensor& emb = tensor("tok_embeddings.weight");
        if (emb.shape.size() != 2)
            fail("pytorch", "{}: tensor '{}' has shape {} but an embedding table is 2-D (vocab_size, dim)", c_.path,
                 printable(emb.name), shape_text(emb.shape));
        dim_ = arg("dim").value_or(emb.shape[1]);
        vocab_ = arg("vocab_size").value_or(emb.shape[0]);
        const LayerCount layers = layers_found();
        n_layers_ = arg("n_layers").value_or(static_cast<int64_t>(layers.found()));
        layers.check(static_cast<uint64_t>(std::max<int64_t>(n_layers_, 0)), "pytorch", c_.path, "model_args.n_layers");
        if (n_layers_ <= 0) fail("pytorch", "{}: the state dict has no layers ('{}layers.0.*')", c_.path, prefix_);
        const std::optional<int64_t> heads = arg("n_heads");
        if (!heads)
            fail("pytorch",
                 "{}: model_args.n_heads is missing, and the number of attention heads cannot be inferred from tensor "
                 "shapes",
                 c_.path);
        n_heads_ = *heads;
        if (dim_ % n_heads_ != 0)
            fail("pytorch", "{}: dim {} is not a multiple of n_heads {}", c_.path, dim_, n_heads_);
        head_dim_ = dim_ / n_heads_;
        if (const std::optional<int64_t> kv = arg("n_kv_heads")) {
            n_kv_heads_ = *kv;
        } else {
            const TorchTensor& wk = tensor("layers.0.attention.wk.weight");
            if (wk.shape.empty() || wk.shape[0] % head_dim_ != 0 || wk.shape[0] == 0)
                fail("pytorch", "{}: tensor '{}' has shape {}, whose rows are not a whole number of heads of {}",
                     c_.path, printable(wk.name), shape_text(wk.shape), head_dim_);
            n_kv_heads_ = wk.shape[0] / head_dim_;
        }
        if (n_heads_ % n_kv_heads_ != 0)
            fail("pytorch", "{}: n_heads {} is not a multiple of n_kv_heads {}", c_.path, n_heads_, n_kv_heads_);
        if (const std::optional<int64_t> hidden = arg("hidden_dim")) {
            hidden_ = *hidden;
        } else if (const std::optional<int64_t> multiple_of = arg("multiple_of")) {
            // model.py's FeedForward: 2/3 of 4*dim, rounded up to a multiple of multiple_of.
            const int64_t h = 4 * dim_ * 2 / 3;
            hidden_ = (h + *multiple_of - 1) / *multiple_of * *multiple_of;
        } else {
            const TorchTensor& w1 = tensor("layers.0.feed_forward.w1.weight");
            if (w1.shape.empty() || w1.shape[0] <= 0)
                fail("pytorch", "{}: tensor '{}' has shape {}", c_.path, printable(w1.name), shape_text(w1.shape));
            hidden_ = w1.shape[0];
        }
        max_seq_len_ = arg("max_seq_len").value_or(kDefaultMaxSeqLen);
        norm_eps_ = kDefaultNormEps;
        if (const GgufValue* eps = c_.find_value("model_args.norm_eps")) {
            const std::optional<double> e = eps->as_number();
            if (!e || !(*e > 0) || *e >= 1) fail("pytorch", "{}: model_args.norm_eps is not a number in (0, 1)", c_.path);
            norm_eps_ = *e;
        }
        for (int64_t v : {dim_, vocab_, n_layers_, n_kv_heads_, hidden_})
            if (v <= 0 || v > std::numeric_limits<uint32_t>::max())
                fail("pytorch", "{}: a hyper-parameter inferred from shapes is {}, out of range", c_.path, v);
    }

    // Every tensor under the prefix must be one this mapping writes (or a RoPE
    // table model.py recomputes): anything else belongs to another architecture.
    void check_tensor_names() const {
        std::set<std::string> known = {prefix_ + "tok_embeddings.weight", prefix_ + "norm.weight",
                                       prefix_ + "output.weight"};
        for (std::string_view buffer : kRopeBuffers) known.insert(prefix_ + std::string(buffer));
        for (int64_t layer = 0; layer < n_layers_; ++layer)
            for (const LayerTensor& lt : kLayerTensors) known.insert(fmt::format("{}layers.{}.{}", prefix_, layer, lt.torch));
        for (const TorchTensor& t : c_.tensors) {
            if (!t.name.starts_with(prefix_) || known.contains(t.name)) continue;
            if (t.name.starts_with(prefix_ + "layers."))
                fail("pytorch", "{}: tensor '{}' is not part of a llama2.c model with {} layers", c_.path,
                     printable(t.name), n_layers_);
            // With no prefix, the top level also holds a training checkpoint's
            // other entries; only names that look like model weights count.
            if (prefix_.empty() && !t.name.ends_with(".weight") && !t.name.ends_with(".bias")) continue;
            fail("pytorch", "{}: tensor '{}' is not part of llama2.c's model (an unknown architecture?)", c_.path,
                 printable(t.name));
        }
    }

    static bool tied(const TorchTensor& a, const TorchTensor& b) {
        return a.storage == b.storage && a.storage_offset == b.storage_offset && a.shape == b.shape &&
               a.stride == b.stride && a.type == b.type;
    }

    void add(Checkpoint& out, const TorchTensor& t, std::string gguf_name, const std::vector<int64_t>& expected) const {
        if (t.shape != expected)
            fail("pytorch", "{}: tensor '{}' has shape {} but the hyper-parameters ({}) expect {}", c_.path,
                 printable(t.name), shape_text(t.shape), hyper_text(), shape_text(expected));
        CheckpointTensor ct{std::move(gguf_name), t.type, {}, t.data};
        for (size_t d = t.shape.size(); d-- > 0;) ct.dims.push_back(static_cast<uint64_t>(t.shape[d]));
        out.tensors.push_back(std::move(ct));
    }

    std::string hyper_text() const {
        return fmt::format("dim {}, n_layers {}, n_heads {}, n_kv_heads {}, hidden_dim {}, vocab_size {}{}", dim_,
                           n_layers_, n_heads_, n_kv_heads_, hidden_, vocab_,
                           args_text_.empty() ? "; no model_args, inferred from shapes"
                                              : fmt::format("; model_args gave {}", args_text_));
    }

    arch::LlamaParams params() const {
        arch::LlamaParams p;
        p.name = std::string(name_);
        p.n_vocab = vocab_;
        p.n_ctx_train = max_seq_len_;
        p.dim = dim_;
        p.n_layers = n_layers_;
        p.n_heads = n_heads_;
        p.n_kv_heads = n_kv_heads_;
        p.ffn_dim = hidden_;
        p.n_rot = head_dim_;
        p.norm_eps = static_cast<float>(norm_eps_);
        return p;
    }

    const TorchCheckpoint& c_;
    std::string_view name_;
    std::string prefix_;
    mutable std::string args_text_;  // "dim 32, n_heads 4, ...": what model_args said, for messages
    int64_t dim_ = 0, vocab_ = 0, n_layers_ = 0, n_heads_ = 0, n_kv_heads_ = 0, head_dim_ = 0, hidden_ = 0;
    int64_t max_seq_len_ = 0;
    double norm_eps_ = 0;
};

}  // namespace

Checkpoint llama_checkpoint_from_state_dict(const TorchCheckpoint& checkpoint, std::string_view name) {
    return Mapper(checkpoint, name).run();
}

}  // namespace kiln
