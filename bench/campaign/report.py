"""bench/results/campaign.md and its gnuplot plots, from one or more campaign result files."""
import calendar
import json
import os
import re
import subprocess
import time

import summary
from summary import fmt


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        r["file"] = os.path.basename(p)
        runs.append(r)
    return runs


def overall(r):
    u = [f["unavailability"] for f in r["faults"] if not f["kind"].startswith("op_")]
    return {
        "faults": sum(1 for f in r["faults"] if not f["kind"].startswith("op_")),
        "requested": r.get("faults_requested"),
        "ops": sum(1 for f in r["faults"] if f["kind"].startswith("op_")),
        "unavail_median": summary.median(u), "unavail_p95": summary.pct(u, 95), "unavail_max": max(u, default=None),
        "careful_lost": r["final"]["careful_lost"], "hostile_lost": r["final"]["hostile_lost"],
        "double_writers": sum(len(f["double_writers"]) for f in r["faults"]),
        "double_writers_any": sum(len(f.get("double_writers_any", [])) for f in r["faults"]),
        "over_bound": sum(1 for f in r["faults"] if f["over_bound"]),
        "not_recovered": sum(1 for f in r["faults"] if not f["recovered"]),
        "rejoin_median": summary.median([f["rejoin"] for f in r["faults"]]),
        "nosync_window_max": max((f["unprotected_window"] for f in r["faults"]), default=0),
        "nosync_acks": sum(f["unprotected_acks"] for f in r["faults"]),
        "two_writable": sum(f.get("two_writable", 0) for f in r["faults"]),
        "rss_mb": sum(a["rss_mb"] for a in r["rest"]["agents"]) / len(r["rest"]["agents"]),
        "cpu_pct": sum(a["cpu_pct"] for a in r["rest"]["agents"]) / len(r["rest"]["agents"]),
        "zk_per_min": sum(a["zk_requests_per_min"] for a in r["rest"]["agents"]) / len(r["rest"]["agents"]),
    }


def replay_of(r, n):
    """The command that replays a run's schedule up to and including fault n, for its system alone."""
    cmd = re.sub(r"--faults \d+", f"--faults {n}", r["replay"])
    return re.sub(r"--systems \S+", f"--systems {r['name']}", cmd)


def shared_ensemble(r, runs):
    """The other reported runs that ran one after another on this run's ZooKeeper ensemble (same command)."""
    return [o["name"] for o in runs if o is not r and o["replay"] == r["replay"] and o["peers"] == r["peers"]]


def load_during(r, load_log):
    """(median, max) of the 1-minute load average sampled while the run's faults ran."""
    if not load_log or not os.path.exists(load_log) or not r["faults"]:
        return None
    t0 = r["faults"][0]["t"]
    t1 = r["faults"][-1]["t"] + r["faults"][-1]["duration"]
    day = time.strftime("%Y-%m-%d", time.gmtime(t0))
    vals = []
    with open(load_log) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2:
                continue
            t = calendar.timegm(time.strptime(f"{day} {parts[0]}", "%Y-%m-%d %H:%M:%S"))
            if t0 <= t <= t1:
                vals.append(float(parts[1]))
    if not vals:
        return None
    return summary.median(vals), max(vals)


def promotion_stats(r):
    ps = r.get("promotions")
    if ps is None:
        return None
    hit = [p for p in ps if p["unprotected_acks"]]
    return {"count": len(ps), "with_acks": len(hit), "acks": sum(p["unprotected_acks"] for p in ps),
            "window_median": summary.median([p["window"] for p in hit]),
            "window_max": max((p["window"] for p in ps), default=0.0),
            "kinds": sorted({p["fault"]["kind"] for p in hit if p.get("fault")})}


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.1f}x"


def title(r):
    label = f" ({r['label']})" if r.get("label") else ""
    return f"{r['system']}, {r['peers']} peers, seed {r['seed']}{label}"


def plot(runs, out_dir):
    """Median and max write unavailability per fault kind, one bar per run (3-peer runs)."""
    kinds = sorted({f["kind"] for r in runs for f in r["faults"]})
    dat = os.path.join(out_dir, "campaign_unavailability.dat")
    with open(dat, "w") as f:
        f.write("kind " + " ".join(f'"{r["name"]}"' for r in runs) + "\n")
        for k in kinds:
            vals = []
            for r in runs:
                row = summary.by_kind(r).get(k)
                vals.append(fmt(row["unavail_median"]) if row else "0")
            f.write(f"{k} " + " ".join(v if v != "-" else "0" for v in vals) + "\n")
    datmax = os.path.join(out_dir, "campaign_unavailability_max.dat")
    with open(datmax, "w") as f:
        f.write("kind " + " ".join(f'"{r["name"]}"' for r in runs) + "\n")
        for k in kinds:
            vals = []
            for r in runs:
                row = summary.by_kind(r).get(k)
                vals.append(fmt(row["unavail_max"]) if row else "0")
            f.write(f"{k} " + " ".join(vals) + "\n")
    pngs = []
    for name, path, what in (("campaign_unavailability.png", dat, "median"),
                             ("campaign_unavailability_max.png", datmax, "maximum")):
        png = os.path.join(out_dir, name)
        cols = " , ".join(f"'{path}' using {i + 2}:xtic(1) title columnheader({i + 2})" for i in range(len(runs)))
        script = f"""set terminal png size 1200,600 font ",10" noenhanced
set output '{png}'
set title "Write unavailability per fault kind ({what}, seconds; careful client, 1 s operations)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -35
set ylabel "seconds"
set grid ytics
set key top left
set yrange [0:*]
plot {cols}
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        pngs.append(name)
    os.remove(dat)
    os.remove(datmax)
    return pngs


def write(paths, out_dir, command, load_log=None):
    runs = load(paths)
    os.makedirs(out_dir, exist_ok=True)
    pngs = plot([r for r in runs if r["peers"] == 3], out_dir)
    base = next((r for r in runs if r["kind"] == "dugong" and r["peers"] == 3), runs[0])
    bo = overall(base)
    L = []
    L.append("# Fault campaign: dugong and Patroni on a real multi-host topology\n")
    L.append("Generated by `bench/campaign/campaign.py report` from the result files listed at the end. "
             "Every host (3 ZooKeeper servers, 3 or 5 peers, the clients) is a network namespace on a "
             "private bridge; faults are real kills, stops, iptables cuts and a degraded link (20 % loss "
             "and a 1 Mbit/s bucket: this kernel has no sch_netem, so there is no fixed-delay fault). "
             "See the fault campaign section of the top-level README for the method.\n")
    L.append("## Headline (3 peers unless stated; ratios are system / dugong)\n")
    heads = ["run", "faults (+ops)", "unavail median s", "p95", "max", "careful lost", "hostile lost",
             "double writers (careful acks)", "double writers (any acks)", "two writable s (sum)", "> bound",
             "unrecovered", "rejoin median s", "no-sync ack window max s",
             "promotions (followed by no-sync acks)", "no-sync window after a promotion max s",
             "agent RSS MB", "agent CPU %", "ZK req/min/agent"]
    L.append("| " + " | ".join(heads) + " |")
    L.append("|" + "---|" * len(heads))
    for r in runs:
        o = overall(r)
        ps = promotion_stats(r)
        n = f"{o['faults']}" + ("" if o["requested"] in (None, o["faults"]) else f" of {o['requested']}")
        L.append("| " + " | ".join([
            title(r), f"{n} (+{o['ops']})", fmt(o["unavail_median"]), fmt(o["unavail_p95"]), fmt(o["unavail_max"]),
            fmt(o["careful_lost"]), fmt(o["hostile_lost"]), str(o["double_writers"]), str(o["double_writers_any"]),
            fmt(o["two_writable"]), str(o["over_bound"]), str(o["not_recovered"]), fmt(o["rejoin_median"]),
            fmt(o["nosync_window_max"]),
            "-" if ps is None else f"{ps['count']} ({ps['with_acks']})", "-" if ps is None else fmt(ps["window_max"]),
            f"{o['rss_mb']:.1f}", f"{o['cpu_pct']:.2f}", f"{o['zk_per_min']:.0f}"]) + " |")
    L.append("")
    L.append("Ratios to the 3-peer dugong run:\n")
    L.append("| run | unavail median | p95 | max | rejoin median | agent RSS | agent CPU | ZK requests |")
    L.append("|---|---|---|---|---|---|---|---|")
    for r in runs:
        if r is base:
            continue
        o = overall(r)
        L.append(f"| {title(r)} | {ratio(o['unavail_median'], bo['unavail_median'])} "
                 f"| {ratio(o['unavail_p95'], bo['unavail_p95'])} | {ratio(o['unavail_max'], bo['unavail_max'])} "
                 f"| {ratio(o['rejoin_median'], bo['rejoin_median'])} | {ratio(o['rss_mb'], bo['rss_mb'])} "
                 f"| {ratio(o['cpu_pct'], bo['cpu_pct'])} | {ratio(o['zk_per_min'], bo['zk_per_min'])} |")
    L.append("")
    L.append("## How the runs ran\n")
    L.append("| run | first fault (UTC) | faults | operator actions | ZooKeeper ensemble | agents at rest measured for | "
             "machine load (1-min) during the faults, median / max |")
    L.append("|---|---|---|---|---|---|---|")
    for r in runs:
        o = overall(r)
        shared = shared_ensemble(r, runs)
        ld = load_during(r, load_log)
        first = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["faults"][0]["t"])) if r["faults"] else "-"
        L.append(f"| {title(r)} | {first} | {o['faults']} | {o['ops']} | "
                 f"{'shared, one after another, with ' + ', '.join(shared) if shared else 'its own'} | "
                 f"{r['rest']['seconds']} s | {'-' if ld is None else f'{ld[0]:.1f} / {ld[1]:.1f}'} |")
    L.append("")
    for p in pngs:
        L.append(f"![{p}]({p})\n")
    L.append("## Per fault kind\n")
    cols = summary.COLUMNS
    for r in runs:
        bound = r["faults"][0]["bound"] if r["faults"] else None
        L.append(f"### {title(r)}\n")
        L.append(f"Bound on write unavailability: {fmt(bound)} s (failure detection + loop_wait + 5 s); "
                 f"faults that last are held for the bound + 1 to 3 s.\n")
        L.append("| " + " | ".join(h for _, h in cols) + " |")
        L.append("|" + "---|" * len(cols))
        for kind, row in summary.by_kind(r).items():
            L.append("| " + " | ".join([kind] + [fmt(row[k]) for k, _ in cols[1:]]) + " |")
        L.append("")
    L.append("### Per-kind ratios of unavailability (median / p95 / max), system / dugong 3 peers\n")
    bk = summary.by_kind(base)
    others = [r for r in runs if r is not base and r["peers"] == 3]
    L.append("| fault kind | " + " | ".join(r["name"] for r in others) + " |")
    L.append("|---|" + "---|" * len(others))
    for kind in sorted(bk):
        cells = []
        for r in others:
            rk = summary.by_kind(r).get(kind)
            if not rk:
                cells.append("-")
                continue
            cells.append(" / ".join(ratio(rk[m], bk[kind][m]) for m in ("unavail_median", "unavail_p95", "unavail_max")))
        L.append(f"| {kind} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("## Commits acknowledged with no synchronous standby\n")
    L.append("Careful-client acknowledgements given by a postgres that was writable with an empty "
             "`synchronous_standby_names` and no synchronous standby streaming (monitor samples every 0.5 s). "
             "The window is the time from the first to the last such acknowledgement after one fault.\n")
    L.append("| run | faults with such acks | acks | window median s | window max s | fault kinds |")
    L.append("|---|---|---|---|---|---|")
    for r in runs:
        fs = [f for f in r["faults"] if f["unprotected_acks"]]
        kinds = sorted({f["kind"] for f in fs})
        L.append(f"| {title(r)} | {len(fs)} | {sum(f['unprotected_acks'] for f in fs)} "
                 f"| {fmt(summary.median([f['unprotected_window'] for f in fs]))} "
                 f"| {fmt(max((f['unprotected_window'] for f in fs), default=None))} | {', '.join(kinds) or '-'} |")
    L.append("")
    L.append("## Commits acknowledged with no synchronous standby after a promotion\n")
    L.append("A promotion is the careful client's first acknowledgement on a new timeline. From it, the new "
             "primary's acknowledgements given while it had no synchronous standby (monitor: writable, empty "
             "`synchronous_standby_names`, none streaming) are counted until its first acknowledgement with one; "
             "the window runs from the promotion to the last such acknowledgement.\n")
    L.append("| run | promotions | followed by no-sync acks | acks | window median s | window max s | "
             "faults that promoted with such acks |")
    L.append("|---|---|---|---|---|---|---|")
    for r in runs:
        ps = promotion_stats(r)
        if ps is None:
            L.append(f"| {title(r)} | - | - | - | - | - | not recorded |")
            continue
        L.append(f"| {title(r)} | {ps['count']} | {ps['with_acks']} | {ps['acks']} | {fmt(ps['window_median'])} "
                 f"| {fmt(ps['window_max'])} | {', '.join(ps['kinds']) or '-'} |")
    L.append("")
    L.append("## Every fault after which a system lost a row, exceeded its bound or never recovered\n")
    L.append("Each line gives the command that replays the schedule up to and including that fault (same seed; "
             "a shorter run is a prefix of a longer one).\n")
    any_problem = False
    for r in runs:
        for f, why in summary.problems(r):
            any_problem = True
            L.append(f"- {r['name']} ({r['peers']} peers{', ' + r['label'] if r.get('label') else ''}) fault {f['n']} `{f['kind']}` {f['what']}: "
                     f"{'; '.join(why)}. Replay: `{replay_of(r, f['n'])}`")
        if r["final"]["timeline_forks"]:
            any_problem = True
            L.append(f"- {r['name']}: timeline forks at the end: {'; '.join(r['final']['timeline_forks'])}")
    if not any_problem:
        L.append("None.")
    L.append("")
    L.append("## Reproduce\n")
    if command:
        L.append("```sh\n" + command + "\n```\n")
    for r in runs:
        L.append(f"- `{r['file']}`: `{r['replay']}`")
    L.append("")
    with open(os.path.join(out_dir, "campaign.md"), "w") as f:
        f.write("\n".join(L))
    print(f"wrote {os.path.join(out_dir, 'campaign.md')} and {', '.join(pngs)}")
