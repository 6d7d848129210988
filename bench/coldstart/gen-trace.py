"""The cold-start bench's launch logs (CSV: timestamp,duration in seconds), seeded: same arguments,
same bytes. Run from the repository root.

    python3 bench/coldstart/gen-trace.py ramp       # bench/coldstart/trace.csv (the quick and full forms)
    python3 bench/coldstart/gen-trace.py cycling    # bench/coldstart/cycling.csv (the cycling form)
    python3 bench/coldstart/gen-trace.py cycling --peak-users 96 --quiet-users 6 \
        --out bench/coldstart/cycling-binder.csv   # the binder form (32-user nodes)
    python3 bench/coldstart/gen-trace.py class      # bench/coldstart/class.csv (the class form)

ramp: a 100-minute ramp with a burst at 40-50 min, sessions lognormal (median about 20 min), all
ended by 115 min.

cycling: --cycles daily cycles of --cycle-min minutes each, squeezed into one UTC day from 00:00:
quiet, a ramp up, a plateau at the peak, a ramp down, then a quiet stretch long enough for the
autoscaler to remove the nodes the peak added (sessions end before it; the next cycle then adds
nodes again). The launch rate follows that shape so that the users running at the peak are about
--peak-users (rate x mean session), with a floor of --quiet-users.

class: a quiet night, then a class: --class-users arrive within --class-window-min minutes of the
bell at --class-start-min (most early in the window), each for a session of about
--class-session-min minutes, while a trickle of about --quiet-users users (short sessions) runs
from the start to the class's end. The bench's --form class schedules its calendar event at the
bell (its defaults match these)."""
import argparse
import math
import random


def ramp(r):
    t = 0.0
    rows = []
    end = 115 * 60

    def gap(t):
        # a ramp: quiet, busy, a burst at 40-50 min, quieter
        if t < 20 * 60:
            return 150
        if t < 40 * 60:
            return 60
        if t < 50 * 60:
            return 20
        if t < 80 * 60:
            return 70
        return 120

    while True:
        t += r.expovariate(1 / gap(t))
        if t >= 100 * 60:
            break
        d = int(r.lognormvariate(7.1, 0.5))
        d = max(min(d, end - int(t)), 120)
        rows.append((int(t), d))
    return rows


def cycling(r, a):
    """The share of the peak's concurrency in force at minute m of a cycle: quiet, ramp up,
    plateau, ramp down, quiet (a raised cosine on each ramp)."""
    c = a.cycle_min
    up0, up1 = 0.10 * c, 0.30 * c
    down0, down1 = 0.55 * c, 0.70 * c
    last_launch = 0.70 * c  # sessions end in the quiet stretch after it
    median_s = a.session_min * 60
    mean_s = median_s * math.exp(a.session_sigma**2 / 2)
    floor = a.quiet_users / a.peak_users

    def level(m):
        if m < up0 or m >= down1:
            return floor
        if m < up1:
            x = (m - up0) / (up1 - up0)
        elif m < down0:
            x = 1.0
        else:
            x = 1 - (m - down0) / (down1 - down0)
        return floor + (1 - floor) * (1 - math.cos(math.pi * x)) / 2

    rows = []
    peak_rate = a.peak_users / mean_s  # launches per second at the plateau
    for k in range(a.cycles):
        base = k * c * 60
        t = 0.0
        while True:
            # thinning: a Poisson process at the peak rate, each launch kept with level(m)
            t += r.expovariate(peak_rate)
            if t >= c * 60:
                break
            m = t / 60
            keep = r.random() < level(m)
            d = r.lognormvariate(math.log(median_s), a.session_sigma)
            if not keep:
                continue
            if m >= last_launch and level(m) <= floor:
                # the quiet tail: short sessions that end well before the next cycle
                d = min(d, 0.5 * median_s)
            end = c * 60 - 0.05 * c * 60 if k == a.cycles - 1 else (c + up0) * 60
            d = max(120, min(int(d), int(end - t)))
            rows.append((int(base + t), d))
    assert rows[-1][0] < 86400, "the cycles must fit in one UTC day"
    return rows


def class_(r, a):
    rows = []
    bell = a.class_start_min * 60
    for _ in range(int(a.class_users)):
        # most arrive in the first minutes after the bell
        t = bell + r.betavariate(1.2, 2.5) * a.class_window_min * 60
        d = r.lognormvariate(math.log(a.class_session_min * 60), 0.08)
        d = max(0.8, min(d / 60, 1.1 * a.class_session_min)) * 60
        rows.append((int(t), int(d)))
    # the trickle: about --quiet-users running (sessions median 15 min) to the class's end,
    # as many arriving in the first 2 minutes
    end = bell + (a.class_window_min + 1.1 * a.class_session_min) * 60
    median_s = 15 * 60
    mean_s = median_s * math.exp(0.5**2 / 2)
    starts = [r.uniform(0, 120) for _ in range(int(a.quiet_users))]
    t = 120.0
    while True:
        t += r.expovariate(a.quiet_users / mean_s)
        if t >= end - 5 * 60:
            break
        starts.append(t)
    for t in starts:
        d = r.lognormvariate(math.log(median_s), 0.5)
        rows.append((int(t), max(120, min(int(d), int(end - t)))))
    rows.sort()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("form", choices=["ramp", "cycling", "class"])
    p.add_argument("--seed", type=int, default=None, help="default: 34 (ramp), 45 (cycling), 47 (class)")
    p.add_argument("--out", default=None, help="default: trace.csv (ramp), cycling.csv (cycling), class.csv (class) in bench/coldstart/")
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--cycle-min", type=float, default=140.0, help="minutes a cycle")
    p.add_argument("--peak-users", type=float, default=64.0, help="users running at the plateau")
    p.add_argument("--quiet-users", type=float, default=3.0, help="users running in the quiet hours")
    p.add_argument("--session-min", type=float, default=20.0, help="median session, minutes")
    p.add_argument("--session-sigma", type=float, default=0.5, help="lognormal sigma of the sessions")
    p.add_argument("--class-users", type=float, default=60.0, help="class: users of the class")
    p.add_argument("--class-start-min", type=float, default=20.0, help="class: the bell, minutes from 00:00")
    p.add_argument("--class-window-min", type=float, default=5.0, help="class: they all arrive within this")
    p.add_argument("--class-session-min", type=float, default=50.0, help="class: median session, minutes")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else {"ramp": 34, "cycling": 45, "class": 47}[a.form]
    out = a.out or "bench/coldstart/" + {"ramp": "trace", "cycling": "cycling", "class": "class"}[a.form] + ".csv"
    r = random.Random(seed)
    rows = {"ramp": ramp, "cycling": lambda r: cycling(r, a), "class": lambda r: class_(r, a)}[a.form](r)
    with open(out, "w") as f:
        f.write("timestamp,duration\n")
        for s, d in rows:
            f.write("2026-01-05T%02d:%02d:%02dZ,%d\n" % (s // 3600, (s % 3600) // 60, s % 60, d))
    print(len(rows), "launches, mean session %.1f min" % (sum(d for _, d in rows) / len(rows) / 60), "->", out)


if __name__ == "__main__":
    main()
