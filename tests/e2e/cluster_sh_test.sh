#!/usr/bin/env bash
# scripts/cluster.sh, the README's quick start, run as a user runs it (issue 40), beside
# any demo cluster of this machine: `up` in a scratch directory on free ports with the
# binaries of this build, `dugong-adm show` names a primary, a sync and an async, `down`
# leaves no process of the cluster running and its ports free, `clean` removes its
# files. Whatever fails, the cluster is taken down.
#
# Usage: cluster_sh_test.sh SOURCE_DIR BUILD_DIR   (BUILD_DIR holds agent/dugong and
# tools/adm/dugong-adm)
set -euo pipefail
src=$1
build=$2
script=$src/scripts/cluster.sh
adm=$build/tools/adm/dugong-adm
scratch=$(mktemp -d "${DUGONG_TEST_TMP:-/tmp}/dugong-cluster-sh-XXXXXX")
chmod 755 "$scratch"

fail() { printf 'cluster_sh_test: %s\n' "$*" >&2; exit 1; }

# The first of `count` consecutive loopback ports that are free now, below the kernel's
# range for outgoing connections (whose local ports could take one meanwhile).
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
count = int(sys.argv[1])
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(500):
    first = random.randrange(20000, low - count)
    held = []
    try:
        for port in range(first, first + count):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        for s in held:
            s.close()
    print(first)
    sys.exit(0)
sys.exit("no free ports")
PY
}

export DUGONG_DEMO_DIR=$scratch/demo DUGONG_BUILD_DIR=$build DUGONG_NO_BUILD=1
DUGONG_DEMO_ZK_PORT=$(free_ports 1)
DUGONG_DEMO_PG_PORT=$(free_ports 3)
DUGONG_DEMO_HTTP_PORT=$(free_ports 3)
export DUGONG_DEMO_ZK_PORT DUGONG_DEMO_PG_PORT DUGONG_DEMO_HTTP_PORT

# Processes of this cluster: every one has the scratch directory on its command line
# (the agents' --config, postgres' -D, ZooKeeper's zoo.cfg).
left_running() { pgrep -a -f -- "$scratch" || true; }

finish() {
  local rc=$?
  if [ -n "$(left_running)" ]; then bash "$script" down >/dev/null 2>&1 || true; fi
  if [ "$rc" -ne 0 ]; then
    for log in "$scratch"/demo/peer*/agent.log; do
      [ -f "$log" ] && { echo "--- $log (last lines)"; tail -n 20 "$log"; }
    done
  fi
  rm -rf "$scratch"
  exit "$rc"
}
trap finish EXIT

echo "== scripts/cluster.sh up (ZooKeeper $DUGONG_DEMO_ZK_PORT, postgres from $DUGONG_DEMO_PG_PORT, HTTP from $DUGONG_DEMO_HTTP_PORT)"
bash "$script" up || fail "scripts/cluster.sh up failed"

echo "== dugong-adm show"
show=$("$adm" -z "127.0.0.1:$DUGONG_DEMO_ZK_PORT" -c demo show) || fail "dugong-adm show failed: $show"
printf '%s\n' "$show"
for role in primary sync async; do
  grep -qw -- "$role" <<<"$show" || fail "dugong-adm show names no $role"
done

echo "== scripts/cluster.sh down"
bash "$script" down || fail "scripts/cluster.sh down failed"
# ZooKeeper is sent SIGTERM and given a second: allow it a little longer to exit.
for _ in $(seq 1 20); do [ -z "$(left_running)" ] && break; sleep 0.5; done
[ -z "$(left_running)" ] || fail "still running after down: $(left_running)"
python3 - "$DUGONG_DEMO_ZK_PORT" "$DUGONG_DEMO_PG_PORT" "$DUGONG_DEMO_HTTP_PORT" <<'PY' || fail "a port of the cluster is still taken after down"
import socket, sys
zk, pg, http = (int(a) for a in sys.argv[1:])
for port in [zk] + [pg + i for i in range(3)] + [http + i for i in range(3)]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.close()
PY

echo "== scripts/cluster.sh clean"
bash "$script" clean >/dev/null || fail "scripts/cluster.sh clean failed"
[ ! -e "$DUGONG_DEMO_DIR" ] || fail "$DUGONG_DEMO_DIR is still there after clean"
echo "cluster_sh_test: ok"
