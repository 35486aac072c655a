"""A ZooKeeper ensemble, one server per host namespace."""
import os
import re
import signal
import socket
import time

CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
CLIENT_PORT = 2181


def four_letter(ip, cmd, timeout=1.0):
    """Send a ZooKeeper four-letter command; return the reply ('' when unreachable)."""
    try:
        with socket.create_connection((ip, CLIENT_PORT), timeout=timeout) as s:
            s.sendall(cmd.encode())
            s.settimeout(timeout)
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
            return out.decode(errors="replace")
    except OSError:
        return ""


class Ensemble:
    def __init__(self, hosts, workdir):
        self.hosts = hosts            # list of Host, server id = index + 1
        self.workdir = workdir
        self.procs = {}

    def connect_string(self):
        return ",".join(f"{h.ip}:{CLIENT_PORT}" for h in self.hosts)

    def _dir(self, i):
        return os.path.join(self.workdir, f"zk{i + 1}")

    def configure(self):
        servers = "\n".join(f"server.{i + 1}={h.ip}:2888:3888" for i, h in enumerate(self.hosts))
        for i, h in enumerate(self.hosts):
            d = self._dir(i)
            os.makedirs(os.path.join(d, "data"), exist_ok=True)
            with open(os.path.join(d, "data", "myid"), "w") as f:
                f.write(f"{i + 1}\n")
            # tickTime 500 ms: fast leader election; maxSessionTimeout 40 s so that Patroni's
            # default ttl (30 s) is not capped.
            with open(os.path.join(d, "zoo.cfg"), "w") as f:
                f.write(f"""tickTime=500
initLimit=20
syncLimit=4
dataDir={d}/data
clientPort={CLIENT_PORT}
clientPortAddress={h.ip}
maxSessionTimeout=40000
4lw.commands.whitelist=*
admin.enableServer=false
quorumListenOnAllIPs=false
{servers}
""")

    def start(self, i):
        h = self.hosts[i]
        d = self._dir(i)
        self.procs[i] = h.popen(["java", "-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                 "-Dzookeeper.admin.enableServer=false", "-cp", CLASSPATH,
                                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", f"{d}/zoo.cfg"],
                                os.path.join(d, "zookeeper.log"))

    def start_all(self):
        self.configure()
        for i in range(len(self.hosts)):
            self.start(i)

    def kill(self, i, sig=signal.SIGKILL):
        p = self.procs.get(i)
        if p and p.poll() is None:
            os.kill(p.pid, sig)
            try:
                p.wait(timeout=20)
            except Exception:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()

    def running(self, i):
        p = self.procs.get(i)
        return p is not None and p.poll() is None

    def mode(self, i):
        m = re.search(r"Mode: (\w+)", four_letter(self.hosts[i].ip, "srvr"))
        return m.group(1) if m else None

    def leader(self):
        for i in range(len(self.hosts)):
            if self.mode(i) == "leader":
                return i
        return None

    def healthy(self):
        """True when a leader and every server serve."""
        modes = [self.mode(i) for i in range(len(self.hosts))]
        return all(m in ("leader", "follower") for m in modes) and "leader" in modes

    def wait_healthy(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if self.healthy():
                return True
            time.sleep(0.5)
        return False

    def received_by_client(self):
        """Packets received per client address, summed over the servers ('cons')."""
        out = {}
        for h in self.hosts:
            for m in re.finditer(r"/([\d.]+):\d+\[\d+\]\((.*?)\)", four_letter(h.ip, "cons")):
                fields = dict(kv.split("=", 1) for kv in m.group(2).split(",") if "=" in kv)
                out[m.group(1)] = out.get(m.group(1), 0) + int(fields.get("recved", 0))
        return out

    def stop_all(self):
        for i in list(self.procs):
            self.kill(i)
