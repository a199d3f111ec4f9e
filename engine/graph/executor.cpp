#include "engine/graph/executor.h"

#include <algorithm>

#include "engine/ops/op_def.h"

namespace kiln {

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
    }
}

void Executor::run(ThreadPool& pool) {
    if (scratch_.size() < static_cast<size_t>(pool.size()))
        scratch_.resize(static_cast<size_t>(pool.size()), std::vector<float>(scratch_floats_));
    pool.run([&](int ith, int nth) {
        ExecContext ctx;
        ctx.ith = ith;
        ctx.nth = nth;
        ctx.scratch = scratch_[static_cast<size_t>(ith)].data();
        ctx.matmul = matmul_;
        for (size_t s = 0; s < steps_.size(); ++s) {
            const Node& n = graph_.node(steps_[s]);
            (mode_ == Mode::Fast ? defs_[s]->forward : defs_[s]->reference)(graph_, n, ctx);
            pool.barrier();
        }
    });
}

}  // namespace kiln
