// Data-parallel training and the layer pipeline with the ranks as threads of
// this process (tests/support/thread_ranks.h): the same checks as the mpirun
// jobs of tests/mpi/test_mpi.py, run in every build (with or without MPI) and
// under the sanitizers. Tagged [threads]: the TSan run has them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "engine/distributed/layer_pipeline.h"
#include "engine/models/architectures.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/char_corpus.h"
#include "engine/train/gpt_trainer.h"
#include "support/paths.h"
#include "support/thread_ranks.h"

using namespace kiln;
using namespace kiln::train;

namespace {

TrainOptions tiny_gpt(float dropout, int64_t accumulation) {
    TrainOptions o;
    o.model.vocab = 27;
    o.model.context = 16;
    o.model.width = 32;
    o.model.ffn = 64;
    o.model.layers = 2;
    o.model.heads = 2;
    o.batch = 5;  // not a multiple of the ranks: shares of 3 and 2, or 2, 2 and 1
    o.accumulation = accumulation;
    o.dropout = dropout;
    o.schedule = LrSchedule{3e-3, 3e-4, 2, 8};
    return o;
}

std::vector<int32_t> letters() {
    std::vector<int32_t> data;
    for (int i = 0; i < 4000; ++i) data.push_back(static_cast<int32_t>((i * 7 + i / 13) % 27));
    return data;
}

struct Curve {
    std::vector<double> loss, norm;
    double eval = 0;
};

Curve train_steps(const TrainOptions& o, int steps) {
    ThreadPool pool(1);
    GptTrainer trainer(o, pool);
    Curve c;
    const auto data = letters();
    for (int s = 0; s < steps; ++s) {
        const StepResult r = trainer.step(data);
        c.loss.push_back(r.loss);
        c.norm.push_back(r.grad_norm);
    }
    c.eval = trainer.evaluate(data, 3);
    return c;
}

void check_same_curve(const Curve& a, const Curve& b) {
    REQUIRE(a.loss.size() == b.loss.size());
    for (size_t i = 0; i < a.loss.size(); ++i) {
        CHECK(a.loss[i] == Approx(b.loss[i]).epsilon(1e-5));
        CHECK(a.norm[i] == Approx(b.norm[i]).epsilon(1e-4));
    }
    CHECK(a.eval == Approx(b.eval).epsilon(1e-5));
}

// Logits of a prompt (every row), three tokens after it, and two more after
// the sequence is cut back to 3 tokens: what the pipeline must follow.
std::vector<std::vector<float>> run_sequence(CausalSession& session, ThreadPool& pool) {
    const std::vector<int32_t> prompt{1, 9, 33, 7, 12};
    const std::vector<int32_t> next{5, 17, 3};
    std::vector<std::vector<float>> out;
    const auto keep = [&](std::span<const float> logits) { out.emplace_back(logits.begin(), logits.end()); };
    keep(session.eval(prompt, pool, true));
    for (int32_t t : next) keep(session.eval(std::span(&t, 1), pool));
    session.truncate(0, 3);
    keep(session.eval(std::span(next).first(2), pool));
    return out;
}

}  // namespace

TEST_CASE("data-parallel training on 2 and 3 thread ranks follows one process's loss curve", "[threads][distributed]") {
    for (const auto& [dropout, accumulation] : {std::pair{0.0f, int64_t{1}}, std::pair{0.2f, int64_t{2}}}) {
        const Curve alone = train_steps(tiny_gpt(dropout, accumulation), 6);
        for (int size : {2, 3}) {
            test::ThreadRanks job(size);
            std::vector<Curve> curves(static_cast<size_t>(size));
            job.run([&](Collective& rank) {
                TrainOptions o = tiny_gpt(dropout, accumulation);
                o.collective = &rank;
                curves[static_cast<size_t>(rank.rank())] = train_steps(o, 6);
            });
            INFO("dropout " << dropout << ", accumulation " << accumulation << ", " << size << " ranks");
            for (const Curve& c : curves) check_same_curve(alone, c);
            // Every rank took the same steps: the same bits everywhere.
            for (const Curve& c : curves) CHECK(c.loss == curves[0].loss);
        }
    }
}

TEST_CASE("the layer pipeline on 3 thread ranks gives one process's logits bit for bit", "[threads][distributed]") {
    const auto file = std::make_shared<GgufFile>(GgufFile::open(test::shared_models_dir() / "stories260K.gguf"));
    ThreadPool alone_pool(1);
    const auto whole = load_causal_lm(file);
    const auto reference = run_sequence(*whole->new_session(32, 1, Executor::Mode::Fast), alone_pool);
    test::ThreadRanks job(3);
    std::vector<std::vector<float>> got;
    job.run([&](Collective& rank) {
        ThreadPool pool(1);
        std::string plan;
        auto lm = load_layer_split(file, {}, rank, {}, &plan);
        if (rank.rank() != 0) {
            serve_layer_split(*lm, rank, pool);
            return;
        }
        CHECK(plan.find("on rank 2") != std::string::npos);
        got = run_sequence(*lm->new_session(32, 1, Executor::Mode::Fast), pool);
        CHECK_THROWS_AS(lm->new_session(32, 2, Executor::Mode::Fast), Error);  // one sequence only
        lm.reset();  // lets the other ranks go
    });
    REQUIRE(got.size() == reference.size());
    for (size_t i = 0; i < got.size(); ++i) {
        REQUIRE(got[i].size() == reference[i].size());
        CHECK(std::memcmp(got[i].data(), reference[i].data(), got[i].size() * sizeof(float)) == 0);
    }
}
