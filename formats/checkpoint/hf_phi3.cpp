#include "formats/checkpoint/hf_phi3.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/printable.h"
#include "formats/arch/phi3_arch.h"
#include "formats/checkpoint/hf_common.h"
#include "formats/checkpoint/json_limits.h"

namespace kiln {

namespace {

using nlohmann::json;

std::vector<float> factor_list(const HfConfig& c, const json& s, const char* key, uint64_t want) {
    const auto it = s.find(key);
    if (it == s.end() || !it->is_array())
        fail("hf", "{}: rope_scaling.{} is missing (LongRoPE needs long_factor and short_factor)", c.where(), key);
    if (it->size() != want)
        fail("hf", "{}: rope_scaling.{} has {} factors; heads of {} need {}", c.where(), key, it->size(), 2 * want, want);
    std::vector<float> out;
    for (const json& v : *it) {
        if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
            fail("hf", "{}: rope_scaling.{} holds {}, not a positive number", c.where(), key, json_excerpt(v));
        out.push_back(static_cast<float>(v.get<double>()));
    }
    return out;
}

}  // namespace

Checkpoint hf_phi3_checkpoint(const std::filesystem::path& given) {
    const std::filesystem::path folder = given.has_filename() ? given : given.parent_path();
    const HfConfig c(folder, read_hf_json(folder / "config.json"));
    if (const std::string a = c.architecture(); !a.empty() && a != "Phi3ForCausalLM")
        fail("hf", "{}: architectures is [{}]; this reader takes [\"Phi3ForCausalLM\"]", c.where(), printable(a));

    const uint64_t dim = c.count("hidden_size"), n_layers = c.count("num_hidden_layers"),
                   n_heads = c.count("num_attention_heads"), n_kv = c.count("num_key_value_heads", n_heads),
                   ffn = c.count("intermediate_size"), vocab = c.count("vocab_size"),
                   context = c.count("max_position_embeddings"),
                   original = c.count("original_max_position_embeddings");
    const double eps = c.number("rms_norm_eps"), theta = c.number("rope_theta", 10000.0);
    if (dim % n_heads != 0)
        fail("hf", "{}: hidden_size {} is not a multiple of num_attention_heads {}", c.where(), dim, n_heads);
    const uint64_t hd = dim / n_heads;
    if (c.find("head_dim") != nullptr && c.count("head_dim") != hd)
        fail("hf", "{}: head_dim {} differs from hidden_size / num_attention_heads = {} (phi3's heads)", c.where(),
             c.count("head_dim"), hd);
    if (c.find("partial_rotary_factor") != nullptr && c.number("partial_rotary_factor") != 1.0)
        fail("hf", "{}: partial_rotary_factor is {}; kiln's phi3 rotates whole heads", c.where(),
             json_excerpt(*c.find("partial_rotary_factor")));
    if (hd % 2 != 0) fail("hf", "{}: the head size {} is odd; RoPE needs pairs", c.where(), hd);
    if (n_heads % n_kv != 0)
        fail("hf", "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", c.where(), n_heads, n_kv);
    const uint64_t window = c.count_or_zero("sliding_window", 0);  // null: none (Phi-4)

    arch::Phi3Params p;
    arch::LlamaParams& l = p.llama;
    l.arch = std::string(arch::kPhi3);
    l.name = folder.filename().string();
    const auto i = [](uint64_t v) { return static_cast<int64_t>(v); };
    l.n_vocab = i(vocab);
    l.n_ctx_train = i(context);
    l.dim = i(dim);
    l.n_layers = i(n_layers);
    l.n_heads = i(n_heads);
    l.n_kv_heads = i(n_kv);
    l.ffn_dim = i(ffn);
    l.n_rot = i(hd);
    l.norm_eps = static_cast<float>(eps);
    l.rope_base = static_cast<float>(theta);
    p.sliding_window = i(window);

    Checkpoint out;
    out.metadata = l.metadata();
    hf_set_metadata(out, l.key("rope.freq_base"), GgufValue(static_cast<float>(theta)));
    hf_set_metadata(out, l.key("rope.scaling.original_context_length"), GgufValue(static_cast<uint32_t>(original)));
    hf_set_metadata(out, l.key("attention.sliding_window"), GgufValue(static_cast<uint32_t>(window)));

    std::vector<float> long_factors, short_factors;
    const std::string type = hf_rope_scaling_type(c);
    if (!type.empty()) {
        if (type != "longrope" && type != "su")
            fail("hf", "{}: rope_scaling type '{}' is not one kiln converts for Phi3ForCausalLM (longrope, su)",
                 c.where(), printable(type));
        const json& s = *c.find("rope_scaling");
        long_factors = factor_list(c, s, "long_factor", hd / 2);
        short_factors = factor_list(c, s, "short_factor", hd / 2);
        const double scale = static_cast<double>(context) / static_cast<double>(original);
        const double attn = scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(original))) : 1.0;
        // HF takes an explicit attention_factor over this formula; llama.cpp's
        // converter does not read it, so one that differs is refused.
        if (const auto af = s.find("attention_factor"); af != s.end() && !af->is_null())
            if (!af->is_number() || std::abs(af->get<double>() - attn) > 1e-6 * attn)
                fail("hf", "{}: rope_scaling.attention_factor {} differs from sqrt(1 + ln(scale) / ln(original)) = {}",
                     c.where(), json_excerpt(*af), attn);
        hf_set_metadata(out, l.key("rope.scaling.attn_factor"), GgufValue(static_cast<float>(attn)));
    }

    HfTensorSource source(folder);
    source.check_layers(n_layers, "num_hidden_layers");
    const std::string hyper =
        fmt::format("hidden_size {}, num_hidden_layers {}, num_attention_heads {}, num_key_value_heads {}, "
                    "intermediate_size {}, vocab_size {}",
                    dim, n_layers, n_heads, n_kv, ffn, vocab);
    const bool tied = c.flag("tie_word_embeddings", false);
    const auto own_floats = [&](const std::vector<float>& v) {
        std::vector<std::byte> bytes(v.size() * sizeof(float));
        std::memcpy(bytes.data(), v.data(), bytes.size());
        return out.own(std::move(bytes));
    };
    const std::vector<uint64_t> qkv = {dim + 2 * n_kv * hd, dim};
    // Walk the descriptor in its (the converter's) order, taking each tensor from its HF name.
    arch::phi3_tensors<int>(p, [&](const arch::TensorSpec& spec) {
        const std::string& n = spec.name;
        if (n == "rope_factors_long.weight" || n == "rope_factors_short.weight") {
            const std::vector<float>& f = n == "rope_factors_long.weight" ? long_factors : short_factors;
            if (!f.empty()) out.tensors.push_back({n, DType::F32, {f.size()}, own_floats(f)});
            return 0;
        }
        if (n == arch::kTokenEmbedding) {
            source.take(out, "model.embed_tokens.weight", n, {vocab, dim}, hyper);
        } else if (n == "output_norm.weight") {
            source.take(out, "model.norm.weight", n, {dim}, hyper);
        } else if (n == "output.weight") {
            if (tied) {
                source.drop("lm_head.weight");
                CheckpointTensor copy = out.tensors.front();  // token_embd: the same bytes, a second view
                copy.name = n;
                out.tensors.push_back(std::move(copy));
            } else {
                source.take(out, "lm_head.weight", n, {vocab, dim}, hyper);
            }
        } else {
            // blk.N.<part>.weight
            const size_t dot = n.find('.', 4);
            const std::string layer = n.substr(4, dot - 4), part = n.substr(dot + 1);
            const auto hf = [&](std::string_view s) { return fmt::format("model.layers.{}.{}", layer, s); };
            if (part == "attn_norm.weight") source.take(out, hf("input_layernorm.weight"), n, {dim}, hyper);
            else if (part == "attn_qkv.weight") source.take(out, hf("self_attn.qkv_proj.weight"), n, qkv, hyper);
            else if (part == "attn_output.weight") source.take(out, hf("self_attn.o_proj.weight"), n, {dim, dim}, hyper);
            else if (part == "ffn_norm.weight") source.take(out, hf("post_attention_layernorm.weight"), n, {dim}, hyper);
            else if (part == "ffn_up.weight") source.take(out, hf("mlp.gate_up_proj.weight"), n, {2 * ffn, dim}, hyper);
            else if (part == "ffn_down.weight") source.take(out, hf("mlp.down_proj.weight"), n, {dim, ffn}, hyper);
            else fail("hf", "phi3 tensor '{}' has no Hugging Face name in kiln", n);
        }
        return 0;
    });
    source.refuse_leftovers(fmt::format("a Phi3ForCausalLM with {} layers", n_layers));
    out.source = source.shards();
    return out;
}

}  // namespace kiln
