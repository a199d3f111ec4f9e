#pragma once
// Runs a planned graph on a thread pool: all threads walk the nodes in order,
// each doing its share of every node, with a barrier between nodes. One wake-up
// per run; the barriers spin.
#include <cstddef>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/kernels/matmul.h"
#include "engine/runtime/thread_pool.h"

namespace kiln {

struct OpDef;

class Executor {
public:
    enum class Mode { Fast, Reference };

    // Plans the graph if needed. The graph must outlive the executor.
    Executor(Graph& graph, Mode mode = Mode::Fast);

    void run(ThreadPool& pool);

private:
    Graph& graph_;
    Mode mode_;
    const kernels::MatmulKernels* matmul_;
    std::vector<NodeId> steps_;          // computed nodes, in order
    std::vector<const OpDef*> defs_;     // their definitions, looked up once
    size_t scratch_floats_ = 0;          // per thread
    std::vector<std::vector<float>> scratch_;
};

}  // namespace kiln
