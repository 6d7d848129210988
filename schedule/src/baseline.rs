//! The weekly baseline: windows of local wall-clock time, each with a count.
//!
//! # Grammar
//!
//! ```text
//! baseline = rule *( (";" / newline) rule )     ; empty rules and "#" comment lines are skipped
//! rule     = when "=" count
//! when     = "*"                                ; every day, all day
//!          / days [ " " window ]                ; without a window: all day
//! days     = "*" / span *( "," span )
//! span     = day [ "-" day ]                    ; a range may wrap: Fri-Mon
//! day      = "Mon" / "Tue" / "Wed" / "Thu" / "Fri" / "Sat" / "Sun"   ; any case
//! window   = time "-" time                      ; start < end, local time of the zone
//! time     = HH ":" MM                          ; 00:00 to 24:00
//! count    = 1*DIGIT                            ; 0 to 100000
//! ```
//!
//! Spaces around the tokens are free. Each rule covers, on each of its days, the local
//! times from its start (included) to its end (excluded); a window that crosses midnight
//! is written as two rules (`Fri 22:00-24:00 = 3; Sat 00:00-06:00 = 3`). **The first rule
//! that covers a time gives the count**, so a catch-all `* = N` goes last; a time no rule
//! covers counts 0. Example: `Mon-Fri 08:00-18:00 = 12; * = 2`.

use std::fmt;

use chrono::{Datelike, NaiveDateTime, Timelike};

/// The largest count a rule may give.
pub const MAX_COUNT: u32 = 100_000;

/// The most rules a baseline may have.
pub const MAX_RULES: usize = 1_000;

/// Minutes in a day: a window's end may be 24:00.
const DAY: u16 = 24 * 60;

/// The names of the days, Monday first (chrono's `num_days_from_monday`).
pub const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// One rule: `days [window] = count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Which days it covers, Monday first.
    pub days: [bool; 7],
    /// Start, in minutes after local midnight (included).
    pub from: u16,
    /// End, in minutes after local midnight (excluded); at most 24:00.
    pub to: u16,
    /// The count it gives.
    pub count: u32,
}

impl Rule {
    /// Whether it covers `local`, a wall-clock time of the baseline's zone.
    pub fn covers(&self, local: NaiveDateTime) -> bool {
        let day = local.weekday().num_days_from_monday() as usize;
        let minute = (local.hour() * 60 + local.minute()) as u16;
        self.days[day] && (self.from..self.to).contains(&minute)
    }
}

impl fmt::Display for Rule {
    /// In the grammar's form, days as ranges (`Mon-Fri 08:00-18:00 = 12`, `* = 2`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all_day = self.from == 0 && self.to == DAY;
        if self.days == [true; 7] && all_day {
            return write!(f, "* = {}", self.count);
        }
        if self.days == [true; 7] {
            f.write_str("*")?;
        } else {
            let mut spans = Vec::new();
            let mut d = 0;
            while d < 7 {
                if !self.days[d] {
                    d += 1;
                    continue;
                }
                let start = d;
                while d + 1 < 7 && self.days[d + 1] {
                    d += 1;
                }
                spans.push(if start == d {
                    DAYS[d].to_string()
                } else {
                    format!("{}-{}", DAYS[start], DAYS[d])
                });
                d += 1;
            }
            f.write_str(&spans.join(","))?;
        }
        if !all_day {
            write!(f, " {}-{}", hhmm(self.from), hhmm(self.to))?;
        }
        write!(f, " = {}", self.count)
    }
}

fn hhmm(minutes: u16) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// A weekly baseline: its rules, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    /// The rules; the first that covers a time gives its count.
    pub rules: Vec<Rule>,
}

/// A rule the grammar refuses: which one and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("baseline rule {number} ({text:?}): {reason}")]
pub struct BaselineError {
    /// The rule's number, from 1.
    pub number: usize,
    /// The rule as written.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Baseline {
    /// Parses the grammar of the module's documentation.
    pub fn parse(text: &str) -> Result<Baseline, BaselineError> {
        let mut rules = Vec::new();
        let pieces = text
            .split(['\n', ';'])
            .map(str::trim)
            .filter(|r| !r.is_empty() && !r.starts_with('#'));
        for (i, piece) in pieces.enumerate() {
            let refuse = |reason: String| BaselineError {
                number: i + 1,
                text: piece.to_string(),
                reason,
            };
            if i >= MAX_RULES {
                return Err(refuse(format!("more than {MAX_RULES} rules")));
            }
            rules.push(rule(piece).map_err(refuse)?);
        }
        Ok(Baseline { rules })
    }

    /// The first rule that covers `local`, if any.
    pub fn rule_at(&self, local: NaiveDateTime) -> Option<&Rule> {
        self.rules.iter().find(|r| r.covers(local))
    }

    /// The count at `local`: the first covering rule's, else 0.
    pub fn count_at(&self, local: NaiveDateTime) -> u32 {
        self.rule_at(local).map_or(0, |r| r.count)
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<String> = self.rules.iter().map(ToString::to_string).collect();
        f.write_str(&rules.join("; "))
    }
}

fn rule(text: &str) -> Result<Rule, String> {
    let (when, count) = text
        .split_once('=')
        .ok_or("expected `DAYS [HH:MM-HH:MM] = COUNT`, e.g. `Mon-Fri 08:00-18:00 = 12`")?;
    let count = count.trim();
    // Digits only: `u32::from_str` also takes a sign.
    let count: u32 = (count.bytes().all(|b| b.is_ascii_digit()))
        .then(|| count.parse().ok())
        .flatten()
        .filter(|c| *c <= MAX_COUNT)
        .ok_or_else(|| format!("count {count:?} is not a whole number from 0 to {MAX_COUNT}"))?;
    let mut words = when.split_whitespace();
    let days = words
        .next()
        .ok_or("no days before `=` (use `*` for every day)")?;
    let window = words.next();
    if let Some(extra) = words.next() {
        return Err(format!(
            "unexpected {extra:?}: a rule is days, then at most one window"
        ));
    }
    let days = parse_days(days)?;
    let (from, to) = match window {
        None => (0, DAY),
        Some(w) => parse_window(w)?,
    };
    Ok(Rule {
        days,
        from,
        to,
        count,
    })
}

fn parse_days(text: &str) -> Result<[bool; 7], String> {
    if text == "*" {
        return Ok([true; 7]);
    }
    let mut days = [false; 7];
    for span in text.split(',') {
        match span.split_once('-') {
            None => days[day(span)?] = true,
            Some((a, b)) => {
                let (a, b) = (day(a)?, day(b)?);
                let mut d = a;
                loop {
                    days[d] = true;
                    if d == b {
                        break;
                    }
                    d = (d + 1) % 7;
                }
            }
        }
    }
    Ok(days)
}

fn day(text: &str) -> Result<usize, String> {
    DAYS.iter()
        .position(|d| d.eq_ignore_ascii_case(text))
        .ok_or_else(|| {
            format!(
                "{text:?} is no day: use Mon, Tue, Wed, Thu, Fri, Sat, Sun, a range (Mon-Fri) or *"
            )
        })
}

fn parse_window(text: &str) -> Result<(u16, u16), String> {
    let (a, b) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?} is no window: expected HH:MM-HH:MM"))?;
    let (from, to) = (time(a)?, time(b)?);
    if from >= to {
        return Err(format!(
            "window {text:?} must end after it starts (split one that crosses midnight in two: \
             `Fri 22:00-24:00 = 3; Sat 00:00-06:00 = 3`)"
        ));
    }
    Ok((from, to))
}

fn time(text: &str) -> Result<u16, String> {
    let bad = || format!("{text:?} is no time: expected HH:MM from 00:00 to 24:00");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let (h, m): (u16, u16) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    let t = h * 60 + m;
    (m < 60 && t <= DAY).then_some(t).ok_or_else(bad)
}
