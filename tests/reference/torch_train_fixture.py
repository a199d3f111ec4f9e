"""The part of a whole-model training fixture every architecture shares: from
initial float32 parameters, a PyTorch (float64) forward that returns the loss,
and a batch, compute the loss and every gradient of one step, then 3 steps of
torch.optim.AdamW (betas 0.9/0.95, eps 1e-8, lr 1e-2, weight decay 0.1 on the
parameters marked decayed), each after clip_grad_norm_(1.0); and write it all
as the GGUF fixture kiln's tests read (tests/support/torch_training.h)."""
import gguf_io as gg
import numpy as np
import torch

LR, BETAS, ADAM_EPS, WD, CLIP, STEPS = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0, 3


def write_fixture(out, shapes, init, forward, tokens, targets, meta):
    """shapes: [(name, torch shape, decayed)]; forward(P, tokens, targets) -> loss; meta: the architecture's keys."""
    P = {n: torch.tensor(init[n], dtype=torch.float64, requires_grad=True) for n, _, _ in shapes}
    tt, tg = torch.tensor(tokens, dtype=torch.long), torch.tensor(targets, dtype=torch.long)
    loss = forward(P, tt, tg)
    loss.backward()
    grads = {n: P[n].grad.detach().numpy().copy() for n, _, _ in shapes}
    loss0 = float(loss)

    for t in P.values():
        t.grad = None
    decay = [P[n] for n, _, d in shapes if d]
    keep = [P[n] for n, _, d in shapes if not d]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": keep, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=ADAM_EPS)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = forward(P, tt, tg)
        losses.append(float(loss))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), CLIP)
        opt.step()

    meta = meta + [
        ("test.loss", gg.FLOAT64, loss0),
        ("test.adam.lr", gg.FLOAT64, LR), ("test.adam.beta1", gg.FLOAT64, BETAS[0]),
        ("test.adam.beta2", gg.FLOAT64, BETAS[1]), ("test.adam.eps", gg.FLOAT64, ADAM_EPS),
        ("test.adam.weight_decay", gg.FLOAT64, WD), ("test.adam.clip", gg.FLOAT64, CLIP),
        ("test.adam.losses", (gg.ARRAY, gg.FLOAT64), losses),
    ]
    tensors = [("tokens", tokens.reshape(-1)), ("targets", targets.reshape(-1))]
    for n, _, _ in shapes:
        tensors.append((n, init[n]))
        tensors.append(("grad." + n, grads[n].astype(np.float32)))
        tensors.append(("adam%d.%s" % (STEPS, n), P[n].detach().numpy().astype(np.float32)))
    gg.write_gguf(out, meta, tensors)
    print("wrote", out, "loss %.6f" % loss0, "adam losses", " ".join("%.6f" % x for x in losses))
