#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, run the whole test suite:
# every test under ASan+UBSan, then the threaded parts again under TSan. (The
# sanitizer builds are the test builds: a separate optimised run would double the
# build time on a 2-core machine for little more coverage.)
#   IDEM_TEST_SANITIZERS=0 scripts/test.sh   one plain optimised build instead (local use)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
idem_install_packages

run_suite() {  # run_suite NAME CTEST_LABEL_REGEX [cmake args…]
  local name=$1 labels=$2
  shift 2
  local dir="$IDEM_ROOT/build/$name"
  echo "== idem tests: $name build =="
  idem_build "$dir" -DIDEM_BUILD_TESTS=ON -DIDEM_BUILD_BENCH=OFF "$@"
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600 ${labels:+-L "$labels"})
}

start=$SECONDS
if [[ "${IDEM_TEST_SANITIZERS:-1}" == 0 ]]; then
  run_suite release ""
else
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  # Every test under ASan+UBSan.
  run_suite asan "" -DIDEM_SANITIZE=address,undefined -DIDEM_BUILD_EXAMPLES=ON
  # TSan on the code whose threads idem owns: the middleware, the conformance suite
  # (its concurrent claims) and the stores' own thread tests. Debian's RocksDB and
  # hiredis are not TSan-instrumented, so their binaries run under ASan only.
  run_suite tsan "unit|conformance|sqlite" -DIDEM_SANITIZE=thread -DIDEM_BUILD_EXAMPLES=OFF \
    -DIDEM_BUILD_TOOLS=OFF -DIDEM_WITH_ROCKSDB=OFF -DIDEM_WITH_BLOOM=OFF -DIDEM_WITH_REDIS=OFF \
    -DIDEM_WITH_STATEMACHINE=OFF
fi
echo "== idem tests: all suites passed in $((SECONDS - start)) s =="
