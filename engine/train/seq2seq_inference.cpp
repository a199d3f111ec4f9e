#include "engine/train/seq2seq_inference.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <numeric>
#include <span>
#include <string>

#include "engine/core/error.h"
#include "engine/runtime/beam_search.h"

namespace kiln::train {

namespace {
constexpr std::align_val_t kAlignment{64};
}

void InferenceDecoder::AlignedDelete::operator()(std::byte* p) const noexcept { ::operator delete[](p, kAlignment); }

InferenceDecoder::InferenceDecoder(std::vector<std::byte> gguf, int32_t max_beams) : max_beams_(max_beams) {
    if (max_beams < 1) fail("decode", "{} beams: at least one is needed", max_beams);
    bytes_.reset(static_cast<std::byte*>(::operator new[](std::max<size_t>(gguf.size(), 1), kAlignment)));
    std::memcpy(bytes_.get(), gguf.data(), gguf.size());
    const std::span<const std::byte> bytes(bytes_.get(), gguf.size());
    file_ = std::make_shared<const GgufFile>(GgufFile::parse(bytes, "the trained model"));
    model_ = std::make_unique<TransformerModel>(file_);
    const int64_t n_ctx = model_->config().n_ctx;
    session_ = std::make_unique<TransformerSession>(*model_, 1, n_ctx, max_beams, n_ctx);
}

std::vector<int32_t> InferenceDecoder::decode(const std::vector<int32_t>& source, int32_t beams, ThreadPool& pool) {
    const TransformerConfig& c = model_->config();
    if (beams < 1 || beams > max_beams_) fail("decode", "{} beams is outside 1..{}", beams, max_beams_);
    if (source.empty() || static_cast<int64_t>(source.size()) > c.n_ctx)
        fail("decode", "a source of {} tokens does not fit the context of {}", source.size(), c.n_ctx);
    const std::vector<std::vector<int32_t>> sources{source};
    session_->encode(sources, pool);
    const int32_t bos = c.bos, first_slot = 0;
    const std::span<const float> first = session_->decode(std::span(&bos, 1), std::span(&first_slot, 1), pool);
    BeamParams params;
    params.beams = beams;
    params.length_penalty = 1.0;
    params.max_tokens = c.n_ctx;
    params.eos = c.eos;
    std::vector<int32_t> slots;
    const std::vector<Hypothesis> found = beam_search(first, c.n_vocab, params, [&](auto parents, auto next) {
        session_->reorder(parents);
        slots.resize(next.size());
        std::iota(slots.begin(), slots.end(), 0);
        return session_->decode(next, slots, pool);
    });
    if (found.empty()) return {};
    std::vector<int32_t> best = found.front().tokens;
    if (found.front().ended_by_eos) best.pop_back();
    return best;
}

}  // namespace kiln::train
