"""Attention as torch writes it, dense and as a hand-written ring over cp ranks simulated in one
process, with the shardcheck case that describes it (context_parallel_attention): shared by the
PyTorch example (attention_cases.py, small and with planted bugs) and the real-size case
(examples/real_size/ring_attention.py).

    out, lse = block(q, k, v, q_pos, k_pos, groups, scale)          # one block, causal
    out, lse = ring_attention(q, k, v, cp, groups, scale, bug=None)   # cp contiguous chunks
    case = attention_case(q, k, v, dout, cp, bug=None)               # forward, autograd backward
    out, lse = online_attention(q, k, v, groups, scale, keys, exp2)  # FlashAttention's forward
    dq, dk, dv = recompute_backward(q, k, v, out, lse, dout, groups, scale, exp2)
    case = online_case(q, k, v, dout, keys, exp2, bug=None)          # declares its contract

q [b, L, h, d], k and v [b, L, g, d] (GQA: query head i reads kv head i // (h/g)); the mask is
causal on global positions; the backward is autograd's through the forward, except the online
softmax's, which recomputes the weights from the lse as FlashAttention-2's backward does.
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


def fma(a, b, c):
    """a·b + c rounded once to float32, as the kernels' fma (float32 only: the float64 product of
    two float32 values is exact, and the float64 sum's rounding is 2^-29 of float32's)."""
    assert a.dtype == torch.float32, "the exp2 form is written for float32"
    return (a.double() * b.double() + c.double()).float()


def online_attention(q, k, v, groups, scale, keys, exp2=False, bug=None):
    """FlashAttention's forward, causal, in the dtype of q: the keys in blocks of `keys`, a
    running max m, the running l and acc rescaled by exp(m_old − m_new) at every block, out =
    acc/l once at the end, lse = m + log l. exp2: the scores kept raw and the weights
    exp2(fma(s, scale_log2, −m·scale_log2)) with scale_log2 = scale·log2(e), the rescale exp2 too
    and the lse kept in base 2, then converted (FlashAttention-2/3, Triton; float32 only). bug "no_l_rescale": l is
    never rescaled. Returns out [b, L, h, d] and lse [b, h, L] (no autograd)."""
    k = k.repeat_interleave(groups, dim=2)
    v = v.repeat_interleave(groups, dim=2)
    length = q.shape[1]
    pos = torch.arange(length)
    sl = torch.tensor(scale * math.log2(math.e), dtype=q.dtype)
    raw = torch.einsum("bqhd,bkhd->bhqk", q, k)
    s = raw if exp2 else raw * scale
    m = torch.full(s.shape[:-1], float("-inf"), dtype=q.dtype)
    l = torch.zeros(s.shape[:-1], dtype=q.dtype)
    acc = torch.zeros(q.shape[0], q.shape[2], length, q.shape[3], dtype=q.dtype)
    for k0 in range(0, length, keys):
        sb = s[..., k0:k0 + keys].masked_fill(
            pos[k0:k0 + keys][None, :] > pos[:, None], float("-inf"))
        m_new = torch.maximum(m, sb.amax(dim=-1))
        seen = m_new > float("-inf")  # a row none of whose keys so far is visible stays at 0
        m_safe = torch.where(seen, m_new, torch.zeros_like(m_new))
        if exp2:
            r = torch.exp2((m - m_safe) * sl)
            p = torch.exp2(fma(sb, sl, -(m_safe * sl)[..., None]))
        else:
            r = torch.exp(m - m_safe)
            p = torch.exp(sb - m_safe[..., None])
        if bug != "no_l_rescale":
            l = r * l
        l = l + p.sum(dim=-1)
        acc = r[..., None] * acc + torch.einsum("bhqk,bkhd->bhqd", p, v[:, k0:k0 + keys])
        m = m_new
    out = (acc / l[..., None]).transpose(1, 2)
    lse = (m * sl + torch.log2(l)) * math.log(2) if exp2 else m + torch.log(l)
    return out, lse


def recompute_backward(q, k, v, out, lse, dout, groups, scale, exp2=False):
    """FlashAttention-2's backward: P recomputed from the lse (exp2 of the raw scores times
    scale_log2 minus lse·log2(e) under exp2), D = rowsum(dO∘O), dS = P∘(dP − D); dk and dv summed
    over each kv head's group of query heads. Returns dq, dk, dv."""
    b, length, h, d = q.shape
    kr = k.repeat_interleave(groups, dim=2)
    vr = v.repeat_interleave(groups, dim=2)
    pos = torch.arange(length)
    raw = torch.einsum("bqhd,bkhd->bhqk", q, kr)
    if exp2:
        sl = torch.tensor(scale * math.log2(math.e), dtype=q.dtype)
        p = torch.exp2(fma(raw, sl, -(lse * math.log2(math.e))[..., None]))
    else:
        p = torch.exp(raw * scale - lse[..., None])
    p = p.masked_fill(pos[None, :] > pos[:, None], 0)
    dv = torch.einsum("bhqk,bqhd->bkhd", p, dout)
    dp = torch.einsum("bqhd,bkhd->bhqk", dout, vr)
    delta = (dout * out).sum(dim=-1).transpose(1, 2)
    ds = p * (dp - delta[..., None])
    dq = torch.einsum("bhqk,bkhd->bqhd", ds, kr) * scale
    dk = torch.einsum("bhqk,bqhd->bkhd", ds, q) * scale
    fold = (b, length, h // groups, groups, d)
    return dq, dk.reshape(fold).sum(dim=3), dv.reshape(fold).sum(dim=3)


def online_case(q, k, v, dout, keys, exp2=False, bug=None, contract=None):
    """The case of the online softmax (online_attention, key blocks of `keys`) with
    FlashAttention-2's backward (recompute_backward), dense (cp = 1), declaring `contract`
    ("online" or "exp2"; None: the default)."""
    batch, length, h, d = q.shape
    g = k.shape[2]
    scale = 1 / math.sqrt(d)
    out, lse = online_attention(q, k, v, h // g, scale, keys, exp2, bug)
    dq, dk, dv = recompute_backward(q, k, v, out, lse, dout, h // g, scale, exp2)
    config = {"attention": {"q_heads": h, "kv_heads": g, "head_dim": d, "scale": 0,
                            "mask": {"kind": "causal", "key_lengths": []}},
              "cp": {"seq_len": length, "layout": "contiguous", "split": {"kind": "chunk"},
                     "algorithm": "ring"}}
    impl = "torch %s, online softmax (%s) over key blocks of %d, FlashAttention-2's backward" % (
        torch.__version__, "exp2" if exp2 else "exp", keys)
    case = sc.Case("context_parallel_attention", DTYPES[q.dtype],
                   {"batch": batch, "seq_len": length, "q_heads": h, "kv_heads": g,
                    "head_dim": d}, {"cp": 1}, config, impl, contract=contract)
    for name, t in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        case.input(name, np_of(t))
    for name, t in (("out", out), ("lse", lse), ("dq", dq), ("dk", dk), ("dv", dv)):
        case.output(name, np_of(t))
    return case
