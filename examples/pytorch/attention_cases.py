#!/usr/bin/env python3
"""Attention in PyTorch judged by `shardcheck compare` as context_parallel_attention: the
dense attention as torch writes it (softmax(q·kᵀ·scale + causal mask)·v with GQA's
repeat_interleave; torch 1.13 has no F.scaled_dot_product_attention), and a hand-written ring
attention (each cp rank's queries against every rank's K/V block in ring order, the blocks'
partial outputs merged with their log-sum-exp), cp ranks simulated in one process, autograd for
the backward (ring_attention.py, shared with examples/real_size/ring_attention.py), written as
cases with python/shardcheck_case.py.

    python3 examples/pytorch/attention_cases.py SHARDCHECK_BINARY WORK_DIR

What it shows (and checks, so ctest runs it: label "compare"):
  - the dense attention (cp = 1) and the ring attention (cp = 3 over 10 positions: 4, 4, 2) in
    float64 and float32, causal, 4 query heads over 2 kv heads, forward (out, lse) and backward
    (dq, dk, dv), pass;
  - two planted bugs fail on the tensors they break: the causal mask of each block aligned to
    the block's own positions instead of the global ones (every tensor), and the merge of the
    blocks rescaled by the larger of the two lse instead of their log-sum-exp (out and what
    depends on it); the first is diagnosed as the suite's cp-top-left-mask (out and lse), the
    second as its cp-merge-by-larger-lse-autograd (out, dq, dk, dv: the wrong merge with
    autograd's derivative of it);
  - FlashAttention's online softmax written in torch (ring_attention.online_attention: a running
    max over key blocks of 1 and of 4 keys, l and acc rescaled at every block, out = acc/l at the
    end) with FlashAttention-2's backward (the weights recomputed from the lse) passes under its
    declared contract ("online" with exp in float64 and float32, "exp2" with exp2 in float32;
    at blocks of 4 written {"name": ..., "key_block": 4}) and under the default; the same kernel that never rescales l fails under "online" on every
    tensor (its lse is wrong, and the backward recomputes the weights from it);
  - in bfloat16 the same dense and ring attention fail the default contract on every tensor
    (torch's CPU matmuls of small bfloat16 tensors accumulate in bfloat16) and pass with the
    declared "accumulate": "bfloat16".
Needs python3-torch (Debian's, 1.13; scripts/setup installs it).
"""

import os
import shutil
import sys

from torch_support import torch, Checks, DTYPES
from ring_attention import attention_case as case_of, online_case

BIN, WORK = sys.argv[1], sys.argv[2]
BATCH, L, H, G, D, CP = 2, 10, 4, 2, 3, 3
checks = Checks(BIN)
torch.manual_seed(20261204)


def attention_case(dtype, cp, bug=None, accumulate=None):
    q, k, v = (torch.randn(BATCH, L, n, D, dtype=dtype) for n in (H, G, G))
    dout = torch.randn(BATCH, L, H, D, dtype=dtype)
    return case_of(q, k, v, dout, cp, bug, accumulate)


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

# FlashAttention's online softmax (docs/attention.md, "The online softmax"): within its declared
# contract and within the default, which covers it; without l's rescale it fails.
for contract in ("online", None):
    d = os.path.join(WORK, "online_" + (contract or "default"))
    n = 0
    for dtype, tag in DTYPES.items():
        for exp2 in (False, True):
            if exp2 and dtype != torch.float32:
                continue  # the exp2 form's fma is emulated in float32 only
            for keys in (1, 4):
                torch.manual_seed(20261207 + keys)
                q, k, v = (torch.randn(BATCH, L, n_, D, dtype=dtype) for n_ in (H, G, G))
                dout = torch.randn(BATCH, L, H, D, dtype=dtype)
                declared = ("exp2" if exp2 else "online") if contract else None
                if declared and keys > 1:  # the kernel's key block, declared: a tighter bound
                    declared = {"name": declared, "key_block": keys}
                online_case(q, k, v, dout, keys, exp2, contract=declared).write(os.path.join(
                    d, "online_%s_%s_keys%d" % ("exp2" if exp2 else "exp", tag, keys)))
                n += 1
    out = checks.expect_passes("the online softmax in torch passes %s" % (
        "its declared contract" if contract else "the default"), d, n)
    if contract:
        checks.expect("the contract line names each declared key block of 4",
                      out.count("key blocks of at least 4 positions") == 3, out)
torch.manual_seed(20261208)
q, k, v = (torch.randn(BATCH, L, n_, D, dtype=torch.float32) for n_ in (H, G, G))
dout = torch.randn(BATCH, L, H, D, dtype=torch.float32)
d = os.path.join(WORK, "online_no_l_rescale")
online_case(q, k, v, dout, 2, bug="no_l_rescale", contract="online").write(d)
checks.expect_fails("an online softmax that never rescales l", d, ["out", "lse", "dq", "dk", "dv"])

# bfloat16: torch's CPU matmuls of small bfloat16 tensors accumulate in bfloat16, outside the
# default contract (float32 accumulation): the dense and the ring attention fail every tensor
# under the default and pass declared "accumulate": "bfloat16" (docs/compare.md, "A declared
# accumulator for attention").
for acc in (None, "bfloat16"):
    d = os.path.join(WORK, "bfloat16_" + (acc or "default"))
    for cp in (1, CP):
        torch.manual_seed(20261206 + cp)  # the same values under both contracts
        attention_case(torch.bfloat16, cp, accumulate=acc).write(
            os.path.join(d, "attention_bfloat16_cp%d" % cp))
    if acc is None:
        code, out = checks.compare(d)
        print(out)
        checks.expect("torch's bfloat16 attention fails the default contract on every tensor "
                      "(exit 1)", code == 1 and out.count("  FAIL ") == 10, out)
    else:
        out = checks.expect_passes("torch's bfloat16 attention passes its declared bfloat16 "
                                   "accumulator, dense and ring", d, 2)
        checks.expect("the contract line names the bfloat16 accumulator",
                      out.count("accumulated in bfloat16") == 2, out)

# The diagnosis: the suite's cp-top-left-mask explains out and lse (its backward keeps the right
# mask). The merge, each pair of partials weighted by exp(lse_j − the larger lse) and never
# divided by their sum, differentiated by autograd, is the suite's
# cp-merge-by-larger-lse-autograd on every tensor; cp-merge-by-larger-lse (the same forward, the
# ring backward on its merged out, as a custom ring autograd.Function's would be) explains out
# only.
for bug, bad, diagnosis in (
        ("local_causal", ["out", "lse", "dq", "dk", "dv"],
         ["diagnosis: partly matches cp-top-left-mask "]),
        ("merge_by_max", ["out", "dq", "dk", "dv"],
         ["diagnosis: matches cp-merge-by-larger-lse-autograd at rank 2 (residual ",
          "; explains out, dq, dk, dv): ",
          "partly matches cp-merge-by-larger-lse at rank 2 (residual "])):
    d = os.path.join(WORK, bug)
    attention_case(torch.float32, CP, bug).write(d)
    out = checks.expect_fails("planted bug " + bug, d, bad)
    checks.expect("planted bug %s is diagnosed: %s" % (bug, " ... ".join(diagnosis).strip()),
                  all(part in out for part in diagnosis), out)

checks.finish()
