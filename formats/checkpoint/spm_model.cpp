#include "formats/checkpoint/spm_model.h"

#include <cstring>

#include "engine/core/error.h"
#include "formats/io/mapped_file.h"

namespace kiln {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

class WireReader {
public:
    WireReader(std::span<const std::byte> bytes, uint64_t base, const std::string& name)
        : bytes_(bytes), base_(base), name_(name) {}

    bool done() const { return at_ == bytes_.size(); }
    uint64_t offset() const { return base_ + at_; }

    uint64_t varint() {
        uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (at_ == bytes_.size()) fail("tokenizer", "{}: a varint runs past the end of its message (at byte {})", name_, offset());
            const auto b = static_cast<uint8_t>(bytes_[at_++]);
            value |= uint64_t(b & 0x7f) << shift;
            if ((b & 0x80) == 0) return value;
        }
        fail("tokenizer", "{}: a varint is longer than 10 bytes (at byte {})", name_, offset());
    }

    std::span<const std::byte> take(uint64_t n) {
        if (n > bytes_.size() - at_)
            fail("tokenizer", "{}: a field of {} bytes runs past the end of its message ({} bytes remain; truncated?) (at byte {})",
                 name_, n, bytes_.size() - at_, offset());
        const auto s = bytes_.subspan(at_, n);
        at_ += n;
        return s;
    }

    // Reads a key; returns {field, wire type}.
    std::pair<uint32_t, uint32_t> key() {
        const uint64_t k = varint();
        if ((k >> 3) == 0 || (k >> 3) > 0x1fffffff) fail("tokenizer", "{}: field number 0 or too large (at byte {})", name_, offset());
        return {static_cast<uint32_t>(k >> 3), static_cast<uint32_t>(k & 7)};
    }

    void skip(uint32_t wire) {
        switch (wire) {
            case kVarint: varint(); return;
            case kFixed64: take(8); return;
            case kLengthDelimited: take(varint()); return;
            case kFixed32: take(4); return;
            default: fail("tokenizer", "{}: wire type {} is not one protobuf uses today (corrupt data?) (at byte {})", name_, wire, offset());
        }
    }

    WireReader message() {
        const uint64_t n = varint();
        const uint64_t start = offset();
        return WireReader(take(n), start, name_);
    }

    float fixed32_float() {
        const auto b = take(4);
        float f = 0;
        std::memcpy(&f, b.data(), 4);
        return f;
    }

    void expect(uint32_t wire, uint32_t want, std::string_view field) const {
        if (wire != want) fail("tokenizer", "{}: field {} has wire type {}, expected {} (at byte {})", name_, field, wire, want, offset());
    }

private:
    std::span<const std::byte> bytes_;
    uint64_t base_;
    size_t at_ = 0;
    const std::string& name_;
};

void read_piece(WireReader r, SpmModel& m) {
    std::string piece;
    float score = 0;
    int32_t type = 1;
    while (!r.done()) {
        const auto [field, wire] = r.key();
        if (field == 1) {
            r.expect(wire, kLengthDelimited, "SentencePiece.piece");
            const auto b = r.take(r.varint());
            piece.assign(reinterpret_cast<const char*>(b.data()), b.size());
        } else if (field == 2) {
            r.expect(wire, kFixed32, "SentencePiece.score");
            score = r.fixed32_float();
        } else if (field == 3) {
            r.expect(wire, kVarint, "SentencePiece.type");
            type = static_cast<int32_t>(r.varint());
            if (type < 1 || type > 6) fail("tokenizer", "piece {} has type {}, not 1..6", m.pieces.size(), type);
        } else {
            r.skip(wire);
        }
    }
    m.pieces.push_back(std::move(piece));
    m.scores.push_back(score);
    m.types.push_back(type);
}

void read_trainer_spec(WireReader r, SpmModel& m) {
    while (!r.done()) {
        const auto [field, wire] = r.key();
        int32_t* target = field == 40 ? &m.unk_id : field == 41 ? &m.bos_id : field == 42 ? &m.eos_id : field == 43 ? &m.pad_id : nullptr;
        if (target != nullptr && wire == kVarint) *target = static_cast<int32_t>(static_cast<int64_t>(r.varint()));  // int32: sign-extended
        else r.skip(wire);
    }
}

void read_normalizer_spec(WireReader r, SpmModel& m) {
    while (!r.done()) {
        const auto [field, wire] = r.key();
        if (field == 3 && wire == kVarint) m.add_dummy_prefix = r.varint() != 0;
        else r.skip(wire);
    }
}

}  // namespace

SpmModel parse_spm_model(std::span<const std::byte> bytes, const std::string& name) {
    SpmModel m;
    WireReader r(bytes, 0, name);
    while (!r.done()) {
        const auto [field, wire] = r.key();
        if (field == 1) {
            r.expect(wire, kLengthDelimited, "ModelProto.pieces");
            read_piece(r.message(), m);
        } else if (field == 2 && wire == kLengthDelimited) {
            read_trainer_spec(r.message(), m);
        } else if (field == 3 && wire == kLengthDelimited) {
            read_normalizer_spec(r.message(), m);
        } else {
            r.skip(wire);
        }
    }
    if (m.pieces.empty()) fail("tokenizer", "{}: no pieces: not a SentencePiece model", name);
    return m;
}

void add_spm_tokenizer(Checkpoint& checkpoint, const std::filesystem::path& path, uint64_t vocab_rows) {
    const MappedFile file(path);
    const std::string name = path.string();
    const SpmModel m = parse_spm_model(file.bytes(), name);
    if (m.pieces.size() != vocab_rows)
        fail("tokenizer", "{}: {} pieces but the model's embedding has {} rows (a different model's tokenizer?)", name,
             m.pieces.size(), vocab_rows);
    // -1 is SentencePiece's "none" (bos_id/eos_id/pad_id -1 in published
    // models): that key is left out. Any other id must name a piece; dropping
    // it would let the loader fall back to llama.cpp's defaults (<s> 1) and
    // run the model with the wrong special token.
    for (const auto& [field, id] : std::initializer_list<std::pair<const char*, int32_t>>{
             {"unk_id", m.unk_id}, {"bos_id", m.bos_id}, {"eos_id", m.eos_id}, {"pad_id", m.pad_id}})
        if (id < -1 || (id >= 0 && static_cast<size_t>(id) >= m.pieces.size()))
            fail("tokenizer", "{}: the trainer spec's {} is {}, not a piece id below {} (or -1 for none)", name, field,
                 id, m.pieces.size());
    const auto id_ok = [&](int32_t id) { return id >= 0; };
    auto& md = checkpoint.metadata;
    md.push_back({"tokenizer.ggml.model", GgufValue("llama")});
    md.push_back({"tokenizer.ggml.tokens", gguf_array(GgufType::STRING, m.pieces)});
    md.push_back({"tokenizer.ggml.scores", gguf_array(GgufType::FLOAT32, m.scores)});
    md.push_back({"tokenizer.ggml.token_type", gguf_array(GgufType::INT32, m.types)});
    for (const auto& [key, id] : std::initializer_list<std::pair<const char*, int32_t>>{
             {"tokenizer.ggml.unknown_token_id", m.unk_id}, {"tokenizer.ggml.bos_token_id", m.bos_id},
             {"tokenizer.ggml.eos_token_id", m.eos_id}, {"tokenizer.ggml.padding_token_id", m.pad_id}})
        if (id_ok(id)) md.push_back({key, GgufValue(static_cast<uint32_t>(id))});
    // Without a BOS piece there is nothing to add (the loader's default <s> 1 would be some other piece).
    md.push_back({"tokenizer.ggml.add_bos_token", GgufValue(m.bos_id >= 0)});
    md.push_back({"tokenizer.ggml.add_eos_token", GgufValue(false)});
    md.push_back({"tokenizer.ggml.add_space_prefix", GgufValue(m.add_dummy_prefix)});
}

}  // namespace kiln
