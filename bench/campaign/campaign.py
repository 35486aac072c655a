#!/usr/bin/python3
"""dugong's fault campaign: a real multi-host topology in network namespaces, a seeded schedule
of faults, checks after every fault, and Patroni through the same topology and schedule.

  campaign.py run [--systems dugong,patroni-fast] [--faults 100] [--seed S] [--peers 3|5] ...
  campaign.py cleanup [--index N]      remove every namespace, link and process a run left
  campaign.py promotions RESULT.json WORKDIR   add the no-standby window after each promotion
  campaign.py report RESULT.json...    write bench/results/campaign.md and its plots
"""
import argparse
import faulthandler
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import schedule as sched  # noqa: E402
import summary  # noqa: E402
import topology  # noqa: E402
from runner import Runner, log  # noqa: E402
from systems import Dugong, Patroni  # noqa: E402
from zookeeper import Ensemble  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK_ROOT = "/var/tmp/dugong-campaign"

PATRONI_VARIANTS = {
    "patroni-default": dict(ttl=30, loop_wait=10, retry_timeout=10, strict=False),
    "patroni-fast": dict(ttl=20, loop_wait=1, retry_timeout=3, strict=False),
    "patroni-strict": dict(ttl=20, loop_wait=1, retry_timeout=3, strict=True),
    # Patroni's answer to a DCS outage (3.0+): the leader keeps its role while every member
    # confirms over its REST API.
    "patroni-failsafe": dict(ttl=20, loop_wait=1, retry_timeout=3, strict=False, failsafe=True),
    # Beside dugong-quorum (issue 42): Debian's Patroni (3.0.2) predates its quorum mode.
    "patroni-sync2": dict(ttl=20, loop_wait=1, retry_timeout=3, strict=False, sync_count=2),
}


class Interrupted(BaseException):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


_index_lock = None


def claim_index(wanted=None):
    """A subnet index no other run uses: its lock file is held for this process's lifetime (flock), and
    no namespace has its names."""
    global _index_lock
    os.makedirs(WORK_ROOT, exist_ok=True)
    used = topology.sh("ip", "netns", "list").stdout
    for i in ([wanted] if wanted else range(1, 251)):
        if f"{topology.NAME_ROOT}{i}-" in used:
            continue
        fd = os.open(os.path.join(WORK_ROOT, f"{topology.NAME_ROOT}{i}.lock"), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _index_lock = fd
        return i
    raise RuntimeError(f"subnet index {wanted} is in use" if wanted else "no free subnet index")


def make_system(name, topo, peers, zk, workdir, client, args):
    if name == "dugong":
        return Dugong(peers, zk, os.path.join(workdir, name), client, args.build_dir, topo.prefix,
                      args.session_timeout_ms)
    if name == "dugong-quorum":
        # ANY 1 of the other peers but one with 3 peers (ANY 1 of 2), ANY 2 of 4 with 5.
        k, size = (1, 2) if len(peers) == 3 else (2, 4)
        return Dugong(peers, zk, os.path.join(workdir, name), client, args.build_dir, f"{topo.prefix}q",
                      args.session_timeout_ms, quorum=(k, size))
    if name in PATRONI_VARIANTS:
        return Patroni(peers, zk, os.path.join(workdir, name), client, f"{topo.prefix}-{name}",
                       **PATRONI_VARIANTS[name])
    raise SystemExit(f"unknown system '{name}' (dugong, dugong-quorum, {', '.join(PATRONI_VARIANTS)})")


def preflight(systems):
    """Everything the run needs, checked before anything is created; a clear message when missing."""
    if os.geteuid() != 0:
        raise SystemExit("campaign: needs root (network namespaces, veth pairs, iptables); run it as root")
    need = ["ip", "iptables", "tc", "java", "setpriv", "/usr/lib/postgresql/15/bin/postgres"]
    if any(s.startswith("patroni") for s in systems):
        need += ["patroni", "patronictl"]
    missing = [n for n in need if shutil.which(n) is None]
    if any(s.startswith("patroni") for s in systems) and \
            subprocess.run(["/usr/bin/python3", "-c", "import kazoo"], capture_output=True).returncode != 0:
        missing.append("python3-kazoo (Patroni's ZooKeeper client)")
    if missing:
        raise SystemExit(f"campaign: missing programs: {', '.join(missing)}")
    probe = f"{topology.NAME_ROOT}probe{os.getpid() % 100000}"
    r = topology.sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        raise SystemExit(f"campaign: cannot create a network namespace ({r.stderr.strip()}); "
                         "the campaign needs CAP_SYS_ADMIN and CAP_NET_ADMIN")
    topology.sh("ip", "netns", "del", probe, check=False)


def cmd_run(args):
    preflight(args.systems.split(","))
    seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    deadline = None
    if args.deadline:
        hh, mm = (int(x) for x in args.deadline.split(":"))
        t = time.gmtime()
        deadline = time.mktime(time.struct_time((t.tm_year, t.tm_mon, t.tm_mday, hh, mm, 0, 0, 0, 0))) - time.timezone
        if deadline < time.time():
            deadline += 86400
    items = sched.make(seed, args.faults, args.ops_every, args.kinds.split(",") if args.kinds else None,
                       args.ops.split(",") if args.ops else None)
    index = claim_index(args.index)
    systems = args.systems.split(",")
    replay = (f"bench/campaign/campaign.py run --seed {seed} --faults {args.faults} --peers {args.peers} "
              f"--systems {args.systems} --session-timeout-ms {args.session_timeout_ms} --ops-every {args.ops_every}"
              + (f" --operator-grace {args.operator_grace:g}" if args.operator_grace else "")
              + (f" --min-hold {args.min_hold:g}" if args.min_hold else "")
              + (f" --kinds {args.kinds}" if args.kinds else "")
              + (f" --ops {args.ops}" if args.ops else ""))
    print(f"campaign: seed {seed} (replay: {replay})", flush=True)
    print(f"campaign: {args.faults} faults, {len(items) - args.faults} operator actions, {args.peers} peers, "
          f"subnet 10.213.{index}.0/24, names {topology.NAME_ROOT}{index}-*", flush=True)
    for name in systems:
        make_system(name, topology.Topology(index), [], None, "/nonexistent", None, args)  # validate names
    if "dugong" in systems:
        for b in ("agent/dugong", "tools/adm/dugong-adm"):
            if not os.access(os.path.join(args.build_dir, b), os.X_OK):
                raise SystemExit(f"campaign: {os.path.join(args.build_dir, b)} is missing; build it first "
                                 f"(ninja -C {args.build_dir} dugong dugong-adm)")
    topo = topology.Topology(index)
    zk_hosts = [topo.add_host(f"zk{i}", topology.ZK_ADDRESS_BASE + i) for i in (1, 2, 3)]
    peers = [topo.add_host(f"p{i}", topology.PEER_ADDRESS_BASE + i) for i in range(1, args.peers + 1)]
    client = topo.add_host("cl", 2)
    workdir = os.path.join(WORK_ROOT, topo.prefix)
    if os.path.exists(workdir):
        shutil.rmtree(workdir)   # a previous run's ZooKeeper data would hold its clusters
    os.makedirs(workdir)
    os.chmod(WORK_ROOT, 0o755)
    os.chmod(workdir, 0o755)
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    faulthandler.register(signal.SIGUSR1)   # kill -USR1 <pid> prints every thread's stack
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    runs = []
    failed = False
    zk = None
    runner = None
    try:
        topo.create()
        topo.enter(client)   # from here on this process (clients, checks) lives in the clients' host
        zk = Ensemble(zk_hosts, os.path.join(workdir, "zookeeper"))
        zk.start_all()
        if not zk.wait_healthy(90):
            raise RuntimeError(f"the ZooKeeper ensemble did not form in 90 s (see {workdir}/zookeeper)")
        log(f"ZooKeeper ensemble up: {zk.connect_string()}")
        for name in systems:
            system = make_system(name, topo, peers, zk, workdir, client, args)
            runner = Runner(system, zk, out_dir, args.rest_seconds, args.interval, args.operator_grace, args.min_hold)
            runner.deadline = deadline
            runner.partial_path = os.path.join(out_dir, f"{name}-{args.peers}peers-seed{seed}.partial.json")
            runner.meta = {"replay": replay, "faults_requested": args.faults, "name": name}
            try:
                result = runner.run(items, seed)
                runner_partial = runner.partial_path
            finally:
                runner.stop()
                runner = None
            result.update({"replay": replay, "faults_requested": args.faults, "name": name})
            if args.label:
                result["label"] = args.label
            path = os.path.join(out_dir, f"{name}-{args.peers}peers-seed{seed}.json")
            with open(path, "w") as f:
                json.dump(result, f, indent=1)
            os.remove(runner_partial)
            log(f"results: {path}")
            runs.append(result)
            summary.print_table(result)
            zk.wait_healthy(60)
    except Interrupted as e:
        print(f"campaign: interrupted ({e}); cleaning up", file=sys.stderr)
        failed = True
    except Exception as e:
        print(f"campaign: FAILED: {e}", file=sys.stderr)
        failed = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if runner is not None:
            runner.stop()
        if zk is not None:
            zk.stop_all()
        topo.leave()
        removed = topology.cleanup(f"{topo.prefix}-")
        log(f"cleanup: removed {len(removed)} namespaces/links of {topo.prefix}")
    if failed:
        return 2
    bad = summary.verdict(runs, args.strict_verdict)
    return 1 if bad else 0


def cmd_cleanup(args):
    prefix = f"{topology.NAME_ROOT}{args.index}-" if args.index else topology.NAME_ROOT
    removed = topology.cleanup(prefix)
    print(f"removed: {' '.join(removed) if removed else 'nothing'}")
    return 0


def cmd_promotions(args):
    """Adds the promotions (and the no-standby acknowledgements after each) to a result file written
    before the runner recorded them, from the work directory the run left (acks.jsonl, monitor.jsonl)."""
    import promotions
    found = promotions.add_to_result(args.result, args.workdir)
    worst = max((p["window"] for p in found), default=0.0)
    print(f"{args.result}: {len(found)} promotions, {sum(1 for p in found if p['unprotected_acks'])} followed by "
          f"acknowledgements with no synchronous standby, longest window {worst:.2f} s")
    return 0


def cmd_report(args):
    import report
    report.write(args.results, args.out, args.command, args.load_log)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the campaign")
    r.add_argument("--systems", default="dugong",
                   help="comma-separated, run one after another on the same ensemble: dugong, dugong-quorum, "
                        + ", ".join(PATRONI_VARIANTS))
    r.add_argument("--faults", type=int, default=100)
    r.add_argument("--seed", type=int)
    r.add_argument("--peers", type=int, default=3, choices=[3, 5])
    r.add_argument("--kinds", help="only these fault kinds, comma-separated (default: every kind)")
    r.add_argument("--ops-every", type=int, default=4, help="an operator action after every N faults (0: none)")
    r.add_argument("--ops", default="", help="only these operator actions, comma-separated, in turn "
                                             "(default: op_switchover, op_freeze and op_rebuild in a seeded order)")
    r.add_argument("--session-timeout-ms", type=int, default=4000, help="dugong's ZooKeeper session timeout")
    r.add_argument("--min-hold", type=float, default=0,
                   help="hold every lasting fault at least this many seconds (e.g. a host back a minute later)")
    r.add_argument("--operator-grace", type=float, default=0,
                   help="seconds the operator waits for a deposed peer to rejoin by itself before rebuilding it "
                        "(0: rebuilds at once)")
    r.add_argument("--rest-seconds", type=int, default=60, help="length of the at-rest measurement")
    r.add_argument("--interval", type=float, default=0.1, help="pause between a client's operations")
    r.add_argument("--index", type=int, help="subnet 10.213.INDEX.0/24 and names dgcampINDEX-* (default: free)")
    r.add_argument("--build-dir", default=os.path.join(REPO, "build", "dev"))
    r.add_argument("--out", default=os.path.join(REPO, "bench", "results", "runs"))
    r.add_argument("--label", help="words that tell this run from another of the same system in the report "
                                   "(e.g. the code it ran)")
    r.add_argument("--deadline", help="HH:MM (UTC): start no new fault after it; the results say how many ran")
    r.add_argument("--strict-verdict", action="store_true",
                   help="exit 1 also when a fault exceeded its bound or did not recover")
    c = sub.add_parser("cleanup", help="remove what runs left behind")
    c.add_argument("--index", type=int, help="only this run's names (default: every dgcamp* name)")
    m = sub.add_parser("promotions", help="add the promotions to a result file from its run's work directory")
    m.add_argument("result")
    m.add_argument("workdir", help=f"the system's work directory, e.g. {WORK_ROOT}/dgcamp1/dugong")
    p = sub.add_parser("report", help="write the markdown report and plots")
    p.add_argument("results", nargs="+")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    p.add_argument("--command", default="", help="the command that produced the results (quoted in the report)")
    p.add_argument("--load-log", help="lines 'HH:MM:SS load1 load5 load15 ...' (UTC) sampled during the runs")
    args = ap.parse_args()
    return {"run": cmd_run, "cleanup": cmd_cleanup, "promotions": cmd_promotions,
            "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
