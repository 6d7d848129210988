//! `selfdestruct-schedule`, the calendar controller: its pure core, how many placeholders
//! are in force at a given instant from a weekly [`Baseline`] and the events of a
//! [`Calendar`], and its I/O shell ([`controller`], run by `src/main.rs`).
//!
//! [`Schedule::in_force`] takes the time as an argument: no clock, no I/O. The
//! controller and the simulator (`simulate --schedule`) both call it.
//!
//! The count in force at `now` is the largest of the baseline's count at `now`'s local
//! time and the counts of the calendar events that are running at `now` or start within
//! the lead time after it (overlapping events: the largest, not the sum), then raised
//! to the minimum and capped at the maximum. An event stops counting at its end.
//!
//! An event may ask for several targets at once (`placeholders: 40` for the default
//! target, `placeholders[gpu]: 4` for the one named `gpu`): each target's count in force
//! reads only its own ([`Schedule::in_force_for`]).
#![warn(missing_docs)]

pub mod baseline;
pub mod calendar;
pub mod controller;
pub mod filter;
mod zone;

use std::fmt;
use std::time::Duration;

pub use chrono;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
pub use chrono_tz::Tz;

pub use baseline::{Baseline, BaselineError, Rule};
pub use calendar::{Calendar, CalendarError, Expansion, Occurrence, Pool};
pub use filter::{Filter, Filtered, Kept};

/// The schedule's settings: the baseline, its zone, the lead time and the bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The weekly baseline.
    pub baseline: Baseline,
    /// The zone of the baseline's windows (and of the calendar's floating times).
    pub tz: Tz,
    /// How long before an event its count applies (node boot plus image pull).
    pub lead: Duration,
    /// The least count.
    pub min: u32,
    /// The largest count.
    pub max: u32,
}

/// Why the count in force is what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A baseline rule (as written in the grammar's form).
    Window(String),
    /// No baseline rule covers the time and no event counts: 0.
    NoRule,
    /// A calendar event's occurrence (running, or starting within the lead time).
    Event(Occurrence),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Window(rule) => write!(f, "baseline window `{rule}`"),
            Cause::NoRule => f.write_str("no baseline window (0)"),
            Cause::Event(o) => write!(
                f,
                "calendar event {:?} ({} to {} UTC, {})",
                o.name,
                o.start.format("%Y-%m-%d %H:%M"),
                o.end.format("%Y-%m-%d %H:%M"),
                Asked(o)
            ),
        }
    }
}

/// The count in force and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InForce {
    /// The count, within the bounds.
    pub count: u32,
    /// The rule or event that gave the count before the bounds.
    pub cause: Cause,
    /// The count before the bounds, when a bound changed it.
    pub bounded_from: Option<u32>,
}

impl fmt::Display for InForce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cause)?;
        match self.bounded_from {
            Some(c) if c < self.count => write!(f, ", {c} raised to the minimum {}", self.count),
            Some(c) => write!(f, ", {c} capped at the maximum {}", self.count),
            None => Ok(()),
        }
    }
}

/// An occurrence's count as its event writes it: `placeholders: 40`, `placeholders[gpu]: 4`.
pub struct Asked<'a>(pub &'a Occurrence);

impl fmt::Display for Asked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.pool {
            Some(pool) => write!(f, "placeholders[{pool}]: {}", self.0.count),
            None => write!(f, "placeholders: {}", self.0.count),
        }
    }
}

impl Schedule {
    /// The count in force at `now` for the default target (the events' `placeholders:
    /// N`); see [`Schedule::in_force_for`].
    pub fn in_force(&self, occurrences: &[Occurrence], now: DateTime<Utc>) -> InForce {
        self.in_force_for(None, occurrences, now)
    }

    /// The count in force at `now` for the target `pool` names (`None`: the default),
    /// with its cause. Events win ties with the baseline. `occurrences` are the
    /// calendar's ([`Calendar::occurrences`]) over a span that covers `now` to `now` plus
    /// the lead time; others, and those of other targets, are ignored.
    pub fn in_force_for(
        &self,
        pool: Option<&str>,
        occurrences: &[Occurrence],
        now: DateTime<Utc>,
    ) -> InForce {
        let local = now.with_timezone(&self.tz).naive_local();
        let (mut count, mut cause) = match self.baseline.rule_at(local) {
            Some(r) => (r.count, Cause::Window(r.to_string())),
            None => (0, Cause::NoRule),
        };
        let lead = TimeDelta::from_std(self.lead).unwrap_or(TimeDelta::MAX);
        let horizon = now.checked_add_signed(lead).unwrap_or(now);
        for o in occurrences {
            // Running at `now` or starting within the lead time (an occurrence
            // ending exactly at `now` is over).
            let counts = o.start <= horizon && o.end > now && o.pool.as_deref() == pool;
            if counts && (o.count > count || (o.count == count && cause_is_baseline(&cause))) {
                count = o.count;
                cause = Cause::Event(o.clone());
            }
        }
        let bounded = count.clamp(self.min, self.max.max(self.min));
        InForce {
            count: bounded,
            cause,
            bounded_from: (bounded != count).then_some(count),
        }
    }

    /// The count in force for `pool` from `from` to `to` at each change, the first at
    /// `from`: evaluated at every minute (the baseline's windows are whole minutes) and at
    /// each occurrence's start less the lead time and its end.
    pub fn changes(
        &self,
        pool: Option<&str>,
        occurrences: &[Occurrence],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Vec<(DateTime<Utc>, InForce)> {
        let lead = TimeDelta::from_std(self.lead).unwrap_or(TimeDelta::MAX / 4);
        let mut mine: Vec<&Occurrence> = occurrences
            .iter()
            .filter(|o| o.pool.as_deref() == pool)
            .collect();
        mine.sort_by_key(|o| o.start);
        let mut at: Vec<DateTime<Utc>> =
            mine.iter().flat_map(|o| [o.start - lead, o.end]).collect();
        let minute = TimeDelta::minutes(1);
        let mut t = from.duration_trunc(minute).unwrap_or(from);
        at.push(from);
        while t < to {
            at.push(t);
            t += minute;
        }
        at.retain(|t| (from..to).contains(t));
        at.sort();
        at.dedup();
        // The occurrences that may count: started less the lead time, not ended.
        let (mut next, mut active, mut out) = (0, Vec::new(), Vec::<(_, InForce)>::new());
        for t in at {
            while let Some(o) = mine.get(next)
                && o.start - lead <= t
            {
                active.push((*o).clone());
                next += 1;
            }
            active.retain(|o| o.end > t);
            let f = self.in_force_for(pool, &active, t);
            if out.last().is_none_or(|(_, last)| last.count != f.count) {
                out.push((t, f));
            }
        }
        out
    }
}

fn cause_is_baseline(c: &Cause) -> bool {
    !matches!(c, Cause::Event(_))
}
