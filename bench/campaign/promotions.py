"""Commits acknowledged with no synchronous standby right after a promotion.

A promotion is the careful client's first acknowledgement on a new timeline. From it, the
acknowledgements that the new primary gave while it had no synchronous standby (monitor: writable,
empty synchronous_standby_names, none streaming) are counted until its first acknowledgement with
one; the window is the time from the promotion to the last such acknowledgement. Acknowledgements
whose latest monitor sample does not yet show the host writable say nothing either way and are skipped.

Inputs are the files a run leaves in its system's work directory: acks.jsonl and monitor.jsonl.
"""
import bisect
import json
import os

from topology import PEER_ADDRESS_BASE


def _load(workdir):
    acks, samples = [], {}
    with open(os.path.join(workdir, "acks.jsonl")) as f:
        for line in f:
            a = json.loads(line)
            if a["client"] == "careful":
                acks.append(a)
    with open(os.path.join(workdir, "monitor.jsonl")) as f:
        for line in f:
            s = json.loads(line)
            samples.setdefault(s["peer"], []).append(s)
    for v in samples.values():
        v.sort(key=lambda s: s["t"])
    acks.sort(key=lambda a: a["t"])
    return acks, samples


def _unprotected(s):
    return s["up"] and s["writable"] and not s["sync_names"].strip() and s["sync_streaming"] == 0


def analyse(workdir, faults, peer_of_ip):
    """One entry per promotion: when, on which host and timeline, during which fault (n, kind), how
    many acknowledgements had no synchronous standby and for how long (seconds)."""
    acks, samples = _load(workdir)
    times = {p: [s["t"] for s in v] for p, v in samples.items()}
    out, highest = [], None
    for i, a in enumerate(acks):
        if highest is not None and a["tli"] > highest:
            out.append(_after_promotion(acks, i, samples.get(peer_of_ip(a["host"]), []),
                                        times.get(peer_of_ip(a["host"]), []), faults))
        highest = a["tli"] if highest is None else max(highest, a["tli"])
    return out


def _after_promotion(acks, i, samples, times, faults):
    t0, host, tli = acks[i]["t"], acks[i]["host"], acks[i]["tli"]
    n_unprot, last_unprot = 0, None
    for a in acks[i:]:
        if a["tli"] != tli or a["host"] != host:
            break
        k = bisect.bisect_right(times, a["t"])
        s = samples[k - 1] if k else None
        if s is not None and s["up"] and s["writable"]:
            if not _unprotected(s):
                break
            n_unprot += 1
            last_unprot = a["t"]
    fault = None
    for f in faults:
        if f["t"] <= t0 <= f["t"] + f["duration"]:
            fault = f
    return {"t": round(t0, 2), "host": host, "tli": tli,
            "fault": None if fault is None else {"n": fault["n"], "kind": fault["kind"]},
            "unprotected_acks": n_unprot, "window": 0.0 if last_unprot is None else round(last_unprot - t0, 2)}


def add_to_result(result_path, workdir):
    """Adds 'promotions' to a campaign result file from its run's work directory."""
    with open(result_path) as f:
        r = json.load(f)

    r["promotions"] = analyse(workdir, r["faults"], lambda ip: int(ip.rsplit(".", 1)[1]) - PEER_ADDRESS_BASE)
    with open(result_path, "w") as f:
        json.dump(r, f, indent=1)
    return r["promotions"]
