#!/usr/bin/env python3
"""Why pinned static placeholders keep more nodes: each row's nodes from its room log.

Reads LOGS/runN-SLUG-why.jsonl (the bench's per-group log: every change of each node's room,
every placeholder and user binding) and prints, per row and run:
- nodes on average (time-weighted), those holding placeholders, those holding placeholders only;
- nodes made and removed;
- the placeholder bindings: how many went to a node without users, how many had free room both on
  nodes with users and on nodes without, and in how many of those LeastAllocated alone (the most
  free slots) would have taken a node with users where the real scheduler took one without.

    python3 bench/coldstart/pinned.py [LOGS] [RUNS] [SLUGS] [AT]

LOGS defaults to target/coldstart-logs, RUNS (e.g. 0,1,2,3,4) to 0, SLUGS to
static-ma,static-pin-ma,new-node-ma. With AT (simulated s), also each node's placeholders at that
time, oldest node first. Room entries: name -> (warm, ready, free, users,
placeholders, soft-tainted).
"""
import json
import sys

logs = sys.argv[1] if len(sys.argv) > 1 else "target/coldstart-logs"
runs = [int(r) for r in (sys.argv[2] if len(sys.argv) > 2 else "0").split(",")]
slugs = (sys.argv[3] if len(sys.argv) > 3 else "static-ma,static-pin-ma,new-node-ma").split(",")
at = float(sys.argv[4]) if len(sys.argv) > 4 else None

for slug in slugs:
    binds = to_no_users = choice = decided = 0
    for run in runs:
        evs = [json.loads(line) for line in open(f"{logs}/run{run}-{slug}-why.jsonl")]
        rooms = [(e["t"], e["room"]) for e in evs if e["ev"] == "room" and e["room"]]
        span = acc_n = acc_ph = acc_only = 0.0
        for (t, room), (t2, _) in zip(rooms, rooms[1:]):
            dt = t2 - t
            span += dt
            nodes = room["nodes"].values()
            acc_n += dt * len(room["nodes"])
            acc_ph += dt * sum(1 for v in nodes if v[4] > 0)
            acc_only += dt * sum(1 for v in nodes if v[4] > 0 and v[3] == 0)
        seen, gone, prev = set(), set(), set()
        for _, room in rooms:
            cur = set(room["nodes"])
            seen |= cur
            gone |= prev - cur
            prev = cur
        print(f"{slug} run {run}: nodes {acc_n / span:.2f}, with placeholders {acc_ph / span:.2f}, "
              f"placeholders only {acc_only / span:.2f}; made {len(seen)}, removed {len(gone)}")
        if at is not None:
            then = [room for t, room in rooms if t <= at][-1]["nodes"]
            order = {n: i for i, n in enumerate(dict.fromkeys(n for _, r in rooms for n in r["nodes"]))}
            print(f"  at {at:g} s, placeholders a node (oldest first): "
                  + ", ".join(str(then[n][4]) for n in sorted(then, key=order.get)))
        room = None
        for e in evs:
            if e["ev"] == "room" and e["room"]:
                room = e["room"]["nodes"]
            elif e["ev"] == "ph_bind" and room and e["t"] > 5 and e["node"] in room:
                binds += 1
                to_no_users += room[e["node"]][3] == 0
                free = {n: v for n, v in room.items() if v[1] and v[2] > 0}
                if any(v[3] > 0 for v in free.values()) and any(v[3] == 0 for v in free.values()):
                    choice += 1
                    most_free = max(free.values(), key=lambda v: v[2])
                    decided += most_free[3] > 0 and room[e["node"]][3] == 0
    print(f"{slug}: {binds} placeholder bindings after the start, {to_no_users} to a node without "
          f"users; {choice} with free room on both kinds, in {decided} of them LeastAllocated alone "
          "would have taken a node with users")
