#include "formats/checkpoint/transformer_state_dict.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/checkpoint/layer_count.h"
#include "formats/arch/transformer_arch.h"
#include "formats/checkpoint/char_vocabulary.h"

namespace kiln {
namespace {

constexpr std::string_view kMarker = "transformer.encoder.layers.0.self_attn.in_proj_weight";
constexpr uint64_t kDefaultMaxLen = 5000;
constexpr double kDefaultNormEps = 1e-5;

constexpr std::string_view kSourceEmbeddings[] = {"src_embed.weight", "src_tok_emb.embedding.weight"};
constexpr std::string_view kTargetEmbeddings[] = {"tgt_embed.weight", "tgt_tok_emb.embedding.weight"};
constexpr std::string_view kPositionBuffers[] = {"pe", "pos_encoder.pe", "positional_encoding.pe",
                                                 "positional_encoding.pos_embedding"};

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

// torch.nn.Transformer's names inside a layer -> the transformer descriptor's tensors of a block.
using Names = arch::Affine<std::string>;
using EncoderNames = arch::EncoderLayerTensors<std::string>;
using DecoderNames = arch::DecoderLayerTensors<std::string>;
template <typename Layer>
struct Plain {
    std::string_view torch;  // "linear1", "norm1", ...
    Names Layer::*gguf;      // ffn_up, attn_norm, ...
};
constexpr Plain<EncoderNames> kEncoderPlain[] = {{"norm1", &EncoderNames::attn_norm},
                                                 {"linear1", &EncoderNames::ffn_up},
                                                 {"linear2", &EncoderNames::ffn_down},
                                                 {"norm2", &EncoderNames::ffn_norm}};
constexpr Plain<DecoderNames> kDecoderPlain[] = {{"norm1", &DecoderNames::attn_norm},
                                                 {"norm2", &DecoderNames::cross_attn_norm},
                                                 {"linear1", &DecoderNames::ffn_up},
                                                 {"linear2", &DecoderNames::ffn_down},
                                                 {"norm3", &DecoderNames::ffn_norm}};

class Mapper {
public:
    Mapper(const TorchCheckpoint& c, std::string_view name) : c_(c), name_(name) {}

    Checkpoint run() {
        prefix_ = *find_state_dict_prefix(c_, kMarker);
        src_ = &first_of(kSourceEmbeddings);
        tgt_ = &first_of(kTargetEmbeddings);
        read_hyper_parameters();
        check_tensor_names();

        Checkpoint out;
        out.source = c_.source;
        const arch::TransformerParams p = params();
        out.metadata = p.metadata();
        const arch::TransformerTensors<std::string> names = arch::transformer_tensor_names(p);
        const int64_t d = d_model_, f = ffn_;
        add(out, *src_, names.token_embd, {vocab_, d});
        if (!tied(*tgt_, *src_)) add(out, *tgt_, names.dec_token_embd, {vocab_, d});
        for (int64_t layer = 0; layer < n_enc_; ++layer) {
            const std::string from = fmt::format("transformer.encoder.layers.{}.", layer);
            const EncoderNames& to = names.encoder[static_cast<size_t>(layer)];
            attention(out, from + "self_attn.", to.attn);
            for (const auto& plain_tensor : kEncoderPlain) plain(out, from, plain_tensor.torch, to.*plain_tensor.gguf, d, f);
        }
        norm(out, "transformer.encoder.norm.", names.enc_output_norm);
        for (int64_t layer = 0; layer < n_dec_; ++layer) {
            const std::string from = fmt::format("transformer.decoder.layers.{}.", layer);
            const DecoderNames& to = names.decoder[static_cast<size_t>(layer)];
            attention(out, from + "self_attn.", to.attn);
            attention(out, from + "multihead_attn.", to.cross_attn);
            for (const auto& plain_tensor : kDecoderPlain) plain(out, from, plain_tensor.torch, to.*plain_tensor.gguf, d, f);
        }
        norm(out, "transformer.decoder.norm.", names.dec_output_norm);
        const TorchTensor& generator = required("generator.weight");
        if (!tied(generator, *tgt_)) add(out, generator, names.output.weight, {vocab_, d});
        if (const TorchTensor* b = find("generator.bias")) add(out, *b, names.output.bias, {vocab_});
        add_vocabulary(out);
        return out;
    }

private:
    const TorchTensor* find(std::string_view name) const { return c_.find_tensor(prefix_ + std::string(name)); }

    const TorchTensor& required(std::string_view name) const {
        const TorchTensor* t = find(name);
        if (t == nullptr) fail("pytorch", "{}: tensor '{}{}' is missing", c_.path, prefix_, name);
        return *t;
    }

    template <size_t N>
    const TorchTensor& first_of(const std::string_view (&names)[N]) const {
        for (std::string_view n : names)
            if (const TorchTensor* t = find(n)) return *t;
        fail("pytorch", "{}: no embedding table: expected '{}{}' (or '{}{}')", c_.path, prefix_, names[0], prefix_,
             names[N - 1]);
    }

    const GgufValue* arg_value(std::string_view key) const { return c_.find_value(fmt::format("model_args.{}", key)); }

    std::optional<int64_t> arg(std::string_view key) {
        const GgufValue* v = arg_value(key);
        if (v == nullptr) return std::nullopt;
        const std::optional<int64_t> i = v->type() == GgufType::INT64 ? v->as_int() : std::nullopt;
        if (!i || *i <= 0 || *i > std::numeric_limits<uint32_t>::max())
            fail("pytorch", "{}: model_args.{} is not a positive integer below 2^32", c_.path, key);
        args_text_ += fmt::format("{}{} {}", args_text_.empty() ? "" : ", ", key, *i);
        return i;
    }

    // The distinct layer indices of one stack, counted (formats/checkpoint/layer_count.h).
    LayerCount layers_found(std::string_view stack) const {
        LayerCount layers(fmt::format("{}transformer.{}.layers.", prefix_, stack));
        for (const TorchTensor& t : c_.tensors) layers.see(t.name);
        return layers;
    }

    void read_hyper_parameters() {
        if (src_->shape.size() != 2)
            fail("pytorch", "{}: tensor '{}' has shape {} but an embedding table is 2-D (vocab, d_model)", c_.path,
                 printable(src_->name), shape_text(src_->shape));
        vocab_ = src_->shape[0];
        if (tgt_->shape.size() == 2 && tgt_->shape[0] != vocab_)
            fail("pytorch", "{}: the source vocabulary has {} tokens and the target vocabulary {}; kiln's transformer "
                 "needs one shared vocabulary", c_.path, vocab_, tgt_->shape[0]);
        const std::optional<int64_t> heads = arg("nhead");
        if (!heads)
            fail("pytorch", "{}: model_args.nhead is missing, and the number of attention heads cannot be inferred from "
                 "tensor shapes", c_.path);
        n_heads_ = *heads;
        d_model_ = arg("d_model").value_or(src_->shape[1]);
        const LayerCount encoder = layers_found("encoder"), decoder = layers_found("decoder");
        n_enc_ = arg("num_encoder_layers").value_or(static_cast<int64_t>(encoder.found()));
        n_dec_ = arg("num_decoder_layers").value_or(static_cast<int64_t>(decoder.found()));
        encoder.check(static_cast<uint64_t>(std::max<int64_t>(n_enc_, 0)), "pytorch", c_.path,
                      "model_args.num_encoder_layers");
        decoder.check(static_cast<uint64_t>(std::max<int64_t>(n_dec_, 0)), "pytorch", c_.path,
                      "model_args.num_decoder_layers");
        if (n_enc_ <= 0 || n_dec_ <= 0) fail("pytorch", "{}: the model needs encoder and decoder layers", c_.path);
        const TorchTensor& linear1 = required("transformer.encoder.layers.0.linear1.weight");
        ffn_ = arg("dim_feedforward").value_or(linear1.shape.empty() ? 0 : linear1.shape[0]);
        max_len_ = arg("max_len").value_or(kDefaultMaxLen);
        if (d_model_ % n_heads_ != 0)
            fail("pytorch", "{}: d_model {} is not a multiple of nhead {}", c_.path, d_model_, n_heads_);
        if (ffn_ <= 0) fail("pytorch", "{}: tensor '{}' has shape {}", c_.path, printable(linear1.name), shape_text(linear1.shape));
        if (const GgufValue* v = arg_value("norm_first")) {
            const std::optional<bool> b = v->as_bool();
            if (!b) fail("pytorch", "{}: model_args.norm_first is not a bool", c_.path);
            norm_first_ = *b;
        }
        if (const GgufValue* v = arg_value("activation")) {
            const std::string* s = v->as_string();
            if (s == nullptr || (*s != "relu" && *s != "gelu"))
                fail("pytorch", "{}: model_args.activation must be \"relu\" or \"gelu\" (kiln's transformer knows those two)",
                     c_.path);
            activation_ = *s;
        }
        norm_eps_ = kDefaultNormEps;
        if (const GgufValue* v = arg_value("layer_norm_eps")) {
            const std::optional<double> e = v->as_number();
            if (!e || !(*e > 0) || *e >= 1) fail("pytorch", "{}: model_args.layer_norm_eps is not a number in (0, 1)", c_.path);
            norm_eps_ = *e;
        }
    }

    void check_tensor_names() const {
        std::set<std::string> known = {"generator.weight", "generator.bias", "transformer.encoder.norm.weight",
                                       "transformer.encoder.norm.bias", "transformer.decoder.norm.weight",
                                       "transformer.decoder.norm.bias"};
        for (auto list : {std::span<const std::string_view>(kSourceEmbeddings), std::span<const std::string_view>(kTargetEmbeddings),
                          std::span<const std::string_view>(kPositionBuffers)})
            for (std::string_view n : list) known.insert(std::string(n));
        const auto add_attention = [&](const std::string& base) {
            for (std::string_view p : {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"})
                known.insert(base + std::string(p));
        };
        const auto add_plain = [&](const std::string& base, const auto& plains) {
            for (const auto& p : plains)
                for (std::string_view w : {".weight", ".bias"}) known.insert(base + std::string(p.torch) + std::string(w));
        };
        for (int64_t l = 0; l < n_enc_; ++l) {
            const std::string base = fmt::format("transformer.encoder.layers.{}.", l);
            add_attention(base + "self_attn.");
            add_plain(base, kEncoderPlain);
        }
        for (int64_t l = 0; l < n_dec_; ++l) {
            const std::string base = fmt::format("transformer.decoder.layers.{}.", l);
            add_attention(base + "self_attn.");
            add_attention(base + "multihead_attn.");
            add_plain(base, kDecoderPlain);
        }
        for (const TorchTensor& t : c_.tensors) {
            if (!t.name.starts_with(prefix_)) continue;
            const std::string rest = t.name.substr(prefix_.size());
            if (known.contains(rest)) continue;
            if (prefix_.empty() && !rest.ends_with(".weight") && !rest.ends_with(".bias") && !rest.starts_with("transformer."))
                continue;  // a training checkpoint's other top-level entries
            fail("pytorch", "{}: tensor '{}' is not part of a torch.nn.Transformer seq2seq model with {} encoder and {} "
                 "decoder layers (an unknown architecture?)", c_.path, printable(t.name), n_enc_, n_dec_);
        }
    }

    static bool tied(const TorchTensor& a, const TorchTensor& b) {
        if (a.type != b.type || a.shape != b.shape) return false;
        if (a.storage == b.storage && a.storage_offset == b.storage_offset && a.stride == b.stride) return true;
        return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0;
    }

    void add(Checkpoint& out, const TorchTensor& t, std::string gguf, const std::vector<int64_t>& expected) const {
        add_view(out, t, t.data, std::move(gguf), expected, t.shape);
    }

    void add_view(Checkpoint& out, const TorchTensor& t, std::span<const std::byte> data, std::string gguf,
                  const std::vector<int64_t>& expected, const std::vector<int64_t>& shape) const {
        if (shape != expected)
            fail("pytorch", "{}: tensor '{}' has shape {} but the hyper-parameters ({}) expect {}", c_.path,
                 printable(t.name), shape_text(t.shape), hyper_text(), shape_text(expected));
        CheckpointTensor ct{std::move(gguf), t.type, {}, data};
        for (size_t i = shape.size(); i-- > 0;) ct.dims.push_back(static_cast<uint64_t>(shape[i]));
        out.tensors.push_back(std::move(ct));
    }

    // in_proj_weight (3d, d) / in_proj_bias (3d): Q, K, V are consecutive row ranges.
    void attention(Checkpoint& out, const std::string& from, const arch::AttentionTensors<std::string>& to) const {
        const int64_t d = d_model_;
        const Names* parts[] = {&to.q, &to.k, &to.v};
        const TorchTensor& w = required(from + "in_proj_weight");
        if (w.shape != std::vector<int64_t>{3 * d, d}) add(out, w, to.q.weight, {3 * d, d});  // throws the shape error
        const size_t part = w.data.size() / 3;
        for (size_t i = 0; i < 3; ++i) add_view(out, w, w.data.subspan(i * part, part), parts[i]->weight, {d, d}, {d, d});
        if (const TorchTensor* b = find(from + "in_proj_bias")) {
            if (b->shape != std::vector<int64_t>{3 * d}) add(out, *b, to.q.bias, {3 * d});
            const size_t bpart = b->data.size() / 3;
            for (size_t i = 0; i < 3; ++i) add_view(out, *b, b->data.subspan(i * bpart, bpart), parts[i]->bias, {d}, {d});
        }
        add(out, required(from + "out_proj.weight"), to.o.weight, {d, d});
        if (const TorchTensor* b = find(from + "out_proj.bias")) add(out, *b, to.o.bias, {d});
    }

    void plain(Checkpoint& out, const std::string& from, std::string_view torch, const Names& to, int64_t d,
               int64_t f) const {
        std::vector<int64_t> weight = {d}, bias = {d};
        if (torch == "linear1") weight = {f, d}, bias = {f};
        if (torch == "linear2") weight = {d, f};
        add(out, required(from + std::string(torch) + ".weight"), to.weight, weight);
        if (const TorchTensor* b = find(from + std::string(torch) + ".bias")) add(out, *b, to.bias, bias);
    }

    // A stack's final norm: optional.
    void norm(Checkpoint& out, const std::string& from, const Names& to) const {
        const TorchTensor* w = find(from + "weight");
        if (w == nullptr) return;
        add(out, *w, to.weight, {d_model_});
        if (const TorchTensor* b = find(from + "bias")) add(out, *b, to.bias, {d_model_});
    }

    std::optional<uint32_t> special(std::string_view role, const std::vector<std::string>& itos) const {
        const GgufValue* v = c_.find_value(fmt::format("specials.{}", role));
        if (v == nullptr) return std::nullopt;
        if (const std::string* s = v->as_string()) {
            for (size_t i = 0; i < itos.size(); ++i)
                if (itos[i] == *s) return static_cast<uint32_t>(i);
            fail("tokenizer", "{}: specials.{} is '{}', which is not in itos", c_.path, role, printable(*s));
        }
        const std::optional<int64_t> id = v->as_int();
        if (!id || *id < 0 || *id >= static_cast<int64_t>(itos.size()))
            fail("tokenizer", "{}: specials.{} is neither a token of itos nor an id below {}", c_.path, role, itos.size());
        return static_cast<uint32_t>(*id);
    }

    void add_vocabulary(Checkpoint& out) const {
        const GgufValue* itos = c_.find_value("itos");
        if (itos == nullptr) return;  // weights only; kiln-convert says so
        const GgufArray* array = itos->as_array();
        if (array == nullptr || (array->element_type != GgufType::STRING && !array->items.empty()))
            fail("tokenizer", "{}: \"itos\" is not a list of strings", c_.path);
        CharVocabulary v;
        for (const GgufValue& item : array->items) v.tokens.push_back(*item.as_string());
        v.control.assign(v.tokens.size(), false);
        v.bos = special("bos", v.tokens);
        v.eos = special("eos", v.tokens);
        v.pad = special("pad", v.tokens);
        v.unk = special("unk", v.tokens);
        for (const auto& id : {v.bos, v.eos, v.pad, v.unk})
            if (id) v.control[*id] = true;
        add_char_tokenizer(out, v, static_cast<uint64_t>(vocab_), c_.path + " (itos)");
    }

    std::string hyper_text() const {
        return fmt::format("d_model {}, nhead {}, encoder layers {}, decoder layers {}, dim_feedforward {}, vocab {}{}",
                           d_model_, n_heads_, n_enc_, n_dec_, ffn_, vocab_,
                           args_text_.empty() ? "; no model_args, inferred from shapes"
                                              : fmt::format("; model_args gave {}", args_text_));
    }

    arch::TransformerParams params() const {
        arch::TransformerParams p;
        p.name = std::string(name_);
        // A "name" beside "model" (kiln-convert's export writes general.name there) wins over the file's name.
        if (const GgufValue* v = c_.find_value("name"); v != nullptr && v->as_string() != nullptr) p.name = *v->as_string();
        p.n_vocab = vocab_;
        p.n_ctx = max_len_;
        p.dim = d_model_;
        p.n_encoder_layers = n_enc_;
        p.n_decoder_layers = n_dec_;
        p.n_heads = n_heads_;
        p.ffn_dim = ffn_;
        p.norm_eps = static_cast<float>(norm_eps_);
        p.norm_first = norm_first_;
        p.activation = activation_ == "gelu" ? arch::TransformerParams::Activation::Gelu
                                             : arch::TransformerParams::Activation::Relu;
        return p;
    }

    const TorchCheckpoint& c_;
    std::string_view name_;
    std::string prefix_;
    const TorchTensor* src_ = nullptr;
    const TorchTensor* tgt_ = nullptr;
    std::string args_text_;
    int64_t vocab_ = 0, d_model_ = 0, n_heads_ = 0, n_enc_ = 0, n_dec_ = 0, ffn_ = 0, max_len_ = 0;
    double norm_eps_ = 0;
    bool norm_first_ = false;
    std::string activation_ = "relu";
};

}  // namespace

bool is_transformer_state_dict(const TorchCheckpoint& checkpoint) {
    return find_state_dict_prefix(checkpoint, kMarker).has_value();
}

Checkpoint transformer_checkpoint_from_state_dict(const TorchCheckpoint& checkpoint, std::string_view name) {
    if (!is_transformer_state_dict(checkpoint))
        fail("pytorch", "{}: no torch.nn.Transformer model in the checkpoint (no '{}')", checkpoint.path, kMarker);
    return Mapper(checkpoint, name).run();
}

}  // namespace kiln
