"""What the PyTorch examples (examples/pytorch/*_cases.py) share: torch and the case writer
imported, tensors as NumPy arrays, torch.chunk's split sizes, and running `shardcheck compare`
with each expectation printed and counted.

    from torch_support import torch, F, sc, np_of, chunk_sizes, Checks
    checks = Checks(sys.argv[1])               # the shardcheck binary
    code, out = checks.compare(case_dir)       # exit status, stdout + stderr
    checks.expect("what must hold", cond, out)
    checks.expect_fails("planted bug", case_dir, ["y", "db"])   # exit 1, exactly these tensors
    checks.finish()                            # exits non-zero when an expectation failed
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# compare_support (python/tests/) puts python/ on the path for shardcheck_case.
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch is missing: scripts/setup installs python3-torch (Debian)")

from compare_support import Session, all_passed, failing_tensors  # noqa: E402
import shardcheck_case as sc  # noqa: E402,F401 (re-exported)

DTYPES = {torch.float64: "float64", torch.float32: "float32"}


def np_of(t):
    """A tensor's values as a NumPy array (detached, on the CPU); a bfloat16 tensor's as its raw
    bits (uint16), the form python/shardcheck_case.py takes for "bfloat16"."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view("uint16")
    return t.numpy()


def chunk_sizes(n, p):
    """torch.chunk's sizes (shardcheck's SplitPolicy chunk): ceil(n/p) each, the trailing ones
    smaller or empty."""
    c = -(-n // p)
    return [min(c, max(0, n - r * c)) for r in range(p)]


class Checks(Session):
    """One example's runs of `shardcheck compare` and its expectations (compare_support's
    Session: compare, expect, finish), with the two every example makes."""

    def expect_passes(self, what, case_dir, n):
        """All n cases under case_dir pass (exit 0); returns the output."""
        code, out = self.compare(case_dir)
        print(out)
        self.expect(what + " (exit 0)", all_passed(code, out, n), out)
        return out

    def expect_fails(self, what, case_dir, tensors):
        """The case under case_dir fails (exit 1) on exactly `tensors`."""
        code, out = self.compare(case_dir)
        print(out)
        self.expect("%s fails on %s only (exit 1)" % (what, " and ".join(tensors)),
                    code == 1 and failing_tensors(out) == sorted(tensors), out)
        return out
