// The encoder-decoder's training graph against torch.nn.Transformer
// (tests/reference/make_seq2seq_fixtures.py): loss and every parameter's
// gradient, pre-LN with exact GELU and post-LN with relu; and the reversal
// task's data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/graph/executor.h"
#include "engine/train/reverse_task.h"
#include "engine/train/seq2seq_model.h"
#include "formats/gguf/gguf_file.h"
#include "support/paths.h"

using namespace kiln;
using namespace kiln::train;

namespace {

std::vector<int32_t> ints(const GgufTensor& t) {
    std::vector<int32_t> v(t.elements);
    std::memcpy(v.data(), t.data.data(), v.size() * sizeof(int32_t));
    return v;
}

void check_against_torch(const char* fixture) {
    INFO(fixture);
    const GgufFile f = GgufFile::open(test::fixtures_dir() / "train" / fixture);
    Seq2SeqConfig c;
    c.vocab = f.get_int("test.vocab");
    c.context = f.get_int("transformer.context_length");
    c.width = f.get_int("transformer.embedding_length");
    c.ffn = f.get_int("transformer.feed_forward_length");
    c.encoder_layers = f.get_int("transformer.encoder.block_count");
    c.decoder_layers = f.get_int("transformer.decoder.block_count");
    c.heads = f.get_int("transformer.attention.head_count");
    c.eps = static_cast<float>(f.get_number("transformer.attention.layer_norm_epsilon"));
    c.norm_first = *f.find("transformer.norm_first")->as_bool();
    c.gelu = f.get_string("transformer.ffn_activation") == "gelu";
    Seq2SeqModel model(c);
    for (const ParamTensor& t : model.tensors()) {
        const GgufTensor& src = f.get_tensor(t.name);
        REQUIRE(src.dims == t.dims);
        std::memcpy(model.tensor(t.name), src.data.data(), t.segment.count * sizeof(float));
    }
    const int64_t batch = f.get_int("test.batch");
    const auto source = ints(f.get_tensor("source"));
    const auto mask = ints(f.get_tensor("source_mask"));
    const auto decoder_input = ints(f.get_tensor("decoder_input"));
    const auto labels = ints(f.get_tensor("labels"));
    auto G = build_seq2seq_graph(model, batch, static_cast<int64_t>(source.size()) / batch,
                                 static_cast<int64_t>(labels.size()) / batch, true);
    std::copy(source.begin(), source.end(), G->source_data());
    for (size_t i = 0; i < mask.size(); ++i) G->mask_data()[i] = static_cast<int8_t>(mask[i]);
    std::copy(decoder_input.begin(), decoder_input.end(), G->decoder_input_data());
    std::copy(labels.begin(), labels.end(), G->label_data());
    ThreadPool pool(2);
    Executor(G->graph).run(pool);
    CHECK(G->loss_value() == Approx(f.get_number("test.loss")).epsilon(1e-5));
    // As for the GPT: within 1e-4 of each element, elements far below their
    // tensor's largest judged against 1e-2 of it. The key biases' gradient is
    // 0 in exact arithmetic (a constant added to every key's score of a row
    // cancels in the softmax): float32 leaves rounding noise there, judged
    // against 1e-3 of the largest gradient of the model.
    double model_scale = 0.0;
    for (const ParamTensor& t : model.tensors()) {
        const auto* e = reinterpret_cast<const float*>(f.get_tensor("grad." + t.name).data.data());
        for (size_t i = 0; i < t.segment.count; ++i) model_scale = std::max(model_scale, std::abs(double(e[i])));
    }
    for (size_t p = 0; p < model.tensors().size(); ++p) {
        const ParamTensor& t = model.tensors()[p];
        const auto* expected = reinterpret_cast<const float*>(f.get_tensor("grad." + t.name).data.data());
        const float* got = G->graph.node(G->grads[p]).row(0);
        double scale = 0.0;
        for (size_t i = 0; i < t.segment.count; ++i) scale = std::max(scale, std::abs(double(expected[i])));
        for (size_t i = 0; i < t.segment.count; ++i) {
            const double err = std::abs(double(got[i]) - expected[i]) /
                               std::max({std::abs(double(expected[i])), 1e-2 * scale, 1e-3 * model_scale});
            INFO(t.name << " element " << i << ": " << got[i] << " vs torch " << expected[i]);
            REQUIRE(err <= 1e-4);
        }
    }
}

}  // namespace

TEST_CASE("encoder-decoder gradients match torch.nn.Transformer, pre-LN with GELU", "[train]") {
    check_against_torch("tiny_seq2seq_preln_gelu.gguf");
}

TEST_CASE("encoder-decoder gradients match torch.nn.Transformer, post-LN with relu", "[train]") {
    check_against_torch("tiny_seq2seq_postln_relu.gguf");
}

TEST_CASE("the reversal task: teacher-forcing rows and disjoint held-out strings", "[train]") {
    const ReverseTask task(4, 50, 3);
    REQUIRE(task.sequence_length() == 5);
    std::vector<int32_t> src(10), dec(10), lab(10);
    std::vector<int8_t> mask(10);
    task.fill("abc", 1, src.data(), mask.data(), dec.data(), lab.data());
    CHECK(std::vector<int32_t>(src.begin() + 5, src.end()) == std::vector<int32_t>{3, 4, 5, ReverseTask::kEos, 0});
    CHECK(std::vector<int8_t>(mask.begin() + 5, mask.end()) == std::vector<int8_t>{1, 1, 1, 1, 0});
    CHECK(std::vector<int32_t>(dec.begin() + 5, dec.end()) == std::vector<int32_t>{ReverseTask::kBos, 5, 4, 3, 0});
    CHECK(std::vector<int32_t>(lab.begin() + 5, lab.end()) == std::vector<int32_t>{5, 4, 3, ReverseTask::kEos, -1});
    CHECK(ReverseTask::decode({5, 4, 3, ReverseTask::kEos, 7}) == "cba");
    CHECK(task.held_out().size() == 50);
    Rng rng(9);
    for (int i = 0; i < 2000; ++i) {
        const std::string s = task.sample(rng);
        REQUIRE(std::find(task.held_out().begin(), task.held_out().end(), s) == task.held_out().end());
    }
}
