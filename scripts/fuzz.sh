#!/usr/bin/env bash
# Fuzzes every parser of outside input with libFuzzer (fuzz/, docs/reliability.md):
# builds the targets with clang under ASan+UBSan in build/fuzz, then runs each for a
# bounded time from its seed corpus (fuzz/corpus/<target>/). Prints one line per
# target (executions, new corpus inputs, crashes) and exits 1 if any target crashed;
# the input that did is kept in build/fuzz/crashes/<target>/ — add it to
# fuzz/corpus/<target>/ with the fix, where the test fuzz_corpus_<target> replays it.
#   usage: scripts/fuzz.sh [--long] [--seconds N] [TARGET…]
#     default  20 s per target (scripts/test.sh runs 10)
#     --long   4 hours per target, unless --seconds says otherwise
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

seconds=20
targets=()
while (($#)); do
  case $1 in
    --long) seconds=${IDEM_FUZZ_LONG_SECONDS:-14400} ;;
    --seconds) seconds=$2; shift ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
((${#targets[@]})) || targets=(trace_line broker_body machine_yaml store_uri store_records)

dir="$IDEM_ROOT/build/fuzz"
cmake_targets=()
for t in "${targets[@]}"; do cmake_targets+=("fuzz_$t"); done
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
[[ -f $dir/CMakeCache.txt ]] || generator=(-G Ninja)
# -O1 -g1: libFuzzer's usual level, and line tables are what a crash's stack needs.
cmake -S "$IDEM_ROOT" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  -DIDEM_FUZZ=ON -DIDEM_BUILD_TESTS=OFF -DIDEM_BUILD_TOOLS=OFF -DIDEM_BUILD_EXAMPLES=OFF -DIDEM_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${cmake_targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# One target per CPU at a time; each prints its line when it ends.
fuzz_target() {
  local t=$1 work="$dir/corpus/$1" crashes="$dir/crashes/$1" log="$dir/logs/$1.log" status=0 execs found
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  # New inputs go to the first folder (build/fuzz/corpus), the seeds stay as committed.
  "$dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$work" "$IDEM_ROOT/fuzz/corpus/$t" >"$log" 2>&1 || status=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  found=$(find "$crashes" -type f | wc -l)
  echo "fuzz $t: $execs executions in $seconds s, corpus $(find "$work" -type f | wc -l) inputs, $found crash inputs"
  if ((status != 0 || found != 0)); then
    echo "fuzz $t: FAILED (exit $status); log $log, inputs in $crashes/" >&2
    grep -m 20 -E 'ERROR|runtime error|fuzz invariant|SUMMARY' "$log" >&2 || true
    return 1
  fi
}
failed=0
running=0
for t in "${targets[@]}"; do
  if ((running >= $(nproc))); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_target "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
exit $failed
