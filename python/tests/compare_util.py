"""What the families' `shardcheck compare` end-to-end tests share (test_compare_<family>.py):
running the command, recording each check's outcome, and NumPy with python/shardcheck_case.py
(as np and sc) imported once."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import numpy as np  # noqa: F401 (the tests import it from here)
except ImportError:
    sys.exit("numpy is missing: scripts/setup installs python3-numpy (Debian)")

import shardcheck_case as sc  # noqa: E402,F401


class Checks:
    """Runs `BIN compare ...` and keeps the failed checks."""

    def __init__(self, binary):
        self.binary = binary
        self.failures = []

    def compare(self, *args):
        """(exit status, stdout + stderr) of `shardcheck compare ARGS`."""
        r = subprocess.run([self.binary, "compare", *args], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def expect(self, what, cond, output):
        if not cond:
            self.failures.append(what)
            print("FAILED: " + what + "\n" + output)
        else:
            print("ok: " + what)

    def finish(self):
        """Exits non-zero naming the failed checks, if any."""
        if self.failures:
            raise SystemExit("%d checks failed: %s"
                             % (len(self.failures), "; ".join(self.failures)))
        print("all checks passed")


def tensor_lines(out):
    """The verdict's tensor lines: "  ok   dx [7, 6] S(0): ..." or "  FAIL y [7, 6] ..."."""
    return [l for l in out.splitlines() if l.startswith(("  ok   ", "  FAIL "))]


def failing_tensors(out):
    """The names of the tensors the verdict fails, sorted."""
    return sorted(l.split()[1] for l in tensor_lines(out) if l.startswith("  FAIL "))
