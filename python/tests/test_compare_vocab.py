#!/usr/bin/env python3
"""End to end: cases written with python/shardcheck_case.py from a NumPy vocabulary-parallel
cross-entropy and embedding (ranks simulated in one process), judged by `shardcheck compare`.

    python3 python/tests/test_compare_vocab.py SHARDCHECK_BINARY WORK_DIR

Cross-entropy: the vocabulary split over P = 3 ranks (V = 11: shards of 4, 4, 3); each rank holds
its columns of the logits; the global max and the sums (of exp, of the target logit, of the
class-weighted logits for label smoothing) are all_reduced (simulated: a max and a sum over the
ranks' partial vectors); label smoothing over the GLOBAL vocabulary, ignore_index, class and
token weights, mean or no reduction; the loss and dlogits. Embedding: each rank looks up the ids
in its vocabulary range, zeros elsewhere, the partial outputs summed; dW per rank.

The arithmetic follows the ops' documented contract (lib/ops/vocab/vocab_cross_entropy.hpp,
vocab_embedding.hpp): inputs converted exactly to the accumulator acc_t<T> (float64 for float64,
float32 otherwise), every step in it, rounded once to T at the end.

The correct implementation passes (exit 0) in float64, float32 and bfloat16; four planted bugs
fail (exit 1) on the tensors they break, and each is diagnosed as the suite's signature of it:
label smoothing with the rank's local vocabulary size (PyTorch's (ε/n)·Σ_v −log p_v with n the
shard's V_r), the max never all_reduced (each rank shifts by its local max), the target logit
taken from rank 0 only (only the loss breaks; dlogits passes), and an embedding mask off by one
at the shard's last row. A misspelt config field is bad input (exit 2). ctest runs it (label
"compare").
"""

import os
import shutil
import sys


try:
    import numpy as np
except ImportError:
    sys.exit("numpy is missing: scripts/setup installs python3-numpy (Debian)")

from compare_support import Session, all_passed, chunks, exact_tensors, offsets  # noqa: E402,F401 (puts python/ on the path)
import shardcheck_case as sc  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
P, TOKENS, V, HIDDEN = 3, 8, 11, 5
IGNORE = -100
session = Session(BIN)
compare, expect, failures = session.compare, session.expect, session.failures






SHARDS = offsets(chunks(V, P))  # [(0, 4), (4, 8), (8, 11)]


def acc(dtype):
    """acc_t<T>: the accumulator every step runs in."""
    return np.float64 if dtype == "float64" else np.float32


def in_dtype(dtype, a):
    """Values of the case's dtype (bfloat16: rounded to it, held as float32)."""
    a = a.astype(acc(dtype))
    if dtype == "bfloat16":
        a = sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(a))
    return a


def finish(dtype, a):
    """The result rounded once to T (bfloat16: its bits)."""
    return sc.round_to_bfloat16_bits(a) if dtype == "bfloat16" else a.astype(acc(dtype))


# ---------------------------------------------------------------- cross-entropy


def targets():
    """Targets on the shard boundaries (0, 3 | 4, 7 | 8, 10), one ignored."""
    return np.array([0, 3, 4, 7, 8, 10, IGNORE, 5], dtype=np.int64)


def cross_entropy(dtype, smoothing, reduction, weighted, bug=None):
    """The case of a NumPy vocab-parallel cross-entropy, ranks simulated."""
    A = acc(dtype)
    rng = np.random.default_rng(7)
    logits = in_dtype(dtype, 2.0 * rng.standard_normal((TOKENS, V)))
    y = targets()
    cls = np.array([1, 0.5, 2, 1, 1.5, 1, 0.25, 1, 3, 1, 0.5], dtype=A) if weighted else None
    tok = np.array([1, 2, 0.5, 1, 1, 0, 1, 2], dtype=A) if weighted else None
    n_loss = TOKENS if reduction == "none" else 1
    dloss = in_dtype(dtype, rng.standard_normal(n_loss))
    eps = A(smoothing)
    c = cls if weighted else np.ones(V, dtype=A)
    w = tok if weighted else np.ones(TOKENS, dtype=A)
    keep = y != IGNORE
    ys = np.where(keep, y, 0)

    # Forward, rank by rank: local maxima -> all_reduce(max); local sums -> all_reduce(sum).
    local_max = [logits[:, lo:hi].max(axis=1) for lo, hi in SHARDS]
    m_global = np.maximum.reduce(local_max)
    m = [lm if bug == "local_max" else m_global for lm in local_max]  # the shift each rank uses
    parts = []  # per rank: [sum_exp, target logit, class-weighted logit sum]
    for r, (lo, hi) in enumerate(SHARDS):
        z = logits[:, lo:hi]
        s = np.exp(z - m[r][:, None]).sum(axis=1, dtype=A)
        own = keep & (ys >= lo) & (ys < hi)
        zy = np.where(own, z[np.arange(TOKENS), np.clip(ys - lo, 0, hi - lo - 1)], A(0))
        if bug == "target_from_rank0" and r != 0:
            zy = np.zeros_like(zy)  # only rank 0's masked target logit is used
        zsum = (z * c[lo:hi]).sum(axis=1, dtype=A)
        parts.append((s, zy, zsum))
    S = sum(p[0] for p in parts).astype(A)  # all_reduce(sum), one vector of 3·tokens
    ZY = sum(p[1] for p in parts).astype(A)
    Z = sum(p[2] for p in parts).astype(A)
    C = c.sum(dtype=A)
    D = (w * c[ys])[keep].sum(dtype=A)

    def loss_on(r):
        """The loss as rank r computes it from the reduced sums."""
        vocab = (SHARDS[r][1] - SHARDS[r][0]) if bug == "local_vocab" else V
        q = eps / A(vocab)
        lse = np.log(S) + m[r]
        t = w * ((A(1) - eps) * c[ys] * (lse - ZY) + q * (C * lse - Z))
        t = np.where(keep, t, A(0)).astype(A)
        if reduction == "none":
            return t
        return np.array([t.sum(dtype=A) / D if D != 0 else A(0)], dtype=A)

    loss = loss_on(0)  # R: every rank's is the same when correct

    # Backward, rank by rank, no collective.
    if reduction == "none":
        st = w * dloss
    else:
        st = w * (dloss[0] / D if D != 0 else A(0))
    st = np.where(keep, st, A(0)).astype(A)
    dlogits = []
    for r, (lo, hi) in enumerate(SHARDS):
        vocab = (hi - lo) if bug == "local_vocab" else V
        q = eps / A(vocab)
        z = logits[:, lo:hi]
        p = np.exp(z - m[r][:, None]) / S[:, None]
        K = (A(1) - eps) * c[ys] + q * C
        g = K[:, None] * p - q * c[lo:hi][None, :]
        own = keep & (ys >= lo) & (ys < hi)
        rows = np.flatnonzero(own)
        g[rows, ys[rows] - lo] -= (A(1) - eps) * c[ys[rows]]
        dlogits.append(finish(dtype, (st[:, None] * g).astype(A)))

    config = {"vocab": V, "vocab_split": {"kind": "chunk"}, "ignore_index": IGNORE,
              "label_smoothing": smoothing, "reduction": reduction}
    if weighted:
        config["class_weight"] = [float(x) for x in cls]
        config["token_weight"] = [float(x) for x in tok]
    case = sc.Case("vocab_parallel_cross_entropy", dtype, {"tokens": TOKENS, "vocab": V},
                   {"tp": P}, config, "numpy " + np.__version__)
    case.input("logits", finish(dtype, logits))
    case.input("targets", y)
    case.input("dloss", finish(dtype, dloss))
    case.output("loss", finish(dtype, loss))
    case.output_ranks("dlogits", dlogits, "S(1)")
    return case


# ---------------------------------------------------------------- embedding


def ids():
    """Ids on the shard boundaries, repeated (dW accumulates), and the padding row 5."""
    return np.array([0, 3, 4, 7, 8, 10, 3, 5], dtype=np.int64)


def embedding(dtype, bug=None):
    """The case of a NumPy vocab-parallel embedding, ranks simulated."""
    A = acc(dtype)
    rng = np.random.default_rng(11)
    w = in_dtype(dtype, rng.standard_normal((V, HIDDEN)))
    dy = in_dtype(dtype, rng.standard_normal((TOKENS, HIDDEN)))
    i = ids()
    padding = 5
    y = np.zeros((TOKENS, HIDDEN), dtype=A)
    dw = []
    for lo, hi in SHARDS:
        end = hi - 1 if bug == "mask_off_by_one" else hi  # `>= end` with an inclusive end
        own = (i >= lo) & (i < end)
        local = np.where(own, i - lo, 0)
        part = w[lo:hi][local]
        part[~own] = 0  # the output rows zeroed, not only the index
        y = y + part  # all_reduce(sum): one nonzero term per element, exact
        g = np.zeros((hi - lo, HIDDEN), dtype=A)
        rows = np.flatnonzero(own & (i != padding))
        np.add.at(g, i[rows] - lo, dy[rows])  # in token order, in acc_t<T>
        dw.append(finish(dtype, g))
    case = sc.Case("vocab_parallel_embedding", dtype,
                   {"tokens": TOKENS, "vocab": V, "hidden": HIDDEN}, {"tp": P},
                   {"vocab": V, "vocab_split": {"kind": "chunk"}, "padding_idx": padding},
                   "numpy " + np.__version__)
    case.input("ids", i)
    case.input("w", finish(dtype, w))
    case.input("dy", finish(dtype, dy))
    case.output("y", finish(dtype, y))
    case.output_ranks("dw", dw, "S(0)")
    return case


# ---------------------------------------------------------------- the checks






def tensor_lines(out):
    """The verdict's tensor lines: "  ok   dw [11, 5] S(0): ..." or "  FAIL y [8, 5] R: ..."."""
    return [l for l in out.splitlines() if l.startswith(("  ok   ", "  FAIL "))]


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
n = 0
for dtype in ("float64", "float32", "bfloat16"):
    cross_entropy(dtype, 0.125, "mean", True).write(os.path.join(good, "ce_weighted_" + dtype))
    cross_entropy(dtype, 0.0, "none", False).write(os.path.join(good, "ce_plain_" + dtype))
    embedding(dtype).write(os.path.join(good, "embedding_" + dtype))
    n += 3
code, out = compare(good)
expect("the correct implementation passes in every dtype (exit 0)",
       all_passed(code, out, n), out)
expect("the correct float32 and bfloat16 cross-entropy does round (a nonzero error)",
       "dlogits" in out and exact_tensors(out) < 2 * n, out)

# (bug, case, the tensors that must fail, words in the output)
BUGS = (
    ("local_vocab", lambda: cross_entropy("float32", 0.125, "mean", False, "local_vocab"),
     {"loss", "dlogits"}, "of the bound"),
    ("local_max", lambda: cross_entropy("float32", 0.0, "mean", False, "local_max"),
     {"loss", "dlogits"}, "of the bound"),
    ("target_from_rank0", lambda: cross_entropy("float32", 0.0, "none", False,
                                                "target_from_rank0"),
     {"loss"}, "loss: worst element"),
    ("mask_off_by_one", lambda: embedding("float32", "mask_off_by_one"), {"y", "dw"},
     "y: worst element"),
)
for bug, make, broken, words in BUGS:
    d = os.path.join(WORK, bug)
    make().write(d)
    code, out = compare(d)
    lines = tensor_lines(out)
    failed = {l.split()[1] for l in lines if l.startswith("  FAIL ")}
    expect("planted bug %s fails on %s only (exit 1)" % (bug, ", ".join(sorted(broken))),
           code == 1 and failed == broken and len(lines) == 2 and words in out, out)
    # The diagnosis: each is one of the suite's signatures (this port's smoothing with the
    # local vocabulary is PyTorch's formula with n_classes from the shard, not Megatron's
    # smoothing-local-vocab-size; its local max is the max never all_reduced, not local-max's
    # rescaled sums).
    want = {"local_vocab": "diagnosis: matches smoothing-n-classes-of-shard ",
            "local_max": "diagnosis: matches max-not-all-reduced ",
            "target_from_rank0": "diagnosis: matches target-from-rank0-only ",
            "mask_off_by_one": "diagnosis: matches mask-off-by-one-at-shard-end "}[bug]
    expect("planted bug %s is diagnosed: %s" % (bug, want.strip()), want in out, out)

bad = os.path.join(WORK, "bad")
case = cross_entropy("float32", 0.125, "mean", True)
case.config["label_smothing"] = case.config.pop("label_smoothing")
case.write(bad)
code, out = compare(bad)
expect("a misspelt config field is bad input (exit 2), naming the file and the field",
       code == 2 and "case.json: config: unknown field label_smothing" in out, out)

bad_target = os.path.join(WORK, "bad_target")
case = cross_entropy("float32", 0.0, "mean", False)
case.inputs["targets"] = np.array([0, 3, 4, 7, 8, 11, IGNORE, 5], dtype=np.int64)
case.write(bad_target)
code, out = compare(bad_target)
expect("a target outside the vocabulary is bad input (exit 2)",
       code == 2 and "targets[5]: is 11, outside [0, 11)" in out, out)

session.finish()
