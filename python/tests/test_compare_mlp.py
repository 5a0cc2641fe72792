#!/usr/bin/env python3
"""End to end: cases written with python/shardcheck_case.py from a NumPy Megatron ParallelMLP with
swiglu (column-parallel fused fc1, row-parallel fc2, ranks simulated in one process), judged by
`shardcheck compare`.

    python3 python/tests/test_compare_mlp.py SHARDCHECK_BINARY WORK_DIR

The NumPy version follows the op's contract (lib/ops/mlp/mlp.hpp): each dot in the accumulator
(float64 for float64, float32 otherwise) rounded once to the dtype, biases added after in the
dtype, silu(g) = g/(1 + exp(-g)) and its derivative as mlp.hpp writes them, fc2's per-rank
partials rounded to the dtype and summed in it. The correct version passes (exit 0) in float64
and float32; two planted bugs fail (exit 1): b_down added on every rank before the reduction
(y fails) and the fused [w_gate; w_up] cut in contiguous chunks, so rank 0 holds only gate rows
(Megatron's swiglu needs each rank's gate and up rows; y and every gradient fail); a misspelt
activation is bad input (exit 2). ctest runs it (label "compare").
"""

import os
import shutil
import sys

from compare_support import Session as Checks, all_passed, failing_tensors  # puts python/ on the path

try:
    import numpy as np
except ImportError:
    sys.exit("numpy is missing: scripts/setup installs python3-numpy (Debian)")

import shardcheck_case as sc  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
P, TOKENS, HIDDEN, FFN = 3, 5, 4, 6  # ffn chunk: 2, 2, 2
F_R = FFN // P
checks = Checks(BIN)
compare, expect = checks.compare, checks.expect


def silu(g):
    return g / (g.dtype.type(1) + np.exp(-g))


def silu_grad(g):
    one = g.dtype.type(1)
    s = one / (one + np.exp(-g))
    s_neg = one / (one + np.exp(g))
    return s * (one + g * s_neg)


def parallel_mlp(dtype, bug=None, seed=1):
    """Swiglu ParallelMLP on P simulated ranks, with biases; returns the case."""
    rng = np.random.default_rng(seed)
    t = np.float64 if dtype == "float64" else np.float32
    x, dy = (rng.standard_normal((TOKENS, HIDDEN)).astype(t) for _ in range(2))
    w_gate, w_up = (rng.standard_normal((FFN, HIDDEN)).astype(t) for _ in range(2))
    b_gate, b_up = (rng.standard_normal(FFN).astype(t) for _ in range(2))
    w_down = rng.standard_normal((HIDDEN, FFN)).astype(t)
    b_down = rng.standard_normal(HIDDEN).astype(t)
    fused_w, fused_b = np.concatenate([w_gate, w_up]), np.concatenate([b_gate, b_up])
    partials, dxs, grads = [], [], {n: [] for n in ("dw_gate", "dw_up", "db_gate", "db_up",
                                                     "dw_down")}
    for r in range(P):
        f = slice(r * F_R, (r + 1) * F_R)
        if bug == "fused_contiguous":  # rows [2r·F_R, 2(r+1)·F_R) of [Wg; Wu]: not gate and up
            rows = slice(2 * r * F_R, 2 * (r + 1) * F_R)
            wr, br = fused_w[rows], fused_b[rows]
        else:
            wr = np.concatenate([w_gate[f], w_up[f]])
            br = np.concatenate([b_gate[f], b_up[f]])
        h = x @ wr.T + br
        g, u = h[:, :F_R], h[:, F_R:]
        a = silu(g) * u
        part = a @ w_down[:, f].T
        if bug == "bias_on_every_rank":
            part = part + b_down
        partials.append(part)
        da = dy @ w_down[:, f]
        dg = da * u * silu_grad(g)
        du = da * silu(g)
        dxs.append(dg @ wr[:F_R] + du @ wr[F_R:])
        grads["dw_gate"].append(dg.T @ x)
        grads["dw_up"].append(du.T @ x)
        grads["db_gate"].append(dg.sum(axis=0))
        grads["db_up"].append(du.sum(axis=0))
        grads["dw_down"].append(dy.T @ a)
    y = sum(partials)
    if bug != "bias_on_every_rank":
        y = y + b_down
    config = {"activation": "swiglu", "sequence_parallel": False}
    case = sc.Case("parallel_mlp", dtype, {"tokens": TOKENS, "hidden": HIDDEN, "ffn": FFN},
                   {"tp": P}, config, "numpy " + np.__version__)
    for n, v in (("x", x), ("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down),
                 ("b_gate", b_gate), ("b_up", b_up), ("b_down", b_down), ("dy", dy)):
        case.input(n, v)
    case.output("y", y)
    case.output("dx", sum(dxs))
    for n, pieces in grads.items():
        case.output_ranks(n, pieces)
    case.output("db_down", dy.sum(axis=0))
    return case


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
for dtype in ("float64", "float32"):
    parallel_mlp(dtype).write(os.path.join(good, dtype))
code, out = compare(good)
expect("the correct implementation passes in float64 and float32 (exit 0)",
       all_passed(code, out, 2), out)

for bug, bad in (("bias_on_every_rank", ["y"]),
                 ("fused_contiguous", ["db_gate", "db_up", "dw_down", "dw_gate", "dw_up", "dx",
                                       "y"])):
    d = os.path.join(WORK, bug)
    parallel_mlp("float32", bug).write(d)
    code, out = compare(d)
    failing = failing_tensors(out)
    expect("planted bug %s fails on exactly %s (exit 1)" % (bug, ", ".join(bad)),
           code == 1 and failing == bad and "of the bound" in out, out)
    want = {"bias_on_every_rank": "diagnosis: matches down-bias-on-every-rank ",
            "fused_contiguous": "diagnosis: matches fused-gate-up-contiguous-chunk "}[bug]
    expect("planted bug %s is diagnosed: %s" % (bug, want.strip()), want in out, out)

bad_dir = os.path.join(WORK, "bad")
case = parallel_mlp("float32")
case.config = {"activation": "swiglu", "sequence_paralel": False}
case.write(bad_dir)
code, out = compare(bad_dir)
expect("a misspelt config field is bad input (exit 2), naming the file and the field",
       code == 2 and "case.json: config: unknown field sequence_paralel" in out, out)

checks.finish()
