//! The time zones of a calendar's times, as calendar apps write them: a TZID is an IANA
//! name in any case (`europe/berlin`), one behind a prefix (Thunderbird's
//! `/mozilla.org/20070129_1/Europe/Berlin`), a Windows name (Outlook's and Exchange's
//! `W. Europe Standard Time`, through CLDR's windowsZones), or else the name of one of the
//! calendar's own VTIMEZONEs, read from its `X-LIC-LOCATION` or its rules. A wall-clock
//! time is read as RFC 5545 3.3.5 says: one in a gap (a daylight-saving change forward)
//! with the offset before the gap, a repeated one as its first.

use std::sync::Arc;

use chrono::{DateTime, Datelike, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use icalendar::parser::Component;

/// The most onsets a VTIMEZONE's observance gives (yearly rules from 1601, as Outlook
/// writes them, to 2200).
const MAX_ONSETS: usize = 1_000;

/// A zone: an IANA one, or the rules of a VTIMEZONE.
#[derive(Clone, Debug)]
pub(crate) enum Zone {
    Iana(Tz),
    /// The VTIMEZONE's changes of offset, by instant.
    Defined(Arc<[Change]>),
}

/// A change of offset at an instant (a naive UTC time), from one offset to another.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Change {
    at: NaiveDateTime,
    from: TimeDelta,
    to: TimeDelta,
}

impl Zone {
    /// The instant of wall-clock time `local`.
    pub(crate) fn utc(&self, local: NaiveDateTime) -> DateTime<Utc> {
        let offset = match self {
            Zone::Iana(tz) => match tz.from_local_datetime(&local) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => return t.to_utc(),
                // In a gap: the offset of the last wall-clock time before it (a gap is at
                // most a day: Samoa's of 2011).
                LocalResult::None => (1..=48)
                    .find_map(|h| {
                        tz.from_local_datetime(&(local - TimeDelta::hours(h)))
                            .earliest()
                    })
                    .map_or(TimeDelta::zero(), |t| {
                        TimeDelta::seconds(t.offset().fix().local_minus_utc().into())
                    }),
            },
            Zone::Defined(changes) => {
                // The last change whose wall-clock time (in the offset before it) is past.
                let i = changes.partition_point(|c| c.at + c.from <= local);
                match i.checked_sub(1).map(|i| changes[i]) {
                    None => changes.first().map_or(TimeDelta::zero(), |c| c.from),
                    Some(c) if local < c.at + c.to => c.from,
                    Some(c) => c.to,
                }
            }
        };
        Utc.from_utc_datetime(&(local - offset))
    }

    /// The wall-clock time of instant `utc`.
    pub(crate) fn local(&self, utc: DateTime<Utc>) -> NaiveDateTime {
        match self {
            Zone::Iana(tz) => utc.with_timezone(tz).naive_local(),
            Zone::Defined(changes) => {
                let at = utc.naive_utc();
                let i = changes.partition_point(|c| c.at <= at);
                let offset = match i.checked_sub(1) {
                    Some(i) => changes[i].to,
                    None => changes.first().map_or(TimeDelta::zero(), |c| c.from),
                };
                at + offset
            }
        }
    }
}

/// The IANA zone `name` names, matched as IANA matches names (any case), also behind a
/// prefix of `/`-separated words.
pub(crate) fn iana(name: &str) -> Option<Tz> {
    let mut rest = name.trim().trim_matches('"');
    loop {
        let found = chrono_tz::TZ_VARIANTS
            .iter()
            .find(|t| t.name().eq_ignore_ascii_case(rest));
        if let Some(tz) = found {
            return Some(*tz);
        }
        rest = rest.split_once('/')?.1;
    }
}

/// The zone of `tzid`, by its name, else by the calendar's VTIMEZONE of that TZID.
pub(crate) fn resolve(tzid: &str, vtimezones: &[Component<'_>]) -> Result<Zone, String> {
    let windows = || localzone::win_zone_to_iana(tzid.trim(), Some("001"));
    if let Some(tz) = iana(tzid).or_else(|| windows().and_then(iana)) {
        return Ok(Zone::Iana(tz));
    }
    let defined = vtimezones
        .iter()
        .find(|z| prop(z, "TZID").is_some_and(|id| id.eq_ignore_ascii_case(tzid.trim())))
        .ok_or_else(|| {
            format!(
                "TZID {tzid:?} is no IANA or Windows time zone name, and the calendar has no \
                 VTIMEZONE of that TZID"
            )
        })?;
    if let Some(tz) = prop(defined, "X-LIC-LOCATION").and_then(iana) {
        return Ok(Zone::Iana(tz));
    }
    let mut changes = Vec::new();
    for observance in &defined.components {
        let offset = |name: &str| {
            prop(observance, name)
                .and_then(offset)
                .ok_or_else(|| format!("VTIMEZONE {tzid:?}: no valid {name}"))
        };
        let (from, to) = (offset("TZOFFSETFROM")?, offset("TZOFFSETTO")?);
        let start = prop(observance, "DTSTART").unwrap_or_default();
        let mut rules = format!("DTSTART:{start}Z\n");
        for p in observance.properties.iter() {
            let name = p.name.as_str();
            if name == "RRULE" || name == "RDATE" {
                // UNTIL is UTC (RFC 5545 3.6.5): an hour or two off in this frame at most.
                let value = p.val.as_str().trim().to_ascii_uppercase();
                rules.push_str(&format!("{name}:{value}\n"));
            }
        }
        let onsets: rrule::RRuleSet = rules
            .parse()
            .map_err(|e| format!("VTIMEZONE {tzid:?}: {e}"))?;
        let onsets = onsets.limit().into_iter().take(MAX_ONSETS);
        let onsets = onsets.take_while(|d| d.naive_utc().year() <= 2200);
        changes.extend(onsets.map(|d| Change {
            at: d.naive_utc() - from,
            from,
            to,
        }));
    }
    if changes.is_empty() {
        return Err(format!("VTIMEZONE {tzid:?} has no STANDARD or DAYLIGHT"));
    }
    changes.sort_by_key(|c| c.at);
    Ok(Zone::Defined(changes.into()))
}

/// The value of `c`'s property `name`.
fn prop<'a>(c: &'a Component<'_>, name: &str) -> Option<&'a str> {
    c.find_prop(name).map(|p| p.val.as_str().trim())
}

/// A UTC offset as RFC 5545 writes it: `+0100`, `-0800`, `+053000`.
fn offset(text: &str) -> Option<TimeDelta> {
    let (sign, digits) = match text.split_at_checked(1)? {
        ("+", d) => (1, d),
        ("-", d) => (-1, d),
        _ => return None,
    };
    if !matches!(digits.len(), 4 | 6) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let part = |i: usize| {
        digits
            .get(i..i + 2)
            .map_or(Some(0), |p| p.parse::<i64>().ok())
    };
    let seconds = part(0)? * 3600 + part(2)? * 60 + part(4)?;
    (seconds < 24 * 3600).then(|| TimeDelta::seconds(sign * seconds))
}
