#!/usr/bin/env python3
"""How long each node group waited for its scale-up in the cluster-autoscaler's log.

The autoscaler resizes one node group per loop ("Best option to resize", then "Final scale-up
plan" of that group only: cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go). The
bench runs every row x placement as its own node group under one autoscaler, so groups that need
a node at the same moment (the same trace) queue behind each other. For each scale-up of group G
this prints how long before it a pod of G (a user, a placeholder or a buffer's injected chunk,
all in namespace G) was first listed as unschedulable since G's previous scale-up: the wait, in
simulated seconds (x FACTOR). Usage: queue.py AUTOSCALER.LOG FACTOR.
"""
import re
import sys
from datetime import datetime

log, factor = sys.argv[1], float(sys.argv[2])
t_re = re.compile(r"^[IWE]\d{4} (\d\d:\d\d:\d\d\.\d+)")
unsched = re.compile(r"Pod ([^/ ]+)/\S+ is unschedulable")
scale = re.compile(r"Scale-up: setting group (\S+) size to (\d+)")
salvo_groups = []  # node groups resized in each salvo (--salvo-scale-up)
in_salvo = None
first_seen = {}  # group -> first unschedulable since its last scale-up
waits = {}
for line in open(log, errors="replace"):
    m = t_re.match(line)
    if not m:
        continue
    t = datetime.strptime(m.group(1), "%H:%M:%S.%f")
    t = t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6
    if "Starting scale up salvo" in line:
        in_salvo = set()
    elif "Finished scale up salvo" in line and in_salvo is not None:
        salvo_groups.append(len(in_salvo))
        in_salvo = None
    u = unsched.search(line)
    if u:
        first_seen.setdefault(u.group(1), t)
        continue
    s = scale.search(line)
    if s:
        g = s.group(1)
        if in_salvo is not None:
            in_salvo.add(g)
        if g in first_seen:
            waits.setdefault(g, []).append((t - first_seen.pop(g)) * factor)


def q(v, p):
    v = sorted(v)
    return v[round((len(v) - 1) * p)] if v else 0


allw = [w for v in waits.values() for w in v]
print(f"scale-ups {len(allw)}" + (f"; salvos {len(salvo_groups)}, groups resized in one: max "
      f"{max(salvo_groups)}" if salvo_groups else "; no salvo (one node group a loop)"))
print(f"wait (simulated s) from a group's first unschedulable pod to its scale-up: "
      f"p50 {q(allw, .5):.0f}, p90 {q(allw, .9):.0f}, max {q(allw, 1):.0f}")
for g, v in sorted(waits.items()):
    print(f"  {g:18} n {len(v):2}  p50 {q(v, .5):5.0f}  p90 {q(v, .9):5.0f}  max {q(v, 1):5.0f}")
