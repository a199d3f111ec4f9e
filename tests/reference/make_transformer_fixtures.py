#!/usr/bin/env python3
"""Writes tests/fixtures/transformer/: two small torch.nn.Transformer seq2seq checkpoints
(briefly trained to reverse a string, so that they stop at </s> and choose decisively) and
for each a reference GGUF of decoder logits, greedy and beam-search outputs, and a padded batch.

    /usr/bin/python3 tests/reference/make_transformer_fixtures.py      (torch 1.13, ~30 s)

Vocabulary (shared by source and target): itos = ["<pad>", "<s>", "</s>"] + "abcdefghijklmnopqrstuvwxyz ".
Task: source = text + [</s>]; target = [<s>] + reversed(text) + [</s>].

Checkpoints (transformer_reference.Seq2SeqTransformer, d_model 32, 4 heads, 2 encoder and
2 decoder layers, dim_feedforward 64, max_len 32, layer_norm_eps 1e-5), saved as
torch.save({"model": state_dict, "model_args": {d_model, nhead, num_encoder_layers,
num_decoder_layers, dim_feedforward, norm_first, activation, layer_norm_eps, max_len},
"itos": [...], "specials": {"pad": "<pad>", "bos": "<s>", "eos": "</s>"}}):
  postln_relu.pt         post-LN (the paper), ReLU; separate source/target embeddings and
                         an untied generator.
  preln_gelu_shared.pt   pre-LN (norm_first=True), exact GELU; one embedding for source and
                         target (src_embed.weight and tgt_embed.weight share storage), the
                         generator's weight tied to it (its bias its own).

Reference GGUFs <model>_reference.gguf (gguf_io.write_gguf):
  metadata  reference.source (str), reference.source_count (u32), reference.greedy_steps,
            reference.beam_steps (u32), reference.bos_token_id / eos_token_id / pad_token_id
            (i32), reference.min_top2_gap (f32: over every logits row and greedy step),
            reference.beam_min_gap (f32), sI.text (str: the source text; kiln's char tokenizer
            encodes it to sI.tokens minus the final </s>),
            sI.beam.kK.aA.normalized / .raw (f64 arrays, best first), K in 1, 2, 4; A in
            0.0, 0.6, 1.0 ("%.1f").
  tensors   sI.tokens (i32: source ids, ending with </s>), sI.prefix (i32 [T]: a decoder
            input starting with <s>), sI.logits (f32, ggml [V, T]: decoder logits at every
            prefix position), sI.greedy (i32: generated tokens, up to and including </s>;
            without the leading <s>), sI.beam.kK.aA.hJ (i32: hypothesis J's generated tokens),
            batch.sources (i32, ggml [S_max, B]: every sI.tokens, right-padded with <pad>),
            batch.lengths (i32 [B]), batch.prefix (i32, ggml [T, B]: every sI.prefix, all the
            same length), batch.logits (f32, ggml [V, T, B]: one batched call with source
            padding masks; the script checks it equals each sI.logits within 1e-4).

expected_tensors.gguf: every tensor kiln-convert must write for both checkpoints, computed from
the torch modules (in_proj_* row blocks sliced here), named "<model>/<GGUF name>", float32.
`--no-train` rebuilds the reference and expected files from the saved .pt files (training takes
minutes).
Training is deterministic on one thread (torch.set_num_threads(1)) on a given machine; a rerun
elsewhere may differ in the last bits of the trained weights, and then every file here changes
together.
"""
import os
import sys

import numpy as np
import torch

DESCRIPTION = (
    "PyTorch reference for a transformer (encoder-decoder) model (tests/reference/make_transformer_fixtures.py). "
    "reference.source: the checkpoint in tests/fixtures/transformer/ to convert. Per source I < reference.source_count: "
    "sI.text, sI.tokens (i32 source ids ending with eos), sI.prefix (i32 decoder input starting with bos), sI.logits "
    "(f32 ggml [vocab, T]: decoder logits at every prefix position), sI.greedy (i32 generated tokens up to and "
    "including eos, without bos), and for K in 1,2,4 and A in 0.0,0.6,1.0 the beam search of CONTRACTS.md 5 with -n "
    "reference.beam_steps: sI.beam.kK.aA.normalized/.raw (f64, best first), sI.beam.kK.aA.hJ (i32). batch.sources "
    "(i32 ggml [S_max, B], padded with pad), batch.lengths, batch.prefix (ggml [T, B]), batch.logits (f32 ggml "
    "[vocab, T, B]) from one padded batch, equal to the single runs.")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io  # noqa: E402
from beam_search_reference import BeamTrace, beam_search, greedy  # noqa: E402
from transformer_reference import Seq2SeqTransformer, encoder_decoder_step  # noqa: E402

OUT = os.path.join(HERE, "..", "fixtures", "transformer")
ITOS = ["<pad>", "<s>", "</s>"] + list("abcdefghijklmnopqrstuvwxyz ")
PAD, BOS, EOS = 0, 1, 2
STOI = {s: i for i, s in enumerate(ITOS)}
MAX_LEN = 32
GREEDY_STEPS = 24
BEAM_STEPS = 20
BEAMS = (1, 2, 4)
PENALTIES = (0.0, 0.6, 1.0)
SOURCES = ["hello world", "kiln", "attention is all", "beam search"]
PREFIX = 5  # <s> + the first 4 target characters
TRAIN_STEPS = 600


def random_text(g):
    n = int(torch.randint(3, 17, (1,), generator=g))
    letters = torch.randint(0, 27, (n,), generator=g).tolist()
    return "".join(ITOS[3 + i] for i in letters)


def pad_batch(rows):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids, ids == PAD


def train(model, seed):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD)
    model.train()
    for _ in range(TRAIN_STEPS):
        texts = [random_text(g) for _ in range(48)]
        src, src_pad = pad_batch([[STOI[c] for c in t] + [EOS] for t in texts])
        tgt, _ = pad_batch([[BOS] + [STOI[c] for c in reversed(t)] + [EOS] for t in texts])
        logits = model(src, tgt[:, :-1], src_pad)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return float(loss)


def reference(model, source_name):
    U32, I32, F32, STR, F64 = gguf_io.UINT32, gguf_io.INT32, gguf_io.FLOAT32, gguf_io.STRING, gguf_io.FLOAT64
    md = [("reference.description", STR, DESCRIPTION),
          ("reference.source", STR, source_name), ("reference.source_count", U32, len(SOURCES)),
          ("reference.greedy_steps", U32, GREEDY_STEPS), ("reference.beam_steps", U32, BEAM_STEPS),
          ("reference.bos_token_id", I32, BOS), ("reference.eos_token_id", I32, EOS),
          ("reference.pad_token_id", I32, PAD)]
    tensors = []
    min_gap = float("inf")
    trace = BeamTrace()
    sources, prefixes, singles = [], [], []
    for i, text in enumerate(SOURCES):
        src = [STOI[c] for c in text] + [EOS]
        prefix = [BOS] + [STOI[c] for c in reversed(text)][: PREFIX - 1]
        assert len(prefix) == PREFIX
        with torch.no_grad():
            logits = model(torch.tensor([src]), torch.tensor([prefix]))[0].numpy().astype(np.float32)
        top2 = np.sort(logits, axis=1)[:, -2:]
        min_gap = min(min_gap, float(np.min(top2[:, 1] - top2[:, 0])))
        step = encoder_decoder_step(model, src, BOS)
        out, gap = greedy(step, GREEDY_STEPS, EOS)
        min_gap = min(min_gap, gap)
        md.append(("s%d.text" % i, STR, text))
        tensors += [("s%d.tokens" % i, np.array(src, dtype=np.int32)), ("s%d.prefix" % i, np.array(prefix, dtype=np.int32)),
                    ("s%d.logits" % i, logits), ("s%d.greedy" % i, np.array(out, dtype=np.int32))]
        for k in BEAMS:
            for a in PENALTIES:
                key = "s%d.beam.k%d.a%.1f" % (i, k, a)
                hyps = beam_search(step, k, a, BEAM_STEPS, EOS, trace)
                if k == 1:  # §5: K = 1 is greedy decoding
                    assert hyps[0][0] == out[: len(hyps[0][0])], (hyps[0][0], out)
                md.append((key + ".normalized", (gguf_io.ARRAY, F64), [h[1] for h in hyps]))
                md.append((key + ".raw", (gguf_io.ARRAY, F64), [h[2] for h in hyps]))
                for j, h in enumerate(hyps):
                    tensors.append(("%s.h%d" % (key, j), np.array(h[0], dtype=np.int32)))
        sources.append(src)
        prefixes.append(prefix)
        singles.append(logits)
    # One batched call with padded sources must give every single run's logits.
    src, src_pad = pad_batch(sources)
    with torch.no_grad():
        batched = model(src, torch.tensor(prefixes), src_pad).numpy().astype(np.float32)
    worst = max(float(np.max(np.abs(batched[i] - singles[i]))) for i in range(len(SOURCES)))
    assert worst < 1e-4, worst  # different kernels for padded batches: float32 rounding only
    tensors += [("batch.sources", src.numpy().astype(np.int32)),
                ("batch.lengths", np.array([len(s) for s in sources], dtype=np.int32)),
                ("batch.prefix", np.array(prefixes, dtype=np.int32)), ("batch.logits", batched)]
    md += [("reference.min_top2_gap", F32, min_gap), ("reference.beam_min_gap", F32, trace.min_gap)]
    return md, tensors, min_gap, trace.min_gap, worst


def expected_tensors(stem, model, shared):
    """What kiln-convert must write (docs/architectures.md, transformer names), from the torch modules:
    in_proj_weight's row blocks are Q, K, V; numpy shape (out, in) = ggml [in, out]."""
    def a(t):
        return t.detach().numpy().astype(np.float32)

    d = model.d_model
    out = [("token_embd.weight", a(model.src_embed.weight))]
    if not shared:
        out += [("dec.token_embd.weight", a(model.tgt_embed.weight)), ("output.weight", a(model.generator.weight))]
    out.append(("output.bias", a(model.generator.bias)))

    def attention(prefix, mha):
        w, b = a(mha.in_proj_weight), a(mha.in_proj_bias)
        for i, part in enumerate("qkv"):
            out.append(("%s%s.weight" % (prefix, part), w[i * d:(i + 1) * d]))
            out.append(("%s%s.bias" % (prefix, part), b[i * d:(i + 1) * d]))
        out.append(("%so.weight" % prefix, a(mha.out_proj.weight)))
        out.append(("%so.bias" % prefix, a(mha.out_proj.bias)))

    def plain(prefix, pairs):
        for name, module in pairs:
            out.append(("%s%s.weight" % (prefix, name), a(module.weight)))
            out.append(("%s%s.bias" % (prefix, name), a(module.bias)))

    tr = model.transformer
    for n, layer in enumerate(tr.encoder.layers):
        attention("enc.blk.%d.attn_" % n, layer.self_attn)
        plain("enc.blk.%d." % n, [("attn_norm", layer.norm1), ("ffn_up", layer.linear1), ("ffn_down", layer.linear2),
                                  ("ffn_norm", layer.norm2)])
    plain("enc.", [("output_norm", tr.encoder.norm)])
    for n, layer in enumerate(tr.decoder.layers):
        attention("dec.blk.%d.attn_" % n, layer.self_attn)
        attention("dec.blk.%d.cross_attn_" % n, layer.multihead_attn)
        plain("dec.blk.%d." % n, [("attn_norm", layer.norm1), ("cross_attn_norm", layer.norm2),
                                  ("ffn_up", layer.linear1), ("ffn_down", layer.linear2), ("ffn_norm", layer.norm3)])
    plain("dec.", [("output_norm", tr.decoder.norm)])
    return [("%s/%s" % (stem, name), np.ascontiguousarray(arr)) for name, arr in out]


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    # --no-train: rebuild the reference and expected files from the saved checkpoints.
    no_train = len(sys.argv) > 1 and sys.argv[1] == "--no-train"
    expected = []
    for name, norm_first, activation, shared, seed in (("postln_relu", False, "relu", False, 11),
                                                       ("preln_gelu_shared", True, "gelu", True, 12)):
        torch.manual_seed(seed)
        model = Seq2SeqTransformer(len(ITOS), d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                   dim_feedforward=64, norm_first=norm_first, activation=activation,
                                   layer_norm_eps=1e-5, max_len=MAX_LEN, shared=shared)
        if no_train:
            model.load_state_dict(torch.load(os.path.join(OUT, name + ".pt"))["model"])
            model.eval()
            loss = float("nan")
        else:
            loss = train(model, seed)
            torch.save({"model": model.state_dict(), "model_args": model.args, "itos": ITOS,
                        "specials": {"pad": "<pad>", "bos": "<s>", "eos": "</s>"}}, os.path.join(OUT, name + ".pt"))
        expected += expected_tensors(name, model, shared)
        md, tensors, gap, beam_gap, worst = reference(model, name + ".pt")
        gguf_io.write_gguf(os.path.join(OUT, name + "_reference.gguf"), md, tensors)
        greedy_texts = []
        for i in range(len(SOURCES)):
            out = [t for t in dict(tensors)["s%d.greedy" % i].tolist() if t > EOS]
            greedy_texts.append("".join(ITOS[t] for t in out))
        print("%s: final loss %.3f, min top-2 gap %.4f, beam min gap %.2e, padded batch max diff %.1e, greedy %r"
              % (name, loss, gap, beam_gap, worst, greedy_texts))
    gguf_io.write_gguf(os.path.join(OUT, "expected_tensors.gguf"), [], expected)


if __name__ == "__main__":
    main()
