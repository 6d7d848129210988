//! What of an iCalendar text [`Calendar::parse`](crate::Calendar::parse) keeps, taken
//! piece by piece as it is read: the VCALENDAR's BEGIN and END lines and the VEVENTs
//! that say `placeholders`. A shared calendar of megabytes is then never held whole,
//! nor parsed whole by `icalendar` (whose structures take about 13 times the text):
//! what is held is one event at a time and the events with a count, each bounded.
//!
//! This is no parser: it only finds the content lines that open and close components
//! (RFC 5545 3.4, 3.6); the events it keeps are parsed by `icalendar`, verbatim.

use crate::calendar::CalendarError;

/// The most bytes of VEVENTs with a count a calendar may have (each event as read, its
/// folded lines included). About 350 class events with a short description: a
/// timetable's classes are each one event with a recurrence rule.
pub const MAX_KEPT: usize = 128 << 10;

/// The most bytes of one event, or of one line, kept or not.
pub const MAX_EVENT: usize = 64 << 10;

/// The word an event must contain to be kept (any case; the parse reads the count).
const MARK: &[u8] = b"placeholders";

/// Where the filter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the VCALENDAR (or before it): its own properties are dropped.
    Calendar,
    /// In a VEVENT (its VALARMs included).
    Event,
    /// In another component (VTIMEZONE, VTODO ...), this many levels deep: dropped.
    Other(u32),
}

/// The kept text and, for each of its lines, the line of the text as read (from 1).
#[derive(Clone, Debug, Default)]
pub struct Filtered {
    /// BEGIN:VCALENDAR, the VEVENTs with the mark, END:VCALENDAR; lines end in CRLF.
    pub text: String,
    /// The line of the text as read for each line of `text`.
    pub lines: Vec<usize>,
}

impl Filtered {
    /// The line of the text as read for line `line` (from 1) of [`Filtered::text`].
    pub fn original_line(&self, line: usize) -> Option<usize> {
        line.checked_sub(1).and_then(|i| self.lines.get(i).copied())
    }
}

/// Takes a calendar's bytes as they come ([`Filter::push`]) and keeps what
/// [`Filtered`] says, within [`MAX_KEPT`] and [`MAX_EVENT`].
#[derive(Debug)]
pub struct Filter {
    kept: Filtered,
    /// The VEVENT being read, and its lines' numbers.
    event: String,
    event_lines: Vec<usize>,
    /// Bytes of the line not yet ended.
    partial: Vec<u8>,
    /// Lines ended so far.
    line: usize,
    state: State,
}

impl Default for Filter {
    fn default() -> Self {
        Filter::new()
    }
}

fn refuse(line: usize, reason: String) -> CalendarError {
    CalendarError {
        line: Some(line),
        reason,
    }
}

impl Filter {
    /// An empty filter.
    pub fn new() -> Filter {
        Filter {
            kept: Filtered::default(),
            event: String::new(),
            event_lines: Vec::new(),
            partial: Vec::new(),
            line: 0,
            state: State::Calendar,
        }
    }

    /// Takes the next bytes of the text.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), CalendarError> {
        while let Some(at) = bytes.iter().position(|b| *b == b'\n') {
            let (head, rest) = bytes.split_at(at);
            bytes = &rest[1..];
            if self.partial.is_empty() {
                self.line_done(head)?;
            } else {
                self.grow(head)?;
                let line = std::mem::take(&mut self.partial);
                self.line_done(&line)?;
            }
        }
        self.grow(bytes)
    }

    /// The end of the text: what was kept.
    pub fn finish(mut self) -> Result<Filtered, CalendarError> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line_done(&line)?;
        }
        Ok(self.kept)
    }

    fn grow(&mut self, bytes: &[u8]) -> Result<(), CalendarError> {
        if self.partial.len() + bytes.len() > MAX_EVENT {
            return Err(refuse(
                self.line + 1,
                format!("a line longer than {MAX_EVENT} bytes"),
            ));
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, raw: &[u8]) -> Result<(), CalendarError> {
        self.line += 1;
        let n = self.line;
        if raw.len() > MAX_EVENT {
            return Err(refuse(n, format!("a line longer than {MAX_EVENT} bytes")));
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = std::str::from_utf8(raw).map_err(|_| refuse(n, "not UTF-8 text".into()))?;
        // A byte-order mark before the first line is no part of it.
        let text = if n == 1 {
            text.strip_prefix('\u{feff}').unwrap_or(text)
        } else {
            text
        };
        let word = text.trim();
        let is = |s: &str| word.eq_ignore_ascii_case(s);
        let begins = word
            .get(..6)
            .is_some_and(|b| b.eq_ignore_ascii_case("BEGIN:"));
        let ends = word
            .get(..4)
            .is_some_and(|b| b.eq_ignore_ascii_case("END:"));
        match self.state {
            State::Calendar => {
                if is("BEGIN:VEVENT") {
                    self.state = State::Event;
                    self.event.clear();
                    self.event_lines.clear();
                    self.add_to_event(text, n)?;
                } else if is("BEGIN:VCALENDAR") || is("END:VCALENDAR") {
                    self.keep(text, n)?;
                } else if begins {
                    self.state = State::Other(1);
                }
            }
            State::Event => {
                self.add_to_event(text, n)?;
                if is("END:VEVENT") {
                    self.state = State::Calendar;
                    if marked(&self.event) {
                        if self.kept.text.len() + self.event.len() > MAX_KEPT {
                            return Err(refuse(
                                n,
                                format!("more than {MAX_KEPT} bytes of events with a count"),
                            ));
                        }
                        self.kept.text.push_str(&self.event);
                        self.kept.lines.append(&mut self.event_lines);
                    }
                    self.event = String::new();
                    self.event_lines = Vec::new();
                }
            }
            State::Other(d) if begins => self.state = State::Other(d + 1),
            State::Other(1) if ends => self.state = State::Calendar,
            State::Other(d) if ends => self.state = State::Other(d - 1),
            State::Other(_) => {}
        }
        Ok(())
    }

    fn add_to_event(&mut self, text: &str, n: usize) -> Result<(), CalendarError> {
        if self.event.len() + text.len() + 2 > MAX_EVENT {
            let begin = self.event_lines.first().copied().unwrap_or(n);
            return Err(refuse(
                begin,
                format!("an event longer than {MAX_EVENT} bytes"),
            ));
        }
        self.event.push_str(text);
        self.event.push_str("\r\n");
        self.event_lines.push(n);
        Ok(())
    }

    fn keep(&mut self, text: &str, n: usize) -> Result<(), CalendarError> {
        if self.kept.text.len() + text.len() + 2 > MAX_KEPT {
            return Err(refuse(
                n,
                format!("more than {MAX_KEPT} bytes of events with a count"),
            ));
        }
        self.kept.text.push_str(text);
        self.kept.text.push_str("\r\n");
        self.kept.lines.push(n);
        Ok(())
    }
}

/// Whether `event` (CRLF-ended lines) says [`MARK`], its folded lines unfolded.
fn marked(event: &str) -> bool {
    let mut unfolded: Vec<u8> = Vec::with_capacity(event.len());
    for line in event.split("\r\n") {
        match line.strip_prefix([' ', '\t']) {
            Some(rest) => unfolded.extend_from_slice(rest.as_bytes()),
            None => {
                unfolded.push(b'\n');
                unfolded.extend_from_slice(line.as_bytes());
            }
        }
    }
    unfolded.make_ascii_lowercase();
    unfolded.windows(MARK.len()).any(|w| w == MARK)
}
