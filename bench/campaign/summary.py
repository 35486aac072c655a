"""Per-fault-kind statistics of a campaign result, the summary table and the verdict."""
import statistics


def pct(values, q):
    """The q-th percentile (nearest rank) of values; None when empty."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(round(q / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def median(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def by_kind(result):
    kinds = {}
    for f in result["faults"]:
        kinds.setdefault(f["kind"], []).append(f)
    rows = {}
    for kind, fs in sorted(kinds.items()):
        u = [f["unavailability"] for f in fs]
        rj = [f["rejoin"] for f in fs]
        rows[kind] = {
            "count": len(fs),
            "unavail_median": median(u), "unavail_p95": pct(u, 95), "unavail_max": max(u),
            "careful_lost": sum(f["careful_lost"] for f in fs),
            "hostile_lost": sum(f["hostile_lost"] for f in fs),
            "double_writers": sum(len(f["double_writers"]) for f in fs),
            "double_writers_any": sum(len(f.get("double_writers_any", [])) for f in fs),
            "rejoin_median": median(rj), "rejoin_max": max((x for x in rj if x is not None), default=None),
            "over_bound": sum(1 for f in fs if f["over_bound"]),
            "not_recovered": sum(1 for f in fs if not f["recovered"]),
            "nosync_window_max": max(f["unprotected_window"] for f in fs),
            "nosync_acks": sum(f["unprotected_acks"] for f in fs),
            "two_writable_max": max(f.get("two_writable", 0) for f in fs),
        }
    return rows


def fmt(x, digits=2):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


COLUMNS = [("kind", "fault kind"), ("count", "n"), ("unavail_median", "unav med"), ("unavail_p95", "p95"),
           ("unavail_max", "max"), ("careful_lost", "lost careful"), ("hostile_lost", "lost hostile"),
           ("double_writers", "double wr careful"), ("double_writers_any", "double wr any"), ("rejoin_median", "rejoin med"), ("rejoin_max", "rejoin max"),
           ("over_bound", "> bound"), ("not_recovered", "unrecovered"), ("nosync_window_max", "no-sync ack win"),
           ("nosync_acks", "no-sync acks"), ("two_writable_max", "2 writable max s")]


def print_table(result):
    rows = by_kind(result)
    print(f"\n== {result['system']}, {result['peers']} peers, seed {result['seed']}")
    widths = [max(len(h), 16 if k == "kind" else 6) for k, h in COLUMNS]
    print("  ".join(h.rjust(w) if i else h.ljust(w) for i, ((k, h), w) in enumerate(zip(COLUMNS, widths))))
    for kind, r in rows.items():
        cells = [kind] + [fmt(r[k]) for k, _ in COLUMNS[1:]]
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))))
    fin = result["final"]
    print(f"final: careful acks {fin['careful_acks']} lost {fin['careful_lost']}; hostile acks "
          f"{fin['hostile_acks']} lost {fin['hostile_lost']}; timeline forks {len(fin['timeline_forks'])}\n",
          flush=True)


def problems(result):
    """Faults after which a row was lost, the bound was exceeded, or the cluster never recovered."""
    out = []
    for f in result["faults"]:
        why = []
        if f["careful_lost"]:
            why.append(f"{f['careful_lost']} careful rows lost")
        if f["hostile_lost"]:
            why.append(f"{f['hostile_lost']} hostile rows lost")
        if f["double_writers"]:
            why.append("double writer (careful acks): " + "; ".join(f["double_writers"]))
        elif f.get("double_writers_any"):
            why.append("double writer (hostile acks): " + "; ".join(f["double_writers_any"]))
        if f["over_bound"]:
            why.append(f"unavailable {f['unavailability']} s > bound {f['bound']} s")
        if not f["recovered"]:
            why.append("never recovered")
        if f.get("check_error"):
            why.append("check failed: " + f["check_error"])
        if why:
            out.append((f, why))
    return out


def verdict(runs, strict):
    """True when a run broke a safety promise (careful rows lost, a double writer, a timeline fork);
    with strict, also an exceeded bound or a fault never recovered from."""
    bad = False
    for r in runs:
        fin = r["final"]
        if fin["careful_lost"] or fin["careful_lost"] is None or fin["timeline_forks"]:
            bad = True
        for f, _ in problems(r):
            if f["careful_lost"] or f["double_writers"]:
                bad = True
            if strict and (f["over_bound"] or not f["recovered"]):
                bad = True
    return bad
