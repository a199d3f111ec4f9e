#include "engine/quant/file_type.h"

#include <map>

namespace kiln {

std::string_view file_type_name(uint32_t file_type) noexcept {
    switch (static_cast<FileType>(file_type)) {
        case FileType::AllF32: return "all F32";
        case FileType::MostlyF16: return "F16";
        case FileType::MostlyBF16: return "BF16";
        case FileType::MostlyQ4_0: return "Q4_0";
        case FileType::MostlyQ4_1: return "Q4_1";
        case FileType::MostlyQ5_0: return "Q5_0";
        case FileType::MostlyQ5_1: return "Q5_1";
        case FileType::MostlyQ8_0: return "Q8_0";
        case FileType::MostlyQ2_K: return "Q2_K - Medium";
        case FileType::MostlyQ2_K_S: return "Q2_K - Small";
        case FileType::MostlyQ3_K_S: return "Q3_K - Small";
        case FileType::MostlyQ3_K_M: return "Q3_K - Medium";
        case FileType::MostlyQ3_K_L: return "Q3_K - Large";
        case FileType::MostlyQ4_K_S: return "Q4_K - Small";
        case FileType::MostlyQ4_K_M: return "Q4_K - Medium";
        case FileType::MostlyQ5_K_S: return "Q5_K - Small";
        case FileType::MostlyQ5_K_M: return "Q5_K - Medium";
        case FileType::MostlyQ6_K: return "Q6_K";
        case FileType::MostlyTQ1_0: return "TQ1_0 - 1.69 bpw ternary";
        case FileType::MostlyTQ2_0: return "TQ2_0 - 2.06 bpw ternary";
        case FileType::MostlyIQ2_XXS: return "IQ2_XXS - 2.0625 bpw";
        case FileType::MostlyIQ2_XS: return "IQ2_XS - 2.3125 bpw";
        case FileType::MostlyIQ2_S: return "IQ2_S - 2.5 bpw";
        case FileType::MostlyIQ2_M: return "IQ2_M - 2.7 bpw";
        case FileType::MostlyIQ3_XS: return "IQ3_XS - 3.3 bpw";
        case FileType::MostlyIQ3_XXS: return "IQ3_XXS - 3.0625 bpw";
        case FileType::MostlyIQ1_S: return "IQ1_S - 1.5625 bpw";
        case FileType::MostlyIQ1_M: return "IQ1_M - 1.75 bpw";
        case FileType::MostlyIQ4_NL: return "IQ4_NL - 4.5 bpw";
        case FileType::MostlyIQ4_XS: return "IQ4_XS - 4.25 bpw";
        case FileType::MostlyIQ3_S: return "IQ3_S - 3.4375 bpw";
        case FileType::MostlyIQ3_M: return "IQ3_S mix - 3.66 bpw";
    }
    return "unknown, may not work";
}

namespace {

// The loader's guess from one tensor type (a K-quant type guesses its Medium mix).
FileType file_type_of(DType t) noexcept {
    switch (t) {
        case DType::F16: return FileType::MostlyF16;
        case DType::BF16: return FileType::MostlyBF16;
        case DType::Q4_0: return FileType::MostlyQ4_0;
        case DType::Q4_1: return FileType::MostlyQ4_1;
        case DType::Q5_0: return FileType::MostlyQ5_0;
        case DType::Q5_1: return FileType::MostlyQ5_1;
        case DType::Q8_0: return FileType::MostlyQ8_0;
        case DType::Q2_K: return FileType::MostlyQ2_K;
        case DType::Q3_K: return FileType::MostlyQ3_K_M;
        case DType::Q4_K: return FileType::MostlyQ4_K_M;
        case DType::Q5_K: return FileType::MostlyQ5_K_M;
        case DType::Q6_K: return FileType::MostlyQ6_K;
        case DType::TQ1_0: return FileType::MostlyTQ1_0;
        case DType::TQ2_0: return FileType::MostlyTQ2_0;
        case DType::IQ2_XXS: return FileType::MostlyIQ2_XXS;
        case DType::IQ2_XS: return FileType::MostlyIQ2_XS;
        case DType::IQ2_S: return FileType::MostlyIQ2_S;
        case DType::IQ3_XXS: return FileType::MostlyIQ3_XXS;
        case DType::IQ1_S: return FileType::MostlyIQ1_S;
        case DType::IQ1_M: return FileType::MostlyIQ1_M;
        case DType::IQ4_NL: return FileType::MostlyIQ4_NL;
        case DType::IQ4_XS: return FileType::MostlyIQ4_XS;
        case DType::IQ3_S: return FileType::MostlyIQ3_S;
        default: return FileType::AllF32;
    }
}

}  // namespace

FileType guess_file_type(std::span<const DType> tensor_types) noexcept {
    // llama.cpp counts in its tensor order and keeps the first type to reach a
    // new maximum; counting in file order gives the same type unless two types
    // tie, which does not happen in the files its tools write.
    std::map<DType, uint32_t> count;
    uint32_t best_count = 0;
    DType best = DType::F32;
    for (DType t : tensor_types) {
        if (++count[t] > best_count) {
            best_count = count[t];
            best = t;
        }
    }
    return file_type_of(best);
}

std::string describe_file_type(std::optional<uint32_t> file_type, std::span<const DType> tensor_types) {
    if (file_type) return std::string(file_type_name(*file_type));
    return std::string(file_type_name(static_cast<uint32_t>(guess_file_type(tensor_types)))) + " (guessed)";
}

}  // namespace kiln
