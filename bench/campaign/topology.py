"""Hosts as network namespaces on one private bridge, and the network faults between them.

Every name this module creates starts with the run's prefix (``dgcamp<N>``), every address
is in the run's private subnet 10.213.<N>.0/24, and nothing outside them is touched.
"""
import ctypes
import os
import subprocess
import time

NAME_ROOT = "dgcamp"
PEER_ADDRESS_BASE = 20   # peer pK is 10.213.N.(20 + K)
ZK_ADDRESS_BASE = 10     # ZooKeeper server K is 10.213.N.(10 + K)
CLONE_NEWNET = 0x40000000


def sh(*args, check=True, timeout=30, quiet=False):
    """Run a command; return its completed process (stdout/stderr as text). A command that outlives its
    timeout is killed and fails with exit status 124 (it raises only with check)."""
    try:
        p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        p = subprocess.CompletedProcess(list(args), 124, out, err + f"\ntimed out after {timeout} s")
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


class Host:
    def __init__(self, topo, name, ip):
        self.topo = topo
        self.name = name          # short name: zk1, p1, cl
        self.ns = f"{topo.prefix}-{name}"
        self.ip = ip
        self.veth = f"{topo.prefix}-{name}"   # root side of its veth pair (<= 15 chars)

    def run(self, *args, check=True, timeout=30):
        return sh("ip", "netns", "exec", self.ns, *args, check=check, timeout=timeout)

    def popen(self, args, log_path, env=None):
        log = open(log_path, "ab")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns, *args], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        log.close()
        return p

    # --- network faults (all inside this host's namespace) ---
    def iptables(self, *rule):
        self.run("iptables", "-w", *rule)

    def cut_from(self, ips, direction="both"):
        """Drop traffic between this host and the given addresses (in, out or both)."""
        for ip in ips:
            if direction in ("both", "in"):
                self.iptables("-A", "INPUT", "-s", ip, "-j", "DROP")
            if direction in ("both", "out"):
                self.iptables("-A", "OUTPUT", "-d", ip, "-j", "DROP")

    def link(self, up):
        self.run("ip", "link", "set", "eth0", "up" if up else "down")

    def degrade(self, loss_pct, rate_kbit):
        """A bad link: random loss both ways, and a slow token bucket (its queue adds delay).
        This kernel has no netem; tbf and iptables' statistic match are what it offers."""
        p = f"{loss_pct / 100:.2f}"
        self.iptables("-A", "INPUT", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP")
        self.iptables("-A", "OUTPUT", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP")
        self.run("tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", f"{rate_kbit}kbit",
                 "burst", "16kbit", "latency", "300ms")

    def heal(self):
        """Undo every network fault on this host."""
        self.run("iptables", "-w", "-F", check=False)
        self.run("tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        self.link(True)


class Topology:
    """One bridge, one namespace per host, all named <prefix>..., subnet 10.213.<index>.0/24."""

    def __init__(self, index):
        if not 1 <= index <= 250:
            raise ValueError("subnet index must be 1..250")
        self.index = index
        self.prefix = f"{NAME_ROOT}{index}"
        self.bridge = f"{self.prefix}-br"
        self.subnet = f"10.213.{index}.0/24"
        self.hosts = {}
        self._root_ns_fd = None

    def address(self, last_octet):
        return f"10.213.{self.index}.{last_octet}"

    def add_host(self, name, last_octet):
        h = Host(self, name, self.address(last_octet))
        self.hosts[name] = h
        return h

    def create(self):
        if os.geteuid() != 0:
            raise RuntimeError("the campaign needs root (network namespaces, iptables)")
        existing = sh("ip", "netns", "list").stdout
        if any(line.split()[0].startswith(self.prefix + "-") for line in existing.splitlines() if line.strip()):
            raise RuntimeError(f"namespaces named {self.prefix}-* exist already; "
                               f"run 'campaign.py cleanup --index {self.index}' first")
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "link", "set", self.bridge, "up")
        for h in self.hosts.values():
            sh("ip", "netns", "add", h.ns)
            sh("ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
            sh("ip", "link", "set", h.veth, "master", self.bridge)
            sh("ip", "link", "set", h.veth, "up")
            h.run("ip", "addr", "add", f"{h.ip}/24", "dev", "eth0")
            h.run("ip", "link", "set", "eth0", "up")
            h.run("ip", "link", "set", "lo", "up")

    def enter(self, host):
        """Move the calling thread (and threads it starts later) into a host's namespace."""
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if self._root_ns_fd is None:
            self._root_ns_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open(f"/var/run/netns/{host.ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns failed")
        finally:
            os.close(fd)

    def leave(self):
        if self._root_ns_fd is None:
            return
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.setns(self._root_ns_fd, CLONE_NEWNET)
        os.close(self._root_ns_fd)
        self._root_ns_fd = None


def kill_namespace_processes(ns):
    pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass
    return len(pids)


def cleanup(prefix):
    """Kill every process in and remove every namespace and link whose name starts with prefix
    (``dgcamp`` for every run, ``dgcamp<N>-`` for one)."""
    removed = []
    for line in sh("ip", "netns", "list").stdout.splitlines():
        if not line.strip():
            continue
        ns = line.split()[0]
        if ns.startswith(prefix):
            kill_namespace_processes(ns)
            removed.append(ns)
    if removed:
        time.sleep(0.5)
    for ns in removed:
        kill_namespace_processes(ns)
        sh("ip", "netns", "del", ns, check=False)
    for line in sh("ip", "-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefix):
            sh("ip", "link", "del", name, check=False)
            removed.append(name)
    return removed
