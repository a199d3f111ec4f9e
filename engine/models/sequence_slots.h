#pragma once
// Several sequences decoded side by side in one KV cache, for beam search and
// batched evaluation. Slot s owns cache rows [s * n_ctx, (s + 1) * n_ctx); a
// batch is any list of (token, slot) pairs, each token going to the next
// position of its slot. One graph then serves every mix of slots: a token's
// attention is bounded by its cache row (the attention op's causal limit) and
// a mask keeps it to its own slot's rows, so sequences never see each other.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/models/kv_cache_types.h"

namespace kiln {

// The per-token inputs a batch needs, filled by SequenceSlots::plan().
struct SlotBatch {
    std::vector<int32_t> positions;   // position within the token's sequence (embeddings, RoPE)
    std::vector<int32_t> cache_rows;  // where its key/value go; also its attention limit
    std::vector<int8_t> mask;         // [n_slots * n_ctx] per token: 1 = may attend (empty with one slot)
};

class SequenceSlots {
public:
    // n_layers caches of n_slots * n_ctx rows of kv_dim values, keys stored
    // as types.k and values as types.v (kv_cache_types.h).
    SequenceSlots(int64_t n_layers, int64_t kv_dim, int64_t n_slots, int64_t n_ctx, CacheTypes types = {});

    int64_t n_slots() const noexcept { return n_slots_; }
    int64_t n_ctx() const noexcept { return n_ctx_; }
    int64_t kv_dim() const noexcept { return kv_dim_; }
    int64_t cache_rows() const noexcept { return n_slots_ * n_ctx_; }
    int64_t n_past(int64_t slot) const { return n_past_.at(static_cast<size_t>(slot)); }

    CacheTypes cache_types() const noexcept { return types_; }
    // Bytes of the caches of all layers, keys and values.
    size_t cache_bytes() const noexcept;
    void* keys(int64_t layer) noexcept { return k_[static_cast<size_t>(layer)].data(); }
    void* values(int64_t layer) noexcept { return v_[static_cast<size_t>(layer)].data(); }

    // Positions, cache rows and mask for tokens appended to `slots` (one slot
    // per token, in order). Throws kiln::Error when a slot is out of range or
    // a sequence would outgrow the context. Does not advance anything: call
    // commit() once the batch has run.
    void plan(std::span<const int32_t> slots, SlotBatch& batch) const;
    void commit(std::span<const int32_t> slots);

    // Slot i takes over the sequence that was in slot parents[i] (beam search:
    // survivors and forks). A parent may repeat; slots from parents.size() on
    // are left empty.
    void reorder(std::span<const int32_t> parents);
    void clear() noexcept;
    void clear_slot(int64_t slot);
    // Keeps the first n_keep tokens of a slot's sequence and forgets the rest
    // (a chat turn or a server request that shares only a prefix with what is
    // cached). Rows past n_keep are rewritten before anything attends to them.
    void truncate(int64_t slot, int64_t n_keep);

    // What a slot's sequence holds in the caches, to be saved and put back
    // (kiln --prompt-cache): its rows of every layer, keys then values, in
    // the cache types, as bytes. n_layers() x n_past(slot) x row_bytes() of them.
    int64_t n_layers() const noexcept { return static_cast<int64_t>(k_.size()); }
    size_t row_bytes() const noexcept { return k_row_bytes_ + v_row_bytes_; }
    std::vector<std::byte> slot_rows(int64_t slot) const;
    // Makes the first n_keep of `n_saved` saved tokens (rows from slot_rows of
    // a cache of the same layers, width and types) slot's whole sequence.
    void restore_slot_rows(int64_t slot, std::span<const std::byte> rows, int64_t n_saved, int64_t n_keep);

private:
    int64_t kv_dim_, n_slots_, n_ctx_;
    CacheTypes types_;
    size_t k_row_bytes_, v_row_bytes_;
    std::vector<std::vector<std::byte>> k_, v_;
    std::vector<int64_t> n_past_;
    std::vector<std::byte> scratch_;  // every slot's used rows, for reorder
};

}  // namespace kiln
