"""The night's property campaign: `shardcheck check --time SHARE --seed S --max-world 16
--replay-db DB --report DIR`, read back per suite (cases run, worst bound ratio, new
counterexamples: the lines the run appended to the database)."""

import json
import re
import subprocess
from pathlib import Path

LINE = re.compile(r"^(PASS|FAIL)  (\S+?)/(\S+) \[(\S+)\]  (?:after )?(\d+) ")
RATIO = re.compile(r"worst bound ratio (\S+)$")


def db_lines(db):
    return Path(db).read_text().splitlines() if Path(db).is_file() else []


def run(shardcheck, seconds, seed, max_world, db, out_dir):
    before = len(db_lines(db))
    report = Path(out_dir) / "check"
    cmd = [str(shardcheck), "check", "--time", f"{max(1, int(seconds))}s", "--seed", str(seed),
           "--max-world", str(max_world), "--replay-db", str(db), "--report", str(report)]
    log = Path(out_dir) / "check.log"
    with open(log, "w") as f:
        status = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    text = log.read_text(errors="replace")
    suites = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        verdict, suite, prop, _impl, cases = m.groups()
        s = suites.setdefault(suite, {"cases": 0, "properties": 0, "failed": [],
                                      "worst_bound_ratio": 0.0})
        s["cases"] += int(cases)
        s["properties"] += 1
        r = RATIO.search(line)
        if r:
            s["worst_bound_ratio"] = max(s["worst_bound_ratio"], float(r.group(1)))
        if verdict == "FAIL":
            s["failed"].append(prop)
    new = [json.loads(l) for l in db_lines(db)[before:] if l.strip()]
    for e in new:
        e["replay"] = (f"shardcheck check {e['suite']} --impl {e['impl']} --property "
                       f"{e['property']} --seed {e['seed']} --cases {e['cases']} --max-world "
                       f"{e['max_world']} --dtype {e['dtypes']}")
        suites.setdefault(e["suite"], {"cases": 0, "properties": 0, "failed": [],
                                       "worst_bound_ratio": 0.0})
    for name, s in suites.items():
        s["new_counterexamples"] = [e for e in new if e["suite"] == name]
    still = re.search(r"replay-db \S+: (\d+) still failing, (\d+) no longer failing", text)
    return {
        "command": " ".join(cmd),
        "status": status,
        "log": str(log),
        "seed": seed,
        "max_world": max_world,
        "replay_db": str(db),
        "known_still_failing": int(still.group(1)) if still else None,
        "known_fixed": int(still.group(2)) if still else None,
        "suites": suites,
        "new_counterexamples": len(new),
        # A usage or internal error (2, 3) is not a finding, but the night did not do its job.
        "error": None if status in (0, 1) else f"status {status}: see {log}",
    }
