#pragma once
// What generation needs from a decoder-only model, whatever its architecture:
// a session holding one or more sequences (slots) in its KV cache, evaluated
// in batches that may mix slots (beam search advances K hypotheses in one step).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/graph/executor.h"
#include "engine/models/kv_cache_types.h"
#include "engine/models/weight_placement.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

class ThreadPool;

struct ModelInfo {
    std::string architecture;  // general.architecture
    int64_t n_vocab = 0;
    int64_t n_ctx_train = 0;   // the longest context the model was built for
    uint64_t parameters = 0;
    uint64_t weight_bytes = 0; // what one decode step reads
};

class CausalSession {
public:
    virtual ~CausalSession() = default;

    // Appends tokens to slot 0; returns the last token's logits ([n_vocab]) or,
    // with all_logits, every token's ([n, n_vocab]).
    virtual std::span<const float> eval(std::span<const int32_t> tokens, ThreadPool& pool, bool all_logits = false) = 0;
    // eval() of the tokens in consecutive pieces of at most `piece` tokens
    // (the tools' -b/-ub): the same tokens appended, with the activations of
    // one piece at a time in memory. Returns the last token's logits (none
    // for no tokens).
    std::span<const float> eval_in_pieces(std::span<const int32_t> tokens, int64_t piece, ThreadPool& pool) {
        const auto step = static_cast<size_t>(piece > 0 ? piece : 1);
        std::span<const float> logits;
        for (size_t at = 0; at < tokens.size(); at += step)
            logits = eval(tokens.subspan(at, std::min(step, tokens.size() - at)), pool);
        return logits;
    }
    // Appends tokens[i] to slot slots[i]; returns every token's logits ([n, n_vocab]).
    virtual std::span<const float> eval_slots(std::span<const int32_t> tokens, std::span<const int32_t> slots,
                                              ThreadPool& pool) = 0;
    // Slot i continues the sequence of slot parents[i] (see SequenceSlots::reorder).
    virtual void reorder(std::span<const int32_t> parents) = 0;
    // Keeps the first n_keep tokens of slot's sequence; the next token appended
    // goes to position n_keep (see SequenceSlots::truncate).
    virtual void truncate(int64_t slot, int64_t n_keep) = 0;
    virtual int64_t n_past(int64_t slot = 0) const = 0;
    virtual int64_t n_ctx() const noexcept = 0;
    virtual int64_t n_slots() const noexcept = 0;
    virtual void reset() = 0;

    // The KV cache of one slot, saved and put back (kiln --prompt-cache). A
    // saved state fits a session whose cache_shape() is the same.
    struct CacheShape {
        int64_t n_layers = 0, kv_dim = 0;
        CacheTypes types;
        size_t row_bytes = 0;  // per token and layer, keys and values
    };
    virtual CacheShape cache_shape() const = 0;
    // The slot's cached rows (n_past(slot) tokens; layout: SequenceSlots::slot_rows).
    virtual std::vector<std::byte> save_slot(int64_t slot) const = 0;
    // Makes the first n_keep of n_saved saved tokens the slot's sequence.
    virtual void restore_slot(int64_t slot, std::span<const std::byte> rows, int64_t n_saved, int64_t n_keep) = 0;
};

class CausalLm {
public:
    virtual ~CausalLm() = default;
    virtual const ModelInfo& info() const noexcept = 0;
    // Where the weights were placed: mapped, copied, locked (weight_placement.h).
    virtual const WeightResidence& weight_residence() const noexcept = 0;
    // n_ctx positions for each of n_slots sequences, keys and values cached
    // as cache_types.k and .v (kv_cache_types.h; F32 unless asked, the exact
    // choice; the tools default to F16 as llama.cpp does). Throws kiln::Error
    // when a type cannot hold this model's heads.
    virtual std::unique_ptr<CausalSession> new_session(int64_t n_ctx, int64_t n_slots = 1,
                                                       Executor::Mode mode = Executor::Mode::Fast,
                                                       CacheTypes cache_types = {}) const = 0;
};

}  // namespace kiln
