"""Attention as torch writes it, dense and as a hand-written ring over cp ranks simulated in one
process, with the shardcheck case that describes it (context_parallel_attention): shared by the
PyTorch example (attention_cases.py, small and with planted bugs) and the real-size case
(examples/real_size/ring_attention.py).

    out, lse = block(q, k, v, q_pos, k_pos, groups, scale)          # one block, causal
    out, lse = ring_attention(q, k, v, cp, groups, scale, bug=None)   # cp contiguous chunks
    case = attention_case(q, k, v, dout, cp, bug=None)               # forward, autograd backward

q [b, L, h, d], k and v [b, L, g, d] (GQA: query head i reads kv head i // (h/g)); the mask is
causal on global positions; the backward is autograd's through the forward.
"""

import math

from torch_support import torch, sc, np_of, chunk_sizes, DTYPES


def block(q, k, v, q_pos, k_pos, groups, scale):
    """One block: q [b, lq, h, d] against k, v [b, lk, g, d] at these global positions, causal
    (every query sees at least one key). Returns the block's out [b, lq, h, d] and lse
    [b, h, lq]."""
    k = k.repeat_interleave(groups, dim=2)  # query head i reads kv head i // (h/g)
    v = v.repeat_interleave(groups, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
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


def ring_attention(q, k, v, cp, groups, scale, bug=None):
    """Rank r's queries against the K/V block of rank (r − s) mod cp at ring step s, merged; a
    block none of whose keys the queries see (a later rank's, under the causal mask) is skipped,
    as ring attention kernels do. bug: "local_causal" (each block's mask on its own positions)
    or "merge_by_max" (merge())."""
    length = q.shape[1]
    sizes = chunk_sizes(length, cp)
    pos = torch.split(torch.arange(length), sizes)
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
            ob, lb = block(qs[r], ks[j], vs[j], q_pos, k_pos, groups, scale)
            o, lse = (ob, lb) if o is None else merge(o, lse, ob, lb, bug)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs, dim=1), torch.cat(lses, dim=2)


def attention_case(q, k, v, dout, cp, bug=None, accumulate=None):
    """The case of q, k, v, dout (leaves of one dtype: float64, float32 or bfloat16) through the
    dense attention (cp = 1) or the ring (cp > 1): out, lse and autograd's dq, dk, dv, global;
    scale 1/sqrt(d); `accumulate` the accumulator the case declares (None: the default)."""
    batch, length, h, d = q.shape
    g = k.shape[2]
    scale = 1 / math.sqrt(d)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    if cp == 1:
        out, lse = block(*leaves, torch.arange(length), torch.arange(length), h // g, scale)
    else:
        out, lse = ring_attention(*leaves, cp, h // g, scale, bug)
    out.backward(dout)
    config = {"attention": {"q_heads": h, "kv_heads": g, "head_dim": d, "scale": 0,
                            "mask": {"kind": "causal", "key_lengths": []}},
              "cp": {"seq_len": length, "layout": "contiguous", "split": {"kind": "chunk"},
                     "algorithm": "ring"}}
    impl = "torch %s, %s" % (torch.__version__, "dense" if cp == 1 else "ring, hand-written")
    dtype = "bfloat16" if q.dtype == torch.bfloat16 else DTYPES[q.dtype]
    case = sc.Case("context_parallel_attention", dtype,
                   {"batch": batch, "seq_len": length, "q_heads": h, "kv_heads": g,
                    "head_dim": d}, {"cp": cp}, config, impl, accumulate=accumulate)
    for name, t in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        case.input(name, np_of(t))
    case.output("out", np_of(out))
    for name, t in zip(("dq", "dk", "dv"), leaves):
        case.output(name, np_of(t.grad))
    # lse in the accumulator acc_t<T>: float32 for bfloat16 (torch's bfloat16 lse widened)
    case.output("lse", np_of(lse.float() if q.dtype == torch.bfloat16 else lse), elem="acc")
    return case
