#pragma once
// Runs a planned graph on a thread pool: all threads walk the nodes in order,
// each doing its share of every node. One wake-up per run; the barriers spin.
//
// A barrier separates two nodes only when the second depends on the first
// through memory: it reads bytes written since the last barrier, or writes
// bytes read or written since then (the planner reuses buffers, so a later
// node may overwrite what an earlier one still reads). Independent neighbours,
// such as the Q, K and V products of one normalized input, or the gate and up
// products, run back to back without one: a decode step waits at about a
// quarter fewer barriers. Each op's OpDef states its memory effects: only ops
// that write exactly their own data and read only their sources' are elided
// around; an op with unchecked effects gets a barrier on both sides.
//
// Ops with a claiming forward (matrix products) split their work into chunks
// that threads claim as they go (see ops/matmul.cpp), so a thread slowed down
// by the machine does not hold the other at the next barrier.
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/kernels/matmul.h"
#include "engine/runtime/thread_pool.h"

namespace kiln {

struct OpDef;

// Calls a run makes on the pool's thread 0 (the caller's) while it goes on:
// call(k) once step after[k] and every step before it have finished on all
// threads; the other threads go on with the next steps meanwhile. The call
// may read what those steps wrote, never write what later steps read.
// (Data-parallel training starts summing gradients there while the rest of
// backward runs: engine/train/gradient_sync.h.)
struct RunHooks {
    std::vector<size_t> after;  // step indices, ascending
    std::function<void(size_t k)> call;
};

class Executor {
public:
    enum class Mode { Fast, Reference };

    // Plans the graph if needed. The graph must outlive the executor.
    Executor(Graph& graph, Mode mode = Mode::Fast);

    void run(ThreadPool& pool, const RunHooks* hooks = nullptr);

    // The step that computes node `id` (its place among the computed nodes,
    // in run order), or npos when no step does.
    static constexpr size_t npos = static_cast<size_t>(-1);
    size_t step_of(NodeId id) const noexcept;

    // Barriers one run waits at (for tests and reports).
    size_t barrier_count() const noexcept;

private:
    Graph& graph_;
    Mode mode_;
    const kernels::MatmulKernels* matmul_;
    std::vector<NodeId> steps_;          // computed nodes, in order
    std::vector<const OpDef*> defs_;     // their definitions, looked up once
    std::vector<bool> barrier_before_;   // per step: wait for all threads first
    std::vector<bool> claiming_;         // per step: work handed out in claimed chunks
    std::unique_ptr<std::atomic<int64_t>[]> next_chunk_;  // per step: the next unclaimed chunk
    size_t scratch_floats_ = 0;          // per thread
    std::vector<std::vector<float>> scratch_;
    std::vector<double> shared_;         // ExecContext::shared, for the ops that ask (fast mode)
    std::vector<int> profile_rows_;      // per step, when KILN_PROFILE is set
};

}  // namespace kiln
