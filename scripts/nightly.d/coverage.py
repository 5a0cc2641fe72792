"""Clang source-based coverage of one harness on its corpus: the harness built with
-fprofile-instr-generate -fcoverage-mapping runs every corpus input once (-runs=0), then
llvm-profdata-14 merges the profile and llvm-cov-14 export -summary-only totals it."""

import json
import os
import shutil
import subprocess
from pathlib import Path

PROFDATA = "llvm-profdata-14"
COV = "llvm-cov-14"
# Third-party headers (Eigen, Boost, the C++ library) are not ours to cover.
IGNORE = r"^/usr/"


def tools_missing():
    return [t for t in (PROFDATA, COV) if shutil.which(t) is None]


def configure_and_build(root, build, targets, jobs):
    """The coverage build: the fuzz preset with clang's coverage flags instead of the
    sanitizers, in its own folder. Returns None, or why it could not be built: the first line
    that says error, and the build log's path.

    clang 14 crashes under -fcoverage-mapping ("File exit not handled before popRegions",
    llvm/llvm-project#54907) on a braced temporary inside a condition (`s != Shape{n}`): the
    code writes `Shape({n})` there (docs/nightly.md, "Coverage")."""
    # No sanitizers and -O0: it only replays the corpus, and compiles fastest this way.
    flags = "-O0 -g0 -fsanitize=fuzzer-no-link -fprofile-instr-generate -fcoverage-mapping"
    link = "-fprofile-instr-generate"
    if not (Path(build) / "CMakeCache.txt").is_file():
        r = subprocess.run(["cmake", "--preset", "fuzz", "-S", str(root), "-B", str(build),
                            f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={link}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return "configure failed: " + r.stderr[-500:]
    r = subprocess.run(["cmake", "--build", str(build), "-j", str(jobs), "--target", *targets],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log = Path(build) / "coverage-build.log"
        log.write_text(r.stdout + r.stderr)
        lines = (r.stdout + r.stderr).splitlines()
        first = next((l for l in lines if "error" in l), lines[-1] if lines else "")
        return f"build failed ({log}): {first.strip()}"
    return None


def measure(exe, corpus, work, root):
    """{'lines': {count, covered, percent}, 'regions': ..., 'branches': ..., 'functions': ...},
    or {'error': why}."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    raw = work / "coverage.profraw"
    data = work / "coverage.profdata"
    env = dict(os.environ, LLVM_PROFILE_FILE=str(raw),
               LSAN_OPTIONS=f"suppressions={root}/fuzz/lsan.supp")
    with open(work / "coverage-run.log", "w") as log:
        r = subprocess.run([str(exe), "-runs=0", "-timeout=30", "-rss_limit_mb=2048", str(corpus)],
                           stdout=log, stderr=subprocess.STDOUT, env=env)
    if not raw.is_file():
        return {"error": f"no profile written (status {r.returncode}; {work}/coverage-run.log)"}
    r = subprocess.run([PROFDATA, "merge", "-sparse", str(raw), "-o", str(data)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": "llvm-profdata: " + r.stderr[-300:]}
    r = subprocess.run([COV, "export", "-summary-only", f"-ignore-filename-regex={IGNORE}",
                        str(exe), f"-instr-profile={data}"], capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": "llvm-cov: " + r.stderr[-300:]}
    totals = json.loads(r.stdout)["data"][0]["totals"]
    keep = ("count", "covered", "percent")
    return {k: {f: totals[k][f] for f in keep} for k in ("lines", "regions", "branches",
                                                         "functions") if k in totals}


def growth(now, before):
    """Covered lines, regions and branches now minus before (None without a previous night)."""
    if not before or "error" in before or "error" in now:
        return None
    return {k: now[k]["covered"] - before[k]["covered"] for k in ("lines", "regions", "branches")
            if k in now and k in before}
