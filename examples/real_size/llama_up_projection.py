#!/usr/bin/env python3
"""A real-size case for `shardcheck compare`: one Llama-2-7B MLP up projection, 2048 tokens,
hidden 4096 -> ffn 11008, bfloat16 storage with float32 accumulation, column-parallel over
P = 8 ranks (each rank its 1376 rows of w and its 1376 columns of y), no bias (Llama's
projections have none), written with python/shardcheck_case.py from a NumPy implementation
(ranks simulated in one process: x @ w_r.T in float32, rounded once to bfloat16).

    python3 examples/real_size/llama_up_projection.py CASE_DIR [TOKENS IN OUT P]
    time build/default/tools/shardcheck compare CASE_DIR

The sizes default to the Llama shape; smaller ones (e.g. 64 256 512 8) make a quick trial.
Only the forward is written (y per rank): the reference then computes y and its bound, the work
issue 13 asks to take at most 5 minutes on the 2-core machine (docs/compare.md, "Real sizes").
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import shardcheck_case as sc  # noqa: E402

case_dir = sys.argv[1]
tokens, hidden, ffn, p = (int(v) for v in (sys.argv[2:6] if len(sys.argv) >= 6
                                           else (2048, 4096, 11008, 8)))
rng = np.random.default_rng(20261204)


def bf16(shape, scale):
    """Normal draws of the given scale rounded to bfloat16, held as float32."""
    a = (rng.standard_normal(shape) * scale).astype(np.float32)
    return sc.from_bfloat16_bits(sc.round_to_bfloat16_bits(a))


x = bf16((tokens, hidden), 1.0)
w = bf16((ffn, hidden), hidden ** -0.5)  # a trained layer's scale: y of order 1
bounds = np.linspace(0, ffn, p + 1).astype(int)  # the balanced split: 1376 rows each at P = 8
pieces = [sc.round_to_bfloat16_bits(x @ w[lo:hi].T) for lo, hi in zip(bounds[:-1], bounds[1:])]
case = sc.Case("column_parallel_linear", "bfloat16", {"tokens": tokens, "in": hidden, "out": ffn},
               {"tp": p}, {"gather_output": False}, "numpy " + np.__version__ + " (float32 matmul)")
case.input("x", sc.round_to_bfloat16_bits(x))
case.input("w", sc.round_to_bfloat16_bits(w))
case.output_ranks("y", pieces, "S(1)")
case.write(case_dir)
print("wrote", case_dir, "x", x.shape, "w", w.shape, "y in", p, "pieces")
