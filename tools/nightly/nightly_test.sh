#!/usr/bin/env bash
# The ctests of scripts/nightly (tools/nightly/CMakeLists.txt):
#
#   nightly_test.sh clean|planted SOURCE FUZZ_BUILD SHARDCHECK_DIR WORK
#
# clean    a 45 s night of every harness (but those with open findings in
#          fuzz/regressions-pending/) and the property campaign on fresh state: exit 0,
#          and a summary with every harness's executions per second and every suite's cases.
# planted  a 20 s night of the planted-crash harness only (planted_crash_fuzz.cpp): exit 1
#          with one new, minimized (3 bytes: "BUG"), deduplicated finding whose replay command
#          fails again with the same report; then a second night on the same state: the finding
#          is known, not new, and the night exits 0.
# Exit 77 (skipped) when FUZZ_BUILD has no harness: scripts/test builds it before this test.
set -euo pipefail
mode=$1 root=$2 fuzz_build=$3 shardcheck_dir=$4 work=$5
py=/usr/bin/python3

if ! compgen -G "$fuzz_build/fuzz/*_fuzz" >/dev/null; then
  echo "skipped: no fuzz build in $fuzz_build (cmake --preset fuzz && cmake --build --preset fuzz)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
common=(--no-build --no-coverage --jobs 2 --fuzz-build "$fuzz_build"
        --default-build "$(dirname "$shardcheck_dir")" --state-dir "$work/state"
        --corpus-dir "$work/corpus")

# Reads summary.json of folder $1 and runs the Python checks $2 on it (as `s`).
check_summary() {
  "$py" - "$1/summary.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
exec(sys.argv[2])
PY
}

if [[ $mode == clean ]]; then
  # A harness with open findings (an input in fuzz/regressions-pending/<harness>/, the library
  # bug not fixed yet) finds them again within seconds: a clean night runs every other one.
  only=()
  for exe in "$fuzz_build"/fuzz/*_fuzz; do
    name=$(basename "$exe" _fuzz)
    if [[ -d "$root/fuzz/regressions-pending/$name" ]]; then
      echo "clean night: $name left out (open findings: fuzz/regressions-pending/$name/)"
      continue
    fi
    only+=(--harness "$name")
  done
  status=0
  "$root/scripts/nightly" "${common[@]}" "${only[@]}" --budget 45s --seed 1 --out "$work/night" ||
    status=$?
  cat "$work/night/summary.md"
  if ((status != 0)); then
    echo "FAIL: a clean night exited $status"
    exit 1
  fi
  if ! grep -q "<figure class=\"plot\" id=" "$work/night/summary.html"; then
    echo "FAIL: a clean night wrote no summary.html with its plots"
    exit 1
  fi
  check_summary "$work/night" '
assert s["verdict"] == "clean", s["verdict"]
assert len(s["harnesses"]) >= 4, [h["name"] for h in s["harnesses"]]
for h in s["harnesses"]:
    assert h["fuzz"]["exec_per_s"] > 0 and h["corpus"]["after"] > 0, h["name"]
p = s["properties"]
assert p["status"] == 0 and p["suites"], p
assert all(x["cases"] > 0 for x in p["suites"].values()), p["suites"]
print("clean night: OK,", len(s["harnesses"]), "harnesses,", len(p["suites"]), "suites")'
  exit 0
fi

planted=(--harness nightly_planted --harness-exe "$fuzz_build/tools/nightly/nightly_planted_fuzz"
         --no-properties --budget 20s)
mkdir -p "$work/corpus/nightly_planted"
printf 'BU' >"$work/corpus/nightly_planted/seed-BU"
status=0
"$root/scripts/nightly" "${common[@]}" "${planted[@]}" --out "$work/night1" || status=$?
cat "$work/night1/summary.md"
if ((status != 1)); then
  echo "FAIL: the planted crash must make the night exit 1, not $status"
  exit 1
fi
check_summary "$work/night1" '
import subprocess
assert s["verdict"] == "NEW FINDINGS" and s["new_findings"] == 1, (s["verdict"], s["new_findings"])
(h,) = s["harnesses"]
(c,) = h["new_crashes"]
assert "heap-buffer-overflow" in c["kind"], c["kind"]
assert c["frames"][0].endswith("planted_overflow"), c["frames"]
assert c["size"] == 3 and open(c["saved"], "rb").read() == b"BUG", c
assert c["crashes"] == len(h["fuzz"]["artifacts"]) >= 1, (c["crashes"], h["fuzz"]["artifacts"])
assert c["slug"] in open(sys.argv[1].replace(".json", ".md")).read()
r = subprocess.run(c["replay"], shell=True, capture_output=True, text=True)
assert r.returncode != 0 and "heap-buffer-overflow" in r.stderr, (r.returncode, r.stderr[-500:])
print("planted night 1: OK,", c["slug"], "from", c["crashes"], "crash file(s)")'

status=0
"$root/scripts/nightly" "${common[@]}" "${planted[@]}" --out "$work/night2" || status=$?
if ((status != 0)); then
  cat "$work/night2/summary.md"
  echo "FAIL: the second night must know the finding and exit 0, not $status"
  exit 1
fi
check_summary "$work/night2" '
assert s["new_findings"] == 0 and len(s["known_crashes"]) == 1, s["known_crashes"]
print("planted night 2: OK, known:", s["known_crashes"])'
