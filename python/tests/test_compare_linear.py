#!/usr/bin/env python3
"""End to end: cases written with python/shardcheck_case.py from a NumPy implementation of
column- and row-parallel linear (ranks simulated in one process), judged by `shardcheck compare`.

    python3 python/tests/test_compare_linear.py SHARDCHECK_BINARY WORK_DIR

The correct implementation passes (exit 0) in float64, float32 and bfloat16, with global and
per-rank outputs; three planted bugs fail (exit 1) on the tensor they break, with the failure
named: the bias added on every rank, the partial sums never reduced, and an uneven split cut one
column short on rank 1 (a layout failure naming the rank); a misspelt config field is bad input
(exit 2) and writes no report. ctest runs it (label "compare").
"""

import json
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
P, TOKENS, IN, OUT = 3, 6, 5, 7
session = Session(BIN)
compare, expect, failures = session.compare, session.expect, session.failures






def data(dtype, seed):
    """Normal draws in the case's dtype (bfloat16: rounded to it, held as float32), so the
    products and sums round and the bound is exercised, not just exact arithmetic."""
    rng = np.random.default_rng(seed)
    t = np.float64 if dtype == "float64" else np.float32
    out = []
    for shape in ((TOKENS, IN), (OUT, IN), (OUT,), (TOKENS, OUT)):
        a = rng.standard_normal(shape).astype(t)
        if dtype == "bfloat16":
            a = sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(a))
        out.append(a)
    return out


def finish(dtype, a):
    """The implementation's output in its dtype: bfloat16 rounds float32 results once."""
    return sc.round_to_bfloat16_bits(a) if dtype == "bfloat16" else a


def row_parallel(dtype, bug=None):
    """Row-parallel linear, ranks simulated: each rank its columns of x and w, partial products
    in the accumulator, rounded to the dtype, summed; the bias once, after the sum."""
    x, w, b, dy = data(dtype, 1)
    cuts = offsets(chunks(IN, P))
    partials = []
    for r, (lo, hi) in enumerate(cuts):
        part = x[:, lo:hi] @ w[:, lo:hi].T
        if dtype == "bfloat16":
            part = sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(part))
        if bug == "bias_on_every_rank":
            part = part + b
        partials.append(part)
    y = partials[0] if bug == "partial_not_reduced" else sum(partials)
    if bug != "bias_on_every_rank":
        y = y + b
    case = sc.Case("row_parallel_linear", dtype, {"tokens": TOKENS, "in": IN, "out": OUT},
                   {"tp": P}, {"input_is_parallel": False}, "numpy " + np.__version__)
    for name, a in zip(("x", "w", "b", "dy"), (x, w, b, dy)):
        case.input(name, finish(dtype, a) if dtype == "bfloat16" else a)
    case.output("y", finish(dtype, y))
    dx = dy @ w
    dw = dy.T @ x
    cut = [(lo, hi) for lo, hi in cuts]
    if bug == "uneven_cut":
        cut[1] = (cut[1][0], cut[1][1] - 1)  # rank 1 loses its last column
    case.output("dx", finish(dtype, dx))
    case.output_ranks("dw", [finish(dtype, dw[:, lo:hi]) for lo, hi in cut], "S(1)")
    case.output("db", finish(dtype, dy.sum(axis=0)))
    return case


def column_parallel(dtype):
    """Column-parallel linear with gather_output: each rank its rows of w and b."""
    x, w, b, dy = data(dtype, 2)
    cuts = offsets(chunks(OUT, P))
    ys = [x @ w[lo:hi].T + b[lo:hi] for lo, hi in cuts]
    if dtype == "bfloat16":  # the matmul rounded to bfloat16, then the bias added in bfloat16
        ys = [sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(x @ w[lo:hi].T)) + b[lo:hi]
              for lo, hi in cuts]
    y = np.concatenate(ys, axis=1)
    case = sc.Case("column_parallel_linear", dtype, {"tokens": TOKENS, "in": IN, "out": OUT},
                   {"tp": P}, {"gather_output": True}, "numpy " + np.__version__)
    for name, a in zip(("x", "w", "b", "dy"), (x, w, b, dy)):
        case.input(name, finish(dtype, a) if dtype == "bfloat16" else a)
    case.output("y", finish(dtype, y))
    dx = sum(dy[:, lo:hi] @ w[lo:hi] for lo, hi in cuts)  # the all_reduce of the partial dx
    case.output("dx", finish(dtype, dx))
    case.output_ranks("dw", [finish(dtype, (dy.T @ x)[lo:hi]) for lo, hi in cuts], "S(0)")
    case.output_ranks("db", [finish(dtype, dy.sum(axis=0)[lo:hi]) for lo, hi in cuts])
    return case






shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
for dtype in ("float64", "float32", "bfloat16"):
    row_parallel(dtype).write(os.path.join(good, "row_" + dtype))
    column_parallel(dtype).write(os.path.join(good, "column_" + dtype))
report = os.path.join(WORK, "report")
code, out = compare(good, "--report", report)
expect("the correct implementation passes in every dtype (exit 0)", all_passed(code, out, 6), out)
expect("the correct implementation's float32 and bfloat16 results do round (a nonzero error)",
       exact_tensors(out) < 20, out)
expect("--report writes report.json and report.md",
       os.path.exists(os.path.join(report, "report.json")) and
       os.path.exists(os.path.join(report, "report.md")), out)

for bug, tensor, words in (("bias_on_every_rank", "y", "of the bound"),
                           ("partial_not_reduced", "y", "of the bound"),
                           ("uneven_cut", "dw", "layout: rank 1's piece of dw")):
    d = os.path.join(WORK, bug)
    row_parallel("float32", bug).write(d)
    code, out = compare(d)
    expect("planted bug %s fails on %s (exit 1)" % (bug, tensor),
           code == 1 and ("FAIL " + tensor) in out and words in out, out)
    # The tensor lines: "  ok   dx [6, 5] R: ..." or "  FAIL y [6, 7] R: ...".
    lines = [l for l in out.splitlines() if l.startswith(("  ok   ", "  FAIL "))]
    others_ok = len(lines) == 4 and all(l.startswith("  ok   ") for l in lines
                                        if not l.startswith("  FAIL " + tensor + " "))
    expect("planted bug %s leaves the other tensors passing" % bug, others_ok, out)
    # The diagnosis: the bias and the unreduced partial are known signatures; a layout failure
    # leaves nothing to compare.
    want = {"bias_on_every_rank": "diagnosis: matches bias-on-every-rank ",
            "partial_not_reduced": "diagnosis: matches partial-not-reduced ",
            "uneven_cut": "diagnosis: no known signature (of 14)"}[bug]
    expect("planted bug %s is diagnosed: %s" % (bug, want.strip()), want in out, out)

# Baseline mode: float32 results judged also against a float32 baseline computed in float64
# and rounded once (more accurate than the implementation, so its error is the smaller one).
case = row_parallel("float32")
x, w, b, dy = data("float32", 1)
exact = (x.astype(np.float64) @ w.astype(np.float64).T + b).astype(np.float32)
case.baseline_output("y", exact)
case.baseline_implementation = "float64, rounded once"
d = os.path.join(WORK, "baseline")
case.write(d)
code, out = compare(d)
ratio_line = [l for l in out.splitlines() if "baseline [float64, rounded once]" in l]
expect("baseline mode reports the implementation's error over the baseline's (exit 0)",
       code == 0 and len(ratio_line) == 1 and "x the baseline's" in ratio_line[0], out)
case.baseline_output("dz", exact)
case.write(os.path.join(WORK, "baseline_bad"))
code, out = compare(os.path.join(WORK, "baseline_bad"))
expect("a baseline tensor that is not an output is bad input (exit 2)",
       code == 2 and "baseline.dz: is not among the outputs" in out, out)

bad = os.path.join(WORK, "bad")
case = row_parallel("float32")
case.config = {"input_is_paralel": False}
case.write(bad)
bad_report = os.path.join(WORK, "bad_report")
code, out = compare(bad, "--report", bad_report)
expect("a misspelt config field is bad input (exit 2), naming the file and the field",
       code == 2 and "case.json: config: unknown field input_is_paralel" in out, out)
expect("bad input writes no report", not os.path.exists(bad_report), out)

# A whole run: three steps in dataflow order, the second with the bias added on every rank.
# compare judges each on its own inputs and names the first failing step, tensor and rank.
run = sc.Run("linear block")
run.step(column_parallel("float32"), "00_fc1", name="fc1")
run.step(row_parallel("float32", "bias_on_every_rank"), "01_fc2", name="fc2")
run.step(row_parallel("float64"), "02_proj")
run_dir = run.write(os.path.join(WORK, "run"))
run_report = os.path.join(WORK, "run_report")
code, out = compare(run_dir, "--report", run_report)
expect("a run names its first failing step, tensor and rank (exit 1)",
       code == 1 and "run linear block (" in out and
       "step 1 passed, the first failure is step 2 of 3, fc2 (" in out and
       "row_parallel_linear y: worst element" in out and "after it 0 of 1 step fails" in out, out)
with open(os.path.join(run_report, "report.json")) as f:
    runs = json.load(f)["runs"]
expect("the report's runs give the first failure",
       len(runs) == 1 and runs[0]["first_failure"]["step"] == 2 and
       runs[0]["first_failure"]["tensor"] == "y" and
       [s["passed"] for s in runs[0]["steps"]] == [True, False, True], json.dumps(runs))

# A dataflow link the dump does not keep: step 2's x is not step 1's y (each step drew its own
# inputs), so the link is broken at step 2 although each op is right on what it was given.
linked = sc.Run("linked")
linked.step(column_parallel("float32"), "00_fc1")
linked.step(row_parallel("float32"), "01_proj")
linked.link("00_fc1", "y", "01_proj", "x")
code, out = compare(linked.write(os.path.join(WORK, "linked")))
expect("a broken link fails the step it feeds, naming both tensors (exit 1)",
       code == 1 and "link broken: step 2 (01_proj)'s x is not step 1 (00_fc1)'s y" in out and
       "the first failure is step 2 of 2" in out and "1 link broken" in out, out)
try:
    linked.link("01_proj", "y", "00_fc1", "x")
    expect("a link against the dataflow is refused by the writer", False, "")
except ValueError as e:
    expect("a link against the dataflow is refused by the writer", "is not after" in str(e), "")

# Per-dimension placements, as a trainer's dump annotates them: dw is "o i(tp)" (S(1)).
case = row_parallel("float32")
x_, w_, b_, dy_ = data("float32", 1)
dw = dy_.T @ x_
case.output_ranks("dw", [dw[:, lo:hi] for lo, hi in offsets(chunks(IN, P))], "o i(tp)")
case.write(os.path.join(WORK, "dims"))
code, out = compare(os.path.join(WORK, "dims"))
expect("a per-dimension placement that is the op's passes (exit 0)", code == 0, out)
case.output_ranks("dw", [dw[:, lo:hi] for lo, hi in offsets(chunks(IN, P))], "o(tp) i")
case.write(os.path.join(WORK, "dims_wrong"))
code, out = compare(os.path.join(WORK, "dims_wrong"))
expect("another per-dimension placement is a layout failure in the case's words (exit 1)",
       code == 1 and "declares dw placed o(tp) i but row_parallel_linear places it o i(tp)" in out,
       out)

# The reader reads back what the writer wrote.
back = sc.read(os.path.join(good, "row_bfloat16"))
expect("shardcheck_case.read returns the case", back.op == "row_parallel_linear" and
       back.outputs["dw"][1] == "S(1)" and back.inputs["x"].dtype == np.uint16, "")

session.finish()
