#!/usr/bin/env python3
"""End to end: cases written with python/shardcheck_case.py from a NumPy softmax merge (the
combine of attention partials computed over parts of the keys, as a context-parallel ring or a
split-KV decode does it), judged by `shardcheck compare` as softmax_merge.

    python3 python/tests/test_compare_softmax_merge.py SHARDCHECK_BINARY WORK_DIR

The partials: per row, the softmax of scores over one part of the keys times the values, in the
accumulator A (float64 or float32), with out [rows, width] and lse [rows]; a part none of whose
keys a row sees is empty (lse -inf) and its out holds NaN, which a merge must ignore (the last
row sees no key at all: out 0, lse -inf). The merge
as lib/ops/softmax_merge/softmax_merge.hpp writes it (m = max lse_j, w_j = exp(lse_j - m),
l = sum w_j, lse = m + log l, out = sum (w_j / l) out_j, empty parts skipped) or as a ring's chain
of the same two-way step from the first partial. Both pass (exit 0) in float64 and float32, with
global and per-rank outputs, under the default contract and the one each declares (nway,
two_way_tree). Two planted bugs fail (exit 1) on out only and are diagnosed as the suite's
signatures: the outputs averaged (average-outputs) and each partial weighted by exp(lse_j -
lse_0), the first (local) partial's lse, never renormalized (local-lse-weights). A bfloat16
dtype and a config field are bad input (exit 2). ctest runs it (label "compare").
"""

import os
import shutil
import sys

from compare_support import Session, failing_tensors, numpy_or_exit  # puts python/ on the path

np = numpy_or_exit()
import shardcheck_case as sc  # noqa: E402 (after NumPy's check: it needs NumPy)

BIN, WORK = sys.argv[1], sys.argv[2]
PARTS, ROWS, WIDTH, KEYS = 4, 6, 5, 14
session = Session(BIN)
compare, expect = session.compare, session.expect


def partials(dtype, seed=3):
    """out [PARTS, ROWS, WIDTH] and lse [PARTS, ROWS] in A: each part a contiguous block of the
    keys (a ring's blocks), row i seeing the keys below KEYS - i (a causal-like mask, so the last
    blocks are empty for the last rows); scores within a few units, so the lse are close."""
    a = np.float64 if dtype == "float64" else np.float32
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((ROWS, KEYS)) * 1.5
    values = rng.standard_normal((KEYS, WIDTH))
    bounds = np.linspace(0, KEYS, PARTS + 1).astype(int)
    out = np.zeros((PARTS, ROWS, WIDTH), a)
    lse = np.full((PARTS, ROWS), -np.inf, a)
    for j in range(PARTS):
        for i in range(ROWS):
            keys = [k for k in range(bounds[j], bounds[j + 1]) if k < KEYS - 3 * i]
            if not keys:
                out[j, i] = np.nan  # an empty part's out: anything, ignored by the merge
                continue
            s = scores[i, keys].astype(a)
            m = s.max()
            p = np.exp(s - m)
            l = p.sum(dtype=a)
            out[j, i] = (p @ values[keys].astype(a)) / l
            lse[j, i] = m + np.log(l)
    return out, lse


def merge_row(outs, lses, bug=None):
    """One row's n-way merge in A, the parts in index order, empty ones skipped."""
    a = lses.dtype.type
    live = [j for j in range(len(lses)) if lses[j] != -np.inf]
    if not live:
        return np.zeros(outs.shape[1], lses.dtype), a(-np.inf)
    m = max(lses[j] for j in live)
    w = {j: np.exp(lses[j] - m) for j in live}
    l = a(0)
    for j in live:
        l = a(l + w[j])
    lse = a(m + np.log(l))
    acc = np.zeros(outs.shape[1], lses.dtype)
    for j in live:
        if bug == "average":  # each non-empty part weighs the same
            c = a(1) / a(len(live))
        elif bug == "local_lse":  # rescaled to the first (local) partial's lse, never normalized
            c = np.exp(lses[j] - lses[0])
        else:
            c = a(w[j] / l)
        acc = (acc + c * outs[j]).astype(lses.dtype)
    return acc, lse


def merge(out_parts, lse_parts, form="nway", bug=None):
    """out [ROWS, WIDTH], lse [ROWS]: n-way, or a ring's chain of two-way steps from the first
    partial (each step the n-way merge of the accumulator and the next part)."""
    out = np.zeros(out_parts.shape[1:], out_parts.dtype)
    lse = np.zeros(lse_parts.shape[1], lse_parts.dtype)
    for i in range(out_parts.shape[1]):
        if form == "nway":
            out[i], lse[i] = merge_row(out_parts[:, i], lse_parts[:, i], bug)
            continue
        o, l = out_parts[0, i], lse_parts[0, i]
        if l == -np.inf:
            o = np.zeros_like(o)  # the local partial as a kernel returns it: out 0 when empty
        for j in range(1, out_parts.shape[0]):
            o, l = merge_row(np.stack([o, out_parts[j, i]]), np.array([l, lse_parts[j, i]]))
        out[i], lse[i] = o, l
    return out, lse


def merge_case(dtype, form="nway", bug=None, per_rank=False, contract=None):
    out_parts, lse_parts = partials(dtype)
    out, lse = merge(out_parts, lse_parts, form, bug)
    case = sc.Case("softmax_merge", dtype, {"parts": PARTS, "rows": ROWS, "width": WIDTH},
                   None, {}, "numpy %s (%s)" % (np.__version__, form), contract=contract)
    case.input("out_parts", out_parts)
    case.input("lse_parts", lse_parts)
    if per_rank:  # one rank: the merge moves no data, its outputs are R
        case.output_ranks("out", [out], "R")
        case.output_ranks("lse", [lse])
    else:
        case.output("out", out)
        case.output("lse", lse)
    return case


shutil.rmtree(WORK, ignore_errors=True)
_, lse_parts = partials("float32")
assert (lse_parts[:, :-1] == -np.inf).any() and (lse_parts[:, -1] == -np.inf).all(), \
    "the partials have empty parts, and the last row sees no key at all"

good = os.path.join(WORK, "good")
n = 0
for dtype in ("float64", "float32"):
    for form in ("nway", "two_way_tree"):
        for per_rank in (False, True):
            merge_case(dtype, form, per_rank=per_rank).write(
                os.path.join(good, "%s_%s%s" % (form, dtype, "_ranks" if per_rank else "")))
        merge_case(dtype, form, contract=form).write(
            os.path.join(good, "%s_%s_declared" % (form, dtype)))
        n += 3
session.expect_correct_cases(
    good, n, 2 * n, "the n-way merge and a two-way chain pass in float64 and float32 (exit 0)",
    "the correct merges' results do round (a nonzero error)")

for bug, want in (("average", "diagnosis: matches average-outputs "),
                  ("local_lse", "diagnosis: matches local-lse-weights ")):
    for dtype in ("float64", "float32"):
        d = os.path.join(WORK, "%s_%s" % (bug, dtype))
        merge_case(dtype, bug=bug).write(d)
        code, out = compare(d)
        expect("planted bug %s (%s) fails (exit 1) on out only" % (bug, dtype),
               code == 1 and failing_tensors(out) == ["out"] and "worst element" in out, out)
        expect("planted bug %s (%s) is diagnosed: %s" % (bug, dtype, want.strip()),
               want in out, out)

bad = os.path.join(WORK, "bfloat16")
case = merge_case("float32")
case.dtype = "bfloat16"
case.inputs = {n: sc.round_to_bfloat16_bits(a) for n, a in case.inputs.items()}
case.outputs = {n: sc.round_to_bfloat16_bits(a) for n, a in case.outputs.items()}
case.write(bad)
code, out = compare(bad)
expect("a bfloat16 merge is bad input (exit 2): the partials are in the accumulator",
       code == 2 and "case.json: dtype: is bfloat16 but softmax_merge merges partials" in out, out)

bad = os.path.join(WORK, "config")
case = merge_case("float32")
case.config["parts"] = PARTS
case.write(bad)
code, out = compare(bad)
expect("a config field is bad input (exit 2), naming the file and the field",
       code == 2 and "case.json: config: unknown field parts; this object takes no fields" in out,
       out)

session.finish()
