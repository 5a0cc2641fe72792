"""What the end-to-end tests of `shardcheck compare` (python/tests/test_compare_*.py) share: the
split sizes the ops use, and running the command with each expectation printed and counted.

    from compare_support import Session, chunks, numpy_or_exit, offsets
    np = numpy_or_exit()                      # NumPy, or exit naming its Debian package
    session = Session(sys.argv[1])            # the shardcheck binary
    code, out = session.compare(case_dir)     # exit status, stdout + stderr
    session.expect("what must hold", cond, out)
    session.expect_correct_cases(good_dir, n, exact_below, "they pass", "they round")
    session.finish()                          # exits non-zero when an expectation failed
"""

import os
import subprocess
import sys

# shardcheck_case.py sits in python/, one folder up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def numpy_or_exit():
    """NumPy, or the script exits saying how to install it."""
    try:
        import numpy
    except ImportError:
        sys.exit("numpy is missing: scripts/setup installs python3-numpy (Debian)")
    return numpy


def chunks(n, p):
    """SplitPolicy chunk (torch.chunk, DTensor Shard): ceil(n/p) each, the trailing ones
    smaller or empty."""
    c = -(-n // p)
    sizes, left = [], n
    for _ in range(p):
        sizes.append(min(c, left))
        left -= sizes[-1]
    return sizes


def offsets(sizes):
    """The (begin, end) of each piece of a split with these sizes."""
    out, o = [], 0
    for s in sizes:
        out.append((o, o + s))
        o += s
    return out


class Session:
    """One test script's runs of `shardcheck compare` and its expectations."""

    def __init__(self, binary):
        self.binary = binary
        self.failures = []

    def compare(self, *args):
        r = subprocess.run([self.binary, "compare", *args], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def expect(self, what, cond, output):
        if not cond:
            self.failures.append(what)
            print("FAILED: " + what + "\n" + output)
        else:
            print("ok: " + what)

    def expect_correct_cases(self, case_dir, n, exact_below, passes, rounds):
        """Compares case_dir, the n cases of a correct implementation: expects `passes`, all n
        passed (exit 0), and `rounds`, fewer than exact_below tensor verdicts with no error at
        all (see exact_tensors)."""
        code, out = self.compare(case_dir)
        self.expect(passes, all_passed(code, out, n), out)
        self.expect(rounds, exact_tensors(out) < exact_below, out)

    def finish(self):
        """Exits non-zero naming the failed expectations, if any."""
        if self.failures:
            sys.exit("%d checks failed: %s" % (len(self.failures), "; ".join(self.failures)))
        print("all checks passed")


def all_passed(code, out, n):
    """The run exited 0 and its summary says n cases, all passed."""
    return code == 0 and "%d cases, %d passed, 0 failed" % (n, n) in out


def exact_tensors(out):
    """How many tensor verdicts measured no error at all ("max err 0,"): a correct run in a
    rounding element type must have fewer than all of them."""
    return out.count("max err 0,")


def tensor_lines(out):
    """The verdict's tensor lines: "  ok   dx [7, 6] S(0): ..." or "  FAIL y [7, 6] ..."."""
    return [line for line in out.splitlines() if line.startswith(("  ok   ", "  FAIL "))]


def failing_tensors(out):
    """The names of the tensors the verdict fails, sorted."""
    return sorted(line.split()[1] for line in tensor_lines(out) if line.startswith("  FAIL "))
