#!/usr/bin/env python3
"""Folds runs the bench printed but never wrote into its results file.

The bench writes `bench/results/real-stack.json` when all its runs are done; a matrix stopped
part-way leaves its finished runs in its log only ("coldstart run N SLUG: users .. cold .."
lines). This adds those runs to the real entries of the same form and placement, as the runs
before the file's own:

    python3 bench/coldstart/fold-log.py LOG --form cycling [--results FILE]

From the log it takes what the log line holds: cold starts, waits, node-hours, evictions,
preemptions, unbound users and the run's wall time and load average. The users' wait
quantiles, user-minutes, landings and lags stay the file's own runs'; each folded entry says
so (`folded_runs`, `runs_with_wait_quantiles`). The simulator's side is unchanged (it was run
with the file's runs' measured delays).
"""

import argparse
import json
import re
import sys

RUN = re.compile(r"^coldstart run (\d+): ([\d.]+) min wall, load average ([\d.]+) -> ([\d.]+)")
ROW = re.compile(
    r"^coldstart run (\d+) (\S+): users (\d+) cold (\d+) waited (\d+) unbound (\d+) "
    r"node-h ([\d.]+) evictions (\d+) preemptions (\d+)"
)
SHORT = {"most-allocated": "ma", "least-allocated": "la"}


HEAD = re.compile(r"^coldstart: \d+ launches over ([\d.]+) simulated minutes")


def parse(lines):
    """The log's measured window (hours), its runs' wall times and loads, and its rows' counts."""
    window_h, loads, rows = None, {}, {}
    for line in lines:
        m = HEAD.match(line)
        if m:
            window_h = float(m[1]) / 60
            continue
        m = RUN.match(line)
        if m:
            run = int(m[1])
            loads[run] = {"run": run, "wall_min": float(m[2]),
                          "loadavg_start": float(m[3]), "loadavg_end": float(m[4])}
            continue
        m = ROW.match(line)
        if m:
            rows.setdefault(m[2], {})[int(m[1])] = {
                "users": int(m[3]), "cold": int(m[4]), "waited": int(m[5]),
                "unbound": int(m[6]), "node_hours": float(m[7]), "evictions": int(m[8]),
                "preemptions": int(m[9])}
    return window_h, loads, rows


def fold(entry, runs, loads, window_h):
    """Puts `runs` (run -> counts, in run order) before the entry's own runs."""
    n_old = entry["runs"]
    order = sorted(runs)
    per = entry["per_run"]
    mean_of = {k: entry[k] for k in ("users", "preemptions", "unbound_at_end")}
    per["cold"] = [float(runs[r]["cold"]) for r in order] + per["cold"]
    per["waited"] = [float(runs[r]["waited"]) for r in order] + per["waited"]
    per["node_hours"] = [round(runs[r]["node_hours"], 2) for r in order] + per["node_hours"]
    per["evictions_per_hour"] = [
        round(runs[r]["evictions"] / window_h, 2) for r in order] + per["evictions_per_hour"]
    n = len(per["cold"])
    for key, field in (("users", "users"), ("preemptions", "preemptions"),
                       ("unbound_at_end", "unbound")):
        entry[key] = (sum(runs[r][field] for r in order) + mean_of[key] * n_old) / n
    entry["cold"] = sum(per["cold"]) / n
    entry["waited"] = sum(per["waited"]) / n
    entry["node_hours"] = round(sum(per["node_hours"]) / n, 2)
    entry["evictions_per_hour"] = round(sum(per["evictions_per_hour"]) / n, 2)
    entry["spread"] = {"cold": [min(per["cold"]), max(per["cold"])],
                       "waited": [min(per["waited"]), max(per["waited"])]}
    # The file's runs are renumbered after the folded ones.
    own = [dict(l, run=l["run"] + len(order)) for l in entry.get("load", [])]
    entry["load"] = [loads[r] for r in order if r in loads] + own
    entry["wall_min"] = round(entry.get("wall_min", 0) + sum(
        loads[r]["wall_min"] for r in order if r in loads), 2)
    entry["runs"] = n
    entry["folded_runs"] = len(order)
    entry["runs_with_wait_quantiles"] = n_old


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--form", required=True)
    ap.add_argument("--results", default="bench/results/real-stack.json")
    a = ap.parse_args()
    with open(a.log) as f:
        window_h, loads, rows = parse(f)
    if not rows or window_h is None:
        sys.exit(f"{a.log}: no header or no run lines")
    with open(a.results) as f:
        results = json.load(f)
    folded = 0
    for entry in results:
        if entry.get("form") != a.form or entry.get("source") != "real":
            continue
        if entry.get("folded_runs"):
            sys.exit(f"{entry['row']} {entry['placement']}: already folded")
        slug = f"{entry['row'].replace('+', '-')}-{SHORT[entry['placement']]}"
        if slug not in rows:
            continue
        fold(entry, rows[slug], loads, window_h)
        folded += 1
        print(f"{slug}: {len(rows[slug])} runs folded, {entry['runs']} in all, "
              f"cold {entry['per_run']['cold']}")
    if not folded:
        sys.exit("no entry of the log's rows in the results file")
    with open(a.results, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
