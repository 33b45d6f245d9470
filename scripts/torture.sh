#!/usr/bin/env bash
# The crash torture and the fault tests (docs/reliability.md), in the optimised build.
#   scripts/torture.sh              what every CI run does: 50 SIGKILLs per store
#   scripts/torture.sh --long [N]   N kills per store (default 2000) for the library
#                                   stores and for `idem consume` on Redis Streams
# Each crash torture prints one line per store: kills, redeliveries, duplicates
# caught, effects, mismatches.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

if [[ "${1:-}" == --long ]]; then
  export IDEM_TORTURE_KILLS=${2:-2000} IDEM_CONSUME_KILLS=${2:-2000}
  timeout=$((IDEM_TORTURE_KILLS * 3 + 600))  # s; a kill cycle takes well under 1 s
else
  timeout=600
fi
dir="$IDEM_ROOT/build/release"
idem_build "$dir" -DIDEM_BUILD_TESTS=ON -DIDEM_BUILD_BENCH=OFF
cd "$dir"
ctest -L "torture|faults" -V --timeout "$timeout" | grep -E "^[0-9]+: (crash torture|redis faults|disk full|sigstop)|tests passed|Failed|FAILED"
