// Weights copied into huge-page memory (engine/models/resident_weights.h):
// byte-identical to the file's, used by the model, and the same logits as
// computing straight from the file mapping (KILN_MMAP=1).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "engine/models/decoder_lm.h"
#include "engine/models/llama.h"
#include "support/paths.h"

using namespace kiln;

namespace {

// Sets or clears KILN_MMAP for one scope.
struct MmapEnv {
    explicit MmapEnv(const char* value) {
        if (const char* old = std::getenv("KILN_MMAP")) saved_ = old, had_ = true;
        if (value != nullptr) setenv("KILN_MMAP", value, 1);
        else unsetenv("KILN_MMAP");
    }
    ~MmapEnv() {
        if (had_) setenv("KILN_MMAP", saved_.c_str(), 1);
        else unsetenv("KILN_MMAP");
    }
    std::string saved_;
    bool had_ = false;
};

std::vector<float> logits_of(const DecoderLm& model, ThreadPool& pool) {
    const auto session = model.new_session(32, 1, Executor::Mode::Fast);
    CausalSession& ctx = *session;
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
    auto first = ctx.eval(prompt, pool, true);
    std::vector<float> all(first.begin(), first.end());
    const int32_t next = 42;
    auto step = ctx.eval(std::span(&next, 1), pool);
    all.insert(all.end(), step.begin(), step.end());
    return all;
}

}  // namespace

TEST_CASE("weights copied to huge pages equal the file's and give the same logits", "[llama][threads]") {
    auto file = std::make_shared<const GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
    ThreadPool pool(2);
    std::vector<float> copied_logits, mapped_logits;
    {
        const MmapEnv env(nullptr);
        const DecoderLm model(file, load_llama_decoder(*file));
        REQUIRE(model.weights_copied());
        for (const GgufTensor& t : file->tensors()) {
            const std::byte* p = model.tensor_data(t);
            CHECK(p != t.data.data());
            CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
            CHECK(std::memcmp(p, t.data.data(), t.data.size()) == 0);
        }
        copied_logits = logits_of(model, pool);
    }
    {
        const MmapEnv env("1");
        const DecoderLm model(file, load_llama_decoder(*file));
        CHECK_FALSE(model.weights_copied());
        for (const GgufTensor& t : file->tensors()) CHECK(model.tensor_data(t) == t.data.data());
        mapped_logits = logits_of(model, pool);
    }
    CHECK(copied_logits == mapped_logits);
}
