#!/usr/bin/env python3
"""PyTorch's linear layers judged by `shardcheck compare`: torch's own op, and a hand-sharded
column- and row-parallel linear (Megatron-LM's split, ranks simulated in one process, autograd
for the backward), written as cases with python/shardcheck_case.py.

    python3 examples/pytorch/linear_cases.py SHARDCHECK_BINARY WORK_DIR

What it shows (and checks, so ctest runs it: label "compare"):
  - torch.nn.functional.linear in float64 and float32, forward and backward (torch's addmm,
    autograd's mm), passes at P = 1;
  - the hand-sharded column-parallel (P = 4, 10 output features: uneven, chunk split 3, 3, 3, 1,
    gather_output) and row-parallel (P = 3) layers pass, with per-rank weight gradients;
  - two planted bugs fail on the tensors they break: the row-parallel bias added on every rank
    before the all_reduce (y, and db, since autograd gives the bias P times its gradient), and the column-parallel input gradient averaged over the ranks
    instead of summed (dx: an all_reduce with op=AVG);
  - torch.nn.functional.linear in bfloat16 passes when the case declares its accumulator
    ("accumulate": "bfloat16"): torch's CPU backward for small bfloat16 matmuls accumulates in
    bfloat16, outside the default contract (float32 accumulation), which it fails;
  - the report's tolerance table for all of them.
Needs python3-torch (Debian's, 1.13; scripts/setup installs it).
"""

import os
import shutil
import sys

from torch_support import torch, F, sc, np_of, chunk_sizes, Checks, DTYPES, all_passed

BIN, WORK = sys.argv[1], sys.argv[2]
TOKENS, IN, OUT = 9, 12, 10
checks = Checks(BIN)
torch.manual_seed(20261201)


def inputs(dtype):
    return [torch.randn(*s, dtype=dtype) for s in ((TOKENS, IN), (OUT, IN), (OUT,), (TOKENS, OUT))]


def base_case(op, dtype, p, config, impl):
    return sc.Case(op, DTYPES[dtype],
                   {"tokens": TOKENS, "in": IN, "out": OUT}, {"tp": p}, config, impl)


def add_inputs(case, x, w, b, dy):
    for name, t in (("x", x), ("w", w), ("b", b), ("dy", dy)):
        case.input(name, np_of(t))


def torch_linear(dtype, accumulate=None):
    """torch's own op: F.linear forward, autograd backward, as the dense layer (P = 1); in
    bfloat16 from float32 draws rounded, with the case's accumulator `accumulate`."""
    if dtype == torch.bfloat16:
        x, w, b, dy = (t.to(torch.bfloat16) for t in inputs(torch.float32))
        case = sc.Case("column_parallel_linear", "bfloat16",
                       {"tokens": TOKENS, "in": IN, "out": OUT}, {"tp": 1}, {},
                       "torch %s F.linear" % torch.__version__, accumulate=accumulate)
    else:
        x, w, b, dy = inputs(dtype)
        case = base_case("column_parallel_linear", dtype, 1, {},
                         "torch %s F.linear" % torch.__version__)
    xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
    y = F.linear(xs, ws, bs)
    y.backward(dy)
    add_inputs(case, x, w, b, dy)
    for name, t in (("y", y), ("dx", xs.grad), ("dw", ws.grad), ("db", bs.grad)):
        case.output(name, np_of(t))
    return case


def column_parallel(dtype, bug=None):
    """Megatron's ColumnParallelLinear with gather_output: rank r holds rows of w and b."""
    p = 4
    x, w, b, dy = inputs(dtype)
    sizes = chunk_sizes(OUT, p)
    ws, bs = torch.split(w, sizes), torch.split(b, sizes)
    dys = torch.split(dy, sizes, dim=1)
    ys, dxs, dws, dbs = [], [], [], []
    for r in range(p):
        xr = x.clone().requires_grad_()
        wr, br = ws[r].clone().requires_grad_(), bs[r].clone().requires_grad_()
        yr = F.linear(xr, wr, br)
        yr.backward(dys[r])
        ys.append(yr.detach())
        dxs.append(xr.grad)
        dws.append(wr.grad)
        dbs.append(br.grad)
    dx = sum(dxs)  # the backward's all_reduce of dx over tp
    if bug == "dx_averaged":
        dx = dx / p
    case = base_case("column_parallel_linear", dtype, p, {"gather_output": True},
                     "torch %s, hand-sharded" % torch.__version__)
    add_inputs(case, x, w, b, dy)
    case.output("y", np_of(torch.cat(ys, dim=1)))
    case.output("dx", np_of(dx))
    case.output_ranks("dw", [np_of(t) for t in dws], "S(0)")
    case.output_ranks("db", [np_of(t) for t in dbs], "S(0)")
    return case


def row_parallel(dtype, bug=None):
    """Megatron's RowParallelLinear (input_is_parallel): rank r holds columns of x and w; the
    partial products are summed (all_reduce), then the bias is added once."""
    p = 3
    x, w, b, dy = inputs(dtype)
    sizes = chunk_sizes(IN, p)
    xs, ws = torch.split(x, sizes, dim=1), torch.split(w, sizes, dim=1)
    bl = b.clone().requires_grad_()
    parts, leaves = [], []
    for r in range(p):
        xr, wr = xs[r].clone().requires_grad_(), ws[r].clone().requires_grad_()
        partial = F.linear(xr, wr, bl if bug == "bias_on_every_rank" else None)
        parts.append(partial)
        leaves.append((xr, wr))
    y = sum(parts)
    if bug != "bias_on_every_rank":
        y = y + bl
    y.backward(dy)
    case = base_case("row_parallel_linear", dtype, p, {"input_is_parallel": True},
                     "torch %s, hand-sharded" % torch.__version__)
    add_inputs(case, x, w, b, dy)
    case.output("y", np_of(y))
    case.output_ranks("dx", [np_of(xr.grad) for xr, _ in leaves], "S(1)")
    case.output_ranks("dw", [np_of(wr.grad) for _, wr in leaves], "S(1)")
    case.output("db", np_of(bl.grad))
    return case


shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
for dtype, tag in DTYPES.items():
    torch_linear(dtype).write(os.path.join(good, "torch_linear_" + tag))
    column_parallel(dtype).write(os.path.join(good, "column_parallel_" + tag))
    row_parallel(dtype).write(os.path.join(good, "row_parallel_" + tag))
code, out = checks.compare(good, "--report", os.path.join(WORK, "report"))
print(out)
checks.expect("torch's F.linear and the hand-sharded layers pass in float64 and float32 (exit 0)",
              all_passed(code, out, 6), out)

# bfloat16: judged under the default contract, torch's backward fails (its dx and dw accumulate
# in bfloat16; one run, 2026-12-05: dx 32x, dw 83x the bound), which is reported but not
# asserted (another CPU's kernel may accumulate in float32); declared, every tensor passes.
bf16 = os.path.join(WORK, "bfloat16")
torch_linear(torch.bfloat16).write(os.path.join(bf16, "default"))
code, out = checks.compare(os.path.join(bf16, "default"))
print(out)
torch_linear(torch.bfloat16, "bfloat16").write(os.path.join(bf16, "declared"))
checks.expect_passes("torch's F.linear in bfloat16 with \"accumulate\": \"bfloat16\"",
                     os.path.join(bf16, "declared"), 1)

# Autograd carries the bias bug into db too: the bias counted P times gets P times the gradient.
# The diagnosis: the suite's bias-on-every-rank explains y but gets db right, so it partly
# matches; the averaged dx is the suite's column-dx-averaged.
for name, case, tensors, diagnosis in (
        ("bias_on_every_rank", row_parallel(torch.float32, "bias_on_every_rank"), ["y", "db"],
         "diagnosis: partly matches bias-on-every-rank "),
        ("dx_averaged", column_parallel(torch.float32, "dx_averaged"), ["dx"],
         "diagnosis: matches column-dx-averaged ")):
    d = os.path.join(WORK, name)
    case.write(d)
    out = checks.expect_fails("planted bug " + name, d, tensors)
    checks.expect("planted bug %s is diagnosed: %s" % (name, diagnosis.strip()),
                  diagnosis in out, out)

checks.finish()
