//! Placeholders on a calendar in the simulator (`selfdestruct schedule`): the replicas
//! follow the count in force of the mode's own pure function; a constant schedule
//! replays exactly like the flat count; one that follows the class timetable
//! (sim/data/timetable-week.csv) keeps the users' room at fewer node-hours; the proposed
//! baseline is in the mode's grammar and gives back the hourly counts it was made from;
//! `--schedule-baseline` adds a `schedule` row.

use std::process::Command;
use std::time::Duration;

use selfdestruct_schedule::{Baseline, Calendar, Schedule, Tz};
use selfdestruct_sim::scenario::{Arrival, Peer, Row, Scenario, Setup, agent_defaults};
use selfdestruct_sim::schedule::{baseline_of, occurrences, origin, run, steps};
use selfdestruct_sim::trace::{ReadOptions, Trace};
use selfdestruct_sim::{RowResult, run_rows_on};

const TIMETABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/timetable-week.csv");

struct Replay {
    sc: Scenario,
    trace: Trace,
    seeds: Vec<u64>,
    arrivals: Vec<Vec<Arrival>>,
}

fn replay() -> Replay {
    let trace = Trace::read(&[TIMETABLE], &ReadOptions::default()).expect("the timetable");
    let mut sc = Scenario::small();
    sc.autoscaler.max_nodes = 40;
    trace.apply(&mut sc, None);
    let seeds = vec![1];
    let arrivals = seeds.iter().map(|&s| trace.arrivals(&sc, s)).collect();
    Replay {
        sc,
        trace,
        seeds,
        arrivals,
    }
}

/// The `new-node` row (the agent's defaults) at `replicas`.
fn new_node(_sc: &Scenario, replicas: u32) -> Setup {
    Setup {
        name: "new-node".into(),
        row: Row::NewNode,
        replicas,
        policy: agent_defaults(),
        gate: false,
        peer: Peer::Selfdestruct,
        pin: false,
    }
}

fn schedule(baseline: &str) -> Schedule {
    Schedule {
        baseline: Baseline::parse(baseline).unwrap(),
        tz: Tz::UTC,
        lead: Duration::from_secs(600),
        min: 0,
        max: 1000,
    }
}

fn scheduled(r: &Replay, s: &Schedule, occ: &[selfdestruct_schedule::Occurrence]) -> RowResult {
    let st = steps(&r.sc, origin(Some(&r.trace)), s, occ);
    let max = st.iter().map(|s| s.1).max().unwrap_or(0);
    run(
        &r.sc,
        &new_node(&r.sc, max),
        &r.seeds,
        &r.arrivals,
        &st,
        true,
    )
}

#[test]
fn a_constant_schedule_replays_like_the_flat_count() {
    let r = replay();
    let flat = run_rows_on(&r.sc, &[new_node(&r.sc, 12)], &r.seeds, &r.arrivals, true);
    let constant = scheduled(&r, &schedule("* = 12"), &[]);
    let (f, s) = (&flat[0].summary, &constant.summary);
    assert_eq!(
        (
            f.delayed,
            f.cold,
            f.node_hours.to_bits(),
            f.evictions_per_hour.to_bits()
        ),
        (
            s.delayed,
            s.cold,
            s.node_hours.to_bits(),
            s.evictions_per_hour.to_bits()
        )
    );
    assert!(s.violations.is_empty(), "{:?}", s.violations);
}

#[test]
fn a_timetable_schedule_keeps_the_room_at_fewer_node_hours() {
    let r = replay();
    // The classes: Mon/Wed/Fri 09:00 (60 students), Tue/Thu 14:00 (40), from a calendar.
    let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n\
        BEGIN:VEVENT\r\nUID:l\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:Lecture placeholders: 40\r\n\
        DTSTART:20260302T085000Z\r\nDTEND:20260302T093000Z\r\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID:b\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:Lab placeholders: 30\r\n\
        DTSTART:20260303T135000Z\r\nDTEND:20260303T143000Z\r\nRRULE:FREQ=WEEKLY;BYDAY=TU,TH\r\nEND:VEVENT\r\n\
        END:VCALENDAR\r\n";
    let s = schedule("Mon-Fri 08:00-18:00 = 4; * = 2");
    let cal = Calendar::parse(ics, Tz::UTC).unwrap();
    let occ = occurrences(&r.sc, origin(Some(&r.trace)), &s, &cal).unwrap();
    // One per class of the week, and next Monday's lecture (the run drains into it).
    assert_eq!(occ.len(), 6, "{occ:?}");
    let timetable = scheduled(&r, &s, &occ).summary;
    let flat = run_rows_on(&r.sc, &[new_node(&r.sc, 40)], &r.seeds, &r.arrivals, true);
    let none = run_rows_on(&r.sc, &[new_node(&r.sc, 0)], &r.seeds, &r.arrivals, true);
    let (flat, none) = (&flat[0].summary, &none[0].summary);
    println!(
        "timetable: delayed {} node-h {:.1}; flat 40: delayed {} node-h {:.1}; none: delayed {} node-h {:.1}",
        timetable.delayed,
        timetable.node_hours,
        flat.delayed,
        flat.node_hours,
        none.delayed,
        none.node_hours
    );
    assert!(
        timetable.violations.is_empty(),
        "{:?}",
        timetable.violations
    );
    assert!(timetable.node_hours < flat.node_hours * 0.7);
    assert!(
        timetable.delayed * 10 < none.delayed,
        "the schedule keeps most of the room"
    );
}

#[test]
fn the_proposed_baseline_gives_back_its_hourly_counts() {
    let mut counts = [2u32; 168];
    for d in [0, 2, 4] {
        for h in 8..11 {
            counts[d * 24 + h] = 36;
        }
    }
    for h in 13..16 {
        counts[24 + h] = 24;
        counts[3 * 24 + h] = 25;
    }
    counts[6 * 24 + 23] = 0;
    let b = baseline_of(&counts);
    let text = b.to_string();
    assert_eq!(
        text,
        "Mon,Wed,Fri 08:00-11:00 = 36; Tue 13:00-16:00 = 24; Thu 13:00-16:00 = 25; \
         Sun 23:00-24:00 = 0; * = 2"
    );
    let parsed = Baseline::parse(&text).unwrap();
    // 2026-03-02 is a Monday.
    let monday = selfdestruct_schedule::chrono::NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
    for (i, want) in counts.iter().enumerate() {
        let at = monday.and_hms_opt(0, 30, 0).unwrap()
            + selfdestruct_schedule::chrono::TimeDelta::hours(i as i64);
        assert_eq!(parsed.count_at(at), *want, "hour {i}");
    }
}

/// `simulate` on the class timetable (the small scenario, up to 40 nodes, no row but the
/// schedule's) with `extra` flags.
fn on_the_timetable(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_simulate"))
        .args([
            "--scenario",
            "small",
            "--max-nodes",
            "40",
            "--arrivals",
            TIMETABLE,
            "--only",
            "none",
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn schedule_baseline_adds_a_schedule_row() {
    let out = on_the_timetable(&[
        "--schedule-baseline",
        "Mon-Fri 08:00-18:00 = 12; * = 2",
        "--schedule-time-zone",
        "Europe/Berlin",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.lines().any(|l| l.starts_with("schedule ")), "{text}");
    let bad = Command::new(env!("CARGO_BIN_EXE_simulate"))
        .args(["--schedule-baseline", "Mon 18:00-08:00 = 3"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("must end after it starts"));
}

/// With `--gate on` the `schedule` row is the agent's defaults behind the node gate (the
/// real-stack bench's `gate+new-node+schedule-LEAD` rows): no user starts cold, where the same
/// schedule without the gate has cold starts.
#[test]
fn the_schedule_row_is_behind_the_gate_with_gate_on() {
    let schedule_row = |gate: &str| {
        let out = on_the_timetable(&["--schedule-baseline", "* = 2", "--gate", gate, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = v["rows"].as_array().unwrap();
        let row = rows
            .iter()
            .find(|r| r["setup"]["name"] == "schedule")
            .unwrap();
        (
            row["setup"]["gate"].clone(),
            row["results"]["cold"].as_u64().unwrap(),
        )
    };
    let (gate, cold) = schedule_row("on");
    assert_eq!((gate, cold), (serde_json::json!(true), 0));
    let (gate, cold) = schedule_row("off");
    assert_eq!(gate, serde_json::json!(false));
    assert!(cold > 0, "{cold} cold starts without the gate");
}

/// `--recommend --schedule`: a search per window (hour of the week). On the class
/// timetable at the default target (no user waits for room), the proposal meets the
/// target on the same replay at fewer node-hours than the flat count; a quiet window gets
/// its own smallest count (none at night, where nobody launches), and a class's window may
/// need more than the flat count (after a quiet night the flat count's spare room is not
/// there).
#[test]
fn the_proposal_searches_each_window_for_its_smallest_count() {
    let r = replay();
    let flat = 37;
    let row = new_node(&r.sc, flat);
    let at_flat = run_rows_on(
        &r.sc,
        std::slice::from_ref(&row),
        &r.seeds,
        &r.arrivals,
        false,
    );
    let target = selfdestruct_sim::recommend::Target {
        max_waiting: Some(0),
        max_cold_pct: None,
    };
    assert!(target.met(&at_flat[0]), "the flat count meets the target");
    let s = schedule("* = 0");
    let p = selfdestruct_sim::schedule::propose(
        &r.trace,
        &r.sc,
        &row,
        (flat, at_flat[0].summary.clone()),
        &s,
        &r.seeds,
        &r.arrivals,
        target,
        false,
    );
    let (f, sc) = (&p.flat.1, &p.results);
    println!(
        "flat {flat}: node-h {:.1}; proposal {}: node-h {:.1}, delayed {}, cold {}",
        f.node_hours, p.baseline, sc.node_hours, sc.delayed, sc.cold
    );
    assert!(p.met, "{}", p.baseline);
    assert_eq!(sc.delayed, 0);
    assert!(
        sc.node_hours < f.node_hours * 0.5,
        "{} against {}",
        sc.node_hours,
        f.node_hours
    );
    // 2026-03-02 is a Monday; the lecture is at 09:00 Mon/Wed/Fri.
    let at = |d: u32, h: u32| {
        selfdestruct_schedule::chrono::NaiveDate::from_ymd_opt(2026, 3, 2 + d)
            .unwrap()
            .and_hms_opt(h, 30, 0)
            .unwrap()
    };
    for d in 0..7 {
        assert_eq!(
            p.baseline.count_at(at(d, 3)),
            0,
            "night of day {d}: {}",
            p.baseline
        );
    }
    assert!(p.baseline.count_at(at(0, 8)) > flat, "{}", p.baseline);
}
