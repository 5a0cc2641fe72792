#!/usr/bin/env python3
"""Attention in PyTorch judged by `shardcheck compare` as context_parallel_attention: the
dense attention as torch writes it (softmax(q·kᵀ·scale + causal mask)·v with GQA's
repeat_interleave; torch 1.13 has no F.scaled_dot_product_attention), and a hand-written ring
attention (each cp rank's queries against every rank's K/V block in ring order, the blocks'
partial outputs merged with their log-sum-exp), cp ranks simulated in one process, autograd for
the backward, written as cases with python/shardcheck_case.py.

    python3 examples/pytorch/attention_cases.py SHARDCHECK_BINARY WORK_DIR

What it shows (and checks, so ctest runs it: label "compare"):
  - the dense attention (cp = 1) and the ring attention (cp = 3 over 10 positions: 4, 4, 2) in
    float64 and float32, causal, 4 query heads over 2 kv heads, forward (out, lse) and backward
    (dq, dk, dv), pass;
  - two planted bugs fail on the tensors they break: the causal mask of each block aligned to
    the block's own positions instead of the global ones (every tensor), and the merge of the
    blocks rescaled by the larger of the two lse instead of their log-sum-exp (out and what
    depends on it); the first is diagnosed as the suite's cp-top-left-mask (out and lse), the
    second as its cp-merge-by-larger-lse (out: autograd differentiates the wrong merge, while the
    mutant's backward is the ring backward on its merged out, so dq, dk, dv stay unexplained).
Needs python3-torch (Debian's, 1.13; scripts/setup installs it).
"""

import math
import os
import shutil
import sys

from torch_support import torch, sc, np_of, chunk_sizes, Checks, DTYPES

BIN, WORK = sys.argv[1], sys.argv[2]
BATCH, L, H, G, D, CP = 2, 10, 4, 2, 3, 3
checks = Checks(BIN)
torch.manual_seed(20261204)
SCALE = 1 / math.sqrt(D)


def block(q, k, v, q_pos, k_pos):
    """One block: q [b, lq, h, d] against k, v [b, lk, g, d] at these global positions, causal
    (every query sees at least one key). Returns the block's out [b, lq, h, d] and lse
    [b, h, lq]."""
    k = k.repeat_interleave(H // G, dim=2)  # query head i reads kv head i // (h/g)
    v = v.repeat_interleave(H // G, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * SCALE
    s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", torch.exp(s - lse[..., None]), v), lse


def merge(o1, l1, o2, l2, bug):
    """The log-sum-exp merge of two partial results of the same queries (FlashAttention-2's
    rescaling): lse = log(e^l1 + e^l2), out = e^(l1 − lse)·o1 + e^(l2 − lse)·o2."""
    lse = torch.logaddexp(l1, l2)
    ref = torch.maximum(l1, l2) if bug == "merge_by_max" else lse  # the bug: the larger lse
    w1 = torch.exp(l1 - ref).transpose(1, 2)[..., None]
    w2 = torch.exp(l2 - ref).transpose(1, 2)[..., None]
    return w1 * o1 + w2 * o2, lse


def ring_attention(q, k, v, cp, bug=None):
    """Rank r's queries against the K/V block of rank (r − s) mod cp at ring step s, merged; a
    block none of whose keys the queries see (a later rank's, under the causal mask) is skipped,
    as ring attention kernels do."""
    sizes = chunk_sizes(L, cp)
    pos = torch.split(torch.arange(L), sizes)
    qs, ks, vs = (torch.split(t, sizes, dim=1) for t in (q, k, v))
    outs, lses = [], []
    for r in range(cp):
        o = lse = None
        for s in range(cp):
            j = (r - s) % cp
            q_pos, k_pos = pos[r], pos[j]
            if bug == "local_causal":  # positions within the blocks, not in the sequence
                q_pos, k_pos = q_pos - q_pos[0], k_pos - k_pos[0]
            seen = (k_pos[None, :] <= q_pos[:, None]).any(dim=1)
            if not bool(seen.any()):
                continue
            assert bool(seen.all()), "contiguous causal blocks are seen by every query or none"
            ob, lb = block(qs[r], ks[j], vs[j], q_pos, k_pos)
            o, lse = (ob, lb) if o is None else merge(o, lse, ob, lb, bug)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs, dim=1), torch.cat(lses, dim=2)


def attention_case(dtype, cp, bug=None):
    q, k, v = (torch.randn(BATCH, L, n, D, dtype=dtype) for n in (H, G, G))
    dout = torch.randn(BATCH, L, H, D, dtype=dtype)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    if cp == 1:
        out, lse = block(*leaves, torch.arange(L), torch.arange(L))
    else:
        out, lse = ring_attention(*leaves, cp, bug)
    out.backward(dout)
    config = {"attention": {"q_heads": H, "kv_heads": G, "head_dim": D, "scale": 0,
                            "mask": {"kind": "causal", "key_lengths": []}},
              "cp": {"seq_len": L, "layout": "contiguous", "split": {"kind": "chunk"},
                     "algorithm": "ring"}}
    impl = "torch %s, %s" % (torch.__version__, "dense" if cp == 1 else "ring, hand-written")
    case = sc.Case("context_parallel_attention", DTYPES[dtype],
                   {"batch": BATCH, "seq_len": L, "q_heads": H, "kv_heads": G, "head_dim": D},
                   {"cp": cp}, config, impl)
    for name, t in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        case.input(name, np_of(t))
    case.output("out", np_of(out))
    for name, t in zip(("dq", "dk", "dv"), leaves):
        case.output(name, np_of(t.grad))
    case.output("lse", np_of(lse), elem="acc")
    return case


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
n = 0
for dtype, tag in DTYPES.items():
    for cp in (1, CP):
        attention_case(dtype, cp).write(os.path.join(good, "attention_%s_cp%d" % (tag, cp)))
        n += 1
checks.expect_passes("dense and ring attention in torch pass in float64 and float32", good, n)
code, out = checks.compare(good, "--report", os.path.join(WORK, "report"))
checks.expect("the report is written (exit 0)",
              code == 0 and os.path.exists(os.path.join(WORK, "report", "report.md")), out)

# The diagnosis: the suite's cp-top-left-mask explains out and lse (its backward keeps the right
# mask). The merge, each pair of partials weighted by exp(lse_j − the larger lse) and never
# divided by their sum, is the suite's cp-merge-by-larger-lse in the forward (out); autograd
# differentiates that wrong merge, while the mutant's backward is the ring backward on its merged
# out (as a custom ring autograd.Function's would be), so dq, dk, dv are not explained.
for bug, bad, diagnosis in (
        ("local_causal", ["out", "lse", "dq", "dk", "dv"],
         ["diagnosis: partly matches cp-top-left-mask "]),
        ("merge_by_max", ["out", "dq", "dk", "dv"],
         ["diagnosis: partly matches cp-merge-by-larger-lse at rank 2 (residual ",
          "; explains out; not dq, dk, dv): "])):
    d = os.path.join(WORK, bug)
    attention_case(torch.float32, CP, bug).write(d)
    out = checks.expect_fails("planted bug " + bug, d, bad)
    checks.expect("planted bug %s is diagnosed: %s" % (bug, " ... ".join(diagnosis).strip()),
                  all(part in out for part in diagnosis), out)

checks.finish()
