#pragma once
// kiln --prompt-cache FILE: the KV cache after a prompt, saved so that a later
// run whose prompt starts with the same tokens loads it and evaluates only
// the rest (llama-cli's --prompt-cache). The file says which model, cache
// types and shape it was made with and carries a CRC-32 of its bytes; one
// that does not fit this run, or is damaged, is ignored with a note, never
// trusted.
//
// Layout (little-endian): "KILNPCAC", version u32, the model's fingerprint
// (file size u64, CRC-32 of the GGUF header u32, CRC-32 of sampled tensor
// bytes u32), key type u32, value type u32, layers u32, kv_dim u32, token
// count u32, the tokens (i32 each), the cache rows (every layer's keys then
// values, as the engine's CausalSession::save_slot gives them), and a CRC-32
// of everything before it (u32).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace kiln {

class GgufFile;

// The cache a prompt cache file must fit (the engine's CausalSession::CacheShape).
struct PromptCacheShape {
    int64_t n_layers = 0, kv_dim = 0;
    DType type_k = DType::F32, type_v = DType::F32;
    size_t row_bytes = 0;  // per token and layer, keys and values
};

// What identifies a model file for a prompt cache: its size, its header
// (metadata and tensor list) and the first and last 4 KiB of every tensor's
// data. Cheap for any size of file; a file changed only between those
// samples would pass, which is why the tokens are checked too.
struct ModelFingerprint {
    uint64_t file_size = 0;
    uint32_t header_crc = 0;
    uint32_t sample_crc = 0;
    bool operator==(const ModelFingerprint&) const = default;
};
ModelFingerprint model_fingerprint(const GgufFile& file);

struct PromptCache {
    std::vector<int32_t> tokens;
    std::vector<std::byte> rows;  // CausalSession::save_slot's bytes for those tokens
};

// The cache in `path` when it exists and fits this model and session (types,
// layers, width, at most n_ctx tokens, ids below n_vocab); otherwise nothing,
// with why_not set to the reason (empty when the file does not exist).
std::optional<PromptCache> load_prompt_cache(const std::filesystem::path& path, const ModelFingerprint& model,
                                             const PromptCacheShape& shape, int64_t n_ctx, int64_t n_vocab,
                                             std::string& why_not);
// The same for a file's bytes (the fuzz target's entry).
std::optional<PromptCache> parse_prompt_cache(std::span<const std::byte> bytes, const ModelFingerprint& model,
                                              const PromptCacheShape& shape, int64_t n_ctx, int64_t n_vocab,
                                              std::string& why_not);

// Writes the cache atomically: the file is whole or absent.
void save_prompt_cache(const std::filesystem::path& path, const ModelFingerprint& model, const PromptCacheShape& shape,
                       const PromptCache& cache);

}  // namespace kiln
