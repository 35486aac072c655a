#!/usr/bin/env bash
# Installs the Debian 12 packages that dugong's build, tests and local cluster need
# (--bench: also Patroni, kazoo and gnuplot for bench/campaign).
# Idempotent; runs as root (or through sudo) with no stdin (CI=true is fine).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  # the sanitizer build of the test command: clang, its linker, llvm-cov for the coverage
  clang lld llvm
  libzookeeper-mt-dev zookeeper
  postgresql-15 postgresql-client-15 libpq-dev
  # backups, replicas and new clusters from a repository (tests/e2e/backup_test.cc)
  pgbackrest
  libboost-dev libboost-system-dev libssl-dev openssl
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev
  gcovr
  procps iproute2 util-linux curl
  # the ecosystem tests: real HAProxy, promtool, the Debian package (cpack, dpkg-shlibdeps, lintian)
  haproxy prometheus lintian dpkg-dev file logrotate
  # the 10-fault campaign test: network namespaces, iptables cuts, psycopg2 clients
  iptables python3 python3-psycopg2
)
# scripts/install-deps.sh --bench: also what bench/ needs (Patroni side by side, the report's plots)
if [ "${1:-}" = --bench ]; then
  packages+=(patroni python3-kazoo gnuplot-nox)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
# Debian starts a cluster and a zookeeper service on install; dugong runs its own.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q '^15 main'; then
  $SUDO pg_ctlcluster 15 main stop 2>/dev/null || true
fi
echo "install-deps: done"
