#!/usr/bin/env python3
"""Of the users cold only on the real stack, how many were bound to a node that came late.

Runs why.py on every run of the `new-node` and `buffer` rows, in both placements, of the last
full matrix (its logs in target/coldstart-logs, the simulator's users in
target/coldstart-sim-users-PLACEMENT.json), and counts the users cold on the real stack but not
in the simulator whose node registered at least LATE simulated seconds (default 30) after the
simulator's node of the same order. Usage: late.py [RUNS [LATE]] (RUNS defaults to 3).
"""
import re
import subprocess
import sys
from pathlib import Path

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
late_s = int(sys.argv[2]) if len(sys.argv) > 2 else 30
why = Path(__file__).with_name("why.py")
total_only = total_late = 0
for row in ["new-node", "buffer"]:
    for placement, suffix in [("most-allocated", "ma"), ("least-allocated", "la")]:
        for run in range(runs):
            args = [sys.executable, str(why), str(run), f"{row}-{suffix}", row, placement]
            out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
            found = re.search(r"cold only real: \[(.*)\]", out)
            only = [int(u) for u in found.group(1).split(",") if u.strip()] if found else []
            node_of = {int(m[1]): m[2] for m in re.finditer(r"user-(\d+) t=\S+ waited \S+ node (\S+)", out)}
            seen = {m[1]: int(m[2]) for m in re.finditer(r"^\s*\d+ (\S+) .*real-sim: seen ([+-]\d+)", out, re.M)}
            late = [u for u in only if seen.get(node_of.get(u), 0) >= late_s]
            print(f"{row} {placement} run {run}: {len(only)} cold only on the real stack, {len(late)} on a late node")
            total_only += len(only)
            total_late += len(late)
print(f"all: {total_only} cold only on the real stack, {total_late} bound to a node >= {late_s} s late")
