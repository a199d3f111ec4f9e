"""Hostile PyTorch checkpoints for tests/test_hostile_inputs.cpp (issue 19).

Each is what torch.save itself writes for a small, ordinary-looking object,
so the files are real archives with real pickles; what makes them hostile is
what the object says:

  shared_bytes.pt   one 64 KiB bytes value stored under 4000 keys (pickle
                    protocol 4, whose BINBYTES kiln reads). pickle
                    memoises it, so the file is ~120 KB, but a reader that
                    copies each reference would build 4000 copies (as GGUF
                    UINT8 arrays: gigabytes).
  shared_list.pt    the same with one list of 20000 ints under 2000 keys.
  llama_layers.pt   a 1-layer llama2.c model.py state dict whose
                    model_args.n_layers is 2^32 - 1.
  llama_index.pt    a 1-layer llama2.c state dict with one more tensor named
                    layers.4000000000.attention_norm.weight (model_args
                    without n_layers: the count comes from the names).
  nanogpt_nobias.pt a 1-layer nanoGPT state dict with bias=False and
                    model_args.n_layer 2^32 - 1.

Run: /usr/bin/python3 tests/reference/make_hostile_fixtures.py
"""
import os

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hostile")


def save(obj, name, protocol=2):
    torch.save(obj, os.path.join(OUT, name), pickle_protocol=protocol)


def llama_state_dict(dim=8, hidden=16, vocab=32, layers=1):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    sd = {"tok_embeddings.weight": r(vocab, dim), "norm.weight": r(dim), "output.weight": r(vocab, dim)}
    for i in range(layers):
        p = f"layers.{i}."
        for w in ("wq", "wk", "wv", "wo"):
            sd[p + f"attention.{w}.weight"] = r(dim, dim)
        sd[p + "feed_forward.w1.weight"] = r(hidden, dim)
        sd[p + "feed_forward.w2.weight"] = r(dim, hidden)
        sd[p + "feed_forward.w3.weight"] = r(hidden, dim)
        sd[p + "attention_norm.weight"] = r(dim)
        sd[p + "ffn_norm.weight"] = r(dim)
    return sd


def nanogpt_state_dict(dim=8, vocab=32, ctx=16):
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g)
    sd = {"transformer.wte.weight": r(vocab, dim), "transformer.wpe.weight": r(ctx, dim),
          "transformer.ln_f.weight": r(dim)}
    p = "transformer.h.0."
    sd[p + "ln_1.weight"] = r(dim)
    sd[p + "attn.c_attn.weight"] = r(3 * dim, dim)
    sd[p + "attn.c_proj.weight"] = r(dim, dim)
    sd[p + "ln_2.weight"] = r(dim)
    sd[p + "mlp.c_fc.weight"] = r(4 * dim, dim)
    sd[p + "mlp.c_proj.weight"] = r(dim, 4 * dim)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


def main():
    os.makedirs(OUT, exist_ok=True)
    big = bytes(range(256)) * 256  # 64 KiB
    # Protocol 4: protocol 2 pickles bytes through _codecs.encode, which kiln refuses by name.
    save({f"k{i}": big for i in range(4000)}, "shared_bytes.pt", protocol=4)
    numbers = list(range(20000))
    save({f"k{i}": numbers for i in range(2000)}, "shared_list.pt")

    save({"model": llama_state_dict(),
          "model_args": {"dim": 8, "n_layers": 2**32 - 1, "n_heads": 2, "vocab_size": 32, "hidden_dim": 16}},
         "llama_layers.pt")
    sd = llama_state_dict()
    sd["layers.4000000000.attention_norm.weight"] = torch.ones(8)
    save({"model": sd, "model_args": {"dim": 8, "n_heads": 2, "vocab_size": 32, "hidden_dim": 16}}, "llama_index.pt")

    save({"model": nanogpt_state_dict(),
          "model_args": {"n_layer": 2**32 - 1, "n_head": 2, "n_embd": 8, "block_size": 16, "bias": False,
                         "vocab_size": 32}},
         "nanogpt_nobias.pt")


if __name__ == "__main__":
    main()
