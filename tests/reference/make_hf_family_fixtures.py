#!/usr/bin/env python3
"""Tiny random-weight Hugging Face folders (config.json + model.safetensors) of
the architectures kiln-convert reads besides LlamaForCausalLM-without-scaling
and GPT-2, and their logits from the float64 PyTorch forwards of
make_llama_family_fixtures.py, make_gemma_fixtures.py and make_phi3_fixtures.py
(imported, not copied), fed with the Hugging Face weights *as Hugging Face
uses them* (q/k rows in HF's rotate-half order with the NEOX rope; Gemma's
norm weights as 1 + weight; Phi-3's fused matrices as stored), so the
converter's permutations, +1s and name mappings are checked, not assumed:

  llama3        LlamaForCausalLM, rope_scaling llama3 (factor 8, low 1, high 4,
                original 100: wavelengths 6, 56, 500, ... span all three regimes), base 500000, untied
  llama_linear  LlamaForCausalLM, rope_scaling linear 2.5, head_dim 12 in a width
                of 32 (key_length), attention_bias and mlp_bias, tied head
  mistral_yarn  MistralForCausalLM (sliding_window 4096, ignored as llama.cpp
                does: longer than the prompt), rope_scaling yarn (factor 4,
                original 64)
  qwen2         Qwen2ForCausalLM: q/k/v biases, base 1e6, GQA, tied head
  phi3          Phi3ForCausalLM: qkv_proj, gate_up_proj, sliding_window 5
  phi3_longrope Phi3ForCausalLM: rope_scaling longrope (long and short factors,
                context 128 from 32), sliding_window null; the reference is
                the long factors' (a kiln session of 64 positions)
  gemma2        Gemma2ForCausalLM: 26 layers (query_pre_attn_scalar 12 = head_dim,
                llama.cpp's rule for 26 layers), head_dim 12 in a width of 32,
                soft caps 8 and 4, sliding_window 6
  gemma         GemmaForCausalLM: BF16 weights, head_dim 16, MQA

Run: /usr/bin/python3 tests/reference/make_hf_family_fixtures.py
Writes tests/fixtures/hf_family/<name>/{config.json,model.safetensors} and
tests/fixtures/hf_family/<name>_reference.gguf (tokens, logits).
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as gg  # noqa: E402
import make_gemma_fixtures as gemma_ref  # noqa: E402
import make_llama_family_fixtures as llama_ref  # noqa: E402
import make_phi3_fixtures as phi3_ref  # noqa: E402
from make_safetensors_fixtures import encode  # noqa: E402

# The imported forwards read these module constants.
V, T = 29, 40
assert llama_ref.V == V and gemma_ref.V == V and phi3_ref.V == V
L_LLAMA, FF_LLAMA, EPS_LLAMA = llama_ref.L, llama_ref.FF, llama_ref.EPS
EPS_GEMMA, EPS_PHI3 = gemma_ref.EPS, phi3_ref.EPS


def bf16_round(a):
    """float32 -> the nearest bfloat16 (ties to even), as float32 values and raw u16."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return (rounded.astype(np.uint32) << 16).view(np.float32), rounded


def write_folder(out_dir, name, config, weights, bf16=False):
    """weights: list of (HF name, float32 array) in file order. Returns the values as stored (float64 torch)."""
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    entries, stored = [], {}
    for n, w in weights:
        w = np.ascontiguousarray(w, dtype=np.float32)
        if bf16:
            values, raw = bf16_round(w)
            entries.append((n, "BF16", w.shape, raw.tobytes()))
            stored[n] = torch.tensor(values, dtype=torch.float64)
        else:
            entries.append((n, "F32", w.shape, w.tobytes()))
            stored[n] = torch.tensor(w, dtype=torch.float64)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(encode(entries, {"format": "pt"}))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return stored


def write_reference(out_dir, name, tokens, logits):
    gg.write_gguf(os.path.join(out_dir, name + "_reference.gguf"), [("fixture.tokens", gg.UINT32, len(tokens))],
                  [("tokens", tokens), ("logits", logits.numpy().astype(np.float32))])
    print("wrote", name, "logits range %.4f .. %.4f" % (logits.min(), logits.max()))


def randn(rng, shape, scale):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def llama3_factors_hf(hd, base, factor, low, high, orig):
    """Hugging Face's _compute_llama3_parameters, as divisors of each frequency."""
    out = []
    for i in range(0, hd, 2):
        freq = 1.0 / base ** (i / hd)
        wavelen = 2 * math.pi / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return out


def make_llama(out_dir, rng, name, arch, model_type, D, H, KV, hd, base, tied, attention_bias=False, mlp_bias=False,
               qkv_bias=False, rope_scaling=None, freq_factors=None, scaling=None, extra=None):
    """A llama-shaped HF folder; the reference is llama_ref.forward with HF's rotate-half (neox) rope on
    HF's own q/k rows."""
    q_dim, kv_dim = H * hd, KV * hd
    weights = [("model.embed_tokens.weight", randn(rng, (V, D), 0.2))]
    for l in range(L_LLAMA):
        p = "model.layers.%d." % l
        weights += [(p + "input_layernorm.weight", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)),
                    (p + "self_attn.q_proj.weight", randn(rng, (q_dim, D), 0.2)),
                    (p + "self_attn.k_proj.weight", randn(rng, (kv_dim, D), 0.2)),
                    (p + "self_attn.v_proj.weight", randn(rng, (kv_dim, D), 0.2)),
                    (p + "self_attn.o_proj.weight", randn(rng, (D, q_dim), 0.2))]
        if attention_bias or qkv_bias:
            weights += [(p + "self_attn.q_proj.bias", randn(rng, q_dim, 0.3)),
                        (p + "self_attn.k_proj.bias", randn(rng, kv_dim, 0.3)),
                        (p + "self_attn.v_proj.bias", randn(rng, kv_dim, 0.3))]
        if attention_bias:
            weights += [(p + "self_attn.o_proj.bias", randn(rng, D, 0.3))]
        weights += [(p + "post_attention_layernorm.weight", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)),
                    (p + "mlp.gate_proj.weight", randn(rng, (FF_LLAMA, D), 0.2)),
                    (p + "mlp.up_proj.weight", randn(rng, (FF_LLAMA, D), 0.2)),
                    (p + "mlp.down_proj.weight", randn(rng, (D, FF_LLAMA), 0.2))]
        if mlp_bias:
            weights += [(p + "mlp.gate_proj.bias", randn(rng, FF_LLAMA, 0.3)),
                        (p + "mlp.up_proj.bias", randn(rng, FF_LLAMA, 0.3)),
                        (p + "mlp.down_proj.bias", randn(rng, D, 0.3))]
    weights.append(("model.norm.weight", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)))
    if not tied:
        weights.append(("lm_head.weight", randn(rng, (V, D), 0.2)))
    config = {"architectures": [arch], "model_type": model_type, "hidden_size": D, "intermediate_size": FF_LLAMA,
              "num_hidden_layers": L_LLAMA, "num_attention_heads": H, "num_key_value_heads": KV,
              "max_position_embeddings": 96, "rms_norm_eps": EPS_LLAMA, "rope_theta": base, "vocab_size": V,
              "tie_word_embeddings": tied, "hidden_act": "silu", "torch_dtype": "float32"}
    if hd * H != D:
        config["head_dim"] = hd
    if model_type == "llama":
        config["attention_bias"] = attention_bias
        config["mlp_bias"] = mlp_bias
    config["rope_scaling"] = rope_scaling
    config.update(extra or {})
    stored = write_folder(out_dir, name, config, weights)

    # HF names -> the names the forward reads (no permutation: the forward rotates halves, as HF does).
    W = {}
    for n, w in stored.items():
        g = (n.replace("model.embed_tokens", "token_embd").replace("model.norm", "output_norm")
             .replace("lm_head", "output").replace("model.layers.", "blk.")
             .replace("input_layernorm", "attn_norm").replace("post_attention_layernorm", "ffn_norm")
             .replace("self_attn.q_proj", "attn_q").replace("self_attn.k_proj", "attn_k")
             .replace("self_attn.v_proj", "attn_v").replace("self_attn.o_proj", "attn_output")
             .replace("mlp.gate_proj", "ffn_gate").replace("mlp.up_proj", "ffn_up").replace("mlp.down_proj", "ffn_down"))
        W[g] = w
    cfg = dict(dim=D, heads=H, kv_heads=KV, head_dim=hd, base=base, neox=True, freq_factors=freq_factors,
               scaling=scaling)
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    write_reference(out_dir, name, tokens, llama_ref.forward(W, torch.tensor(tokens, dtype=torch.long), cfg))


def make_phi3(out_dir, rng, name, D, H, KV, FF, layers, context, original, window, longrope):
    hd = D // H
    weights = [("model.embed_tokens.weight", randn(rng, (V, D), 0.2))]
    for l in range(layers):
        p = "model.layers.%d." % l
        weights += [(p + "input_layernorm.weight", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)),
                    (p + "self_attn.qkv_proj.weight", randn(rng, (D + 2 * KV * hd, D), 0.2)),
                    (p + "self_attn.o_proj.weight", randn(rng, (D, D), 0.2)),
                    (p + "post_attention_layernorm.weight", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)),
                    (p + "mlp.gate_up_proj.weight", randn(rng, (2 * FF, D), 0.2)),
                    (p + "mlp.down_proj.weight", randn(rng, (D, FF), 0.2))]
    weights += [("model.norm.weight", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)),
                ("lm_head.weight", randn(rng, (V, D), 0.2))]
    config = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": D, "intermediate_size": FF,
              "num_hidden_layers": layers, "num_attention_heads": H, "num_key_value_heads": KV,
              "max_position_embeddings": context, "original_max_position_embeddings": original,
              "rms_norm_eps": EPS_PHI3, "rope_theta": 10000.0, "vocab_size": V, "tie_word_embeddings": False,
              "hidden_act": "silu", "sliding_window": window if window > 0 else None, "rope_scaling": None,
              "torch_dtype": "float32"}
    long_f = short_f = None
    attn_factor = 1.0
    if longrope:
        long_f = [float(v) for v in np.linspace(1.0, 6.0, hd // 2)]
        short_f = [float(v) for v in np.linspace(1.0, 1.8, hd // 2)]
        config["rope_scaling"] = {"type": "longrope", "long_factor": long_f, "short_factor": short_f}
        # HF's _compute_longrope_parameters: factor = max / original, attention factor from it.
        attn_factor = math.sqrt(1 + math.log(context / original) / math.log(original))
    stored = write_folder(out_dir, name, config, weights)
    W = {}
    for n, w in stored.items():
        g = (n.replace("model.embed_tokens", "token_embd").replace("model.norm", "output_norm")
             .replace("lm_head", "output").replace("model.layers.", "blk.")
             .replace("input_layernorm", "attn_norm").replace("post_attention_layernorm", "ffn_norm")
             .replace("self_attn.qkv_proj", "attn_qkv").replace("self_attn.o_proj", "attn_output")
             .replace("mlp.gate_up_proj", "ffn_up").replace("mlp.down_proj", "ffn_down"))
        W[g] = w
    cfg = dict(layers=layers, dim=D, heads=H, kv_heads=KV, ffn=FF, base=10000.0, window=window,
               attn_factor=attn_factor)
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    # HF's LongRoPE: long factors once the sequence passes the original context (kiln: the session's context).
    write_reference(out_dir, name, tokens, phi3_ref.forward(W, torch.tensor(tokens, dtype=torch.long), cfg, long_f))


def make_gemma(out_dir, rng, name, gemma2, layers, D, H, KV, hd, FF, bf16, query_pre_attn_scalar=None, window=None,
               attn_softcap=None, final_softcap=None, scale=0.2):
    def norm():
        return (0.2 * rng.standard_normal(D)).astype(np.float32)  # HF's weight: the scale is 1 + weight

    weights = [("model.embed_tokens.weight", randn(rng, (V, D), scale))]
    for l in range(layers):
        p = "model.layers.%d." % l
        weights += [(p + "input_layernorm.weight", norm()),
                    (p + "self_attn.q_proj.weight", randn(rng, (H * hd, D), scale)),
                    (p + "self_attn.k_proj.weight", randn(rng, (KV * hd, D), scale)),
                    (p + "self_attn.v_proj.weight", randn(rng, (KV * hd, D), scale)),
                    (p + "self_attn.o_proj.weight", randn(rng, (D, H * hd), scale)),
                    (p + "post_attention_layernorm.weight", norm())]
        if gemma2:
            weights += [(p + "pre_feedforward_layernorm.weight", norm()),
                        (p + "post_feedforward_layernorm.weight", norm())]
        weights += [(p + "mlp.gate_proj.weight", randn(rng, (FF, D), scale)),
                    (p + "mlp.up_proj.weight", randn(rng, (FF, D), scale)),
                    (p + "mlp.down_proj.weight", randn(rng, (D, FF), scale))]
    weights.append(("model.norm.weight", norm()))
    config = {"architectures": ["Gemma2ForCausalLM" if gemma2 else "GemmaForCausalLM"],
              "model_type": "gemma2" if gemma2 else "gemma", "hidden_size": D, "intermediate_size": FF,
              "num_hidden_layers": layers, "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": hd,
              "max_position_embeddings": 96, "rms_norm_eps": EPS_GEMMA, "rope_theta": 10000.0, "vocab_size": V,
              "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
              "torch_dtype": "bfloat16" if bf16 else "float32"}
    if gemma2:
        config.update({"query_pre_attn_scalar": query_pre_attn_scalar, "sliding_window": window,
                       "attn_logit_softcapping": attn_softcap, "final_logit_softcapping": final_softcap})
    stored = write_folder(out_dir, name, config, weights, bf16=bf16)
    W = {}
    for n, w in stored.items():
        g = (n.replace("model.embed_tokens", "token_embd").replace("model.norm", "output_norm")
             .replace("model.layers.", "blk.").replace("input_layernorm", "attn_norm")
             .replace("self_attn.q_proj", "attn_q").replace("self_attn.k_proj", "attn_k")
             .replace("self_attn.v_proj", "attn_v").replace("self_attn.o_proj", "attn_output")
             .replace("mlp.gate_proj", "ffn_gate").replace("mlp.up_proj", "ffn_up").replace("mlp.down_proj", "ffn_down"))
        if gemma2:
            g = (g.replace("post_attention_layernorm", "post_attention_norm")
                 .replace("pre_feedforward_layernorm", "ffn_norm").replace("post_feedforward_layernorm", "post_ffw_norm"))
        else:
            g = g.replace("post_attention_layernorm", "ffn_norm")
        # The forward reads norms the way the GGUF stores them (1 + HF's weight) and subtracts 1 again.
        W[g] = w + 1.0 if g.endswith("norm.weight") else w
    cfg = dict(gemma2=gemma2, layers=layers, dim=D, heads=H, kv_heads=KV, head_dim=hd, base=10000.0,
               query_pre_attn_scalar=query_pre_attn_scalar if gemma2 else hd, window=window,
               attn_softcap=attn_softcap, final_softcap=final_softcap)
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    write_reference(out_dir, name, tokens, gemma_ref.forward(W, torch.tensor(tokens, dtype=torch.long), cfg))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.normpath(os.path.join(here, "..", "fixtures", "hf_family"))
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261128)

    factors = llama3_factors_hf(12, 500000.0, 8.0, 1.0, 4.0, 100)
    make_llama(out, rng, "llama3", "LlamaForCausalLM", "llama", 48, 4, 2, 12, 500000.0, tied=False,
               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 100},
               freq_factors=factors)
    make_llama(out, rng, "llama_linear", "LlamaForCausalLM", "llama", 32, 4, 2, 12, 10000.0, tied=True,
               attention_bias=True, mlp_bias=True, rope_scaling={"type": "linear", "factor": 2.5},
               scaling=dict(type="linear", factor=2.5))
    make_llama(out, rng, "mistral_yarn", "MistralForCausalLM", "mistral", 64, 4, 2, 16, 10000.0, tied=False,
               rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
               scaling=dict(type="yarn", factor=4.0, original_context=64, attn_factor=1.0),
               extra={"sliding_window": 4096})
    make_llama(out, rng, "qwen2", "Qwen2ForCausalLM", "qwen2", 32, 4, 2, 8, 1e6, tied=True, qkv_bias=True,
               extra={"use_sliding_window": False, "sliding_window": 32, "max_window_layers": 1})
    make_phi3(out, rng, "phi3", 32, 4, 2, 48, 2, 96, 96, 5, longrope=False)
    make_phi3(out, rng, "phi3_longrope", 48, 4, 4, 40, 2, 128, 32, 0, longrope=True)
    make_gemma(out, rng, "gemma2", True, 26, 32, 4, 2, 12, 48, bf16=False, query_pre_attn_scalar=12, window=6,
               attn_softcap=8.0, final_softcap=4.0, scale=0.25)
    make_gemma(out, rng, "gemma", False, 2, 32, 4, 1, 16, 48, bf16=True)


if __name__ == "__main__":
    main()
