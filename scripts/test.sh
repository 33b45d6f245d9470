#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, run the whole test suite:
# a release build, then the same tests under ASan+UBSan and under TSan.
#   IDEM_TEST_SANITIZERS=0 scripts/test.sh   skips the sanitizer builds (local use)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
idem_install_packages

run_suite() {  # run_suite NAME [cmake args…]
  local name=$1
  shift
  local dir="$IDEM_ROOT/build/$name"
  echo "== idem tests: $name build =="
  idem_build "$dir" -DIDEM_BUILD_BENCH=OFF "$@"
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
}

start=$SECONDS
run_suite release
if [[ "${IDEM_TEST_SANITIZERS:-1}" != 0 ]]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  run_suite asan -DIDEM_SANITIZE=address,undefined -DIDEM_BUILD_EXAMPLES=OFF
  run_suite tsan -DIDEM_SANITIZE=thread -DIDEM_BUILD_EXAMPLES=OFF
fi
echo "== idem tests: all suites passed in $((SECONDS - start)) s =="
