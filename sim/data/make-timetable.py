#!/usr/bin/env python3
"""Writes a SYNTHETIC class-timetable launch log for `simulate --arrivals`: not real launches.

One week (Monday to Sunday, UTC) of a course hub, as CSV (`timestamp,duration`): on weekdays
a trickle of 1.5 launches per 10 minutes from 08:00 to 18:00, 0.5 in the evening and 0.1 at
night; a lecture on Monday, Wednesday and Friday at 09:00 (60 students start within 5 minutes
and work 75 minutes) and a lab on Tuesday and Thursday at 14:00 (40 students within 5 minutes,
90 minutes); weekends 0.3 per 10 minutes. Other sessions: 40 minutes on average (exponential,
10 to 180). Same arguments, same bytes (--seed).

    python3 sim/data/make-timetable.py --out sim/data/timetable-week.csv
"""

import argparse
import datetime as dt
import random


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--start", default="2026-03-02", help="a Monday (UTC)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    start = dt.datetime.fromisoformat(a.start).replace(tzinfo=dt.timezone.utc)
    assert start.weekday() == 0, "--start must be a Monday"
    rows = []

    def session():
        return max(10, min(180, round(rng.expovariate(1 / 40))))

    for day in range(7):
        midnight = start + dt.timedelta(days=day)
        weekday = day < 5
        for minute in range(24 * 60):
            hour = minute // 60
            if not weekday:
                per_10 = 0.3
            elif 8 <= hour < 18:
                per_10 = 1.5
            elif 18 <= hour < 23:
                per_10 = 0.5
            else:
                per_10 = 0.1
            # Poisson arrivals in this minute (thinning: at most a few per minute).
            n = 0
            while rng.random() < per_10 / 10 / (1 + n):
                n += 1
            for _ in range(n):
                t = midnight + dt.timedelta(minutes=minute, seconds=rng.randrange(60))
                rows.append((t, session()))
        classes = {0: (9, 60, 75), 2: (9, 60, 75), 4: (9, 60, 75), 1: (14, 40, 90), 3: (14, 40, 90)}
        if day in classes:
            hour, size, minutes = classes[day]
            for _ in range(size):
                t = midnight + dt.timedelta(hours=hour, seconds=rng.randrange(5 * 60))
                rows.append((t, minutes + rng.randrange(-10, 11)))
    rows.sort()
    with open(a.out, "w") as f:
        f.write("timestamp,duration\n")
        for t, m in rows:
            f.write("%s,%dm\n" % (t.strftime("%Y-%m-%dT%H:%M:%SZ"), m))


if __name__ == "__main__":
    main()
