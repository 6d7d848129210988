//! Launches replayed from files (`simulate --arrivals FILE...`).
//!
//! Two formats, told apart by the file name (`.csv`; `.jsonl`, `.ndjson`, `.json`) or else by the
//! first character (`{`: JSON lines):
//!
//! - **BinderHub launch-event archives** (mybinder.org's daily `events-YYYY-MM-DD.jsonl`): one JSON
//!   object per line with `timestamp` (RFC 3339, rounded to the minute) and `status`; later schema
//!   versions add `origin`, `ref`, `resolved_ref`, `repo`, which are ignored except `origin` for
//!   `--origin`. Only `status == "success"` counts; a line with another `schema` is not a launch.
//!   The times are spread uniformly within their minute with the run's seed.
//! - **CSV** with a header, a `timestamp` column (RFC 3339) and optionally `duration` (the session
//!   length: `27m`, `1h30m`, or seconds) and `origin`. Times are taken as they are.
//!
//! Several files are consecutive days: a file covers the whole UTC days its launches fall on, and the
//! next file starts the day after. The files are read a line at a time into one reused buffer; what
//! is kept is a compact list of launches (16 bytes each: a time, a session length, a flag), sorted by
//! time, so a 30-day archive of 3 million lines costs about 48 MB, never the lines themselves. The
//! list, not a stream into the engine, because every policy row (and every replica count of
//! `--recommend`) replays the same launches, and the minute spreading and session draws depend on
//! the seed: reading the files again for each run would cost more than keeping 16 bytes a launch.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use crate::random::{Random, Stream};
use crate::scenario::{Arrival, Load, MIN, Ms, SEC, Scenario};

/// One day.
pub const DAY: Ms = 24 * 60 * MIN;
/// The BinderHub launch event's schema name.
pub const LAUNCH_SCHEMA: &str = "binderhub.jupyter.org/launch";
/// Reasons kept for the report when bad lines are skipped.
const KEEP_REASONS: usize = 3;
/// The UTF-8 byte-order mark, skipped at the start of a file.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// Distinct origins remembered per file for an `--origin` that matched nothing.
const KEEP_ORIGINS: usize = 20;
/// The most days a replay covers, its files together: a year (the longest replay of
/// sim/README.md is 30 days). Two launches 1,000 years apart would make 365,244 days.
pub const MAX_DAYS: u64 = 366;

/// Why the launches could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The error.
        source: std::io::Error,
    },
    /// A line that is not a launch record (without `--skip-bad-lines`).
    #[error("{file}:{line}: {reason} (--skip-bad-lines skips such lines)")]
    BadLine {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// A CSV file without the columns it needs.
    #[error("{file}: {reason}")]
    Header {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A file without a single launch to replay.
    #[error("{file}: no launches to replay ({why})")]
    Empty {
        /// The file.
        file: String,
        /// The counts that explain it.
        why: String,
    },
    /// Launches that span more than [`MAX_DAYS`] days, with the files before.
    #[error(
        "{file}: launches from {first} to {last}, {days} days to replay in all: at most {MAX_DAYS}"
    )]
    Span {
        /// The file.
        file: String,
        /// Its first launch's day, `YYYY-MM-DD`.
        first: String,
        /// Its last launch's day.
        last: String,
        /// The days with the files before it.
        days: u64,
    },
    /// No file given.
    #[error("no arrival files given")]
    NoFiles,
}

/// How the files are read.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Keep only launches whose `origin` is this (a federation member).
    pub origin: Option<String>,
    /// Count bad lines and go on instead of failing.
    pub skip_bad_lines: bool,
}

/// The format of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// BinderHub launch events, one JSON object per line.
    JsonLines,
    /// CSV with a header and a `timestamp` column.
    Csv,
}

/// One launch, 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Milliseconds from the start of the trace's first day (UTC midnight).
    pub at: Ms,
    /// The session length in milliseconds from the file, 0: drawn from the scenario's model.
    pub session_ms: u32,
    /// The time is rounded to the minute: spread it within the minute.
    pub spread: bool,
}

/// What one file held.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FileStats {
    /// The path as given.
    pub file: String,
    /// JSON lines or CSV.
    pub format: Option<Format>,
    /// Lines read (CSV: records, the header not counted).
    pub lines: u64,
    /// Launches kept.
    pub launches: u64,
    /// Launch events whose status is not `success`.
    pub not_successful: u64,
    /// Events of another schema.
    pub not_launches: u64,
    /// Launches from other origins than `--origin`.
    pub other_origin: u64,
    /// Bad lines skipped (`--skip-bad-lines`).
    pub skipped: u64,
    /// The file's first day (UTC), `YYYY-MM-DD`.
    pub first_day: String,
    /// Whole days the file covers.
    pub days: u64,
    /// Its first day's place in the replay (0: the first day).
    pub replayed_from_day: u64,
}

/// Launches read from one or more files, on consecutive days.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Sorted by time.
    pub launches: Vec<Launch>,
    /// Per file, in the order given.
    pub files: Vec<FileStats>,
    /// Whole days covered.
    pub days: u64,
    /// Bad lines skipped over all files.
    pub skipped: u64,
    /// The first few skipped lines' errors (`file:line: reason`).
    pub skipped_examples: Vec<String>,
}

/// A launch event; every other field of any schema version is ignored.
#[derive(Deserialize)]
struct LaunchEvent<'a> {
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    schema: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    origin: Option<Cow<'a, str>>,
}

/// What one line or record gave.
enum Line {
    Launch { at_ms: i64, session_ms: u32 },
    NotSuccessful,
    NotLaunch,
    OtherOrigin(String),
    Blank,
}

/// Reads a file at a time, keeping counts and launches in absolute milliseconds.
struct Reader<'o> {
    opts: &'o ReadOptions,
    stats: FileStats,
    /// Absolute times (ms since the Unix epoch) of this file, later shifted.
    times: Vec<(i64, u32)>,
    origins: BTreeMap<String, u64>,
    skipped_examples: Vec<String>,
}

impl Reader<'_> {
    /// Files a line's result, or its error (fatal unless bad lines are skipped).
    fn take(&mut self, line: u64, got: Result<Line, String>) -> Result<(), TraceError> {
        match got {
            Ok(Line::Launch { at_ms, session_ms }) => {
                self.stats.launches += 1;
                self.times.push((at_ms, session_ms));
            }
            Ok(Line::NotSuccessful) => self.stats.not_successful += 1,
            Ok(Line::NotLaunch) => self.stats.not_launches += 1,
            Ok(Line::OtherOrigin(o)) => {
                self.stats.other_origin += 1;
                if self.origins.len() < KEEP_ORIGINS || self.origins.contains_key(&o) {
                    *self.origins.entry(o).or_default() += 1;
                }
            }
            Ok(Line::Blank) => {}
            Err(reason) if self.opts.skip_bad_lines => {
                self.stats.skipped += 1;
                if self.skipped_examples.len() < KEEP_REASONS {
                    self.skipped_examples
                        .push(format!("{}:{line}: {reason}", self.stats.file));
                }
            }
            Err(reason) => {
                return Err(TraceError::BadLine {
                    file: self.stats.file.clone(),
                    line,
                    reason,
                });
            }
        }
        Ok(())
    }

    fn origin_kept(&self, origin: Option<&str>) -> Result<(), String> {
        match (&self.opts.origin, origin) {
            (None, _) => Ok(()),
            (Some(want), Some(o)) if o == want => Ok(()),
            (Some(_), o) => Err(o.unwrap_or("(none)").to_string()),
        }
    }

    fn json_line(&self, bytes: &[u8]) -> Result<Line, String> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Line::Blank);
        }
        let ev: LaunchEvent = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if ev.schema.as_deref().is_some_and(|s| s != LAUNCH_SCHEMA) {
            return Ok(Line::NotLaunch);
        }
        let at_ms = timestamp_ms(&ev.timestamp.ok_or("no `timestamp` field")?)?;
        if ev.status.ok_or("no `status` field")? != "success" {
            return Ok(Line::NotSuccessful);
        }
        if let Err(o) = self.origin_kept(ev.origin.as_deref()) {
            return Ok(Line::OtherOrigin(o));
        }
        Ok(Line::Launch {
            at_ms,
            session_ms: 0,
        })
    }

    fn read_json_lines(&mut self, input: impl BufRead) -> Result<(), TraceError> {
        let mut input = input;
        let mut buf = Vec::with_capacity(1024);
        let mut line = 0u64;
        loop {
            buf.clear();
            let n = input
                .read_until(b'\n', &mut buf)
                .map_err(|source| TraceError::Io {
                    file: self.stats.file.clone(),
                    source,
                })?;
            if n == 0 {
                return Ok(());
            }
            line += 1;
            self.stats.lines += 1;
            let got = self.json_line(&buf);
            self.take(line, got)?;
        }
    }

    fn read_csv(&mut self, input: impl Read) -> Result<(), TraceError> {
        let file = self.stats.file.clone();
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .trim(csv::Trim::All)
            .from_reader(input);
        let headers = rdr.headers().map_err(|e| TraceError::Header {
            file: file.clone(),
            reason: format!("cannot read the header: {e}"),
        })?;
        let column = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
        let Some(ts) = column("timestamp") else {
            return Err(TraceError::Header {
                file,
                reason: format!(
                    "no `timestamp` column in the header (columns: {})",
                    headers.iter().collect::<Vec<_>>().join(", ")
                ),
            });
        };
        let (dur, origin) = (column("duration"), column("origin"));
        if self.opts.origin.is_some() && origin.is_none() {
            return Err(TraceError::Header {
                file,
                reason: "--origin needs an `origin` column".into(),
            });
        }
        let mut rec = csv::StringRecord::new();
        loop {
            let (line, got) = match rdr.read_record(&mut rec) {
                Ok(false) => return Ok(()),
                Ok(true) => {
                    let line = rec.position().map_or(0, csv::Position::line);
                    (line, self.csv_record(&rec, ts, dur, origin))
                }
                Err(e) => {
                    let line = e.position().map_or(0, csv::Position::line);
                    if let csv::ErrorKind::Io(_) = e.kind() {
                        return Err(TraceError::Io {
                            file,
                            source: std::io::Error::other(e.to_string()),
                        });
                    }
                    (line, Err(csv_reason(&e)))
                }
            };
            self.stats.lines += 1;
            self.take(line, got)?;
        }
    }

    fn csv_record(
        &self,
        rec: &csv::StringRecord,
        ts: usize,
        dur: Option<usize>,
        origin: Option<usize>,
    ) -> Result<Line, String> {
        if rec.iter().all(str::is_empty) {
            return Ok(Line::Blank);
        }
        let at_ms = timestamp_ms(rec.get(ts).unwrap_or_default())?;
        let session_ms = match dur.and_then(|i| rec.get(i)).filter(|d| !d.is_empty()) {
            None => 0,
            Some(d) => session_ms(d)?,
        };
        if let Err(o) = self.origin_kept(origin.and_then(|i| rec.get(i))) {
            return Ok(Line::OtherOrigin(o));
        }
        Ok(Line::Launch { at_ms, session_ms })
    }
}

fn csv_reason(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields, the header has {expected_len}"),
        csv::ErrorKind::Utf8 { .. } => "not UTF-8".into(),
        _ => e.to_string(),
    }
}

/// RFC 3339 (`2018-11-03T00:00:00+00:00`, `...Z`, fractions) to milliseconds since the epoch.
fn timestamp_ms(s: &str) -> Result<i64, String> {
    let t: jiff::Timestamp = s
        .parse()
        .map_err(|e| format!("timestamp {s:?} is not RFC 3339 ({e})"))?;
    Ok(t.as_millisecond())
}

/// A session length: a human duration (`27m`, `1h30m`) or seconds (`1620`, `95.5`), at least 1 s.
fn session_ms(s: &str) -> Result<u32, String> {
    let ms = match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => secs * 1000.0,
        Ok(_) => return Err(format!("duration {s:?} is not a length")),
        Err(_) => selfdestruct_decision::duration::parse(s)
            .map_err(|e| format!("duration {s:?}: expected 27m, 1h30m or seconds ({e})"))?
            .as_millis() as f64,
    };
    if ms > f64::from(u32::MAX) {
        return Err(format!("duration {s:?} is longer than 49 days"));
    }
    Ok((ms as u32).max(SEC as u32))
}

fn format_of(path: &Path, first: Option<u8>) -> Format {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("csv") => Format::Csv,
        Some("jsonl" | "ndjson" | "json") => Format::JsonLines,
        _ if first == Some(b'{') => Format::JsonLines,
        _ => Format::Csv,
    }
}

/// The UTC date of `ms` since the epoch, `YYYY-MM-DD`.
fn date(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string().chars().take(10).collect())
        .unwrap_or_default()
}

impl Trace {
    /// Reads `files` in order (consecutive days).
    pub fn read<P: AsRef<Path>>(files: &[P], opts: &ReadOptions) -> Result<Trace, TraceError> {
        if files.is_empty() {
            return Err(TraceError::NoFiles);
        }
        let mut trace = Trace::default();
        for path in files {
            trace.read_file(path.as_ref(), opts)?;
        }
        Ok(trace)
    }

    fn read_file(&mut self, path: &Path, opts: &ReadOptions) -> Result<(), TraceError> {
        let name = path.display().to_string();
        let io = |source| TraceError::Io {
            file: name.clone(),
            source,
        };
        let mut input = BufReader::with_capacity(64 * 1024, File::open(path).map_err(io)?);
        // A UTF-8 byte-order mark (as spreadsheet and Windows editors write) is no content,
        // in JSON lines as in CSV.
        if input.fill_buf().map_err(io)?.starts_with(UTF8_BOM) {
            input.consume(UTF8_BOM.len());
        }
        let first = input
            .fill_buf()
            .map_err(io)?
            .iter()
            .copied()
            .find(|b| !b.is_ascii_whitespace());
        let format = format_of(path, first);
        let mut r = Reader {
            opts,
            stats: FileStats {
                file: name.clone(),
                format: Some(format),
                ..FileStats::default()
            },
            times: Vec::new(),
            origins: BTreeMap::new(),
            skipped_examples: Vec::new(),
        };
        match format {
            Format::JsonLines => r.read_json_lines(input)?,
            Format::Csv => r.read_csv(input)?,
        }
        let Reader {
            mut stats,
            mut times,
            origins,
            skipped_examples,
            ..
        } = r;
        if times.is_empty() {
            let mut why = format!(
                "{} lines: {} not successful, {} other events, {} bad",
                stats.lines, stats.not_successful, stats.not_launches, stats.skipped
            );
            if let Some(o) = &opts.origin {
                let seen: Vec<String> = origins.iter().map(|(k, v)| format!("{k} {v}")).collect();
                why.push_str(&format!(
                    ", {} from other origins than {o:?} (seen: {})",
                    stats.other_origin,
                    seen.join(", ")
                ));
            }
            return Err(TraceError::Empty { file: name, why });
        }
        times.sort_unstable_by_key(|t| t.0);
        let day = DAY as i64;
        let (lo, hi) = (times[0].0, times[times.len() - 1].0);
        let first_day = lo.div_euclid(day) * day;
        let days = ((hi - first_day) / day + 1) as u64;
        if self.days + days > MAX_DAYS {
            let (first, last, days) = (date(lo), date(hi), self.days + days);
            return Err(TraceError::Span {
                file: name,
                first,
                last,
                days,
            });
        }
        let offset = self.days * DAY;
        let spread = format == Format::JsonLines;
        self.launches.reserve(times.len());
        self.launches
            .extend(times.iter().map(|&(t, session_ms)| Launch {
                at: offset + (t - first_day) as Ms,
                session_ms,
                spread,
            }));
        stats.first_day = date(first_day);
        stats.days = days;
        stats.replayed_from_day = self.days;
        self.days += days;
        self.skipped += stats.skipped;
        for e in skipped_examples {
            if self.skipped_examples.len() < KEEP_REASONS {
                self.skipped_examples.push(e);
            }
        }
        self.files.push(stats);
        Ok(())
    }

    /// Makes `sc` replay this trace: its load, and a measured window of the trace's days.
    pub fn apply(&self, sc: &mut Scenario, origin: Option<&str>) {
        let (mean_per_min, peak_per_min) = self.rates();
        sc.load = Load::Replay {
            files: self.files.iter().map(|f| f.file.clone()).collect(),
            launches: self.launches.len() as u64,
            days: self.days,
            mean_per_min: (mean_per_min * 100.0).round() / 100.0,
            peak_per_min: (peak_per_min * 100.0).round() / 100.0,
            origin: origin.map(str::to_string),
            skipped_bad_lines: self.skipped,
        };
        sc.measured = self.duration();
    }

    /// The replayed length.
    pub fn duration(&self) -> Ms {
        self.days * DAY
    }

    /// Mean launches per minute and the busiest 10 minutes' rate per minute.
    pub fn rates(&self) -> (f64, f64) {
        let minutes = self.duration() as f64 / MIN as f64;
        let mean = if minutes > 0.0 {
            self.launches.len() as f64 / minutes
        } else {
            0.0
        };
        let mut bins = vec![0u32; (self.duration() / (10 * MIN)) as usize + 1];
        for l in &self.launches {
            if let Some(b) = bins.get_mut((l.at / (10 * MIN)) as usize) {
                *b += 1;
            }
        }
        let peak = bins.iter().copied().max().unwrap_or(0);
        (mean, f64::from(peak) / 10.0)
    }

    /// The arrivals of one run of `sc` (whose measured window is the trace): the warm-up
    /// replays the trace's last `sc.warmup` (the day before is taken to end like the last
    /// day), minute-rounded times are spread uniformly within their minute and missing
    /// session lengths drawn from the scenario's model, all from `seed`'s arrivals stream.
    pub fn arrivals(&self, sc: &Scenario, seed: u64) -> Vec<Arrival> {
        let mut rng = Random::new(seed, Stream::Arrivals);
        let total = self.duration();
        let warm = sc.warmup.min(total);
        let start = self.launches.partition_point(|l| l.at < total - warm);
        let tail = self.launches[start..]
            .iter()
            .map(|l| (l.at - (total - warm), l));
        let body = self.launches.iter().map(|l| (l.at + sc.warmup, l));
        let mut out: Vec<Arrival> =
            Vec::with_capacity(self.launches.len() - start + self.launches.len());
        for (at, l) in tail.chain(body) {
            let jitter = if l.spread {
                (rng.uniform() * MIN as f64) as Ms
            } else {
                0
            };
            let session = if l.session_ms > 0 {
                Ms::from(l.session_ms)
            } else {
                sc.session(&mut rng, sc.session_mean)
            };
            out.push(Arrival {
                at: at + jitter,
                session,
            });
        }
        out.sort_by_key(|a| a.at);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_durations() {
        assert_eq!(timestamp_ms("1970-01-01T00:01:00+00:00"), Ok(60_000));
        assert_eq!(timestamp_ms("1970-01-01T01:00:00+01:00"), Ok(0));
        assert_eq!(timestamp_ms("1970-01-01T00:00:01.5Z"), Ok(1_500));
        assert!(timestamp_ms("1970-01-01 00:00").is_err());
        assert_eq!(session_ms("27m"), Ok(27 * 60_000));
        assert_eq!(session_ms("90"), Ok(90_000));
        assert_eq!(session_ms("0"), Ok(1_000));
        assert!(session_ms("soon").is_err());
        assert!(session_ms("-3").is_err());
        assert_eq!(date(86_400_000), "1970-01-02");
    }
}
