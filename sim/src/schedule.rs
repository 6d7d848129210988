//! Placeholders on a calendar (`selfdestruct schedule`) in the simulator: replay a
//! launch log with the replicas following a weekly baseline and a calendar
//! (`--schedule-baseline`, `--schedule-calendar`: a policy row), and propose a baseline
//! from the log (`--recommend --schedule`): per hour of the week the smallest count that
//! meets the same target as the flat recommendation, on the same replay.
//!
//! The count in force is `selfdestruct_schedule`'s, the pure function the mode runs.

use std::fmt::Write;
use std::sync::Mutex;

use selfdestruct_schedule::chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Timelike, Utc};
use selfdestruct_schedule::{Baseline, Calendar, Occurrence, Rule, Schedule};

use crate::RowResult;
use crate::engine;
use crate::metrics::{self, Summary};
use crate::recommend::Target;
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
    type Slot = Option<(Summary, Vec<Ms>)>;
    let done: Mutex<Vec<Slot>> = Mutex::new(vec![None; seeds.len()]);
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
                    if let Ok(mut d) = done.lock() {
                        d[i] = Some((r.summary, r.ttr));
                    }
                }
            });
        }
    });
    let runs: Vec<(Summary, Vec<Ms>)> = done
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    RowResult {
        summary: metrics::combine(&runs, sc.measured as f64 / HOUR as f64),
        per_seed: runs.into_iter().map(|(s, _)| s).collect(),
        samples: Vec::new(),
    }
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

/// Proposes a baseline for `setup` (the flat recommendation's row, meeting `target` at
/// `flat` replicas): per hour of the week `min(flat, max(floor, ceil(a * demand)))`
/// ([`demand`], widened by an hour each side), for each floor of 0, 1, 2, 4, 8 the
/// smallest factor `a` (a bisection, 7 rounds) whose replay meets the target; the
/// cheapest in node-hours of those.
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
    let raw = demand(trace, sc, schedule);
    // An hour's count also covers the hours beside it: the replicas rise an hour before
    // a busy hour and fall an hour after it.
    let mut demand = [0u32; 168];
    for h in 0..168 {
        demand[h] = raw[(h + 167) % 168].max(raw[h]).max(raw[(h + 1) % 168]);
    }
    let origin = origin(Some(trace));
    let peak = demand.iter().copied().max().unwrap_or(0).max(1);
    let counts = |a: f64, floor: u32| -> [u32; 168] {
        let mut c = [0u32; 168];
        for (h, d) in demand.iter().enumerate() {
            c[h] = ((a * f64::from(*d)).ceil() as u32)
                .max(floor)
                .min(flat.0)
                .clamp(schedule.min, schedule.max.max(schedule.min));
        }
        c
    };
    let attempt = |a: f64, floor: u32| {
        let baseline = baseline_of(&counts(a, floor));
        let s = Schedule {
            baseline: baseline.clone(),
            ..schedule.clone()
        };
        let r = run(
            sc,
            setup,
            seeds,
            arrivals,
            &steps(sc, origin, &s, &[]),
            check,
        );
        let met = target.met(&r);
        (baseline, r.summary, met)
    };
    // For each floor (the least count at any hour), the smallest factor `a` that meets
    // the target (at `a = flat` every hour with launches near it has the flat count);
    // the cheapest in node-hours wins.
    let mut best: Option<(Baseline, Summary, bool)> = None;
    for floor in [0, 1, 2, 4, 8] {
        if floor > flat.0 {
            break;
        }
        let (mut lo, mut hi) = (0.0, f64::from(flat.0.max(1)));
        let mut found = attempt(hi, floor);
        if !found.2 {
            continue;
        }
        let mut a = f64::from(flat.0) / f64::from(peak);
        for _ in 0..7 {
            let tried = attempt(a, floor);
            if tried.2 {
                hi = a;
                found = tried;
            } else {
                lo = a;
            }
            a = (lo + hi) / 2.0;
        }
        if best
            .as_ref()
            .is_none_or(|b| found.1.node_hours < b.1.node_hours)
        {
            best = Some(found);
        }
    }
    let best = best.unwrap_or_else(|| (Baseline::default(), flat.1.clone(), false));
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
        "Schedule (--schedule), row {}: the smallest counts per hour of the week meeting the same \
         target on the same replay, in {} with a lead time of {}:",
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
