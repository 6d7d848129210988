//! Events from an iCal calendar (RFC 5545), parsed by the `icalendar` crate, their
//! recurrences (RRULE, RDATE, EXDATE) expanded by the `rrule` crate.
//!
//! An event asks for placeholders when its SUMMARY or DESCRIPTION says
//! `placeholders: N` (any case, spaces free); other events are ignored, so a shared
//! calendar works. Such an event needs DTSTART and DTEND (DURATION is not read).
//! Times with a TZID are in that IANA zone, times ending in `Z` in UTC, floating times
//! and all-day dates in the schedule's zone (an all-day event runs from its first day's
//! midnight to its DTEND day's midnight).

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use icalendar::{Component, DatePerhapsTime, Property};

use crate::filter::{Filter, Filtered};

/// The most events with a count a calendar may have (each holds its recurrence rules,
/// about 1.2 KiB parsed; [`crate::filter::MAX_KEPT`] bounds their text first).
pub const MAX_EVENTS: usize = 1_000;

/// The most occurrences [`Calendar::occurrences`] steps through, over all events.
pub const MAX_SCAN: usize = 200_000;

/// The word that marks an event's count.
const MARK: &str = "placeholders";

/// One event that asks for placeholders.
#[derive(Clone, Debug)]
pub struct CalendarEvent {
    /// Its SUMMARY (else its UID).
    pub name: String,
    /// The count it asks for.
    pub count: u32,
    /// Its occurrences' starts.
    set: rrule::RRuleSet,
    /// How long each occurrence lasts.
    pub duration: TimeDelta,
}

/// One occurrence of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    /// The event's name.
    pub name: String,
    /// Its count.
    pub count: u32,
    /// Start.
    pub start: DateTime<Utc>,
    /// End (excluded).
    pub end: DateTime<Utc>,
}

/// The events of a calendar that ask for placeholders.
#[derive(Clone, Debug, Default)]
pub struct Calendar {
    /// The events, in the calendar's order.
    pub events: Vec<CalendarEvent>,
}

/// A calendar refused: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("calendar{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct CalendarError {
    /// The line (from 1, of the text as given, folded lines counting each) if known.
    pub line: Option<usize>,
    /// What is wrong.
    pub reason: String,
}

impl Calendar {
    /// Parses `text`; floating times and dates are read in `tz`. Only the VEVENTs that
    /// say `placeholders` are parsed ([`Filter`]).
    pub fn parse(text: &str, tz: Tz) -> Result<Calendar, CalendarError> {
        let mut filter = Filter::new();
        filter.push(text.as_bytes())?;
        Calendar::parse_filtered(&filter.finish()?, tz)
    }

    /// Parses what a [`Filter`] kept; a refusal names the line of the text as read.
    pub fn parse_filtered(kept: &Filtered, tz: Tz) -> Result<Calendar, CalendarError> {
        Calendar::parse_text(&kept.text, tz).map_err(|mut e| {
            e.line = e.line.and_then(|l| kept.original_line(l));
            e
        })
    }

    fn parse_text(text: &str, tz: Tz) -> Result<Calendar, CalendarError> {
        let refuse = |line, reason: String| CalendarError { line, reason };
        // An HTML error page or an empty answer is no calendar with no events.
        if !text
            .lines()
            .any(|l| l.trim().eq_ignore_ascii_case("BEGIN:VCALENDAR"))
        {
            return Err(refuse(
                None,
                "not an iCalendar file: no BEGIN:VCALENDAR line".into(),
            ));
        }
        let parsed: icalendar::Calendar = text
            .parse()
            .map_err(|e: String| refuse(None, format!("not valid iCalendar: {}", e.trim())))?;
        let event_lines: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim().eq_ignore_ascii_case("BEGIN:VEVENT"))
            .map(|(i, _)| i + 1)
            .collect();
        let mut events = Vec::new();
        for (k, event) in parsed.events().enumerate() {
            let begin = event_lines.get(k).copied();
            // The line of `property` in this event, else the event's BEGIN line.
            let line_of = |property: &str| -> Option<usize> {
                let begin = begin?;
                let found = text
                    .lines()
                    .skip(begin)
                    .take_while(|l| !l.trim().eq_ignore_ascii_case("END:VEVENT"));
                found
                    .enumerate()
                    .find(|(_, l)| {
                        let name = l.split([':', ';']).next().unwrap_or("");
                        name.eq_ignore_ascii_case(property)
                    })
                    .map(|(i, _)| begin + 1 + i)
                    .or(Some(begin))
            };
            let name = event
                .get_summary()
                .or(event.get_uid())
                .unwrap_or("(no SUMMARY)")
                .trim()
                .to_string();
            let count = match count_in(event.get_summary()) {
                Ok(Some(c)) => Some(c),
                Ok(None) => count_in(event.get_description())
                    .map_err(|r| refuse(line_of("DESCRIPTION"), format!("event {name:?}: {r}")))?,
                Err(r) => return Err(refuse(line_of("SUMMARY"), format!("event {name:?}: {r}"))),
            };
            let Some(count) = count else { continue };
            if events.len() >= MAX_EVENTS {
                return Err(refuse(
                    begin,
                    format!("more than {MAX_EVENTS} events with a count"),
                ));
            }
            let ev = |property: &str, reason: String| {
                refuse(line_of(property), format!("event {name:?}: {reason}"))
            };
            let props = event.properties();
            let start = props
                .get("DTSTART")
                .ok_or_else(|| ev("SUMMARY", "no DTSTART".into()))?;
            let end = props.get("DTEND").ok_or_else(|| {
                ev(
                    "DTSTART",
                    "no DTEND (DURATION is not read: give the end)".into(),
                )
            })?;
            let start_utc = instant(start, tz).map_err(|r| ev("DTSTART", r))?;
            let end_utc = instant(end, tz).map_err(|r| ev("DTEND", r))?;
            let duration = end_utc - start_utc;
            if duration <= TimeDelta::zero() {
                return Err(ev("DTEND", "DTEND is not after DTSTART".into()));
            }
            let rules = rrule_text(event, start, tz).map_err(|r| ev("DTSTART", r))?;
            let set: rrule::RRuleSet = rules
                .parse()
                .map_err(|e: rrule::RRuleError| ev("RRULE", format!("recurrence refused: {e}")))?;
            events.push(CalendarEvent {
                name,
                count,
                set,
                duration,
            });
        }
        Ok(Calendar { events })
    }

    /// The occurrences that overlap `[from, to]` (start at most `to`, end after `from`),
    /// by start. Recurrences are expanded from each event's DTSTART: more than
    /// [`MAX_SCAN`] occurrences to step through in all (a rule every minute for years)
    /// refuse the calendar rather than spend the CPU.
    pub fn occurrences(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Occurrence>, CalendarError> {
        let mut out = Vec::new();
        let mut scanned = 0usize;
        for e in &self.events {
            for d in &e.set {
                scanned += 1;
                if scanned > MAX_SCAN {
                    return Err(CalendarError {
                        line: None,
                        reason: format!(
                            "more than {MAX_SCAN} occurrences to step through up to {to} \
                             (event {:?} and those before it): shorten the recurrences",
                            e.name
                        ),
                    });
                }
                let start = d.with_timezone(&Utc);
                if start > to {
                    break;
                }
                let end = start + e.duration;
                if end > from {
                    out.push(Occurrence {
                        name: e.name.clone(),
                        count: e.count,
                        start,
                        end,
                    });
                }
            }
        }
        out.sort_by_key(|o| o.start);
        Ok(out)
    }
}

/// `placeholders: N` in `text`: `Ok(None)` when the word is not there.
fn count_in(text: Option<&str>) -> Result<Option<u32>, String> {
    let Some(text) = text else { return Ok(None) };
    let lower = text.to_ascii_lowercase();
    // The word followed by `:` or `=`: a prose mention ("Talk: placeholders in
    // Kubernetes") is no count.
    let marked = lower.match_indices(MARK).find_map(|(at, _)| {
        let rest = lower[at + MARK.len()..].trim_start();
        rest.strip_prefix([':', '='])
    });
    let Some(rest) = marked else { return Ok(None) };
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= crate::baseline::MAX_COUNT)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "`{MARK}:` is not followed by a whole number from 0 to {}",
                crate::baseline::MAX_COUNT
            )
        })
}

/// A DTSTART/DTEND value as an instant: floating times and dates in `tz`.
fn instant(p: &Property, tz: Tz) -> Result<DateTime<Utc>, String> {
    let local = |naive: NaiveDateTime, zone: Tz| {
        zone.from_local_datetime(&naive)
            .earliest()
            .map(|t| t.with_timezone(&Utc))
            .ok_or_else(|| format!("{naive} does not exist in {zone} (a daylight-saving gap)"))
    };
    match DatePerhapsTime::from_property(p) {
        Some(DatePerhapsTime::DateTime(icalendar::CalendarDateTime::Utc(t))) => Ok(t),
        Some(DatePerhapsTime::DateTime(icalendar::CalendarDateTime::WithTimezone {
            date_time,
            tzid,
        })) => {
            let zone: Tz = tzid
                .parse()
                .map_err(|_| format!("TZID {tzid:?} is no IANA time zone name"))?;
            local(date_time, zone)
        }
        Some(DatePerhapsTime::DateTime(icalendar::CalendarDateTime::Floating(naive))) => {
            local(naive, tz)
        }
        Some(DatePerhapsTime::Date(d)) => local(midnight(d), tz),
        None => Err(format!("{:?} is no date or date-time", p.value())),
    }
}

fn midnight(d: NaiveDate) -> NaiveDateTime {
    d.and_hms_opt(0, 0, 0).unwrap_or_default()
}

/// The event's DTSTART, RRULE, RDATE and EXDATE lines as the `rrule` crate reads them,
/// floating times and dates anchored in `tz`.
fn rrule_text(event: &icalendar::Event, start: &Property, tz: Tz) -> Result<String, String> {
    let mut out = String::new();
    out.push_str(&line("DTSTART", start, tz)?);
    match event.property_value("RRULE") {
        Some(rule) => out.push_str(&format!("RRULE:{rule}\n")),
        // Without RRULE, DTSTART is the one occurrence (RFC 5545 3.8.5.3).
        None => out.push_str(&line("RDATE", start, tz)?),
    }
    for name in ["RDATE", "EXDATE"] {
        for p in event.multi_properties().get(name).into_iter().flatten() {
            out.push_str(&line(name, p, tz)?);
        }
    }
    Ok(out)
}

/// One line `NAME[;TZID=..]:VALUES` for the `rrule` crate.
fn line(name: &str, p: &Property, tz: Tz) -> Result<String, String> {
    let tzid = p.params().get("TZID").map(|t| t.value().to_string());
    let value = p.value().trim();
    let date_only = value
        .split(',')
        .all(|v| v.len() == 8 && v.bytes().all(|b| b.is_ascii_digit()));
    if let Some(tzid) = tzid {
        tzid.parse::<Tz>()
            .map_err(|_| format!("TZID {tzid:?} is no IANA time zone name"))?;
        return Ok(format!("{name};TZID={tzid}:{value}\n"));
    }
    if date_only {
        let values: Vec<String> = value.split(',').map(|v| format!("{v}T000000")).collect();
        return Ok(format!("{name};TZID={}:{}\n", tz.name(), values.join(",")));
    }
    if value.split(',').all(|v| v.ends_with('Z')) {
        return Ok(format!("{name}:{value}\n"));
    }
    Ok(format!("{name};TZID={}:{value}\n", tz.name()))
}
