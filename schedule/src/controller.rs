//! `selfdestruct-schedule`: headroom on a calendar. Sets the `replicas` of one
//! placeholder StatefulSet (through its `scale` subresource) or of one CapacityBuffer,
//! in its own namespace, to the count in force: the largest of a weekly baseline and
//! the iCal calendar events running or starting within the lead time, within a minimum
//! and a maximum. The count is this crate's pure core; this is its I/O shell: read the
//! calendar (a URL or a mounted file, bounded in bytes and time), patch the object when
//! the count changes, post an Event naming the cause. It reaches the API, pauses and
//! exits as every binary of the image does (`selfdestruct::base`).
//!
//! Bad input never changes the replicas: an unreachable calendar keeps the last good
//! one (retried with capped, jittered backoff), a malformed one is refused with its line
//! and reason and the last good one kept; a bad setting exits 2 at start.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{EventType, Reporter};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{error, info, warn};

use crate::chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use crate::{
    Baseline, Calendar, CalendarError, Cause, Expansion, Filter, Filtered, InForce, Occurrence,
    Schedule, Tz,
};
use selfdestruct::base::{
    Access, ApiError, Chain, Discovered, IdentitySettings, SharedSettings, Signals, Stop, draw,
    on_client_or_pause, post_event, request, segment, stop,
};
use selfdestruct_decision::backoff::Backoff;
use selfdestruct_decision::duration::format as human;
use selfdestruct_decision::images::ImageRef;
use selfdestruct_decision::settings::{Setting, SettingError, duration, image_list};

use metrics::{Metrics, lock};
use report::Reports;

mod metrics;
mod report;

/// The most bytes of a calendar read (a URL's answer or a file).
const CALENDAR_MAX_BYTES: usize = 4 << 20;

/// The most redirects a calendar URL may take.
const MAX_REDIRECTS: usize = 5;

const BUFFER_API: &str = "autoscaling.x-k8s.io/v1beta1";

/// How far ahead the calendar's occurrences are expanded at a time.
const SPAN: TimeDelta = TimeDelta::days(2);

/// How a run ends: `Ok` on SIGTERM/SIGINT.
type Result<T = (), E = selfdestruct::Error> = std::result::Result<T, E>;

/// `selfdestruct-schedule`'s command line: the settings every binary of the image reads
/// (logging, the own pod's identity, API access) and the schedule's own.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "selfdestruct-schedule",
    version,
    about = "Headroom on a calendar: set the replicas of placeholder StatefulSets or \
             CapacityBuffers from weekly baselines and an iCal calendar.",
    long_about = None,
    after_help = "Durations: 90s, 15m, 1h30m. Without API access it behaves like the pause \
                  container. Exit codes: 0 on SIGTERM/SIGINT, 2 on invalid configuration."
)]
pub struct Cli {
    /// The settings of every binary.
    #[command(
        flatten,
        next_help_heading = "Every binary (logging, identity, API access)"
    )]
    pub shared: SharedSettings,
    /// The schedule's settings.
    #[command(flatten, next_help_heading = "The schedule")]
    pub schedule: ScheduleSettings,
}

impl Cli {
    /// Checks what one setting alone cannot (a target, something to schedule for each,
    /// min <= max, no object scaled twice): the message [`main`] exits 2 with.
    pub fn check(&self) -> Result<(), SettingError> {
        ScheduleConfig::new(&self.schedule, &self.shared.identity).map(drop)
    }
}

/// Why `selfdestruct-schedule` stops other than on SIGTERM/SIGINT.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What every binary of the image may end with: a setting, API access, set-up.
    #[error(transparent)]
    Base(#[from] selfdestruct::Error),
    /// `preview`: the calendar, or some of its events, cannot be read (each named with
    /// its line).
    #[error("{0}")]
    Calendar(String),
}

/// Runs what `cli` asks for to its end: the controller (`Ok` on SIGTERM/SIGINT), or
/// `preview DAYS`.
pub fn main(cli: &Cli) -> Result<(), Error> {
    let cfg = ScheduleConfig::new(&cli.schedule, &cli.shared.identity)
        .map_err(selfdestruct::Error::from)?;
    if cfg.settings.action.is_some() {
        return preview(&cfg);
    }
    let controller = |access, signals| run(cfg, access, signals);
    Ok(selfdestruct::base::host(&cli.shared, controller)?)
}

/// The schedule's settings (its namespace is the shared identity's).
#[derive(clap::Args, Debug, Clone)]
pub struct ScheduleSettings {
    /// `preview DAYS`, else the controller.
    #[command(subcommand)]
    pub(crate) action: Option<Action>,
    /// What to scale, in the own namespace: statefulset/NAME (its scale subresource) or
    /// capacitybuffer/NAME
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_TARGET", value_name = "KIND/NAME",
          default_value = "", hide_default_value = true, value_parser = Setting(target))]
    pub(crate) target: std::option::Option<Target>,
    /// Weekly baseline, e.g. "Mon-Fri 08:00-18:00 = 12; * = 2" (first matching rule
    /// wins; docs/schedule.md has the grammar) [default: none, 0]
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_BASELINE", value_name = "RULES",
          default_value = "", hide_default_value = true, value_parser = Setting(baseline))]
    pub(crate) baseline: Baseline,
    /// iCal calendar: an http(s):// or webcal:// URL, or a file path (a mounted
    /// ConfigMap); events say "placeholders: N" in their summary or description [default: none]
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_CALENDAR", value_name = "URL|FILE",
          default_value = "", hide_default_value = true, value_parser = Setting(calendar_source))]
    pub(crate) calendar: std::option::Option<CalendarSource>,
    /// IANA time zone of the baseline's windows and of the calendar's floating times
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_TIME_ZONE", value_name = "ZONE",
          default_value = "UTC", value_parser = Setting(time_zone))]
    pub(crate) time_zone: Tz,
    /// How long before an event its count applies (node boot plus image pull)
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_LEAD_TIME", value_name = "DURATION",
          default_value = "10m", value_parser = Setting(duration))]
    pub(crate) lead_time: Duration,
    /// The least count
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_MIN", value_name = "N", default_value = "0",
          value_parser = Setting(count))]
    pub(crate) min: u32,
    /// The largest count
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_MAX", value_name = "N", default_value = "1000",
          value_parser = Setting(count))]
    pub(crate) max: u32,
    /// How often to read the calendar again and check the object's replicas (at least 1s)
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_REFRESH", value_name = "DURATION",
          default_value = "5m", value_parser = Setting(at_least_1s))]
    pub(crate) refresh: Duration,
    /// How often the count in force is evaluated (at least 1s)
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_TICK", value_name = "DURATION", hide = true,
          default_value = "15s", value_parser = Setting(at_least_1s))]
    pub(crate) tick: Duration,
    /// How long one calendar read may take, the whole answer included (at least 1s)
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_CALENDAR_TIMEOUT", value_name = "DURATION", hide = true,
          default_value = "30s", value_parser = Setting(at_least_1s))]
    pub(crate) calendar_timeout: Duration,
    /// More targets, each scaled by the events' "placeholders[NAME]: N" with its own
    /// baseline and bounds: a JSON list such as [{"name": "gpu", "target":
    /// "statefulset/hub-gpu", "baseline": "* = 0", "min": 0, "max": 8}] [default: none]
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_TARGETS", value_name = "JSON", default_value = "",
          hide_default_value = true, value_parser = Setting(named_targets))]
    pub(crate) targets: std::vec::Vec<NamedTarget>,
    /// The warm-by report of each event is made at its start and this long before it
    /// (0: at its start only)
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_WARM_BY_MARGIN", value_name = "DURATION",
          default_value = "5m", value_parser = Setting(duration))]
    pub(crate) warm_by_margin: Duration,
    /// The label a node holding the user images carries (the node gate's), or none
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_WARM_LABEL", value_name = "KEY",
          default_value = WARM_LABEL, value_parser = Setting(warm_label))]
    pub(crate) warm_label: std::option::Option<String>,
    /// Comma-separated images: a node that lists them all in status.images is warm too
    /// [default: none]
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_WARM_IMAGES", value_name = "IMAGES", default_value = "",
          hide_default_value = true, value_parser = Setting(image_list))]
    pub(crate) warm_images: std::vec::Vec<ImageRef>,
    /// Serve the last reports as Prometheus text on this address, e.g. :9090 [default: off]
    #[arg(long, env = "SELFDESTRUCT_SCHEDULE_METRICS_ADDRESS", value_name = "[HOST]:PORT",
          default_value = "", hide_default_value = true, value_parser = Setting(metrics_address))]
    pub(crate) metrics_address: std::option::Option<SocketAddr>,
}

/// What `selfdestruct-schedule` does besides scaling.
#[derive(clap::Subcommand, Debug, Clone)]
pub(crate) enum Action {
    /// Print the count in force at each change over the next DAYS days, with its cause,
    /// from the same settings, without a cluster; exit 1 naming the line of each event
    /// it cannot read
    Preview(PreviewArgs),
}

/// `selfdestruct-schedule preview DAYS`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PreviewArgs {
    /// How many days to show, 1 to 366
    #[arg(value_name = "DAYS", value_parser = clap::value_parser!(u16).range(1..=366))]
    pub(crate) days: u16,
    /// The first instant, RFC 3339 (2026-03-02T08:00:00Z) or a date (2026-03-02, its
    /// midnight in the schedule's zone) [default: now]
    #[arg(long, value_name = "TIME", value_parser = Setting(preview_from))]
    pub(crate) from: Option<From>,
}

/// `--from` of the preview: an instant, or a day whose midnight is read in the zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum From {
    At(DateTime<Utc>),
    Day(NaiveDate),
}

/// One more target: scaled by the events' `placeholders[name]: N`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NamedTarget {
    pub(crate) name: String,
    pub(crate) target: Target,
    pub(crate) baseline: Baseline,
    pub(crate) min: u32,
    pub(crate) max: u32,
}

/// The node gate's warm label (`SELFDESTRUCT_GATE_WARM_LABEL`'s default).
const WARM_LABEL: &str = "selfdestruct.io/images-warm";

/// What the mode scales.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A StatefulSet, through its `scale` subresource.
    StatefulSet(String),
    /// A CapacityBuffer (autoscaling.x-k8s.io), its `spec.replicas`.
    CapacityBuffer(String),
}

impl Target {
    /// Its name, its API version and kind, and the path of its kind's objects.
    fn parts(&self) -> (&str, &'static str, &'static str, &'static str) {
        match self {
            Target::StatefulSet(n) => (n, "apps/v1", "StatefulSet", "statefulsets"),
            Target::CapacityBuffer(n) => (n, BUFFER_API, "CapacityBuffer", "capacitybuffers"),
        }
    }

    /// The URL of what is read and patched, in `namespace` (a StatefulSet's `scale`).
    fn url(&self, namespace: &str) -> String {
        let (name, api, _, plural) = self.parts();
        let scale = matches!(self, Target::StatefulSet(_)).then_some("/scale");
        let scale = scale.unwrap_or_default();
        let (ns, name) = (segment(namespace), segment(name));
        format!("/apis/{api}/namespaces/{ns}/{plural}/{name}{scale}")
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, _, kind, _) = self.parts();
        write!(f, "{}/{name}", kind.to_ascii_lowercase())
    }
}

/// Where the calendar comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CalendarSource {
    /// An http(s) URL (`webcal://` read as `https://`).
    Url(http::Uri),
    File(PathBuf),
}

impl std::fmt::Display for CalendarSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CalendarSource::Url(u) => f.write_str(&redact(u)),
            CalendarSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// `uri` as logged: its scheme, host and port. Its userinfo (a password), path (Google's
/// `private-<token>` address) and query (a token) may be the calendar's secret.
fn redact(uri: &http::Uri) -> String {
    let host = uri.authority().map_or("", |a| a.as_str());
    let host = host.rsplit('@').next().unwrap_or_default();
    format!("{}://{host}/…", uri.scheme_str().unwrap_or("https"))
}

fn target(value: &str) -> Result<Option<Target>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let expected = "statefulset/NAME or capacitybuffer/NAME (a DNS-1123 subdomain)";
    let (kind, name) = value.split_once('/').ok_or(expected)?;
    selfdestruct::base::subdomain(name).map_err(|_| expected.to_string())?;
    let make = match kind.to_ascii_lowercase().as_str() {
        "statefulset" | "statefulsets" | "sts" => Target::StatefulSet,
        "capacitybuffer" | "capacitybuffers" | "cb" => Target::CapacityBuffer,
        _ => return Err(expected.to_string()),
    };
    Ok(Some(make(name.into())))
}

fn named_targets(value: &str) -> Result<Vec<NamedTarget>, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        name: String,
        target: String,
        #[serde(default)]
        baseline: String,
        #[serde(default)]
        min: Option<u32>,
        #[serde(default)]
        max: Option<u32>,
    }
    let form = r#"a JSON list such as [{"name": "gpu", "target": "statefulset/hub-gpu", "baseline": "* = 0", "min": 0, "max": 8}]"#;
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let raw: Vec<Raw> = serde_json::from_str(value).map_err(|e| format!("{form} ({e})"))?;
    let mut out: Vec<NamedTarget> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let refuse = |why: String| format!("{form} (target {} {:?}: {why})", i + 1, r.name);
        if !selfdestruct::base::is_dns1123_label(&r.name) {
            return Err(refuse(
                "its name is a DNS label (a-z, 0-9, -), such as gpu".into(),
            ));
        }
        if out.iter().any(|t| t.name == r.name) {
            return Err(refuse("the name is given twice".into()));
        }
        let scaled = target(&r.target).map_err(&refuse)?;
        let scaled = scaled.ok_or_else(|| refuse("no target".into()))?;
        let bound =
            |n: Option<u32>, default: &str| count(&n.map_or(default.into(), |n| n.to_string()));
        let (min, max) = (
            bound(r.min, "0").map_err(&refuse)?,
            bound(r.max, "1000").map_err(&refuse)?,
        );
        if min > max {
            return Err(refuse(format!("min {min} is above max {max}")));
        }
        out.push(NamedTarget {
            baseline: baseline(&r.baseline).map_err(&refuse)?,
            name: r.name,
            target: scaled,
            min,
            max,
        });
    }
    Ok(out)
}

fn warm_label(value: &str) -> Result<Option<String>, String> {
    use selfdestruct_decision::selector::{Requirement, Selector};
    if value.is_empty() || value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let key = Selector::parse(value).is_ok_and(|s| matches!(s.0[..], [Requirement::Exists(_)]));
    key.then(|| Some(value.to_string()))
        .ok_or_else(|| "a label key such as selfdestruct.io/images-warm, or none".into())
}

fn metrics_address(value: &str) -> Result<Option<SocketAddr>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let full = match value.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => value.to_string(),
    };
    full.parse()
        .map(Some)
        .map_err(|_| "an address such as :9090 or 127.0.0.1:9090 (empty: off)".into())
}

fn preview_from(value: &str) -> Result<From, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        return Ok(From::At(at.to_utc()));
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map(From::Day)
        .map_err(|_| {
            "an RFC 3339 time such as 2026-03-02T08:00:00Z, or a date such as 2026-03-02".into()
        })
}

fn baseline(value: &str) -> Result<Baseline, String> {
    Baseline::parse(value)
        .map_err(|e| format!("rules such as \"Mon-Fri 08:00-18:00 = 12; * = 2\" ({e})"))
}

fn calendar_source(value: &str) -> Result<Option<CalendarSource>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Ok(Some(CalendarSource::File(PathBuf::from(value))));
    };
    let expected = "an http://, https:// or webcal:// URL or a file path";
    let url = match scheme.to_ascii_lowercase().as_str() {
        "http" | "https" => value.to_string(),
        "webcal" => format!("https://{rest}"),
        _ => return Err(format!("{expected}, not a {scheme}:// URL")),
    };
    let uri: http::Uri = url.parse().map_err(|e| format!("{expected} ({e})"))?;
    if uri.host().is_none() {
        return Err("a URL with a host".into());
    }
    Ok(Some(CalendarSource::Url(uri)))
}

fn time_zone(value: &str) -> Result<Tz, String> {
    value
        .parse()
        .map_err(|_| "an IANA time zone name such as Europe/Berlin or UTC".to_string())
}

fn count(value: &str) -> Result<u32, String> {
    let max = crate::baseline::MAX_COUNT;
    value
        .parse()
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(|| format!("a whole number from 0 to {max}"))
}

fn at_least_1s(value: &str) -> Result<Duration, String> {
    duration(value).map(|d| d.max(Duration::from_secs(1)))
}

/// One object the mode scales, with its own baseline and bounds.
#[derive(Clone, Debug)]
pub(crate) struct Scaled {
    /// The name events give it (`placeholders[NAME]: N`); `None`: the default target.
    pub(crate) pool: Option<String>,
    pub(crate) target: Target,
    /// The baseline, zone, lead time and bounds.
    pub(crate) schedule: Schedule,
}

/// The mode's validated configuration.
#[derive(Clone, Debug)]
pub(crate) struct ScheduleConfig {
    /// What it scales: the default target first (when there is one), then the named ones.
    pub(crate) targets: Vec<Scaled>,
    /// The settings as given (the calendar, how often it is read and how long a read may take).
    pub(crate) settings: ScheduleSettings,
    /// The own namespace, if a setting names it, and the service-account folder.
    pub(crate) identity: IdentitySettings,
}

impl ScheduleConfig {
    /// Checks what one setting alone cannot: a target, something to schedule for each,
    /// min <= max, no object scaled twice.
    pub(crate) fn new(
        s: &ScheduleSettings,
        identity: &IdentitySettings,
    ) -> Result<Self, SettingError> {
        let refuse = |setting: &str, value: String, expected: String| SettingError {
            setting: setting.into(),
            value,
            expected,
        };
        let schedule = |baseline: &Baseline, min, max| Schedule {
            baseline: baseline.clone(),
            tz: s.time_zone,
            lead: s.lead_time,
            min,
            max,
        };
        let mut targets = Vec::new();
        if let Some(target) = &s.target {
            if s.baseline.rules.is_empty() && s.calendar.is_none() {
                return Err(refuse(
                    "SELFDESTRUCT_SCHEDULE_BASELINE (--baseline)",
                    String::new(),
                    "a baseline, or a calendar in SELFDESTRUCT_SCHEDULE_CALENDAR: nothing to \
                     schedule"
                        .into(),
                ));
            }
            if s.min > s.max {
                return Err(refuse(
                    "SELFDESTRUCT_SCHEDULE_MIN (--min)",
                    s.min.to_string(),
                    format!("at most SELFDESTRUCT_SCHEDULE_MAX ({})", s.max),
                ));
            }
            let schedule = schedule(&s.baseline, s.min, s.max);
            let (pool, target) = (None, target.clone());
            targets.push(Scaled {
                pool,
                target,
                schedule,
            });
        }
        for n in &s.targets {
            let setting = "SELFDESTRUCT_SCHEDULE_TARGETS (--targets)";
            if n.baseline.rules.is_empty() && s.calendar.is_none() {
                let why = "a baseline, or a calendar in SELFDESTRUCT_SCHEDULE_CALENDAR: nothing \
                           to schedule";
                return Err(refuse(setting, n.name.clone(), why.into()));
            }
            if let Some(t) = targets.iter().find(|t| t.target == n.target) {
                let also = t
                    .pool
                    .as_deref()
                    .map_or("the default target".into(), |p| format!("target {p:?}"));
                let why = format!("another object than {also}'s ({})", t.target);
                return Err(refuse(setting, n.name.clone(), why));
            }
            let (pool, target) = (Some(n.name.clone()), n.target.clone());
            let schedule = schedule(&n.baseline, n.min, n.max);
            targets.push(Scaled {
                pool,
                target,
                schedule,
            });
        }
        if targets.is_empty() {
            return Err(refuse(
                "SELFDESTRUCT_SCHEDULE_TARGET (--target)",
                String::new(),
                "statefulset/NAME or capacitybuffer/NAME: what to scale".into(),
            ));
        }
        Ok(ScheduleConfig {
            targets,
            settings: s.clone(),
            identity: identity.clone(),
        })
    }
}

/// Runs the mode on the API `access` `main` discovered: without API access, a plain pause.
pub(crate) async fn run(cfg: ScheduleConfig, access: Discovered, signals: Signals) -> Result {
    let id = cfg.identity.clone();
    let namespace = |a: &Access| {
        id.namespace
            .or_else(|| a.namespace.clone())
            .or_else(|| selfdestruct::base::read_trimmed(&id.service_account_dir.join("namespace")))
            .unwrap_or_else(|| "default".into())
    };
    let cannot = "the schedule cannot scale anything";
    let run = |client, stop| run_on(cfg, client, stop);
    on_client_or_pause(access, namespace, signals, cannot, run).await
}

/// The calendar as last read well, its occurrences over a span, and what runs beside the
/// loop to renew them.
struct CalendarState {
    calendar: Option<Arc<Calendar>>,
    /// A fingerprint of the text it was parsed from: an unchanged read is not parsed again.
    fingerprint: u64,
    occurrences: Vec<Occurrence>,
    /// Every occurrence starting before this is in `occurrences`.
    until: DateTime<Utc>,
    next_read: Instant,
    /// No expansion before this (one cut short by its bounds waits a refresh).
    next_expansion: Instant,
    failures: u32,
    /// Whether a first read ended, well or not: before, the count is only raised.
    settled: bool,
    /// The read or the expansion in flight: one at a time.
    job: Option<JoinHandle<Done>>,
    /// A file read that did not return in time (a FIFO nobody writes, a hung mount): the
    /// next read waits on it again, never starting a second.
    hung: Option<FileRead>,
    /// The skipped events told (logged, and in an Event), and those not yet in an Event.
    told: HashSet<String>,
    untold: Vec<String>,
}

type FileRead = JoinHandle<Result<Filtered, ReadError>>;

/// What a job ended with.
enum Done {
    /// A read that failed; the hung file read, if any.
    Failed(ReadError, Option<FileRead>),
    /// The same text as the calendar in force.
    Unchanged,
    /// A new calendar (its fingerprint) and its expansion from `now` over the span, or why
    /// it is refused.
    Read(u64, Result<(Arc<Calendar>, Expansion), CalendarError>),
    /// The calendar in force expanded from `now` over the span.
    Expanded(Expansion),
}

/// What was last applied to the object, and when to look at it again.
struct Applied {
    /// The count in force last applied.
    count: Option<u32>,
    next_check: Instant,
    failures: u32,
    retry_at: Instant,
}

/// How long one expansion may step through recurrences (then the events left are skipped).
const EXPANSION_BUDGET: Duration = Duration::from_secs(2);

/// [`run`] on `client` until `signals` fires. The count in force of each target is
/// evaluated every tick, and the warm-by reports made when due; reading, parsing and
/// expanding the calendar run beside, one at a time.
async fn run_on(cfg: ScheduleConfig, client: Client, mut signals: Stop) -> Result {
    let namespace = &client.default_namespace().to_string();
    let s = &cfg.settings;
    for t in &cfg.targets {
        info!(
            target = %t.target, name = t.pool.as_deref().unwrap_or_default(), namespace,
            baseline = %t.schedule.baseline,
            calendar = %s.calendar.as_ref().map(ToString::to_string).unwrap_or_default(),
            time_zone = %s.time_zone,
            lead_time = %human(s.lead_time),
            min = t.schedule.min, max = t.schedule.max,
            refresh = %human(s.refresh),
            "schedule started"
        );
    }
    let metrics = Arc::new(Mutex::new(Metrics::default()));
    if let Some(address) = s.metrics_address {
        let listener = tokio::net::TcpListener::bind(address).await;
        let listener = listener.map_err(|e| {
            selfdestruct::Error::Setup("listen on SELFDESTRUCT_SCHEDULE_METRICS_ADDRESS", e)
        })?;
        info!(%address, "serving the warm-by reports as Prometheus text on /metrics");
        tokio::spawn(metrics::serve(listener, Arc::clone(&metrics)));
    }
    let http = https_client();
    let start = Instant::now();
    let mut cal = CalendarState {
        calendar: None,
        fingerprint: 0,
        occurrences: Vec::new(),
        until: DateTime::<Utc>::MIN_UTC,
        next_read: start,
        next_expansion: start,
        failures: 0,
        settled: s.calendar.is_none(),
        job: None,
        hung: None,
        told: HashSet::new(),
        untold: Vec::new(),
    };
    let mut objs: Vec<Applied> = (cfg.targets.iter())
        .map(|_| Applied {
            count: None,
            next_check: start,
            failures: 0,
            retry_at: start,
        })
        .collect();
    let mut reports = Reports::new(wall_now());
    selfdestruct::base::release_idle();
    loop {
        let now = wall_now();
        start_job(&cfg, &http, &mut cal, now);
        let mut wake = Instant::now() + s.tick;
        for (t, obj) in cfg.targets.iter().zip(&mut objs) {
            let f = t
                .schedule
                .in_force_for(t.pool.as_deref(), &cal.occurrences, now);
            let due = obj.count != Some(f.count) || Instant::now() >= obj.next_check;
            if due && Instant::now() >= obj.retry_at {
                let apply = apply(s, &t.target, &client, namespace, &f, cal.settled, obj);
                tokio::select! {
                    sig = signals.terminated() => return stop(sig),
                    () = apply => {}
                }
                lock(&metrics).replicas(&t.target, obj.count);
            }
            if obj.count != Some(f.count) {
                wake = wake.min(obj.retry_at.max(Instant::now()));
            }
        }
        for due in reports.due(&cfg, &cal.occurrences, now) {
            let report = report::report(&cfg, &client, namespace, &due, &mut reports.told);
            let report = tokio::select! {
                sig = signals.terminated() => return stop(sig),
                r = report => r,
            };
            lock(&metrics).report(&cfg.targets[due.target].target, &due, &report);
        }
        if let Some(next) = reports.next(&cfg, &cal.occurrences, wall_now()) {
            wake = wake.min(Instant::now() + (next - wall_now()).to_std().unwrap_or_default());
        }
        if !cal.untold.is_empty() {
            let untold = std::mem::take(&mut cal.untold);
            let told = tell_skipped(&cfg.targets[0].target, &client, namespace, untold);
            tokio::select! {
                sig = signals.terminated() => return stop(sig),
                () = told => {}
            }
        }
        if s.calendar.is_some() && cal.job.is_none() {
            wake = wake.min(cal.next_read);
        }
        let job = async {
            match cal.job.as_mut() {
                Some(job) => job.await,
                None => std::future::pending().await,
            }
        };
        let done = tokio::select! {
            sig = signals.terminated() => return stop(sig),
            done = job => Some(done),
            () = tokio::time::sleep_until(wake) => None,
        };
        if let Some(done) = done {
            cal.job = None;
            match done {
                Ok(done) => job_done(&cfg, &mut cal, done),
                Err(e) => error!(error = %e, "reading or expanding the calendar failed"),
            }
            selfdestruct::base::release_idle();
        }
    }
}

/// `selfdestruct-schedule preview DAYS`: prints each target's count in force at each
/// change over DAYS days, with its cause, the calendar read as the mode reads it (no
/// cluster). Each event that cannot be read, or whose count is for no target, is an
/// error naming its line, after the preview of the others.
fn preview(cfg: &ScheduleConfig) -> Result<(), Error> {
    use crate::chrono::{DurationRound, TimeZone};
    let s = &cfg.settings;
    let Some(Action::Preview(args)) = &s.action else {
        return Ok(());
    };
    let tz = s.time_zone;
    let from = match &args.from {
        Some(From::At(t)) => *t,
        Some(From::Day(d)) => {
            let midnight = d.and_time(Default::default());
            let local = tz.from_local_datetime(&midnight);
            local.earliest().map_or(midnight.and_utc(), |t| t.to_utc())
        }
        None => wall_now()
            .duration_trunc(TimeDelta::minutes(1))
            .unwrap_or_else(|_| wall_now()),
    };
    let to = from + TimeDelta::days(i64::from(args.days));
    let (occurrences, problems) = match &s.calendar {
        Some(source) => read_for_preview(cfg, source, from, to)?,
        None => (Vec::new(), Vec::new()),
    };
    let mut lines = Vec::new();
    for (i, t) in cfg.targets.iter().enumerate() {
        for (at, f) in t
            .schedule
            .changes(t.pool.as_deref(), &occurrences, from, to)
        {
            lines.push((at, i, preview_line(tz, s.lead_time, &t.target, at, &f)));
        }
    }
    lines.sort_by_key(|(at, i, _)| (*at, *i));
    let mut out = format!(
        "# the count in force at each change: {} day(s) from {} ({tz}), lead time {}\n",
        args.days,
        from.with_timezone(&tz).format("%Y-%m-%d %a %H:%M"),
        human(s.lead_time)
    );
    for (_, _, line) in lines {
        out += &line;
        out.push('\n');
    }
    // A closed pipe (`| head`) is no error of the calendar's.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    if problems.is_empty() {
        return Ok(());
    }
    let problems: Vec<String> = problems.iter().map(|p| format!("\n  {p}")).collect();
    let what = format!("{} calendar event(s) cannot be read", problems.len());
    Err(Error::Calendar(what + &problems.concat()))
}

/// How long the preview may expand the calendar over its days.
const PREVIEW_BUDGET: Duration = Duration::from_secs(30);

/// The calendar's occurrences from `from` to `to` (and the lead time after), and what of
/// it cannot be read; an error when none of it can.
fn read_for_preview(
    cfg: &ScheduleConfig,
    source: &CalendarSource,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(Vec<Occurrence>, Vec<CalendarError>), Error> {
    let s = &cfg.settings;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = runtime.map_err(|e| selfdestruct::Error::Setup("start the runtime", e))?;
    let (http, mut hung) = (https_client(), None);
    let read = read_calendar(source, &http, s.calendar_timeout, &mut hung);
    let refused = |e: String| Error::Calendar(format!("{source}: {e}"));
    let filtered = runtime
        .block_on(read)
        .map_err(|e| refused(Chain(&e).to_string()))?;
    let cal =
        Calendar::parse_filtered(&filtered, s.time_zone).map_err(|e| refused(e.to_string()))?;
    let to = to + TimeDelta::from_std(s.lead_time).unwrap_or(TimeDelta::MAX / 4);
    let deadline = std::time::Instant::now() + PREVIEW_BUDGET;
    let e = cal.expand(from, to, &mut || std::time::Instant::now() < deadline);
    let mut problems = cal.skipped.clone();
    problems.extend(e.skipped);
    problems.extend(unknown_pools(&cal, &cfg.targets));
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    if e.until <= to {
        let reason = format!(
            "more than {} occurrences from {from} to {to}: preview fewer days",
            crate::calendar::MAX_HELD
        );
        problems.push(CalendarError { line: None, reason });
    }
    Ok((e.occurrences, problems))
}

/// One line of the preview: when (in `tz`), the count, the target and why.
fn preview_line(tz: Tz, lead: Duration, target: &Target, at: DateTime<Utc>, f: &InForce) -> String {
    let local = |t: DateTime<Utc>| t.with_timezone(&tz);
    let cause = match &f.cause {
        Cause::Event(o) => {
            let (start, end) = (local(o.start), local(o.end));
            let same_day = end.date_naive() == start.date_naive();
            let end = end.format(if same_day { "%H:%M" } else { "%a %H:%M" });
            let asked = crate::Asked(o);
            let mut c = format!(
                "calendar event {:?} ({} to {end}, {asked})",
                o.name,
                start.format("%a %H:%M")
            );
            if at < o.start {
                c += &format!(", lead time {}", human(lead));
            }
            c
        }
        other => other.to_string(),
    };
    let bound = match f.bounded_from {
        Some(c) if c < f.count => format!(", {c} raised to the minimum {}", f.count),
        Some(c) => format!(", {c} capped at the maximum {}", f.count),
        None => String::new(),
    };
    let when = local(at).format("%Y-%m-%d %a %H:%M");
    format!("{when}  {:>6}  {target}  {cause}{bound}", f.count)
}

/// The counts of `cal`'s events that are for no target, each naming its event's line.
fn unknown_pools(cal: &Calendar, targets: &[Scaled]) -> Vec<CalendarError> {
    let names: Vec<&str> = targets.iter().filter_map(|t| t.pool.as_deref()).collect();
    let mut out = Vec::new();
    for e in &cal.events {
        for (pool, count) in &e.counts {
            if targets.iter().any(|t| t.pool.as_deref() == pool.as_deref()) {
                continue;
            }
            let why = match pool {
                Some(p) if names.is_empty() => format!(
                    "placeholders[{p}]: {count} is for no target: SELFDESTRUCT_SCHEDULE_TARGETS names none"
                ),
                Some(p) => format!(
                    "placeholders[{p}]: {count} is for no target: SELFDESTRUCT_SCHEDULE_TARGETS names {}",
                    names.join(", ")
                ),
                None => format!(
                    "placeholders: {count} is for no target: SELFDESTRUCT_SCHEDULE_TARGET is unset"
                ),
            };
            let reason = format!("event {:?}: {why}", e.name);
            out.push(CalendarError {
                line: e.line,
                reason,
            });
        }
    }
    out
}

fn wall_now() -> DateTime<Utc> {
    DateTime::<Utc>::from(SystemTime::now())
}

/// The end of the span expanded from `now`: past the lead time by [`SPAN`].
fn horizon(cfg: &ScheduleConfig, now: DateTime<Utc>) -> DateTime<Utc> {
    now + TimeDelta::from_std(cfg.settings.lead_time).unwrap_or(TimeDelta::MAX / 4) + SPAN
}

/// `calendar`'s occurrences over the span from `now`, within [`EXPANSION_BUDGET`].
fn expand(calendar: &Calendar, now: DateTime<Utc>, to: DateTime<Utc>) -> Expansion {
    let deadline = std::time::Instant::now() + EXPANSION_BUDGET;
    calendar.expand(now, to, &mut || std::time::Instant::now() < deadline)
}

/// Starts a read when one is due, else an expansion when the span runs short; neither
/// while a job runs.
fn start_job(cfg: &ScheduleConfig, http: &HttpClient, cal: &mut CalendarState, now: DateTime<Utc>) {
    let Some(source) = &cfg.settings.calendar else {
        return;
    };
    if cal.job.is_some() {
        return;
    }
    let (tz, to) = (cfg.settings.time_zone, horizon(cfg, now));
    if Instant::now() >= cal.next_read {
        let (source, http, timeout) = (source.clone(), http.clone(), cfg.settings.calendar_timeout);
        let (mut hung, known) = (cal.hung.take(), cal.fingerprint);
        cal.job = Some(tokio::spawn(async move {
            let filtered = match read_calendar(&source, &http, timeout, &mut hung).await {
                Ok(filtered) => filtered,
                // A calendar refused while read is refused like one that does not parse.
                Err(ReadError::Refused(e)) => return Done::Read(0, Err(e)),
                Err(e) => return Done::Failed(e, hung),
            };
            let fingerprint = fingerprint(&filtered);
            if fingerprint == known {
                return Done::Unchanged;
            }
            // Parsing and expanding is CPU work: off the signals' thread.
            let parsed = tokio::task::spawn_blocking(move || {
                let c = Calendar::parse_filtered(&filtered, tz)?;
                let e = expand(&c, now, to);
                Ok((Arc::new(c), e))
            });
            let parsed = parsed.await.unwrap_or_else(|e| {
                let reason = format!("parsing failed: {e}");
                Err(CalendarError { line: None, reason })
            });
            Done::Read(fingerprint, parsed)
        }));
    } else if let Some(c) = &cal.calendar
        && now + cfg.settings.lead_time + cfg.settings.tick * 2 >= cal.until
        && Instant::now() >= cal.next_expansion
    {
        let c = Arc::clone(c);
        cal.job = Some(tokio::spawn(async move {
            let expanded = tokio::task::spawn_blocking(move || expand(&c, now, to)).await;
            Done::Expanded(expanded.unwrap_or_else(|e| Expansion {
                occurrences: Vec::new(),
                until: now,
                skipped: vec![CalendarError {
                    line: None,
                    reason: format!("expanding the calendar failed: {e}"),
                }],
            }))
        }));
    }
}

/// A fingerprint of what a read kept.
fn fingerprint(f: &Filtered) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for k in f.events.iter().chain(&f.zones) {
        k.text.hash(&mut h);
    }
    h.finish() | 1
}

/// Takes what a job found: the calendar, its occurrences, the skipped events to tell.
fn job_done(cfg: &ScheduleConfig, cal: &mut CalendarState, done: Done) {
    let source = cfg
        .settings
        .calendar
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let first = cal.calendar.is_none();
    let kept = if first {
        "running on the baseline alone until it can be read"
    } else {
        "keeping the last good calendar"
    };
    let failures = cal.failures;
    let mut read = |failed: bool| {
        let recovered = cal.failures > 0 && !failed;
        cal.failures = if failed {
            cal.failures.saturating_add(1)
        } else {
            0
        };
        cal.settled = true;
        cal.next_read = Instant::now() + cfg.settings.refresh;
        recovered
    };
    let e = match done {
        Done::Failed(e, hung) => {
            let wait = Backoff {
                base: Duration::from_secs(1),
                cap: cfg.settings.refresh,
            }
            .delay(failures, draw());
            read(true);
            (cal.hung, cal.next_read) = (hung, Instant::now() + wait);
            warn!(calendar = %source, error = %Chain(&e), retry_in = %human(wait), "cannot read the calendar; {kept}");
            return;
        }
        Done::Read(_, Err(e)) => {
            read(true);
            error!(calendar = %source, error = %e, "calendar refused; {kept}");
            return;
        }
        Done::Unchanged => {
            if read(false) {
                info!(calendar = %source, "calendar read again");
            }
            return;
        }
        Done::Read(fingerprint, Ok((c, e))) => {
            let (events, recovered) = (c.events.len(), read(false));
            if first {
                info!(calendar = %source, events, "calendar read");
            } else if recovered {
                info!(calendar = %source, events, "calendar read again");
            }
            let mut skipped: Vec<String> = c.skipped.iter().map(ToString::to_string).collect();
            skipped.extend(e.skipped.iter().map(ToString::to_string));
            skipped.extend(
                unknown_pools(&c, &cfg.targets)
                    .iter()
                    .map(ToString::to_string),
            );
            // An event mended and broken again is told again.
            cal.told.retain(|t| skipped.contains(t));
            tell(cal, skipped);
            (cal.calendar, cal.fingerprint) = (Some(c), fingerprint);
            e
        }
        Done::Expanded(e) => {
            tell(cal, e.skipped.iter().map(ToString::to_string).collect());
            e
        }
    };
    // One cut short by its bounds: the next waits a refresh, not a tick.
    if e.until < horizon(cfg, wall_now()) - SPAN / 2 {
        warn!(until = %e.until, "the calendar has too many occurrences: those from this time on are not read yet");
        cal.next_expansion = Instant::now() + cfg.settings.refresh;
    }
    (cal.occurrences, cal.until) = (e.occurrences, e.until);
}

/// Logs each skipped event not yet told, once, and keeps it for the next Event.
fn tell(cal: &mut CalendarState, skipped: Vec<String>) {
    for s in skipped {
        if cal.told.insert(s.clone()) {
            warn!(skipped = %s, "calendar event skipped; the others count");
            cal.untold.push(s);
        }
    }
}

/// Posts one Warning Event on the object naming the events skipped since the last.
async fn tell_skipped(target: &Target, client: &Client, namespace: &str, skipped: Vec<String>) {
    let note = format!(
        "{} calendar event(s) skipped: {}",
        skipped.len(),
        skipped.join("; ")
    );
    let event = (
        EventType::Warning,
        "Skip",
        "CalendarEventSkipped",
        note.as_str(),
    );
    let regarding = regarding(target, namespace, None);
    if let Err(e) = post_event(client, reporter(), &regarding, event).await {
        warn!(error = %Chain(&e), "cannot post the Event (needs create on events.k8s.io events)");
    }
}

/// Why a calendar could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("cannot read {0}")]
    Io(String, #[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("longer than {CALENDAR_MAX_BYTES} bytes")]
    TooLarge,
    #[error("no complete answer within {}", human(*.0))]
    Timeout(Duration),
    /// Refused while read: not UTF-8, or beyond the filter's bounds.
    #[error(transparent)]
    Refused(CalendarError),
    /// Too many redirects, or one without a usable Location.
    #[error("redirect refused: {0}")]
    Redirect(String),
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Empty<Bytes>,
>;

/// An HTTP(S) client: the system's roots when it has any (`SSL_CERT_FILE` honoured),
/// else the bundled Mozilla roots (the image is `scratch`). ring is named, as kube's
/// client has it: no panic over which provider is the process's default.
fn https_client() -> HttpClient {
    let provider = rustls::crypto::ring::default_provider;
    let builder = hyper_rustls::HttpsConnectorBuilder::new;
    let tls = builder()
        .with_provider_and_native_roots(provider())
        .or_else(|_| builder().with_provider_and_webpki_roots(provider()))
        .expect("ring supports TLS 1.2 and 1.3");
    let connector = tls.https_or_http().enable_http1().build();
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}

/// The calendar, at most [`CALENDAR_MAX_BYTES`] and `timeout`, taken piece by piece
/// through a [`Filter`]: only the events with a count are held, never the whole text. A
/// file is read on a blocking thread; one that has not returned within `timeout` is left
/// in `hung`, and the next read waits on it rather than starting another.
async fn read_calendar(
    source: &CalendarSource,
    http: &HttpClient,
    timeout: Duration,
    hung: &mut Option<FileRead>,
) -> Result<Filtered, ReadError> {
    let read = async {
        match source {
            CalendarSource::Url(uri) => get(uri.clone(), http).await,
            CalendarSource::File(path) => {
                let path = path.clone();
                let file = hung
                    .get_or_insert_with(|| tokio::task::spawn_blocking(move || read_file(&path)));
                let read = file.await;
                *hung = None;
                read.map_err(|e| ReadError::Io(source.to_string(), Box::new(e)))?
            }
        }
    };
    let read = tokio::time::timeout(timeout, read).await;
    read.map_err(|_| ReadError::Timeout(timeout))?
}

/// Counts the bytes read against [`CALENDAR_MAX_BYTES`] and passes them to the filter.
fn take(filter: &mut Filter, read: &mut usize, bytes: &[u8]) -> Result<(), ReadError> {
    *read += bytes.len();
    if *read > CALENDAR_MAX_BYTES {
        return Err(ReadError::TooLarge);
    }
    filter.push(bytes).map_err(ReadError::Refused)
}

fn read_file(path: &std::path::Path) -> Result<Filtered, ReadError> {
    use std::io::Read;
    let io = |e: std::io::Error| ReadError::Io(path.display().to_string(), Box::new(e));
    let mut file = std::fs::File::open(path).map_err(io)?;
    let (mut filter, mut read) = (Filter::new(), 0);
    let mut buf = vec![0; 64 << 10];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            return filter.finish().map_err(ReadError::Refused);
        }
        take(&mut filter, &mut read, &buf[..n])?;
    }
}

async fn get(mut uri: http::Uri, http: &HttpClient) -> Result<Filtered, ReadError> {
    for _ in 0..=MAX_REDIRECTS {
        let io = |e: Box<dyn std::error::Error + Send + Sync>| ReadError::Io(redact(&uri), e);
        let req = http::Request::get(uri.clone())
            .header(http::header::ACCEPT, "text/calendar, */*;q=0.5")
            .header(http::header::USER_AGENT, "selfdestruct-schedule")
            .body(Empty::<Bytes>::new())
            .map_err(|e| io(e.into()))?;
        let res = http.request(req).await.map_err(|e| io(e.into()))?;
        let status = res.status();
        if status.is_redirection() {
            let location = res
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| ReadError::Redirect(format!("HTTP {status} without a Location")))?;
            uri = redirect(&uri, location)?;
            continue;
        }
        if !status.is_success() {
            return Err(ReadError::Status(status.as_u16()));
        }
        let mut body = res.into_body();
        // The Content-Length, when there is one.
        if body.size_hint().lower() > CALENDAR_MAX_BYTES as u64 {
            return Err(ReadError::TooLarge);
        }
        let (mut filter, mut read) = (Filter::new(), 0);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| io(e.into()))?;
            if let Some(data) = frame.data_ref() {
                take(&mut filter, &mut read, data)?;
            }
        }
        return filter.finish().map_err(ReadError::Refused);
    }
    Err(ReadError::Redirect(format!(
        "more than {MAX_REDIRECTS} redirects"
    )))
}

/// The URL a redirect's `Location` names, relative ones against `base`.
fn redirect(base: &http::Uri, location: &str) -> Result<http::Uri, ReadError> {
    let bad = |why: &str| ReadError::Redirect(format!("a Location header {why}"));
    let next: http::Uri = location.parse().map_err(|_| bad("that is not a URL"))?;
    if next.scheme().is_some() {
        return match next.scheme_str() {
            Some("http" | "https") => Ok(next),
            _ => Err(bad("to another scheme than http(s)")),
        };
    }
    let mut parts = base.clone().into_parts();
    parts.path_and_query = next.path_and_query().cloned();
    http::Uri::from_parts(parts).map_err(|_| bad("that is not a path"))
}

/// Reads the object's replicas and sets them to the count in force if they differ (only
/// raises them before the calendar is `settled`); posts an Event naming the cause at
/// each change. Failures are logged and retried with backoff.
async fn apply(
    s: &ScheduleSettings,
    target: &Target,
    client: &Client,
    namespace: &str,
    f: &InForce,
    settled: bool,
    obj: &mut Applied,
) {
    match set_replicas(target, client, namespace, f, settled).await {
        Ok(before) => {
            let held = before.is_some_and(|b| b > f.count) && !settled;
            obj.failures = 0;
            obj.count = (!held).then_some(f.count);
            obj.next_check = Instant::now() + s.refresh;
            obj.retry_at = Instant::now() + if held { s.tick } else { Duration::ZERO };
            if before != Some(f.count) && !held {
                // A number, or nothing when unset (never `Some(4)` in a JSON log).
                info!(target = %target, from = before, to = f.count, cause = %f, "replicas set");
            }
        }
        Err(e) => {
            let mut wait = retry(e.code(), s.refresh).delay(obj.failures, draw());
            if let ApiError::Status {
                retry_after: Some(r),
                ..
            } = &e
            {
                wait = wait.max(*r);
            }
            obj.failures = obj.failures.saturating_add(1);
            obj.retry_at = Instant::now() + wait;
            let (_, api_version, kind, _) = target.parts();
            let hint = match e.code() {
                Some(403) => format!(
                    ": the service account may not get/patch {} (bind the Role of the chart's schedule section)",
                    target
                ),
                Some(404) => format!(
                    ": {} does not exist in namespace {namespace} (read as a {kind} of {api_version})",
                    target
                ),
                _ => String::new(),
            };
            warn!(target = %target, error = %Chain(&e), retry_in = %human(wait), "cannot set the replicas{hint}; retrying");
        }
    }
}

/// How the object's GET or PATCH is retried after an answer with `code`: a 403 waits for
/// an operator (30 s doubling to 5 min); a missing object (404: a target created after
/// the schedule) is looked for again soon, 2 s doubling to a minute (or the refresh).
fn retry(code: Option<u16>, refresh: Duration) -> Backoff {
    match code {
        Some(403) => Backoff {
            base: Duration::from_secs(30),
            cap: Duration::from_secs(300),
        },
        Some(404) => Backoff {
            base: Duration::from_secs(2),
            cap: refresh.min(Duration::from_secs(60)),
        },
        _ => Backoff::TRANSIENT,
    }
}

/// The Events' reporter.
fn reporter() -> Reporter {
    Reporter {
        controller: "selfdestruct-schedule".into(),
        instance: std::env::var("POD_NAME").ok(),
    }
}

/// The scaled object, as an Event names it.
fn regarding(target: &Target, namespace: &str, uid: Option<&str>) -> ObjectReference {
    let (name, api_version, kind, _) = target.parts();
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: uid.map(Into::into),
        ..ObjectReference::default()
    }
}

/// GETs `url` of the API as JSON.
async fn get_json(client: &Client, url: &str) -> Result<Value, ApiError> {
    let req = http::Request::get(url)
        .body(Vec::new())
        .map_err(ApiError::transport)?;
    serde_json::from_slice(&request(client, req).await?).map_err(ApiError::decode)
}

/// GETs the object; PATCHes `spec.replicas` when it differs (when it is lower, only once
/// `settled`) and posts a `Normal` Event `ScheduledScale` on the object
/// (events.k8s.io/v1); returns the replicas before.
async fn set_replicas(
    target: &Target,
    client: &Client,
    namespace: &str,
    f: &InForce,
    settled: bool,
) -> Result<Option<u32>, ApiError> {
    let url = target.url(namespace);
    let obj = get_json(client, &url).await?;
    let before = obj["spec"]["replicas"]
        .as_u64()
        .map(|r| u32::try_from(r).unwrap_or(u32::MAX));
    if before == Some(f.count) || (!settled && before.is_some_and(|b| b > f.count)) {
        return Ok(before);
    }
    let patch = json!({ "spec": { "replicas": f.count } });
    let req = http::Request::patch(&url)
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(patch.to_string().into_bytes())
        .map_err(ApiError::transport)?;
    request(client, req).await?;
    let note = format!(
        "replicas {} -> {}: {f}",
        before.map_or_else(|| "unset".into(), |b| b.to_string()),
        f.count
    );
    let regarding = regarding(target, namespace, obj["metadata"]["uid"].as_str());
    let event = (EventType::Normal, "Scale", "ScheduledScale", note.as_str());
    if let Err(e) = post_event(client, reporter(), &regarding, event).await {
        warn!(error = %Chain(&e), "cannot post the Event (needs create on events.k8s.io events)");
    }
    Ok(before)
}

#[cfg(test)]
mod tests;
