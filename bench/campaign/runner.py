"""Runs one system through the schedule: faults, recovery, checks after every fault."""
import json
import os
import random
import signal
import time

import clients
import promotions
import schedule as sched
from systems import PG_PORT
from topology import kill_namespace_processes

SETTLE_TIMEOUT = 90      # seconds after the heal before the operator repairs a peer
GIVE_UP = 180            # seconds after the heal before a fault counts as never recovered


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, flush=True)


class Runner:
    def __init__(self, system, zk, out_dir, rest_seconds, interval, operator_grace=0, min_hold=0):
        self.s = system
        self.operator_grace = operator_grace
        self.min_hold = min_hold
        self.zk = zk
        self.out_dir = out_dir
        self.rest_seconds = rest_seconds
        self.interval = interval
        self.monitors = []
        self.careful = self.hostile = None
        self.lost_seen = {"careful": set(), "hostile": set()}
        self.double_seen = {}
        self.results = []
        self.deadline = None       # epoch seconds: start no new fault after it
        self.partial_path = None   # results so far, rewritten after every fault
        self.meta = {}             # name, replay command, faults requested

    # ---------- observation ----------
    def writable_primary(self):
        """The peer the system advertises as primary, if postgres there is writable (else None)."""
        prim = self.s.primaries()
        for i in prim:
            smp = self.monitors[i].latest()
            if smp and smp.up and smp.writable:
                return i
        return None

    def settled(self, since):
        p = self.writable_primary()
        if p is None or len(self.s.primaries()) != 1 or self.monitors[p].latest().sync_streaming < 1:
            return False
        for i, m in enumerate(self.monitors):
            smp = m.latest()
            if i != p and not (smp and smp.up and smp.streaming and smp.t > since):
                return False
        if self.s.kind == "dugong" and self.s.deposed():
            return False
        return any(a[1] > since for a in self.careful.acks[-5:])

    def wait_until(self, cond, timeout, step=0.25):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return True
            time.sleep(step)
        return False

    # ---------- the cluster ----------
    def bring_up(self):
        self.s.prepare()
        for i in range(len(self.s.peers)):
            self.s.start_agent(i)
            time.sleep(1 if self.s.kind == "patroni" else 0.2)
        self.monitors = [clients.PeerMonitor(h.ip, PG_PORT, "postgres") for h in self.s.peers]
        for m in self.monitors:
            m.start()

        def ready():
            p = self.writable_primary()
            return p is not None and all(m.latest() and m.latest().up and (i == p or m.latest().streaming)
                                         for i, m in enumerate(self.monitors))
        if not self.wait_until(ready, 240, 1):
            raise RuntimeError(f"{self.s.label}: the cluster did not come up in 240 s (see {self.s.workdir})")
        p = self.writable_primary()
        clients.query(self.s.peers[p].ip, PG_PORT, "postgres",
                      "CREATE TABLE IF NOT EXISTS acks (id bigint PRIMARY KEY, client text NOT NULL, "
                      "t timestamptz NOT NULL DEFAULT clock_timestamp())")
        self.careful = clients.WritingClient("careful", self.s.url(), False, self.interval, clients.CAREFUL_BASE)
        self.hostile = clients.WritingClient("hostile", self.s.url(), True, self.interval, clients.HOSTILE_BASE)
        self.careful.start()
        self.hostile.start()
        self.wait_until(lambda: len(self.careful.acks) > 5, 60)

    def at_rest(self):
        """Agents' RSS and CPU, and ZooKeeper packets per agent per minute, with no fault."""
        tick = os.sysconf("SC_CLK_TCK")

        def cpu(pid):
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            return (int(parts[11]) + int(parts[12])) / tick

        def rss_kb(pid):
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
            return 0
        pids = {i: self.s.agent_pid(i) for i in range(len(self.s.peers))}
        cpu0 = {i: cpu(p) for i, p in pids.items()}
        zk0 = self.zk.received_by_client()
        t0 = time.time()
        time.sleep(self.rest_seconds)
        dt = time.time() - t0
        zk1 = self.zk.received_by_client()
        rest = {"seconds": round(dt, 1), "agents": []}
        for i, p in pids.items():
            ip = self.s.peers[i].ip
            rest["agents"].append({
                "peer": i + 1,
                "rss_mb": round(rss_kb(p) / 1024, 1),
                "cpu_pct": round(100 * (cpu(p) - cpu0[i]) / dt, 2),
                "zk_requests_per_min": round((zk1.get(ip, 0) - zk0.get(ip, 0)) * 60 / dt, 1),
            })
        return rest

    # ---------- faults ----------
    def resolve_target(self, item):
        p = self.writable_primary()
        if p is None:
            prims = self.s.primaries()
            p = prims[0] if prims else 0
        if item["role"] == "primary":
            return p
        if item["role"] == "sync":
            sy = self.s.sync_index()
            if sy is not None and sy != p:
                return sy
        others = [i for i in range(len(self.s.peers)) if i != p]
        if item["kind"] == "op_rebuild":   # an operator rebuilds an async, never the sync
            sy = self.s.sync_index()
            others = [i for i in others if i != sy] or others
        return others[int(item["pick"] * len(others))]

    def inject(self, item, hold):
        """Start the fault; returns (target index or None, heal function, description)."""
        k = item["kind"]
        s = self.s
        zk_ips = [h.ip for h in self.zk.hosts]
        t = self.resolve_target(item) if (k in sched.PEER_FAULTS or k.startswith("op_")) else None
        host = s.peers[t] if t is not None else None
        rng = random.Random(item["pick"])

        def nothing():
            pass
        if k == "kill_postgres":
            s.kill_postgres(t)
            return t, nothing, f"p{t + 1} ({item['role']})"
        if k == "kill_agent":
            s.kill_agent(t)
            time.sleep(1)
            s.start_agent(t)
            return t, nothing, f"p{t + 1} ({item['role']})"
        if k in ("kill_host", "kill_sync_host", "kill_primary_host"):
            host.link(False)
            s.kill_agent(t)
            s.kill_postgres(t)
            time.sleep(0.5)
            kill_namespace_processes(host.ns)
            time.sleep(hold)
            host.heal()
            s.start_agent(t)
            return t, nothing, f"p{t + 1} ({item['role']}), down {hold:.1f} s"
        if k == "stop_agent":
            s.signal_agent(t, signal.SIGSTOP)
            time.sleep(hold)
            s.signal_agent(t, signal.SIGCONT)
            return t, nothing, f"p{t + 1} ({item['role']}), stopped {hold:.1f} s"
        if k in ("cut_zk", "cut_all", "asymmetric", "bad_link"):
            if k == "cut_zk":
                host.cut_from(zk_ips)
            elif k == "cut_all":
                host.link(False)
            elif k == "asymmetric":
                host.cut_from(zk_ips + [h.ip for h in s.peers if h is not host], direction="in")
            else:
                host.degrade(20, 1000)
            time.sleep(hold)
            host.heal()
            return t, nothing, f"p{t + 1} ({item['role']}), {hold:.1f} s"
        if k == "cut_primary_sync":
            p = self.resolve_target(item)
            sy = s.sync_index()
            if sy is None or sy == p:
                sy = [i for i in range(len(s.peers)) if i != p][0]
            s.peers[p].cut_from([s.peers[sy].ip])
            time.sleep(hold)
            s.peers[p].heal()
            return p, nothing, f"primary p{p + 1} from sync p{sy + 1}, {hold:.1f} s"
        if k == "zk_restart":
            z = rng.randrange(len(self.zk.hosts))
            self.zk.kill(z, signal.SIGTERM)
            self.zk.start(z)
            return None, nothing, f"zk{z + 1}"
        if k == "zk_leader_kill":
            z = self.zk.leader()
            z = 0 if z is None else z
            self.zk.kill(z)
            time.sleep(hold / 2)
            self.zk.start(z)
            return None, nothing, f"zk{z + 1} (leader), down {hold / 2:.1f} s"
        if k == "zk_quorum_loss":
            down = rng.sample(range(len(self.zk.hosts)), 2)
            for z in down:
                self.zk.kill(z)
            time.sleep(hold)
            for z in down:
                self.zk.start(z)
            return None, nothing, f"zk{down[0] + 1}+zk{down[1] + 1} down {hold:.1f} s"
        if k == "agent_restart":
            s.stop_agent(t)
            s.start_agent(t)
            return t, nothing, f"p{t + 1} ({item['role']})"
        if k == "op_switchover":
            ok, msg = s.switchover()
            return None, nothing, f"switchover: {'ok' if ok else 'FAILED ' + msg}"
        if k == "op_freeze":
            ok1, m1 = s.freeze(True)
            time.sleep(3)
            ok2, m2 = s.freeze(False)
            return None, nothing, f"freeze/unfreeze: {'ok' if ok1 and ok2 else 'FAILED ' + m1 + ' ' + m2}"
        if k == "op_rebuild":
            ok, msg = s.rebuild_replica(t)
            return t, nothing, f"rebuild p{t + 1}: {'ok' if ok else 'FAILED ' + msg}"
        raise ValueError(k)

    # ---------- measurements ----------
    def unavailability(self, t0, t1):
        """Longest time in [t0, t1] without an acknowledgement to the careful client, ending at an ack
        (or at t1 if none came)."""
        times = [a[1] for a in self.careful.acks if t0 < a[1] <= t1]
        prev, worst = t0, 0.0
        for t in times:
            worst = max(worst, t - prev)
            prev = t
        if not times:
            worst = t1 - t0
        return worst

    def rejoin_time(self, target, t0, heal_t, t_end):
        """From the heal to the first sample after the target's last bad one (up, and streaming or
        writable); 0 when the target was never seen out."""
        if target is None:
            return None
        samples = [x for x in self.monitors[target].samples if t0 <= x.t <= t_end]
        bad = [k for k, x in enumerate(samples) if not (x.up and (x.streaming or x.writable))]
        if not bad:
            return 0.0
        after = samples[bad[-1] + 1:]
        if not after:
            return None
        return max(0.0, after[0].t - heal_t)

    def unprotected_window(self, t0, t1):
        """Careful acks in [t0, t1] given by a postgres with no streaming synchronous standby."""
        ts = []
        for (_, t, host, _) in self.careful.acks_between(t0, t1):
            idx = [h.ip for h in self.s.peers].index(host) if host in [h.ip for h in self.s.peers] else None
            smp = self.monitors[idx].at(t) if idx is not None else None
            if smp is not None and smp.unprotected():
                ts.append(t)
        if not ts:
            return 0.0, 0
        return ts[-1] - ts[0] + self.monitors[0].interval, len(ts)

    def two_writable(self, t0, t1, step=0.25):
        """Seconds in [t0, t1] during which two or more postgres were writable at once (from the
        monitor's samples, each at most 1 s old): a split brain, whether or not a client wrote to both."""
        total, t = 0.0, t0
        while t < t1:
            n = 0
            for m in self.monitors:
                smp = m.at(t)
                if smp is not None and t - smp.t <= 1.0 and smp.up and smp.writable:
                    n += 1
            if n >= 2:
                total += step
            t += step
        return total

    def lost_rows(self, primary):
        # Only acknowledgements received before the query started can be expected in its snapshot.
        upto = {c.client: len(c.acks) for c in (self.careful, self.hostile)}
        rows = clients.query(self.s.peers[primary].ip, PG_PORT, "postgres", "SELECT id FROM acks", timeout=30)
        present = {r[0] for r in rows}
        out = {}
        for c in (self.careful, self.hostile):
            lost = {a[0] for a in c.acks[:upto[c.client]] if a[0] not in present}
            new = lost - self.lost_seen[c.client]
            self.lost_seen[c.client] |= new
            out[c.client] = sorted(new)
        return out

    def double_writers(self, clients_):
        """Pairs of (host, timeline) whose acknowledgements to the given clients overlap in time, or one
        timeline on two hosts: two peers accepting commits in overlapping generations."""
        spans = {}
        for c in clients_:
            for (_, t, host, tli) in list(c.acks):
                lo, hi = spans.get((host, tli), (t, t))
                spans[(host, tli)] = (min(lo, t), max(hi, t))
        keys = sorted(spans, key=lambda k: spans[k][0])
        seen = self.double_seen.setdefault(tuple(c.client for c in clients_), set())
        found = []
        for a in range(len(keys)):
            for b in range(a + 1, len(keys)):
                ka, kb = keys[a], keys[b]
                if ka[0] == kb[0]:
                    continue
                overlap = spans[ka][1] > spans[kb][0] and spans[kb][1] > spans[ka][0]
                if overlap or ka[1] == kb[1]:
                    if (ka, kb) not in seen:
                        seen.add((ka, kb))
                        both = min(spans[ka][1], spans[kb][1]) - max(spans[ka][0], spans[kb][0])
                        found.append(f"{ka[0]} tli {ka[1]} and {kb[0]} tli {kb[1]} (overlap {max(both, 0):.2f} s)")
        return found

    # ---------- one fault ----------
    def bound(self):
        """How long the cluster may stay unwritable while a majority of peers and ZooKeeper are healthy:
        failure detection (session timeout or ttl) + Patroni's loop_wait + 5 s."""
        return self.s.detect_seconds + getattr(self.s, "loop_wait", 0) + 5

    def run_item(self, item, total):
        s = self.s
        bound = self.bound()
        hold = max(bound + item["extra"], self.min_hold)   # a lasting fault outlives the bound, so that missing it shows
        t0 = time.time()
        target, _, what = self.inject(item, hold)
        heal_t = time.time()
        repairs = []
        ok = self.wait_until(lambda: self.settled(heal_t) or (s.kind == "dugong" and bool(s.deposed())),
                             SETTLE_TIMEOUT)
        # With a grace, the operator first lets the agents rejoin a deposed peer by themselves.
        if self.operator_grace and s.kind == "dugong" and s.deposed():
            ok = self.wait_until(lambda: self.settled(heal_t), self.operator_grace)
        # The operator's duties: rebuild deposed peers at once, repair any peer still out after the wait.
        for i in s.needs_operator():
            r_ok, msg = s.repair(i)
            repairs.append(f"rebuild p{i + 1}: {'ok' if r_ok else 'failed ' + str(msg)}")
        ok = self.wait_until(lambda: self.settled(heal_t), max(5, SETTLE_TIMEOUT - (time.time() - heal_t)))
        if not ok:
            p = self.writable_primary()
            for i, m in enumerate(self.monitors):
                smp = m.latest()
                if i != p and not (smp and smp.up and smp.streaming):
                    r_ok, msg = s.repair(i)
                    repairs.append(f"repair p{i + 1}: {'ok' if r_ok else 'failed ' + str(msg)}")
            ok = self.wait_until(lambda: self.settled(heal_t), max(5, GIVE_UP - (time.time() - heal_t)))
        t_end = time.time()
        # Unavailability counts from the fault, except while ZooKeeper has no quorum (then from the heal).
        start = heal_t if item["kind"] == "zk_quorum_loss" else t0
        unavail = self.unavailability(start, t_end)
        p = self.writable_primary()
        lost = {"careful": [], "hostile": []}
        check_error = None
        if p is not None:
            try:
                lost = self.lost_rows(p)
            except Exception as e:
                check_error = str(e).strip()
        else:
            check_error = "no writable primary to check"
        doubles = self.double_writers([self.careful])
        doubles_any = self.double_writers([self.careful, self.hostile])
        window, n_unprot = self.unprotected_window(t0, t_end)
        split = self.two_writable(t0, t_end)
        res = {
            "n": item["n"], "kind": item["kind"], "what": what, "hold": round(hold, 1),
            "unavailability": round(unavail, 2), "bound": bound, "over_bound": unavail > bound,
            "recovered": ok, "rejoin": (None if target is None else
                                        (lambda r: None if r is None else round(r, 2))(
                                            self.rejoin_time(target, t0, heal_t, t_end))),
            "careful_lost": len(lost["careful"]), "hostile_lost": len(lost["hostile"]),
            "careful_lost_ids": lost["careful"][:20], "hostile_lost_ids": lost["hostile"][:20],
            "double_writers": doubles, "double_writers_any": doubles_any, "unprotected_window": round(window, 2), "unprotected_acks": n_unprot,
            "two_writable": round(split, 2),
            "repairs": repairs, "check_error": check_error, "t": round(t0, 1), "duration": round(t_end - t0, 1),
        }
        self.results.append(res)
        flag = "ok" if ok and not lost["careful"] and not doubles and not res["over_bound"] else "PROBLEM"
        log(f"[{item['n']:3d}/{total}] {item['kind']:<16} {what:<40} unavail {unavail:6.2f}s "
            f"rejoin {res['rejoin'] if res['rejoin'] is not None else '-':>6} lost c{res['careful_lost']}/"
            f"h{res['hostile_lost']} dbl c{len(doubles)}/any{len(doubles_any)} nosync {window:.2f}s 2w {split:.2f}s {flag}"
            + (f" repairs: {'; '.join(repairs)}" if repairs else "") + (f" check: {check_error}" if check_error else ""))
        return res

    def timeline_forks(self):
        """Same timeline number with different switch points in two peers' history files."""
        seen, forks = {}, []
        for i, h in enumerate(self.s.peers):
            try:
                rows = clients.query(h.ip, PG_PORT, "postgres",
                                     "SELECT f, pg_read_file('pg_wal/' || f) FROM pg_ls_dir('pg_wal') f "
                                     "WHERE f LIKE '%.history'")
            except Exception:
                continue
            for _, text in rows:
                for line in text.splitlines():
                    parts = line.split()
                    if len(parts) >= 2 and parts[0].isdigit():
                        tli, lsn = int(parts[0]), parts[1]
                        if tli in seen and seen[tli][1] != lsn:
                            forks.append(f"timeline {tli}: p{seen[tli][0] + 1} switched at {seen[tli][1]}, "
                                         f"p{i + 1} at {lsn}")
                        seen.setdefault(tli, (i, lsn))
        return sorted(set(forks))

    def run(self, items, seed):
        log(f"== {self.s.label}: bringing up {len(self.s.peers)} peers")
        self.bring_up()
        log(f"== {self.s.label}: up; measuring at rest for {self.rest_seconds} s")
        rest = self.at_rest()
        for a in rest["agents"]:
            log(f"   p{a['peer']}: RSS {a['rss_mb']} MB, CPU {a['cpu_pct']} %, "
                f"ZooKeeper {a['zk_requests_per_min']} requests/min")
        total = max(it["n"] for it in items)
        for item in items:
            if self.deadline and time.time() > self.deadline and not item["kind"].startswith("op_"):
                log(f"== deadline reached: stopping after {item['n'] - 1} of {total} faults")
                break
            self.run_item(item, total)
            if self.partial_path:
                with open(self.partial_path, "w") as f:
                    json.dump(dict(self.meta, system=self.s.label, kind=self.s.kind, seed=seed,
                                   peers=len(self.s.peers), rest=rest, faults=self.results, partial=True,
                                   final={"careful_lost": sum(r["careful_lost"] for r in self.results),
                                          "hostile_lost": sum(r["hostile_lost"] for r in self.results),
                                          "timeline_forks": [], "careful_acks": len(self.careful.acks),
                                          "hostile_acks": len(self.hostile.acks)}), f, indent=1)
        # final check: every acknowledged row on the final primary, timeline histories agree
        self.wait_until(lambda: self.settled(time.time() - 1), 60)
        self.careful.stopping = self.hostile.stopping = True
        self.careful.join(5)
        self.hostile.join(5)
        final = {"careful_lost": None, "hostile_lost": None}
        p = self.writable_primary()
        if p is not None:
            self.lost_seen = {"careful": set(), "hostile": set()}
            lost = self.lost_rows(p)
            final = {"careful_lost": len(lost["careful"]), "hostile_lost": len(lost["hostile"]),
                     "careful_lost_ids": lost["careful"][:50], "hostile_lost_ids": lost["hostile"][:50]}
        final["timeline_forks"] = self.timeline_forks()
        final["careful_acks"] = len(self.careful.acks)
        final["hostile_acks"] = len(self.hostile.acks)
        log(f"== final: careful acks {final['careful_acks']}, lost {final['careful_lost']}; hostile acks "
            f"{final['hostile_acks']}, lost {final['hostile_lost']}; timeline forks {len(final['timeline_forks'])}")
        for m in self.monitors:
            m.stopping = True
        with open(os.path.join(self.s.workdir, "monitor.jsonl"), "w") as f:
            for i, m in enumerate(self.monitors):
                for x in m.samples:
                    f.write(json.dumps({"peer": i + 1, "t": x.t, "up": x.up, "writable": x.writable,
                                        "sync_names": x.sync_names, "sync_streaming": x.sync_streaming,
                                        "streaming": x.streaming}) + "\n")
        with open(os.path.join(self.s.workdir, "acks.jsonl"), "w") as f:
            for c in (self.careful, self.hostile):
                for a in c.acks:
                    f.write(json.dumps({"client": c.client, "id": a[0], "t": a[1], "host": a[2], "tli": a[3]}) + "\n")
        peer_of_ip = {h.ip: i + 1 for i, h in enumerate(self.s.peers)}
        promoted = promotions.analyse(self.s.workdir, self.results, peer_of_ip.get)
        return {"system": self.s.label, "kind": self.s.kind, "seed": seed, "peers": len(self.s.peers),
                "rest": rest, "faults": self.results, "final": final, "promotions": promoted}

    def stop(self):
        for c in (self.careful, self.hostile):
            if c is not None:
                c.stopping = True
        for m in self.monitors:
            m.stopping = True
        try:
            self.s.stop_all()
        except Exception as e:
            log(f"stopping {self.s.label}: {e}")
        for h in self.s.peers:
            kill_namespace_processes(h.ns)
