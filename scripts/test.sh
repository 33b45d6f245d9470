#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, then run, each step printing
# its time: the kill, partition, torture and broker-scenario tests in an optimised
# build (RelWithDebInfo, what users run) and a two-minute soak of `idem consume`
# (scripts/soak.sh); every other test under ASan+UBSan; the threaded parts under TSan;
# 10 s of fuzzing per parser of outside input (scripts/fuzz.sh, clang, its own build
# tree: a smoke run; --long is the long one). Every test runs in at least one suite. CI's hard limit is 90 minutes on 2
# CPUs; the whole run is kept within 60 (the measured figures are in
# docs/CONTRIBUTING.md).
#   IDEM_TEST_SANITIZERS=0 scripts/test.sh   every test in the optimised build only (local use)
#   IDEM_TEST_FUZZ=0 scripts/test.sh         without the fuzzing step
# Each suite prints how many of its tests were skipped; under CI (or with
# IDEM_TEST_NO_SKIPS=1) one skipped test fails the run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
idem_install_packages

build_suite() {  # build_suite NAME [cmake args…]
  local name=$1 build_start=$SECONDS
  shift
  echo "== idem tests: $name build =="
  # `|| return`: the ASan build runs where `set -e` does not stop at a failure.
  idem_build "$IDEM_ROOT/build/$name" -DIDEM_BUILD_TESTS=ON -DIDEM_BUILD_BENCH=OFF "$@" || return
  echo "== idem tests: $name built in $((SECONDS - build_start)) s =="
}

test_suite() {  # test_suite NAME CTEST_LABEL_REGEX EXCLUDED_LABEL_REGEX
  local name=$1 labels=$2 excluded=$3 suite_start=$SECONDS
  local dir="$IDEM_ROOT/build/$name"
  local log="$dir/ctest.log" skipped
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600 ${labels:+-L "$labels"} ${excluded:+-LE "$excluded"}) |
    tee "$log"
  skipped=$(grep -c ' (Skipped)$' "$log" || true)
  echo "== idem tests: $name: $skipped skipped =="
  if ((skipped > 0)) && [[ -n ${CI:-} || ${IDEM_TEST_NO_SKIPS:-0} == 1 ]]; then
    echo "idem tests: $name: a skipped test fails the run here (CI): every test must run" >&2
    return 1
  fi
  echo "== idem tests: $name tests passed in $((SECONDS - suite_start)) s =="
}

run_suite() {  # run_suite NAME CTEST_LABEL_REGEX EXCLUDED_LABEL_REGEX [cmake args…]
  local name=$1 labels=$2 excluded=$3
  shift 3
  build_suite "$name" "$@"
  test_suite "$name" "$labels" "$excluded"
}

# As root (CI is), the partition tests can make their network namespaces, so one that
# cannot fails with its reason instead of skipping (tests/support/netns.hpp).
[[ $(id -u) -eq 0 ]] && export IDEM_REQUIRE_NETNS=1

start=$SECONDS
# Kafka's and Pulsar's broker jars from Maven Central, once, into a cache outside the
# build trees.
bash "$IDEM_ROOT/scripts/broker.sh" fetch kafka
bash "$IDEM_ROOT/scripts/broker.sh" fetch pulsar
# Optimised and without sanitizers (what users run), line tables only (-g1), which is
# what a failing test's stack needs: the tests where speed and timing matter most, the
# crash torture, the end-to-end kill and partition tests of `idem consume` on each
# broker and the broker scenarios (labels torture, kills, partitions, scenarios). Every other test (the in-process tests, the
# stores against their servers, the adapters, the idem command) runs under ASan+UBSan
# below, which checks more on the same code; neither suite builds the other's binaries.
heavy="torture;kills;partitions;scenarios"
release_args=(-DIDEM_BUILD_EXAMPLES=OFF "-DIDEM_TEST_LABELS=$heavy" -DIDEM_TEST_EXCLUDED_LABELS=)
if [[ ${IDEM_TEST_SANITIZERS:-1} == 0 ]]; then  # no sanitizer suites: every test here
  heavy="" release_args=(-DIDEM_BUILD_EXAMPLES=ON -DIDEM_TEST_LABELS= -DIDEM_TEST_EXCLUDED_LABELS=)
fi
run_suite release "${heavy//;/|}" "" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "${release_args[@]}"
# Two minutes of scripts/soak.sh on Redis Streams with the release build: memory,
# descriptors and the store's records stay flat under a steady rate and SIGKILLs. It
# runs while the ASan tree builds at the lowest CPU priority (nice 19): the soak's
# processes get the CPU they ask for (about a tenth of one core at its rate), and its
# two minutes cost the run nothing.
soak() {
  local soak_start=$SECONDS
  echo "== idem tests: soak (2 min) =="
  "$IDEM_ROOT/scripts/soak.sh" --minutes 2 --ttl-ms 20000 --kill-every 40 --warmup 30 --out "$IDEM_ROOT/build/soak"
  echo "== idem tests: soak passed in $((SECONDS - soak_start)) s =="
}
if [[ "${IDEM_TEST_SANITIZERS:-1}" == 0 ]]; then
  soak
else
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  # Every test under ASan+UBSan but those of the release suite (above), whose binaries
  # are not built here either: under ASan they would re-test the same code paths at
  # several times the cost (minutes per broker), which CI's time budget does not have.
  soak &
  soak_pid=$!
  build_status=0
  (
    renice -n 19 -p "$BASHPID" >/dev/null
    build_suite asan -DIDEM_SANITIZE=address,undefined -DIDEM_BUILD_EXAMPLES=ON \
      "-DIDEM_TEST_EXCLUDED_LABELS=torture;kills;partitions;scenarios" -DIDEM_TEST_LABELS=
  ) || build_status=$?
  wait "$soak_pid" || { echo "idem tests: the soak failed" >&2; exit 1; }
  ((build_status == 0)) || exit "$build_status"
  test_suite asan "" "torture|kills|partitions|scenarios"
  # TSan on the code whose threads idem owns: the middleware, the conformance suite
  # (its concurrent claims), the stores' own thread tests, and the binaries labelled
  # "threads" (ordering and state machines under two threads), over memory: and
  # sqlite:. Debian's RocksDB, hiredict, libpq, rabbitmq-c, nats.c and librdkafka are not
  # TSan-instrumented, so their binaries (Redis and PostgreSQL stores, the Redis
  # Streams, RabbitMQ, NATS and Kafka adapters) run under ASan only, as does the Pulsar
  # adapter, whose tests are broker tests on one thread; yaml-cpp runs
  # single-threaded (loading tables) and is kept.
  run_suite tsan "unit|conformance|sqlite|threads" "" -DIDEM_SANITIZE=thread -DIDEM_BUILD_EXAMPLES=OFF \
    "-DIDEM_TEST_LABELS=unit;conformance;sqlite;threads" \
    -DIDEM_BUILD_TOOLS=OFF -DIDEM_WITH_ROCKSDB=OFF -DIDEM_WITH_BLOOM=OFF -DIDEM_WITH_REDIS=OFF \
    -DIDEM_WITH_REDIS_STREAMS=OFF -DIDEM_WITH_RABBITMQ=OFF -DIDEM_WITH_NATS=OFF -DIDEM_WITH_KAFKA=OFF \
    -DIDEM_WITH_POSTGRES=OFF -DIDEM_WITH_PULSAR=OFF \
    -DIDEM_WITH_STATEMACHINE=ON
fi
if [[ "${IDEM_TEST_FUZZ:-1}" != 0 ]]; then
  fuzz_start=$SECONDS
  echo "== idem tests: fuzz (10 s per target) =="
  "$IDEM_ROOT/scripts/fuzz.sh" --seconds 10
  echo "== idem tests: fuzz passed in $((SECONDS - fuzz_start)) s =="
fi
echo "== idem tests: all suites passed in $((SECONDS - start)) s =="
