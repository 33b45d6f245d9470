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
  librocksdb-dev libbloom-dev redis-server redis-tools
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

# From bookworm-backports (Debian's own suite for newer versions, on the same mirror):
# hiredict 1.3, a hiredis 1.x with TLS, where Debian 12's hiredis 0.14 has none.
IDEM_BACKPORTS_PACKAGES=(libhiredict-dev)
IDEM_BACKPORTS_SOURCE=/etc/apt/sources.list.d/idem-bookworm-backports.sources

idem_missing() {  # idem_missing PACKAGE…: those not installed
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

idem_install_packages() {
  local missing backports
  mapfile -t missing < <(idem_missing "${IDEM_PACKAGES[@]}")
  mapfile -t backports < <(idem_missing "${IDEM_BACKPORTS_PACKAGES[@]}")
  ((${#missing[@]} + ${#backports[@]} == 0)) && return 0
  echo "idem: installing ${missing[*]} ${backports[*]}" >&2
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ((${#backports[@]})) && ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: bookworm-backports" \
      "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
      $sudo tee "$IDEM_BACKPORTS_SOURCE" >/dev/null
  fi
  $sudo apt-get update -qq
  if ((${#missing[@]})); then
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ((${#backports[@]})); then
    $sudo apt-get install -y -qq --no-install-recommends -t bookworm-backports "${backports[@]}" >/dev/null
  fi
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
