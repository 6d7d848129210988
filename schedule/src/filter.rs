//! What of an iCalendar text [`Calendar::parse`](crate::Calendar::parse) keeps, taken
//! piece by piece as it is read: the VEVENTs that say `placeholders` and the VTIMEZONEs
//! (whose TZIDs the events may name). A shared calendar of megabytes is then never held
//! whole, nor parsed whole by `icalendar` (whose structures take about 13 times the
//! text): what is held is one component at a time and those kept, each bounded.
//!
//! This is no parser: it undoes the folding of lines (RFC 5545 3.1), writes the names of
//! properties and parameters in upper case (they are case-insensitive, 2.1) and finds the
//! lines that open and close components (3.4, 3.6); the components kept are parsed by
//! `icalendar`. A component that cannot be kept (too long, not UTF-8) is skipped with its
//! line and reason, and the others are kept.

/// The most bytes of kept components a calendar may have (VEVENTs with a count and
/// VTIMEZONEs, each as unfolded). About 350 class events with a short description: a
/// timetable's classes are each one event with a recurrence rule.
pub const MAX_KEPT: usize = 128 << 10;

/// The most bytes of one component, or of one line, kept or not.
pub const MAX_EVENT: usize = 64 << 10;

/// The word an event must contain to be kept (any case; the parse reads the count).
const MARK: &[u8] = b"placeholders";

/// One component kept: its lines, unfolded, names in upper case, each ending in CRLF.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// The component's text, from its BEGIN line to its END line.
    pub text: String,
    /// For each line of `text`, the line of the text as read where it starts (from 1).
    pub lines: Vec<usize>,
}

/// What a [`Filter`] kept.
#[derive(Clone, Debug, Default)]
pub struct Filtered {
    /// The VEVENTs that say `placeholders`, in the calendar's order.
    pub events: Vec<Kept>,
    /// The VTIMEZONEs.
    pub zones: Vec<Kept>,
    /// The components skipped, with their line and reason.
    pub skipped: Vec<CalendarError>,
}

/// Where the filter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the VCALENDAR (or before it): its own properties are dropped.
    Calendar,
    /// In a VEVENT (`true`) or a VTIMEZONE, this many levels deep (VALARMs, STANDARD...).
    Kept(bool, u32),
    /// In another component (VTODO, VJOURNAL ...), this many levels deep: dropped.
    Other(u32),
}

/// Takes a calendar's bytes as they come ([`Filter::push`]) and keeps what
/// [`Filtered`] says, within [`MAX_KEPT`] and [`MAX_EVENT`].
#[derive(Debug)]
pub struct Filter {
    kept: Filtered,
    size: usize,
    /// The component being read, whether it says the mark, and why it cannot be kept.
    current: Kept,
    marked: bool,
    bad: Option<CalendarError>,
    /// The line being unfolded and where it starts.
    logical: Vec<u8>,
    logical_at: usize,
    /// Bytes of the line not yet ended; whether it is too long (then dropped to its end).
    partial: Vec<u8>,
    overlong: bool,
    /// Lines ended so far.
    line: usize,
    state: State,
    calendar: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Filter::new()
    }
}

/// A calendar or an event refused: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("calendar{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct CalendarError {
    /// The line (from 1, of the text as given, folded lines counting each) if known.
    pub line: Option<usize>,
    /// What is wrong.
    pub reason: String,
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
            size: 0,
            current: Kept::default(),
            marked: false,
            bad: None,
            logical: Vec::new(),
            logical_at: 0,
            partial: Vec::new(),
            overlong: false,
            line: 0,
            state: State::Calendar,
            calendar: false,
        }
    }

    /// Takes the next bytes of the text.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), CalendarError> {
        while let Some(at) = bytes.iter().position(|b| *b == b'\n') {
            self.grow(&bytes[..at]);
            bytes = &bytes[at + 1..];
            let line = std::mem::take(&mut self.partial);
            self.physical_line(line)?;
            self.overlong = false;
        }
        self.grow(bytes);
        Ok(())
    }

    /// The end of the text: what was kept. A text with no VCALENDAR is refused.
    pub fn finish(mut self) -> Result<Filtered, CalendarError> {
        if !self.partial.is_empty() || self.overlong {
            let line = std::mem::take(&mut self.partial);
            self.physical_line(line)?;
        }
        self.logical_done()?;
        if !self.calendar {
            return Err(CalendarError {
                line: None,
                reason: "not an iCalendar file: no BEGIN:VCALENDAR line".into(),
            });
        }
        Ok(self.kept)
    }

    fn grow(&mut self, bytes: &[u8]) {
        if self.partial.len() + bytes.len() > MAX_EVENT {
            self.overlong = true;
            self.partial.clear();
        } else if !self.overlong {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// A line as read: the next part of the line being unfolded, or the start of one.
    fn physical_line(&mut self, mut line: Vec<u8>) -> Result<(), CalendarError> {
        self.line += 1;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        // A byte-order mark before the first line is no part of it.
        if self.line == 1 && line.starts_with("\u{feff}".as_bytes()) {
            line.drain(..3);
        }
        let continued = matches!(line.first(), Some(b' ' | b'\t'));
        if !continued {
            self.logical_done()?;
            self.logical_at = self.line;
        }
        let part = if continued { &line[1..] } else { &line[..] };
        if self.overlong || self.logical.len() + part.len() > MAX_EVENT {
            let at = self.logical_at;
            self.defect(at, format!("a line longer than {MAX_EVENT} bytes"));
            self.logical.clear();
        } else {
            self.logical.extend_from_slice(part);
        }
        Ok(())
    }

    /// The component being read cannot be kept: the first reason is the one told.
    fn defect(&mut self, line: usize, reason: String) {
        if matches!(self.state, State::Kept(..)) && self.bad.is_none() {
            self.bad = Some(refuse(line, reason));
        }
    }

    /// The line unfolded: where it opens or closes a component, kept or dropped with it.
    fn logical_done(&mut self) -> Result<(), CalendarError> {
        let raw = std::mem::take(&mut self.logical);
        let n = self.logical_at;
        if raw
            .windows(MARK.len())
            .any(|w| w.eq_ignore_ascii_case(MARK))
        {
            self.marked = true;
        }
        let Ok(text) = std::str::from_utf8(&raw) else {
            self.defect(n, "not UTF-8 text".into());
            return Ok(());
        };
        let line = upper_names(text.trim_end());
        let (begins, ends) = (line.starts_with("BEGIN:"), line.starts_with("END:"));
        let line = if begins || ends {
            line.to_ascii_uppercase().replace(' ', "")
        } else {
            line
        };
        match self.state {
            State::Calendar if line == "BEGIN:VCALENDAR" => self.calendar = true,
            State::Calendar if line == "BEGIN:VEVENT" || line == "BEGIN:VTIMEZONE" => {
                self.state = State::Kept(line == "BEGIN:VEVENT", 1);
                (self.current, self.marked, self.bad) = (Kept::default(), false, None);
                self.add(&line, n);
            }
            State::Calendar if begins => self.state = State::Other(1),
            State::Calendar => {}
            State::Kept(event, depth) => {
                self.add(&line, n);
                let depth = if begins {
                    depth + 1
                } else {
                    depth - u32::from(ends)
                };
                self.state = State::Kept(event, depth);
                if depth == 0 {
                    self.state = State::Calendar;
                    self.component_done(event)?;
                }
            }
            State::Other(d) if begins => self.state = State::Other(d + 1),
            State::Other(1) if ends => self.state = State::Calendar,
            State::Other(d) if ends => self.state = State::Other(d - 1),
            State::Other(_) => {}
        }
        Ok(())
    }

    fn add(&mut self, line: &str, n: usize) {
        if self.current.text.len() + line.len() + 2 > MAX_EVENT {
            let begin = self.current.lines.first().copied().unwrap_or(n);
            let kind = match self.state {
                State::Kept(false, _) => "a time zone",
                _ => "an event",
            };
            self.defect(begin, format!("{kind} longer than {MAX_EVENT} bytes"));
            return;
        }
        self.current.text.push_str(line);
        self.current.text.push_str("\r\n");
        self.current.lines.push(n);
    }

    fn component_done(&mut self, event: bool) -> Result<(), CalendarError> {
        let current = std::mem::take(&mut self.current);
        if event && !self.marked {
            return Ok(());
        }
        if let Some(bad) = self.bad.take() {
            self.kept.skipped.push(bad);
            return Ok(());
        }
        self.size += current.text.len();
        if self.size > MAX_KEPT {
            let at = current.lines.first().copied().unwrap_or(self.line);
            return Err(refuse(
                at,
                format!("more than {MAX_KEPT} bytes of events with a count and time zones"),
            ));
        }
        match event {
            true => self.kept.events.push(current),
            false => self.kept.zones.push(current),
        }
        Ok(())
    }
}

/// `line` with the names of its property and parameters in upper case, values as they
/// are (a parameter's value may be quoted, with `;`, `:` or `=` inside).
fn upper_names(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let (mut name, mut quoted) = (true, false);
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ':' if !quoted => {
                out.push_str(&line[i..]);
                return out;
            }
            ';' if !quoted => name = true,
            '=' if !quoted => name = false,
            _ => {}
        }
        out.push(if name { c.to_ascii_uppercase() } else { c });
    }
    out
}
