#!/usr/bin/env python3
"""How the agents of a real-stack run race for the PodDisruptionBudget (docs/peers.md, issue 45).

Agents that see a new node Ready in the same instant all post an eviction; the first takes the
one disruption the PDB allows, the others get a 429 ("the PodDisruptionBudget says not now") and
back off. For each refused move this prints when its agent decided ("moving: ...") against the
last eviction a sibling made before it ("evicted own pod"), in real seconds: an agent refused
after the winner's eviction had not seen it yet. The largest of these bounds how late the agents'
watch shows a sibling's going: the simulator's `--watch-delay` (the bench passes
`--watch-delay-s` times its factor).

    python3 bench/coldstart/race.py target/coldstart-logs/run*-new-node-*-agents.log
"""

import json
import sys
from datetime import datetime


def events(path):
    """(time, pod, message) of one bench log of every agent of a row, in time order."""
    out, pod = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("--- "):
                # --- ROW_PLACEHOLDER_UID_CONTAINER_N.log
                pod = line[4:].split("_")[1]
                continue
            if not line.startswith("{"):
                continue
            try:
                j = json.loads(line)
                t = datetime.fromisoformat(j["timestamp"].replace("Z", "+00:00")).timestamp()
            except (ValueError, KeyError):
                continue
            out.append((t, pod, j.get("message", "")))
    return sorted(out, key=lambda e: e[0])


def gaps(evs):
    """For each refused move: its decision's time after the last sibling's eviction before it
    (negative: it decided before that eviction was logged), real seconds."""
    wins = [(t, p) for t, p, m in evs if m.startswith("evicted own pod")]
    moves = [(t, p) for t, p, m in evs if m.startswith("moving:")]
    out = []
    for t, p, m in evs:
        if not m.startswith("the PodDisruptionBudget says not now"):
            continue
        decided = max((x for x, q in moves if q == p and x <= t), default=None)
        won = max((x for x, q in wins if q != p and x <= t), default=None)
        if decided is not None and won is not None:
            out.append(decided - won)
    return out


def main(paths):
    everything = []
    for path in paths:
        evs = events(path)
        g = gaps(evs)
        moves = sum(1 for _, _, m in evs if m.startswith("moving:"))
        after = sorted(x for x in g if x >= 0)
        print(
            f"{path}: {moves} moves decided, {len(g)} refused; decided after the winner's eviction"
            f" (s): {', '.join(f'{x:.3f}' for x in after) or 'none'}"
        )
        everything += g
    # Within a second: a later refusal is another node's race, its winner not logged here.
    after = sorted(x for x in everything if 0 <= x < 1)
    if after:
        print(
            f"all: {len(everything)} refused, {len(after)} decided 0-1 s after the winner's"
            f" eviction: p50 {after[len(after) // 2]:.3f} s, max {after[-1]:.3f} s"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
