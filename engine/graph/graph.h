#pragma once
// The static computation graph. A model builds one Graph per input shape
// (number of tokens): ops append nodes, each shape-checked as it is made; plan()
// assigns every intermediate a place in one arena by lifetime; the Executor then
// runs the nodes in order, as many times as needed (decode steps reuse a graph).
//
// Tensors follow ggml's conventions: ne[0] is the fastest-varying dimension (a
// row), rows are contiguous, and a matrix with ne = {k, n} is n rows of k.
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/graph/op_list.h"
#include "engine/kernels/rope_spec.h"

namespace kiln {

using NodeId = int32_t;
inline constexpr NodeId kNoNode = -1;
inline constexpr size_t kMaxSources = 5;
using Sources = std::array<NodeId, kMaxSources>;

struct Shape {
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    int rank = 1;

    static Shape of(std::initializer_list<int64_t> dims);
    int64_t elements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t rows() const noexcept { return ne[1] * ne[2] * ne[3]; }
    bool operator==(const Shape& o) const noexcept { return ne == o.ne; }
    std::string str() const;  // "[64, 5]"
};

enum class OpKind : uint8_t {
    // leaves: data supplied from outside the arena
    Input,      // bound before each run (token ids, positions, masks)
    Weight,     // model weights (read-only, usually inside the file mapping)
    State,      // persistent mutable buffers, e.g. the KV cache
    // computations, one per line of op_list.h
#define KILN_OP_ENUMERATOR(kind, name, def) kind,
    KILN_OPS(KILN_OP_ENUMERATOR)
#undef KILN_OP_ENUMERATOR
    Count,
};
inline constexpr size_t kFirstComputedOp = static_cast<size_t>(OpKind::State) + 1;
inline constexpr size_t kComputedOpCount = static_cast<size_t>(OpKind::Count) - kFirstComputedOp;

struct NoParams {};
struct NormParams {
    float eps;
};
struct ScaleParams {
    float factor;
};
struct RowsParams {
    int64_t first;  // SliceRows: rows [first, first + count) of the source
};
struct RopeParams {
    kernels::RopeSpec spec;
    bool inverse = false;  // rotate by the negative angle (rope's backward)
};
struct CachedAttentionParams {
    int64_t n_heads, n_kv_heads, head_dim;
    float scale;
    float softcap = 0.0f;  // > 0: scores capped to softcap · tanh(s / softcap)
    int64_t window = 0;    // > 0: a query at row r sees rows (r - window, r] only
};
struct LossParams {
    int32_t ignore_index;  // targets equal to it do not count (padding); any negative value ignores nothing else
};
struct DropoutParams {
    float p;  // probability of dropping an element
    // Distinguishes the masks of dropout nodes that share a seed (the forward
    // node's index; its backward node reuses it).
    uint64_t salt = 0;
};
struct SequenceAttentionParams {
    int64_t n_heads, head_dim, batch;
    bool causal;
    float scale;
    // Attention-probability dropout (training only; 0 = none). The seed is an
    // I32[2] Input node (its own buffer, filled before each run), read by the
    // forward and the gradient node; the salt gives each attention node its
    // own masks under one seed.
    float dropout = 0.0f;
    NodeId dropout_seed = kNoNode;
    uint64_t dropout_salt = 0;
    int64_t n_kv_heads = 0;  // key/value heads: n_heads, or a divisor of it (grouped-query attention)
};
using OpParams = std::variant<NoParams, NormParams, ScaleParams, RowsParams, RopeParams, CachedAttentionParams, LossParams,
                              DropoutParams, SequenceAttentionParams>;

struct Node {
    OpKind op = OpKind::Input;
    DType type = DType::F32;
    Shape shape;
    Sources src{kNoNode, kNoNode, kNoNode, kNoNode, kNoNode};
    OpParams params;
    std::string name;
    bool output = false;     // kept alive to the end of the run: never overlapped
    std::byte* data = nullptr;
    size_t bytes = 0;        // size of the data
    size_t row_bytes = 0;    // bytes from one row to the next

    bool is_leaf() const noexcept { return op == OpKind::Input || op == OpKind::Weight || op == OpKind::State; }
    template <typename P>
    const P& param() const { return std::get<P>(params); }
    template <typename T = float>
    T* row(int64_t r) const noexcept {
        return reinterpret_cast<T*>(data + static_cast<size_t>(r) * row_bytes);
    }
};

class Graph {
public:
    Graph() = default;
    Graph(Graph&&) noexcept = default;
    Graph& operator=(Graph&&) noexcept = default;

    // Leaves. Inputs get their own buffer from the graph (fill it before run);
    // weights and states point at memory owned elsewhere.
    NodeId input(std::string name, DType type, Shape shape);
    NodeId weight(std::string name, DType type, Shape shape, const void* data);
    NodeId state(std::string name, DType type, Shape shape, void* data);

    // Appends a computed node; ops call this after checking shapes.
    // Unused source slots are kNoNode.
    NodeId add(OpKind op, DType type, Shape shape, std::initializer_list<NodeId> src, OpParams params = NoParams{});

    void mark_output(NodeId id) { nodes_.at(static_cast<size_t>(id)).output = true; }

    const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }
    Node& node(NodeId id) { return nodes_.at(static_cast<size_t>(id)); }
    const std::deque<Node>& nodes() const noexcept { return nodes_; }
    size_t size() const noexcept { return nodes_.size(); }

    // Places intermediates in one arena by lifetime: a buffer is reused only
    // once every node that reads it has run. Outputs and leaves are never reused.
    void plan();
    bool planned() const noexcept { return planned_; }
    size_t arena_bytes() const noexcept { return arena_bytes_; }
    // What the arena would need without reuse (for reporting the planner's gain).
    size_t unplanned_bytes() const noexcept;

private:
    static Node leaf(OpKind op, std::string name, DType type, Shape shape);
    NodeId push(Node node);

    // A deque, so that references to nodes stay valid while ops append more.
    std::deque<Node> nodes_;
    std::vector<std::unique_ptr<std::byte[]>> input_buffers_;
    std::unique_ptr<std::byte[], void (*)(std::byte*)> arena_{nullptr, [](std::byte*) {}};
    size_t arena_bytes_ = 0;
    bool planned_ = false;
};

// Bytes of one row of ne0 elements of `type`; throws when ne0 is not a whole number of blocks.
size_t row_bytes_of(DType type, int64_t ne0);

const char* op_name(OpKind op) noexcept;

}  // namespace kiln
