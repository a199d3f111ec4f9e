// libFuzzer entry for a Hugging Face folder's config.json, read by
// hf_checkpoint() as kiln-convert reads a folder (formats/checkpoint/hf_folder.h
// and the hf_* architecture readers). The input is config.json; the weights
// (and tokenizer) are those of the tests/fixtures folder whose architecture the
// input names, so a mutated config meets real tensors. Anything but a result
// or kiln::Error (a crash, a sanitizer report, another exception type, a hang,
// an out-of-memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "formats/checkpoint/hf_folder.h"
#include "fuzz_input_file.h"

namespace {

// The fixture folder for a config that mentions `marker` (the first that matches wins).
struct Fixture {
    std::string_view marker, folder;
};
constexpr Fixture kFixtures[] = {
    {"longrope", "hf_family/phi3_longrope"}, {"hi3", "hf_family/phi3"},       {"emma2", "hf_family/gemma2"},
    {"emma", "hf_family/gemma"},             {"wen2", "hf_family/qwen2"},     {"istral", "hf_family/mistral_yarn"},
    {"PT2", "gpt2/gpt2_hf"},                 {"pt2", "gpt2/gpt2_hf"},         {"linear", "hf_family/llama_linear"},
    {"", "hf_family/llama3"},
};

// One scratch folder per fixture, its files linked to the fixture's.
const std::vector<std::filesystem::path>& folders() {
    static const std::vector<std::filesystem::path> all = [] {
        std::vector<std::filesystem::path> out;
        for (const Fixture& f : kFixtures) {
            const std::filesystem::path source = std::filesystem::path(KILN_SOURCE_DIR) / "tests/fixtures" / f.folder;
            const std::filesystem::path folder = kiln::fuzz::scratch_folder() / std::filesystem::path(f.folder).filename();
            if (!std::filesystem::exists(folder)) {
                std::filesystem::create_directory(folder);
                for (const char* file : {"model.safetensors", "tokenizer.json", "tokenizer.model"})
                    if (std::filesystem::exists(source / file)) std::filesystem::create_symlink(source / file, folder / file);
            }
            out.push_back(folder);
        }
        return out;
    }();
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    size_t pick = 0;
    while (text.find(kFixtures[pick].marker) == std::string_view::npos) ++pick;
    const std::filesystem::path& folder = folders()[pick];
    kiln::fuzz::write_file(folder / "config.json", data, size);
    try {
        (void)kiln::hf_checkpoint(folder);
    } catch (const kiln::Error&) {
        // the expected outcome for a config kiln cannot read
    }
    return 0;
}
