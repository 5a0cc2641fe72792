#!/usr/bin/env python3
"""PyTorch's LayerNorm and an RMSNorm judged by `shardcheck compare` as sequence_parallel_norm:
torch's own F.layer_norm, Llama's RMSNorm written in torch, and a hand-sharded
sequence-parallel version of each (Megatron-LM's: each rank normalizes its tokens, the
replicated weight's gradients summed over the ranks), ranks simulated in one process, autograd
for the backward, written as cases with python/shardcheck_case.py.

    python3 examples/pytorch/norm_cases.py SHARDCHECK_BINARY WORK_DIR

What it shows (and checks, so ctest runs it: label "compare"):
  - F.layer_norm (torch's CPU kernel) and the RMSNorm in float64 and float32, forward and
    backward, pass at P = 1 and sequence-parallel at P = 3 over 7 tokens (3, 3, 1) and over an
    explicit split with an empty rank (4, 0, 3), every rank's dgamma/dbeta written;
  - a planted bug fails on the tensors it breaks: the weight gradients never summed over the
    sequence-parallel ranks (each rank keeps its local sum: Megatron-LM's
    sequence_parallel LayerNorm bug, dgamma and dbeta fail, y and dx pass);
  - Megatron-LM's sequence-parallel block (megatron_sp_block: the SP norm, g, column-parallel
    fc1, row-parallel fc2, ḡ) hand-sharded in torch over P = 3 (tokens 3, 0, 4; ffn 2, 2, 1),
    LayerNorm and RMSNorm, float64 and float32, passes; its two planted bugs fail and are
    diagnosed: dgamma/dbeta never summed (param-grads-not-reduced) and g's backward keeping each
    rank's rows of its own partial dz (g-backward-split-without-reduce);
  - F.layer_norm declared with its own contract, "welford" (torch's CPU RowwiseMoments: Welford
    updates merged by Chan's formula), passes in float64 and float32, sequence-parallel and at
    hidden = 1;
  - the report's tolerance table for all of them.
Needs python3-torch (Debian's, 1.13; scripts/setup installs it).
"""

import os
import shutil
import sys

from torch_support import torch, F, sc, np_of, chunk_sizes, Checks, DTYPES

BIN, WORK = sys.argv[1], sys.argv[2]
TOKENS, HIDDEN, EPS = 7, 12, 1e-5
checks = Checks(BIN)
torch.manual_seed(20261202)


def rms_norm(x, weight, eps):
    """Llama's RMSNorm (LlamaRMSNorm.forward): x·rsqrt(mean(x²) + eps)·weight."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def inputs(dtype):
    x = torch.randn(TOKENS, HIDDEN, dtype=dtype) * 2 + 0.5
    gamma = 1 + 0.25 * torch.randn(HIDDEN, dtype=dtype)
    beta = torch.randn(HIDDEN, dtype=dtype)
    dy = torch.randn(TOKENS, HIDDEN, dtype=dtype)
    return x, gamma, beta, dy


def sequence_parallel(kind, dtype, p, split=None, bug=None, contract=None):
    """The norm on p simulated ranks, each its rows of the tokens (split: their counts, default
    torch.chunk's); each rank's dgamma (dbeta) is its local sum, all_reduced over the ranks
    unless the bug is "unreduced"."""
    x, gamma, beta, dy = inputs(dtype)
    if kind == "rms_norm":
        beta = None
    sizes = split or chunk_sizes(TOKENS, p)
    ys, dxs, local = [], [], []
    for xr, dyr in zip(torch.split(x, sizes), torch.split(dy, sizes)):
        xl, gl = xr.clone().requires_grad_(), gamma.clone().requires_grad_()
        bl = beta.clone().requires_grad_() if beta is not None else None
        if kind == "rms_norm":
            y = rms_norm(xl, gl, EPS)
        else:
            y = F.layer_norm(xl, (HIDDEN,), gl, bl, EPS)
        y.backward(dyr)
        ys.append(y.detach())
        dxs.append(xl.grad)
        local.append([gl.grad] + ([bl.grad] if bl is not None else []))
    names = ["dgamma"] + (["dbeta"] if beta is not None else [])
    config = {"kind": kind, "eps": EPS}
    if split:
        config["token_split"] = {"kind": "explicit", "sizes": list(split)}
    impl = "torch %s %s" % (torch.__version__, "RMSNorm (Llama)" if kind == "rms_norm"
                            else "F.layer_norm")
    case = sc.Case("sequence_parallel_norm", DTYPES[dtype], {"tokens": TOKENS, "hidden": HIDDEN},
                   {"tp": p}, config, impl + ("" if p == 1 else ", hand-sharded"),
                   contract=contract)
    for name, t in (("x", x), ("gamma", gamma), ("beta", beta), ("dy", dy)):
        if t is not None:
            case.input(name, np_of(t))
    case.output("y", np_of(torch.cat(ys)))
    case.output("dx", np_of(torch.cat(dxs)))
    for i, name in enumerate(names):
        parts = [g[i] for g in local]
        total = parts[0]
        for g in parts[1:]:
            total = total + g  # the all_reduce over the sequence-parallel ranks
        per_rank = parts if bug == "unreduced" else [total] * p
        case.output_ranks(name, [np_of(t) for t in per_rank], "R")
    return case


def layer_norm_hidden_1(dtype, contract=None):
    """F.layer_norm over hidden = 1, where xhat is exactly 0: torch's CPU kernel forms it as
    fma(x, rstd, -rstd*mean), which leaves about u·rstd·|x| (docs/compare.md, "Contract")."""
    x = torch.randn(TOKENS, 1, dtype=dtype) * 2 + 0.5
    gamma, beta = torch.full((1,), 1.25, dtype=dtype), torch.full((1,), -0.5, dtype=dtype)
    dy = torch.randn(TOKENS, 1, dtype=dtype)
    xl, gl, bl = (t.clone().requires_grad_() for t in (x, gamma, beta))
    y = F.layer_norm(xl, (1,), gl, bl, EPS)
    y.backward(dy)
    case = sc.Case("sequence_parallel_norm", DTYPES[dtype], {"tokens": TOKENS, "hidden": 1},
                   {"tp": 1}, {"kind": "layer_norm", "eps": EPS},
                   "torch %s F.layer_norm" % torch.__version__, contract=contract)
    for name, t in (("x", x), ("gamma", gamma), ("beta", beta), ("dy", dy)):
        case.input(name, np_of(t))
    for name, t in (("y", y.detach()), ("dx", xl.grad), ("dgamma", gl.grad), ("dbeta", bl.grad)):
        case.output(name, np_of(t))
    return case


# Megatron-LM's sequence-parallel block (megatron_sp_block; docs/norm.md): the SP norm on each
# rank's tokens, g (all_gather of z along tokens), the column-parallel fc1 and row-parallel fc2
# without biases, ḡ (reduce_scatter of fc2's partial products). Its backward is autograd's: each
# rank's fc1 reads the gathered z, so autograd sums the ranks' partial dz into each z_r (g's
# reduce_scatter), and each rank's norm weights are its own leaves, summed over the ranks (the
# all_reduce of dgamma/dbeta). Tokens split [3, 0, 4], ffn 5 split [2, 2, 1].
FFN, BLOCK_TOKENS, BLOCK_FFN = 5, [3, 0, 4], [2, 2, 1]


def sp_block(kind, dtype, bug=None):
    """The block on 3 simulated ranks; `bug`: "unreduced" (dgamma/dbeta never all-reduced) or
    "g_backward_no_reduce" (g's backward keeps each rank's rows of its own partial dz: rank r's
    fc1 sees the other ranks' rows of z detached)."""
    x, gamma, beta, dy = inputs(dtype)
    if kind == "rms_norm":
        beta = None
    w1 = 0.5 * torch.randn(FFN, HIDDEN, dtype=dtype)
    w2 = 0.5 * torch.randn(HIDDEN, FFN, dtype=dtype)
    p = len(BLOCK_TOKENS)
    xs = [t.clone().requires_grad_() for t in torch.split(x, BLOCK_TOKENS)]
    gs = [gamma.clone().requires_grad_() for _ in range(p)]
    bs = [beta.clone().requires_grad_() if beta is not None else None for _ in range(p)]
    zs = [rms_norm(xr, gr, EPS) if kind == "rms_norm"
          else F.layer_norm(xr, (HIDDEN,), gr, br, EPS) for xr, gr, br in zip(xs, gs, bs)]
    w1s = [t.clone().requires_grad_() for t in torch.split(w1, BLOCK_FFN)]
    w2s = [t.clone().requires_grad_() for t in torch.split(w2, BLOCK_FFN, dim=1)]
    y = None
    for r in range(p):
        z = torch.cat([zs[s] if s == r or bug != "g_backward_no_reduce" else zs[s].detach()
                       for s in range(p)])                           # g: all_gather
        part = (z @ w1s[r].t()) @ w2s[r].t()                          # fc1, fc2 on rank r
        y = part if y is None else y + part                           # ḡ: reduce_scatter's sum
    y.backward(dy)
    config = {"norm": {"kind": kind, "eps": EPS,
                       "token_split": {"kind": "explicit", "sizes": BLOCK_TOKENS}},
              "ffn_split": {"kind": "explicit", "sizes": BLOCK_FFN}}
    case = sc.Case("megatron_sp_block", DTYPES[dtype],
                   {"tokens": TOKENS, "hidden": HIDDEN, "ffn": FFN}, {"tp": p}, config,
                   "torch %s, hand-sharded SP block" % torch.__version__)
    for name, t in (("x", x), ("gamma", gamma), ("beta", beta), ("w1", w1), ("w2", w2),
                    ("dy", dy)):
        if t is not None:
            case.input(name, np_of(t))
    case.output("y", np_of(y))
    case.output("dx", np_of(torch.cat([xr.grad for xr in xs])))
    for name, leaves in (("dgamma", gs), ("dbeta", bs)):
        if leaves[0] is None:
            continue
        local = [t.grad for t in leaves]
        total = local[0]
        for g in local[1:]:
            total = total + g  # the all_reduce over the sequence-parallel ranks
        case.output_ranks(name, [np_of(t) for t in (local if bug == "unreduced"
                                                     else [total] * p)], "R")
    case.output("dw1", np_of(torch.cat([t.grad for t in w1s])))
    case.output("dw2", np_of(torch.cat([t.grad for t in w2s], dim=1)))
    return case


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
n = 0
for dtype, tag in DTYPES.items():
    for kind in ("layer_norm", "rms_norm"):
        for p, split in ((1, None), (3, None), (3, [4, 0, 3])):
            name = "%s_%s_p%d%s" % (kind, tag, p, "_empty_rank" if split else "")
            sequence_parallel(kind, dtype, p, split).write(os.path.join(good, name))
            n += 1
out = checks.expect_passes("torch's LayerNorm and RMSNorm, alone and sequence-parallel, pass in "
                           "float64 and float32", good, n)
checks.expect("the float32 cases do round (a nonzero error)", out.count("max err 0,") < 4 * n,
              out)
code, out = checks.compare(good, "--report", os.path.join(WORK, "report"))
checks.expect("the report is written (exit 0)",
              code == 0 and os.path.exists(os.path.join(WORK, "report", "report.md")), out)

# torch's CPU LayerNorm takes its mean and variance from RowwiseMoments (Welford updates in
# vector lanes, the lanes' states merged by Chan's AddMoments in a cascade) and forms xhat as
# fma(x, rstd, -rstd*mean): its own contract is "welford" (docs/compare.md, "Contract").
wel = os.path.join(WORK, "welford")
m = 0
for dtype, tag in DTYPES.items():
    for p, split in ((1, None), (3, [4, 0, 3])):
        sequence_parallel("layer_norm", dtype, p, split, contract="welford").write(
            os.path.join(wel, "%s_p%d" % (tag, p)))
        m += 1
    layer_norm_hidden_1(dtype, "welford").write(os.path.join(wel, tag + "_hidden_1"))
    m += 1
out = checks.expect_passes("torch's LayerNorm declared welford (its RowwiseMoments) passes in "
                           "float64 and float32, sequence-parallel and at hidden = 1", wel, m)
checks.expect("the verdicts name the welford contract", out.count("contract welford") == m, out)

for kind, bad in (("layer_norm", ["dgamma", "dbeta"]), ("rms_norm", ["dgamma"])):
    d = os.path.join(WORK, "unreduced_" + kind)
    sequence_parallel(kind, torch.float32, 3, bug="unreduced").write(d)
    checks.expect_fails("planted bug: %s weight gradients never summed over the ranks" % kind, d,
                        bad)

blocks = os.path.join(WORK, "sp_block")
for dtype, tag in DTYPES.items():
    for kind in ("layer_norm", "rms_norm"):
        sp_block(kind, dtype).write(os.path.join(blocks, "%s_%s" % (kind, tag)))
checks.expect_passes("the hand-sharded torch SP block passes in float64 and float32", blocks, 4)
for bug, bad, want in (
        ("unreduced", ["dgamma", "dbeta"], "diagnosis: matches param-grads-not-reduced "),
        ("g_backward_no_reduce", ["dx", "dgamma", "dbeta"],
         "diagnosis: matches g-backward-split-without-reduce ")):
    d = os.path.join(WORK, "sp_block_" + bug)
    sp_block("layer_norm", torch.float32, bug=bug).write(d)
    out = checks.expect_fails("planted bug in the torch SP block: " + bug, d, bad)
    checks.expect("the torch SP block's planted bug %s is diagnosed: %s" % (bug, want.strip()),
                  want in out, out)

# LayerNorm at hidden = 1 under the default contract, which covers both xhat orders: passes in
# float64 and float32; declared as the library's two_pass order it fails (y about 160x, dgamma
# about 1e17x its bound: torch's fma order is not that contract); declared as fused_rstd_mean
# it passes (and as welford, above); an unknown contract is bad input.
h1 = os.path.join(WORK, "hidden_1")
for dtype, tag in DTYPES.items():
    layer_norm_hidden_1(dtype).write(os.path.join(h1, tag))
checks.expect_passes("torch's LayerNorm at hidden = 1 under the default contract", h1, 2)
d = os.path.join(WORK, "hidden_1_two_pass")
layer_norm_hidden_1(torch.float64, "two_pass").write(d)
checks.expect_fails("torch's LayerNorm at hidden = 1 judged as two_pass", d, ["dgamma", "y"])
d = os.path.join(WORK, "hidden_1_fused")
layer_norm_hidden_1(torch.float64, "fused_rstd_mean").write(d)
checks.expect_passes("torch's LayerNorm at hidden = 1 judged as fused_rstd_mean", d, 1)
d = os.path.join(WORK, "hidden_1_kahan")
layer_norm_hidden_1(torch.float64, "kahan").write(d)
code, out = checks.compare(d)
checks.expect("an unknown contract is bad input (exit 2) naming the field and the contracts",
              code == 2 and "contract:" in out and "fused_rstd_mean" in out and "welford" in out,
              out)

checks.finish()
