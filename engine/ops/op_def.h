#pragma once
// How the executor runs an op: a fast forward, the plain reference forward it
// is tested against, and the per-thread scratch it needs. Each op file defines
// its OpDef beside its builder function; registry.cpp lists them in one table.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <utility>

#include "engine/core/error.h"

#include "engine/graph/graph.h"
#include "engine/kernels/matmul.h"
#include "engine/runtime/thread_pool.h"  // split_range: each thread's share of rows

namespace kiln {

struct ExecContext {
    int ith = 0;                               // this thread
    int nth = 1;                               // threads in the run
    float* scratch = nullptr;                  // this thread's scratch
    const kernels::MatmulKernels* matmul = nullptr;
    // Scratch shared by every thread of the run (OpDef::shared_scratch_doubles),
    // and the pool: an op whose work has a shared phase (threads write
    // partial results, then read each other's) waits at pool->barrier()
    // between the phases, every thread the same number of times.
    double* shared = nullptr;
    ThreadPool* pool = nullptr;
};

using ForwardFn = void (*)(const Graph& g, const Node& node, const ExecContext& ctx);
using ClaimingForwardFn = void (*)(const Graph& g, const Node& node, const ExecContext& ctx,
                                   std::atomic<int64_t>& next);

// Which sources of a node need a gradient (by source slot).
using SourceMask = std::array<bool, kMaxSources>;
// The backward rule of an op: appends to g the nodes that compute, from `grad`
// (the gradient of the node's output, shaped like it), the gradient of every
// source slot marked in `wanted`, and returns them by slot (kNoNode for slots
// not wanted or not differentiable, such as token ids). Rules are written in
// graph ops, so the backward pass runs on the same executor as the forward.
using BackwardFn = Sources (*)(Graph& g, NodeId node, NodeId grad, const SourceMask& wanted);

// What memory an op touches, for the executor's barrier plan (executor.h).
// Every OpDef states it (the field has no default, and the enumerators start
// at 1 so that a forgotten one is no value; test_op_registry checks).
enum class MemoryEffects : uint8_t {
    // Writes only its own node's data (StoreKV's data is the cache it updates)
    // and reads only its sources' data: the executor leaves out the barriers
    // around it wherever those bytes do not overlap its neighbours'.
    OwnData = 1,
    // Reads memory other than its sources' (SequenceAttentionGrad reads the
    // dropout seed named in its parameters, not among its sources), or its
    // effects have not been checked yet: a barrier on each side.
    Unchecked = 2,
};

struct OpDef {
    OpKind kind;
    MemoryEffects effects;
    ForwardFn forward;
    ForwardFn reference;
    size_t (*scratch_floats)(const Graph& g, const Node& node) = nullptr;
    BackwardFn backward = nullptr;  // null: the op cannot be differentiated
    // A fast forward that hands its work out in chunks claimed at run time
    // instead of one fixed share per thread (matmul, see matmul.cpp). `next`
    // is this step's counter of claimed chunks; the executor sets it to the
    // number of threads before each run. Used with more than one thread; null:
    // the op splits its work statically in `forward`.
    ClaimingForwardFn claiming_forward = nullptr;
    // Doubles of ExecContext::shared the fast forward may use (null: none).
    size_t (*shared_scratch_doubles)(const Graph& g, const Node& node) = nullptr;
};

const OpDef& op_def(OpKind kind);

namespace ops::detail {

// Throws "[graph] <op>: <message>" for shape errors.
template <typename... Args>
[[noreturn]] void shape_error(OpKind op, fmt::format_string<Args...> format, Args&&... args) {
    fail("graph", "{}: {}", op_name(op), fmt::format(format, std::forward<Args>(args)...));
}

inline void require_type(OpKind op, const Node& n, DType type, const char* role) {
    if (n.type != type)
        shape_error(op, "{} must be {}, got {} ({})", role, dtype_name(type), dtype_name(n.type), n.shape.str());
}

// Sources with no gradient.
inline Sources no_gradients() { return {kNoNode, kNoNode, kNoNode, kNoNode, kNoNode}; }

}  // namespace ops::detail

}  // namespace kiln
