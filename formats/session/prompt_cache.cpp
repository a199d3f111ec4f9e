#include "formats/session/prompt_cache.h"

#include <algorithm>
#include <cstring>
#include <system_error>

#include "engine/core/error.h"
#include "formats/gguf/gguf_file.h"
#include "formats/io/atomic_file.h"
#include "formats/io/crc32.h"
#include "formats/io/regular_file.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'C', 'A', 'C'};
constexpr uint32_t kVersion = 1;
constexpr size_t kSample = 4096;
// magic, version, fingerprint (8 + 4 + 4), types, layers, width, tokens.
constexpr size_t kHeaderBytes = sizeof kMagic + 4 + 16 + 4 + 4 + 4 + 4 + 4;

void put_u32(std::vector<std::byte>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void put_u64(std::vector<std::byte>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

// Reads little-endian fields from the front of a byte range.
class Reader {
public:
    explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
    uint64_t take(int n) {
        uint64_t v = 0;
        for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(bytes_[at_ + static_cast<size_t>(i)]) << (8 * i);
        at_ += static_cast<size_t>(n);
        return v;
    }
    size_t at() const noexcept { return at_; }

private:
    std::span<const std::byte> bytes_;
    size_t at_ = 0;
};

}  // namespace

ModelFingerprint model_fingerprint(const GgufFile& file) {
    ModelFingerprint f;
    f.file_size = file.file_size();
    const auto bytes = file.bytes();
    f.header_crc = crc32(bytes.first(std::min<size_t>(bytes.size(), file.data_offset())));
    uint32_t crc = 0;
    for (const GgufTensor& t : file.tensors()) {
        const size_t n = std::min(kSample, t.data.size());
        crc = crc32_update(crc, t.data.first(n));
        crc = crc32_update(crc, t.data.last(n));
    }
    f.sample_crc = crc;
    return f;
}

std::optional<PromptCache> load_prompt_cache(const std::filesystem::path& path, const ModelFingerprint& model,
                                             const PromptCacheShape& shape, int64_t n_ctx, int64_t n_vocab,
                                             std::string& why_not) {
    why_not.clear();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    std::string text;
    try {
        text = read_regular_file(path);
    } catch (const Error& e) {
        why_not = e.what();
        return std::nullopt;
    }
    return parse_prompt_cache(std::as_bytes(std::span(text.data(), text.size())), model, shape, n_ctx, n_vocab,
                              why_not);
}

std::optional<PromptCache> parse_prompt_cache(std::span<const std::byte> bytes, const ModelFingerprint& model,
                                              const PromptCacheShape& shape, int64_t n_ctx, int64_t n_vocab,
                                              std::string& why_not) {
    why_not.clear();
    if (bytes.size() < kHeaderBytes + 4 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
        why_not = "not a kiln prompt cache";
        return std::nullopt;
    }
    Reader r(bytes.subspan(sizeof kMagic));
    if (const uint64_t version = r.take(4); version != kVersion) {
        why_not = fmt::format("version {}, this kiln reads version {}", version, kVersion);
        return std::nullopt;
    }
    ModelFingerprint saved;
    saved.file_size = r.take(8);
    saved.header_crc = static_cast<uint32_t>(r.take(4));
    saved.sample_crc = static_cast<uint32_t>(r.take(4));
    const auto type_k = r.take(4), type_v = r.take(4), layers = r.take(4), width = r.take(4), n_tokens = r.take(4);
    const uint32_t stored_crc = static_cast<uint32_t>(Reader(bytes.last(4)).take(4));
    if (crc32(bytes.first(bytes.size() - 4)) != stored_crc) {
        why_not = "damaged (its CRC-32 does not match)";
        return std::nullopt;
    }
    if (!(saved == model)) {
        why_not = "made with another model file";
        return std::nullopt;
    }
    if (type_k != static_cast<uint64_t>(shape.type_k) || type_v != static_cast<uint64_t>(shape.type_v)) {
        why_not = fmt::format("made with other cache types; this run's are {}/{} (-ctk/-ctv)", dtype_name(shape.type_k),
                              dtype_name(shape.type_v));
        return std::nullopt;
    }
    if (layers != static_cast<uint64_t>(shape.n_layers) || width != static_cast<uint64_t>(shape.kv_dim)) {
        why_not = "made for another cache shape";
        return std::nullopt;
    }
    if (n_tokens > static_cast<uint64_t>(n_ctx)) {
        why_not = fmt::format("holds {} tokens, more than the context of {} (-c)", n_tokens, n_ctx);
        return std::nullopt;
    }
    const uint64_t row_bytes = layers * n_tokens * shape.row_bytes;
    if (bytes.size() != kHeaderBytes + 4 * n_tokens + row_bytes + 4) {
        why_not = "its size does not match what it says it holds";
        return std::nullopt;
    }
    PromptCache cache;
    Reader tokens(bytes.subspan(kHeaderBytes));
    for (uint64_t i = 0; i < n_tokens; ++i) {
        const auto id = static_cast<int32_t>(static_cast<uint32_t>(tokens.take(4)));
        if (id < 0 || id >= n_vocab) {
            why_not = fmt::format("holds token id {}, outside the vocabulary of {}", id, n_vocab);
            return std::nullopt;
        }
        cache.tokens.push_back(id);
    }
    const auto rows = bytes.subspan(kHeaderBytes + 4 * n_tokens, row_bytes);
    cache.rows.assign(rows.begin(), rows.end());
    return cache;
}

void save_prompt_cache(const std::filesystem::path& path, const ModelFingerprint& model, const PromptCacheShape& shape,
                       const PromptCache& cache) {
    std::vector<std::byte> head;
    head.insert(head.end(), reinterpret_cast<const std::byte*>(kMagic), reinterpret_cast<const std::byte*>(kMagic) + 8);
    put_u32(head, kVersion);
    put_u64(head, model.file_size);
    put_u32(head, model.header_crc);
    put_u32(head, model.sample_crc);
    put_u32(head, static_cast<uint32_t>(shape.type_k));
    put_u32(head, static_cast<uint32_t>(shape.type_v));
    put_u32(head, static_cast<uint32_t>(shape.n_layers));
    put_u32(head, static_cast<uint32_t>(shape.kv_dim));
    put_u32(head, static_cast<uint32_t>(cache.tokens.size()));
    for (int32_t id : cache.tokens) put_u32(head, static_cast<uint32_t>(id));
    uint32_t crc = crc32_update(crc32(head), cache.rows);
    std::vector<std::byte> tail;
    put_u32(tail, crc);
    AtomicFile out(path);
    out.write(head);
    out.write(cache.rows);
    out.write(tail);
    out.commit();
}

}  // namespace kiln
