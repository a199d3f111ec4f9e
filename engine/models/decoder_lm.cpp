#include "engine/models/decoder_lm.h"

#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/kernels/matmul.h"
#include "engine/models/model_tensors.h"
#include "engine/models/slot_decoder.h"
#include "engine/ops/ops.h"

namespace kiln {

namespace {

class DecoderSession final : public SlotDecoderSession {
public:
    DecoderSession(const DecoderArch& arch, const WeightLeaves& leaves, int64_t n_ctx, int64_t n_slots,
                   Executor::Mode mode, CacheTypes cache_types)
        : SlotDecoderSession(arch.shape().n_vocab, arch.shape().n_layers, arch.shape().kv_dim, n_ctx, n_slots, mode,
                             cache_types),
          arch_(arch),
          leaves_(leaves) {}

private:
    // Keys and values go into this session's cache rows; attention reads the cache.
    class CachedKeyValues final : public KeyValueReader {
    public:
        CachedKeyValues(DecoderSession& session, const Inputs& in) : session_(session), in_(in) {}
        NodeId attend(Graph& g, int64_t layer, NodeId q, NodeId k, NodeId v, const HeadLayout& h) override {
            const NodeId keys = ops::store_kv(g, session_.key_cache(g, layer), k, in_.cache_rows);
            const NodeId values = ops::store_kv(g, session_.value_cache(g, layer), v, in_.cache_rows);
            return ops::cached_attention(g, q, keys, values, in_.cache_rows, in_.mask, h.n_heads, h.n_kv_heads, h.head_dim,
                                         {h.scale, h.softcap, h.window});
        }

    private:
        DecoderSession& session_;
        const Inputs& in_;
    };

    NodeId build_forward(Graph& g, const Inputs& in, bool last_only) override {
        CachedKeyValues cache(*this, in);
        BlockContext ctx;
        ctx.tokens = in.tokens;
        ctx.positions = in.positions;
        ctx.n = in.n;
        ctx.last_only = last_only;
        ctx.n_ctx = n_ctx();
        ctx.attention = &cache;
        return arch_.forward(g, ctx, leaves_);
    }

    const DecoderArch& arch_;
    const WeightLeaves& leaves_;
};

// The matrices to rearrange for the active kernels: every multiplied weight
// whose type the kernel set runs faster interleaved, except the token
// embedding (its rows are also looked up one by one). KILN_INTERLEAVE=0 keeps
// the file's layout everywhere, to compare.
std::unordered_map<std::string, DType> weight_layouts(const GgufFile& file, const DecoderArch& arch) {
    std::unordered_map<std::string, DType> layouts;
    const char* env = std::getenv("KILN_INTERLEAVE");
    if (env != nullptr && std::string_view(env) == "0") return layouts;
    const kernels::MatmulKernels& set = kernels::active_matmul_kernels();
    for (const arch::TensorSpec& spec : arch.tensor_specs()) {
        if (spec.role != arch::TensorRole::Matrix || spec.name == arch::kTokenEmbedding) continue;
        const GgufTensor* t = file.find_tensor(spec.name);
        if (t == nullptr || t->dims.size() != 2) continue;
        if (const auto layout = kernels::weight_layout(set, t->type, static_cast<int64_t>(t->dims[1])))
            layouts.emplace(spec.name, *layout);
    }
    return layouts;
}

}  // namespace

DecoderLm::DecoderLm(std::shared_ptr<const GgufFile> file, std::unique_ptr<DecoderArch> arch, WeightPlacement placement)
    : file_(std::move(file)),
      arch_(std::move(arch)),
      placement_(std::make_unique<ResidentWeights>(*file_, placement, weight_layouts(*file_, *arch_))),
      leaves_(*file_, *placement_) {
    const DecoderShape& s = arch_->shape();
    info_ = ModelInfo{arch_->name(), s.n_vocab, s.n_ctx_train, model_tensors::parameter_count(*file_),
                      model_tensors::weight_bytes(*file_)};
}

std::unique_ptr<CausalSession> DecoderLm::new_session(int64_t n_ctx, int64_t n_slots, Executor::Mode mode,
                                                      CacheTypes cache_types) const {
    const DecoderShape& s = arch_->shape();
    if (s.learned_positions && (n_ctx < 1 || n_ctx > s.n_ctx_train))
        fail("model", "context {} is outside 1..{}, the positions this {} model has", n_ctx, s.n_ctx_train,
             arch_->name());
    check_cache_types(cache_types, s.head_dim);
    return std::make_unique<DecoderSession>(*arch_, leaves_, n_ctx, n_slots, mode, cache_types);
}

}  // namespace kiln
