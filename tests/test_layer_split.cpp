// A model split by layers (kiln --layer-split): its stages, run one after the
// other in one process with the residual stream handed on, must give the
// whole model's logits bit for bit; each stage places only its own tensors.
// The plan and the helpers of data-parallel jobs (shares, hashes) too. The
// jobs themselves run under mpirun in tests/mpi/test_mpi.py.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <numeric>

#include "engine/distributed/collective.h"
#include "engine/distributed/layer_pipeline.h"
#include "engine/models/architectures.h"
#include "engine/models/slot_decoder.h"
#include "engine/runtime/thread_pool.h"
#include "support/paths.h"

using namespace kiln;

namespace {

std::shared_ptr<const GgufFile> open_model(const std::filesystem::path& path) {
    return std::make_shared<GgufFile>(GgufFile::open(path));
}

std::unique_ptr<DecoderLm> stage_of(std::shared_ptr<const GgufFile> file, LayerStage stage, WeightPlacement placement = {}) {
    return load_decoder_stage(std::move(file), placement, [&](const DecoderArch&) { return stage; });
}

// The logits of a prompt and of three tokens after it, through the stages in turn.
std::vector<std::vector<float>> through_stages(const std::vector<std::unique_ptr<DecoderLm>>& stages,
                                               const std::vector<int32_t>& prompt, ThreadPool& pool) {
    std::vector<std::unique_ptr<SlotDecoderSession>> sessions;
    for (const auto& s : stages) sessions.push_back(s->new_stage_session(32, Executor::Mode::Fast));
    std::vector<std::vector<float>> out;
    const auto eval = [&](std::span<const int32_t> tokens) {
        const auto n = static_cast<int64_t>(tokens.size());
        std::vector<float> hidden;
        std::span<const float> y = sessions[0]->eval_stage(tokens, {}, n, pool, false);
        for (size_t i = 1; i < sessions.size(); ++i) {
            hidden.assign(y.begin(), y.end());
            y = sessions[i]->eval_stage({}, hidden, n, pool, false);
        }
        out.emplace_back(y.begin(), y.end());
    };
    eval(prompt);
    for (int32_t t : {5, 17, 3}) eval(std::span(&t, 1));
    return out;
}

std::vector<std::vector<float>> whole(const CausalLm& lm, const std::vector<int32_t>& prompt, ThreadPool& pool) {
    auto session = lm.new_session(32, 1, Executor::Mode::Fast);
    std::vector<std::vector<float>> out;
    const auto logits = session->eval(prompt, pool);
    out.emplace_back(logits.begin(), logits.end());
    for (int32_t t : {5, 17, 3}) {
        const auto next = session->eval(std::span(&t, 1), pool);
        out.emplace_back(next.begin(), next.end());
    }
    return out;
}

void check_stages_match(const std::filesystem::path& path, const std::vector<LayerStage>& plan) {
    ThreadPool pool(2);
    const auto file = open_model(path);
    const std::vector<int32_t> prompt{1, 9, 23, 7, 12};  // ids every fixture vocabulary has
    const auto reference = whole(*load_causal_lm(file), prompt, pool);
    std::vector<std::unique_ptr<DecoderLm>> stages;
    for (const LayerStage& s : plan) stages.push_back(stage_of(file, s));
    const auto split = through_stages(stages, prompt, pool);
    REQUIRE(split.size() == reference.size());
    for (size_t i = 0; i < split.size(); ++i) {
        REQUIRE(split[i].size() == reference[i].size());
        CHECK(std::memcmp(split[i].data(), reference[i].data(), split[i].size() * sizeof(float)) == 0);
    }
}

}  // namespace

TEST_CASE("a llama split into stages gives the whole model's logits bit for bit", "[layer_split]") {
    // stories260K has 5 blocks.
    check_stages_match(test::shared_models_dir() / "stories260K.gguf", {{0, 2}, {2, 4}, {4, 5}});
    check_stages_match(test::shared_models_dir() / "stories260K.gguf", {{0, 1}, {1, 5}});
}

TEST_CASE("a gpt2 split into stages gives the whole model's logits bit for bit", "[layer_split]") {
    // shakespeare-char has 4 blocks, learned positions and a tied head.
    check_stages_match(test::source_dir() / "models" / "shakespeare-char.gguf", {{0, 1}, {1, 3}, {3, 4}});
}

TEST_CASE("gemma, gemma2 and phi3 split into stages give the whole model's logits bit for bit", "[layer_split]") {
    // The PyTorch-checked fixtures of test_llama_family.cpp (two blocks each):
    // Gemma 2's post norms, soft caps and sliding window, phi3's LongRoPE factors in every stage.
    for (const char* name : {"gemma/gemma", "gemma/gemma2", "phi3/phi3", "phi3/phi3_longrope"}) {
        INFO(name);
        const auto path = test::fixtures_dir() / (std::string(name) + ".gguf");
        const GgufFile file = GgufFile::open(path);
        const int64_t blocks = file.get_int(file.get_string("general.architecture") + ".block_count");
        REQUIRE(blocks >= 2);
        check_stages_match(path, {{0, 1}, {1, blocks}});
    }
}

TEST_CASE("a stage places only its own tensors", "[layer_split]") {
    const auto file = open_model(test::shared_models_dir() / "stories260K.gguf");
    WeightPlacement copied;
    copied.mmap = false;  // every placed tensor is copied, so the copies show what a stage places
    const auto first = stage_of(file, {0, 2}, copied), last = stage_of(file, {2, 5}, copied);
    const auto all = load_causal_lm(file, copied);
    std::vector<std::string> first_names, last_names;
    for (const auto& c : first->weight_residence().copies) first_names.push_back(c.name);
    for (const auto& c : last->weight_residence().copies) last_names.push_back(c.name);
    CHECK(std::find(first_names.begin(), first_names.end(), "token_embd.weight") != first_names.end());
    CHECK(std::find(first_names.begin(), first_names.end(), "blk.1.attn_q.weight") != first_names.end());
    CHECK(std::find(first_names.begin(), first_names.end(), "blk.2.attn_q.weight") == first_names.end());
    CHECK(std::find(first_names.begin(), first_names.end(), "output_norm.weight") == first_names.end());
    CHECK(std::find(last_names.begin(), last_names.end(), "blk.2.attn_q.weight") != last_names.end());
    CHECK(std::find(last_names.begin(), last_names.end(), "output_norm.weight") != last_names.end());
    CHECK(std::find(last_names.begin(), last_names.end(), "blk.1.ffn_up.weight") == last_names.end());
    // Together the stages place every tensor once, except what both use.
    CHECK(first->weight_residence().copied_bytes + last->weight_residence().copied_bytes ==
          all->weight_residence().copied_bytes);
    CHECK(first->weight_residence().copied_bytes == layer_stage_bytes(*file, first->arch(), first->stage()));
    // A stage's session caches its layers only.
    CHECK(first->new_stage_session(16, Executor::Mode::Fast)->cache_shape().n_layers == 2);
    CHECK(last->new_stage_session(16, Executor::Mode::Fast)->cache_shape().n_layers == 3);
}

TEST_CASE("a tied head is placed by the first and the last stage", "[layer_split]") {
    const auto file = open_model(test::source_dir() / "models" / "shakespeare-char.gguf");
    REQUIRE(file->find_tensor("output.weight") == nullptr);
    CHECK(layer_stage_uses(*file, 4, {0, 2}, "token_embd.weight"));
    CHECK(layer_stage_uses(*file, 4, {2, 4}, "token_embd.weight"));
    CHECK(!layer_stage_uses(*file, 4, {2, 4}, "position_embd.weight"));
    CHECK(!layer_stage_uses(*file, 4, {1, 3}, "token_embd.weight"));
}

TEST_CASE("the layer split plan: contiguous ranges, every rank a block, bytes in proportion", "[layer_split]") {
    const auto file = open_model(test::shared_models_dir() / "stories260K.gguf");
    const auto lm = load_decoder_stage(file, {}, [](const DecoderArch&) { return LayerStage{}; });
    const DecoderArch& arch = lm->arch();
    for (int ranks = 1; ranks <= 5; ++ranks) {
        const auto plan = plan_layer_split(*file, arch, {}, ranks);
        REQUIRE(plan.size() == static_cast<size_t>(ranks));
        CHECK(plan.front().begin() == 0);
        CHECK(plan.back().end(5) == 5);
        for (size_t r = 0; r < plan.size(); ++r) {
            CHECK(plan[r].end(5) > plan[r].begin());
            if (r > 0) CHECK(plan[r].begin() == plan[r - 1].end(5));
        }
    }
    // stories260K: the embeddings and head (tied: none apart) weigh about a block's bytes.
    const std::vector<double> skewed{1, 4};
    const auto plan = plan_layer_split(*file, arch, skewed, 2);
    CHECK(plan[0].end(5) - plan[0].begin() < plan[1].end(5) - plan[1].begin());
    CHECK_THROWS_AS(plan_layer_split(*file, arch, {}, 6), CollectiveError);
    const std::vector<double> three{1, 1, 1};
    CHECK_THROWS_AS(plan_layer_split(*file, arch, three, 2), CollectiveError);
    CHECK(describe_layer_split(*file, arch, plan_layer_split(*file, arch, {}, 2)).find("on rank 1") != std::string::npos);
}

TEST_CASE("shares of a batch split across ranks cover it once, the first ranks taking the rest", "[layer_split]") {
    for (int64_t count : {0, 1, 5, 6, 7, 100})
        for (int size = 1; size <= 4; ++size) {
            int64_t next = 0;
            for (int r = 0; r < size; ++r) {
                const Share s = share_of(count, r, size);
                CHECK(s.begin == next);
                CHECK(s.size() == count / size + (r < count % size ? 1 : 0));
                next = s.end;
            }
            CHECK(next == count);
        }
}

TEST_CASE("content hashes tell files apart and agree on the same bytes", "[layer_split]") {
    std::vector<std::byte> bytes(10007);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 131 % 251);
    const uint64_t h = content_hash(bytes);
    CHECK(content_hash(bytes) == h);
    for (size_t at : {size_t{0}, size_t{31}, size_t{5000}, bytes.size() - 1}) {
        auto other = bytes;
        other[at] ^= std::byte{1};
        CHECK(content_hash(other) != h);
    }
    CHECK(content_hash(std::span(bytes).first(bytes.size() - 1)) != h);
    const auto dir = std::filesystem::temp_directory_path();
    const auto a = dir / "kiln-hash-a.bin", b = dir / "kiln-hash-b.bin";
    // Over 4 MiB, so that the file is hashed in more than one piece.
    std::vector<char> big(size_t{9} << 20);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 % 253);
    std::ofstream(a, std::ios::binary).write(big.data(), static_cast<std::streamsize>(big.size()));
    big[big.size() / 2] ^= 1;
    std::ofstream(b, std::ios::binary).write(big.data(), static_cast<std::streamsize>(big.size()));
    CHECK(file_content_hash(a) == file_content_hash(a));
    CHECK(file_content_hash(a) != file_content_hash(b));
    CHECK_THROWS_AS(file_content_hash(dir / "kiln-no-such-file.bin"), Error);
    std::filesystem::remove(a);
    std::filesystem::remove(b);
}
