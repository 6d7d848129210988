//! The warm-by report: at each event's start, and a margin before it, how much of what
//! the schedule asked for is ready, posted as an Event on the target (Normal when all
//! is, Warning naming the shortfall) and kept for the metrics. What is ready is read
//! from the API (a StatefulSet's pods and their nodes, a CapacityBuffer's status): a
//! read the service account may not make degrades the report, with one warning.

use std::collections::HashSet;

use kube::api::ListParams;
use kube::runtime::events::EventType;
use serde_json::Value;
use tracing::{info, warn};

use super::{ScheduleConfig, ScheduleSettings, Target, get_json as get, regarding, reporter};
use crate::chrono::{DateTime, TimeDelta, Utc};
use crate::{Occurrence, Tz};
use selfdestruct::base::Chain;
use selfdestruct::base::{ApiError, post_event, request};
use selfdestruct_decision::duration::format as human;

/// Pods read for one report, at most: pages of [`PAGE`].
const MAX_PODS: usize = 10_000;
const PAGE: u32 = 200;
/// Nodes read for one report, at most (the others count as not warm).
const MAX_NODES: usize = 1_000;

/// When a report is made: a margin before the event's start, or at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Moment {
    Margin,
    Start,
}

impl Moment {
    /// As the metrics' `at` label says it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Moment::Margin => "margin",
            Moment::Start => "start",
        }
    }
}

/// A report due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Due {
    /// The target's index in the configuration.
    pub(crate) target: usize,
    pub(crate) moment: Moment,
    /// When it is due.
    pub(crate) at: DateTime<Utc>,
    pub(crate) occurrence: Occurrence,
    /// The target's count in force then.
    pub(crate) asked: u32,
}

/// The reports made so far: those due up to `since`, and the warnings told.
pub(crate) struct Reports {
    since: DateTime<Utc>,
    pub(crate) told: HashSet<String>,
}

impl Reports {
    /// None of the reports due before `now` (a restart does not report past events).
    pub(crate) fn new(now: DateTime<Utc>) -> Self {
        Reports {
            since: now,
            told: HashSet::new(),
        }
    }

    /// The reports due after the last call and up to `now`, by time.
    pub(crate) fn due(
        &mut self,
        cfg: &ScheduleConfig,
        occurrences: &[Occurrence],
        now: DateTime<Utc>,
    ) -> Vec<Due> {
        let mut due: Vec<Due> = moments(cfg, occurrences)
            .filter(|(_, _, at, _)| self.since < *at && *at <= now)
            .map(|(target, moment, at, o)| {
                let t = &cfg.targets[target];
                let asked = t.schedule.in_force_for(t.pool.as_deref(), occurrences, at);
                let (occurrence, asked) = (o.clone(), asked.count);
                Due {
                    target,
                    moment,
                    at,
                    occurrence,
                    asked,
                }
            })
            .collect();
        due.sort_by_key(|d| d.at);
        self.since = self.since.max(now);
        due
    }

    /// When the next report is due after `now`.
    pub(crate) fn next(
        &self,
        cfg: &ScheduleConfig,
        occurrences: &[Occurrence],
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        moments(cfg, occurrences)
            .map(|(_, _, at, _)| at)
            .filter(|at| *at > now)
            .min()
    }
}

/// Each occurrence's reports: (its target's index, the moment, when, the occurrence).
fn moments<'a>(
    cfg: &'a ScheduleConfig,
    occurrences: &'a [Occurrence],
) -> impl Iterator<Item = (usize, Moment, DateTime<Utc>, &'a Occurrence)> + 'a {
    let margin = TimeDelta::from_std(cfg.settings.warm_by_margin).unwrap_or(TimeDelta::MAX);
    occurrences.iter().flat_map(move |o| {
        let target = (cfg.targets.iter()).position(|t| t.pool.as_deref() == o.pool.as_deref());
        let before = o
            .start
            .checked_sub_signed(margin)
            .filter(|_| !margin.is_zero());
        let at = [
            before.map(|b| (Moment::Margin, b)),
            Some((Moment::Start, o.start)),
        ];
        let at = move |i| at.into_iter().flatten().map(move |(m, t)| (i, m, t, o));
        target.into_iter().flat_map(at)
    })
}

/// One of a CapacityBuffer's `status.conditions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Condition {
    pub(crate) type_: String,
    pub(crate) status: String,
    pub(crate) reason: String,
}

/// What is ready on a target, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Measured {
    /// A StatefulSet's placeholders: those Ready, and those of them on warm nodes
    /// (`None`: not looked at, no warm label nor images set; `Err`: why unknown).
    Pods {
        ready: u32,
        warm: Option<Result<u32, String>>,
    },
    /// A CapacityBuffer's status: `readyReplicas` where the autoscaler sets it, else its
    /// `replicas` and conditions.
    Buffer {
        ready: Option<u32>,
        replicas: Option<u32>,
        conditions: Vec<Condition>,
    },
    /// Nothing could be read: why.
    Unknown(String),
}

/// A report: what was asked and what was ready, as the Event and the metrics say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) asked: u32,
    /// Ready, where a number is known.
    pub(crate) ready: Option<u32>,
    /// Ready on warm nodes, where looked at.
    pub(crate) warm: Option<u32>,
    /// All of it ready (the Event is Normal), or a shortfall (Warning).
    pub(crate) met: bool,
    /// The Event's note.
    pub(crate) note: String,
}

/// The report of `due` from what was `measured`; times in `tz`.
pub(crate) fn judge(due: &Due, tz: Tz, margin: std::time::Duration, m: &Measured) -> Report {
    let hhmm = |t: DateTime<Utc>| t.with_timezone(&tz).format("%H:%M").to_string();
    let (name, asked) = (&due.occurrence.name, due.asked);
    let head = match due.moment {
        Moment::Start => format!("at {} event {name:?}", hhmm(due.at)),
        Moment::Margin => format!(
            "at {}, {} before event {name:?} ({})",
            hhmm(due.at),
            human(margin),
            hhmm(due.occurrence.start)
        ),
    };
    let (ready, warm, met, body) = match m {
        Measured::Pods { ready, warm } => {
            let mut body = format!("{ready} of {asked} placeholders ready");
            let warm_met = match warm {
                Some(Ok(w)) => {
                    body += &format!(", {w} on warm nodes");
                    *w >= asked
                }
                Some(Err(why)) => {
                    body += &format!(", on warm nodes: unknown ({why})");
                    true
                }
                None => true,
            };
            let warm = warm.clone().and_then(Result::ok);
            (Some(*ready), warm, *ready >= asked && warm_met, body)
        }
        Measured::Buffer { ready: Some(r), .. } => {
            let body = format!("{r} of {asked} buffer chunks ready");
            (Some(*r), None, *r >= asked, body)
        }
        Measured::Buffer {
            ready: None,
            replicas,
            conditions,
        } => {
            let is = |t: &str| {
                conditions
                    .iter()
                    .find(|c| c.type_ == t)
                    .map(|c| c.status.as_str())
            };
            let met = replicas.is_some_and(|r| r >= asked)
                && is("ReadyForProvisioning") == Some("True")
                && is("Provisioning") == Some("True")
                && is("LimitedByQuotas") != Some("True");
            let shown: Vec<String> = (conditions.iter())
                .map(|c| match c.status.as_str() {
                    "True" => format!("{} True", c.type_),
                    s => format!("{} {s} ({})", c.type_, c.reason),
                })
                .collect();
            let shown = match shown.is_empty() {
                true => "no conditions".into(),
                false => shown.join(", "),
            };
            let replicas = replicas.map_or("unset".into(), |r| r.to_string());
            let body = format!(
                "{asked} buffer chunks asked, no status.readyReplicas: status.replicas {replicas}, {shown}"
            );
            (None, None, met, body)
        }
        Measured::Unknown(why) => {
            let body = format!("{asked} asked, none known ready: {why}");
            (None, None, false, body)
        }
    };
    Report {
        asked,
        ready,
        warm,
        met,
        note: format!("{head}: {body}"),
    }
}

/// Reads what is ready on the target of `due`, posts the report as an Event on it and
/// logs it; a read that fails is told once (`told`) and leaves the report without it.
pub(crate) async fn report(
    cfg: &ScheduleConfig,
    client: &kube::Client,
    namespace: &str,
    due: &Due,
    told: &mut HashSet<String>,
) -> Report {
    let (s, target) = (&cfg.settings, &cfg.targets[due.target].target);
    let m = match target {
        Target::StatefulSet(_) => pods(s, client, namespace, target).await,
        Target::CapacityBuffer(_) => match get(client, &target.url(namespace)).await {
            Ok(b) => buffer(&b["status"]),
            Err(e) => Measured::Unknown(cannot(&e, &format!("get {target}"), "")),
        },
    };
    let why = match &m {
        Measured::Unknown(why)
        | Measured::Pods {
            warm: Some(Err(why)),
            ..
        } => Some(why),
        _ => None,
    };
    if let Some(why) = why.filter(|w| told.insert(w.to_string())) {
        warn!(%target, reason = %why, "the warm-by report is made without what cannot be read");
    }
    let r = judge(due, s.time_zone, s.warm_by_margin, &m);
    let (type_, note) = (
        if r.met {
            EventType::Normal
        } else {
            EventType::Warning
        },
        &r.note,
    );
    match r.met {
        true => info!(%target, note, "warm-by report"),
        false => warn!(%target, note, "warm-by report: a shortfall"),
    }
    let event = (type_, "Report", "WarmBy", note.as_str());
    if let Err(e) = post_event(
        client,
        reporter(),
        &regarding(target, namespace, None),
        event,
    )
    .await
    {
        warn!(error = %Chain(&e), "cannot post the Event (needs create on events.k8s.io events)");
    }
    r
}

/// Why a read failed, as the report says it: a 403 names the chart's value that grants it.
fn cannot(e: &ApiError, what: &str, value: &str) -> String {
    match e.code() {
        Some(403) if !value.is_empty() => {
            format!("the service account may not {what} (the chart's schedule.warmBy.{value})")
        }
        _ => format!("cannot {what}: {}", Chain(e)),
    }
}

/// A CapacityBuffer's `status` as the report reads it.
fn buffer(status: &Value) -> Measured {
    let number = |v: &Value| v.as_u64().map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let text = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_string();
    let conditions = (status["conditions"].as_array().into_iter().flatten())
        .map(|c| Condition {
            type_: text(c, "type"),
            status: text(c, "status"),
            reason: text(c, "reason"),
        })
        .collect();
    Measured::Buffer {
        ready: number(&status["readyReplicas"]),
        replicas: number(&status["replicas"]),
        conditions,
    }
}

/// A StatefulSet's Ready placeholders (its scale subresource's selector, in `namespace`)
/// and, where a warm label or images are set, those on warm nodes.
async fn pods(
    s: &ScheduleSettings,
    client: &kube::Client,
    namespace: &str,
    target: &Target,
) -> Measured {
    let scale = match get(client, &target.url(namespace)).await {
        Ok(scale) => scale,
        Err(e) => return Measured::Unknown(cannot(&e, &format!("get {target}"), "")),
    };
    let Some(selector) = scale["status"]["selector"].as_str() else {
        return Measured::Unknown(format!("{target}'s scale subresource has no selector yet"));
    };
    let mut nodes: Vec<String> = Vec::new();
    let mut token: Option<String> = None;
    let list = format!("list pods in {namespace}");
    while nodes.len() < MAX_PODS {
        let mut params = ListParams::default().labels(selector).limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = match selfdestruct::base::pods(namespace).list(&params) {
            Ok(req) => request(client, req).await,
            Err(e) => Err(ApiError::transport(e)),
        };
        let page: Value =
            match page.and_then(|b| serde_json::from_slice(&b).map_err(ApiError::decode)) {
                Ok(page) => page,
                Err(e) => return Measured::Unknown(cannot(&e, &list, "readPods")),
            };
        let items = page["items"].as_array().into_iter().flatten();
        nodes.extend(items.filter(|p| is_ready(p)).map(|p| {
            p["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }));
        token = page["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(Into::into);
        if token.is_none() {
            break;
        }
    }
    let ready = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    if s.warm_label.is_none() && s.warm_images.is_empty() {
        return Measured::Pods { ready, warm: None };
    }
    nodes.sort();
    let mut warm = 0;
    let mut distinct = nodes.clone();
    distinct.dedup();
    for node in distinct.iter().take(MAX_NODES) {
        let url = format!("/api/v1/nodes/{}", selfdestruct::base::segment(node));
        match get(client, &url).await {
            Ok(n) if is_warm(s, &n) => warm += nodes.iter().filter(|x| *x == node).count(),
            Ok(_) => {}
            Err(e) => {
                let why = cannot(&e, "get nodes", "readNodes");
                return Measured::Pods {
                    ready,
                    warm: Some(Err(why)),
                };
            }
        }
    }
    let warm = Some(Ok(u32::try_from(warm).unwrap_or(u32::MAX)));
    Measured::Pods { ready, warm }
}

/// Ready and not being deleted.
fn is_ready(pod: &Value) -> bool {
    let conditions = pod["status"]["conditions"].as_array().into_iter().flatten();
    pod["metadata"]["deletionTimestamp"].is_null()
        && conditions
            .into_iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Carries the warm label, or lists every warm image in `status.images`.
fn is_warm(s: &ScheduleSettings, node: &Value) -> bool {
    let label = (s.warm_label.as_deref()).is_some_and(|k| !node["metadata"]["labels"][k].is_null());
    let names: Vec<&str> = (node["status"]["images"].as_array().into_iter().flatten())
        .filter_map(|i| i["names"].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let images = !s.warm_images.is_empty()
        && s.warm_images
            .iter()
            .all(|want| names.iter().any(|n| want.matches(n)));
    label || images
}
