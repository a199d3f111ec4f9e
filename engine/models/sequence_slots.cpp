#include "engine/models/sequence_slots.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/core/error.h"

namespace kiln {

SequenceSlots::SequenceSlots(int64_t n_layers, int64_t kv_dim, int64_t n_slots, int64_t n_ctx, CacheTypes types)
    : kv_dim_(kv_dim), n_slots_(n_slots), n_ctx_(n_ctx), types_(types) {
    if (n_slots < 1 || n_ctx < 1) fail("model", "a context needs at least one slot and one position");
    check_cache_types(types, 0);
    k_row_bytes_ = cache_row_bytes(types.k, kv_dim);
    v_row_bytes_ = cache_row_bytes(types.v, kv_dim);
    const auto rows = static_cast<size_t>(n_slots * n_ctx);
    k_.assign(static_cast<size_t>(n_layers), std::vector<std::byte>(k_row_bytes_ * rows));
    v_.assign(static_cast<size_t>(n_layers), std::vector<std::byte>(v_row_bytes_ * rows));
    n_past_.assign(static_cast<size_t>(n_slots), 0);
}

size_t SequenceSlots::cache_bytes() const noexcept {
    return (k_row_bytes_ + v_row_bytes_) * static_cast<size_t>(cache_rows()) * k_.size();
}

void SequenceSlots::plan(std::span<const int32_t> slots, SlotBatch& batch) const {
    const size_t n = slots.size();
    batch.positions.resize(n);
    batch.cache_rows.resize(n);
    std::vector<int64_t> count(n_past_.size(), 0);
    for (int32_t s : slots) {
        if (s < 0 || s >= n_slots_) fail("model", "sequence slot {} is out of range (0..{})", s, n_slots_ - 1);
        ++count[static_cast<size_t>(s)];
    }
    for (size_t s = 0; s < count.size(); ++s)
        if (n_past_[s] + count[s] > n_ctx_)
            fail("model", "{} more tokens do not fit the context{}: {} of {} positions are used (raise -c)", count[s],
                 n_slots_ > 1 ? fmt::format(" of sequence {}", s) : std::string(), n_past_[s], n_ctx_);
    std::vector<int64_t> next(n_past_);
    for (size_t i = 0; i < n; ++i) {
        const int32_t s = slots[i];
        const int64_t pos = next[static_cast<size_t>(s)]++;
        batch.positions[i] = static_cast<int32_t>(pos);
        batch.cache_rows[i] = static_cast<int32_t>(s * n_ctx_ + pos);
    }
    if (n_slots_ == 1) {
        batch.mask.clear();  // one sequence: the causal limit alone is the mask
        return;
    }
    const size_t rows = static_cast<size_t>(n_slots_ * n_ctx_);
    batch.mask.assign(rows * n, 0);
    for (size_t i = 0; i < n; ++i) {
        const size_t first = static_cast<size_t>(slots[i]) * static_cast<size_t>(n_ctx_);
        std::fill_n(batch.mask.begin() + static_cast<std::ptrdiff_t>(i * rows + first), batch.positions[i] + 1, int8_t{1});
    }
}

void SequenceSlots::commit(std::span<const int32_t> slots) {
    for (int32_t s : slots) ++n_past_.at(static_cast<size_t>(s));
}

void SequenceSlots::reorder(std::span<const int32_t> parents) {
    if (static_cast<int64_t>(parents.size()) > n_slots_)
        fail("model", "reorder got {} parents for {} slots", parents.size(), n_slots_);
    for (int32_t p : parents)
        if (p < 0 || p >= n_slots_) fail("model", "parent slot {} is out of range (0..{})", p, n_slots_ - 1);
    std::vector<int64_t> new_past(static_cast<size_t>(n_slots_), 0);  // slots without a parent end up empty
    for (size_t i = 0; i < parents.size(); ++i) new_past[i] = n_past_[static_cast<size_t>(parents[i])];
    for (auto [caches, row_bytes] : {std::pair{&k_, k_row_bytes_}, std::pair{&v_, v_row_bytes_}}) {
        const size_t slot_bytes = static_cast<size_t>(n_ctx_) * row_bytes;
        scratch_.resize(slot_bytes * static_cast<size_t>(n_slots_));
        for (std::vector<std::byte>& cache : *caches) {
            // Copy every slot's used rows aside first: a slot may be both a parent and overwritten.
            for (int64_t s = 0; s < n_slots_; ++s)
                std::memcpy(scratch_.data() + static_cast<size_t>(s) * slot_bytes,
                            cache.data() + static_cast<size_t>(s) * slot_bytes,
                            static_cast<size_t>(n_past_[static_cast<size_t>(s)]) * row_bytes);
            for (size_t i = 0; i < parents.size(); ++i)
                std::memcpy(cache.data() + i * slot_bytes, scratch_.data() + static_cast<size_t>(parents[i]) * slot_bytes,
                            static_cast<size_t>(new_past[i]) * row_bytes);
        }
    }
    n_past_ = std::move(new_past);
}

void SequenceSlots::clear() noexcept { std::fill(n_past_.begin(), n_past_.end(), 0); }

void SequenceSlots::clear_slot(int64_t slot) { n_past_.at(static_cast<size_t>(slot)) = 0; }

std::vector<std::byte> SequenceSlots::slot_rows(int64_t slot) const {
    if (slot < 0 || slot >= n_slots_) fail("model", "sequence slot {} is out of range (0..{})", slot, n_slots_ - 1);
    const auto n = static_cast<size_t>(n_past_[static_cast<size_t>(slot)]);
    const auto first = static_cast<size_t>(slot * n_ctx_);
    std::vector<std::byte> rows;
    rows.reserve(k_.size() * n * row_bytes());
    for (size_t layer = 0; layer < k_.size(); ++layer) {
        const std::byte* k = k_[layer].data() + first * k_row_bytes_;
        const std::byte* v = v_[layer].data() + first * v_row_bytes_;
        rows.insert(rows.end(), k, k + n * k_row_bytes_);
        rows.insert(rows.end(), v, v + n * v_row_bytes_);
    }
    return rows;
}

void SequenceSlots::restore_slot_rows(int64_t slot, std::span<const std::byte> rows, int64_t n_saved, int64_t n_keep) {
    if (slot < 0 || slot >= n_slots_) fail("model", "sequence slot {} is out of range (0..{})", slot, n_slots_ - 1);
    if (n_saved < 0 || n_keep < 0 || n_keep > n_saved || n_saved > n_ctx_ ||
        rows.size() != k_.size() * static_cast<size_t>(n_saved) * row_bytes())
        fail("model", "saved cache rows do not fit: {} bytes for {} tokens ({} to keep) in a context of {}", rows.size(),
             n_saved, n_keep, n_ctx_);
    const auto saved = static_cast<size_t>(n_saved), keep = static_cast<size_t>(n_keep);
    const auto first = static_cast<size_t>(slot * n_ctx_);
    const std::byte* at = rows.data();
    for (size_t layer = 0; layer < k_.size(); ++layer) {
        std::memcpy(k_[layer].data() + first * k_row_bytes_, at, keep * k_row_bytes_);
        at += saved * k_row_bytes_;
        std::memcpy(v_[layer].data() + first * v_row_bytes_, at, keep * v_row_bytes_);
        at += saved * v_row_bytes_;
    }
    n_past_[static_cast<size_t>(slot)] = n_keep;
}

void SequenceSlots::truncate(int64_t slot, int64_t n_keep) {
    if (slot < 0 || slot >= n_slots_) fail("model", "sequence slot {} is out of range (0..{})", slot, n_slots_ - 1);
    if (n_keep < 0) fail("model", "cannot keep {} tokens of a sequence", n_keep);
    int64_t& past = n_past_[static_cast<size_t>(slot)];
    past = std::min(past, n_keep);
}

}  // namespace kiln
