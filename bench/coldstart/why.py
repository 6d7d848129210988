#!/usr/bin/env python3
"""Why each user started cold, on the real stack and in the simulator, user by user.

Reads the bench's per-group log (target/coldstart-logs/runN-SLUG-why.jsonl: every change of
each node's room, every placeholder binding, every user binding with the room the observer saw
then) and the simulator's users of the same trace (target/coldstart-sim-users-PLACEMENT.json,
`simulate --users-out`). Usage: why.py RUN SLUG ROW PLACEMENT [LOGS [SIMUSERS]] (e.g. why.py 0 buffer-ma buffer
most-allocated; LOGS defaults to target/coldstart-logs, SIMUSERS to
target/coldstart-sim-users-PLACEMENT.json). Times are simulated seconds of the trace's day.
"""
import json
import sys

run, slug, row, placement = sys.argv[1:5]
logs = sys.argv[5] if len(sys.argv) > 5 else "target/coldstart-logs"
simfile = sys.argv[6] if len(sys.argv) > 6 else f"target/coldstart-sim-users-{placement}.json"
evs = [json.loads(l) for l in open(f"{logs}/run{run}-{slug}-why.jsonl")]
sim = {r["row"]: r for r in json.load(open(simfile))}[row]
snodes = {n["name"]: n for n in sim["nodes"]}


def room_summary(room):
    """Free slots on warm Ready nodes, on cold Ready nodes, on booting nodes; pending."""
    if not room:
        return None
    w = c = b = 0
    soft = []
    for name, (warm, ready, free, users, phs, s) in room["nodes"].items():
        if not ready:
            b += max(free, 0)
        elif warm:
            w += max(free, 0)
        else:
            c += max(free, 0)
        if s:
            soft.append(name)
    return {"warm": w, "cold_ready": c, "booting": b, "pending_users": room["pending"][0],
            "pending_ph": room["pending"][1], "soft": soft}


# Node first seen, Ready and warm, from the room log.
seen, ready_at, warm_at, gone_at = {}, {}, {}, {}
for e in evs:
    if e["ev"] == "room" and e["room"]:
        for name, (warm, ready, *_rest) in e["room"]["nodes"].items():
            seen.setdefault(name, e["t"])
            if ready:
                ready_at.setdefault(name, e["t"])
            if warm:
                warm_at.setdefault(name, e["t"])
        for name in seen:
            if name not in e["room"]["nodes"]:
                gone_at.setdefault(name, e["t"])
# The room just before each time, to find the trigger of a node: the last time the free room
# on Ready and booting nodes fell below the buffer (4 chunks) or a pod went Pending before it.
rooms = [(e["t"], room_summary(e["room"])) for e in evs if e["ev"] == "room" and e["room"]]


def trigger(t_node):
    last = None
    for t, r in rooms:
        if t >= t_node:
            break
        short = r["warm"] + r["cold_ready"] + r["booting"] < 4 or r["pending_users"] or r["pending_ph"]
        if short and last is None:
            last = t
        if not short:
            last = None
    return last


binds = [e for e in evs if e["ev"] == "bind"]
if len(sim["users"]) < len(binds):
    sys.exit(f"{simfile} holds {len(sim['users'])} users of row {row}, the real run bound {len(binds)}: "
             "not the same trace (re-run the bench's simulator side of this form, `--sim-only`)")
cold = [e for e in binds if e["cold"]]
print(f"real run {run} {slug}: {len(binds)} users bound, {len(cold)} cold; sim {row}: "
      f"{sum(u['cold'] for u in sim['users'])} cold")
sim_cold = {i for i, u in enumerate(sim["users"]) if u["cold"]}
real_cold = {int(e["user"].split("-")[1]) for e in cold}
print(f"cold in both: {sorted(real_cold & sim_cold)}")
print(f"cold only real: {sorted(real_cold - sim_cold)}")
print(f"cold only sim: {sorted(sim_cold - real_cold)}")
print()
print("real cold users: t bound, waited (s), node, node seen -> ready, its trigger, room at bind")
for e in cold:
    i = int(e["user"].split("-")[1])
    r = room_summary(e["room"])
    trig = trigger(e["node_seen"]) if e["node_seen"] is not None else None
    print(f"  user-{i:03} t={e['t']:.0f} waited {e['t'] - (e['created'] or e['t']):.0f} node {e['node']} "
          f"seen {e['node_seen']} ready {e['node_ready']} trigger {trig} room {r} taints {e['taints']}"
          f" | sim: cold={sim['users'][i]['cold']} node {sim['users'][i]['node']}")
print()
print("sim users that were cold only on the real stack: what the sim did")
for i in sorted(real_cold - sim_cold):
    u = sim["users"][i]
    n = snodes.get(u["node"], {})
    print(f"  user-{i:03} arrival {u['arrival']:.0f} bound {u['bound']:.0f} node {u['node']} "
          f"(created {n.get('created')}, ready {n.get('ready')}, image {n.get('image')}) "
          f"delayed {u['delayed']} preempted {u['preempted']}")
print()
print("nodes in order of creation: real seen / Ready / warm / gone (its trigger) against sim created / Ready / warm / removed")
real_nodes = sorted(seen.items(), key=lambda x: x[1])
for k in range(max(len(real_nodes), len(sim["nodes"]))):
    r = real_nodes[k] if k < len(real_nodes) else None
    m = sim["nodes"][k] if k < len(sim["nodes"]) else None
    rs = (f"{r[0]} {r[1]:.0f} / {ready_at.get(r[0], 0):.0f} / {warm_at.get(r[0], 0):.0f} / {gone_at.get(r[0])} (trigger {trigger(r[1])})"
          if r else "-")
    ms = f"{m['name']} {m['created']:.0f} / {m['ready']:.0f} / {m['image']:.0f} / {m['removed']}" if m else "-"
    lag = ""
    if r and m and k > 0:
        lag = (f"  real-sim: seen {r[1] - m['created']:+.0f} ready {ready_at.get(r[0], 0) - m['ready']:+.0f}"
               f" warm {warm_at.get(r[0], 0) - m['image']:+.0f}")
    print(f"  {k:2} {rs:60} | {ms}{lag}")
phb = [e for e in evs if e["ev"] == "ph_bind"]
if phb:
    print()
    print("placeholder bindings: t, pod, node, warm, taints")
    for e in phb:
        print(f"  t={e['t']:.0f} {e['pod']} -> {e['node']} warm={e['warm']} {e['taints']}")
