"""The two HA systems under test, behind one interface: start a peer, find its processes,
ask the system who is primary, and carry out the operator's duties."""
import json
import os
import pwd
import secrets
import shutil
import signal
import time
import urllib.request


PG_PORT = 5432
HTTP_PORT = 8008
# Both systems run as production does: scram passwords over TCP. Every libpq client of
# the campaign (the clients, the monitor, dugong-adm) reads it from PGPASSWORD.
CAMPAIGN_PASSWORD = "campaign"
os.environ["PGPASSWORD"] = CAMPAIGN_PASSWORD
PG_BIN = "/usr/lib/postgresql/15/bin"


def http_get(ip, path, timeout=1.0):
    """(status, body) of GET http://ip:8008/path; (0, '') when unreachable."""
    try:
        with urllib.request.urlopen(f"http://{ip}:{HTTP_PORT}{path}", timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
    except Exception:
        return 0, ""


def chown_postgres(path):
    pw = pwd.getpwnam("postgres")
    os.chown(path, pw.pw_uid, pw.pw_gid)


class System:
    """Common part: peers p1..pN, each on its own host, with a work directory."""
    kind = "?"

    def __init__(self, peers, zk, workdir, client_host):
        self.peers = peers            # list of Host
        self.zk = zk
        self.workdir = workdir
        self.client_host = client_host
        self.agents = {}              # index -> Popen

    def peer_dir(self, i):
        return os.path.join(self.workdir, f"p{i + 1}")

    def data_dir(self, i):
        return os.path.join(self.peer_dir(i), "data")

    def prepare(self):
        if os.path.exists(self.workdir):
            shutil.rmtree(self.workdir)
        os.makedirs(self.workdir)
        os.chmod(self.workdir, 0o755)
        for i in range(len(self.peers)):
            os.makedirs(self.peer_dir(i))
            os.chmod(self.peer_dir(i), 0o755)
            chown_postgres(self.peer_dir(i))
            self.write_config(i)

    def url(self):
        hosts = ",".join(f"{h.ip}:{PG_PORT}" for h in self.peers)
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def agent_pid(self, i):
        p = self.agents.get(i)
        return p.pid if p is not None and p.poll() is None else None

    def pg_pid(self, i):
        try:
            with open(os.path.join(self.data_dir(i), "postmaster.pid")) as f:
                pid = int(f.readline())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def signal_agent(self, i, sig):
        pid = self.agent_pid(i)
        if pid:
            os.kill(pid, sig)
        return pid

    def kill_agent(self, i):
        p = self.agents.get(i)
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()

    def stop_agent(self, i, timeout=30):
        p = self.agents.get(i)
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=timeout)
            except Exception:
                p.kill()
                p.wait()

    def kill_postgres(self, i):
        pid = self.pg_pid(i)
        if pid:
            os.kill(pid, signal.SIGKILL)
        return pid

    def primaries(self):
        """Indices of the peers that the system itself advertises as the writable primary."""
        return [i for i, h in enumerate(self.peers) if http_get(h.ip, "/primary")[0] == 200]

    def stop_all(self):
        for i in list(self.agents):
            self.stop_agent(i, timeout=15)
        for i in range(len(self.peers)):
            pid = self.pg_pid(i)
            if pid:
                os.kill(pid, signal.SIGQUIT)


class Dugong(System):
    kind = "dugong"

    def __init__(self, peers, zk, workdir, client_host, build_dir, cluster, session_timeout_ms, quorum=None):
        super().__init__(peers, zk, workdir, client_host)
        # Quorum commit (issue 42): (k, size) for `replication: {mode: quorum, k, size}`;
        # None: Manatee's one sync.
        self.quorum = quorum
        self.dugong = os.path.join(build_dir, "agent", "dugong")
        self.adm_bin = os.path.join(build_dir, "tools", "adm", "dugong-adm")
        self.peer_key = secrets.token_hex(32)
        self.cluster = cluster
        self.session_timeout_ms = session_timeout_ms
        self.detect_seconds = session_timeout_ms / 1000.0
        self.label = f"dugong (session {session_timeout_ms} ms)" if quorum is None else \
            f"dugong quorum ANY {quorum[0]} of {quorum[1]} (session {session_timeout_ms} ms)"

    def config_path(self, i):
        return os.path.join(self.peer_dir(i), "dugong.yaml")

    def peer_id(self, i):
        return f"p{i + 1}"

    def write_config(self, i):
        h = self.peers[i]
        subnet = h.topo.subnet
        # The cluster's peer key (http.peerKeyFile): the failsafe across hosts needs one.
        key_path = os.path.join(self.peer_dir(i), "peer.key")
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as k:
            k.write(self.peer_key + "\n")
        with open(self.config_path(i), "w") as f:
            f.write(f"""cluster: {self.cluster}
zookeeper:
  connect: {self.zk.connect_string()}
  sessionTimeoutMs: {self.session_timeout_ms}
peer:
  id: {self.peer_id(i)}
  ip: {h.ip}
  zoneId: {h.name}
postgres:
  dataDir: {self.data_dir(i)}
  port: {PG_PORT}
  listenAddress: "*"
  replicationCidr: {subnet}
  replicationPassword: {CAMPAIGN_PASSWORD}
  superuserPassword: {CAMPAIGN_PASSWORD}
  hba:
    - host all postgres {subnet} scram-sha-256
  settings:
    shared_buffers: 16MB
    max_connections: 40
    max_wal_size: 256MB
http:
  listen: 0.0.0.0:{HTTP_PORT}
  peerKeyFile: {key_path}
health:
  withdrawAfterSeconds: 20
shutdown:
  stopPostgres: false
log:
  level: info
""")
            if self.quorum:
                f.write(f"replication:\n  mode: quorum\n  k: {self.quorum[0]}\n  size: {self.quorum[1]}\n")

    def start_agent(self, i):
        self.agents[i] = self.peers[i].popen([self.dugong, "--config", self.config_path(i)],
                                             os.path.join(self.peer_dir(i), "agent.log"))

    def adm(self, *args, timeout=60):
        return self.client_host.run(self.adm_bin, "-z", self.zk.connect_string(), "-c", self.cluster, *args,
                                    check=False, timeout=timeout)

    def state(self):
        """The cluster state as the agents report it (first answer wins)."""
        for h in self.peers:
            code, body = http_get(h.ip, "/state")
            if code == 200:
                try:
                    cs = json.loads(body)["peer"].get("clusterState")
                    if cs:
                        return cs
                except (ValueError, KeyError):
                    pass
        return None

    def index_of(self, peer_id):
        return int(peer_id[1:]) - 1

    def deposed(self):
        cs = self.state() or {}
        return [self.index_of(p["id"]) for p in cs.get("deposed", [])]

    def sync_index(self):
        """The sync; in quorum mode the first member (the one a tie goes to)."""
        cs = self.state() or {}
        s = cs.get("sync") or ((cs.get("quorum") or {}).get("members") or [None])[0]
        return self.index_of(s["id"]) if s else None

    def needs_operator(self):
        """Peers that will not rejoin without an operator: deposed ones."""
        return self.deposed()

    def _rebuild(self, i, wait_seconds, while_deposed=False):
        """dugong-adm rebuild on the peer's host, retried as an operator would while the cluster still
        sees the peer's agent or its agent is still stopping postgres. With while_deposed, an operator
        stops retrying once the peer is no longer deposed (its agent rejoined it meanwhile)."""
        msg = ""
        for _ in range(4):
            if while_deposed and i not in self.deposed():
                return True, "rejoined by its agent"
            r = self.peers[i].run(self.adm_bin, "rebuild", "--config", self.config_path(i), "-y", "--wait",
                                  str(wait_seconds), check=False, timeout=wait_seconds + 120)
            if r.returncode == 0:
                return True, ""
            msg = (r.stdout + r.stderr).strip().replace("\n", " ")[-200:]
            time.sleep(3)
        return False, msg

    def repair(self, i):
        """The operator's duty: rebuild a deposed peer (unless its agent rejoins it first); a peer that is
        not deposed but still out is rebuilt with its agent stopped, as for a broken replica."""
        if i in self.deposed():
            return self._rebuild(i, 60, while_deposed=True)
        return self.rebuild_replica(i)

    def switchover(self):
        msg = "no sync"
        for _ in range(3):   # an operator retries a refused request once the cluster has settled
            s = self.sync_index()
            if s is not None:
                r = self.adm("promote", "-i", self.peer_id(s), "-r", "sync", "--wait-writable", "30", timeout=90)
                if r.returncode == 0:
                    return True, ""
                msg = (r.stdout + r.stderr).strip().replace("\n", " ")[-200:]
            time.sleep(3)
        return False, msg

    def freeze(self, on):
        r = self.adm("freeze", "-r", "campaign") if on else self.adm("unfreeze")
        return r.returncode == 0, (r.stdout + r.stderr).strip()[-200:]

    def rebuild_replica(self, i):
        self.stop_agent(i)
        try:
            return self._rebuild(i, 0)
        finally:
            self.start_agent(i)


class Patroni(System):
    kind = "patroni"

    def __init__(self, peers, zk, workdir, client_host, scope, ttl, loop_wait, retry_timeout, strict,
                 failsafe=False, sync_count=1):
        super().__init__(peers, zk, workdir, client_host)
        self.scope = scope
        self.ttl, self.loop_wait, self.retry_timeout, self.strict = ttl, loop_wait, retry_timeout, strict
        self.failsafe = failsafe
        # synchronous_node_count: Debian's Patroni 3.0.2 has no quorum mode; 2 is its nearest
        # to dugong's quorum variant (every commit then waits for both standbys).
        self.sync_count = sync_count
        self.detect_seconds = ttl
        self.label = (f"Patroni (ttl {ttl}, loop_wait {loop_wait}, retry_timeout {retry_timeout}"
                      f"{', synchronous_mode_strict' if strict else ''}{', failsafe_mode' if failsafe else ''}"
                      f"{f', synchronous_node_count {sync_count}' if sync_count != 1 else ''})")

    def config_path(self, i):
        return os.path.join(self.peer_dir(i), "patroni.yml")

    def write_config(self, i):
        h = self.peers[i]
        subnet = h.topo.subnet
        zk_hosts = ", ".join(f"'{z}'" for z in self.zk.connect_string().split(","))
        with open(self.config_path(i), "w") as f:
            f.write(f"""scope: {self.scope}
namespace: /campaign-patroni/
name: p{i + 1}
log:
  level: INFO
restapi:
  listen: {h.ip}:{HTTP_PORT}
  connect_address: {h.ip}:{HTTP_PORT}
zookeeper:
  hosts: [{zk_hosts}]
bootstrap:
  dcs:
    ttl: {self.ttl}
    loop_wait: {self.loop_wait}
    retry_timeout: {self.retry_timeout}
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: {str(self.strict).lower()}
    synchronous_node_count: {self.sync_count}
    failsafe_mode: {str(self.failsafe).lower()}
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: 'on'
        max_connections: 40
        shared_buffers: 16MB
        max_wal_size: 256MB
        hot_standby: 'on'
  initdb:
    - encoding: UTF8
postgresql:
  listen: '{h.ip},127.0.0.1:{PG_PORT}'
  connect_address: {h.ip}:{PG_PORT}
  data_dir: {self.data_dir(i)}
  bin_dir: {PG_BIN}
  pgpass: {self.peer_dir(i)}/pgpass
  authentication:
    superuser:
      username: postgres
      password: campaign
    replication:
      username: replicator
      password: campaign
    rewind:
      username: postgres
      password: campaign
  parameters:
    unix_socket_directories: '{self.peer_dir(i)}'
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host all all {subnet} trust
    - host replication replicator {subnet} trust
    - host replication replicator 127.0.0.1/32 trust
""")
        chown_postgres(self.config_path(i))

    def start_agent(self, i):
        env = dict(os.environ, HOME="/var/lib/postgresql", PATH="/usr/bin:/bin:/usr/sbin:/sbin")
        self.agents[i] = self.peers[i].popen(
            ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "/usr/bin/python3",
             "/usr/bin/patroni", self.config_path(i)], os.path.join(self.peer_dir(i), "agent.log"), env=env)

    def ctl(self, *args, timeout=90):
        return self.client_host.run("patronictl", "-c", self.config_path(0), *args, check=False, timeout=timeout)

    def members(self):
        for h in self.peers:
            code, body = http_get(h.ip, "/cluster")
            if code == 200:
                try:
                    return json.loads(body).get("members", [])
                except ValueError:
                    pass
        return []

    def index_of(self, name):
        return int(name[1:]) - 1

    def sync_index(self):
        for m in self.members():
            if m.get("role") == "sync_standby":
                return self.index_of(m["name"])
        return None

    def needs_operator(self):
        """Members that are not running or streaming after the wait (Patroni rewinds by itself)."""
        return []

    def repair(self, i):
        r = self.ctl("reinit", self.scope, f"p{i + 1}", "--force", "--wait", timeout=150)
        return r.returncode == 0, (r.stdout + r.stderr).strip()[-200:]

    def switchover(self):
        msg = "no sync or no leader"
        for _ in range(3):   # an operator retries a refused request once the cluster has settled
            s = self.sync_index()
            prim = self.primaries()
            if s is not None and prim:
                r = self.ctl("switchover", "--leader", f"p{prim[0] + 1}", "--candidate", f"p{s + 1}", "--force")
                out = (r.stdout + r.stderr).strip().replace("\n", " ")
                if r.returncode == 0 and "failed" not in out.lower():
                    return True, ""
                msg = out[-200:]
            time.sleep(3)
        return False, msg

    def freeze(self, on):
        r = self.ctl("pause" if on else "resume", "--wait")
        return r.returncode == 0, (r.stdout + r.stderr).strip()[-200:]

    def rebuild_replica(self, i):
        return self.repair(i)
