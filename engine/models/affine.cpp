#include "engine/models/affine.h"

#include <cmath>

#include "engine/ops/ops.h"

namespace kiln {

NodeId linear(Graph& g, const arch::Affine<NodeId>& a, NodeId x) {
    const NodeId y = ops::matmul(g, a.weight, x);
    return a.bias == kNoNode ? y : ops::add(g, y, a.bias);
}

NodeId layer_norm(Graph& g, const arch::Affine<NodeId>& a, NodeId x, float eps) {
    return ops::layer_norm(g, x, a.weight, a.bias, eps);
}

std::vector<float> sinusoidal_positions(int64_t dim, int64_t n_ctx) {
    std::vector<float> table(static_cast<size_t>(dim * n_ctx));
    for (int64_t pos = 0; pos < n_ctx; ++pos)
        for (int64_t i = 0; i < dim; ++i) {
            const double angle =
                static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(i - i % 2) / static_cast<double>(dim));
            table[static_cast<size_t>(pos * dim + i)] = static_cast<float>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    return table;
}

}  // namespace kiln
