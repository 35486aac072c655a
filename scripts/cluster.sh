#!/usr/bin/env bash
# A local dugong cluster on this machine: one ZooKeeper and three peers, each a
# postgres with its own data directory, port and dugong agent.
#
#   scripts/cluster.sh up       install what is missing, build, start, print the status
#   scripts/cluster.sh status   roles and postgres state of every peer
#   scripts/cluster.sh restart N   stop peer N's agent if it runs and start it again
#                               (postgres keeps running: no failover); after a kill, starts it
#   scripts/cluster.sh rebuild N   rebuild peer N when it cannot rejoin by itself (dugong-adm rebuild)
#   scripts/cluster.sh down     stop the agents, postgres and ZooKeeper
#   scripts/cluster.sh clean    down, then remove every file of the cluster
#
# Everything lives under $DUGONG_DEMO_DIR (default /var/tmp/dugong-demo); the binaries
# come from build/release, or $DUGONG_BUILD_DIR. `up` builds only when a source file is
# newer than the binaries (or they are missing; DUGONG_NO_BUILD=1: never, the binaries
# must be there), and writes a peer's dugong.yaml only when it has none: edit
# $DUGONG_DEMO_DIR/peerN/dugong.yaml and `restart N`. Ports: ZooKeeper 2191
# ($DUGONG_DEMO_ZK_PORT), postgres 5441-5443 (the first: $DUGONG_DEMO_PG_PORT), agents'
# HTTP 8441-8443 ($DUGONG_DEMO_HTTP_PORT): a second cluster beside the demo (a test) sets
# all three and its own DUGONG_DEMO_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${DUGONG_DEMO_DIR:-/var/tmp/dugong-demo}
zk_port=${DUGONG_DEMO_ZK_PORT:-2191}
pg_base=${DUGONG_DEMO_PG_PORT:-5441}
http_base=${DUGONG_DEMO_HTTP_PORT:-8441}
pg_port() { echo $((pg_base + $1 - 1)); }      # n -> peer n's postgres port
http_port() { echo $((http_base + $1 - 1)); }  # n -> peer n's agent's HTTP port
peers=(1 2 3)
build=${DUGONG_BUILD_DIR:-build/release}  # DUGONG_BUILD_DIR: an existing build, as configured
case "$build" in /*) build_path=$build ;; *) build_path=$root/$build ;; esac
dugong=$build_path/agent/dugong

log() { printf '%s\n' "$*"; }
die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

http_get() {  # port path -> body; exit status 0 on HTTP 200
  curl -s -f -m 2 "http://127.0.0.1:$1$2"
}

# Whether the binaries are missing, or a source or build file changed since this script
# last built them (its stamp: a test file that changes neither binary would otherwise
# make every `up` build again).
stamp=$build_path/.cluster-sh-built
build_needed() {
  [ -x "$dugong" ] && [ -x "$build_path/tools/adm/dugong-adm" ] && [ -f "$stamp" ] || return 0
  [ -n "$(find "$root" -path "$root/build" -prune -o -path "$root/.git" -prune -o -type f \
            \( -name '*.cc' -o -name '*.h' -o -name CMakeLists.txt -o -name '*.cmake' \) \
            -newer "$stamp" -print -quit)" ]
}

build_all() {
  if [ -n "${DUGONG_NO_BUILD:-}" ]; then
    if [ ! -x "$dugong" ] || [ ! -x "$build_path/tools/adm/dugong-adm" ]; then
      die "DUGONG_NO_BUILD is set but $build has no dugong and dugong-adm"
    fi
    log "== DUGONG_NO_BUILD: using the binaries in $build as they are"
    return
  fi
  if ! build_needed; then
    log "== $build is up to date with the sources: not building"
    return
  fi
  bash scripts/install-deps.sh
  log "== building dugong ($build)"
  if [ -n "${DUGONG_BUILD_DIR:-}" ]; then
    cmake -S . -B "$build" -G Ninja >/dev/null
  else
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  ninja -C "$build" dugong $(ninja -C "$build" -t targets all 2>/dev/null | grep -q '^dugong-adm:' && echo dugong-adm) >/dev/null
  touch "$stamp"
}

start_zookeeper() {
  mkdir -p "$dir/zookeeper/data"
  if running "$dir/zookeeper/pid"; then log "ZooKeeper already running"; return; fi
  cat >"$dir/zookeeper/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
maxSessionTimeout=20000
4lw.commands.whitelist=*
admin.enableServer=false
CFG
  setsid java -Xmx256m -XX:+UseSerialGC -Dzookeeper.admin.enableServer=false \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zookeeper/zoo.cfg" \
    >"$dir/zookeeper/zookeeper.log" 2>&1 </dev/null &
  echo $! >"$dir/zookeeper/pid"
  for _ in $(seq 1 120); do
    if [ "$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$zk_port && printf ruok >&3 && cat <&3" 2>/dev/null)" = imok ]; then
      log "ZooKeeper is up on 127.0.0.1:$zk_port"
      return
    fi
    sleep 0.5
  done
  die "ZooKeeper did not start; see $dir/zookeeper/zookeeper.log"
}

write_config() {  # n: the peer's dugong.yaml, unless it has one (an operator's edits are kept)
  local n=$1
  if [ -f "$dir/peer$n/dugong.yaml" ]; then return; fi
  cat >"$dir/peer$n/dugong.yaml" <<CFG
cluster: demo
zookeeper:
  connect: 127.0.0.1:$zk_port
  sessionTimeoutMs: 4000
peer:
  id: peer$n
  ip: 127.0.0.1
postgres:
  dataDir: $dir/peer$n/data
  port: $(pg_port "$n")
  # A demo on one machine: trust on loopback, no passwords (the agent warns at start).
  # In production set replicationPassword(File) and superuserPassword(File) instead.
  replicationCidr: 127.0.0.1/32
  allowTrust: true
  settings:
    shared_buffers: 32MB
    max_wal_size: 256MB
http:
  listen: 127.0.0.1:$(http_port "$n")
health:
  withdrawAfterSeconds: 20
# shutdown.stopPostgres is left at its default, false: a stopped agent leaves postgres
# running, so that \`scripts/cluster.sh restart N\` costs no failover and no write gap.
log:
  level: info
CFG
}

start_peer() {  # n
  local n=$1
  mkdir -p "$dir/peer$n"
  chmod 755 "$dir" "$dir/peer$n"
  if running "$dir/peer$n/pid"; then log "peer$n already running"; return; fi
  write_config "$n"
  setsid "$dugong" --config "$dir/peer$n/dugong.yaml" >>"$dir/peer$n/agent.log" 2>&1 </dev/null &
  echo $! >"$dir/peer$n/pid"
  log "peer$n: agent started (postgres port $(pg_port "$n"), http 127.0.0.1:$(http_port "$n"), log $dir/peer$n/agent.log)"
}

adm=$build_path/tools/adm/dugong-adm

peer_role() {  # n -> the role its agent reports, or nothing
  http_get "$(http_port "$1")" /state 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["peer"]["role"])' 2>/dev/null || true
}

deposed_peers() {  # the peers whose agent reports "deposed"
  for n in "${peers[@]}"; do [ "$(peer_role "$n")" = deposed ] && printf '%s ' "$n"; done
  return 0
}

explain_deposed() {  # n...
  for n in "$@"; do
    cat <<MSG

peer$n is deposed: it was the primary before a failover, and the others went on without
it. While its agent runs it rejoins by itself (rejoin: rewind, the default): pg_rewind
discards the WAL the new primary does not have, and it streams again as an async within
seconds; its log ($dir/peer$n/agent.log) says why if it cannot. Only then does an
operator rebuild it from the new primary:
  scripts/cluster.sh rebuild $n
(which runs: $adm rebuild -y --config $dir/peer$n/dugong.yaml)
MSG
  done
}

stopped_agents() {  # the peers whose agent does not run
  for n in "${peers[@]}"; do running "$dir/peer$n/pid" || printf '%s ' "$n"; done
  return 0
}

status() {
  local deposed stopped
  deposed=$(deposed_peers)
  stopped=$(stopped_agents)
  status_table
  # shellcheck disable=SC2086
  [ -z "$deposed" ] || explain_deposed $deposed
  for n in $stopped; do
    cat <<MSG

peer$n's agent does not run. Start it again:
  scripts/cluster.sh restart $n
If peer$n was the primary and the others went on without it (deposed), its agent then
rejoins it by itself (rejoin: rewind, the default); rebuild it only if that fails.
MSG
  done
}

restart_peer() {  # n: stop the agent (postgres keeps running) and start it again
  local n=${1:-}
  case "$n" in 1|2|3) ;; *) die "usage: scripts/cluster.sh restart 1|2|3" ;; esac
  [ -x "$dugong" ] || die "$dugong is missing: run scripts/cluster.sh up first"
  running "$dir/zookeeper/pid" || die "ZooKeeper does not run: scripts/cluster.sh up starts everything"
  if running "$dir/peer$n/pid"; then
    kill -TERM "$(cat "$dir/peer$n/pid")"
    for _ in $(seq 1 60); do running "$dir/peer$n/pid" || break; sleep 0.5; done
    running "$dir/peer$n/pid" && die "peer$n's agent did not stop within 30 s; see $dir/peer$n/agent.log"
    log "peer$n: agent stopped"
  fi
  start_peer "$n"
  log "peer$n: see its role with scripts/cluster.sh status"
}

status_table() {
  if [ -x "$adm" ] && "$adm" -z "127.0.0.1:$zk_port" -c demo show 2>/dev/null; then
    return 0
  fi
  printf '%-6s %-10s %-9s %-8s %-10s %s\n' PEER ROLE AGENT POSTGRES GENERATION "PRIMARY/REPLICA"
  for n in "${peers[@]}"; do
    local port role="-" gen="-" pg="-" agent="down" serving="-"
    port=$(http_port "$n")
    if running "$dir/peer$n/pid"; then agent="running"; fi
    if body=$(http_get "$port" /state 2>/dev/null); then
      role=$(printf '%s' "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peer"]["role"])' 2>/dev/null || echo '?')
      gen=$(printf '%s' "$body" | python3 -c 'import json,sys; s=json.load(sys.stdin)["peer"]["clusterState"]; print(s["generation"] if s else "-")' 2>/dev/null || echo '?')
      pg=$(printf '%s' "$body" | python3 -c 'import json,sys; print("online" if json.load(sys.stdin)["postgres"]["online"] else "offline")' 2>/dev/null || echo '?')
      if http_get "$port" /primary >/dev/null; then serving="writable primary";
      elif http_get "$port" /replica >/dev/null; then serving="streaming replica"; fi
    fi
    printf '%-6s %-10s %-9s %-8s %-10s %s\n' "peer$n" "$role" "$agent" "$pg" "$gen" "$serving"
  done
}

up() {
  build_all
  mkdir -p "$dir"
  chmod 755 "$dir"
  start_zookeeper
  for n in "${peers[@]}"; do start_peer "$n"; done
  log "== waiting for a writable primary (first start runs initdb and two base backups)"
  for _ in $(seq 1 240); do
    for n in "${peers[@]}"; do
      if http_get "$(http_port "$n")" /primary >/dev/null 2>&1; then
        # and for every other peer to stream, except a deposed one: it waits for an operator
        local streaming=0 deposed need
        for m in "${peers[@]}"; do http_get "$(http_port "$m")" /replica >/dev/null 2>&1 && streaming=$((streaming + 1)); done
        deposed=$(deposed_peers)
        need=$(( ${#peers[@]} - 1 - $(wc -w <<<"$deposed") ))
        if [ "$streaming" -ge "$need" ]; then
          status
          cat <<MSG

The cluster is up. Point psql at whichever peer is primary:
  psql "postgresql://postgres@127.0.0.1:$(pg_port 1),127.0.0.1:$(pg_port 2),127.0.0.1:$(pg_port 3)/postgres?target_session_attrs=read-write"
(as root: runuser -u postgres -- psql "...")
Status:   scripts/cluster.sh status     (dugong-adm: $adm -z 127.0.0.1:$zk_port -c demo show|history|verify)
          curl http://127.0.0.1:$(http_port 1)/state   (also /primary /replica /metrics on $(http_port 1)-$(http_port 3))
Stop:     scripts/cluster.sh down       Remove everything: scripts/cluster.sh clean
MSG
          return 0
        fi
      fi
    done
    sleep 0.5
  done
  status
  die "no writable primary with two streaming replicas after 120 s; see $dir/peer*/agent.log"
}

rebuild() {  # n
  local n=${1:-}
  case "$n" in 1|2|3) ;; *) die "usage: scripts/cluster.sh rebuild 1|2|3" ;; esac
  [ -x "$adm" ] || die "$adm is missing: run scripts/cluster.sh up first"
  running "$dir/peer$n/pid" || start_peer "$n"
  "$adm" rebuild -y --config "$dir/peer$n/dugong.yaml"
  status
}

down() {
  for n in "${peers[@]}"; do
    if running "$dir/peer$n/pid"; then
      kill -TERM "$(cat "$dir/peer$n/pid")" 2>/dev/null || true
    fi
  done
  for n in "${peers[@]}"; do
    for _ in $(seq 1 60); do running "$dir/peer$n/pid" || break; sleep 0.5; done
    if running "$dir/peer$n/pid"; then kill -KILL "$(cat "$dir/peer$n/pid")" 2>/dev/null || true; fi
    rm -f "$dir/peer$n/pid"
    # If an agent was killed, its postgres may still run: stop it.
    if [ -f "$dir/peer$n/data/postmaster.pid" ]; then
      runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$dir/peer$n/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
  done
  if running "$dir/zookeeper/pid"; then
    kill -TERM "$(cat "$dir/zookeeper/pid")" 2>/dev/null || true
    sleep 1
  fi
  rm -f "$dir/zookeeper/pid"
  log "cluster stopped (files kept in $dir; 'scripts/cluster.sh clean' removes them)"
}

case "${1:-}" in
  up) up ;;
  status) status ;;
  restart) restart_peer "${2:-}" ;;
  rebuild) rebuild "${2:-}" ;;
  down) down ;;
  clean) down; rm -rf "$dir"; log "removed $dir" ;;
  *) echo "usage: scripts/cluster.sh up|status|restart N|rebuild N|down|clean" >&2; exit 2 ;;
esac
