#include "engine/graph/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "engine/core/error.h"

namespace kiln {

namespace {

constexpr size_t kAlignment = 64;  // a cache line, and enough for any SIMD load

size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// Bytes a node of this shape needs, rows packed.
size_t bytes_of(DType type, const Shape& shape) { return row_bytes_of(type, shape.ne[0]) * static_cast<size_t>(shape.rows()); }

// Free blocks of the arena by offset, coalesced as they are returned.
class FreeList {
public:
    size_t allocate(size_t size) {
        // Best fit among free blocks; otherwise grow the arena.
        auto best = blocks_.end();
        for (auto it = blocks_.begin(); it != blocks_.end(); ++it)
            if (it->second >= size && (best == blocks_.end() || it->second < best->second)) best = it;
        if (best == blocks_.end()) {
            // A free block at the very end can be extended instead of wasted.
            if (!blocks_.empty()) {
                auto last = std::prev(blocks_.end());
                if (last->first + last->second == end_) {
                    const size_t offset = last->first;
                    end_ = offset + size;
                    blocks_.erase(last);
                    return offset;
                }
            }
            const size_t offset = end_;
            end_ += size;
            return offset;
        }
        const size_t offset = best->first;
        const size_t rest = best->second - size;
        blocks_.erase(best);
        if (rest > 0) blocks_.emplace(offset + size, rest);
        return offset;
    }

    void release(size_t offset, size_t size) {
        auto [it, inserted] = blocks_.emplace(offset, size);
        if (auto next = std::next(it); next != blocks_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            blocks_.erase(next);
        }
        if (it != blocks_.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                blocks_.erase(it);
            }
        }
    }

    size_t end() const { return end_; }

private:
    std::map<size_t, size_t> blocks_;
    size_t end_ = 0;
};

// Nodes whose result is their first source's memory, written in place (the KV cache).
bool aliases_first_source(OpKind op) { return op == OpKind::StoreKV; }

}  // namespace

Shape Shape::of(std::initializer_list<int64_t> dims) {
    if (dims.size() < 1 || dims.size() > 4) fail("graph", "a shape has 1 to 4 dimensions, got {}", dims.size());
    Shape s;
    s.rank = static_cast<int>(dims.size());
    size_t i = 0;
    for (int64_t d : dims) {
        if (d < 1) fail("graph", "shape dimension {} is {} (must be positive)", i, d);
        s.ne[i++] = d;
    }
    return s;
}

std::string Shape::str() const {
    return fmt::format("[{}]", fmt::join(ne.begin(), ne.begin() + rank, ", "));
}

size_t row_bytes_of(DType type, int64_t ne0) {
    const auto bytes = checked_bytes(type, static_cast<uint64_t>(ne0));
    if (!bytes)
        fail("graph", "a row of {} elements is not a whole number of {} blocks of {}", ne0, dtype_name(type),
             type_traits(type).block_size);
    return static_cast<size_t>(*bytes);
}

Node Graph::leaf(OpKind op, std::string name, DType type, Shape shape) {
    Node n;
    n.op = op;
    n.type = type;
    n.shape = shape;
    n.name = std::move(name);
    n.row_bytes = row_bytes_of(type, shape.ne[0]);
    n.bytes = bytes_of(type, shape);
    return n;
}

NodeId Graph::push(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Graph::input(std::string name, DType type, Shape shape) {
    Node n = leaf(OpKind::Input, std::move(name), type, shape);
    input_buffers_.push_back(std::make_unique<std::byte[]>(n.bytes + kAlignment));
    auto address = reinterpret_cast<uintptr_t>(input_buffers_.back().get());
    n.data = input_buffers_.back().get() + (kAlignment - address % kAlignment) % kAlignment;
    return push(std::move(n));
}

NodeId Graph::weight(std::string name, DType type, Shape shape, const void* data) {
    Node n = leaf(OpKind::Weight, std::move(name), type, shape);
    // Weights are never written: the executor only reads through this pointer.
    n.data = const_cast<std::byte*>(static_cast<const std::byte*>(data));
    return push(std::move(n));
}

NodeId Graph::state(std::string name, DType type, Shape shape, void* data) {
    Node n = leaf(OpKind::State, std::move(name), type, shape);
    n.data = static_cast<std::byte*>(data);
    return push(std::move(n));
}

NodeId Graph::add(OpKind op, DType type, Shape shape, std::initializer_list<NodeId> src, OpParams params) {
    if (planned_) fail("graph", "cannot add {} to a graph that is already planned", op_name(op));
    if (src.size() > kMaxSources) fail("graph", "{}: {} sources (at most {})", op_name(op), src.size(), kMaxSources);
    Node n = leaf(op, op_name(op), type, shape);
    size_t slot = 0;
    for (NodeId s : src) {
        if (s != kNoNode && (s < 0 || static_cast<size_t>(s) >= nodes_.size()))
            fail("graph", "{}: source node {} does not exist", op_name(op), s);
        n.src[slot++] = s;
    }
    n.params = params;
    return push(std::move(n));
}

size_t Graph::unplanned_bytes() const noexcept {
    size_t total = 0;
    for (const Node& n : nodes_)
        if (!n.is_leaf() && !aliases_first_source(n.op)) total += align_up(n.bytes);
    return total;
}

void Graph::plan() {
    constexpr size_t kForever = std::numeric_limits<size_t>::max();
    const size_t count = nodes_.size();
    // The owner of each node's memory: itself, or what it aliases.
    std::vector<size_t> owner(count);
    for (size_t i = 0; i < count; ++i)
        owner[i] = aliases_first_source(nodes_[i].op) ? owner[static_cast<size_t>(nodes_[i].src[0])] : i;
    std::vector<size_t> last_use(count, 0);
    for (size_t i = 0; i < count; ++i) {
        if (nodes_[i].output) last_use[owner[i]] = kForever;
        for (NodeId s : nodes_[i].src)
            if (s != kNoNode) {
                size_t& use = last_use[owner[static_cast<size_t>(s)]];
                if (use != kForever) use = std::max(use, i);
            }
    }
    std::vector<size_t> offset(count, 0);
    FreeList arena;
    for (size_t i = 0; i < count; ++i) {
        const Node& n = nodes_[i];
        if (n.is_leaf() || owner[i] != i) continue;
        offset[i] = arena.allocate(align_up(n.bytes));
        // A node's own result never shares memory with its sources: allocate first, then free them.
        for (NodeId s : n.src) {
            if (s == kNoNode) continue;
            const size_t o = owner[static_cast<size_t>(s)];
            if (!nodes_[o].is_leaf() && last_use[o] == i) {
                arena.release(offset[o], align_up(nodes_[o].bytes));
                last_use[o] = kForever - 1;  // released once, even if read twice by this node
            }
        }
        // A result nobody reads (and not an output) is dead right away.
        if (last_use[i] == 0 && !n.output) arena.release(offset[i], align_up(n.bytes));
    }
    arena_bytes_ = arena.end();
    auto* raw = static_cast<std::byte*>(::operator new[](std::max<size_t>(arena_bytes_, 1), std::align_val_t(kAlignment)));
    arena_ = std::unique_ptr<std::byte[], void (*)(std::byte*)>(
        raw, [](std::byte* p) { ::operator delete[](p, std::align_val_t(kAlignment)); });
    for (size_t i = 0; i < count; ++i) {
        Node& n = nodes_[i];
        if (n.is_leaf()) continue;
        n.data = owner[i] == i ? arena_.get() + offset[i] : nodes_[owner[i]].data;
    }
    planned_ = true;
}

const char* op_name(OpKind op) noexcept {
    switch (op) {
        case OpKind::Input: return "input";
        case OpKind::Weight: return "weight";
        case OpKind::State: return "state";
#define KILN_OP_NAME_CASE(kind, name, def) \
    case OpKind::kind: return name;
        KILN_OPS(KILN_OP_NAME_CASE)
#undef KILN_OP_NAME_CASE
        case OpKind::Count: break;
    }
    return "?";
}

}  // namespace kiln
