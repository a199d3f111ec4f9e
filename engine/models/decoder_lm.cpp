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
                   Executor::Mode mode, CacheTypes cache_types, LayerStage stage)
        : SlotDecoderSession(arch.shape().n_vocab, stage.end(arch.shape().n_layers) - stage.begin(), arch.shape().kv_dim,
                             n_ctx, n_slots, mode, cache_types, stage.begin(),
                             stage.begin() > 0 ? arch.hidden_width() : 0, stage.ends_model(arch.shape().n_layers)),
          arch_(arch),
          leaves_(leaves),
          stage_(stage) {}

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
        ctx.stage = stage_;
        ctx.stage.hidden = in.hidden;
        return arch_.forward(g, ctx, leaves_);
    }

    const DecoderArch& arch_;
    const WeightLeaves& leaves_;
    LayerStage stage_;
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

namespace {

// The block a tensor belongs to ("blk.N.xxx"), or -1 for a tensor of the whole model.
int64_t block_of(std::string_view name) {
    constexpr std::string_view prefix = "blk.";
    if (!name.starts_with(prefix)) return -1;
    int64_t block = 0;
    size_t i = prefix.size();
    if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) block = block * 10 + (name[i] - '0');
    return i < name.size() && name[i] == '.' ? block : -1;
}

LayerStage checked_stage(const DecoderArch& arch, LayerStage stage) {
    const int64_t n_layers = arch.shape().n_layers;
    if (stage.begin() == 0 && stage.ends_model(n_layers)) return stage;
    if (!arch.builds_stages())
        fail("model", "architecture '{}' cannot be split by layers", arch.name());
    if (stage.begin() < 0 || stage.end(n_layers) <= stage.begin() || stage.end(n_layers) > n_layers)
        fail("model", "layers {}..{} are not a range of this model's {} blocks", stage.begin(), stage.end(n_layers) - 1,
             n_layers);
    return stage;
}

}  // namespace

bool layer_stage_uses(const GgufFile& file, int64_t n_layers, const LayerStage& stage, std::string_view name) {
    const bool first = stage.begin() == 0, last = stage.ends_model(n_layers);
    if (first && last) return true;
    if (const int64_t block = block_of(name); block >= 0) return block >= stage.begin() && block < stage.end(n_layers);
    if (name.starts_with("token_embd.")) return first || (last && file.find_tensor("output.weight") == nullptr);
    if (name.starts_with("position_embd.")) return first;
    if (name.starts_with("output_norm.") || name.starts_with("output.")) return last;
    return true;  // e.g. rope factors: every stage's blocks read them
}

bool DecoderLm::stage_uses(std::string_view name) const {
    return layer_stage_uses(*file_, arch_->shape().n_layers, stage_, name);
}

DecoderLm::DecoderLm(std::shared_ptr<const GgufFile> file, std::unique_ptr<DecoderArch> arch, WeightPlacement placement,
                     LayerStage stage)
    : file_(std::move(file)),
      arch_(std::move(arch)),
      stage_(checked_stage(*arch_, stage)),
      placement_(std::make_unique<ResidentWeights>(*file_, placement, weight_layouts(*file_, *arch_),
                                                   [this](std::string_view name) { return stage_uses(name); })),
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
    return std::make_unique<DecoderSession>(*arch_, leaves_, n_ctx, n_slots, mode, cache_types, stage_);
}

std::unique_ptr<SlotDecoderSession> DecoderLm::new_stage_session(int64_t n_ctx, Executor::Mode mode,
                                                                 CacheTypes cache_types) const {
    std::unique_ptr<CausalSession> session = new_session(n_ctx, 1, mode, cache_types);
    return std::unique_ptr<SlotDecoderSession>(static_cast<SlotDecoderSession*>(session.release()));
}

}  // namespace kiln
