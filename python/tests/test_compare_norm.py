#!/usr/bin/env python3
"""End to end: cases written with python/shardcheck_case.py from a NumPy sequence-parallel
LayerNorm and RMSNorm (tokens split over the ranks, ranks simulated in one process), judged by
`shardcheck compare`.

    python3 python/tests/test_compare_norm.py SHARDCHECK_BINARY WORK_DIR

The NumPy version follows the op's contract (lib/ops/norm/norm.hpp): every step one operation in
the accumulator (float64 for float64, float32 otherwise), eps converted to it once, the biased
variance, rstd = 1/sqrt(var + eps); y and dx rounded once to the dtype; each rank's dgamma/dbeta
a sum over its tokens rounded to the dtype, then summed over the ranks in the dtype. The correct
version passes (exit 0) in float64, float32 and bfloat16, LayerNorm and RMSNorm, with global and
per-rank outputs and an empty rank; three planted bugs fail (exit 1) on the tensors they break:
dgamma/dbeta never summed over the sequence-parallel ranks (each rank reports its local sum:
dgamma, dbeta fail), eps added outside the sqrt and the variance computed with N-1 (rstd, so
xhat, is off: y, dx, dgamma fail, dbeta passes; eps outside the sqrt is an error of ~1e-5
relative that torch.testing.assert_close's float32 default passes); a misspelt kind is bad input
(exit 2). Then Megatron-LM's sequence-parallel block (megatron_sp_block) ported the same way:
it passes in the three dtypes, and two planted bugs are diagnosed by name. ctest runs it (label
"compare").
"""

import os
import shutil
import sys

from compare_support import Session as Checks, failing_tensors  # puts python/ on the path

try:
    import numpy as np
except ImportError:
    sys.exit("numpy is missing: scripts/setup installs python3-numpy (Debian)")

import shardcheck_case as sc  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
P, TOKENS, HIDDEN, EPS = 3, 7, 6, 1e-5
checks = Checks(BIN)
compare, expect = checks.compare, checks.expect


def token_cuts(sizes):
    """[(lo, hi)] of each rank's tokens; sizes None: torch.chunk's (ceil(n/P) each, the
    trailing ones smaller)."""
    c = -(-TOKENS // P)
    sizes = sizes or [max(0, min(c, TOKENS - r * c)) for r in range(P)]
    ends = np.cumsum(sizes)
    return list(zip(ends - sizes, ends))


def to_dtype(dtype, a):
    """Rounded to the dtype; bfloat16 held as float32 values."""
    if dtype == "bfloat16":
        return sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(a))
    return a


def data(dtype, kind, seed):
    """x, gamma, beta (None without), dy: normal draws in the dtype (bfloat16 as float32)."""
    rng = np.random.default_rng(seed)
    acc = np.float64 if dtype == "float64" else np.float32
    x = to_dtype(dtype, (rng.standard_normal((TOKENS, HIDDEN)) * 2 + 0.5).astype(acc))
    gamma = to_dtype(dtype, (1 + 0.25 * rng.standard_normal(HIDDEN)).astype(acc))
    beta = to_dtype(dtype, rng.standard_normal(HIDDEN).astype(acc)) if kind == "layer_norm" \
        else None
    dy = to_dtype(dtype, rng.standard_normal((TOKENS, HIDDEN)).astype(acc))
    return x, gamma, beta, dy


def norm_rank(kind, x, gamma, beta, dy, eps, bug):
    """One rank's tokens, in the accumulator (x's type): y, dx, and the local sums dgamma,
    dbeta over its tokens, each step one operation as norm.hpp writes it."""
    acc = x.dtype.type
    n = acc(HIDDEN)
    eps = acc(eps)
    if kind == "rms_norm":
        d = x
        var = np.sum(x * x, axis=1, keepdims=True) / n
    else:
        mean = np.sum(x, axis=1, keepdims=True) / n
        d = x - mean
        var = np.sum(d * d, axis=1, keepdims=True) / (acc(HIDDEN - 1) if bug == "var_n_minus_1"
                                                      else n)
    if bug == "eps_outside_sqrt":
        rstd = acc(1) / (np.sqrt(var) + eps)
    else:
        rstd = acc(1) / np.sqrt(var + eps)
    xhat = d * rstd
    y = xhat * gamma + beta if beta is not None else xhat * gamma
    g = dy * gamma
    c2 = np.sum(g * xhat, axis=1, keepdims=True) / n
    if kind == "rms_norm":
        dx = (g - xhat * c2) * rstd
    else:
        c1 = np.sum(g, axis=1, keepdims=True) / n
        dx = ((g - c1) - xhat * c2) * rstd
    dgamma = np.sum(dy * xhat, axis=0)
    dbeta = np.sum(dy, axis=0) if beta is not None else None
    return y, dx, dgamma, dbeta


def sum_in_dtype(dtype, parts):
    """The all_reduce: the ranks' pieces summed in the dtype, each step rounded to it."""
    total = parts[0]
    for p in parts[1:]:
        total = to_dtype(dtype, total + p)
    return total


def sequence_parallel_norm(dtype, kind, split=None, per_rank=False, bug=None, seed=1,
                           contract="two_pass"):
    """The norm on P simulated ranks, each its tokens (`split`: the token counts; default the
    chunk split); dgamma/dbeta all-reduced unless the bug is `unreduced`."""
    x, gamma, beta, dy = data(dtype, kind, seed)
    ranks = [norm_rank(kind, x[lo:hi], gamma, beta, dy[lo:hi], EPS, bug)
             for lo, hi in token_cuts(split)]
    ys = [to_dtype(dtype, r[0]) for r in ranks]
    dxs = [to_dtype(dtype, r[1]) for r in ranks]
    names = ["dgamma"] + (["dbeta"] if beta is not None else [])
    grads = {}
    for i, name in enumerate(names):
        local = [to_dtype(dtype, r[2 + i]) for r in ranks]
        total = sum_in_dtype(dtype, local)
        grads[name] = local if bug == "unreduced" else [total] * P
    config = {"kind": kind, "eps": EPS}
    if split:
        config["token_split"] = {"kind": "explicit", "sizes": list(split)}
    # This port forms xhat as (x - mean)·rstd: it declares the library's contract, two_pass, for
    # the tightest bound (the default also covers PyTorch's fma order, and is looser).
    case = sc.Case("sequence_parallel_norm", dtype, {"tokens": TOKENS, "hidden": HIDDEN},
                   {"tp": P}, config, "numpy " + np.__version__, contract=contract)
    case.input("x", x)
    case.input("gamma", gamma)
    if beta is not None:
        case.input("beta", beta)
    case.input("dy", dy)
    if per_rank:
        case.output_ranks("y", ys, "S(0)[explicit[%s]]" % ",".join(map(str, split))
                          if split else "S(0)")
        case.output_ranks("dx", dxs)
    else:
        case.output("y", np.concatenate(ys, axis=0))
        case.output("dx", np.concatenate(dxs, axis=0))
    for name in names:
        case.output_ranks(name, grads[name], "R")
    return case


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
n_good = 0
for dtype in ("float64", "float32", "bfloat16"):
    for kind in ("layer_norm", "rms_norm"):
        sequence_parallel_norm(dtype, kind).write(os.path.join(good, "%s_%s" % (kind, dtype)))
        sequence_parallel_norm(dtype, kind, split=[3, 0, 4], per_rank=True, seed=2).write(
            os.path.join(good, "%s_%s_empty_rank" % (kind, dtype)))
        n_good += 2
checks.expect_correct_cases(
    good, n_good, 2 * n_good,
    "the correct implementation passes in float64, float32, bfloat16 (exit 0)",
    "the correct float32 and bfloat16 results do round (a nonzero error)")

# Planted bugs: (bug, kind, failing tensors, words in the output).
for bug, kind, bad, words in (
        ("unreduced", "layer_norm", ("dgamma", "dbeta"), "dgamma"),
        ("unreduced", "rms_norm", ("dgamma",), "dgamma"),
        ("eps_outside_sqrt", "layer_norm", ("y", "dx", "dgamma"), "assert_close: pass"),
        ("eps_outside_sqrt", "rms_norm", ("y", "dx", "dgamma"), "of the bound"),
        ("var_n_minus_1", "layer_norm", ("y", "dx", "dgamma"), "of the bound")):
    d = os.path.join(WORK, "%s_%s" % (bug, kind))
    sequence_parallel_norm("float32", kind, bug=bug).write(d)
    code, out = compare(d)
    failing = failing_tensors(out)
    expect("planted bug %s (%s) fails on %s (exit 1)" % (bug, kind, ", ".join(bad)),
           code == 1 and all(("FAIL " + t + " ") in out for t in bad) and words in out, out)
    # eps outside the sqrt and N-1 change rstd, so xhat: y, dx and dgamma; dbeta = Σ dy holds.
    expect("planted bug %s (%s) leaves the other tensors passing" % (bug, kind),
           failing == sorted(bad), out)
    # The diagnosis: unreduced parameter gradients are a known signature; eps outside the sqrt
    # partly matches the suite's (its y, not the rest of this port's backward); N - 1 is none.
    want = {"unreduced": "diagnosis: matches param-grads-not-reduced ",
            "eps_outside_sqrt": "diagnosis: partly matches eps-outside-sqrt ",
            "var_n_minus_1": "diagnosis: matches variance-n-minus-1 "}[bug]
    expect("planted bug %s (%s) is diagnosed: %s" % (bug, kind, want.strip()), want in out, out)

# Under the default contract, which also covers PyTorch's fma(x, rstd, -rstd*mean) order, the
# subtle eps-outside-the-sqrt bug still fails y and dx, and dgamma falls within the wider bound.
d = os.path.join(WORK, "eps_outside_sqrt_default_contract")
sequence_parallel_norm("float32", "layer_norm", bug="eps_outside_sqrt", contract=None).write(d)
code, out = compare(d)
expect("eps outside the sqrt under the default contract fails on y and dx only (exit 1)",
       code == 1 and failing_tensors(out) == ["dx", "y"], out)

# Megatron-LM's sequence-parallel block (megatron_sp_block): the SP norm on each rank's tokens,
# g (all_gather of z along tokens), the column-parallel fc1 and row-parallel fc2 without biases,
# ḡ (reduce_scatter of fc2's partial products); its backward is the conjugates: ḡ's all_gather
# of dy, fc2's and fc1's backward, g's reduce_scatter of the partial dz, the norm's backward and
# the all_reduce of dgamma/dbeta. Tokens split [3, 0, 4], ffn 5 split [2, 2, 1]. Each product
# in the accumulator (NumPy's float32 or float64 matmul), rounded once to the dtype; each sum
# over the ranks in the dtype.
FFN, BLOCK_TOKENS, BLOCK_FFN = 5, [3, 0, 4], [2, 2, 1]


def cuts(sizes):
    ends = np.cumsum(sizes)
    return list(zip(ends - sizes, ends))


def sp_block(dtype, kind, bug=None, seed=3):
    """The block on P simulated ranks; `bug`: "unreduced" (dgamma/dbeta never all-reduced) or
    "g_backward_no_reduce" (g's backward keeps each rank's rows of its own partial dz)."""
    x, gamma, beta, dy = data(dtype, kind, seed)
    acc = x.dtype.type
    rng = np.random.default_rng(seed + 100)
    w1 = to_dtype(dtype, (0.5 * rng.standard_normal((FFN, HIDDEN))).astype(acc))
    w2 = to_dtype(dtype, (0.5 * rng.standard_normal((HIDDEN, FFN))).astype(acc))
    tc, fc = cuts(BLOCK_TOKENS), cuts(BLOCK_FFN)
    zero = np.zeros_like(x)
    z = np.concatenate([to_dtype(dtype, norm_rank(kind, x[lo:hi], gamma, beta, zero[lo:hi],
                                                  EPS, None)[0]) for lo, hi in tc])  # g
    a = [to_dtype(dtype, z @ w1[lo:hi].T) for lo, hi in fc]                 # fc1, [T, F_r]
    y = sum_in_dtype(dtype, [to_dtype(dtype, a[r] @ w2[:, lo:hi].T)         # fc2, then ḡ
                             for r, (lo, hi) in enumerate(fc)])
    da = [to_dtype(dtype, dy @ w2[:, lo:hi]) for lo, hi in fc]              # fc2 backward
    dw2 = np.concatenate([to_dtype(dtype, dy.T @ a[r]) for r in range(P)], axis=1)
    dz_parts = [to_dtype(dtype, da[r] @ w1[lo:hi]) for r, (lo, hi) in enumerate(fc)]
    dw1 = np.concatenate([to_dtype(dtype, da[r].T @ z) for r in range(P)], axis=0)
    dz = sum_in_dtype(dtype, dz_parts)                                      # g backward
    ranks = []
    for r, (lo, hi) in enumerate(tc):
        up = dz_parts[r][lo:hi] if bug == "g_backward_no_reduce" else dz[lo:hi]
        ranks.append(norm_rank(kind, x[lo:hi], gamma, beta, up, EPS, None))
    case = sc.Case("megatron_sp_block", dtype, {"tokens": TOKENS, "hidden": HIDDEN, "ffn": FFN},
                   {"tp": P}, {"norm": {"kind": kind, "eps": EPS, "token_split":
                                        {"kind": "explicit", "sizes": BLOCK_TOKENS}},
                               "ffn_split": {"kind": "explicit", "sizes": BLOCK_FFN}},
                   "numpy " + np.__version__, contract="two_pass")
    for name, t in (("x", x), ("gamma", gamma), ("beta", beta), ("w1", w1), ("w2", w2),
                    ("dy", dy)):
        if t is not None:
            case.input(name, t)
    case.output("y", y)
    case.output("dx", np.concatenate([to_dtype(dtype, r[1]) for r in ranks], axis=0))
    for i, name in enumerate(["dgamma"] + (["dbeta"] if beta is not None else [])):
        local = [to_dtype(dtype, r[2 + i]) for r in ranks]
        case.output_ranks(name, local if bug == "unreduced" else
                          [sum_in_dtype(dtype, local)] * P, "R")
    case.output("dw1", dw1)
    case.output("dw2", dw2)
    return case


blocks = os.path.join(WORK, "sp_block")
for dtype in ("float64", "float32", "bfloat16"):
    for kind in ("layer_norm", "rms_norm"):
        sp_block(dtype, kind).write(os.path.join(blocks, "%s_%s" % (kind, dtype)))
checks.expect_correct_cases(
    blocks, 6, 6, "the NumPy SP block passes in float64, float32, bfloat16 (exit 0)",
    "the correct SP block's float32 and bfloat16 results do round (a nonzero error)")
for bug, bad, want in (
        ("unreduced", ["dbeta", "dgamma"], "diagnosis: matches param-grads-not-reduced "),
        ("g_backward_no_reduce", ["dbeta", "dgamma", "dx"],
         "diagnosis: matches g-backward-split-without-reduce ")):
    d = os.path.join(WORK, "sp_block_" + bug)
    sp_block("float32", "layer_norm", bug=bug).write(d)
    code, out = compare(d)
    expect("the SP block's planted bug %s fails on %s (exit 1)" % (bug, ", ".join(bad)),
           code == 1 and failing_tensors(out) == bad, out)
    expect("the SP block's planted bug %s is diagnosed: %s" % (bug, want.strip()), want in out,
           out)

bad_dir = os.path.join(WORK, "bad")
case = sequence_parallel_norm("float32", "rms_norm")
case.config = {"kind": "rmsnorm"}
case.write(bad_dir)
code, out = compare(bad_dir)
expect("a misspelt kind is bad input (exit 2), naming the file and the field",
       code == 2 and "case.json: config.kind" in out and "rms_norm" in out, out)

checks.finish()
