#include "engine/models/block_context.h"

#include "engine/core/error.h"
#include "engine/ops/ops.h"

namespace kiln {

NodeId Dropout::apply(Graph& g, NodeId x) const { return p > 0.0f ? ops::dropout(g, x, seed, p) : x; }

NodeId BatchKeyValues::attend(Graph& g, int64_t, NodeId q, NodeId k, NodeId v, const HeadLayout& heads) {
    if (heads.scale != 0.0f || heads.softcap != 0.0f || heads.window != 0)
        fail("graph", "sequence attention: a custom score scale, soft-capping and sliding windows are not implemented "
             "(inference sessions have them; training does not)");
    return ops::sequence_attention(g, q, k, v, key_mask_, heads.n_heads, heads.n_kv_heads, heads.head_dim, batch_, causal_,
                                   dropout_, seed_);
}

}  // namespace kiln
