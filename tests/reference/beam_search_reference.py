#!/usr/bin/env python3
"""Reference beam search and greedy decoding (library), exactly as docs/architectures.md, beam search states them.

Model-agnostic: `step(hypotheses)` receives the live hypotheses (each a list of
generated token ids, in order) and returns one float32 numpy row of logits per
hypothesis, for the token that follows it. A decoder-only model prepends its
prompt; an encoder-decoder model prepends [bos] and attends to its source.

The algorithm (K = beams, A = length penalty, n = step limit):
  * live = [([], 0.0)], finished = [].
  * Each step: for every live hypothesis h (in order), logp = log_softmax(logits_h)
    in float64 from the float32 logits; candidates (h, token, score_h + logp[token]).
    The 2K best candidates, by score descending, ties by lower h then lower token.
  * Walk them with rank r = 0, 1, ...: an EOS candidate is finished only if r < K
    (else ignored), normalized = score / L**A with L = generated tokens including
    the EOS; any other candidate becomes a live hypothesis of the next step, until
    K live hypotheses are collected (then the walk stops).
  * After the step: if len(finished) >= K, stop (live hypotheses are dropped);
    otherwise, if n steps were made, every live hypothesis is finished with
    score / L**A, L = its generated tokens, in live order, and the search stops.
  * Output: finished sorted by normalized score descending, stable (earlier-finished
    first on ties). Each entry: (tokens, normalized, raw log-probability).
  * eos None: nothing ever finishes early.
Interpretation choices (where §5 is silent), stated so the C++ side can match:
the >= K test is made first, so when the n-th step also fills the finished list,
the live hypotheses are not added; L**A uses float64 pow, with 0**0 never arising
(L >= 1 always).

Greedy decoding: argmax of the float32 logits (lowest id on an exact tie), stopping
after emitting EOS (EOS included in the output) or after n tokens.
"""
import numpy as np


def log_softmax64(logits):
    x = np.asarray(logits, dtype=np.float32).astype(np.float64)
    m = np.max(x)
    return x - m - np.log(np.sum(np.exp(x - m)))


class BeamTrace:
    """Per-run diagnostics: how decisive the ranking decisions were."""

    def __init__(self):
        self.min_gap = float("inf")  # smallest score gap among each step's 2K+1 best candidates


def beam_search(step, beams, length_penalty, max_steps, eos, trace=None):
    """Returns [(tokens, normalized, raw)] best first."""
    if beams < 1:
        raise ValueError("beams must be >= 1")
    live = [([], 0.0)]
    finished = []
    for n_step in range(1, max_steps + 1):
        rows = step([tokens for tokens, _ in live])
        cands = []
        for h, ((tokens, score), row) in enumerate(zip(live, rows)):
            logp = log_softmax64(row)
            for tok in range(logp.shape[0]):
                cands.append((score + logp[tok], h, tok))
        # score descending, then lower h, then lower token
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        best = cands[: 2 * beams]
        if trace is not None:
            head = [c[0] for c in cands[: 2 * beams + 1]]
            for a, b in zip(head, head[1:]):
                trace.min_gap = min(trace.min_gap, a - b)
        next_live = []
        for r, (score, h, tok) in enumerate(best):
            tokens = live[h][0] + [tok]
            if eos is not None and tok == eos:
                if r < beams:
                    finished.append((tokens, score / (len(tokens) ** length_penalty), score))
                continue
            next_live.append((tokens, score))
            if len(next_live) == beams:
                break
        live = next_live
        if len(finished) >= beams:
            break
        if n_step == max_steps:
            for tokens, score in live:
                finished.append((tokens, score / (len(tokens) ** length_penalty), score))
    # Python's sort is stable: earlier-finished first on equal normalized scores.
    return sorted(finished, key=lambda f: -f[1])


def greedy(step, max_steps, eos):
    """Returns (tokens, min top-2 logit gap over the steps)."""
    tokens = []
    min_gap = float("inf")
    for _ in range(max_steps):
        row = np.asarray(step([tokens])[0], dtype=np.float32)
        order = np.argsort(-row, kind="stable")
        min_gap = min(min_gap, float(row[order[0]] - row[order[1]]))
        tok = int(order[0])
        tokens.append(tok)
        if eos is not None and tok == eos:
            break
    return tokens, min_gap
