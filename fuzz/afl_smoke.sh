#!/usr/bin/env bash
# ctest fuzz.afl.split_policy: the split policy harness (split_policy_fuzz.cpp, unchanged) built
# for AFL++ with afl-clang-fast++ -fsanitize=fuzzer (AFL++'s libFuzzer-compatible driver,
# libAFLDriver), every seed of fuzz/corpus/split_policy run through it, then 5 s of afl-fuzz.
# Fails when the build fails, a seed fails, afl-fuzz executes nothing or saves a crash.
# Exits 77 (ctest: skipped) when AFL++ (Debian package afl++, in scripts/setup) is absent.
#
#   fuzz/afl_smoke.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src="$1"
work="$2"
if ! command -v afl-clang-fast++ >/dev/null || ! command -v afl-fuzz >/dev/null; then
  echo "afl_smoke: SKIPPED, AFL++ is not installed (apt-get install afl++, or scripts/setup)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
AFL_QUIET=1 afl-clang-fast++ -std=c++20 -O1 -fsanitize=fuzzer -I"$src/lib" -I"$src/fuzz" \
  "$src/fuzz/split_policy_fuzz.cpp" "$src/lib/layout/split_policy.cpp" -o "$work/split_policy_afl"
seeds=0
for f in "$src"/fuzz/corpus/split_policy/*; do
  "$work/split_policy_afl" "$f" >/dev/null
  seeds=$((seeds + 1))
done
echo "afl_smoke: $seeds seeds ran through the AFL++ build"
AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 \
  AFL_SKIP_BIN_CHECK=0 afl-fuzz -i "$src/fuzz/corpus/split_policy" -o "$work/out" -V 5 \
  -- "$work/split_policy_afl" >"$work/afl-fuzz.log" 2>&1
stats="$work/out/default/fuzzer_stats"
execs="$(sed -n 's/^execs_done *: *//p' "$stats")"
crashes="$(sed -n 's/^saved_crashes *: *//p' "$stats")"
echo "afl_smoke: afl-fuzz ran $execs executions in 5 s, $crashes crashes"
((execs > 0)) || { echo "afl_smoke: afl-fuzz executed nothing; see $work/afl-fuzz.log" >&2; exit 1; }
((crashes == 0)) || { echo "afl_smoke: crashes in $work/out/default/crashes" >&2; exit 1; }
