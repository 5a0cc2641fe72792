"""summary.json and summary.md of one night (the format: docs/nightly.md, "The summary")."""

import json
from pathlib import Path


def _cov(c):
    if not c:
        return "not measured"
    if "error" in c:
        # One line in a table cell: the first line of the reason (the whole is in summary.json).
        first = c["error"].strip().splitlines()[0] if c["error"].strip() else "unknown"
        return "error: " + first.replace("|", "\\|")
    return (f"lines {c['lines']['covered']}/{c['lines']['count']}, regions "
            f"{c['regions']['covered']}/{c['regions']['count']}")


def _growth(g):
    if g is None:
        return "first night"
    return ", ".join(f"{k} {v:+d}" for k, v in g.items())


def write_page(tool, out, nights=30):
    """OUT/summary.html over the last `nights` nights: the summary.json files of OUT's sibling
    folders (the nights under the same root), oldest first, OUT's own last. Returns "" when
    written, else what went wrong."""
    import subprocess
    out = Path(out)
    others = sorted(p for p in out.parent.glob("*/summary.json") if p.parent != out)
    files = [str(p) for p in others[-(nights - 1):]] + [str(out / "summary.json")]
    if not Path(tool).is_file():
        return f"no {tool}: build the default preset (summary.html not written)"
    r = subprocess.run([str(tool), str(out / "summary.html")] + files, capture_output=True,
                       text=True, check=False)
    return "" if r.returncode == 0 else (r.stderr.strip() or f"{tool} exited {r.returncode}")


def write(summary, out):
    out = Path(out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    md = [f"# shardcheck nightly {summary['date']}", "",
          f"Verdict: **{summary['verdict']}** ({summary['new_findings']} new findings). "
          f"Budget {summary['budget_s']} s, {summary['jobs']} fuzzing jobs, started "
          f"{summary['started']}, took {summary['took_s']} s; load average at the start "
          f"{summary['load_average']}.", "",
          "## Harnesses", "",
          "| harness | exec/s | executions | edges | coverage | growth | corpus | new inputs "
          "| crash files | new crashes |", "|---|---|---|---|---|---|---|---|---|---|"]
    for h in summary["harnesses"]:
        f = h["fuzz"]
        md.append(f"| {h['name']} | {f['exec_per_s']} | {f['executions']} | {f['edges']} | "
                  f"{_cov(h.get('coverage'))} | {_growth(h.get('coverage_growth'))} | "
                  f"{h['corpus']['before']} → {h['corpus']['after']} | {h['merge']['added']} | "
                  f"{len(f['artifacts'])} | {len(h['new_crashes'])} |")
    md += ["", "## New crashes", ""]
    crashes = [(h["name"], c) for h in summary["harnesses"] for c in h["new_crashes"]]
    if not crashes:
        md.append("None.")
    for name, c in crashes:
        md += [f"### {name}: {c['slug']}", "",
               f"- kind: {c['kind']}; top frames: {' ← '.join(c['frames']) or '(none)'}",
               f"- {c['crashes']} crash file(s) with this signature; minimized input "
               f"({c['size']} bytes): `{c['saved']}`",
               f"- replay: `{c['replay']}`", ""]
    if summary.get("known_crashes"):
        md += ["", "Known crashes seen again (not new): " +
               ", ".join(f"{n}/{s}" for n, s in summary["known_crashes"]), ""]
    p = summary["properties"]
    md += ["", "## Property campaign", ""]
    if p is None:
        md.append("Not run.")
    else:
        md += [f"`{p['command']}` → status {p['status']}" + (f" ({p['error']})" if p["error"]
                                                              else ""), "",
               f"Replayed from the database first: {p['known_still_failing']} still failing, "
               f"{p['known_fixed']} no longer failing.", "",
               "| suite | properties | cases | worst bound ratio | failed | new counterexamples |",
               "|---|---|---|---|---|---|"]
        for name, s in sorted(p["suites"].items()):
            md.append(f"| {name} | {s['properties']} | {s['cases']} | "
                      f"{s['worst_bound_ratio']:.3g} | {', '.join(s['failed']) or '—'} | "
                      f"{len(s['new_counterexamples'])} |")
        for name, s in sorted(p["suites"].items()):
            for e in s["new_counterexamples"]:
                first = e["counterexample"].splitlines()[0] if e["counterexample"] else ""
                md += ["", f"- **{name}/{e['property']}** [{e['impl']}]: {first}",
                       f"  replay: `{e['replay']}`"]
    (out / "summary.md").write_text("\n".join(md) + "\n")
