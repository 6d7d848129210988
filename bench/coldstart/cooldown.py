"""Node removals held past their unneeded time by other node groups' scale-ups or drains.

python3 bench/coldstart/cooldown.py LOGS RUNS [UNNEEDED_S]  (e.g. target/coldstart-logs-ma-quiet
0,1,2,3,4 40; run from the repository root; UNNEEDED_S: the autoscaler's
--scale-down-unneeded-time in real seconds, 40 at factor 15)

Each removal in a run's autoscaler log (`runN-autoscaler.log`, "Scale-down: removing ... node"),
with how long its node had been unneeded ("X was unneeded for D"), is due once that time
reaches UNNEEDED_S. Unless the autoscaler runs with --scale-down-delay-type-local, a scale-up in
any node group holds every group's scale-down for --scale-down-delay-after-add
(`isScaleDownInCooldown`, core/static_autoscaler.go): a removal that came later than due, with
another group's scale-up between its node turning unneeded and its removal, was held by the rows
beside it. A node with pods to move is drained, at most --max-drain-parallelism (1) at a time over
the whole cluster (`ScaleDownBudgetProcessor`, core/scaledown/budgets): a drain that came later
than due while another group's drain was in progress ("removing node X, ..." until "All pods
removed from X") queued behind the rows beside it. Node groups are the bench's rows (a node's
name less its last part)."""
import collections
import re
import sys

from holds import clock


def duration(text):
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(v) * unit[u] for v, u in re.findall(r"([\d.]+)(h|ms|m|s)", text))


def group_of(node):
    """A node's group: its name less its last part."""
    return node.rsplit("-", 1)[0]


def removals(log, unneeded):
    """(group, late past due in real s, held by another group's scale-up, queued behind another
    group's drain) of each removal."""
    since, ups, out = {}, [], []
    drains = {}  # node -> [start, end] of its drain
    for line in open(log, encoding="utf-8"):
        if m := re.search(r"Scale-up: setting group (\S+) size", line):
            ups.append((clock(line), m[1]))
        elif m := re.search(r"\] (\S+) was unneeded for (\S+)", line):
            since[m[1]] = clock(line) - duration(m[2])
        elif m := re.search(r"All pods removed from (\S+)", line):
            if m[1] in drains:
                drains[m[1]][1] = clock(line)
        elif m := re.search(r'Scale-down: removing (empty )?node "?([^ ",]+)', line):
            node, at = m[2], clock(line)
            group = group_of(node)
            start = since.get(node, at - unneeded)
            held = any(start <= t <= at and g != group for t, g in ups)
            due = start + unneeded
            queued = not m[1] and any(
                group_of(n) != group and b < at and (e is None or e > due)
                for n, (b, e) in drains.items())
            if not m[1]:
                drains[node] = [at, None]
            out.append((group, at - due, held, queued))
    return out


def main():
    logs, runs = sys.argv[1], sys.argv[2]
    unneeded = float(sys.argv[3]) if len(sys.argv) > 3 else 40.0
    for r in runs.split(","):
        by = collections.defaultdict(list)
        for g, late, held, queued in removals(f"{logs}/run{r}-autoscaler.log", unneeded):
            by[g].append((late, held, queued))
        for g, v in sorted(by.items()):
            held = [late for late, h, _ in v if h and late > 1.0]
            queued = [late for late, _, q in v if q and late > 1.0]
            print(f"run {r} {g}: {len(v)} removals, held past due by other groups' scale-ups: "
                  f"{len(held)}" + (f" ({', '.join('%.1f s' % x for x in held)})" if held else "")
                  + f"; drains queued past due behind other groups' drains: {len(queued)}"
                  + (f" ({', '.join('%.1f s' % x for x in queued)})" if queued else ""))


if __name__ == "__main__":
    main()
