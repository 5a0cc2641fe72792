#!/usr/bin/env python3
"""Failing cases at real sizes for the cut-down diagnosis (docs/compare.md, "Diagnosis at real
sizes"): a sequence-parallel LayerNorm, a vocabulary-parallel embedding and cross-entropy, float32
over P = 8 ranks, each computed in NumPy (float64, rounded once) with one rank's piece wrong in a
way no signature has, so `shardcheck compare` runs every signature of the family and matches none.

    python3 examples/real_size/diagnosis_cases.py norm CASE_DIR [TOKENS HIDDEN] [FLAGS]
    python3 examples/real_size/diagnosis_cases.py embedding CASE_DIR [TOKENS VOCAB HIDDEN] [FLAGS]
    python3 examples/real_size/diagnosis_cases.py cross_entropy CASE_DIR [TOKENS VOCAB] [FLAGS]
    /usr/bin/time -v build/default/tools/shardcheck compare CASE_DIR

The bugs: the norm's rank 3 writes rank 2's rows of y and dx; the embedding looks up row id + 1
for the ids of rank 3's shard (every rank's y); the cross-entropy's rank 3 writes rank 2's columns
of dlogits. The case gives y and dx (norm), y (embedding), loss and dlogits under reduction none
(cross-entropy), which the diagnosis cuts to some token rows. FLAGS: --whole adds the output that
makes it run on the full case (dgamma; dw) or takes reduction mean (cross-entropy), the same
signature work, so the two timings give a signature's time on the full case and on the cut one;
--correct writes the same case without the wrong rank (it passes: no diagnosis runs), the time
the rest takes (docs/compare.md, "Diagnosis at real sizes", gives the figures measured).
Defaults: 4096 tokens, hidden 4096, vocabulary 32000 (Llama-2-7B's).
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import shardcheck_case as sc  # noqa: E402

args = [a for a in sys.argv[1:] if a not in ("--whole", "--correct")]
whole = "--whole" in sys.argv
wrong = 0 if "--correct" in sys.argv else 1  # --correct: no rank wrong, the passing case
family, case_dir, sizes = args[0], args[1], [int(v) for v in args[2:]]
p = 8
rng = np.random.default_rng(20261206)
impl = "numpy " + np.__version__ + " (float64, rounded once)" + (", rank 3 wrong" if wrong else "")


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32)


def chunks(n):
    """The chunk split's (offset, size) per rank: ceil(n/P) each, the last the rest."""
    c = -(-n // p)
    return [(min(r * c, n), max(0, min(c, n - r * c))) for r in range(p)]


if family == "norm":
    tokens, hidden = sizes or (4096, 4096)
    x = f32(rng.standard_normal((tokens, hidden)))
    gamma = f32(1 + 0.1 * rng.standard_normal(hidden))
    beta = f32(0.1 * rng.standard_normal(hidden))
    dy = f32(rng.standard_normal((tokens, hidden)))
    xd, gd, dyd = x.astype(np.float64), gamma.astype(np.float64), dy.astype(np.float64)
    mean = xd.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((xd - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    xhat = (xd - mean) * rstd
    g = dyd * gd
    dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    y, dx = f32(xhat * gd + beta), f32(dx)
    case = sc.Case("sequence_parallel_norm", "float32", {"tokens": tokens, "hidden": hidden},
                   {"tp": p}, {"kind": "layer_norm", "eps": 1e-5}, impl)
    for name, a in (("x", x), ("gamma", gamma), ("beta", beta), ("dy", dy)):
        case.input(name, a)
    rows = chunks(tokens)
    for name, a in (("y", y), ("dx", dx)):
        pieces = [a[o:o + n] for o, n in rows]
        if wrong:
            pieces[3] = pieces[2]
        case.output_ranks(name, pieces)
    if whole:
        case.output_ranks("dgamma", [f32((dyd * xhat).sum(axis=0))] * p)
elif family == "embedding":
    tokens, vocab, hidden = sizes or (4096, 32000, 4096)
    ids = rng.integers(0, vocab, tokens).astype(np.int64)
    w = f32(rng.standard_normal((vocab, hidden)))
    dy = f32(rng.standard_normal((tokens, hidden)))
    o3, n3 = chunks(vocab)[3]
    mine = (ids >= o3) & (ids < o3 + n3) & (wrong == 1)
    looked_up = np.where(mine, np.minimum(ids + 1, vocab - 1), ids)
    case = sc.Case("vocab_parallel_embedding", "float32",
                   {"tokens": tokens, "vocab": vocab, "hidden": hidden}, {"tp": p}, {}, impl)
    case.input("ids", ids)
    case.input("w", w)
    case.input("dy", dy)
    case.output_ranks("y", [w[looked_up]] * p)
    if whole:
        dw = np.zeros((vocab, hidden))
        np.add.at(dw, ids, dy.astype(np.float64))
        case.output_ranks("dw", [f32(dw[o:o + n]) for o, n in chunks(vocab)])
elif family == "cross_entropy":
    tokens, vocab = sizes or (4096, 32000)
    logits = f32(2 * rng.standard_normal((tokens, vocab)))
    targets = rng.integers(0, vocab, tokens).astype(np.int64)
    z = logits.astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    s = np.exp(z - m).sum(axis=1, keepdims=True)
    lse = (np.log(s) + m)[:, 0]
    loss = lse - z[np.arange(tokens), targets]
    dlog = np.exp(z - m) / s
    dlog[np.arange(tokens), targets] -= 1
    reduction = "mean" if whole else "none"
    if whole:
        dlog /= tokens
        dloss = np.ones(1, dtype=np.float32)
    else:
        dloss = np.ones(tokens, dtype=np.float32)
    case = sc.Case("vocab_parallel_cross_entropy", "float32", {"tokens": tokens, "vocab": vocab},
                   {"tp": p}, {"reduction": reduction}, impl)
    case.input("logits", logits)
    case.input("targets", targets)
    case.input("dloss", dloss)
    case.output_ranks("loss", [f32(loss.mean() if whole else loss).reshape(-1)] * p)
    pieces = [f32(dlog[:, o:o + n]) for o, n in chunks(vocab)]
    if wrong:
        pieces[3] = pieces[2]
    case.output_ranks("dlogits", pieces)
else:
    sys.exit("family: norm, embedding or cross_entropy")
case.write(case_dir)
print("wrote", case_dir)
