#!/usr/bin/env python3
"""PyTorch's embedding and cross-entropy judged by `shardcheck compare` as
vocab_parallel_embedding and vocab_parallel_cross_entropy: torch's own F.embedding and
F.cross_entropy, and hand-sharded vocabulary-parallel versions written as Megatron-LM's
VocabParallelEmbedding and _VocabParallelCrossEntropy compute them (ranks simulated in one
process, the all_reduces as sums and maxima over the ranks' tensors, autograd for the backward),
written as cases with python/shardcheck_case.py.

    python3 examples/pytorch/vocab_cases.py SHARDCHECK_BINARY WORK_DIR

What it shows (and checks, so ctest runs it: label "compare"):
  - F.embedding with padding_idx and F.cross_entropy (class weights, ignore_index, label
    smoothing, mean and no reduction) in float64 and float32, forward and backward, pass at
    P = 1;
  - the hand-sharded embedding (P = 3, 11 rows split 4, 4, 3, ids on the shard edges) and
    cross-entropy (the global max, sum of exp, target logit and logit sum all_reduced; label
    smoothing over the global vocabulary) pass, each rank's dW or dlogits written;
  - two planted bugs fail on the tensors they break: label smoothing's mean over the rank's own
    vocabulary (Megatron-LM's vocab_parallel_cross_entropy used the partition's size: loss and
    dlogits fail), and the embedding's ownership mask off by one at a shard's last row (y and dw
    fail).
Needs python3-torch (Debian's, 1.13; scripts/setup installs it).
"""

import os
import shutil
import sys

from torch_support import torch, F, sc, np_of, chunk_sizes, Checks, DTYPES

BIN, WORK = sys.argv[1], sys.argv[2]
P, TOKENS, V, HIDDEN, IGNORE, PADDING = 3, 8, 11, 5, -100, 5
checks = Checks(BIN)
torch.manual_seed(20261203)
SIZES = chunk_sizes(V, P)                                   # 4, 4, 3
STARTS = [sum(SIZES[:r]) for r in range(P)]
IDS = torch.tensor([0, 3, 4, 7, 8, 10, 3, 5])               # the shard edges, a repeat, padding
TARGETS = torch.tensor([0, 3, 4, 7, 8, 10, IGNORE, 5])      # the shard edges, one ignored


def case_of(op, dtype, p, sizes, config, impl):
    return sc.Case(op, DTYPES[dtype], sizes, {"tp": p}, config,
                   "torch %s %s" % (torch.__version__, impl))


def embedding(dtype, p, bug=None):
    """F.embedding (p = 1, padding_idx) or Megatron's VocabParallelEmbedding on p ranks."""
    w = torch.randn(V, HIDDEN, dtype=dtype)
    dy = torch.randn(TOKENS, HIDDEN, dtype=dtype)
    config = {"vocab": V, "vocab_split": {"kind": "chunk"}}
    if p == 1:
        wl = w.clone().requires_grad_()
        y = F.embedding(IDS, wl, padding_idx=PADDING)
        y.backward(dy)
        config["padding_idx"] = PADDING
        shards, grads = [wl], [wl.grad]
    else:
        shards = [t.clone().requires_grad_() for t in torch.split(w, SIZES)]
        parts = []
        for start, size, wr in zip(STARTS, SIZES, shards):
            end = start + size - (1 if bug == "mask_off_by_one" else 0)
            outside = (IDS < start) | (IDS >= end)
            local = (IDS - start).masked_fill(outside, 0)
            parts.append(F.embedding(local, wr).masked_fill(outside[:, None], 0))
        y = sum(parts)  # the all_reduce over the tp ranks
        y.backward(dy)
        grads = [wr.grad for wr in shards]
    case = case_of("vocab_parallel_embedding", dtype, p,
                   {"tokens": TOKENS, "vocab": V, "hidden": HIDDEN}, config,
                   "F.embedding" if p == 1 else "VocabParallelEmbedding, hand-sharded")
    case.input("ids", IDS.numpy())
    case.input("w", np_of(w))
    case.input("dy", np_of(dy))
    case.output("y", np_of(y))
    case.output_ranks("dw", [np_of(g) for g in grads], "S(0)")
    return case


def vocab_parallel_loss(shards, eps, bug):
    """Megatron's _VocabParallelCrossEntropy on the ranks' logit columns, with label smoothing as
    torch defines it (eps spread over all V classes), the mean over the non-ignored tokens."""
    keep = TARGETS != IGNORE
    m = torch.stack([z.max(dim=1).values for z in shards]).max(dim=0).values.detach()  # MAX
    sum_exp = sum((z - m[:, None]).exp().sum(dim=1) for z in shards)                  # SUM
    target = sum(z.gather(1, (TARGETS - s).clamp(0, z.shape[1] - 1)[:, None])[:, 0] *
                 ((TARGETS >= s) & (TARGETS < s + z.shape[1])) for s, z in zip(STARTS, shards))
    lse = sum_exp.log() + m
    nll = lse - target
    if bug == "local_vocab":   # each rank's mean of -log p over its own columns only
        smooth = lse - shards[0].sum(dim=1) / shards[0].shape[1]
    else:
        smooth = lse - sum(z.sum(dim=1) for z in shards) / V
    loss = ((1 - eps) * nll + eps * smooth) * keep
    return loss.sum() / keep.sum()


def cross_entropy(dtype, p, eps, reduction="mean", weighted=False, bug=None):
    """F.cross_entropy (p = 1) or the hand-sharded vocab-parallel loss on p ranks."""
    logits = 2 * torch.randn(TOKENS, V, dtype=dtype)
    n_loss = TOKENS if reduction == "none" else 1
    dloss = torch.randn(n_loss, dtype=dtype)
    cls = torch.tensor([1, 0.5, 2, 1, 1.5, 1, 0.25, 1, 3, 1, 0.5], dtype=dtype)
    config = {"vocab": V, "vocab_split": {"kind": "chunk"}, "ignore_index": IGNORE,
              "label_smoothing": eps, "reduction": reduction}
    if p == 1:
        shards = [logits.clone().requires_grad_()]
        loss = F.cross_entropy(shards[0], TARGETS, weight=cls if weighted else None,
                               ignore_index=IGNORE, label_smoothing=eps, reduction=reduction)
        if weighted:
            config["class_weight"] = [float(c) for c in cls]
    else:
        shards = [z.clone().requires_grad_() for z in torch.split(logits, SIZES, dim=1)]
        loss = vocab_parallel_loss(shards, eps, bug)
    loss = loss.reshape(n_loss)
    loss.backward(dloss)
    case = case_of("vocab_parallel_cross_entropy", dtype, p, {"tokens": TOKENS, "vocab": V},
                   config, "F.cross_entropy" if p == 1 else "vocab-parallel, hand-sharded")
    case.input("logits", np_of(logits))
    case.input("targets", TARGETS.numpy())
    case.input("dloss", np_of(dloss))
    case.output("loss", np_of(loss))
    case.output_ranks("dlogits", [np_of(z.grad) for z in shards], "S(1)")
    return case


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
n = 0
for dtype, tag in DTYPES.items():
    cases = {"embedding": embedding(dtype, 1), "embedding_p3": embedding(dtype, P),
             "ce_weighted_smoothing": cross_entropy(dtype, 1, 0.125, weighted=True),
             "ce_none": cross_entropy(dtype, 1, 0.0, reduction="none"),
             "ce_p3_smoothing": cross_entropy(dtype, P, 0.125)}
    for name, case in cases.items():
        case.write(os.path.join(good, "%s_%s" % (name, tag)))
        n += 1
out = checks.expect_passes("torch's embedding and cross-entropy, alone and vocab-parallel, pass "
                           "in float64 and float32", good, n)
code, out = checks.compare(good, "--report", os.path.join(WORK, "report"))
checks.expect("the report is written (exit 0)",
              code == 0 and os.path.exists(os.path.join(WORK, "report", "report.md")), out)

d = os.path.join(WORK, "local_vocab")
cross_entropy(torch.float32, P, 0.125, bug="local_vocab").write(d)
checks.expect_fails("planted bug: label smoothing over the local vocabulary", d,
                    ["loss", "dlogits"])
d = os.path.join(WORK, "mask_off_by_one")
embedding(torch.float32, P, bug="mask_off_by_one").write(d)
checks.expect_fails("planted bug: the embedding mask off by one", d, ["y", "dw"])

checks.finish()
