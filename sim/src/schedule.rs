//! Placeholders on a calendar (`selfdestruct schedule`) in the simulator: replay a
//! launch log with the replicas following a weekly baseline and a calendar
//! (`--schedule-baseline`, `--schedule-calendar`: a policy row), and propose a baseline
//! from the log (`--recommend --schedule`): for each window (hour of the week) the smallest
//! count whose users meet the same target as the flat recommendation's, on the same replay.
//!
//! The count in force is `selfdestruct_schedule`'s, the pure function the mode runs.

use std::fmt::Write;
use std::sync::Mutex;

use selfdestruct_schedule::chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Timelike, Utc};
use selfdestruct_schedule::{Baseline, Calendar, Occurrence, Rule, Schedule};

use crate::RowResult;
use crate::engine;
use crate::metrics::{self, Summary};
use crate::recommend::{Search, Target};
use crate::scenario::{Arrival, HOUR, MIN, Ms, Scenario, Setup};
use crate::trace::Trace;

/// How long after the measured window the replicas are still evaluated (the engine's
/// drain: users still pending run).
const DRAIN: Ms = 12 * HOUR;

/// The wall-clock instant of simulated time 0 is `origin - warmup`: `origin` is the
/// start of the measured window (a trace's first UTC midnight; else Monday 2026-03-02).
pub fn origin(trace: Option<&Trace>) -> DateTime<Utc> {
    let day = trace
        .and_then(|t| t.files.first())
        .and_then(|f| NaiveDate::parse_from_str(&f.first_day, "%Y-%m-%d").ok())
        .unwrap_or(NaiveDate::from_ymd_opt(2026, 3, 2).unwrap_or_default());
    day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}

/// The wall-clock time of simulated time `t`.
fn wall(sc: &Scenario, origin: DateTime<Utc>, t: Ms) -> DateTime<Utc> {
    let ms = i64::try_from(t).unwrap_or(i64::MAX) - i64::try_from(sc.warmup).unwrap_or(0);
    origin + TimeDelta::milliseconds(ms)
}

/// The replicas over a run, as (time, count) steps, the first at 0: the count in force
/// evaluated every minute (as the mode, every 15 s, would see it to the minute).
pub fn steps(
    sc: &Scenario,
    origin: DateTime<Utc>,
    schedule: &Schedule,
    occurrences: &[Occurrence],
) -> Vec<(Ms, u32)> {
    let mut out: Vec<(Ms, u32)> = Vec::new();
    let mut t = 0;
    while t <= sc.end() + DRAIN {
        let c = schedule.in_force(occurrences, wall(sc, origin, t)).count;
        if out.last().is_none_or(|l| l.1 != c) {
            out.push((t, c));
        }
        t += MIN;
    }
    out
}

/// A calendar's occurrences over a run.
pub fn occurrences(
    sc: &Scenario,
    origin: DateTime<Utc>,
    schedule: &Schedule,
    calendar: &Calendar,
) -> Result<Vec<Occurrence>, String> {
    let lead = TimeDelta::from_std(schedule.lead).unwrap_or_default();
    calendar
        .occurrences(
            wall(sc, origin, 0),
            wall(sc, origin, sc.end() + DRAIN) + lead,
        )
        .map_err(|e| e.to_string())
}

/// `setup` with the replicas following `steps`, over every seed (in parallel).
pub fn run(
    sc: &Scenario,
    setup: &Setup,
    seeds: &[u64],
    arrivals: &[Vec<Arrival>],
    steps: &[(Ms, u32)],
    check: bool,
) -> RowResult {
    replay(sc, setup, seeds, arrivals, steps, check, |_| ()).0
}

/// [`run`], with `each` of every seed's run (in seed order).
fn replay<T: Send>(
    sc: &Scenario,
    setup: &Setup,
    seeds: &[u64],
    arrivals: &[Vec<Arrival>],
    steps: &[(Ms, u32)],
    check: bool,
    each: impl Fn(&engine::RunResult) -> T + Sync,
) -> (RowResult, Vec<T>) {
    type Slot<T> = Option<(Summary, Vec<Ms>, T)>;
    let done: Mutex<Vec<Slot<T>>> = Mutex::new((0..seeds.len()).map(|_| None).collect());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers.min(seeds.len()).max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= seeds.len() {
                        break;
                    }
                    let r =
                        engine::simulate_scheduled(sc, setup, &arrivals[i], seeds[i], check, steps);
                    let extra = each(&r);
                    if let Ok(mut d) = done.lock() {
                        d[i] = Some((r.summary, r.ttr, extra));
                    }
                }
            });
        }
    });
    let mut runs: Vec<(Summary, Vec<Ms>)> = Vec::new();
    let mut extras = Vec::new();
    for (summary, ttr, extra) in done.into_inner().unwrap_or_default().into_iter().flatten() {
        runs.push((summary, ttr));
        extras.push(extra);
    }
    let result = RowResult {
        summary: metrics::combine(&runs, sc.measured as f64 / HOUR as f64),
        per_seed: runs.into_iter().map(|(s, _)| s).collect(),
        samples: Vec::new(),
    };
    (result, extras)
}

/// Per hour of the week (Monday 00:00 first, in the schedule's zone): the most launches
/// that fall within one node's time to usefulness (node ready plus image pull) after a
/// launch in that hour or within the lead time after it.
pub fn demand(trace: &Trace, sc: &Scenario, schedule: &Schedule) -> [u32; 168] {
    let span = sc.node_ready + sc.image_pull;
    let lead = u64::try_from(schedule.lead.as_millis()).unwrap_or(0);
    let at: Vec<Ms> = trace.launches.iter().map(|l| l.at).collect();
    let origin = origin(Some(trace));
    let hour_of = |t: Ms| {
        let local = (origin + TimeDelta::milliseconds(t as i64)).with_timezone(&schedule.tz);
        local.weekday().num_days_from_monday() as usize * 24 + local.hour() as usize
    };
    let mut out = [0u32; 168];
    let mut j = 0;
    for (i, &a) in at.iter().enumerate() {
        while j < at.len() && at[j] < a + span {
            j += 1;
        }
        let n = (j - i) as u32;
        for h in [hour_of(a), hour_of(a.saturating_sub(lead))] {
            out[h] = out[h].max(n);
        }
    }
    out
}

/// The baseline giving `counts` (per hour of the week): days with the same 24 hours
/// share rules, the most common count is the closing `* = N`.
pub fn baseline_of(counts: &[u32; 168]) -> Baseline {
    let mut tally = std::collections::BTreeMap::<u32, usize>::new();
    for c in counts {
        *tally.entry(*c).or_default() += 1;
    }
    let common = tally
        .iter()
        .max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c)))
        .map_or(0, |(c, _)| *c);
    let day = |d: usize| &counts[d * 24..d * 24 + 24];
    let mut rules = Vec::new();
    let mut done = [false; 7];
    for d in 0..7 {
        if done[d] {
            continue;
        }
        let mut days = [false; 7];
        for e in d..7 {
            if day(e) == day(d) {
                days[e] = true;
                done[e] = true;
            }
        }
        let hours = day(d);
        let mut h = 0;
        while h < 24 {
            let c = hours[h];
            let start = h;
            while h < 24 && hours[h] == c {
                h += 1;
            }
            if c != common {
                rules.push(Rule {
                    days,
                    from: (start * 60) as u16,
                    to: (h * 60) as u16,
                    count: c,
                });
            }
        }
    }
    rules.push(Rule {
        days: [true; 7],
        from: 0,
        to: 24 * 60,
        count: common,
    });
    Baseline { rules }
}

/// What `--recommend --schedule` found.
pub struct Proposal {
    /// The proposed baseline (the one replayed).
    pub baseline: Baseline,
    /// Its results on the replay.
    pub results: Summary,
    /// Whether it meets the target.
    pub met: bool,
    /// The flat count and its results.
    pub flat: (u32, Summary),
    /// The row.
    pub policy: String,
}

/// The windows of a proposal: the hours of the week, Monday 00:00 first.
const WINDOWS: usize = 168;

/// The most rounds of the per-window search (each one replay of every seed).
const MAX_ROUNDS: usize = 12;

/// One window's measured users in one run: how many, how many waited for room, how many
/// started cold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    users: u64,
    delayed: u64,
    cold: u64,
}

/// Each measured user of `r` counted in the window (hour of the week, in `tz`) in force
/// one time to usefulness (node ready plus image pull) before the launch: the count that
/// must have had nodes booted and images pulled for it.
fn tally(
    sc: &Scenario,
    origin: DateTime<Utc>,
    tz: selfdestruct_schedule::Tz,
    r: &engine::RunResult,
) -> [Tally; WINDOWS] {
    let ahead = sc.node_ready + sc.image_pull;
    let mut out = [Tally::default(); WINDOWS];
    for u in r
        .users
        .iter()
        .filter(|u| u.arrival >= sc.warmup && u.arrival < sc.end())
    {
        let local = wall(sc, origin, u.arrival.saturating_sub(ahead)).with_timezone(&tz);
        let w = local.weekday().num_days_from_monday() as usize * 24 + local.hour() as usize;
        let t = &mut out[w];
        t.users += 1;
        t.delayed += u64::from(u.delayed);
        t.cold += u64::from(u.cold);
    }
    out
}

/// Proposes a baseline for `setup` (the flat recommendation's row, meeting `target` at
/// `flat` replicas) by a search per window (hour of the week): for each window the
/// smallest count up to twice the flat count whose users meet the target (their delayed at most its limit in every
/// run, their cold at most its share of them), or do no worse than under the flat count.
/// The 168 searches are recommend's ([`Search`]: from the window's [`demand`], galloping,
/// then halving) and run side by side: each round replays the week once, every window at
/// its search's next count. The answer is replayed and checked against the whole target;
/// each window whose users miss theirs there is searched again above its count, the
/// others held (at most 3 times).
#[allow(clippy::too_many_arguments)]
pub fn propose(
    trace: &Trace,
    sc: &Scenario,
    setup: &Setup,
    flat: (u32, Summary),
    schedule: &Schedule,
    seeds: &[u64],
    arrivals: &[Vec<Arrival>],
    target: Target,
    check: bool,
) -> Proposal {
    let origin = origin(Some(trace));
    // A window may need more than the flat count: the room a flat count leaves all week
    // (nodes kept up by the placeholders, free room beside them) is not there after a
    // quiet night.
    let top = flat.0.saturating_mul(2);
    let bound = |c: u32| {
        c.min(top)
            .clamp(schedule.min, schedule.max.max(schedule.min))
    };
    let replay_counts = |counts: &[u32; WINDOWS]| {
        let baseline = baseline_of(counts);
        let s = Schedule {
            baseline: baseline.clone(),
            ..schedule.clone()
        };
        let (r, tallies) = replay(
            sc,
            setup,
            seeds,
            arrivals,
            &steps(sc, origin, &s, &[]),
            check,
            |r| tally(sc, origin, schedule.tz, r),
        );
        (baseline, r, tallies)
    };
    // What each window's users get from the flat count (every window at it).
    let (_, _, at_flat) = replay_counts(&[bound(flat.0); WINDOWS]);
    let window_met = |tallies: &[[Tally; WINDOWS]], w: usize| {
        tallies.iter().zip(&at_flat).all(|(t, f)| {
            let (t, f) = (t[w], f[w]);
            let waits = target
                .max_waiting
                .is_none_or(|n| t.delayed <= n.max(f.delayed));
            let cold = target
                .max_cold_pct
                .is_none_or(|p| 100.0 * t.cold as f64 <= p * t.users as f64 || t.cold <= f.cold);
            waits && cold
        })
    };
    // The searches of `windows` side by side, every other window at its count in `counts`;
    // each window's answer (its smallest count that met, else the top) into `counts`.
    let answer = |s: &Search| s.meet.as_ref().map_or(bound(top), |m| m.0);
    let search = |searches: &mut [(usize, Search)], counts: &mut [u32; WINDOWS]| {
        for _ in 0..MAX_ROUNDS {
            let next: Vec<Option<u32>> = searches.iter().map(|(_, s)| s.next()).collect();
            if next.iter().all(Option::is_none) {
                break;
            }
            for ((w, s), n) in searches.iter().zip(&next) {
                counts[*w] = n.unwrap_or_else(|| answer(s));
            }
            let (_, r, tallies) = replay_counts(counts);
            for ((w, s), n) in searches.iter_mut().zip(&next) {
                if let Some(c) = n {
                    s.record(*c, r.clone(), window_met(&tallies, *w), true);
                }
            }
        }
        for (w, s) in searches.iter() {
            counts[*w] = answer(s);
        }
    };
    // Every window, from its demand.
    let guess = demand(trace, sc, schedule);
    let mut counts = [0u32; WINDOWS];
    let mut all: Vec<(usize, Search)> = (0..WINDOWS)
        .map(|w| (w, Search::new(bound(0), bound(top), bound(guess[w]))))
        .collect();
    search(&mut all, &mut counts);
    // The windows beside one another are not independent (a count that falls right after a
    // class stops re-creating the placeholders its users preempted, and with them the
    // nodes the class's later users need): the answer replayed, each window whose users
    // miss the target there is searched again above its count, the others held.
    let mut last = None;
    for _ in 0..3 {
        let (baseline, r, tallies) = replay_counts(&counts);
        let met = target.met(&r);
        last = Some((baseline, r.summary, met));
        let mut again: Vec<(usize, Search)> = (0..WINDOWS)
            .filter(|&w| !window_met(&tallies, w) && counts[w] < bound(top))
            .map(|w| (w, Search::new(counts[w] + 1, bound(top), counts[w] + 1)))
            .collect();
        if met || again.is_empty() {
            break;
        }
        search(&mut again, &mut counts);
    }
    let best = last.unwrap_or_else(|| (Baseline::default(), flat.1.clone(), false));
    Proposal {
        baseline: best.0,
        results: best.1,
        met: best.2,
        flat,
        policy: setup.name.clone(),
    }
}

/// The proposal in words, with both node-hour figures.
pub fn describe(p: &Proposal, schedule: &Schedule) -> String {
    let mut out = String::new();
    let f = &p.flat.1;
    let s = &p.results;
    let _ = writeln!(
        out,
        "Schedule (--schedule), row {}: for each hour of the week the smallest count whose users \
         meet the same target on the same replay, in {} with a lead time of {}:",
        p.policy,
        schedule.tz,
        selfdestruct_decision::duration::format(schedule.lead)
    );
    if !p.met {
        let _ = writeln!(
            out,
            "  no schedule below the flat count meets the target: keep replicas: {}",
            p.flat.0
        );
        return out;
    }
    let saved = f.node_hours - s.node_hours;
    let pct = if f.node_hours > 0.0 {
        100.0 * saved / f.node_hours
    } else {
        0.0
    };
    let _ = writeln!(
        out,
        "  flat {:>3} replicas: node-h {:.1} per run, delayed {}, cold {} ({:.2}%)",
        p.flat.0, f.node_hours, f.delayed, f.cold, f.cold_pct
    );
    let _ = writeln!(
        out,
        "  schedule:          node-h {:.1} per run, delayed {}, cold {} ({:.2}%): saves {:.1} node-h ({:.0}%)",
        s.node_hours, s.delayed, s.cold, s.cold_pct, saved, pct
    );
    let _ = writeln!(out, "  SELFDESTRUCT_SCHEDULE_BASELINE=\"{}\"", p.baseline);
    out
}
