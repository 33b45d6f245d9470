#!/usr/bin/env bash
# Installs what idem needs from Debian 12's packages (only what is missing), then
# configures and builds one build tree. Sourced by demo.sh and test.sh.
#   usage: scripts/setup.sh [BUILD_DIR [extra cmake args…]]
set -euo pipefail

IDEM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

IDEM_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libsqlite3-dev libspdlog-dev libxxhash-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  librocksdb-dev libbloom-dev libhiredis-dev redis-server redis-tools
  libyaml-cpp-dev
  librabbitmq-dev rabbitmq-server libssl-dev openssl
  libnats-dev nats-server
  librdkafka-dev openjdk-17-jre-headless maven
  libboost-dev
  prometheus
  postgresql-15 libpq-dev
  ccache
  clang libclang-rt-14-dev
  iproute2 nftables python3 nodejs
  faketime
)

idem_install_packages() {
  local missing=()
  for p in "${IDEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "idem: installing ${missing[*]}" >&2
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# idem_build DIR [cmake args…]: configure (once) and build everything in DIR, through
# ccache when it is installed (the build trees of test.sh share most sources).
idem_build() {
  local dir=$1
  shift
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  local generator=()
  [[ -f $dir/CMakeCache.txt ]] || generator=(-G Ninja)  # a tree keeps the generator it was made with
  cmake -S "$IDEM_ROOT" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  idem_install_packages
  idem_build "${1:-$IDEM_ROOT/build/release}" "${@:2}"
fi
