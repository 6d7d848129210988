"""Markdown tables of bench/results/real-stack.json (docs/benchmarks.md, docs/peers.md):
python3 bench/coldstart/table.py [FORM]  (run from the repository root; FORM: quick, full,
cycling, binder, class, peers, readme, peers-cycling, readme-cycling or decision-cycling;
RESULTS=FILE reads another results file)."""
import json, os, sys

form = sys.argv[1] if len(sys.argv) > 1 else "quick"
# "peers": docs/peers.md's one table of cold starts (both placements side by side), full form.
peers = form == "peers"
# "readme": the README's one sentence of real-stack figures, full form.
readme = form == "readme"
# "peers-cycling", "readme-cycling": the same of the cycling form.
cycling_doc = form in ("peers-cycling", "readme-cycling", "decision-cycling")
form = "full" if peers or readme else "cycling" if cycling_doc else form
rows = ["static", "new-node", "new-node+avoid-candidates", "new-node+pin", "static+pin", "gate",
        "gate+new-node", "buffer", "buffer+gate"]
PLACEMENTS = ["most-allocated", "least-allocated"]
data = [r for r in json.load(open(os.environ.get("RESULTS", "bench/results/real-stack.json")))
        if r.get("form") == form]


def cell(p, row, src):
    return next((r for r in data if r["placement"] == p and r["row"] == row and r["source"] == src), None)


def fmt(x):
    return "-" if x is None else ("%g" % round(x, 2))




def waits(r):
    """The users' own wait, created → Ready: p50 / p90 / p99."""
    if not r or "ready_s" not in r:
        return "-"
    return " / ".join(fmt(r["ready_s"][k]) for k in ("p50", "p90", "p99"))


def ratio(p, row):
    """The real ratio to static and the simulator's, each with its range over the runs (each
    run's row against the same run's static; the simulator's seeds likewise)."""
    out = []
    for src in ["real", "sim"]:
        r, st = cell(p, row, src), cell(p, "static", src)
        rr = fmt(r["cold"] / st["cold"]) if r and st and st["cold"] else "-"
        if r and st and row != "static" and r["cold"] and len(r["per_run"]["cold"]) > 1 and all(st["per_run"]["cold"]):
            q = [a / b for a, b in zip(r["per_run"]["cold"], st["per_run"]["cold"])]
            rr += " (%g-%g)" % (round(min(q), 2), round(max(q), 2))
        out.append(rr)
    return out


def runs(r):
    """A count's mean and, over several runs, its range."""
    if not r:
        return "-"
    v = r["per_run"]["cold"]
    return fmt(round(r["cold"], 1)) + (" (%g-%g)" % (min(v), max(v)) if len(v) > 1 and min(v) != max(v) else "")


def within(p, row):
    """The real mean inside the simulator's seed range: "yes", else how far outside."""
    r, s = cell(p, row, "real"), cell(p, row, "sim")
    if not r or not s:
        return "-"
    lo, hi = s["spread"]["cold"]
    c = r["cold"]
    return "yes" if lo <= c <= hi else ("%+g" % round(c - (hi if c > hi else lo), 1))


def beats_static(p, row):
    """In how many real runs the row had fewer cold starts than static in the same run."""
    r, st = cell(p, row, "real"), cell(p, "static", "real")
    if not r or not st or row == "static":
        return "-"
    pairs = list(zip(r["per_run"]["cold"], st["per_run"]["cold"]))
    return "%d of %d" % (sum(a < b for a, b in pairs), len(pairs))


def landed(r, key):
    """Where the successors went, over all runs: new / old / pending (brought a node)."""
    l = (r or {}).get("landed", {}).get(key)
    if not l:
        return "-"
    if "old" not in l:  # the simulator's: on the target node of all (moves), a seed (drains)
        if key == "moved":
            return "%g of %g" % (sum(l.get("new", l["all"])), sum(l["all"]))
        return fmt(sum(l["all"]) / len(l["all"]))
    n = len(l["all"])
    mean = lambda k: fmt(sum(l[k]) / n)
    return f"{mean('new')} / {mean('old')} / {mean('pending')} ({mean('brought')})"


def placements_table(columns, cells_of, shown):
    """One table of both placements side by side: a row per bench row, `columns` for each
    placement (`cells_of(placement, row)`), the rows `shown(row, cells)` keeps."""
    head = [f"{p}: {columns[0]}" if i == 0 else c for p in PLACEMENTS for i, c in enumerate(columns)]
    print("| row | " + " | ".join(head) + " |")
    print("|---|" + "--:|" * len(head))
    for row in rows:
        cells = [c for p in PLACEMENTS for c in cells_of(p, row)]
        if shown(row, cells):
            print(f"| {row} | " + " | ".join(cells) + " |")


def class_table():
    """The class form: per row its lead time, cold starts, the users' wait, node-hours, when the
    calendar controller raised the count, and the room each run had at the bell (the bench's
    own warm-by look; the controller's WarmBy Events when its binary posts them), and each run's
    load average."""
    def lead(r):
        l = (r or {}).get("class", {}).get("lead_s")
        return "flat" if l is None else ("%gm" % (l / 60) if l % 60 == 0 else "%gs" % l)

    def raised(r):
        out = []
        for run in r["class"]["per_run"] if r else []:
            up = [e["t_s"] for e in (run or {}).get("scaled", []) if "-> %d" % r["class"]["count"] in (e["note"] or "")]
            out.append("%g" % -up[0] if up and up[0] is not None else "-")
        return ", ".join(out) or "-"

    def looked(r, at):
        out = []
        for run in r["class"]["per_run"] if r else []:
            l = next((x["look"] for x in (run or {}).get("looks", []) if x["at"] == at), None)
            if l:
                out.append("%s/%s/%s" % (l["placeholders_ready"], l["on_warm_nodes"], l["room_on_warm_nodes"]))
        return ", ".join(out) or "-"

    def warm_by(r):
        notes = [e["note"] for run in (r["class"]["per_run"] if r else []) for e in (run or {}).get("warm_by", [])]
        return "; ".join(notes)

    names = sorted({r["row"] for r in data}, key=lambda n: (lead(cell("most-allocated", n, "real") or cell("most-allocated", n, "sim")) != "flat", "buffer" in n, n))
    for p in PLACEMENTS:
        if not any(r["placement"] == p for r in data):
            continue
        print(f"\n{p} (class):\n")
        print("| row | lead | cold real (runs) | cold sim (seeds) | wait p50 / p90 / p99 real | sim | user-min real | sim | node-h real | sim | raised, s before the bell | at the bell: ready / on warm / room on warm | 5 min before |")
        print("|---|---|---|---|---|---|--:|--:|--:|--:|---|---|---|")
        for row in names:
            r, s = cell(p, row, "real"), cell(p, row, "sim")
            if not r and not s:
                continue
            print(f"| {row} | {lead(r or s)} | {runs(r)} | {runs(s) if s else 'none'} | {waits(r)} | {waits(s)} | "
                  f"{fmt(r and r.get('user_minutes'))} | {fmt(s and s.get('user_minutes'))} | {fmt(r and r['node_hours'])} | "
                  f"{fmt(s and s['node_hours'])} | {raised(r) if lead(r) != 'flat' else '-'} | {looked(r, 'bell')} | {looked(r, 'margin')} |")
        notes = [(row, warm_by(cell(p, row, "real"))) for row in names]
        for row, n in notes:
            if n:
                print(f"\n{row}: the controller's WarmBy Events: {n}")
        loads = next((r["load"] for r in data if r["placement"] == p and r.get("load")), [])
        if loads:
            print("\nload average, each run start → end: "
                  + ", ".join("%g → %g" % (l["loadavg_start"], l["loadavg_end"]) for l in loads))


if form == "class":
    class_table()
    sys.exit(0)

if cycling_doc and sys.argv[1] == "decision-cycling":
    # docs/decision.md: the policies tried on the real stack, each run's cold starts beside
    # static's in the same run.
    policies = {"static": "static `pause` placeholders",
                "new-node": "move to a new node (the default)",
                "new-node+avoid-candidates": "not to a node with the autoscaler's soft deletion-candidate taint",
                "new-node+pin": "move, on nodes the autoscaler may not drain (`safe-to-evict: false`)",
                "static+pin": "static, on nodes the autoscaler may not drain"}
    for p in PLACEMENTS:
        st = cell(p, "static", "real")
        if not st:
            continue
        print(f"\n{p} (cycling):\n")
        print("| policy | what it does | cold, each run | mean | sim (seeds) | fewer than static | node-h | evict/h | user-min |")
        print("|---|---|---|--:|--:|--:|--:|--:|--:|")
        for row, what in policies.items():
            r, s_ = cell(p, row, "real"), cell(p, row, "sim")
            if not r:
                continue
            each = ", ".join("%g" % c for c in r["per_run"]["cold"])
            um = r["per_run"].get("user_minutes")
            print(f"| {row} | {what} | {each} | {fmt(round(r['cold'], 1))} | {runs(s_)} | {beats_static(p, row)} | "
                  f"{fmt(r['node_hours'])} | {fmt(r['evictions_per_hour'])} | {fmt(um and round(sum(um) / len(um), 1))} |")
    sys.exit(0)

if cycling_doc and sys.argv[1] == "readme-cycling":
    def cold(row):
        return " and ".join(fmt(round(cell(p, row, "real")["cold"], 1)) for p in PLACEMENTS if cell(p, row, "real"))

    def beats(row):
        return " and ".join(beats_static(p, row) for p in PLACEMENTS if cell(p, row, "real"))

    # Pinned static is left out: side by side its count is the bench's coupling (docs/peers.md),
    # and the README quotes it from the runs with the rows apart.
    print(f"static {cold('static')} cold starts, `new-node` {cold('new-node')} (fewer than static in "
          f"{beats('new-node')} runs), `new-node+pin` {cold('new-node+pin')} ({beats('new-node+pin')}), "
          f"the buffer {cold('buffer')}, the gate rows 0")
    sys.exit(0)

if cycling_doc:
    placements_table(["real (runs)", "sim (seeds)", "within", "fewer than static"],
                     lambda p, row: [runs(cell(p, row, "real")), runs(cell(p, row, "sim")),
                                     within(p, row), beats_static(p, row)],
                     lambda row, cells: any(c != "-" for c in cells))
    sys.exit(0)

if readme:
    # The README's sentence of real-stack figures (tests/bench_docs.rs checks the README holds it).
    def both(row, src, f):
        return " and ".join(fmt(f(cell(p, row, src), cell(p, "static", src))) for p in PLACEMENTS)

    def cold(row):
        return both(row, "real", lambda r, s: round(r["cold"], 1))

    def rat(row, src):
        return both(row, src, lambda r, s: r["cold"] / s["cold"])

    def waited(row):
        return both(row, "real", lambda r, s: round(r["waited"], 1))

    print(f"the buffer {cold('buffer')} cold starts ({rat('buffer', 'real')} of static's {cold('static')}; "
          f"the simulator {rat('buffer', 'sim')}), `new-node` {cold('new-node')} ({rat('new-node', 'real')}; "
          f"the simulator {rat('new-node', 'sim')}), the gate rows 0, with {waited('gate')} users waited "
          f"against static's {waited('static')} and the buffer's {waited('buffer')}")
    sys.exit(0)

if peers:
    placements_table(["real", "sim", "ratio real", "ratio sim"],
                     lambda p, row: [fmt(cell(p, row, "real") and round(cell(p, row, "real")["cold"], 1)),
                                     runs(cell(p, row, "sim")), *ratio(p, row)],
                     lambda row, cells: any(cell(p, row, "real") for p in PLACEMENTS))
    sys.exit(0)

for p in PLACEMENTS:
    if not any(r["placement"] == p for r in data):
        continue
    print(f"\n{p} ({form}):\n")
    print("| row | cold real (runs) | cold sim | cold/static real | cold/static sim | waited real | waited sim | node-h real | node-h sim | evict/h real | evict/h sim |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    order = {}
    for row in rows:
        r, s = cell(p, row, "real"), cell(p, row, "sim")
        if not r and not s:
            continue
        spread = ", ".join("%g" % c for c in (r["per_run"]["cold"] if r else []))
        ratio_r, ratio_s = ratio(p, row)
        print(f"| {row} | {fmt(r and r['cold'])} ({spread}) | {runs(s)} | {ratio_r} | {ratio_s} | "
              f"{fmt(r and r['waited'])} | {fmt(s and s['waited'])} | {fmt(r and r['node_hours'])} | {fmt(s and s['node_hours'])} | "
              f"{fmt(r and r['evictions_per_hour'])} | {fmt(s and s['evictions_per_hour'])} |")
        order[row] = (r and r["cold"], s and s["cold"])
    real = sorted([k for k in order if order[k][0] is not None], key=lambda k: order[k][0])
    sim = sorted([k for k in order if order[k][1] is not None], key=lambda k: order[k][1])
    print("\norder by cold starts, real: " + " ≤ ".join(f"{k} {fmt(order[k][0])}" for k in real))
    print("order by cold starts, sim:  " + " ≤ ".join(f"{k} {fmt(order[k][1])}" for k in sim))
    if form in ("cycling", "binder"):
        print(f"\n{p} ({form}): the users' own wait (created → Ready, simulated s, all runs or seeds), "
              "the user-minutes it cost (mean a run), the real mean inside the simulator's seed range, "
              "the runs with fewer cold starts than static, and where the successors of moved, preempted "
              "and drained placeholders landed (mean a run: new / old node / pending (of which it brought "
              "a node); sim: moves landed on their target of all, drains a seed):\n")
        print("| row | wait p50 / p90 / p99 real | sim | user-min real | sim | within | fewer than static | moved | moved sim | preempted | drained | drained sim |")
        print("|---|---|---|--:|--:|--:|--:|---|---|---|---|--:|")
        for row in rows:
            r, s = cell(p, row, "real"), cell(p, row, "sim")
            if not r and not s:
                continue
            print(f"| {row} | {waits(r)} | {waits(s)} | {fmt(r and r.get('user_minutes'))} | {fmt(s and s.get('user_minutes'))} | "
                  f"{within(p, row)} | {beats_static(p, row)} | {landed(r, 'moved')} | {landed(s, 'moved')} | "
                  f"{landed(r, 'preempted')} | {landed(r, 'drained')} | {landed(s, 'drained')} |")

# The stand-in kubelet's lateness, measured in each run (simulated seconds, p50 / p90 over
# the run's nodes or warm users; "runs": each run's p50 / p90; the kubelet's tick in real ms).
lagged = [r for r in data if r["source"] == "real" and "lag" in r]
if lagged:
    print(f"\nlateness of the stand-in kubelet ({form}; simulated s, p50 / p90, each run's in brackets):\n")
    print("| placement | row | node Ready → image, minus the pull | first seen → Ready, minus the boot | warm user bound → Ready, minus the start |")
    print("|---|---|---|---|---|")

    def q(l):
        runs = ", ".join("%g/%g" % (a, b) for a, b in zip(l["per_run_p50"], l["per_run_p90"]))
        return f"{fmt(l['p50'])} / {fmt(l['p90'])} ({runs})"

    for p in PLACEMENTS:
        for row in rows:
            r = next((x for x in lagged if x["placement"] == p and x["row"] == row), None)
            if r:
                g = r["lag"]
                print(f"| {p} | {row} | {q(g['image_late_s'])} | {q(g['boot_late_s'])} | {q(g['warm_start_late_s'])} |")
    t = lagged[0]["lag"]["kubelet_tick_ms"]
    print("\nthe kubelet's tick (every node's, then every pod's work; real ms), each run p50 / p90 / max: "
          + ", ".join("%g / %g / %g" % x for x in zip(t["per_run_p50"], t["per_run_p90"], t["per_run_max"])))
    loads = lagged[0].get("load", [])
    if loads:
        print("load average, each run start → end: " + ", ".join("%g → %g" % (l["loadavg_start"], l["loadavg_end"]) for l in loads))
