#include "formats/checkpoint/llama2c.h"

#include <bit>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "formats/arch/llama_arch.h"
#include "formats/io/mapped_file.h"

namespace kiln {
namespace {

// The files are little-endian and read in place; a big-endian host would need
// byte swapping everywhere, which nobody has asked for.
static_assert(std::endian::native == std::endian::little, "llama2.c files are read in place as little-endian");

constexpr std::string_view kComponent = "llama2c";
constexpr size_t kLegacyHeaderBytes = 7 * sizeof(int32_t);
constexpr size_t kVersionedConfigAt = 8;       // after magic and version
constexpr size_t kSharedFlagAt = 8 + 28;       // after the 7 int32 of the config
constexpr size_t kGroupSizeAt = kSharedFlagAt + 1;  // version 2 only; unaligned on purpose (export.py packs it)

template <typename T>
T load(std::span<const std::byte> bytes, size_t at) {
    T value;
    std::memcpy(&value, bytes.data() + at, sizeof(T));
    return value;
}

// Unsigned arithmetic on sizes derived from untrusted header values: any
// overflow is remembered instead of wrapping, so a hostile header cannot make
// a huge tensor look small.
class Size {
public:
    constexpr Size(uint64_t value = 0) : value_(value) {}  // NOLINT: implicit so expressions read naturally
    friend Size operator*(Size a, Size b) {
        Size r;
        r.overflow_ = a.overflow_ || b.overflow_ || __builtin_mul_overflow(a.value_, b.value_, &r.value_);
        return r;
    }
    friend Size operator+(Size a, Size b) {
        Size r;
        r.overflow_ = a.overflow_ || b.overflow_ || __builtin_add_overflow(a.value_, b.value_, &r.value_);
        return r;
    }
    bool overflow() const { return overflow_; }
    uint64_t value() const { return value_; }

private:
    uint64_t value_ = 0;
    bool overflow_ = false;
};

enum class Layout { Legacy, V1, V2 };

struct RawConfig {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};
static_assert(sizeof(RawConfig) == kLegacyHeaderBytes);

std::string describe(const RawConfig& c) {
    return fmt::format("dim {}, hidden_dim {}, n_layers {}, n_heads {}, n_kv_heads {}, vocab_size {}, seq_len {}", c.dim,
                       c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len);
}

// The validated hyper-parameters and what they imply about the file.
struct Shape {
    Layout layout = Layout::Legacy;
    uint64_t dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, seq = 0;
    uint64_t head_dim = 0, kv_dim = 0;
    bool shared = true;
    uint64_t group_size = 0;  // version 2 only
    uint64_t data_at = 0;     // first byte after the header
};

// Checks that the header describes a model llama2.c could have written.
// Returns an empty string when it does, else what is wrong.
std::string check_config(const RawConfig& c, Layout layout, Shape& s) {
    const std::pair<const char*, int32_t> positive[] = {{"dim", c.dim},           {"hidden_dim", c.hidden_dim},
                                                        {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
                                                        {"n_kv_heads", c.n_kv_heads}, {"seq_len", c.seq_len}};
    for (const auto& [field, value] : positive) {
        if (value <= 0) return fmt::format("{} must be positive, got {}", field, value);
    }
    // The legacy format signals an unshared classifier by negating vocab_size;
    // the versioned ones carry a flag byte instead and keep it positive.
    if (c.vocab_size == 0) return "vocab_size is 0";
    if (layout == Layout::Legacy) {
        if (c.vocab_size == INT32_MIN) return fmt::format("vocab_size {} cannot be negated", c.vocab_size);
        s.shared = c.vocab_size > 0;
    } else if (c.vocab_size < 0) {
        return fmt::format("vocab_size must be positive in a versioned file, got {}", c.vocab_size);
    }
    if (c.dim % c.n_heads != 0) return fmt::format("n_heads {} does not divide dim {}", c.n_heads, c.dim);
    if (c.n_heads % c.n_kv_heads != 0) {
        return fmt::format("n_kv_heads {} does not divide n_heads {}", c.n_kv_heads, c.n_heads);
    }
    // RoPE rotates pairs of a head's values (and the legacy tables hold head_dim/2 per position).
    if ((c.dim / c.n_heads) % 2 != 0) return fmt::format("head_dim {} is odd", c.dim / c.n_heads);
    s.layout = layout;
    s.dim = uint64_t(c.dim);
    s.hidden = uint64_t(c.hidden_dim);
    s.layers = uint64_t(c.n_layers);
    s.heads = uint64_t(c.n_heads);
    s.kv_heads = uint64_t(c.n_kv_heads);
    s.vocab = c.vocab_size < 0 ? uint64_t(-int64_t(c.vocab_size)) : uint64_t(c.vocab_size);
    s.seq = uint64_t(c.seq_len);
    s.head_dim = s.dim / s.heads;
    s.kv_dim = s.head_dim * s.kv_heads;
    return {};
}

// Element counts of one layer's matrices and of the model-wide ones.
struct Counts {
    Size q_or_o, k_or_v, ffn, embedding;
};

Counts counts(const Shape& s) {
    return {Size(s.dim) * s.dim, Size(s.kv_dim) * s.dim, Size(s.hidden) * s.dim, Size(s.vocab) * s.dim};
}

// The exact file size the header implies (possibly overflowed).
Size implied_size(const Shape& s) {
    const Counts n = counts(s);
    const Size matrices_per_layer = n.q_or_o * 2 + n.k_or_v * 2 + n.ffn * 3;
    const Size classifier = s.shared ? Size(0) : n.embedding;
    const Size norms = Size(s.layers) * s.dim * 2 + s.dim;
    const Size matrices = n.embedding + Size(s.layers) * matrices_per_layer + classifier;
    switch (s.layout) {
        case Layout::Legacy:
            // Two RoPE tables of seq_len * head_dim / 2 floats each, unused today.
            return Size(s.data_at) + (matrices + norms + Size(s.seq) * s.head_dim) * 4;
        case Layout::V1:
            return Size(s.data_at) + (matrices + norms) * 4;
        case Layout::V2:
            // int8 values plus one float scale per group; each matrix is a whole
            // number of groups (checked before), so the scales sum exactly. An
            // overflowed `matrices` still marks the total through the sum.
            return Size(s.data_at) + norms * 4 + matrices + Size(matrices.value() / s.group_size) * 4;
    }
    return Size(0);
}

// Reads and checks the header, for detection (which only wants yes/no) and
// reading (which wants the reason). Returns the problem, or empty with `s`
// filled in. Only the legacy header's 28 bytes are needed when there is no magic.
std::string parse_header(std::span<const std::byte> bytes, Shape& s) {
    if (bytes.size() >= 4 && load<uint32_t>(bytes, 0) == kLlama2cMagic) {
        if (bytes.size() < kLlama2cHeaderBytes) {
            return fmt::format("the file has {} bytes, less than the {}-byte header of a versioned llama2.c file (truncated)",
                               bytes.size(), kLlama2cHeaderBytes);
        }
        const int32_t version = load<int32_t>(bytes, 4);
        if (version != 1 && version != 2) {
            return fmt::format("unsupported \"ak42\" version {} (expected 1 = float32 or 2 = int8 groups)", version);
        }
        const auto config = load<RawConfig>(bytes, kVersionedConfigAt);
        if (std::string problem = check_config(config, version == 1 ? Layout::V1 : Layout::V2, s); !problem.empty()) {
            return fmt::format("implausible header ({}): {}", describe(config), problem);
        }
        const uint8_t flag = load<uint8_t>(bytes, kSharedFlagAt);
        if (flag > 1) return fmt::format("the shared-classifier flag is {} (expected 0 or 1)", flag);
        s.shared = flag == 1;
        s.data_at = kLlama2cHeaderBytes;
        if (version == 2) {
            const int32_t group = load<int32_t>(bytes, kGroupSizeAt);
            if (group <= 0) return fmt::format("the quantization group size must be positive, got {}", group);
            s.group_size = uint64_t(group);
            // Each count is a product of two positive int32, so it fits in 64 bits.
            const Counts n = counts(s);
            for (const Size& count : {n.q_or_o, n.k_or_v, n.ffn, n.embedding}) {
                if (count.value() % s.group_size != 0) {
                    return fmt::format("a matrix of {} values is not a whole number of {}-value quantization groups",
                                       count.value(), s.group_size);
                }
            }
        }
        return {};
    }
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) {
        return "this is a GGUF file, not a llama2.c checkpoint (read it as GGUF)";
    }
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) {
        return "this is a zip archive (a PyTorch .pt file?), not a llama2.c checkpoint";
    }
    if (bytes.size() < kLegacyHeaderBytes) {
        return fmt::format("the file has {} bytes, too few for the {}-byte llama2.c header", bytes.size(),
                           kLegacyHeaderBytes);
    }
    const auto config = load<RawConfig>(bytes, 0);
    if (std::string problem = check_config(config, Layout::Legacy, s); !problem.empty()) {
        return fmt::format("not a llama2.c checkpoint: implausible header ({}): {}", describe(config), problem);
    }
    s.data_at = kLegacyHeaderBytes;
    return {};
}

// Compares the header's implied size with the real one; empty when equal.
std::string check_size(const Shape& s, uint64_t file_size) {
    const Size expected = implied_size(s);
    if (expected.overflow()) return "the header's counts imply a size beyond 2^64 bytes (a corrupt header)";
    if (expected.value() != file_size) {
        return fmt::format("the header implies {} bytes ({} classifier) but the file has {} ({})", expected.value(),
                           s.shared ? "shared" : "separate", file_size,
                           file_size < expected.value() ? "truncated" : "trailing data or a wrong header");
    }
    return {};
}

// Hands out consecutive byte ranges of the model; bounds are checked each time
// even though the total size was validated, so a layout slip cannot read past
// the mapping.
class Cursor {
public:
    Cursor(std::span<const std::byte> bytes, uint64_t at, const std::string& file) : bytes_(bytes), at_(at), file_(file) {}

    std::span<const std::byte> take(Size count, std::string_view what) {
        if (count.overflow() || at_ > bytes_.size() || count.value() > bytes_.size() - at_) {
            fail(kComponent, "{}: {} ({} bytes at byte {}) runs past the end of the file ({} bytes)", file_, what,
                 count.value(), at_, bytes_.size());
        }
        const auto range = bytes_.subspan(at_, count.value());
        at_ += count.value();
        return range;
    }

private:
    std::span<const std::byte> bytes_;
    uint64_t at_;
    const std::string& file_;
};

struct LayerViews {
    std::span<const std::byte> attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
};

struct ModelViews {
    std::span<const std::byte> embedding, final_norm, classifier;
    std::vector<LayerViews> layers;
};

using Member = std::span<const std::byte> LayerViews::*;

// Reads one float32 array stacked over layers ([L, per_layer]) into each layer's slot.
void take_stacked_f32(Cursor& in, ModelViews& v, Member member, Size per_layer, std::string_view what) {
    for (LayerViews& layer : v.layers) layer.*member = in.take(per_layer * 4, what);
}

void read_legacy(Cursor& in, const Shape& s, ModelViews& v) {
    const Counts n = counts(s);
    v.embedding = in.take(n.embedding * 4, "token_embedding");
    take_stacked_f32(in, v, &LayerViews::attn_norm, s.dim, "rms_att");
    take_stacked_f32(in, v, &LayerViews::wq, n.q_or_o, "wq");
    take_stacked_f32(in, v, &LayerViews::wk, n.k_or_v, "wk");
    take_stacked_f32(in, v, &LayerViews::wv, n.k_or_v, "wv");
    take_stacked_f32(in, v, &LayerViews::wo, n.q_or_o, "wo");
    take_stacked_f32(in, v, &LayerViews::ffn_norm, s.dim, "rms_ffn");
    take_stacked_f32(in, v, &LayerViews::w1, n.ffn, "w1");
    take_stacked_f32(in, v, &LayerViews::w2, n.ffn, "w2");
    take_stacked_f32(in, v, &LayerViews::w3, n.ffn, "w3");
    v.final_norm = in.take(Size(s.dim) * 4, "rms_final");
    // freq_cis_real and freq_cis_imag: RoPE tables llama2.c no longer reads;
    // llama.cpp computes them, so they are skipped.
    in.take(Size(s.seq) * s.head_dim * 4, "freq_cis tables");
    if (!s.shared) v.classifier = in.take(n.embedding * 4, "wcls");
}

void read_v1(Cursor& in, const Shape& s, ModelViews& v) {
    const Counts n = counts(s);
    // Version 1 puts every norm first, then the matrices in legacy order.
    take_stacked_f32(in, v, &LayerViews::attn_norm, s.dim, "rms_att");
    take_stacked_f32(in, v, &LayerViews::ffn_norm, s.dim, "rms_ffn");
    v.final_norm = in.take(Size(s.dim) * 4, "rms_final");
    v.embedding = in.take(n.embedding * 4, "token_embedding");
    take_stacked_f32(in, v, &LayerViews::wq, n.q_or_o, "wq");
    take_stacked_f32(in, v, &LayerViews::wk, n.k_or_v, "wk");
    take_stacked_f32(in, v, &LayerViews::wv, n.k_or_v, "wv");
    take_stacked_f32(in, v, &LayerViews::wo, n.q_or_o, "wo");
    take_stacked_f32(in, v, &LayerViews::w1, n.ffn, "w1");
    take_stacked_f32(in, v, &LayerViews::w2, n.ffn, "w2");
    take_stacked_f32(in, v, &LayerViews::w3, n.ffn, "w3");
    if (!s.shared) v.classifier = in.take(n.embedding * 4, "wcls");
}

// One int8 matrix followed by its float32 group scales, dequantized into a
// buffer the checkpoint owns.
std::span<const std::byte> take_q8(Cursor& in, const Shape& s, Size count, std::string_view what, Checkpoint& out) {
    const uint64_t n = count.value();
    const uint64_t groups = n / s.group_size;
    const auto q = in.take(count, what);
    const auto scales = in.take(Size(groups) * 4, what);
    std::vector<std::byte> buffer(n * sizeof(float));
    for (uint64_t g = 0; g < groups; ++g) {
        const float scale = load<float>(scales, g * 4);
        for (uint64_t i = g * s.group_size; i < (g + 1) * s.group_size; ++i) {
            const float value = float(static_cast<int8_t>(q[i])) * scale;
            std::memcpy(buffer.data() + i * sizeof(float), &value, sizeof(float));
        }
    }
    return out.own(std::move(buffer));
}

void read_v2(Cursor& in, const Shape& s, ModelViews& v, Checkpoint& out) {
    const Counts n = counts(s);
    // The norms stay float32 and come first; then each matrix (per layer) as
    // int8 values immediately followed by its scales.
    take_stacked_f32(in, v, &LayerViews::attn_norm, s.dim, "rms_att");
    take_stacked_f32(in, v, &LayerViews::ffn_norm, s.dim, "rms_ffn");
    v.final_norm = in.take(Size(s.dim) * 4, "rms_final");
    v.embedding = take_q8(in, s, n.embedding, "token_embedding", out);
    const std::tuple<Member, Size, const char*> matrices[] = {
        {&LayerViews::wq, n.q_or_o, "wq"}, {&LayerViews::wk, n.k_or_v, "wk"}, {&LayerViews::wv, n.k_or_v, "wv"},
        {&LayerViews::wo, n.q_or_o, "wo"}, {&LayerViews::w1, n.ffn, "w1"},    {&LayerViews::w2, n.ffn, "w2"},
        {&LayerViews::w3, n.ffn, "w3"}};
    for (const auto& [member, count, what] : matrices) {
        for (LayerViews& layer : v.layers) layer.*member = take_q8(in, s, count, what, out);
    }
    if (!s.shared) v.classifier = take_q8(in, s, n.embedding, "wcls", out);
}

void add_tensor(Checkpoint& cp, std::string name, std::vector<uint64_t> dims, std::span<const std::byte> data) {
    cp.tensors.push_back(CheckpointTensor{std::move(name), DType::F32, std::move(dims), data});
}

// The llama descriptor's hyper-parameters of a llama2.c model. llama2.c
// hard-codes 1e-5 in its rmsnorm; the file does not store it.
arch::LlamaParams llama_params(const Shape& s, const std::filesystem::path& model) {
    arch::LlamaParams p;  // all fit: they came from int32
    p.name = model.stem().string();
    p.n_vocab = static_cast<int64_t>(s.vocab);
    p.n_ctx_train = static_cast<int64_t>(s.seq);
    p.dim = static_cast<int64_t>(s.dim);
    p.n_layers = static_cast<int64_t>(s.layers);
    p.n_heads = static_cast<int64_t>(s.heads);
    p.n_kv_heads = static_cast<int64_t>(s.kv_heads);
    p.ffn_dim = static_cast<int64_t>(s.hidden);
    p.n_rot = static_cast<int64_t>(s.head_dim);
    p.norm_eps = 1e-5f;
    return p;
}

// The descriptor's names and ggml dims (row length first), in the order
// llama.cpp's converter used for stories260K.gguf, so files come out alike.
void add_tensors(Checkpoint& cp, const Shape& s, const ModelViews& v, const arch::LlamaParams& p) {
    const arch::LlamaTensors<std::string> names = arch::llama_tensor_names(p);
    add_tensor(cp, names.token_embd, {s.dim, s.vocab}, v.embedding);
    add_tensor(cp, names.output_norm, {s.dim}, v.final_norm);
    if (!s.shared) add_tensor(cp, names.output, {s.dim, s.vocab}, v.classifier);
    for (size_t l = 0; l < v.layers.size(); ++l) {
        const LayerViews& layer = v.layers[l];
        const arch::LlamaLayerTensors<std::string>& name = names.layers[l];
        add_tensor(cp, name.attn_q, {s.dim, s.dim}, layer.wq);
        add_tensor(cp, name.attn_k, {s.dim, s.kv_dim}, layer.wk);
        add_tensor(cp, name.attn_v, {s.dim, s.kv_dim}, layer.wv);
        add_tensor(cp, name.attn_output, {s.dim, s.dim}, layer.wo);
        add_tensor(cp, name.attn_norm, {s.dim}, layer.attn_norm);
        add_tensor(cp, name.ffn_gate, {s.dim, s.hidden}, layer.w1);
        add_tensor(cp, name.ffn_down, {s.hidden, s.dim}, layer.w2);
        add_tensor(cp, name.ffn_up, {s.dim, s.hidden}, layer.w3);
        add_tensor(cp, name.ffn_norm, {s.dim}, layer.ffn_norm);
    }
}

// llama2.c's export wrote pieces for printing: U+2581 (SentencePiece's space
// mark) became ' ', and BOS/EOS became "\n<s>\n" / "\n</s>\n". SentencePiece
// pieces never hold a real space, so the substitution undoes exactly.
std::string spm_piece(std::string_view raw, size_t id) {
    if (id == 1 && raw == "\n<s>\n") return "<s>";
    if (id == 2 && raw == "\n</s>\n") return "</s>";
    std::string piece;
    piece.reserve(raw.size());
    for (const char c : raw) {
        if (c == ' ') {
            piece += "\xE2\x96\x81";
        } else {
            piece += c;
        }
    }
    return piece;
}

bool is_byte_piece(std::string_view piece) {
    const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
    return piece.size() == 6 && piece.substr(0, 3) == "<0x" && hex(piece[3]) && hex(piece[4]) && piece[5] == '>';
}

// llama.cpp's token types: 1 normal, 2 unknown, 3 control, 6 byte.
int32_t token_type(std::string_view piece, size_t id) {
    if (id == 0 && piece == "<unk>") return 2;
    if ((id == 1 && piece == "<s>") || (id == 2 && piece == "</s>")) return 3;
    if (is_byte_piece(piece)) return 6;
    return 1;
}

}  // namespace

void add_llama2c_tokenizer(Checkpoint& cp, const std::filesystem::path& path, uint64_t vocab) {
    const MappedFile file(path);
    const auto bytes = file.bytes();
    const std::string name = path.string();
    if (bytes.size() < 4) {
        fail(kComponent, "{}: the tokenizer has {} bytes, too few for its 4-byte header", name, bytes.size());
    }
    // max_token_length (bytes 0..3) only sizes llama2.c's merge buffer; kiln does not need it.
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    tokens.reserve(vocab);
    uint64_t at = 4;
    while (at < bytes.size()) {
        const size_t id = tokens.size();
        if (id == vocab) {
            fail(kComponent, "{}: the tokenizer holds more than the model's {} tokens ({} bytes remain at byte {})", name,
                 vocab, bytes.size() - at, at);
        }
        if (bytes.size() - at < 8) fail(kComponent, "{}: token {} is cut off at byte {} (truncated)", name, id, at);
        const float score = load<float>(bytes, at);
        const int32_t length = load<int32_t>(bytes, at + 4);
        if (length < 0) fail(kComponent, "{}: token {} has a negative length {} (at byte {})", name, id, length, at + 4);
        at += 8;
        if (uint64_t(length) > bytes.size() - at) {
            fail(kComponent, "{}: token {} claims {} bytes but only {} remain (at byte {}; truncated)", name, id, length,
                 bytes.size() - at, at);
        }
        const std::string_view raw(reinterpret_cast<const char*>(bytes.data() + at), size_t(length));
        at += uint64_t(length);
        tokens.push_back(spm_piece(raw, id));
        scores.push_back(score);
        types.push_back(token_type(tokens.back(), id));
    }
    if (tokens.size() != vocab) {
        fail(kComponent, "{}: the tokenizer holds {} tokens but the model's vocabulary has {} (a different model's tokenizer?)",
             name, tokens.size(), vocab);
    }
    cp.metadata.push_back({"tokenizer.ggml.model", GgufValue("llama")});
    cp.metadata.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, tokens)});
    cp.metadata.push_back({"tokenizer.ggml.scores", gguf_array(GgufType::FLOAT32, scores)});
    cp.metadata.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types)});
    // SentencePiece's defaults, which every llama2.c tokenizer was trained with.
    cp.metadata.push_back({"tokenizer.ggml.unknown_token_id", GgufValue(uint32_t{0})});
    cp.metadata.push_back({"tokenizer.ggml.bos_token_id", GgufValue(uint32_t{1})});
    cp.metadata.push_back({"tokenizer.ggml.eos_token_id", GgufValue(uint32_t{2})});
}

bool looks_like_llama2c(std::span<const std::byte> head, uint64_t file_size) {
    if (head.size() > file_size) return false;  // inconsistent arguments
    // The magic alone decides for versioned files, so a damaged one still
    // reaches the reader, whose error then says what is wrong with it.
    if (head.size() >= 4 && load<uint32_t>(head, 0) == kLlama2cMagic) return true;
    // A legacy header has no magic: believe it only when its values make sense
    // and account for every byte of the file.
    Shape s;
    return parse_header(head, s).empty() && check_size(s, file_size).empty();
}

Checkpoint read_llama2c(const std::filesystem::path& model, const std::filesystem::path* tokenizer) {
    auto file = std::make_shared<const MappedFile>(model);
    const auto bytes = file->bytes();
    const std::string name = model.string();
    Shape s;
    if (std::string problem = parse_header(bytes, s); !problem.empty()) fail(kComponent, "{}: {}", name, problem);
    if (std::string problem = check_size(s, bytes.size()); !problem.empty()) fail(kComponent, "{}: {}", name, problem);

    Checkpoint cp;
    ModelViews views;
    views.layers.resize(s.layers);
    Cursor in(bytes, s.data_at, name);
    switch (s.layout) {
        case Layout::Legacy: read_legacy(in, s, views); break;
        case Layout::V1: read_v1(in, s, views); break;
        case Layout::V2: read_v2(in, s, views, cp); break;
    }
    cp.source = std::move(file);
    const arch::LlamaParams params = llama_params(s, model);
    cp.metadata = params.metadata(arch::LlamaKeyOrder::Llama2cConverter);
    add_tensors(cp, s, views, params);
    if (tokenizer != nullptr) add_llama2c_tokenizer(cp, *tokenizer, s.vocab);
    return cp;
}

}  // namespace kiln
