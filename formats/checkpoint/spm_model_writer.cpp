#include "formats/checkpoint/spm_model_writer.h"

#include <cstring>
#include <string_view>

#include "engine/core/error.h"

namespace kiln {
namespace {

constexpr uint32_t kVarint = 0, kLengthDelimited = 2, kFixed32 = 5;

class WireWriter {
public:
    void varint(uint64_t v) {
        while (v >= 0x80) {
            bytes_.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
            v >>= 7;
        }
        bytes_.push_back(static_cast<std::byte>(v));
    }
    void key(uint32_t field, uint32_t wire) { varint((uint64_t{field} << 3) | wire); }
    // int32 and enum fields: negative values are sign-extended to 64 bits (10 bytes), as protobuf does.
    void int32_field(uint32_t field, int32_t v) {
        key(field, kVarint);
        varint(static_cast<uint64_t>(static_cast<int64_t>(v)));
    }
    void bool_field(uint32_t field, bool v) {
        key(field, kVarint);
        varint(v ? 1 : 0);
    }
    void bytes_field(uint32_t field, std::span<const std::byte> b) {
        key(field, kLengthDelimited);
        varint(b.size());
        bytes_.insert(bytes_.end(), b.begin(), b.end());
    }
    void string_field(uint32_t field, std::string_view s) { bytes_field(field, std::as_bytes(std::span(s.data(), s.size()))); }
    void float_field(uint32_t field, float f) {
        key(field, kFixed32);
        uint32_t bits = 0;
        std::memcpy(&bits, &f, 4);
        for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xff));
    }
    void message_field(uint32_t field, const WireWriter& m) { bytes_field(field, m.bytes_); }

    std::vector<std::byte> take() { return std::move(bytes_); }

private:
    std::vector<std::byte> bytes_;
};

}  // namespace

std::vector<std::byte> write_spm_model(const SpmModel& m, const SpmWriteOptions& options) {
    if (m.pieces.empty()) fail("tokenizer", "cannot write tokenizer.model: the vocabulary has no pieces");
    if (m.scores.size() != m.pieces.size() || m.types.size() != m.pieces.size())
        fail("tokenizer", "cannot write tokenizer.model: {} pieces but {} scores and {} types", m.pieces.size(),
             m.scores.size(), m.types.size());
    WireWriter model;
    bool byte_fallback = false;
    for (size_t i = 0; i < m.pieces.size(); ++i) {
        const int32_t type = m.types[i];
        if (type < 1 || type > 6)
            fail("tokenizer", "cannot write tokenizer.model: token {} has type {}; SentencePiece's are 1..6", i, type);
        byte_fallback |= type == 6;
        WireWriter piece;
        piece.string_field(1, m.pieces[i]);
        piece.float_field(2, m.scores[i]);
        if (type != 1) piece.int32_field(3, type);
        model.message_field(1, piece);
    }
    const auto piece_of = [&](int32_t id) -> const std::string* {
        return id >= 0 && static_cast<size_t>(id) < m.pieces.size() ? &m.pieces[static_cast<size_t>(id)] : nullptr;
    };
    WireWriter trainer;
    trainer.int32_field(3, options.model_type);
    trainer.int32_field(4, static_cast<int32_t>(m.pieces.size()));
    trainer.bool_field(35, byte_fallback);
    trainer.int32_field(40, m.unk_id);
    trainer.int32_field(41, m.bos_id);
    trainer.int32_field(42, m.eos_id);
    trainer.int32_field(43, m.pad_id);
    uint32_t field = 45;  // unk_piece 45, bos_piece 46, eos_piece 47, pad_piece 48 (44 is unk_surface)
    for (int32_t id : {m.unk_id, m.bos_id, m.eos_id, m.pad_id}) {
        if (const std::string* p = piece_of(id)) trainer.string_field(field, *p);
        ++field;
    }
    model.message_field(2, trainer);
    WireWriter normalizer;
    normalizer.string_field(1, "identity");
    normalizer.bool_field(3, m.add_dummy_prefix);
    normalizer.bool_field(4, options.remove_extra_whitespaces);
    normalizer.bool_field(5, true);
    model.message_field(3, normalizer);
    return model.take();
}

}  // namespace kiln
