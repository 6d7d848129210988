//! The class form (issue 47): a class arrives at a known time after a quiet night
//! (`bench/coldstart/class.csv`, `gen-trace.py class`), and a row with `+schedule-LEAD` (`10m`,
//! `150s`) has the real calendar controller, `selfdestruct-schedule` run as a process with the
//! admin kubeconfig, set its StatefulSet's (or its buffer's) replicas from a calendar event at
//! the bell: the flat count (`--replicas`) as the baseline, `--class-count` from the lead time
//! before the bell to the event's end. The calendar is written at the run's start with the
//! event at the real instant the compressed bell rings; the lead time is divided by
//! `--factor`, and the count is evaluated every second (`SELFDESTRUCT_SCHEDULE_TICK`).
//!
//! At the bell, and `--class-margin-min` before it, every group is looked at (the warm-by
//! report the bench's observer makes): the count asked, the placeholders Ready and how many
//! on warm nodes, and the room for users on warm nodes (free slots and placeholders). The
//! simulator's side runs `simulate --schedule-calendar` with the same event and lead time in
//! simulated time (its `schedule` row: the agent's defaults, behind the gate with `--gate on`;
//! it has no scheduled buffer).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::Store;
use selfdestruct_realstack::ControlPlane;
use selfdestruct_realstack::proc::Proc;
use serde_json::{Value, json};

use super::{
    Args, Delays, GATE_TAINT, GROUP, Group, RowResult, USER_IMAGE, fmt_s, gated, has_image,
    has_taint, label, pod_ready, room_of, root, round2,
};

/// The class form's settings (the trace's defaults: `gen-trace.py class`).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ClassArgs {
    /// Class form: the bell, the calendar event's start (simulated minutes from the trace's
    /// first 00:00 UTC).
    #[arg(long, default_value_t = 20.0)]
    class_start_min: f64,
    /// Class form: the event's length (minutes).
    #[arg(long, default_value_t = 60.0)]
    class_length_min: f64,
    /// Class form: the event's count (`placeholders: N`; a buffer's chunks).
    #[arg(long, default_value_t = 60)]
    class_count: u32,
    /// Class form: the rows are also looked at this long before the bell (minutes; the warm-by
    /// report's margin).
    #[arg(long, default_value_t = 5.0)]
    class_margin_min: f64,
    /// `simulate`'s flags for a schedule row (set by [`run_sim`] here).
    #[arg(skip)]
    pub(crate) sim_flags: Vec<String>,
}

/// The lead time (simulated seconds) of a row's `+schedule-LEAD` policy (`10m`, `150s`).
pub(crate) fn lead_s(row: &str) -> Option<f64> {
    row.split('+').find_map(|p| {
        let lead = p.strip_prefix("schedule-")?;
        let (n, unit) = lead.split_at(lead.find(|c: char| !c.is_ascii_digit())?);
        let n: f64 = n.parse().ok()?;
        match unit {
            "s" => Some(n),
            "m" => Some(n * 60.0),
            _ => None,
        }
    })
}

/// A row without its `+schedule-LEAD` (the last policy): the simulator's row it is built on.
pub(crate) fn base(row: &str) -> &str {
    row.find("+schedule-").map_or(row, |i| &row[..i])
}

/// The simulator's name of a row's results: a schedule row's is `schedule`.
pub(crate) fn sim_policy(row: &str) -> &str {
    if lead_s(row).is_some() {
        "schedule"
    } else {
        row
    }
}

/// One calendar event of `count` placeholders from `start` to `end` (seconds since the epoch).
fn ics(start: i64, end: i64, count: u32) -> String {
    let t = |s: i64| {
        Timestamp::from_second(s)
            .expect("a time")
            .strftime("%Y%m%dT%H%M%SZ")
            .to_string()
    };
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//selfdestruct//coldstart class//EN\r\n\
         BEGIN:VEVENT\r\nUID:class@coldstart\r\nDTSTAMP:{}\r\nDTSTART:{}\r\nDTEND:{}\r\n\
         SUMMARY:Class placeholders: {count}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        t(start),
        t(start),
        t(end)
    )
}

/// The calendar controllers of a run and the looks at the bell.
pub(crate) struct Class {
    /// The bell, wall-clock (a whole second).
    bell: SystemTime,
    controllers: Vec<(String, Proc)>,
    looks: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// For the class form (or any schedule row): writes each schedule row's calendar, starts its
/// controller, then waits for the replay's start, chosen so that the compressed bell falls on
/// a whole second; and looks at every group at the bell and the margin before it. `None` for
/// the other forms (no wait).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start(
    args: &Args,
    cp: &ControlPlane,
    client: &kube::Client,
    groups: &[Group],
    run: u32,
    agent_bin: &Path,
    pods: &Store<Pod>,
    nodes: &Store<Node>,
) -> Option<Class> {
    if args.form != "class" && !groups.iter().any(|g| lead_s(&g.row).is_some()) {
        return None;
    }
    let (f, c) = (args.factor, &args.class);
    let bell_s = c.class_start_min * 60.0;
    let (now_i, now) = (Instant::now(), SystemTime::now());
    // The bell on a whole second, at least 2 s of start-up away.
    let raw = epoch_ms(now) + 2000 + (bell_s / f * 1000.0) as i64;
    let bell = SystemTime::UNIX_EPOCH + Duration::from_secs((raw as u64).div_ceil(1000));
    let start = now_i
        + (bell - Duration::from_secs_f64(bell_s / f))
            .duration_since(now)
            .ok()?;
    let logs = root().join("target/coldstart-logs");
    let _ = std::fs::create_dir_all(&logs);
    let bell_epoch = epoch_ms(bell) / 1000;
    let calendar = ics(
        bell_epoch,
        bell_epoch + (c.class_length_min * 60.0 / f).round() as i64,
        c.class_count,
    );
    let mut controllers = Vec::new();
    for g in groups {
        let Some(lead) = lead_s(&g.row) else { continue };
        let path = logs.join(format!("run{run}-{}.ics", g.slug));
        std::fs::write(&path, &calendar).expect("the calendar");
        let target = if g.row.starts_with("buffer") {
            "capacitybuffer/user-room"
        } else {
            "statefulset/placeholder"
        };
        let mut cmd = std::process::Command::new(agent_bin.with_file_name("selfdestruct-schedule"));
        cmd.env("KUBECONFIG", cp.kubeconfig())
            .env("POD_NAMESPACE", &g.slug)
            .env("SELFDESTRUCT_SCHEDULE_TARGET", target)
            .env(
                "SELFDESTRUCT_SCHEDULE_BASELINE",
                format!("* = {}", args.replicas()),
            )
            .env("SELFDESTRUCT_SCHEDULE_CALENDAR", &path)
            .env("SELFDESTRUCT_SCHEDULE_LEAD_TIME", fmt_s(lead / f))
            .env("SELFDESTRUCT_SCHEDULE_TICK", "1s")
            .env("SELFDESTRUCT_SCHEDULE_REFRESH", "5s")
            // The warm-by report's margin, where the binary has one (issue 47 item 1).
            .env(
                "SELFDESTRUCT_SCHEDULE_WARM_BY_MARGIN",
                fmt_s(c.class_margin_min * 60.0 / f),
            );
        let log = logs.join(format!("run{run}-{}-schedule.log", g.slug));
        let _ = std::fs::remove_file(&log);
        let p = Proc::spawn(&format!("schedule {}", g.slug), cmd, &log)
            .unwrap_or_else(|e| panic!("start the calendar controller of {}: {e}", g.slug));
        controllers.push((g.slug.clone(), p));
    }
    let looks: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let task = {
        let (looks, client, pods, nodes) =
            (looks.clone(), client.clone(), pods.clone(), nodes.clone());
        let groups = groups.to_vec();
        let node_cpu = args.node_cpu();
        let margin_s = c.class_margin_min * 60.0;
        tokio::spawn(async move {
            for (at, t_s) in [("margin", -margin_s), ("bell", 0.0)] {
                let due = start + Duration::from_secs_f64(((bell_s + t_s) / f).max(0.0));
                tokio::time::sleep_until(due.into()).await;
                for g in &groups {
                    let v = look(&client, g, &pods.state(), &nodes.state(), node_cpu).await;
                    let v = json!({"at": at, "t_s": t_s, "look": v});
                    looks.lock().unwrap().push((g.slug.clone(), v));
                }
            }
        })
    };
    tokio::time::sleep_until(start.into()).await;
    Some(Class {
        bell,
        controllers,
        looks,
        task,
    })
}

/// A group as the warm-by report sees it: the count asked (the set's or the buffer's replicas),
/// the placeholders Ready and, of them, on warm nodes (the user image there, no gate taint), and
/// the room for users on warm Ready nodes (their free user slots and their placeholders).
async fn look(
    client: &kube::Client,
    g: &Group,
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
    node_cpu: u32,
) -> Value {
    let asked = if g.row.starts_with("buffer") {
        let ar = ApiResource {
            group: "autoscaling.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "autoscaling.x-k8s.io/v1beta1".into(),
            kind: "CapacityBuffer".into(),
            plural: "capacitybuffers".into(),
        };
        Api::<DynamicObject>::namespaced_with(client.clone(), &g.slug, &ar)
            .get_opt("user-room")
            .await
            .ok()
            .flatten()
            .and_then(|b| b.data["spec"]["replicas"].as_u64())
    } else {
        Api::<StatefulSet>::namespaced(client.clone(), &g.slug)
            .get_opt("placeholder")
            .await
            .ok()
            .flatten()
            .and_then(|s| s.spec?.replicas)
            .map(|r| r as u64)
    };
    let by_name: std::collections::HashMap<String, Arc<Node>> = nodes
        .iter()
        .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get(GROUP)) == Some(&g.slug))
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.clone()))
        .collect();
    let warm = |nn: &str| {
        by_name
            .get(nn)
            .is_some_and(|n| has_image(n, USER_IMAGE) && !has_taint(n, GATE_TAINT))
    };
    let (mut ready, mut on_warm) = (0, 0);
    for p in pods.iter().filter(|p| {
        p.metadata.namespace.as_ref() == Some(&g.slug)
            && label(p, "app.kubernetes.io/component") == Some("placeholder")
            && p.metadata.deletion_timestamp.is_none()
            && pod_ready(p)
    }) {
        ready += 1;
        on_warm += u32::from(
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(warm),
        );
    }
    let room = room_of(&by_name, pods, node_cpu);
    let mut room_warm = 0;
    for (name, n) in room
        .get(&g.slug)
        .and_then(|r| r["nodes"].as_object())
        .into_iter()
        .flatten()
    {
        // [warm, ready, free, users, placeholders, soft-tainted]
        if n[1] == true && warm(name) {
            room_warm += n[2].as_i64().unwrap_or(0) + n[4].as_i64().unwrap_or(0);
        }
    }
    json!({"asked": asked, "placeholders_ready": ready, "on_warm_nodes": on_warm,
        "room_on_warm_nodes": room_warm, "nodes": by_name.len(),
        "warm_nodes": by_name.keys().filter(|n| warm(n)).count()})
}

impl Class {
    /// Stops the controllers and keeps, per group, the looks, each schedule row's
    /// `ScheduledScale` Events (when, from the bell, in simulated seconds) and the `WarmBy`
    /// Events its controller posted (none from a binary without the warm-by report).
    pub(crate) async fn finish(
        mut self,
        client: &kube::Client,
        f: f64,
        res: &mut std::collections::BTreeMap<String, RowResult>,
    ) {
        let _ = (&mut self.task).await;
        for (_, p) in &mut self.controllers {
            p.stop(Duration::from_secs(5));
        }
        let bell_ms = epoch_ms(self.bell);
        let looks = std::mem::take(&mut *self.looks.lock().unwrap());
        for (slug, v) in looks {
            let r = res.entry(slug).or_default();
            if r.class.is_null() {
                r.class = json!({"looks": [], "scaled": [], "warm_by": []});
            }
            r.class["looks"].as_array_mut().expect("looks").push(v);
        }
        for (slug, _) in &self.controllers {
            let events =
                Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), slug)
                    .list(&ListParams::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default();
            let r = res.entry(slug.clone()).or_default();
            for e in events {
                let key = match e.reason.as_deref() {
                    Some("ScheduledScale") => "scaled",
                    Some("WarmBy") => "warm_by",
                    _ => continue,
                };
                let t = e
                    .event_time
                    .as_ref()
                    .map(|t| round2((t.0.as_millisecond() - bell_ms) as f64 / 1000.0 * f));
                r.class[key]
                    .as_array_mut()
                    .expect("a list")
                    .push(json!({"t_s": t, "type": e.type_, "note": e.note}));
            }
        }
    }
}

/// The class settings of a row, and its runs' looks and Events (real), for the results.
pub(crate) fn json(args: &Args, row: &str, rs: &[RowResult]) -> Option<Value> {
    (args.form == "class").then(|| {
        json!({"lead_s": lead_s(row), "bell_s": args.class.class_start_min * 60.0,
            "length_s": args.class.class_length_min * 60.0, "count": args.class.class_count,
            "baseline": args.replicas(), "per_run": rs.iter().map(|r| r.class.clone()).collect::<Vec<_>>()})
    })
}

/// The first UTC midnight of the trace (the simulator's time 0).
fn trace_day(path: &Path) -> i64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let first = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next()?.trim().parse::<Timestamp>().ok())
        .map(|t| t.as_second())
        .min()
        .unwrap_or(0);
    first.div_euclid(86400) * 86400
}

/// The simulator's side of the schedule rows: `simulate` with the same event (at the bell in
/// the trace's time) and lead time, the flat count as the baseline, `--gate on` for a gate
/// row; one run each. A scheduled buffer has no simulator row.
pub(crate) fn run_sim(args: &Args, placement: &str, window_s: f64, delays: &Delays) -> Vec<Value> {
    let rows: Vec<&String> = args.rows.iter().filter(|r| lead_s(r).is_some()).collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let c = &args.class;
    let bell = trace_day(&root().join(args.trace())) + (c.class_start_min * 60.0) as i64;
    let path: PathBuf = root().join("target/coldstart-class-sim.ics");
    std::fs::write(
        &path,
        ics(
            bell,
            bell + (c.class_length_min * 60.0) as i64,
            c.class_count,
        ),
    )
    .expect("the simulator's calendar");
    let mut out = Vec::new();
    for row in rows {
        if row.starts_with("buffer") {
            eprintln!("coldstart: {row}: the simulator has no scheduled buffer");
            continue;
        }
        let mut a = args.clone();
        a.rows = vec![row.clone()];
        a.plot = None;
        a.class.sim_flags = vec![
            "--schedule-calendar".into(),
            path.display().to_string(),
            "--schedule-baseline".into(),
            format!("* = {}", args.replicas()),
            "--schedule-lead-time".into(),
            format!("{}s", lead_s(row).unwrap_or(0.0)),
        ];
        if gated(row) {
            a.class.sim_flags.extend(["--gate".into(), "on".into()]);
        }
        out.extend(super::run_sim(&a, placement, window_s, delays));
    }
    for r in &mut out {
        let row = r["row"].as_str().unwrap_or_default().to_string();
        r["class"] = json!({"lead_s": lead_s(&row), "bell_s": c.class_start_min * 60.0,
            "length_s": c.class_length_min * 60.0, "count": c.class_count,
            "baseline": args.replicas()});
    }
    out
}
