#pragma once
// Data-parallel training's sum of gradients over the ranks, overlapped with
// backward as PyTorch's DDP does it: the model's tensors are grouped into
// buckets in the order backward computes their gradients, and each bucket's
// sum (MPI_Iallreduce, fp32) starts as soon as its last gradient is computed,
// while the rest of backward runs (Executor's RunHooks). The wait left after
// backward is what the overlap did not hide; stats() has the figures.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/distributed/collective.h"
#include "engine/graph/executor.h"
#include "engine/runtime/thread_pool.h"
#include "engine/train/param_model.h"
#include "engine/train/train_graph.h"

namespace kiln::train {

class GradientSync {
public:
    // bucket_floats: the size a bucket grows to before it is closed.
    GradientSync(const ParamModel& model, const TrainGraph& g, const Executor& exec, Collective& ranks,
                 size_t bucket_floats = size_t{1} << 18);

    // Runs g (the step's last micro-batch) and leaves in `grads` (flat, like
    // the model) the sum over the ranks of: grads (unless first) plus weight
    // times this run's gradients.
    void run(TrainGraph& g, Executor& exec, ThreadPool& pool, std::vector<float>& grads, bool first, float weight);

    const TrainGraph* graph() const noexcept { return graph_; }

    struct Stats {
        int64_t steps = 0;
        int64_t buckets = 0;        // per step
        uint64_t bytes = 0;         // summed per step (each rank's share of the traffic is about twice this)
        double wait_seconds = 0;    // after backward, waiting for the sums (all steps)
        double run_seconds = 0;     // the runs themselves (all steps)
    };
    const Stats& stats() const noexcept { return stats_; }

private:
    struct Bucket {
        std::vector<size_t> tensors;  // model tensor indices
        std::vector<float> values;    // their gradients, one after another
    };
    // b.values = (grads unless first) + weight x this run's gradients, for b's tensors.
    void fill(Bucket& b, TrainGraph& g, const std::vector<float>& grads, bool first, float weight);

    const ParamModel& model_;
    const TrainGraph* graph_;
    Collective& ranks_;
    std::vector<Bucket> buckets_;  // in the order backward completes them
    Bucket late_;                  // gradients no step computes: summed after the run
    RunHooks hooks_;
    Stats stats_;
};

}  // namespace kiln::train
