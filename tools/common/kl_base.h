#pragma once
// The file kiln-perplexity --kl-base writes: a base model's logits over a
// text, kept so that a quantized model can later be compared with them
// position by position (KL divergence, top-1 agreement, perplexity ratio),
// as llama-perplexity's --kl-divergence-base file is used.
//
// Layout (little-endian):
//   "KILNKLB1"                         8 bytes
//   u64 n_vocab, u64 ctx, u64 windows
//   i32 tokens[windows * ctx]          the windows' token ids
//   f32 logits[windows * (ctx - 1) * n_vocab]
//                                      per window, positions 0 .. ctx-2: the
//                                      predictions that are scored
// Logits are stored in full float32: the KL divergence of a Q8_0 model is
// ~1e-4 nats, and rounding the base to 16 bits would add noise of that size.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "formats/io/atomic_file.h"
#include "formats/io/mapped_file.h"

namespace kiln::tools {

inline constexpr char kKlBaseMagic[8] = {'K', 'I', 'L', 'N', 'K', 'L', 'B', '1'};
inline constexpr size_t kKlBaseHeaderBytes = 8 + 3 * 8;

struct KlBaseShape {
    uint64_t n_vocab = 0, ctx = 0, windows = 0;
    uint64_t token_count() const { return windows * ctx; }
    uint64_t logit_count() const { return windows * (ctx - 1) * n_vocab; }
    uint64_t file_bytes() const { return kKlBaseHeaderBytes + token_count() * 4 + logit_count() * 4; }
};

// Written window by window: the whole file would not fit in memory for a large
// vocabulary. The target only appears, complete, on finish().
class KlBaseWriter {
public:
    KlBaseWriter(const std::filesystem::path& path, KlBaseShape shape, std::span<const int32_t> tokens)
        : shape_(shape), file_(path) {
        std::byte header[kKlBaseHeaderBytes];
        std::memcpy(header, kKlBaseMagic, 8);
        const uint64_t fields[3] = {shape.n_vocab, shape.ctx, shape.windows};
        std::memcpy(header + 8, fields, sizeof fields);
        file_.write(header);
        file_.write(std::as_bytes(tokens.first(static_cast<size_t>(shape.token_count()))));
    }
    // The scored logits of the next window: (ctx - 1) rows of n_vocab.
    void add_window(std::span<const float> logits) {
        file_.write(std::as_bytes(logits.first(static_cast<size_t>((shape_.ctx - 1) * shape_.n_vocab))));
    }
    void finish() { file_.commit(); }

private:
    KlBaseShape shape_;
    AtomicFile file_;
};

class KlBase {
public:
    explicit KlBase(const std::filesystem::path& path) : name_(path.string()), file_(std::make_unique<MappedFile>(path)) {
        const auto bytes = file_->bytes();
        if (bytes.size() < kKlBaseHeaderBytes || std::memcmp(bytes.data(), kKlBaseMagic, 8) != 0)
            fail("kl-base", "{} is not a kiln-perplexity --kl-base file", name_);
        uint64_t fields[3];
        std::memcpy(fields, bytes.data() + 8, sizeof fields);
        shape_ = {fields[0], fields[1], fields[2]};
        // Bounds first, so the size arithmetic below cannot overflow.
        if (shape_.n_vocab == 0 || shape_.n_vocab > (1u << 24) || shape_.ctx < 2 || shape_.ctx > (1u << 24) ||
            shape_.windows == 0 || shape_.windows > (1u << 24) || shape_.file_bytes() != bytes.size())
            fail("kl-base", "{} is damaged: {} bytes, but its header (vocabulary {}, windows {} of {}) needs {}", name_,
                 bytes.size(), shape_.n_vocab, shape_.windows, shape_.ctx, shape_.file_bytes());
    }
    const std::string& name() const { return name_; }
    const KlBaseShape& shape() const { return shape_; }
    int32_t token(uint64_t i) const {
        int32_t t;
        std::memcpy(&t, file_->bytes().data() + kKlBaseHeaderBytes + i * 4, 4);
        return t;
    }
    // Window w's scored logits, copied out (the mapping need not be aligned for floats).
    void window_logits(uint64_t w, std::vector<float>& out) const {
        const uint64_t count = (shape_.ctx - 1) * shape_.n_vocab;
        out.resize(static_cast<size_t>(count));
        const std::byte* p =
            file_->bytes().data() + kKlBaseHeaderBytes + shape_.token_count() * 4 + w * count * 4;
        std::memcpy(out.data(), p, static_cast<size_t>(count) * 4);
    }

private:
    std::string name_;
    std::unique_ptr<MappedFile> file_;
    KlBaseShape shape_;
};

}  // namespace kiln::tools
