// Checkpoints from PyTorch (nanoGPT .pt, Hugging Face GPT2LMHeadModel folders,
// torch.nn.Transformer state dicts) converted by kiln-convert and run by kiln:
// logits, greedy decoding and beam search against the PyTorch references of
// tests/reference/make_gpt2_fixtures.py and make_transformer_fixtures.py.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unistd.h>

#include "convert/convert.h"
#include "engine/models/architectures.h"
#include "engine/models/transformer.h"
#include "engine/runtime/beam_search.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"
#include "support/tensor_data.h"

using namespace kiln;

namespace {

std::shared_ptr<const GgufFile> converted(const std::filesystem::path& input) {
    const auto out = std::filesystem::temp_directory_path() /
                     fmt::format("kiln-converted-{}-{}.gguf", input.filename().string(), ::getpid());
    convert::ConvertOptions o;
    o.input = input;
    o.output = out;
    o.no_tokenizer = true;  // the checks are on the weights; vocabularies come with some inputs
    std::FILE* log = std::tmpfile();
    convert::convert(o, log);
    std::fclose(log);
    auto file = std::make_shared<GgufFile>(GgufFile::open(out));
    std::filesystem::remove(out);  // the mapping stays valid
    return file;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

int32_t argmax(std::span<const float> v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Reference {
    GgufFile file;
    std::vector<int32_t> ints(const std::string& name) const { return test::values_of<int32_t>(file.get_tensor(name)); }
    std::vector<float> floats(const std::string& name) const { return test::values_of<float>(file.get_tensor(name)); }
    std::vector<double> doubles(const std::string& key) const {
        std::vector<double> out;
        for (const GgufValue& v : file.find(key)->as_array()->items) out.push_back(*v.as_number());
        return out;
    }
};

// Every beam setting of the reference: hypotheses' tokens and scores.
void check_beams(const Reference& ref, const std::string& p, int64_t n_vocab, int64_t steps, int32_t eos,
                 const std::function<std::span<const float>()>& start, const BeamAdvance& advance) {
    for (int k : {1, 2, 4})
        for (const char* a : {"0.0", "0.6", "1.0"}) {
            const std::string key = fmt::format("{}.beam.k{}.a{}", p, k, a);
            INFO(key);
            BeamParams params;
            params.beams = k;
            params.length_penalty = std::stod(a);
            params.max_tokens = steps;
            params.eos = eos;
            const auto found = beam_search(start(), n_vocab, params, advance);
            const auto normalized = ref.doubles(key + ".normalized");
            const auto raw = ref.doubles(key + ".raw");
            REQUIRE(found.size() == normalized.size());
            for (size_t h = 0; h < found.size(); ++h) {
                CHECK(found[h].tokens == ref.ints(fmt::format("{}.h{}", key, h)));
                CHECK(found[h].score == Approx(normalized[h]).margin(1e-3));
                CHECK(found[h].log_prob == Approx(raw[h]).margin(1e-3));
            }
        }
}

}  // namespace

TEST_CASE("converted GPT-2 checkpoints match PyTorch: logits, greedy and beam search", "[convert][gpt2]") {
    const std::string source =
        GENERATE(std::string("nanogpt_bias.pt"), std::string("nanogpt_nobias_compiled.pt"), std::string("gpt2_hf"),
                 std::string("gpt2_hf_untied"));
    INFO(source);
    const auto dir = test::fixtures_dir() / "gpt2";
    const auto lm = load_causal_lm(converted(dir / source));
    const std::string stem = source.substr(0, source.find('.'));
    const Reference ref{GgufFile::open(dir / (stem + "_reference.gguf"))};
    const int64_t n_vocab = lm->info().n_vocab;
    const auto eos = static_cast<int32_t>(ref.file.get_int("reference.eos_token_id"));
    ThreadPool pool(2);
    for (int64_t i = 0; i < ref.file.get_int("reference.prompt_count"); ++i) {
        const std::string p = fmt::format("p{}", i);
        const auto tokens = ref.ints(p + ".tokens");
        auto session = lm->new_session(64, 4, Executor::Mode::Fast);
        CHECK(max_abs_diff(session->eval(tokens, pool, true), ref.floats(p + ".logits")) < 1e-4f);

        // Greedy decoding through the cache.
        session->reset();
        auto logits = session->eval(tokens, pool);
        std::vector<int32_t> greedy;
        for (int64_t s = 0; s < ref.file.get_int("reference.greedy_steps"); ++s) {
            greedy.push_back(argmax(logits));
            if (greedy.back() == eos) break;
            logits = session->eval(std::span(&greedy.back(), 1), pool);
        }
        CHECK(greedy == ref.ints(p + ".greedy"));

        std::vector<int32_t> slots;
        check_beams(
            ref, p, n_vocab, ref.file.get_int("reference.beam_steps"), eos,
            [&] {
                session->reset();
                return session->eval(tokens, pool);
            },
            [&](auto parents, auto next) {
                session->reorder(parents);
                slots.resize(next.size());
                std::iota(slots.begin(), slots.end(), 0);
                return session->eval_slots(next, slots, pool);
            });
    }
}

TEST_CASE("converted torch.nn.Transformer checkpoints match PyTorch: logits, padded batch, greedy, beams",
          "[convert][transformer]") {
    const std::string source = GENERATE(std::string("postln_relu"), std::string("preln_gelu_shared"));
    INFO(source);
    const auto dir = test::fixtures_dir() / "transformer";
    const TransformerModel model(converted(dir / (source + ".pt")));
    const Reference ref{GgufFile::open(dir / (source + "_reference.gguf"))};
    const TransformerConfig& c = model.config();
    CHECK(c.eos == ref.file.get_int("reference.eos_token_id"));
    CHECK(c.bos == ref.file.get_int("reference.bos_token_id"));
    ThreadPool pool(2);
    const int64_t count = ref.file.get_int("reference.source_count");
    TransformerSession batch(model, count, 32, count, 8);
    std::vector<std::vector<int32_t>> sources;
    std::vector<int32_t> prefix_tokens, prefix_slots;
    for (int64_t i = 0; i < count; ++i) {
        const std::string p = fmt::format("s{}", i);
        sources.push_back(ref.ints(p + ".tokens"));
        const auto prefix = ref.ints(p + ".prefix");
        TransformerSession session(model, 1, 32, 4, 32);
        session.encode(std::span(&sources.back(), 1), pool);
        const std::vector<int32_t> zeros(prefix.size(), 0);
        CHECK(max_abs_diff(session.decode(prefix, zeros, pool), ref.floats(p + ".logits")) < 1e-4f);
        for (int32_t t : prefix) {
            prefix_tokens.push_back(t);
            prefix_slots.push_back(static_cast<int32_t>(i));
        }

        const int32_t bos = c.bos, zero = 0;
        auto start = [&] {
            session.encode(std::span(&sources.back(), 1), pool);
            return session.decode(std::span(&bos, 1), std::span(&zero, 1), pool);
        };
        auto logits = start();
        std::vector<int32_t> greedy;
        for (int64_t s = 0; s < ref.file.get_int("reference.greedy_steps"); ++s) {
            greedy.push_back(argmax(logits));
            if (greedy.back() == c.eos) break;
            logits = session.decode(std::span(&greedy.back(), 1), std::span(&zero, 1), pool);
        }
        CHECK(greedy == ref.ints(p + ".greedy"));
        std::vector<int32_t> slots;
        check_beams(ref, p, c.n_vocab, ref.file.get_int("reference.beam_steps"), c.eos, start,
                    [&](auto parents, auto next) {
                        session.reorder(parents);
                        slots.resize(next.size());
                        std::iota(slots.begin(), slots.end(), 0);
                        return session.decode(next, slots, pool);
                    });
    }
    // All sources padded into one encoder batch, all prefixes in one decoder batch.
    batch.encode(sources, pool);
    CHECK(max_abs_diff(batch.decode(prefix_tokens, prefix_slots, pool), ref.floats("batch.logits")) < 1e-4f);
}
