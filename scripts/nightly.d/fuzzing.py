"""One harness's night: fuzz with libFuzzer's fork mode, merge the new inputs into the kept
corpus, minimize every crash and deduplicate the crashes by stack signature (docs/nightly.md)."""

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

# Frames that say where the sanitizer or libFuzzer caught the bug, not where it is.
RUNTIME_FRAME = re.compile(
    r"^(__sanitizer|__asan|__ubsan|__lsan|__interceptor|__interception|fuzzer::|__libc|"
    r"__GI_|raise$|abort$|gsignal|_start|main$|std::terminate|__cxa|__gxx|"
    r"__sanitizer_print_stack_trace|malloc$|calloc$|realloc$|free$|operator new|operator delete)"
)
FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ in (.+?) (/\S+|\(\S+\))")
KIND = re.compile(
    r"(ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [\w-]+( on| \()?|runtime error: [^\n]*|"
    r"SUMMARY: UndefinedBehaviorSanitizer: [\w-]+)"
)


def count_files(d):
    files = [p for p in Path(d).iterdir() if p.is_file()] if Path(d).is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


def env_for(root):
    env = dict(os.environ)
    supp = f"suppressions={root}/fuzz/lsan.supp"
    env["LSAN_OPTIONS"] = supp + (":" + env["LSAN_OPTIONS"] if env.get("LSAN_OPTIONS") else "")
    # A UBSan report with its stack, so that it has a signature.
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:" + env.get("UBSAN_OPTIONS", "")
    return env


def short_function(f):
    """'shardcheck::ns::fn(int, ...) const' -> 'shardcheck::ns::fn'."""
    depth, out = 0, []
    for c in f:
        if c in "(<":
            if depth == 0 and c == "(" and out:
                break
            depth += 1
        elif c in ")>":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out).strip() or f


def signature(log, frames=3):
    """(kind, top frames) of a sanitizer/libFuzzer report: the error kind and the first `frames`
    function names of the first stack that are not the runtime's own."""
    kind_m = KIND.search(log)
    kind = kind_m.group(0) if kind_m else "unknown"
    kind = re.sub(r"0x[0-9a-f]+|\d+", "N", kind).strip(" (").replace(" on", "")
    kind = kind.replace("ERROR: ", "").replace("SUMMARY: ", "")
    if "runtime error:" in kind:  # keep the check, drop the values it names
        kind = "UBSan: " + re.sub(r"'[^']*'", "'T'", kind.split("runtime error:")[1]).strip()[:80]
    top = []
    for line in log.splitlines():
        m = FRAME.match(line)
        if not m:
            if top and line.strip() == "":
                break
            continue
        fn = short_function(m.group(2).replace("(anonymous namespace)", "{anon}"))
        if RUNTIME_FRAME.match(fn) or "/compiler-rt/" in m.group(3) or "libFuzzer" in m.group(3):
            continue
        top.append(fn)
        if len(top) == frames:
            break
    return kind, top


def slug(kind, top):
    base = (top[0] if top else kind).split("::")[-1]
    base = re.sub(r"[^A-Za-z0-9]+", "-", base).strip("-").lower()[:40] or "crash"
    k = re.sub(r"[^A-Za-z0-9]+", "-", kind.split(":")[-1]).strip("-").lower()[:30]
    digest = hashlib.sha1((kind + "|" + "|".join(top)).encode()).hexdigest()[:8]
    return f"{k}-{base}-{digest}"


def run_logged(cmd, log_path, env, timeout):
    with open(log_path, "w") as log:
        try:
            return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def fuzz(h, seconds, jobs, work, corpus, root):
    """Fuzzes h (a dict: name, exe, dict) for `seconds` with -fork=jobs; returns the figures
    and the crash artifacts."""
    new = work / "new"
    artifacts = work / "artifacts"
    for d in (new, artifacts):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    cmd = [h["exe"], f"-fork={jobs}", "-ignore_crashes=1", "-ignore_timeouts=1",
           "-ignore_ooms=1", f"-max_total_time={max(1, int(seconds))}", "-timeout=30",
           "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/"]
    if h.get("dict"):
        cmd.append(f"-dict={h['dict']}")
    cmd += [str(new), str(corpus)]
    log = work / "fuzz.log"
    t0 = time.monotonic()
    status = run_logged(cmd, log, env_for(root), seconds + 120)
    elapsed = time.monotonic() - t0
    text = log.read_text(errors="replace")
    execs = [int(m) for m in re.findall(r"^#(\d+):", text, re.M)]
    cov = re.findall(r"cov: (\d+) ft: (\d+)", text)
    rates = re.findall(r"exec/s:? (\d+)", text)
    return {
        "status": status,
        "seconds": round(elapsed, 1),
        "executions": execs[-1] if execs else 0,
        "exec_per_s": round(execs[-1] / elapsed, 1) if execs and elapsed > 0 else 0,
        "libfuzzer_exec_per_s": int(rates[-1]) if rates else None,
        "edges": int(cov[-1][0]) if cov else None,
        "features": int(cov[-1][1]) if cov else None,
        "log": str(log),
        "artifacts": sorted(str(p) for p in artifacts.iterdir() if p.is_file()),
        "new_dir": str(new),
    }


def merge(h, corpus, new_dir, work, root):
    """libFuzzer's -merge=1: the inputs of new_dir that add coverage join the corpus."""
    before = count_files(corpus)[0]
    cmd = [h["exe"], "-merge=1", "-timeout=30", "-rss_limit_mb=2048", str(corpus), str(new_dir)]
    status = run_logged(cmd, work / "merge.log", env_for(root), 1800)
    return {"status": status, "added": count_files(corpus)[0] - before}


def minimize(h, crash, out_path, seconds, work, root):
    """-minimize_crash=1: the smallest input that still crashes, written to out_path (the
    crash itself when minimization finds nothing smaller)."""
    cmd = [h["exe"], "-minimize_crash=1", f"-max_total_time={max(1, int(seconds))}",
           "-runs=100000", "-timeout=30", f"-exact_artifact_path={out_path}", str(crash)]
    run_logged(cmd, work / "minimize.log", env_for(root), seconds + 120)
    if not Path(out_path).is_file():
        shutil.copyfile(crash, out_path)


def replay(h, input_path, work, root):
    """Runs h once on input_path: its exit status and its report."""
    log = work / "replay.log"
    status = run_logged([h["exe"], "-timeout=30", str(input_path)], log, env_for(root), 300)
    return status, log.read_text(errors="replace")


def triage(h, crashes, seconds, work, root):
    """Every crash replayed and grouped by signature; the smallest input of each group then
    minimized (kept only when the minimized input fails with the same signature). Returns one
    finding per signature: its kind, frames, slug, input, report and how many crashes it holds."""
    groups = {}
    for crash in crashes:
        status, log = replay(h, crash, work, root)
        kind, top = signature(log)
        g = groups.setdefault(slug(kind, top), {"kind": kind, "frames": top, "inputs": []})
        g["inputs"].append((Path(crash).stat().st_size, str(crash), log, status))
    findings = []
    per_group = max(5, seconds / max(1, len(groups)))
    for i, (key, g) in enumerate(sorted(groups.items())):
        _, smallest, log, status = min(g["inputs"])
        minimized = work / f"minimized-{i}"
        minimize(h, smallest, minimized, per_group, work, root)
        m_status, m_log = replay(h, minimized, work, root)
        if m_status != 0 and slug(*signature(m_log)) == key:
            smallest, log, status = str(minimized), m_log, m_status
        findings.append({"slug": key, "kind": g["kind"], "frames": g["frames"],
                         "crashes": len(g["inputs"]), "input": smallest, "report": log,
                         "replays": status != 0})
    return findings
