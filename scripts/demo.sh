#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build, run the demo on the
# embedded SQLite store.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
idem_install_packages
idem_build "$IDEM_ROOT/build/release" -DIDEM_BUILD_TESTS=OFF -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_EXAMPLES=ON
exec "$IDEM_ROOT/build/release/examples/demo/idem_demo" "$@"
