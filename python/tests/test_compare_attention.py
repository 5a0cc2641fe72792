#!/usr/bin/env python3
"""End to end: cases written with python/shardcheck_case.py from a NumPy ring attention
(context_parallel_attention, cp ranks simulated in one process), judged by `shardcheck compare`.

    python3 python/tests/test_compare_attention.py SHARDCHECK_BINARY WORK_DIR

Each cp rank holds its positions of q, k, v (contiguous or zigzag layout); at every ring step it
runs its queries against one rank's K/V block (global positions decide the mask), and merges the
step's partial out and lse into its running result with the log-sum-exp merge. The backward uses
the merged out and lse; dK/dV are summed over the query blocks. GQA: query head i reads kv head
i // (h/g). Arithmetic as lib/ops/attention/attention.hpp documents: the accumulator is float64
for float64 and float32 otherwise, and out, dq, dk, dv are rounded once to the dtype at the end.

The correct implementation passes (exit 0) in float64, float32 and bfloat16, in both layouts,
with causal, padding and explicit masks; four planted bugs fail (exit 1) on the tensor they
break: the softmax merge weighted by each block's local max instead of its lse, the merge of each
pair weighted by exp(lse_j − the larger lse) and never divided by the weights' sum (PyTorch's
example plants it too), a causal mask aligned top-left within each block (local positions) under
zigzag, and the GQA kv head of query head i taken as i % g, each diagnosed (the mask only partly:
the suite's signature keeps the right mask in its backward); a wrong-shaped rank piece is a layout failure; a misspelt config
field and a gradient without dout are bad input (exit 2). ctest runs it (label "compare").
"""

import os
import shutil
import sys


try:
    import numpy as np
except ImportError:
    sys.exit("numpy is missing: scripts/setup installs python3-numpy (Debian)")

from compare_support import Session, chunks, failing_tensors, offsets  # noqa: E402,F401 (puts python/ on the path)
import shardcheck_case as sc  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
BATCH, L, H, G, D, CP = 2, 10, 4, 2, 3, 3
session = Session(BIN)
compare, expect, failures = session.compare, session.expect, session.failures




def positions(layout, r):
    """The global positions cp rank r holds (ops/attention/context_parallel_attention.hpp)."""
    if layout == "contiguous":
        sizes = chunks(L, CP)
        lo = sum(sizes[:r])
        return list(range(lo, lo + sizes[r]))
    sizes = chunks(L, 2 * CP)
    out = []
    for c in (r, 2 * CP - 1 - r):
        lo = sum(sizes[:c])
        out += list(range(lo, lo + sizes[c]))
    return out


def acc_of(dtype):
    return np.float64 if dtype == "float64" else np.float32


def to_dtype(dtype, a):
    """One rounding to the dtype (bfloat16: to the nearest, held as float32)."""
    if dtype == "bfloat16":
        return sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(a))
    return a.astype(acc_of(dtype))


def data(dtype, seed):
    rng = np.random.default_rng(seed)
    out = []
    for heads in (H, G, G, H):  # q, k, v, dout
        out.append(to_dtype(dtype, rng.standard_normal((BATCH, L, heads, D))))
    return out


def visible(mask, b, tq, sk, bug):
    """[len(tq), len(sk)] of global query positions tq against key positions sk."""
    tq, sk = np.asarray(tq), np.asarray(sk)
    vis = np.ones((len(tq), len(sk)), dtype=bool)
    if mask.get("key_lengths"):
        vis &= sk[None, :] < mask["key_lengths"][b]
    if mask["kind"] == "causal":
        if bug == "local_causal":  # top-left within the block: local indices, not positions
            vis &= np.arange(len(sk))[None, :] <= np.arange(len(tq))[:, None]
        else:
            vis &= sk[None, :] <= tq[:, None]
    elif mask["kind"] == "explicit_mask":
        vis &= np.asarray(mask["allowed"], dtype=bool)[b][np.ix_(tq, sk)]
    return vis


def kv_head(i, bug):
    return i % G if bug == "gqa_mod" else i // (H // G)


exp = np.exp  # in the accumulator's type (NumPy's float32 exp stays inside the bound)


def block_forward(acc, scale, q, k, v, vis):
    """One block: q [tq, d], k, v [sk, d], vis [tq, sk] -> out [tq, d], lse [tq] in acc."""
    s = (q @ k.T) * scale
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=1, initial=-np.inf)
    empty = ~vis.any(axis=1)
    p = np.where(vis, exp(s - np.where(empty, 0, m)[:, None]), 0).astype(acc)
    l = p.sum(axis=1)
    o = p @ v
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(empty[:, None], 0, o / l[:, None]).astype(acc)
        lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1, l))).astype(acc)
    return out, lse, np.where(empty, -np.inf, m).astype(acc)


def merge(o1, l1, o2, l2, w1, w2, by_larger=False):
    """The log-sum-exp merge of two partials by their weights' logs w (lse for the correct
    merge), guarded for −inf (an empty partial leaves the other unchanged). by_larger: the weights
    taken relative to the larger of w1, w2 instead of the merged lse, so never normalized."""
    new = np.logaddexp(l1, l2)
    ref = np.maximum(w1, w2) if by_larger else new
    a = np.where(np.isneginf(w1), 0, exp(w1 - np.where(np.isneginf(ref), 0, ref)))
    b = np.where(np.isneginf(w2), 0, exp(w2 - np.where(np.isneginf(ref), 0, ref)))
    return (o1 * a[:, None] + o2 * b[:, None]).astype(o1.dtype), new.astype(l1.dtype)


def ring_attention(dtype, layout, mask, bug=None):
    """out [B, L, H, D], lse [B, H, L] (acc), dq, dk, dv, and the inputs, all global."""
    acc = acc_of(dtype)
    scale = acc(1.0 / np.sqrt(D))
    q, k, v, dout = data(dtype, 7)
    qa, ka, va, da = (t.astype(acc) for t in (q, k, v, dout))
    pos = [positions(layout, r) for r in range(CP)]
    out = np.zeros((BATCH, L, H, D), acc)
    lse = np.full((BATCH, H, L), -np.inf, acc)
    for r in range(CP):  # each rank's queries
        tq = pos[r]
        for b in range(BATCH):
            for i in range(H):
                j = kv_head(i, bug)
                run_o = np.zeros((len(tq), D), acc)
                run_l = np.full(len(tq), -np.inf, acc)
                run_m = np.full(len(tq), -np.inf, acc)
                for s in range(CP):  # step s: the K/V block of rank (r - s) mod cp
                    sk = pos[(r - s) % CP]
                    vis = visible(mask, b, tq, sk, bug)
                    o, l, m = block_forward(acc, scale, qa[b, tq, i], ka[b, sk, j],
                                            va[b, sk, j], vis)
                    if bug == "merge_by_max":  # weighted by the block's max, not its lse
                        run_o, _ = merge(run_o, run_m, o, m, run_m, m)
                        run_m = np.logaddexp(run_m, m)
                        run_l = np.logaddexp(run_l, l)
                    elif bug == "merge_by_larger_lse":  # exp(lse_j − max), never normalized
                        run_o, run_l = merge(run_o, run_l, o, l, run_l, l, by_larger=True)
                    else:
                        run_o, run_l = merge(run_o, run_l, o, l, run_l, l)
                out[b, tq, i] = run_o
                lse[b, i, tq] = run_l
    out_t = to_dtype(dtype, out)
    # Backward with the GLOBAL merged out (in the dtype) and lse.
    oa = out_t.astype(acc)
    dq = np.zeros((BATCH, L, H, D), acc)
    dk = np.zeros((BATCH, L, G, D), acc)
    dv = np.zeros((BATCH, L, G, D), acc)
    for r in range(CP):
        tq = pos[r]
        for b in range(BATCH):
            for i in range(H):
                j = kv_head(i, bug)
                dd = (da[b, tq, i] * oa[b, tq, i]).sum(axis=1)
                lq = lse[b, i, tq]
                for s in range(CP):
                    sk = pos[(r - s) % CP]
                    vis = visible(mask, b, tq, sk, bug)
                    sc_ = (qa[b, tq, i] @ ka[b, sk, j].T) * scale
                    p = np.where(vis & ~np.isneginf(lq)[:, None],
                                 exp(sc_ - np.where(np.isneginf(lq), 0, lq)[:, None]), 0)
                    p = p.astype(acc)
                    dp = da[b, tq, i] @ va[b, sk, j].T
                    ds = (p * (dp - dd[:, None])).astype(acc)
                    dq[b, tq, i] += (ds @ ka[b, sk, j]) * scale
                    dk[b, sk, j] += (ds.T @ qa[b, tq, i]) * scale
                    dv[b, sk, j] += p.T @ da[b, tq, i]
    grads = [to_dtype(dtype, t) for t in (dq, dk, dv)]
    return (q, k, v, dout), out_t, lse, grads, pos


def attention_case(dtype, layout, mask, bug=None, per_rank=False, forward_only=False):
    (q, k, v, dout), out, lse, (dq, dk, dv), pos = ring_attention(dtype, layout, mask, bug)
    m = {"kind": mask["kind"], "key_lengths": mask.get("key_lengths", [])}
    if mask["kind"] == "explicit_mask":
        m["allowed_shape"] = [BATCH, L, L]
        m["allowed"] = np.asarray(mask["allowed"], dtype=int).tolist()
    config = {"attention": {"q_heads": H, "kv_heads": G, "head_dim": D, "scale": 0, "mask": m},
              "cp": {"seq_len": L, "layout": layout, "split": {"kind": "chunk"},
                     "algorithm": "ring"}}
    case = sc.Case("context_parallel_attention", dtype,
                   {"batch": BATCH, "seq_len": L, "q_heads": H, "kv_heads": G, "head_dim": D},
                   {"cp": CP}, config, "numpy " + np.__version__)
    for name, a in zip(("q", "k", "v"), (q, k, v)):
        case.input(name, a)
    outs = {"out": out}
    if not forward_only:
        case.input("dout", dout)
        outs.update({"dq": dq, "dk": dk, "dv": dv})
    for name, a in outs.items():
        if per_rank:
            case.output_ranks(name, [a[:, p] for p in pos])
        else:
            case.output(name, a)
    # lse is acc_t<T> (float32 in a bfloat16 case): elem="acc" stores it in that type.
    case.output("lse", lse if dtype != "float64" else lse.astype(np.float64), elem="acc")
    return case


def causal(key_lengths=None):
    return {"kind": "causal", "key_lengths": key_lengths or []}


def explicit():
    rng = np.random.default_rng(3)
    return {"kind": "explicit_mask", "allowed": rng.random((BATCH, L, L)) < 0.6}






shutil.rmtree(WORK, ignore_errors=True)
good = os.path.join(WORK, "good")
n = 0
for dtype in ("float64", "float32", "bfloat16"):
    for layout in ("contiguous", "zigzag"):
        attention_case(dtype, layout, causal([L, 3])).write(
            os.path.join(good, "causal_%s_%s" % (layout, dtype)))
        n += 1
    attention_case(dtype, "zigzag", explicit()).write(os.path.join(good, "explicit_" + dtype))
    attention_case(dtype, "contiguous", {"kind": "none", "key_lengths": [0, 7]},
                   per_rank=True).write(os.path.join(good, "padding_ranks_" + dtype))
    n += 2
session.expect_correct_cases(
    good, n, 5 * n, "the correct ring attention passes in every dtype, layout and mask (exit 0)",
    "the correct implementation's results do round (a nonzero error)")

# The diagnosis: the merge by the blocks' maxima, the merge by the larger lse (whose backward,
# like the suite's, runs on the merged out: dq and dk fail through rowsum(dout·out), dv, which
# does not read out, passes) and GQA's i % g are the suite's signatures;
# the suite's top-left mask keeps the right mask in its backward, so it explains out and lse
# only.
for bug, layout, tensors, forward_only, want in (
        ("merge_by_max", "contiguous", ("out",), True,
         "diagnosis: matches cp-merge-by-block-max "),
        ("local_causal", "zigzag", ("out", "lse", "dq", "dk", "dv"), False,
         "diagnosis: partly matches cp-top-left-mask "),
        ("gqa_mod", "zigzag", ("out", "lse", "dq", "dk", "dv"), False,
         "diagnosis: matches kv-head-i-mod-g "),
        ("merge_by_larger_lse", "zigzag", ("out", "dq", "dk"), False,
         "diagnosis: matches cp-merge-by-larger-lse ")):
    d = os.path.join(WORK, bug)
    attention_case("float32", layout, causal(), bug, forward_only=forward_only).write(d)
    code, out = compare(d)
    expect("planted bug %s fails (exit 1) on %s, and only there" % (bug, ", ".join(tensors)),
           code == 1 and set(failing_tensors(out)) == set(tensors) and "worst element" in out and
           "of the bound" in out, out)
    expect("planted bug %s is diagnosed: %s" % (bug, want.strip()), want in out, out)

d = os.path.join(WORK, "short_piece")
case = attention_case("float32", "zigzag", causal(), per_rank=True)
pieces, placement = case.outputs["dk"]
case.outputs["dk"] = ([pieces[0], pieces[1][:, :-1], pieces[2]], placement)
case.write(d)
code, out = compare(d)
expect("rank 1's dk a position short is a layout failure naming the rank (exit 1)",
       code == 1 and "layout: rank 1's piece of dk" in out and "FAIL dk" in out and
       "ok   dq" in out, out)

bad = os.path.join(WORK, "bad")
case = attention_case("float32", "zigzag", causal())
case.config["cp"]["layuot"] = case.config["cp"].pop("layout")
case.write(bad)
code, out = compare(bad)
expect("a misspelt config field is bad input (exit 2), naming the file and the field",
       code == 2 and "case.json: config.cp: unknown field layuot" in out, out)

no_dout = os.path.join(WORK, "no_dout")
case = attention_case("float32", "zigzag", causal())
del case.inputs["dout"]
case.write(no_dout)
code, out = compare(no_dout)
expect("a gradient without dout is bad input (exit 2)",
       code == 2 and "inputs.dout: missing; the case gives dq" in out, out)

session.finish()
