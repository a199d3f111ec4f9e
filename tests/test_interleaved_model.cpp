// A Llama model whose matrices are Q4_K and Q6_K, loaded with the kernel set's
// interleaved layout (Q4_K_R16 and Q6_K_R16 on avx512-vnni and avx2) and with the file's layout
// (KILN_INTERLEAVE=0): a prompt's logits (the GEMM) and decode steps (the
// interleaved decode kernels) agree within float rounding, and the scalar
// reference path of the interleaved model agrees with both.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/kernels/matmul.h"
#include "engine/models/architectures.h"
#include "formats/gguf/gguf_file.h"
#include "support/quantized_llama.h"
#include "support/sample_gguf.h"

using namespace kiln;

namespace {

// A prompt's logits, then those of 6 greedy steps.
std::vector<float> run(CausalLm& model, Executor::Mode mode) {
    ThreadPool pool(2);
    auto session = model.new_session(64, 1, mode);
    const std::vector<int32_t> prompt = {1, 17, 200, 33, 5, 90, 121, 7, 64, 3, 250, 11};
    auto logits = session->eval(prompt, pool, true);
    std::vector<float> all(logits.begin(), logits.end());
    for (int step = 0; step < 6; ++step) {
        const auto last = logits.subspan(logits.size() - 256);
        const auto next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
        logits = session->eval(std::span(&next, 1), pool);
        all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    return worst;
}

}  // namespace

TEST_CASE("interleaved Q4_K and Q6_K matrices give the file layout's logits", "[llama][interleave]") {
    test::TempDir dir;
    const auto path = test::write_q4_k_llama(dir.path());
    const auto file = std::make_shared<GgufFile>(GgufFile::open(path));
    ::setenv("KILN_INTERLEAVE", "0", 1);
    const auto plain_model = load_causal_lm(file);
    ::unsetenv("KILN_INTERLEAVE");
    const auto model = load_causal_lm(file);
    const std::vector<float> plain = run(*plain_model, Executor::Mode::Fast);
    const std::vector<float> interleaved = run(*model, Executor::Mode::Fast);
    const std::vector<float> reference = run(*model, Executor::Mode::Reference);
    double scale = 0;
    for (float v : plain) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    INFO("largest |logit| " << scale << ", kernels " << kernels::active_matmul_kernels().name);
    REQUIRE(scale > 0.1);
    // Same quantized weights; only the float order of the dot products differs.
    CHECK(max_abs_diff(plain, interleaved) < 1e-4 * scale);
    CHECK(max_abs_diff(reference, interleaved) < 1e-4 * scale);
}
