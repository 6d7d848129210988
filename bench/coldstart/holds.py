#!/usr/bin/env python3
"""When the real cluster-autoscaler scales up, against the simulator's rule.

Reads LOGS/runN-autoscaler.log (loops, their unschedulable pods, "very new" waits, scale-ups),
runN-kubelet.log (users Pending, nodes Ready) and runN-ROW-ma-why.jsonl (each row's room and
Pending placeholders, put on the real clock by its users' kubelet "pending" lines; `-la` with
--placement least-allocated).
For each scale-up of a row with placeholders: its oldest Pending placeholder -> the decision, on
the real stack, by the simulator's former rule (no scale-up in the hold, 2 s real from creation;
loops at each newly Pending pod, then every scan) and by its rule now, the hold from creation
rounded down to its whole real second (the API's timestamps; `simulate --created-resolution`).
A "lifted" one came sooner than the row's own rounded hold: the hold (`allPodsAreNew`, core/static_autoscaler.go) is one check over the whole cluster. Then
which hold end fits where a "very new" wait directly precedes a scale-up, and decision -> node
object seen, -> Ready against the model's mean (`node_ready_s` in RESULTS).

    python3 bench/coldstart/holds.py [LOGS] [RUNS] [--factor F] [--form FORM] [--results RESULTS] [--placement P] [--row SLUG]

LOGS defaults to target/coldstart-logs, RUNS (e.g. 0,1,2) to 0, F to 15, FORM to cycling,
RESULTS to bench/results/real-stack.json, P to most-allocated. With --row (a group's slug, e.g.
static-pin-ma), each of that row's scale-ups first: the decision, its Pending spell's start, its own
hold's end, held or lifted, and whether other rows' pods were in the salvo. Times are simulated seconds unless marked real.
"""

import argparse
import json
import math
import os
import re
import statistics

ROWS = ["static", "static+pin", "new-node", "new-node+pin", "new-node+avoid-candidates"]
GATED = ["gate", "gate+new-node"]
HOLD_REAL = 2.0  # the autoscaler's "very new" hold; its scan: 10 s simulated, whole real s
SLACK = 3.0  # simulated s: the observer's 100 ms poll, a pod's going Pending to its loop
LAG_REAL = 0.1  # real s: the observer's poll, its room entry after the pod's creation


def rows_of(logs, run, placement):
    """The placement's rows whose logs the run has: the measured rows (of ROWS), their slugs,
    and the slugs of every row with placeholders (theirs, then GATED's)."""
    suffix = {"most-allocated": "-ma", "least-allocated": "-la"}[placement]
    slug = {r: r.replace("+", "-") + suffix for r in ROWS + GATED}
    have = [r for r in ROWS + GATED if os.path.exists(f"{logs}/run{run}-{slug[r]}-why.jsonl")]
    rows = [r for r in ROWS if r in have]
    return rows, [slug[r] for r in rows], [slug[r] for r in have]


def clock(line):
    """Seconds of the day of a klog ("I1129 04:23:41.04 ...") or ISO ("...T04:23:47.38Z") line."""
    m = re.match(r"(?:[IWE]\d{4} |\d{4}-\d\d-\d\dT)(\d\d):(\d\d):(\d\d\.\d+)", line)
    return m and int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])


def loops(path):
    """The autoscaler's loops: start (real), "very new" wait, unschedulable pods, scale-ups."""
    out = []
    for line in open(path, encoding="utf-8"):
        if "Autoscaler loop triggered" in line:
            out.append({"t": clock(line), "very_new": False, "pods": [], "ups": []})
        elif not out:
            continue
        elif "very new" in line:
            out[-1]["very_new"] = True
        elif m := re.search(r"klogx.*Pod (\S+) is unschedulable", line):
            out[-1]["pods"].append(m[1])
        elif m := re.search(r"Scale-up: setting group (\S+) size to (\d+)", line):
            if int(m[2]) > 1:  # not a row's first node, at the run's start
                out[-1]["ups"].append((m[1], clock(line)))
    return out


def pending(evs):
    """A row's spells with Pending placeholders [(start, end or None)], and the times their
    number grows (each starts an autoscaler loop)."""
    spells, rises, start, last = [], [], None, 0
    for e in evs:
        if e["ev"] != "room" or not e["room"]:
            continue
        ph = e["room"]["pending"][1]
        rises += [e["t"]] if ph > last else []
        if ph > 0 and start is None:
            start = e["t"]
        elif ph == 0 and start is not None:
            spells.append((start, e["t"]))
            start = None
        last = ph
    return spells + ([(start, None)] if start is not None else []), rises


def load(logs, run, factor, every):
    """One run: its loops, kubelet's Ready (real) by node, and by row its log, clock and spells."""
    pend, ready = {}, {}
    for line in open(f"{logs}/run{run}-kubelet.log", encoding="utf-8"):
        if m := re.search(r"pod (\S+)/(user-\d+) \(.*\) on \S+: pending", line):
            pend.setdefault((m[1], m[2]), clock(line))
        elif m := re.search(r"node (\S+): Ready", line):
            ready.setdefault(m[1], clock(line))
    rows = {}
    for slug in every:
        evs = [json.loads(l) for l in open(f"{logs}/run{run}-{slug}-why.jsonl", encoding="utf-8")]
        offs = [pend[slug, e["user"]] - e["t"] / factor for e in evs
                if e["ev"] == "bind" and (slug, e["user"]) in pend]
        spells, rises = pending(evs)
        rows[slug] = {"evs": evs, "t0": statistics.median(offs), "spells": spells, "rises": rises}
    return {"loops": loops(f"{logs}/run{run}-autoscaler.log"), "ready": ready, "rows": rows}


def ups_of(run, slug, factor):
    """(loop, decision time) of each scale-up of a row, on its clock."""
    t0 = run["rows"][slug]["t0"]
    return [(lp, (w - t0) * factor) for lp in run["loops"] for g, w in lp["ups"] if g == slug]


def chain(c, hold_end, starts, scan):
    """The first loop at or after hold_end: loops start at each of starts, then every scan."""
    ts = [t for t in starts if c <= t < hold_end + scan]
    for i, t in enumerate(ts):
        k = max(0, math.ceil((hold_end - t) / scan - 1e-9))
        if t + k * scan < (ts[i + 1] if i + 1 < len(ts) else math.inf):
            return t + k * scan
    return hold_end


def scale_ups(run, factor, slugs):
    """Each scale-up of a row in a Pending spell: the times from the spell's start."""
    out, hold, scan = [], HOLD_REAL * factor, max(1, math.floor(10 / factor)) * factor
    for slug in slugs:
        row = run["rows"][slug]
        for lp, T in ups_of(run, slug, factor):
            st = [a for a, b in row["spells"] if a <= T + SLACK and (b is None or b >= T - SLACK)]
            if not st:
                continue
            c = min(st)
            end = (math.floor(row["t0"] + c / factor) + HOLD_REAL - row["t0"]) * factor
            out.append({"slug": slug, "at": T, "spell": c, "real": T - c, "rule": chain(c, c + hold, row["rises"], scan) - c,
                        "rounded": chain(c, end, row["rises"], scan) - c, "own_hold": end - c,
                        "others": any(not p.startswith(slug + "/") for p in lp["pods"]),
                        "buffer": any("capacity-buffer" in p for p in lp["pods"])})
    return out


def hold_ends(run, factor):
    """Where a "very new" loop directly precedes one scaling up for placeholders only: whether
    the hold's end fits floor(creation) + 2 s, and creation + 2 s, of the oldest one (real)."""
    t0 = statistics.median(r["t0"] for r in run["rows"].values())
    out, lps = [], run["loops"]
    for vn, su in zip(lps, lps[1:]):
        buffer = any("capacity-buffer" in p for p in su["pods"])
        if not vn["very_new"] or su["very_new"] or not su["ups"] or buffer:
            continue
        T = (su["t"] - t0) * factor
        st = [a for r in run["rows"].values() for a, b in r["spells"] if a <= T and (b is None or b > T)]
        if st:
            c = t0 + min(st) / factor - LAG_REAL
            fits = lambda end: vn["t"] < end <= su["t"] + 0.15
            out.append((fits(math.floor(c) + HOLD_REAL), fits(c + HOLD_REAL)))
    return out


def nodes(run, factor, slugs):
    """Each scale-up of a row matched to the row's next node the observer saw (within 60 s):
    decision -> the node object seen, decision -> kubelet's Ready (None if never)."""
    out = []
    for slug in slugs:
        row, seen, used = run["rows"][slug], {}, set()
        for e in row["evs"]:
            for name in (e["room"]["nodes"] if e["ev"] == "room" and e["room"] else []):
                seen.setdefault(name, e["t"])
        for _, T in ups_of(run, slug, factor):
            cand = [(t, n) for n, t in seen.items() if t >= T - 1 and n not in used]
            if cand:
                t, n = min(cand)
                used.add(n)
                if t - T <= 60:
                    r = run["ready"].get(n)
                    out.append((t - T, None if r is None else (r - row["t0"]) * factor - T))
    return out


def model_ready(path, factor, form, placement):
    """The simulator's node_ready_s for the PLACEMENT rows of FORM at FACTOR in RESULTS."""
    key = ("sim", placement, form, factor)
    v = {r["delays"]["node_ready_s"] for r in json.load(open(path, encoding="utf-8"))
         if (r.get("source"), r.get("placement"), r.get("form"), r.get("factor")) == key}
    return v.pop() if len(v) == 1 else None


def lifted_(u):
    """A scale-up sooner than the row's own rounded hold allows."""
    return u["real"] < u["own_hold"] - SLACK


def q(v):
    """p10/p50/p90 (mean)."""
    p = statistics.quantiles(v, n=10) if len(v) > 1 else [math.nan] * 9
    return f"{p[0]:.1f}/{p[4]:.1f}/{p[8]:.1f} (mean {statistics.fmean(v or [math.nan]):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="?", default="target/coldstart-logs")
    ap.add_argument("runs", nargs="?", default="0")
    ap.add_argument("--factor", type=float, default=15.0)
    ap.add_argument("--form", default="cycling")
    ap.add_argument("--results", default="bench/results/real-stack.json")
    ap.add_argument("--placement", default="most-allocated", choices=["most-allocated", "least-allocated"])
    ap.add_argument("--row", help="print each scale-up of this group (slug)")
    a = ap.parse_args()
    rows, slugs, every = rows_of(a.logs, int(a.runs.split(",")[0]), a.placement)
    f, ups, ends, nd = a.factor, [], [], []
    for n in a.runs.split(","):
        run = load(a.logs, int(n), f, every)
        these = scale_ups(run, f, slugs)
        for u in (u for u in these if u["slug"] == a.row):
            print(f"run {n} {a.row}: decision {u['at']:.0f}, Pending since {u['spell']:.0f}, own hold to"
                  f" {u['spell'] + u['own_hold']:.0f}: {'lifted' if lifted_(u) else 'held'}"
                  f"{', other rows in the salvo' if u['others'] else ''}")
        ups, ends = ups + these, ends + hold_ends(run, f)
        nd += nodes(run, f, slugs)
    print(f"{a.logs} runs {a.runs}, {a.placement}, factor {f:g}")
    print(f"{len(ups)} scale-ups of {', '.join(rows)}: the row's oldest Pending pod -> the decision, p10/p50/p90")
    for k, what in (("real", "real stack"), ("rule", "the simulator's former rule"),
                    ("rounded", "its rule now, from the creation's second")):
        print(f"  {what:52} {q([u[k] for u in ups])}")
    lifted = [u for u in ups if lifted_(u)]
    rest = [u for u in ups if not lifted_(u)]
    print(f"{len(lifted)} lifted (sooner than the row's own rounded hold): {q([u['real'] for u in lifted])};"
          f" {sum(u['others'] for u in lifted)} with other rows' pods in the salvo,"
          f" {sum(u['buffer'] for u in lifted)} the buffer's chunks")
    print(f"the other {len(rest)}: real {q([u['real'] for u in rest])}, rule {q([u['rule'] for u in rest])},"
          f" rounded {q([u['rounded'] for u in rest])}")
    print(f"{len(ends)} \"very new\" waits directly followed by a scale-up: the hold's end fits"
          f" floor(creation)+{HOLD_REAL:g} s in {sum(x for x, _ in ends)}, creation+{HOLD_REAL:g} s"
          f" in {sum(y for _, y in ends)}")
    ready = [r for _, r in nd if r is not None]
    m = model_ready(a.results, f, a.form, a.placement)
    print(f"{len(nd)} decisions -> node object seen {q([s for s, _ in nd])}; -> Ready ({len(ready)})"
          f" {q(ready)}; the model's mean {m}")


if __name__ == "__main__":
    main()
