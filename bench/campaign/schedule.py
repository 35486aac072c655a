"""The seeded fault schedule: the same seed gives the same faults, targets and timings."""
import random

# Faults, each held for the system's failure-detection time + 'extra' seconds when it lasts.
FAULTS = [
    "kill_postgres",      # kill -9 of a peer's postmaster
    "kill_agent",         # kill -9 of a peer's agent (restarted 1 s later, like systemd)
    "kill_host",          # host death: agent and postgres killed, link down; back after the hold
    "stop_agent",         # SIGSTOP of an agent past its session timeout, then SIGCONT
    "cut_zk",             # a host cut from the ZooKeeper servers only
    "cut_all",            # a host cut from everything (link down)
    "cut_primary_sync",   # the primary cut from its sync only
    "asymmetric",         # a host receives nothing from the ZooKeeper servers and the peers, still sends
    "bad_link",           # one host's link: 20 % loss each way and a 1 Mbit/s bucket (no netem here)
    "zk_restart",         # one ZooKeeper server restarted
    "zk_leader_kill",     # the ZooKeeper leader killed (kill -9), restarted after the hold
    "zk_quorum_loss",     # two of three ZooKeeper servers killed for a while
    "agent_restart",      # an agent stopped and started again (an upgrade)
]
# Kinds only run when --kinds names them (the default schedule of every seed stays as it was).
ON_REQUEST = [
    "kill_sync_host",     # kill_host of the sync's host (commits wait on it until it is replaced)
    "kill_primary_host",  # kill_host of the primary's host (in a row: the cluster must heal between them)
]
OPERATOR = ["op_switchover", "op_freeze", "op_rebuild"]
PEER_FAULTS = {"kill_postgres", "kill_agent", "kill_host", "stop_agent", "cut_zk", "cut_all", "asymmetric",
               "bad_link", "agent_restart", "kill_sync_host",
               "kill_primary_host"}


def make(seed, faults, ops_every, kinds=None, operator=None):
    """The first `faults` faults of the seed's endless schedule (a shorter run is a prefix of a longer
    one), with an operator action after every `ops_every` faults. Each batch of len(FAULTS) faults holds
    every kind once, in a random order; `kinds` (a subset of FAULTS) keeps only those kinds in each batch;
    `operator` (a subset of OPERATOR) only those operator actions, in turn."""
    unknown = set(kinds or []) - set(FAULTS) - set(ON_REQUEST)
    if unknown:
        raise ValueError(f"unknown fault kinds: {', '.join(sorted(unknown))} (known: {', '.join(FAULTS + ON_REQUEST)})")
    unknown_ops = set(operator or []) - set(OPERATOR)
    if unknown_ops:
        raise ValueError(f"unknown operator actions: {', '.join(sorted(unknown_ops))} (known: {', '.join(OPERATOR)})")
    rng = random.Random(seed)
    items, ops, n = [], [], 0
    while n < faults:
        batch = FAULTS[:]
        rng.shuffle(batch)
        if kinds:
            batch = [k for k in batch if k in kinds] + [k for k in ON_REQUEST if k in kinds]
        for kind in batch:
            if n == faults:
                break
            n += 1
            items.append({
                "n": n,
                "kind": kind,
                "role": {"cut_primary_sync": "primary", "kill_primary_host": "primary", "kill_sync_host": "sync"}.get(kind) or
                        rng.choice(["primary", "replica"]),
                "pick": rng.random(),
                "extra": round(rng.uniform(1.0, 3.0), 1),
            })
            if ops_every and n % ops_every == 0:
                if not ops:
                    ops = OPERATOR[:]
                    rng.shuffle(ops)
                    if operator:
                        ops = [o for o in ops if o in operator]
                items.append({"n": n, "kind": ops.pop(), "role": "replica", "pick": rng.random(), "extra": 0})
    return items
