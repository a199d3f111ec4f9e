#pragma once
// Reading an architecture's hyper-parameters from GGUF metadata, with the
// range checks every architecture shares. Failures are kiln::Error("model")
// naming the file and the key.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "formats/arch/metadata_view.h"

namespace kiln::arch {

// An integer hyper-parameter in [1, 2^24].
int64_t positive(const MetadataView& f, const std::string& key);
// positive(), or `fallback` when the key is absent.
int64_t positive_or(const MetadataView& f, const std::string& key, int64_t fallback);
// A float hyper-parameter, or `fallback` when the key is absent.
float number_or(const MetadataView& f, const std::string& key, float fallback);
// number_or() for what must be finite and above 0 (an epsilon, a RoPE base):
// NaN or a negative value would silently turn every output into NaN.
float positive_number_or(const MetadataView& f, const std::string& key, float fallback);
// A block (layer) count: positive(), and no more than the file has tensors,
// since each block is made of several; a count the tensors cannot back would
// otherwise size per-layer tables before any tensor is looked at.
int64_t block_count(const MetadataView& f, const std::string& key);
// A bool hyper-parameter, or `fallback` when the key is absent.
bool bool_or(const MetadataView& f, const std::string& key, bool fallback);
// A string hyper-parameter, or `fallback` when the key is absent.
std::string string_or(const MetadataView& f, const std::string& key, const std::string& fallback);

// Refuses (kiln::Error("model")) the first key "<architecture>.<suffix>" whose
// suffix is not in `known`: a key kiln does not read may change the math
// (a sliding window, soft-capping, experts), so it is never ignored.
void refuse_unknown_keys(const MetadataView& f, std::string_view architecture,
                         std::initializer_list<std::string_view> known,
                         std::initializer_list<std::string_view> more_known = {});

}  // namespace kiln::arch
