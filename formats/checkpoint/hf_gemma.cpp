#include "formats/checkpoint/hf_gemma.h"

#include <cstring>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "engine/core/printable.h"
#include "formats/arch/gemma_arch.h"
#include "formats/checkpoint/hf_common.h"
#include "formats/checkpoint/json_limits.h"

namespace kiln {

namespace {

// weight + 1 as F32, the way convert_hf_to_gguf's torch code gets it: BF16 is
// widened to F32 first, F16 is added in F16 (then stored as F32).
std::vector<std::byte> plus_one(const CheckpointTensor& t) {
    const size_t n = t.data.size() / type_traits(t.type).block_bytes;
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        if (t.type == DType::F32) {
            float x;
            std::memcpy(&x, t.data.data() + 4 * i, 4);
            v[i] = x + 1.0f;
        } else {
            uint16_t h;
            std::memcpy(&h, t.data.data() + 2 * i, 2);
            v[i] = t.type == DType::BF16 ? bf16_to_fp32(h) + 1.0f : fp16_to_fp32(fp32_to_fp16(fp16_to_fp32(h) + 1.0f));
        }
    }
    std::vector<std::byte> bytes(n * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
}

}  // namespace

Checkpoint hf_gemma_checkpoint(const std::filesystem::path& given) {
    const std::filesystem::path folder = given.has_filename() ? given : given.parent_path();
    const HfConfig c(folder, read_hf_json(folder / "config.json"));
    const std::string a = c.architecture().empty() ? c.text("model_type", "") : c.architecture();
    const bool gemma2 = a == "Gemma2ForCausalLM" || a == "gemma2";
    if (!gemma2 && a != "GemmaForCausalLM" && a != "gemma")
        fail("hf", "{}: architectures is [{}]; this reader takes [\"GemmaForCausalLM\"] or [\"Gemma2ForCausalLM\"]",
             c.where(), printable(a));
    const std::string arch_name = gemma2 ? "Gemma2ForCausalLM" : "GemmaForCausalLM";

    const uint64_t dim = c.count("hidden_size"), n_layers = c.count("num_hidden_layers"),
                   n_heads = c.count("num_attention_heads"), n_kv = c.count("num_key_value_heads", n_heads),
                   ffn = c.count("intermediate_size"), vocab = c.count("vocab_size"),
                   context = c.count("max_position_embeddings"), hd = c.count("head_dim");
    const double eps = c.number("rms_norm_eps"), theta = c.number("rope_theta", 10000.0);
    if (hd % 2 != 0) fail("hf", "{}: head_dim {} is odd; RoPE needs pairs", c.where(), hd);
    if (n_heads % n_kv != 0)
        fail("hf", "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", c.where(), n_heads, n_kv);
    if (const std::string type = hf_rope_scaling_type(c); !type.empty())
        fail("hf", "{}: rope_scaling type '{}': kiln's {} has plain RoPE", c.where(), printable(type), arch_name);
    if (const std::string act = c.text("hidden_activation", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh")
        fail("hf", "{}: hidden_activation '{}': kiln's gemma uses the tanh GELU (gelu_pytorch_tanh)", c.where(),
             printable(act));

    arch::GemmaParams p;
    p.gemma2 = gemma2;
    arch::LlamaParams& l = p.llama;
    l.arch = std::string(gemma2 ? arch::kGemma2 : arch::kGemma);
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
    if (hd * n_heads != dim) l.key_length = i(hd);
    l.norm_eps = static_cast<float>(eps);
    l.rope_base = static_cast<float>(theta);

    Checkpoint out;
    // rope.freq_base is written when rope_theta is not 10000 (every released
    // Gemma's); llama.cpp's converter never writes it for gemma, which would
    // silently lose another theta.
    out.metadata = l.metadata();
    hf_drop_metadata(out, l.key("rope.dimension_count"));
    hf_set_metadata(out, l.key("attention.key_length"), GgufValue(static_cast<uint32_t>(hd)));
    hf_set_metadata(out, l.key("attention.value_length"), GgufValue(static_cast<uint32_t>(hd)));
    if (gemma2) {
        // The attention scores' scale: HF's query_pre_attn_scalar^-1/2; kiln's
        // (llama.cpp's) by the layer count (arch::GemmaParams::read).
        const double scalar = c.number("query_pre_attn_scalar", 256.0);  // Gemma2Config's default
        const uint64_t per_width = dim / n_heads;
        uint64_t derived = 0;
        if (n_layers == 46) derived = per_width;
        else if (n_layers == 26 || n_layers == 42 || per_width == hd) derived = hd;
        if (derived == 0)
            fail("hf", "{}: query_pre_attn_scalar {}: kiln (as llama.cpp) derives the query scale from the layer count, "
                 "known only for 26, 42 and 46 layers when head_dim {} differs from hidden_size / heads {}",
                 c.where(), c.find("query_pre_attn_scalar") ? json_excerpt(*c.find("query_pre_attn_scalar")) : "256", hd,
                 per_width);
        if (scalar != static_cast<double>(derived))
            fail("hf", "{}: query_pre_attn_scalar is {} but kiln's gemma2 of {} layers scales queries by 1/sqrt({}) "
                 "(the GGUF file cannot say otherwise)",
                 c.where(), c.find("query_pre_attn_scalar") ? json_excerpt(*c.find("query_pre_attn_scalar")) : "256 (default)",
                 n_layers, derived);
        for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
            if (c.find(key) == nullptr)
                fail("hf", "{}: \"{}\" is missing or null; kiln's gemma2 always soft-caps", c.where(), key);
            hf_set_metadata(out, l.key(key), GgufValue(static_cast<float>(c.number(key))));
        }
        hf_set_metadata(out, l.key("attention.sliding_window"),
                        GgufValue(static_cast<uint32_t>(c.count("sliding_window"))));
    }

    HfTensorSource source(folder);
    source.check_layers(n_layers, "num_hidden_layers");
    source.drop("lm_head.weight");  // the head is the embedding; llama.cpp's converter skips a stored copy
    const std::string hyper =
        fmt::format("hidden_size {}, num_hidden_layers {}, num_attention_heads {}, num_key_value_heads {}, "
                    "head_dim {}, intermediate_size {}, vocab_size {}",
                    dim, n_layers, n_heads, n_kv, hd, ffn, vocab);
    const uint64_t q = n_heads * hd, kv = n_kv * hd;
    const auto norm = [&](const std::string& hf, const std::string& gguf) {
        CheckpointTensor& t = source.take(out, hf, gguf, {dim}, hyper);
        std::vector<std::byte> bytes = plus_one(t);
        t.type = DType::F32;
        t.data = out.own(std::move(bytes));
    };
    arch::gemma_tensors<int>(p, [&](const arch::TensorSpec& spec) {
        const std::string& n = spec.name;
        if (n == arch::kTokenEmbedding) {
            source.take(out, "model.embed_tokens.weight", n, {vocab, dim}, hyper);
            return 0;
        }
        if (n == "output_norm.weight") {
            norm("model.norm.weight", n);
            return 0;
        }
        const size_t dot = n.find('.', 4);
        const std::string layer = n.substr(4, dot - 4), part = n.substr(dot + 1);
        const auto hf = [&](std::string_view s) { return fmt::format("model.layers.{}.{}", layer, s); };
        if (part == "attn_norm.weight") norm(hf("input_layernorm.weight"), n);
        else if (part == "attn_q.weight") source.take(out, hf("self_attn.q_proj.weight"), n, {q, dim}, hyper);
        else if (part == "attn_k.weight") source.take(out, hf("self_attn.k_proj.weight"), n, {kv, dim}, hyper);
        else if (part == "attn_v.weight") source.take(out, hf("self_attn.v_proj.weight"), n, {kv, dim}, hyper);
        else if (part == "attn_output.weight") source.take(out, hf("self_attn.o_proj.weight"), n, {dim, q}, hyper);
        else if (part == "post_attention_norm.weight") norm(hf("post_attention_layernorm.weight"), n);
        else if (part == "ffn_norm.weight")
            norm(hf(gemma2 ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"), n);
        else if (part == "ffn_gate.weight") source.take(out, hf("mlp.gate_proj.weight"), n, {ffn, dim}, hyper);
        else if (part == "ffn_up.weight") source.take(out, hf("mlp.up_proj.weight"), n, {ffn, dim}, hyper);
        else if (part == "ffn_down.weight") source.take(out, hf("mlp.down_proj.weight"), n, {dim, ffn}, hyper);
        else if (part == "post_ffw_norm.weight") norm(hf("post_feedforward_layernorm.weight"), n);
        else fail("hf", "gemma tensor '{}' has no Hugging Face name in kiln", n);
        return 0;
    });
    source.refuse_leftovers(fmt::format("a {} with {} layers", arch_name, n_layers));
    out.source = source.shards();
    return out;
}

}  // namespace kiln
