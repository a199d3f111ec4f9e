#pragma once
// llama.cpp's whole-file types (llama_ftype, stored as general.file_type) and
// the names llama.cpp prints for them ("Q4_K - Medium"), so that kiln-convert
// writes the same numbers and kiln-convert inspect / kiln-bench print the same
// words as llama.cpp's tools. Numbers and names follow include/llama.h and
// llama_model_ftype_name in llama.cpp c392e509.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/core/dtype.h"

namespace kiln {

enum class FileType : uint32_t {
    AllF32 = 0,
    MostlyF16 = 1,
    MostlyQ4_0 = 2,
    MostlyQ4_1 = 3,
    MostlyQ8_0 = 7,
    MostlyQ5_0 = 8,
    MostlyQ5_1 = 9,
    MostlyQ2_K = 10,
    MostlyQ3_K_S = 11,
    MostlyQ3_K_M = 12,
    MostlyQ3_K_L = 13,
    MostlyQ4_K_S = 14,
    MostlyQ4_K_M = 15,
    MostlyQ5_K_S = 16,
    MostlyQ5_K_M = 17,
    MostlyQ6_K = 18,
    MostlyIQ2_XXS = 19,
    MostlyIQ2_XS = 20,
    MostlyQ2_K_S = 21,
    MostlyIQ3_XS = 22,
    MostlyIQ3_XXS = 23,
    MostlyIQ1_S = 24,
    MostlyIQ4_NL = 25,
    MostlyIQ3_S = 26,
    MostlyIQ3_M = 27,
    MostlyIQ2_S = 28,
    MostlyIQ2_M = 29,
    MostlyIQ4_XS = 30,
    MostlyIQ1_M = 31,
    MostlyBF16 = 32,
    MostlyTQ1_0 = 36,
    MostlyTQ2_0 = 37,
};

// llama.cpp's name of a general.file_type value; "unknown, may not work" for
// numbers it does not know, as llama.cpp prints them.
std::string_view file_type_name(uint32_t file_type) noexcept;

// What llama.cpp's loader guesses for a file without general.file_type: the
// file type of the tensor type that the most tensors have (ties: the first
// such type in the order given). Its printed name gets " (guessed)".
FileType guess_file_type(std::span<const DType> tensor_types) noexcept;

// The name llama.cpp prints for a file: its general.file_type's name, or the
// guess from its tensors followed by " (guessed)".
std::string describe_file_type(std::optional<uint32_t> file_type, std::span<const DType> tensor_types);

}  // namespace kiln
