//! What a calendar at the bounds costs: the heap at its peak (counted by this binary's
//! allocator) and the CPU time (the thread's, from /proc) of reading, parsing and
//! expanding it over the mode's 2-day span. The figures are printed (`cargo test
//! --release -p selfdestruct-schedule --test bounds -- --nocapture` for those of
//! docs/schedule.md); the test asserts only the memory bound, which is the point.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use selfdestruct_schedule::filter::MAX_KEPT;
use selfdestruct_schedule::{Calendar, Filter, Tz};

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = NOW.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, size) };
        if !p.is_null() {
            NOW.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The CPU time of this thread so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat.split_whitespace().next().and_then(|n| n.parse().ok());
    Duration::from_nanos(ns.unwrap_or(0))
}

/// The mode's time budget of one expansion (src/schedule.rs).
const BUDGET: Duration = Duration::from_secs(2);

/// Reads `text` as the mode does (64 KiB at a time through the filter), parses it and
/// expands it over 2 days from `now`; returns the heap's peak above what was held before
/// (the text itself not counted), the CPU time, the occurrences held and the skipped.
fn measure(text: &str, now: DateTime<Utc>) -> (usize, Duration, usize, Vec<String>) {
    let (base, cpu0) = (NOW.load(Ordering::Relaxed), cpu());
    PEAK.store(base, Ordering::Relaxed);
    let mut filter = Filter::new();
    for chunk in text.as_bytes().chunks(64 << 10) {
        filter.push(chunk).unwrap();
    }
    let cal = Calendar::parse_filtered(&filter.finish().unwrap(), Tz::UTC).unwrap();
    let deadline = Instant::now() + BUDGET;
    let e = cal.expand(now, now + TimeDelta::days(2), &mut || {
        Instant::now() < deadline
    });
    let skipped = cal
        .skipped
        .iter()
        .chain(&e.skipped)
        .map(|e| e.to_string())
        .collect();
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (peak, cpu() - cpu0, e.occurrences.len(), skipped)
}

fn event(uid: usize, summary: &str, rule: &str) -> String {
    format!(
        "BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:{summary}\r\n\
         DTSTART:20260301T230000Z\r\nDTEND:20260301T230030Z\r\n{rule}END:VEVENT\r\n"
    )
}

fn calendar(events: &str) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{events}END:VCALENDAR\r\n")
}

/// A 4 MiB shared calendar: seminars without a count, then `one` events with a count up
/// to the 128 KiB the filter keeps.
fn shared(one: impl Fn(usize) -> String) -> String {
    let seminar = event(0, "Seminar", "DESCRIPTION:coffee and cake in room 4\r\n");
    let mut events = String::new();
    let mut k = 0;
    while events.len() + one(k).len() < MAX_KEPT - 512 {
        events.push_str(&one(k));
        k += 1;
    }
    let mut text = String::new();
    while text.len() + seminar.len() + events.len() < (4 << 20) - 256 {
        text.push_str(&seminar);
    }
    calendar(&(text + &events))
}

#[test]
fn a_calendar_at_the_bounds_is_held_in_bounded_memory() {
    let now: DateTime<Utc> = "2026-03-02T00:00:00Z".parse().unwrap();
    // Issue 46 items 1 and 2: one event of 60 KB, its SUMMARY 60,000 characters, every
    // second or minute: each occurrence held a copy of the name (10 GB; 340 MiB).
    let name = format!("{} placeholders: 5", "x".repeat(60_000));
    let cases = [
        (
            "one 60 KB event every second".to_string(),
            calendar(&event(1, &name, "RRULE:FREQ=SECONDLY\r\n")),
        ),
        (
            "one 60 KB event every minute".to_string(),
            calendar(&event(1, &name, "RRULE:FREQ=MINUTELY\r\n")),
        ),
        (
            "4 MiB: classes, weekly (a timetable)".to_string(),
            shared(|k| {
                let rule = format!("RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR={}\r\n", k % 24);
                event(k, &format!("Class {k} placeholders: 4"), &rule)
            }),
        ),
        (
            "4 MiB: every second, every minute, and never in a form the parse cannot see"
                .to_string(),
            shared(|k| {
                let rule = match k % 3 {
                    0 => "RRULE:FREQ=SECONDLY\r\n",
                    1 => "RRULE:FREQ=MINUTELY\r\n",
                    _ => "RRULE:FREQ=DAILY;BYSETPOS=2\r\n",
                };
                event(k, &format!("Hostile {k} placeholders: 9"), rule)
            }),
        ),
    ];
    let mut over = Vec::new();
    for (what, text) in cases {
        let (peak, cpu, held, skipped) = measure(&text, now);
        println!(
            "{what} ({} bytes): heap peak {:.1} MiB, CPU {:.2} s, {held} occurrences held; \
             skipped: {skipped:?}",
            text.len(),
            peak as f64 / f64::from(1 << 20),
            cpu.as_secs_f64()
        );
        if peak > 24 << 20 {
            over.push(format!("{what}: {peak} bytes"));
        }
    }
    assert!(over.is_empty(), "over 24 MiB of heap: {over:?}");
}
