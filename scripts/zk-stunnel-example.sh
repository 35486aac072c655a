#!/usr/bin/env bash
# The agents' ZooKeeper traffic through a TLS tunnel (docs/security.md "ZooKeeper"):
# Debian's ZooKeeper C client has no TLS, so each peer's host runs an stunnel client
# that listens on loopback and connects over TLS, the server's certificate verified, to
# an stunnel server in front of each ZooKeeper server. The agents' zookeeper.connect names
# the local ends. This example runs it all on one host: a standalone ZooKeeper, the two
# stunnels, and dugong-adm through them; it ends with status 0 when dugong-adm reached
# ZooKeeper through the tunnel, and when a client that does not trust the certificate
# cannot.
#
# Usage: scripts/zk-stunnel-example.sh [path/to/dugong-adm]
# Needs: stunnel4, openssl, Java and Debian's zookeeper package (scripts/install-deps.sh).
set -euo pipefail

adm=${1:-build/test/tools/adm/dugong-adm}
if ! command -v stunnel4 >/dev/null; then
  echo "skipped: stunnel4 is not installed (apt-get install stunnel4)"
  exit 77
fi
work=$(mktemp -d /tmp/dugong-zk-stunnel.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {  # until something listens on 127.0.0.1:$1, at most 30 s
  for _ in $(seq 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

zk_port=$(port)      # ZooKeeper itself (on its server's loopback in a real setup)
tls_port=$(port)     # the TLS end in front of it (what crosses the network)
local_port=$(port)   # the agent's local end (zookeeper.connect: 127.0.0.1:<this>)
other_port=$(port)   # a client that does not trust the server's certificate

# The server's certificate: its subjectAltName names the address clients connect to.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=zookeeper \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$work/zk.key" -out "$work/zk.crt" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=other \
  -keyout "$work/other.key" -out "$work/other.crt" 2>/dev/null
chmod 600 "$work/zk.key" "$work/other.key"

mkdir -p "$work/zk-data"
java -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
  org.apache.zookeeper.server.ZooKeeperServerMain "$zk_port" "$work/zk-data" >"$work/zk.log" 2>&1 &
pids+=($!)

# On each ZooKeeper server's host: TLS in, plain TCP to the local ZooKeeper.
cat >"$work/server.conf" <<CONF
foreground = yes
pid =
[zookeeper]
accept = 127.0.0.1:$tls_port
connect = 127.0.0.1:$zk_port
cert = $work/zk.crt
key = $work/zk.key
CONF
# On each peer's host: plain TCP in on loopback, TLS out, the certificate verified.
cat >"$work/client.conf" <<CONF
foreground = yes
pid =
[zookeeper]
client = yes
accept = 127.0.0.1:$local_port
connect = 127.0.0.1:$tls_port
verifyChain = yes
CAfile = $work/zk.crt
checkIP = 127.0.0.1
CONF
# The same client trusting another certificate: its connections must fail.
sed -e "s|$local_port|$other_port|" -e "s|$work/zk.crt|$work/other.crt|" "$work/client.conf" >"$work/other.conf"
for c in server client other; do
  stunnel4 "$work/$c.conf" >"$work/$c.log" 2>&1 &
  pids+=($!)
done
wait_port "$zk_port"
wait_port "$tls_port"
wait_port "$local_port"
wait_port "$other_port"

# Through the tunnel: dugong-adm reaches ZooKeeper (an empty ensemble: no such cluster).
out=$("$adm" -z "127.0.0.1:$local_port" -c demo --timeout 10 show 2>&1 || true)
echo "through the tunnel: $out"
if ! grep -q "no cluster at /dugong/demo" <<<"$out"; then
  echo "FAIL: dugong-adm did not reach ZooKeeper through the tunnel" >&2
  cat "$work/client.log" "$work/server.log" >&2
  exit 1
fi
# A client that does not trust the server's certificate gets nothing through.
out=$("$adm" -z "127.0.0.1:$other_port" -c demo --timeout 3 show 2>&1 || true)
echo "with a certificate not trusted: $out"
if grep -q "no cluster at /dugong/demo" <<<"$out"; then
  echo "FAIL: a client that does not trust the certificate reached ZooKeeper" >&2
  exit 1
fi
echo "ok: ZooKeeper reached through TLS, the server's certificate verified"
