// kiln.h: contexts (a session's KV cache with sequence slots) and decoding.
#include <algorithm>
#include <vector>

#include "capi/boundary.h"
#include "capi/handles.h"

using namespace kiln::capi;

namespace {

std::unique_ptr<kiln::ThreadPool> new_pool(int32_t n_threads) {
    return std::make_unique<kiln::ThreadPool>(n_threads > 0 ? n_threads : kiln::ThreadPool::physical_cores(),
                                              kiln::LoadAdaptation::follow_free_cpus);
}

void check_slot(const kiln_context& ctx, int32_t slot) {
    if (slot < 0 || slot >= ctx.session->n_slots())
        reject(KILN_ERROR_INVALID_ARGUMENT, "slot {} is out of range (0..{})", slot, ctx.session->n_slots() - 1);
}

}  // namespace

extern "C" {

kiln_context_params kiln_context_default_params(void) {
    kiln_context_params p{};
    p.n_ctx = 0;
    p.n_slots = 1;
    p.n_threads = 0;
    p.cache_type = KILN_CACHE_F32;
    return p;
}

kiln_status kiln_context_new(const kiln_model* model, const kiln_context_params* params, kiln_context** out) {
    if (out != nullptr) *out = nullptr;
    return guard(__func__, [&] {
        const auto& loaded = require(model, "model").loaded;
        const kiln_context_params& p = require(params, "params");
        require(out, "out");
        if (p.n_ctx < 0) reject(KILN_ERROR_INVALID_ARGUMENT, "n_ctx is {} (0 means the model's)", p.n_ctx);
        if (p.n_slots < 1) reject(KILN_ERROR_INVALID_ARGUMENT, "n_slots is {} (at least 1)", p.n_slots);
        if (p.n_threads < 0) reject(KILN_ERROR_INVALID_ARGUMENT, "n_threads is {} (0 means physical cores)", p.n_threads);
        kiln::DType cache_type = kiln::DType::F32;
        if (p.cache_type == KILN_CACHE_F16) cache_type = kiln::DType::F16;
        else if (p.cache_type != KILN_CACHE_F32)
            reject(KILN_ERROR_INVALID_ARGUMENT, "cache_type {} is neither KILN_CACHE_F32 nor KILN_CACHE_F16",
                   static_cast<int>(p.cache_type));
        const int64_t n_ctx = p.n_ctx > 0 ? p.n_ctx : std::min<int64_t>(loaded->lm->info().n_ctx_train, 4096);
        auto ctx = std::make_unique<kiln_context>();
        ctx->loaded = loaded;
        ctx->session = loaded->lm->new_session(n_ctx, p.n_slots, kiln::Executor::Mode::Fast, cache_type);
        ctx->pool = new_pool(p.n_threads);
        *out = ctx.release();
    });
}

void kiln_context_free(kiln_context* ctx) { delete ctx; }

kiln_status kiln_decode(kiln_context* ctx, const kiln_token* tokens, const int32_t* slots, int32_t n) {
    return guard(__func__, [&] {
        kiln_context& c = require(ctx, "ctx");
        if (n < 1) reject(KILN_ERROR_INVALID_ARGUMENT, "n is {} (at least one token)", n);
        require(tokens, "tokens");
        const auto count = static_cast<size_t>(n);
        const int64_t n_vocab = c.loaded->lm->info().n_vocab;
        for (size_t i = 0; i < count; ++i)
            if (tokens[i] < 0 || tokens[i] >= n_vocab)
                reject(KILN_ERROR_INVALID_ARGUMENT, "token {} (id {}) is outside the vocabulary (0..{})", i,
                       tokens[i], n_vocab - 1);
        std::vector<int32_t> slot_of(count, 0);
        if (slots != nullptr) {
            for (size_t i = 0; i < count; ++i) check_slot(c, slots[i]);
            slot_of.assign(slots, slots + count);
        }
        // A failed decode leaves the previous rows as they were.
        const std::span<const float> logits = c.session->eval_slots({tokens, count}, slot_of, *c.pool);
        std::vector<float> rows(logits.begin(), logits.end());
        c.logits.swap(rows);
        c.rows = n;
    });
}

const float* kiln_logits(kiln_context* ctx, int32_t i) {
    const float* row = nullptr;
    guard(__func__, [&] {
        kiln_context& c = require(ctx, "ctx");
        if (i < 0 || i >= c.rows)
            reject(KILN_ERROR_INVALID_ARGUMENT, "there is no logits row {} (the last decode gave {})", i, c.rows);
        row = c.logits.data() + static_cast<size_t>(i) * static_cast<size_t>(c.loaded->lm->info().n_vocab);
    });
    return row;
}

int32_t kiln_slot_length(const kiln_context* ctx, int32_t slot) {
    if (ctx == nullptr || slot < 0 || slot >= ctx->session->n_slots()) return -1;
    return static_cast<int32_t>(ctx->session->n_past(slot));
}

kiln_status kiln_slot_truncate(kiln_context* ctx, int32_t slot, int32_t n_keep) {
    return guard(__func__, [&] {
        kiln_context& c = require(ctx, "ctx");
        check_slot(c, slot);
        if (n_keep < 0 || n_keep > c.session->n_past(slot))
            reject(KILN_ERROR_INVALID_ARGUMENT, "n_keep {} is outside 0..{}, the tokens slot {} holds", n_keep,
                   c.session->n_past(slot), slot);
        c.session->truncate(slot, n_keep);
    });
}

kiln_status kiln_slot_clear(kiln_context* ctx, int32_t slot) { return kiln_slot_truncate(ctx, slot, 0); }

kiln_status kiln_context_clear(kiln_context* ctx) {
    return guard(__func__, [&] { require(ctx, "ctx").session->reset(); });
}

int32_t kiln_context_n_ctx(const kiln_context* ctx) {
    return ctx == nullptr ? 0 : static_cast<int32_t>(ctx->session->n_ctx());
}

int32_t kiln_context_n_slots(const kiln_context* ctx) {
    return ctx == nullptr ? 0 : static_cast<int32_t>(ctx->session->n_slots());
}

kiln_status kiln_context_set_threads(kiln_context* ctx, int32_t n_threads) {
    return guard(__func__, [&] {
        kiln_context& c = require(ctx, "ctx");
        if (n_threads < 1) reject(KILN_ERROR_INVALID_ARGUMENT, "n_threads is {} (at least 1)", n_threads);
        c.pool = new_pool(n_threads);
    });
}

}  // extern "C"
