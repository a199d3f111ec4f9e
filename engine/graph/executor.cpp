#include "engine/graph/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "engine/graph/op_profile.h"
#include "engine/ops/op_def.h"

namespace kiln {

namespace {

using Range = std::pair<uintptr_t, uintptr_t>;  // [begin, end) of bytes

Range range_of(const Node& n) noexcept {
    const auto begin = reinterpret_cast<uintptr_t>(n.data);
    return {begin, begin + n.bytes};
}

bool overlaps(const Range& r, const std::vector<Range>& set) noexcept {
    if (r.first == r.second) return false;
    for (const Range& s : set)
        if (r.first < s.second && s.first < r.second) return true;
    return false;
}

// A step's row in KILN_PROFILE's table: the op, and for products the weight
// without its layer prefix ("MatMul ffn_up.weight"), so layers add up.
std::string profile_label(const Graph& g, const Node& n) {
    std::string label = op_name(n.op);
    if (n.op == OpKind::MatMul) {
        std::string weight = g.node(n.src[0]).name;
        if (weight.starts_with("blk.")) {
            const size_t dot = weight.find('.', 4);
            if (dot != std::string::npos) weight = weight.substr(dot + 1);
        }
        label += " " + weight + (n.shape.rows() < kernels::kGemmMinTokens ? " (decode)" : "");
    }
    return label;
}

double seconds_since(std::chrono::steady_clock::time_point& mark) {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - mark).count();
    mark = now;
    return s;
}

}  // namespace

Executor::Executor(Graph& graph, Mode mode)
    : graph_(graph),
      mode_(mode),
      matmul_(mode == Mode::Fast ? &kernels::active_matmul_kernels() : &kernels::scalar_matmul_kernels()) {
    if (!graph_.planned()) graph_.plan();
    for (size_t i = 0; i < graph_.size(); ++i) {
        const Node& n = graph_.nodes()[i];
        if (n.is_leaf()) continue;
        const OpDef& def = op_def(n.op);
        steps_.push_back(static_cast<NodeId>(i));
        defs_.push_back(&def);
        if (def.scratch_floats != nullptr) scratch_floats_ = std::max(scratch_floats_, def.scratch_floats(graph_, n));
        if (mode_ == Mode::Fast && def.shared_scratch_doubles != nullptr)
            shared_.resize(std::max(shared_.size(), def.shared_scratch_doubles(graph_, n)));
    }

    // Memory read and written since the last barrier, in bytes ranges.
    std::vector<Range> reads, writes;
    bool after_unknown = false;
    for (size_t s = 0; s < steps_.size(); ++s) {
        const Node& n = graph_.node(steps_[s]);
        // Ops whose effects are unchecked keep a barrier on each side.
        const bool known = defs_[s]->effects == MemoryEffects::OwnData;
        bool barrier = !known || after_unknown;
        const Range written = range_of(n);
        if (!barrier) barrier = overlaps(written, reads) || overlaps(written, writes);
        for (NodeId src : n.src)
            if (!barrier && src != kNoNode) barrier = overlaps(range_of(graph_.node(src)), writes);
        if (barrier) {
            reads.clear();
            writes.clear();
        }
        barrier_before_.push_back(barrier);
        writes.push_back(written);
        for (NodeId src : n.src)
            if (src != kNoNode) reads.push_back(range_of(graph_.node(src)));
        after_unknown = !known;
    }
    if (!barrier_before_.empty()) barrier_before_.front() = false;  // nothing ran before the first step

    for (const OpDef* def : defs_) claiming_.push_back(mode_ == Mode::Fast && def->claiming_forward != nullptr);
    next_chunk_ = std::make_unique<std::atomic<int64_t>[]>(steps_.size());
    if (op_profile::enabled())
        for (NodeId id : steps_) profile_rows_.push_back(op_profile::row_of(profile_label(graph_, graph_.node(id))));
}

size_t Executor::barrier_count() const noexcept {
    return static_cast<size_t>(std::count(barrier_before_.begin(), barrier_before_.end(), true));
}

size_t Executor::step_of(NodeId id) const noexcept {
    const auto at = std::find(steps_.begin(), steps_.end(), id);
    return at == steps_.end() ? npos : static_cast<size_t>(at - steps_.begin());
}

void Executor::run(ThreadPool& pool, const RunHooks* hooks) {
    if (scratch_.size() < static_cast<size_t>(pool.size()))
        scratch_.resize(static_cast<size_t>(pool.size()), std::vector<float>(scratch_floats_));
    // Ops that claim their work in chunks (OpDef::claiming_forward): chunk
    // c < nth goes to thread c unasked; the counters hand out the rest.
    // Reset before the run starts (pool.run publishes them to the workers).
    for (size_t s = 0; s < steps_.size(); ++s) next_chunk_[s].store(pool.active(), std::memory_order_relaxed);
    pool.run([&](int ith, int nth) {
        ExecContext ctx;
        ctx.ith = ith;
        ctx.nth = nth;
        ctx.scratch = scratch_[static_cast<size_t>(ith)].data();
        ctx.matmul = matmul_;
        ctx.shared = shared_.empty() ? nullptr : shared_.data();
        ctx.pool = &pool;
        const bool profiling = !profile_rows_.empty();
        auto mark = std::chrono::steady_clock::now();
        // The end of pool.run() is the barrier after the last step.
        size_t next_hook = 0;
        for (size_t s = 0; s < steps_.size(); ++s) {
            if (profiling && s > 0) op_profile::add_compute(ith, profile_rows_[s - 1], seconds_since(mark));
            if (barrier_before_[s]) {
                pool.barrier();
                if (profiling) op_profile::add_wait(ith, seconds_since(mark));
            }
            const Node& n = graph_.node(steps_[s]);
            if (claiming_[s] && nth > 1) defs_[s]->claiming_forward(graph_, n, ctx, next_chunk_[s]);
            else (mode_ == Mode::Fast ? defs_[s]->forward : defs_[s]->reference)(graph_, n, ctx);
            // A hook after this step: once every thread is past it, thread 0 calls it.
            for (; hooks != nullptr && next_hook < hooks->after.size() && hooks->after[next_hook] == s; ++next_hook) {
                pool.barrier();
                if (ith == 0) hooks->call(next_hook);
            }
        }
        if (profiling && !steps_.empty()) op_profile::add_compute(ith, profile_rows_.back(), seconds_since(mark));
    });
}

}  // namespace kiln
