#include "convert/export_torch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "formats/arch/transformer_arch.h"
#include "formats/checkpoint/hf_tokenizer_writer.h"
#include "formats/checkpoint/torch_writer.h"
#include "formats/io/atomic_file.h"
#include "formats/io/atomic_folder.h"

namespace kiln::convert {

namespace {

using Json = nlohmann::ordered_json;
using pickle::PickleDict;
using pickle::PickleList;
using pickle::PickleValue;
using pickle::TensorRecord;
using pickle::TorchDType;

// torch.nn.LayerNorm's default epsilon, which kiln's reader assumes when model_args has none.
constexpr float kTorchDefaultEps = 1e-5f;

// The metadata keys kiln's reader writes back from what model.pt holds.
constexpr std::string_view kCarriedTokenizerKeys[] = {
    "tokenizer.ggml.model",          "tokenizer.ggml.tokens",           "tokenizer.ggml.token_type",
    "tokenizer.ggml.bos_token_id",   "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token"};

// A float as JSON should show it: its shortest decimal, which reads back as the same float.
double shortest(float f) { return std::stod(fmt::format("{}", f)); }

// A tensor as it goes into model.pt: its bytes in a torch dtype.
struct Out {
    DType type;
    std::span<const std::byte> data;
};

class Exporter {
public:
    Exporter(const Checkpoint& c, std::FILE* log) : c_(c), log_(log) {}

    void run(const std::filesystem::path& folder) {
        std::vector<arch::EntryMetadata::Tensor> shapes;
        for (const CheckpointTensor& t : c_.tensors) shapes.push_back({t.name, t.dims});
        const arch::EntryMetadata metadata("the model", c_.metadata, std::move(shapes));
        p_ = arch::TransformerParams::read(metadata);
        check_tensors();

        PickleDict state{{}, true};
        const arch::TransformerTensors<std::string> n = arch::transformer_tensor_names(p_);
        const TensorRecord src = tensor(n.token_embd);
        const TensorRecord tgt = by_name_.contains(n.dec_token_embd) ? tensor(n.dec_token_embd) : src;
        state.items.emplace_back("src_embed.weight", src);
        state.items.emplace_back("tgt_embed.weight", tgt);
        for (size_t l = 0; l < n.encoder.size(); ++l) {
            const auto& e = n.encoder[l];
            const std::string base = fmt::format("transformer.encoder.layers.{}.", l);
            attention(state, base + "self_attn.", e.attn);
            affine(state, base + "linear1", e.ffn_up);
            affine(state, base + "linear2", e.ffn_down);
            affine(state, base + "norm1", e.attn_norm);
            affine(state, base + "norm2", e.ffn_norm);
        }
        affine(state, "transformer.encoder.norm", n.enc_output_norm);
        for (size_t l = 0; l < n.decoder.size(); ++l) {
            const auto& d = n.decoder[l];
            const std::string base = fmt::format("transformer.decoder.layers.{}.", l);
            attention(state, base + "self_attn.", d.attn);
            attention(state, base + "multihead_attn.", d.cross_attn);
            affine(state, base + "linear1", d.ffn_up);
            affine(state, base + "linear2", d.ffn_down);
            affine(state, base + "norm1", d.attn_norm);
            affine(state, base + "norm2", d.cross_attn_norm);
            affine(state, base + "norm3", d.ffn_norm);
        }
        affine(state, "transformer.decoder.norm", n.dec_output_norm);
        const bool tied_generator = !by_name_.contains(n.output.weight);
        state.items.emplace_back("generator.weight", tied_generator ? tgt : tensor(n.output.weight));
        if (by_name_.contains(n.output.bias)) state.items.emplace_back("generator.bias", tensor(n.output.bias));

        const size_t tensor_count = state.items.size();
        PickleDict root;
        root.items.emplace_back("model", std::move(state));
        root.items.emplace_back("model_args", model_args());
        vocabulary(root);
        if (!p_.name.empty()) root.items.emplace_back("name", p_.name);  // general.name, which kiln's reader takes back
        note_left_out_metadata();

        Json config;
        config["architecture"] = std::string(arch::kTransformer);
        config["format"] = "torch.save of a torch.nn.Transformer seq2seq model (model.pt)";
        config["vocab_size"] = p_.n_vocab;
        config["d_model"] = p_.dim;
        config["nhead"] = p_.n_heads;
        config["num_encoder_layers"] = p_.n_encoder_layers;
        config["num_decoder_layers"] = p_.n_decoder_layers;
        config["dim_feedforward"] = p_.ffn_dim;
        config["max_len"] = p_.n_ctx;
        config["norm_first"] = p_.norm_first;
        config["activation"] = activation();
        config["layer_norm_eps"] = shortest(p_.norm_eps);
        config["tied_embeddings"] = !by_name_.contains(n.dec_token_embd);
        config["tied_generator"] = tied_generator;
        for (const auto& [key, id] : special_ids_.items()) config[key] = id;

        AtomicFolder out(folder);
        write_torch_checkpoint(out.path() / "model.pt", root, storages_);
        AtomicFile file(out.path() / "config.json");
        const std::string text = config.dump(2) + "\n";
        file.write(std::as_bytes(std::span(text.data(), text.size())));
        file.commit();
        for (const auto& [name, bytes] : tokenizer_.files) {
            AtomicFile f(out.path() / name);
            f.write(std::as_bytes(std::span(bytes.data(), bytes.size())));
            f.commit();
        }
        out.commit();

        fmt::print(log_, "kiln-convert: wrote {} (model.pt: a torch.nn.Transformer state dict, {} tensors, {} "
                   "parameters{}{}; config.json{})\n", folder.string(), tensor_count, parameters_,
                   vocabulary_note_, tied_note(), tokenizer_files_note());
        if (dequantized_ != 0)
            fmt::print(log_, "note: {} quantized tensors are written as float32 (dequantized)\n", dequantized_);
        for (const std::string& note : notes_) fmt::print(log_, "note: {}\n", note);
    }

private:
    void check_tensors() {
        std::map<std::string, arch::TensorSpec> specs;
        for (arch::TensorSpec& s : arch::transformer_tensor_specs(p_)) specs.emplace(s.name, std::move(s));
        for (const CheckpointTensor& t : c_.tensors) {
            const auto spec = specs.find(t.name);
            if (spec == specs.end())
                fail("convert", "cannot export tensor '{}': it is not part of the transformer layout", t.name);
            if (t.dims != spec->second.dims)
                fail("convert", "cannot export tensor '{}': its dims are [{}] but the hyper-parameters give [{}]",
                     t.name, fmt::join(t.dims, ", "), fmt::join(spec->second.dims, ", "));
            if (!by_name_.emplace(t.name, &t).second) fail("convert", "cannot export: tensor '{}' appears twice", t.name);
        }
        for (const auto& [name, spec] : specs)
            if (!spec.optional && !by_name_.contains(name))
                fail("convert", "cannot export: the model lacks tensor '{}'", name);
    }

    // The tensor's bytes in a type torch holds: floats as they are, quantized ones as float32.
    Out bytes_of(const std::string& name) {
        const CheckpointTensor& t = *by_name_.at(name);
        if (t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16) return {t.type, t.data};
        const TypeTraits& traits = type_traits(t.type);
        if (traits.to_float == nullptr)
            fail("convert", "cannot export tensor '{}': kiln cannot read {} values", t.name, dtype_name(t.type));
        const auto elements = *checked_element_count(t.dims);
        std::vector<std::byte> floats(elements * sizeof(float));
        traits.to_float(t.data.data(), reinterpret_cast<float*>(floats.data()), static_cast<int64_t>(elements));
        owned_.push_back(std::move(floats));
        ++dequantized_;
        return {DType::F32, owned_.back()};
    }

    static TorchDType torch_type(DType t) {
        return t == DType::F16 ? TorchDType::Float16 : t == DType::BF16 ? TorchDType::BFloat16 : TorchDType::Float32;
    }

    // A new storage holding `out`, viewed whole with torch shape `shape` (contiguous).
    TensorRecord record(const Out& out, std::vector<int64_t> shape) {
        TensorRecord r;
        r.storage_key = std::to_string(storages_.size());
        r.dtype = torch_type(out.type);
        r.storage_numel = static_cast<int64_t>(out.data.size() / pickle::torch_dtype_size(r.dtype));
        r.size = std::move(shape);
        int64_t stride = 1;
        r.stride.assign(r.size.size(), 0);
        for (size_t d = r.size.size(); d-- > 0;) {
            r.stride[d] = stride;
            stride *= r.size[d];
        }
        storages_.push_back({r.storage_key, out.data});
        parameters_ += r.storage_numel;
        return r;
    }

    // GGUF dims reversed are torch's shape (ggml's dims[0] varies fastest).
    TensorRecord tensor(const std::string& name) {
        const CheckpointTensor& t = *by_name_.at(name);
        return record(bytes_of(name), std::vector<int64_t>(t.dims.rbegin(), t.dims.rend()));
    }

    void affine(PickleDict& state, const std::string& torch, const arch::Affine<std::string>& gguf) {
        if (by_name_.contains(gguf.weight)) state.items.emplace_back(torch + ".weight", tensor(gguf.weight));
        if (by_name_.contains(gguf.bias)) state.items.emplace_back(torch + ".bias", tensor(gguf.bias));
    }

    // Q, K and V, each (d, d) or (d), one after another in one storage: in_proj_weight (3d, d), in_proj_bias (3d).
    TensorRecord fused(const std::string& torch, const std::array<std::string, 3>& parts) {
        std::array<Out, 3> out{bytes_of(parts[0]), bytes_of(parts[1]), bytes_of(parts[2])};
        for (size_t i = 1; i < 3; ++i)
            if (out[i].type != out[0].type)
                fail("convert", "cannot export {}: '{}' is {} but '{}' is {}, and torch holds them as one tensor",
                     torch, parts[0], dtype_name(out[0].type), parts[i], dtype_name(out[i].type));
        std::vector<std::byte> joined;
        for (const Out& o : out) joined.insert(joined.end(), o.data.begin(), o.data.end());
        owned_.push_back(std::move(joined));
        const CheckpointTensor& q = *by_name_.at(parts[0]);
        std::vector<int64_t> shape(q.dims.rbegin(), q.dims.rend());
        shape[0] *= 3;
        return record({out[0].type, owned_.back()}, std::move(shape));
    }

    void attention(PickleDict& state, const std::string& torch, const arch::AttentionTensors<std::string>& gguf) {
        state.items.emplace_back(torch + "in_proj_weight",
                                 fused(torch + "in_proj_weight", {gguf.q.weight, gguf.k.weight, gguf.v.weight}));
        const std::array<std::string, 3> biases{gguf.q.bias, gguf.k.bias, gguf.v.bias};
        const auto present = std::count_if(biases.begin(), biases.end(), [&](const std::string& b) { return by_name_.contains(b); });
        if (present == 3) state.items.emplace_back(torch + "in_proj_bias", fused(torch + "in_proj_bias", biases));
        else if (present != 0)
            fail("convert", "cannot export {}in_proj_bias: the model has biases on some of Q, K and V only ({}, {}, {}); "
                 "torch holds all three or none", torch, biases[0], biases[1], biases[2]);
        affine(state, torch + "out_proj", gguf.o);
    }

    std::string activation() const {
        return p_.activation == arch::TransformerParams::Activation::Gelu ? "gelu" : "relu";
    }

    PickleDict model_args() {
        PickleDict args;
        args.items = {{"vocab_size", p_.n_vocab},
                      {"d_model", p_.dim},
                      {"nhead", p_.n_heads},
                      {"num_encoder_layers", p_.n_encoder_layers},
                      {"num_decoder_layers", p_.n_decoder_layers},
                      {"dim_feedforward", p_.ffn_dim},
                      {"max_len", p_.n_ctx},
                      {"norm_first", p_.norm_first},
                      {"activation", activation()}};
        if (p_.norm_eps != kTorchDefaultEps) {
            // The shortest decimal of the float: what a user would have typed, and the same float read back.
            args.items.emplace_back("layer_norm_eps", shortest(p_.norm_eps));
            notes_.push_back(fmt::format("model_args.layer_norm_eps {} is a float, which torch < 2.0 cannot load with "
                                         "weights_only=True (torch.load(..., weights_only=False) can)", p_.norm_eps));
        }
        return args;
    }

    const GgufValue* find(std::string_view key) const {
        for (const GgufEntry& e : c_.metadata)
            if (e.key == key) return &e.value;
        return nullptr;
    }

    // A char vocabulary as itos + specials; anything else is left out (noted).
    void vocabulary(PickleDict& root) {
        const GgufValue* model = find("tokenizer.ggml.model");
        if (model == nullptr) {
            vocabulary_note_ = ", no vocabulary";
            notes_.push_back("the model has no vocabulary: model.pt holds no \"itos\"");
            return;
        }
        if (model->as_string() == nullptr || *model->as_string() != "char") {
            // "itos" holds characters only: a SentencePiece or BPE vocabulary goes beside model.pt as
            // the Hugging Face tokenizer files (refused by name where those cannot say it).
            const std::string kind = model->as_string() ? *model->as_string() : std::string("?");
            tokenizer_ = hf_tokenizer_files(c_.metadata, arch::kTransformer);
            vocabulary_in_files_ = true;
            if (tokenizer_.files.empty()) {
                vocabulary_note_ = ", no vocabulary";
                notes_.push_back(fmt::format("the vocabulary (tokenizer.ggml.model '{}') has no place in model.pt "
                                             "and no Hugging Face file kiln writes: not written", kind));
            } else {
                std::vector<std::string> names;
                for (const auto& file : tokenizer_.files) names.push_back(file.first);
                vocabulary_note_ = fmt::format(", no itos: the vocabulary is in {}", fmt::join(names, ", "));
                notes_.push_back(fmt::format("the vocabulary (tokenizer.ggml.model '{}') is not a character "
                                             "vocabulary, which is all \"itos\" holds: convert back with --tokenizer "
                                             "FOLDER/{}", kind, names.front()));
            }
            for (const std::string& note : tokenizer_.notes) notes_.push_back(note);
            special_ids_ = tokenizer_.special_ids;
            return;
        }
        const GgufValue* tokens = find("tokenizer.ggml.tokens");
        const GgufArray* list = tokens ? tokens->as_array() : nullptr;
        if (list == nullptr || (list->element_type != GgufType::STRING && !list->items.empty()))
            fail("convert", "cannot export the vocabulary: tokenizer.ggml.tokens is not a list of strings");
        if (static_cast<int64_t>(list->items.size()) != p_.n_vocab)
            fail("convert", "cannot export the vocabulary: {} tokens for an embedding of {} rows", list->items.size(),
                 p_.n_vocab);
        PickleList itos;
        for (const GgufValue& t : list->items) itos.emplace_back(*t.as_string());

        // kiln's reader makes the named specials control tokens and every other token a normal one.
        PickleDict specials;
        std::set<int64_t> special_ids;
        constexpr std::pair<const char*, const char*> kRoles[] = {{"bos", "tokenizer.ggml.bos_token_id"},
                                                                  {"eos", "tokenizer.ggml.eos_token_id"},
                                                                  {"pad", "tokenizer.ggml.padding_token_id"},
                                                                  {"unk", "tokenizer.ggml.unknown_token_id"}};
        for (const auto& [role, key] : kRoles) {
            const GgufValue* v = find(key);
            if (v == nullptr) continue;
            const std::optional<int64_t> id = v->as_int();
            if (!id || *id < 0 || *id >= p_.n_vocab)
                fail("convert", "cannot export the vocabulary: {} is not a token id below {}", key, p_.n_vocab);
            specials.items.emplace_back(role, *list->items[static_cast<size_t>(*id)].as_string());
            special_ids.insert(*id);
            special_ids_[std::string(role) + "_token_id"] = *id;
        }
        if (const GgufValue* types = find("tokenizer.ggml.token_type")) {
            const GgufArray* t = types->as_array();
            if (t == nullptr || t->items.size() != list->items.size())
                fail("convert", "cannot export the vocabulary: tokenizer.ggml.token_type does not give one type per token");
            for (size_t id = 0; id < t->items.size(); ++id) {
                const std::optional<int64_t> type = t->items[id].as_int();
                const int64_t expected = special_ids.contains(static_cast<int64_t>(id)) ? 3 : 1;  // control : normal
                if (type != expected)
                    fail("convert", "cannot export the vocabulary: token {} '{}' has type {} but model.pt can only say "
                         "{} (its specials, bos/eos/pad/unk, are the control tokens; every other token is normal)",
                         id, *list->items[id].as_string(), type ? *type : -1, expected);
            }
        }
        if (const GgufValue* add_bos = find("tokenizer.ggml.add_bos_token"); add_bos && add_bos->as_bool() != false)
            notes_.push_back("tokenizer.ggml.add_bos_token is true, but kiln reads a model.pt vocabulary with false");
        root.items.emplace_back("itos", std::move(itos));
        root.items.emplace_back("specials", std::move(specials));
        vocabulary_note_ = fmt::format(", itos of {} tokens", list->items.size());
    }

    // Metadata model.pt has no place for, named so that nothing goes quietly.
    void note_left_out_metadata() {
        const std::vector<GgufEntry> carried = p_.metadata();
        std::vector<std::string> left;
        for (const GgufEntry& e : c_.metadata) {
            bool kept = std::any_of(carried.begin(), carried.end(), [&](const GgufEntry& k) { return k.key == e.key; });
            if (e.key.starts_with("tokenizer."))
                kept = vocabulary_in_files_ || std::find(std::begin(kCarriedTokenizerKeys), std::end(kCarriedTokenizerKeys),
                                                     e.key) != std::end(kCarriedTokenizerKeys);
            if (!kept) left.push_back(e.key);
        }
        if (!left.empty())
            notes_.push_back(fmt::format("metadata model.pt has no place for is left out: {}", fmt::join(left, ", ")));
    }

    std::string tied_note() const {
        const arch::TransformerTensors<std::string> n = arch::transformer_tensor_names(p_);
        std::string out;
        if (!by_name_.contains(n.dec_token_embd)) out += ", tgt_embed = src_embed";
        if (!by_name_.contains(n.output.weight)) out += ", generator.weight = tgt_embed.weight";
        return out;
    }

    std::string tokenizer_files_note() const {
        std::string out;
        for (const auto& file : tokenizer_.files) out += ", " + file.first;
        return out;
    }

    const Checkpoint& c_;
    std::FILE* log_;
    arch::TransformerParams p_;
    std::map<std::string, const CheckpointTensor*> by_name_;
    std::vector<std::vector<std::byte>> owned_;  // fused and dequantized tensors
    std::vector<TorchStorage> storages_;
    Json special_ids_ = Json::object();  // config.json's bos_token_id, ...
    std::vector<std::string> notes_;
    std::string vocabulary_note_;
    HfTokenizerFiles tokenizer_;     // a vocabulary that is not a char one
    bool vocabulary_in_files_ = false;  // ... and then its tokenizer.* keys go there, not into model.pt
    int64_t parameters_ = 0;
    size_t dequantized_ = 0;
};

}  // namespace

void export_torch_folder(const Checkpoint& checkpoint, const std::filesystem::path& folder, std::FILE* log) {
    Exporter(checkpoint, log).run(folder);
}

}  // namespace kiln::convert
