"""Which placeholder a user's preemption took, against the scheduler's two rules.

python3 bench/coldstart/victims.py LOGS RUNS ROW  (e.g. target/coldstart-logs-ma-quiet 0,1,2
static-pin-ma; run from the repository root)

From each run's kubelet log (`runN-kubelet.log`): every placeholder of ROW that went while it
ran is a victim (the `+pin` and static rows are never drained, so each going is a preemption),
and the placeholders then running are the candidates, each with its start second (the API keeps
`status.startTime` in whole seconds; the stand-in kubelet stamps it when it first sees the pod).

- "newest": the node whose newest placeholder started last gives that one (the simulator's rule:
  `pickOneNodeForPreemption`'s latest start among equal victims, the newest reprieved last);
- "budget": with a disruption the PodDisruptionBudget allows, the node whose *oldest* placeholder
  started last gives that one (`filterPodsWithPDBViolation` in `SelectVictimsOnNode`, plugins/
  defaultpreemption/default_preemption.go: the victims that would not violate the budget are
  reprieved last, and the first one in start order does not).

Counted apart by how many of the set ran (all of them: the budget allows one; fewer: none).
Ties within a second count for both rules."""
import collections
import re
import sys

from holds import clock


def victims(log, row):
    """(running before, fits newest, fits budget) of each victim in one kubelet log."""
    pat = re.compile(r"^\S+ pod " + re.escape(row)
                     + r"/placeholder-\d+ \((\S+)\)(?: on (\S+): | )(pending|is gone)")
    running, out = {}, []
    for line in open(log, encoding="utf-8"):
        m = pat.match(line)
        if not m:
            continue
        t, (uid, node, what) = clock(line), m.groups()
        if what == "pending":
            running[uid] = (node, int(t))
            continue
        if uid not in running:
            continue
        vnode, vstart = running[uid]
        per = collections.defaultdict(list)
        for n, s in running.values():
            per[n].append(s)
        newest = {n: max(v) for n, v in per.items()}
        oldest = {n: min(v) for n, v in per.items()}
        fits_newest = newest[vnode] == max(newest.values()) and vstart == newest[vnode]
        fits_budget = oldest[vnode] == max(oldest.values()) and vstart == oldest[vnode]
        out.append((len(running), fits_newest, fits_budget))
        del running[uid]
    return out


def main():
    logs, runs, row = sys.argv[1], sys.argv[2], sys.argv[3]
    every = [v for r in runs.split(",") for v in victims(f"{logs}/run{r}-kubelet.log", row)]
    replicas = max((n for n, *_ in every), default=0)
    for label, keep in (("all running (a disruption allowed)", lambda n: n == replicas),
                        ("fewer running (none allowed)", lambda n: n < replicas)):
        c = collections.Counter(("both" if a and b else "newest" if a else "budget" if b else "neither")
                                for n, a, b in every if keep(n))
        print(f"{row}, {label}: {sum(c.values())} victims; fit both rules {c['both']}, only the newest "
              f"{c['newest']}, only the budget's {c['budget']}, neither {c['neither']}")


if __name__ == "__main__":
    main()
