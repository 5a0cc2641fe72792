#!/usr/bin/env python3
"""A larger attention case for `shardcheck compare`: PyTorch's attention as a hand-written ring
over cp ranks (examples/pytorch/ring_attention.py: each rank's queries against every rank's K/V
block in ring order, merged by their log-sum-exp, causal on global positions, GQA by
repeat_interleave), forward and autograd's backward, float32, written as one
context_parallel_attention case.

    python3 examples/real_size/ring_attention.py CASE_DIR [BATCH LEN HEADS KV_HEADS HEAD_DIM CP]
    time build/default/tools/shardcheck compare CASE_DIR

The sizes default to 1 sequence of 1024 positions, 8 query heads over 2 kv heads of 64, cp = 4:
one layer's attention at a context-parallel chunk size people run, not yet a whole Llama layer
(32 heads of 128 at 4096 positions; docs/compare.md, "Real sizes", says what that costs).
Needs python3-torch (Debian's, 1.13; scripts/setup installs it).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
from torch_support import torch  # noqa: E402
from ring_attention import attention_case  # noqa: E402

case_dir = sys.argv[1]
batch, length, h, g, d, cp = (int(v) for v in (sys.argv[2:8] if len(sys.argv) >= 8
                                                else (1, 1024, 8, 2, 64, 4)))
torch.manual_seed(20261206)
q, k, v = (torch.randn(batch, length, n, d, dtype=torch.float32) for n in (h, g, g))
dout = torch.randn(batch, length, h, d, dtype=torch.float32)
attention_case(q, k, v, dout, cp).write(case_dir)
print("wrote", case_dir, "q", tuple(q.shape), "k, v", tuple(k.shape), "cp", cp)
