//! Events from an iCal calendar (RFC 5545), each parsed by the `icalendar` crate on its
//! own, their recurrences (RRULE, RDATE, EXDATE) expanded by the `rrule` crate.
//!
//! An event asks for placeholders when its SUMMARY or DESCRIPTION says
//! `placeholders: N` (any case, spaces free), for the default target, or
//! `placeholders[NAME]: N` for the target named NAME; other events are ignored, so a
//! shared calendar works. Such an event needs DTSTART and DTEND (DURATION is not read).
//! Times with a TZID are in that zone ([`crate::zone`]: IANA, Windows or the calendar's
//! VTIMEZONE), times ending in `Z` in UTC, floating times and all-day dates in the
//! schedule's zone (an all-day event runs from its first day's midnight to its DTEND
//! day's midnight). An event that cannot be read is skipped with its line and reason;
//! the others count.
//!
//! Recurrences are expanded in the event's wall-clock time (UNTIL, RDATE and EXDATE
//! brought to it), then each occurrence is read in its zone. An occurrence holds its
//! event's name shared, not copied; an expansion holds at most [`MAX_HELD`] of them.

use std::sync::Arc;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use icalendar::parser::{Component, Property, read_components};

pub use crate::filter::CalendarError;
use crate::filter::{Filter, Filtered, Kept};
use crate::zone::{self, Zone};

/// The most events with a count a calendar may have (each holds its recurrence rules,
/// about 1.2 KiB parsed; [`crate::filter::MAX_KEPT`] bounds their text first).
pub const MAX_EVENTS: usize = 1_000;

/// The most occurrences of one event an expansion steps through, from its DTSTART.
pub const MAX_SCAN: usize = 200_000;

/// The most occurrences an expansion holds: past them its span is cut short.
pub const MAX_HELD: usize = 50_000;

/// The most characters of an event's name kept (logs and Events show it).
const MAX_NAME: usize = 200;

/// The word that marks an event's count.
const MARK: &str = "placeholders";

/// The most characters of a target's name in `placeholders[NAME]` (a DNS label).
const MAX_POOL: usize = 63;

/// A target's name in `placeholders[NAME]: N`, lower case; `None`: the default target.
pub type Pool = Option<Arc<str>>;

/// One event that asks for placeholders.
#[derive(Clone, Debug)]
pub struct CalendarEvent {
    /// Its SUMMARY (else its UID), at most 200 characters.
    pub name: Arc<str>,
    /// The counts it asks for, each for a target (at most one each).
    pub counts: Vec<(Pool, u32)>,
    /// The line of its BEGIN, in the text as read.
    pub line: Option<usize>,
    /// Its occurrences' starts, in its zone's wall-clock time (written as UTC).
    set: rrule::RRuleSet,
    zone: Zone,
    /// How long each occurrence lasts.
    pub duration: TimeDelta,
}

/// One occurrence of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    /// The event's name (shared with the event).
    pub name: Arc<str>,
    /// The target it counts for.
    pub pool: Pool,
    /// Its count.
    pub count: u32,
    /// Start.
    pub start: DateTime<Utc>,
    /// End (excluded).
    pub end: DateTime<Utc>,
}

/// The events of a calendar that ask for placeholders, and those skipped.
#[derive(Clone, Debug, Default)]
pub struct Calendar {
    /// The events, in the calendar's order.
    pub events: Vec<CalendarEvent>,
    /// The events that say `placeholders` but cannot be read (and VTIMEZONEs that
    /// cannot be kept), with their line and reason.
    pub skipped: Vec<CalendarError>,
}

/// The occurrences over a span, as [`Calendar::expand`] found them.
#[derive(Clone, Debug)]
pub struct Expansion {
    /// By start.
    pub occurrences: Vec<Occurrence>,
    /// Every occurrence starting before this is there: the span's end, or earlier where
    /// more than [`MAX_HELD`] were found.
    pub until: DateTime<Utc>,
    /// Events not expanded, with their line and reason.
    pub skipped: Vec<CalendarError>,
}

impl Calendar {
    /// Parses `text`; floating times and dates are read in `tz`. Only the VEVENTs that
    /// say `placeholders` are parsed ([`Filter`]).
    pub fn parse(text: &str, tz: Tz) -> Result<Calendar, CalendarError> {
        let mut filter = Filter::new();
        filter.push(text.as_bytes())?;
        Calendar::parse_filtered(&filter.finish()?, tz)
    }

    /// Parses what a [`Filter`] kept, event by event: refused only with more than
    /// [`MAX_EVENTS`] events; an event that cannot be read is skipped.
    pub fn parse_filtered(kept: &Filtered, tz: Tz) -> Result<Calendar, CalendarError> {
        if let Some(k) = kept.events.get(MAX_EVENTS) {
            return Err(CalendarError {
                line: k.lines.first().copied(),
                reason: format!("more than {MAX_EVENTS} events with a count"),
            });
        }
        let vtimezones: Vec<Component<'_>> = kept
            .zones
            .iter()
            .filter_map(|z| read_components(&z.text).ok()?.into_iter().next())
            .collect();
        let mut zones: Vec<(String, Result<Zone, String>)> = Vec::new();
        let mut zone_of = |tzid: &str| -> Result<Zone, String> {
            if let Some((_, z)) = zones.iter().find(|(id, _)| *id == tzid) {
                return z.clone();
            }
            let z = zone::resolve(tzid, &vtimezones);
            zones.push((tzid.to_string(), z.clone()));
            z
        };
        let mut cal = Calendar {
            events: Vec::new(),
            skipped: kept.skipped.clone(),
        };
        for k in &kept.events {
            match event(k, tz, &mut zone_of) {
                Ok(Some(e)) => cal.events.push(e),
                Ok(None) => {}
                Err(e) => cal.skipped.push(e),
            }
        }
        Ok(cal)
    }

    /// The occurrences that overlap `[from, to]` (start at most `to`, end after `from`),
    /// by start; refused where an event could not be expanded or more than
    /// [`MAX_HELD`] were found.
    pub fn occurrences(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Occurrence>, CalendarError> {
        let e = self.expand(from, to, &mut || true);
        if let Some(skipped) = e.skipped.into_iter().next() {
            return Err(skipped);
        }
        if e.until <= to {
            return Err(CalendarError {
                line: None,
                reason: format!("more than {MAX_HELD} occurrences from {from} to {to}"),
            });
        }
        Ok(e.occurrences)
    }

    /// The occurrences that overlap `[from, to]`, by start, at most [`MAX_HELD`] (the
    /// span is cut short past them). Each event's recurrences are stepped through from
    /// its DTSTART to the span's end: an event with more than [`MAX_SCAN`] is skipped.
    /// `within_budget` is asked before each event and every 4,096 steps: once it says
    /// no, the events left are skipped.
    pub fn expand(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        within_budget: &mut dyn FnMut() -> bool,
    ) -> Expansion {
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        let mut until = to + TimeDelta::nanoseconds(1);
        let skip = |e: &CalendarEvent, reason: String| CalendarError {
            line: e.line,
            reason: format!("event {:?}: {reason}", e.name),
        };
        let out_of_time = |e: &CalendarEvent, n: usize| {
            let n = self.events.len() - n - 1;
            skip(
                e,
                format!("not expanded, nor the {n} after it: out of time"),
            )
        };
        'events: for (n, e) in self.events.iter().enumerate() {
            if !within_budget() {
                skipped.push(out_of_time(e, n));
                break;
            }
            // Every local time past this is past the span (offsets change by an hour or
            // two, a gap's times read with the offset before it).
            let last = e.zone.local(until) + TimeDelta::hours(6);
            for (steps, d) in (&e.set).into_iter().enumerate() {
                let local = d.naive_utc();
                if local > last {
                    break;
                }
                let give_up = match steps {
                    MAX_SCAN => Some(skip(
                        e,
                        format!(
                            "more than {MAX_SCAN} occurrences to step through up to {to}: \
                             shorten the recurrence (a later DTSTART)"
                        ),
                    )),
                    s if s % 4096 == 4095 && !within_budget() => Some(out_of_time(e, n)),
                    _ => None,
                };
                if let Some(reason) = give_up {
                    out.retain(|o: &Occurrence| !Arc::ptr_eq(&o.name, &e.name));
                    let done = reason.reason.ends_with("out of time");
                    skipped.push(reason);
                    if done {
                        break 'events;
                    }
                    continue 'events;
                }
                let start = e.zone.utc(local);
                let end = start + e.duration;
                if start < until && end > from {
                    out.extend(e.counts.iter().map(|(pool, count)| Occurrence {
                        name: Arc::clone(&e.name),
                        pool: pool.clone(),
                        count: *count,
                        start,
                        end,
                    }));
                }
                if out.len() > 2 * MAX_HELD {
                    until = cut(&mut out);
                }
            }
        }
        if out.len() > MAX_HELD {
            until = cut(&mut out);
        }
        out.sort_by_key(|o| o.start);
        Expansion {
            occurrences: out,
            until,
            skipped,
        }
    }
}

/// Keeps the [`MAX_HELD`] earliest of `out` (fewer where starts tie); returns the start
/// of the first dropped.
fn cut(out: &mut Vec<Occurrence>) -> DateTime<Utc> {
    out.sort_by_key(|o| o.start);
    let boundary = out[MAX_HELD].start;
    out.retain(|o| o.start < boundary);
    boundary
}

/// One kept VEVENT: `None` when it has no count.
fn event(
    kept: &Kept,
    tz: Tz,
    zone_of: &mut dyn FnMut(&str) -> Result<Zone, String>,
) -> Result<Option<CalendarEvent>, CalendarError> {
    let begin = kept.lines.first().copied();
    let invalid = |e: String| CalendarError {
        line: begin,
        reason: format!(
            "not valid iCalendar: {}",
            e.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
        ),
    };
    let c = read_components(&kept.text).map_err(invalid)?;
    let c = c.into_iter().next().ok_or_else(|| invalid(String::new()))?;
    // The line of `property` in this event, else its BEGIN line.
    let line_of = |property: &str| {
        let mut names = kept.text.split("\r\n").map(|l| l.split([':', ';']).next());
        let at = names.position(|n| n == Some(property));
        at.and_then(|i| kept.lines.get(i).copied()).or(begin)
    };
    let text = |name: &str| c.find_prop(name).map(|p| unescape(p.val.as_str()));
    let mut name = text("SUMMARY").or_else(|| text("UID"));
    let name = name.get_or_insert_with(|| "(no SUMMARY)".into()).trim();
    let name: Arc<str> = match name.char_indices().nth(MAX_NAME) {
        Some((at, _)) => format!("{}…", &name[..at]).into(),
        None => name.into(),
    };
    let refuse = |property: &str, reason: String| CalendarError {
        line: line_of(property),
        reason: format!("event {name:?}: {reason}"),
    };
    // A target named in the SUMMARY takes its count from there.
    let mut counts = counts_in(text("SUMMARY").as_deref()).map_err(|r| refuse("SUMMARY", r))?;
    for (pool, count) in
        counts_in(text("DESCRIPTION").as_deref()).map_err(|r| refuse("DESCRIPTION", r))?
    {
        if !counts.iter().any(|(p, _)| *p == pool) {
            counts.push((pool, count));
        }
    }
    if counts.is_empty() {
        return Ok(None);
    }
    let floating = Zone::Iana(tz);
    let mut when = |property: &str| {
        let p = c.find_prop(property);
        let p = p.ok_or_else(|| match property {
            "DTEND" => refuse(
                "DTSTART",
                "no DTEND (DURATION is not read: give the end)".into(),
            ),
            _ => refuse("SUMMARY", format!("no {property}")),
        })?;
        let value = p.val.as_str().trim();
        time(value, tzid(p), &floating, zone_of).map_err(|r| refuse(property, r))
    };
    let (start, zone) = when("DTSTART")?;
    let (end, end_zone) = when("DTEND")?;
    let duration = end_zone.utc(end) - zone.utc(start);
    if duration <= TimeDelta::zero() {
        return Err(refuse("DTEND", "DTEND is not after DTSTART".into()));
    }
    let rules = recurrence(&c, start, &zone, &floating, zone_of).map_err(|r| refuse("RRULE", r))?;
    let set: rrule::RRuleSet = rules
        .parse()
        .map_err(|e: rrule::RRuleError| refuse("RRULE", format!("recurrence refused: {e}")))?;
    let rdates = c.properties.iter().any(|p| p.name == "RDATE");
    let rrules = c.properties.iter().filter(|p| p.name == "RRULE");
    if !rdates && rrules.clone().next().is_some() && rrules.clone().all(never_occurs) {
        return Err(refuse(
            "RRULE",
            "its recurrence never occurs: no day is in its BYMONTH, BYMONTHDAY, BYYEARDAY and \
             BYDAY at once"
                .into(),
        ));
    }
    Ok(Some(CalendarEvent {
        name: name.clone(),
        counts,
        line: begin,
        set: set.limit(),
        zone,
        duration,
    }))
}

fn tzid<'a>(p: &'a Property<'_>) -> Option<&'a str> {
    let param = p.params.iter().find(|x| x.key == "TZID")?;
    param.val.as_ref().map(|v| v.as_str())
}

/// A DATE or DATE-TIME value and its zone: `Z` UTC, a TZID its zone, else `floating`
/// (a date at its midnight).
fn time(
    value: &str,
    tzid: Option<&str>,
    floating: &Zone,
    zone_of: &mut dyn FnMut(&str) -> Result<Zone, String>,
) -> Result<(NaiveDateTime, Zone), String> {
    let bad = || format!("{value:?} is no date or date-time");
    if value.len() == 8 {
        let date = NaiveDate::parse_from_str(value, "%Y%m%d").map_err(|_| bad())?;
        return Ok((date.and_time(chrono::NaiveTime::MIN), floating.clone()));
    }
    let (naive, utc) = match value.strip_suffix(['Z', 'z']) {
        Some(v) => (v, true),
        None => (value, false),
    };
    let t = NaiveDateTime::parse_from_str(naive, "%Y%m%dT%H%M%S").map_err(|_| bad())?;
    let zone = match (utc, tzid) {
        (true, _) => Zone::Iana(Tz::UTC),
        (false, Some(id)) => zone_of(id)?,
        (false, None) => floating.clone(),
    };
    Ok((t, zone))
}

/// The event's DTSTART, RRULE, RDATE and EXDATE lines for the `rrule` crate, in the
/// event's wall-clock time written as UTC (rrule knows no VTIMEZONE): UNTIL, RDATE and
/// EXDATE brought to it from theirs, a date UNTIL its day's end (RFC 5545 3.3.10: UNTIL
/// takes DTSTART's form).
fn recurrence(
    c: &Component<'_>,
    start: NaiveDateTime,
    zone: &Zone,
    floating: &Zone,
    zone_of: &mut dyn FnMut(&str) -> Result<Zone, String>,
) -> Result<String, String> {
    let fmt = |t: NaiveDateTime| t.format("%Y%m%dT%H%M%SZ").to_string();
    let mut to_frame = |value: &str, tzid: Option<&str>| -> Result<NaiveDateTime, String> {
        let value = value.trim();
        let (t, z) = time(value, tzid, floating, zone_of)?;
        // A date or a floating time is the event's own wall-clock time.
        let own = value.len() == 8 || (tzid.is_none() && !value.ends_with(['Z', 'z']));
        Ok(if own { t } else { zone.local(z.utc(t)) })
    };
    let mut out = format!("DTSTART:{}\n", fmt(start));
    let mut rules = 0;
    for p in c.properties.iter() {
        let (name, value) = (p.name.as_str(), p.val.as_str().trim());
        match name {
            "RRULE" => {
                rules += 1;
                let mut parts = Vec::new();
                for part in value.to_ascii_uppercase().split(';') {
                    parts.push(match part.strip_prefix("UNTIL=") {
                        Some(u) if u.len() == 8 => {
                            let day = to_frame(u, None)?;
                            format!("UNTIL={}", fmt(day + TimeDelta::seconds(86_399)))
                        }
                        Some(u) => format!("UNTIL={}", fmt(to_frame(u, None)?)),
                        None => part.to_string(),
                    });
                }
                out.push_str(&format!("RRULE:{}\n", parts.join(";")));
            }
            "RDATE" | "EXDATE" => {
                let mut times = Vec::new();
                // A PERIOD (RDATE;VALUE=PERIOD) counts from its start.
                for v in value.split(',').map(|v| v.split('/').next().unwrap_or(v)) {
                    times.push(fmt(to_frame(v, tzid(p))?));
                }
                out.push_str(&format!("{name}:{}\n", times.join(",")));
            }
            _ => {}
        }
    }
    // Without RRULE, DTSTART is the one occurrence (RFC 5545 3.8.5.3).
    if rules == 0 {
        out.push_str(&format!("RDATE:{}\n", fmt(start)));
    }
    Ok(out)
}

/// Whether the day filters of `rule` (BYMONTH, BYMONTHDAY, BYYEARDAY and BYDAY's
/// weekdays) leave no day of 28 years (each date on each weekday, leap years too): such
/// a rule never occurs, and `rrule` would step to the year 9999 looking for one.
fn never_occurs(rule: &Property<'_>) -> bool {
    let rule = rule.val.as_str().to_ascii_uppercase();
    let list = |key: &str| -> Option<Vec<i32>> {
        let values = rule
            .split(';')
            .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))?;
        Some(values.split(',').filter_map(|v| v.parse().ok()).collect())
    };
    let (months, month_days, year_days) = (list("BYMONTH"), list("BYMONTHDAY"), list("BYYEARDAY"));
    let weekdays: Option<Vec<u32>> = rule.split(';').find_map(|p| {
        let days = p.strip_prefix("BYDAY=")?.split(',');
        let names = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
        Some(
            days.filter_map(|d| names.iter().position(|n| d.ends_with(n)))
                .map(|i| i as u32)
                .collect(),
        )
    });
    if months.is_none() && month_days.is_none() && year_days.is_none() {
        return false;
    }
    let is = |list: &Option<Vec<i32>>, value: u32, of: u32| {
        let (value, of) = (value as i32, of as i32);
        list.as_ref()
            .is_none_or(|l| l.iter().any(|v| *v == value || *v == value - of - 1))
    };
    let first = NaiveDate::from_ymd_opt(2024, 1, 1).unwrap_or_default();
    !first.iter_days().take(28 * 366).any(|d| {
        let year_len = if d.leap_year() { 366 } else { 365 };
        is(&months, d.month(), 12)
            && is(&month_days, d.day(), d.num_days_in_month().into())
            && is(&year_days, d.ordinal(), year_len)
            && weekdays
                .as_ref()
                .is_none_or(|w| w.contains(&d.weekday().num_days_from_monday()))
    })
}

/// A TEXT value unescaped (RFC 5545 3.3.11).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next() {
                Some('n' | 'N') => '\n',
                Some(c) => c,
                None => break,
            },
            c => c,
        });
    }
    out
}

/// Each `placeholders: N` and `placeholders[NAME]: N` in `text`, the first of each
/// target; none when the word is not followed by `:` or `=` (a prose mention).
fn counts_in(text: Option<&str>) -> Result<Vec<(Pool, u32)>, String> {
    let mut counts: Vec<(Pool, u32)> = Vec::new();
    let lower = text.unwrap_or_default().to_ascii_lowercase();
    for (at, _) in lower.match_indices(MARK) {
        let rest = lower[at + MARK.len()..].trim_start();
        let (pool, rest) = match rest.strip_prefix('[') {
            Some(named) => {
                let Some((pool, rest)) = named.split_once(']') else {
                    continue;
                };
                (Some(pool.trim()), rest.trim_start())
            }
            None => (None, rest),
        };
        // The word followed by `:` or `=`: a prose mention ("Talk: placeholders in
        // Kubernetes") is no count.
        let Some(rest) = rest.strip_prefix([':', '=']) else {
            continue;
        };
        let mark = pool.map_or(MARK.to_string(), |p| format!("{MARK}[{p}]"));
        if let Some(p) = pool
            && (p.is_empty()
                || p.len() > MAX_POOL
                || !p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                || p.starts_with('-')
                || p.ends_with('-'))
        {
            return Err(format!(
                "`{mark}`: a target's name is a DNS label (a-z, 0-9, -), such as gpu"
            ));
        }
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let max = crate::baseline::MAX_COUNT;
        let count = digits.parse::<u32>().ok().filter(|n| *n <= max);
        let count = count.ok_or_else(|| {
            format!("`{mark}:` is not followed by a whole number from 0 to {max}")
        })?;
        let pool: Pool = pool.map(Into::into);
        if !counts.iter().any(|(p, _)| *p == pool) {
            counts.push((pool, count));
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests;
