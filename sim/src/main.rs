//! `simulate`: compares placeholder policies on a simulated cluster.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{CommandFactory, FromArgMatches, Parser};
use selfdestruct_decision::settings::{PolicySettings, duration};
use selfdestruct_schedule::{Baseline, Tz};
use selfdestruct_sim::metrics::Summary;
use selfdestruct_sim::recommend::{self, MAX_REPLICAS, Target};
use selfdestruct_sim::report;
use selfdestruct_sim::scenario::{self, HOUR, Load, Scenario, Setup, ms};
use selfdestruct_sim::trace::{ReadOptions, Trace};

/// Simulates JupyterHub/Binder placeholder pods running the selfdestruct agent
/// (its real decision function) and compares policies on the same users.
#[derive(Parser, Debug)]
#[command(
    name = "simulate",
    about = "Simulates placeholder pods running the selfdestruct agent and compares policies on the same user arrivals.",
    after_help = "Rows: none, static, timer, new-node, new-node+images, gate, gate+new-node, \
                  new-node+avoid-candidates, static+pin, new-node+pin (docs/decision.md), the peers buffer, buffer+gate, rebalancer, node-balloon, podlifetime (docs/peers.md), configured \
                  (the policy flags below, defaulting to the agent's own defaults). Durations: 90s, 15m, 1h30m, 0. \
                  Same seed and flags give byte-identical output. \
                  --arrivals replays launches instead of the scenario's arrivals (its cluster, session model and delays stay): \
                  BinderHub launch-event archives (JSON lines; only status success; minute-rounded times spread within their minute with the seed) \
                  or CSV with a header, a timestamp column (RFC 3339) and optionally duration and origin; several files are consecutive days. \
                  --recommend finds, per policy, the smallest replica count meeting the target (by default: no user waits for room). \
                  Exit codes: 0 ok, 1 invariant violated, 2 invalid flags or an unreadable arrivals file."
)]
struct Args {
    /// Built-in scenario
    #[arg(
        long,
        value_name = "binder|small|burst|general",
        default_value = "binder"
    )]
    scenario: String,
    /// Random seed (arrivals, node delays, agent draws)
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Independent runs (seeds SEED, SEED+1, ...); counts are summed over them [10; with --arrivals, about a week of replayed days: 7 for one day, 1 for 7 days or more]
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Measured hours (after the warm-up) [scenario default]
    #[arg(long, value_name = "H", conflicts_with = "arrivals")]
    hours: Option<f64>,
    /// Warm-up before the measured window, dropped from the counts (steady state) [scenario default; 0: count from an empty cluster]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    warmup: Option<Duration>,
    /// Print machine-readable results (JSON) instead of the table
    #[arg(long)]
    json: bool,
    /// Write an SVG of nodes, users and placeholders over time for the configured policy
    #[arg(long, value_name = "FILE.svg", conflicts_with = "recommend")]
    plot: Option<PathBuf>,
    /// Draw the plot up to this long after the warm-up only (a replay shorter than its day) [the whole run; at most 7 days]
    #[arg(long, value_name = "DURATION", value_parser = duration, requires = "plot")]
    plot_until: Option<Duration>,
    /// A row per replica count (static and configured), e.g. 0..40
    #[arg(long, value_name = "A..B")]
    sweep_replicas: Option<String>,
    /// Step of --sweep-replicas
    #[arg(long, value_name = "N", default_value_t = 5)]
    sweep_step: u32,
    /// Only these rows (comma-separated names)
    #[arg(long, value_name = "ROWS")]
    only: Option<String>,
    /// Apply the scheduler's default PodTopologySpread to placeholders (the shipped StatefulSet opts out)
    #[arg(long)]
    default_spreading: bool,
    /// Weight of the spreading score against LeastAllocated
    #[arg(long, value_name = "W")]
    spread_weight: Option<f64>,
    /// Check invariants after every event (always on in debug builds)
    #[arg(long)]
    check: bool,

    // ----- replayed launches -----
    /// Replay launches from these files (BinderHub launch-event JSON lines or CSV), one day after another
    #[arg(long, value_name = "FILE", num_args = 1.., help_heading = "Replay")]
    arrivals: Vec<PathBuf>,
    /// Keep only the launches of this federation member (the events' origin field)
    #[arg(
        long,
        value_name = "NAME",
        requires = "arrivals",
        help_heading = "Replay"
    )]
    origin: Option<String>,
    /// Skip lines that are not launch records and count them, instead of failing
    #[arg(long, requires = "arrivals", help_heading = "Replay")]
    skip_bad_lines: bool,
    /// Find each policy's smallest replica count meeting the target (range: --sweep-replicas)
    #[arg(long, help_heading = "Replay")]
    recommend: bool,
    /// Target: at most N users wait for room (delayed) in every run [0 unless only --target-cold is given]
    #[arg(
        long,
        value_name = "N",
        requires = "recommend",
        help_heading = "Replay"
    )]
    target_wait: Option<u64>,
    /// Target: at most this share of users start cold (e.g. 1%)
    #[arg(long, value_name = "PCT", value_parser = percent, requires = "recommend", help_heading = "Replay")]
    target_cold: Option<f64>,
    /// The recommended CapacityBuffer's namespace (a Namespace document is printed with it)
    #[arg(long, value_name = "NAMESPACE", default_value = "buffers", value_parser = recommend::parse_namespace,
          requires = "recommend", help_heading = "Replay")]
    buffer_namespace: String,
    /// The user pool's node labels, for the buffer's chunks (repeatable; KEY=VALUE[,KEY=VALUE])
    #[arg(long, value_name = "KEY=VALUE", value_parser = recommend::parse_node_label, value_delimiter = ',',
          requires = "recommend", help_heading = "Replay")]
    buffer_node_selector: Vec<(String, String)>,
    /// The user pool's taints, tolerated by the buffer's chunks (repeatable; KEY[=VALUE][:EFFECT])
    #[arg(long, value_name = "TAINT", value_parser = recommend::parse_toleration,
          requires = "recommend", help_heading = "Replay")]
    buffer_toleration: Vec<recommend::Toleration>,

    // ----- scenario parameters -----
    /// Placeholder replicas
    #[arg(long, value_name = "N", help_heading = "Scenario")]
    replicas: Option<u32>,
    /// Node allocatable CPU (cores)
    #[arg(long, value_name = "CPU", help_heading = "Scenario")]
    node_cpu: Option<f64>,
    /// Node allocatable memory (GiB)
    #[arg(long, value_name = "GIB", help_heading = "Scenario")]
    node_mem_gib: Option<f64>,
    /// User pod CPU request (cores); placeholders request the same
    #[arg(long, value_name = "CPU", help_heading = "Scenario")]
    user_cpu: Option<f64>,
    /// User pod memory request (GiB)
    #[arg(long, value_name = "GIB", help_heading = "Scenario")]
    user_mem_gib: Option<f64>,
    /// The agents' retry backoffs last this many times longer in simulated time (the real-stack
    /// bench's factor: it does not compress them)
    #[arg(long, value_name = "F", help_heading = "Scenario")]
    agent_backoff_scale: Option<f64>,
    /// The DaemonSet pod's CPU request (cores), in the node's reserve (100m beyond --node-cpu);
    /// only the autoscaler's utilisation counts it
    #[arg(long, value_name = "CPU", help_heading = "Scenario")]
    daemonset_cpu: Option<f64>,
    /// The DaemonSet pod's memory request (MiB), in the node's reserve (256 MiB beyond
    /// --node-mem-gib)
    #[arg(long, value_name = "MIB", help_heading = "Scenario")]
    daemonset_mem_mib: Option<f64>,
    /// Launches per 10 minutes at the quietest hour (burst: the background rate)
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "arrivals",
        help_heading = "Scenario"
    )]
    rate_low: Option<f64>,
    /// Launches per 10 minutes at the peak
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "arrivals",
        help_heading = "Scenario"
    )]
    rate_high: Option<f64>,
    /// Hour of the daily peak (0-24)
    #[arg(
        long,
        value_name = "H",
        conflicts_with = "arrivals",
        help_heading = "Scenario"
    )]
    peak_hour: Option<f64>,
    /// Class size (burst scenario)
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "arrivals",
        help_heading = "Scenario"
    )]
    class_size: Option<u32>,
    /// Class start after the warm-up (burst scenario)
    #[arg(long, value_name = "DURATION", value_parser = duration, conflicts_with = "arrivals", help_heading = "Scenario")]
    class_at: Option<Duration>,
    /// Mean session length
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    session_mean: Option<Duration>,
    /// Lognormal shape of session lengths
    #[arg(long, value_name = "SIGMA", help_heading = "Scenario")]
    session_sigma: Option<f64>,
    /// Longest session
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    session_cap: Option<Duration>,
    /// From the autoscaler's request to node Ready
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    node_ready: Option<Duration>,
    /// From node Ready to the user image on the node
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    image_pull: Option<Duration>,
    /// Relative +- spread of the node delays (0-0.9)
    #[arg(long, value_name = "F", help_heading = "Scenario")]
    delay_spread: Option<f64>,
    /// Smallest node count
    #[arg(long, value_name = "N", help_heading = "Scenario")]
    min_nodes: Option<u32>,
    /// Largest node count
    #[arg(long, value_name = "N", help_heading = "Scenario")]
    max_nodes: Option<u32>,
    /// From eviction to the StatefulSet's replacement pod
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    recreate_delay: Option<Duration>,
    /// From a preempting user's arrival to its start (the victim's end, the scheduler's
    /// retry) [1s; at most 1h]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    preemption_delay: Option<Duration>,
    /// How late the agents' watch shows a sibling's going: an agent whose move falls due
    /// within it posts its eviction and the PodDisruptionBudget refuses it [0; at most 1h]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    watch_delay: Option<Duration>,
    /// How long after a placeholder starts the PodDisruptionBudget still refuses evictions
    /// (the disruption controller's recount) [0; at most 1h]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    pdb_recount: Option<Duration>,
    /// From a user's binding to its start on a node holding the image (the container's
    /// start) [0; at most 1h]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    start_delay: Option<Duration>,
    /// Autoscaler --scale-down-unneeded-time
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    unneeded_time: Option<Duration>,
    /// Autoscaler --scan-interval [10s; 1s-10m]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    scan_interval: Option<Duration>,
    /// Autoscaler --scale-down-delay-after-add [10m; at most 1 day]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    scale_down_delay_after_add: Option<Duration>,
    /// Autoscaler --unremovable-node-recheck-timeout [5m; 1s-1 day]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    unremovable_node_recheck_timeout: Option<Duration>,
    /// The autoscaler's hold on very new unschedulable pods (its fixed 2 s; a compressed replay's real 2 s is longer in simulated time) [at most 10m]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    new_pod_hold: Option<Duration>,
    /// The resolution of pods' creation stamps the hold counts from (the API's whole second; a compressed replay's real second is longer in simulated time) [1s; 1ms-10m]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    created_resolution: Option<Duration>,
    /// Autoscaler --node-delete-delay-after-taint [5s; at most 10m]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    node_delete_delay_after_taint: Option<Duration>,
    /// The autoscaler's retry of a refused eviction (its fixed 10 s) [1s-10m]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    eviction_retry: Option<Duration>,
    /// Autoscaler --max-pod-eviction-time: a drain refused this long fails [2m; 1s-1 day]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    max_pod_eviction_time: Option<Duration>,
    /// With the readiness gate: the taint goes up to this long after the pull [10s; at most 1h]
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Scenario")]
    gate_lag: Option<Duration>,
    /// The user image's size, for the schedulers' ImageLocality score [scenario default; 0.001-100]
    #[arg(long, value_name = "GIB", help_heading = "Scenario")]
    image_size_gib: Option<f64>,
    /// The users' scheduler: most-allocated (JupyterHub's user-scheduler) or least-allocated (the default scheduler) [scenario default: most-allocated; general: least-allocated]
    #[arg(long, value_name = "most-allocated|least-allocated", value_parser = user_placement, help_heading = "Scenario")]
    user_placement: Option<scenario::UserPlacement>,

    // ----- the peers -----
    /// The descheduler's run period for the podlifetime row (its --descheduling-interval)
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Peers")]
    descheduling_interval: Option<Duration>,
    /// PodLifeTime's maxPodLifeTimeSeconds for the podlifetime row
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Peers")]
    max_pod_lifetime: Option<Duration>,
    /// The rebalancer's loop period for the rebalancer row
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Peers")]
    rebalancer_interval: Option<Duration>,

    // ----- the configured policy (the agent's settings) -----
    /// The agent's policy settings: the same flags, values, defaults and lifetime rule.
    #[command(flatten, next_help_heading = "Configured policy")]
    policy: PolicySettings,
    /// SELFDESTRUCT_REQUIRED_IMAGES = the user image (on) or none (off)
    #[arg(long, value_name = "on|off", action = clap::ArgAction::Set, value_parser = on_off, default_value = "off", help_heading = "Configured policy")]
    required_images: bool,
    /// Node readiness gate (startup taint until the image is pulled)
    #[arg(long, value_name = "on|off", action = clap::ArgAction::Set, value_parser = on_off, default_value = "off", help_heading = "Configured policy")]
    gate: bool,

    // ----- placeholders on a calendar (`selfdestruct schedule`, docs/schedule.md) -----
    /// With --recommend: also propose a weekly baseline (per hour of the week the smallest count meeting the target) and print its node-hours against the flat count
    #[arg(long, requires_all = ["recommend", "arrivals"], help_heading = "Schedule")]
    schedule: bool,
    /// Add a `schedule` row: the agent's defaults (behind the node gate with --gate on) with the replicas following this weekly baseline ("Mon-Fri 08:00-18:00 = 12; * = 2")
    #[arg(long, value_name = "RULES", value_parser = schedule_baseline, conflicts_with = "recommend", help_heading = "Schedule")]
    schedule_baseline: Option<Baseline>,
    /// ... and the events of this iCal file ("placeholders: N" in their summary or description)
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "recommend",
        help_heading = "Schedule"
    )]
    schedule_calendar: Option<PathBuf>,
    /// IANA zone of the baseline (and of the calendar's floating times)
    #[arg(long, value_name = "ZONE", default_value = "UTC", value_parser = schedule_zone, help_heading = "Schedule")]
    schedule_time_zone: Tz,
    /// An event's count applies this long before it starts
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration, help_heading = "Schedule")]
    schedule_lead_time: Duration,
    /// Count the users placed more than this after arriving, per seed in the JSON's `late`
    /// (the real-stack bench's "waited": bound later than its threshold after creation)
    #[arg(long, value_name = "DURATION", value_parser = duration, hide = true)]
    late_after: Option<Duration>,
    /// Write every row's users, nodes and scale-ups of the first seed to this JSON file (the
    /// real-stack bench's per-user comparison: why each user started cold)
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "recommend")]
    users_out: Option<PathBuf>,
}

fn schedule_baseline(s: &str) -> Result<Baseline, String> {
    Baseline::parse(s).map_err(|e| e.to_string())
}

fn schedule_zone(s: &str) -> Result<Tz, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is no IANA time zone name"))
}

/// The schedule the `--schedule*` flags give (bounds: none).
fn schedule_of(args: &Args, baseline: Baseline) -> selfdestruct_schedule::Schedule {
    selfdestruct_schedule::Schedule {
        baseline,
        tz: args.schedule_time_zone,
        lead: args.schedule_lead_time,
        min: 0,
        max: selfdestruct_schedule::baseline::MAX_COUNT,
    }
}

/// Replicas over time: (time, count) steps.
type Steps = Vec<(scenario::Ms, u32)>;

/// The `schedule` row and its replicas over time, from `--schedule-baseline` and
/// `--schedule-calendar`: the `new-node` row (the agent's defaults; `gate+new-node` with
/// `--gate on`) with the steps.
fn schedule_row(
    args: &Args,
    sc: &Scenario,
    trace: Option<&Trace>,
    config: &Setup,
) -> Result<Option<(Setup, Steps)>, String> {
    if args.schedule_baseline.is_none() && args.schedule_calendar.is_none() {
        return Ok(None);
    }
    let schedule = schedule_of(args, args.schedule_baseline.clone().unwrap_or_default());
    let origin = selfdestruct_sim::schedule::origin(trace);
    let occurrences = match &args.schedule_calendar {
        None => Vec::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--schedule-calendar {}: {e}", path.display()))?;
            let cal = selfdestruct_schedule::Calendar::parse(&text, schedule.tz)
                .map_err(|e| format!("--schedule-calendar {}: {e}", path.display()))?;
            selfdestruct_sim::schedule::occurrences(sc, origin, &schedule, &cal)?
        }
    };
    let steps = selfdestruct_sim::schedule::steps(sc, origin, &schedule, &occurrences);
    let base = if config.gate {
        scenario::Row::GateNewNode
    } else {
        scenario::Row::NewNode
    };
    let mut row = scenario::standard_rows(sc, config.clone())
        .into_iter()
        .find(|r| r.row == base)
        .ok_or("no new-node row")?;
    row.name = "schedule".into();
    row.row = scenario::Row::Schedule;
    row.replicas = steps.iter().map(|s| s.1).max().unwrap_or(0);
    Ok(Some((row, steps)))
}

fn user_placement(s: &str) -> Result<scenario::UserPlacement, String> {
    scenario::UserPlacement::by_name(s.trim()).ok_or_else(|| {
        format!(
            "expected one of {}",
            scenario::UserPlacement::NAMES.join(", ")
        )
    })
}

fn percent(s: &str) -> Result<f64, String> {
    let v = s.trim().trim_end_matches('%').trim();
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=100.0).contains(&x) => Ok(x),
        _ => Err("expected a percentage from 0 to 100, e.g. 1%".into()),
    }
}

fn on_off(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err("expected on or off".into()),
    }
}

/// Most nodes of the node group (`--min-nodes`, `--max-nodes`).
const MAX_NODES: u32 = 5_000;
/// Most user pods on one node (the kubelet's `--max-pods` is 110 by default).
const MAX_PODS_PER_NODE: u64 = 1_000;
/// Most launches in one run, warm-up included (the 30-day replay of sim/README.md has 2.9
/// million): the engine keeps 72 bytes a user, per row and core.
const MAX_LAUNCHES: f64 = 10_000_000.0;
/// Longest warm-up.
const MAX_WARMUP: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most replica counts of `--sweep-replicas` (two rows each).
const MAX_SWEEP_COUNTS: u32 = 200;
/// Shortest period of a peer's loop (each run is an event).
const MIN_PERIOD: Duration = Duration::from_secs(1);

fn fail(msg: &str) -> ExitCode {
    eprintln!("simulate: {msg}");
    ExitCode::from(2)
}

fn positive(name: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            Err(format!("--{name} must be a positive number, got {x}"))
        }
        _ => Ok(v),
    }
}

/// The scenario with the flags applied.
fn scenario(a: &Args) -> Result<Scenario, String> {
    let mut sc = Scenario::by_name(&a.scenario).ok_or_else(|| {
        format!(
            "unknown --scenario {:?}: expected one of {}",
            a.scenario,
            Scenario::NAMES.join(", ")
        )
    })?;
    if let Some(h) = a.hours {
        if !(h.is_finite() && h > 0.0 && h <= 24.0 * 30.0) {
            return Err(format!("--hours must be in (0, 720], got {h}"));
        }
        sc.measured = (h * HOUR as f64) as u64;
    }
    if let Some(w) = a.warmup {
        if w > MAX_WARMUP {
            return Err(format!(
                "--warmup must be at most 7d, got {}",
                selfdestruct_decision::duration::format(w)
            ));
        }
        sc.warmup = ms(w);
    }
    if let Some(r) = a.replicas {
        sc.replicas = r;
    }
    if let Some(c) = positive("node-cpu", a.node_cpu)? {
        sc.node.cpu_m = (c * 1000.0).round() as u64;
    }
    if let Some(m) = positive("node-mem-gib", a.node_mem_gib)? {
        sc.node.mem_mib = (m * 1024.0).round() as u64;
    }
    if let Some(c) = positive("user-cpu", a.user_cpu)? {
        sc.user.cpu_m = ((c * 1000.0).round() as u64).max(1);
    }
    if let Some(m) = positive("user-mem-gib", a.user_mem_gib)? {
        sc.user.mem_mib = ((m * 1024.0).round() as u64).max(1);
    }
    if let Some(f) = positive("agent-backoff-scale", a.agent_backoff_scale)? {
        sc.agent_backoff_scale = f;
    }
    if let Some(c) = positive("daemonset-cpu", a.daemonset_cpu)? {
        sc.daemonset.cpu_m = (c * 1000.0).round() as u64;
    }
    if let Some(m) = positive("daemonset-mem-mib", a.daemonset_mem_mib)? {
        sc.daemonset.mem_mib = m.round() as u64;
    }
    if sc.pods_per_node() == 0 {
        return Err("a user pod does not fit on an empty node".into());
    }
    if sc.pods_per_node() > MAX_PODS_PER_NODE {
        return Err(format!(
            "--node-cpu/--node-mem-gib over --user-cpu/--user-mem-gib give {} user pods a node: \
             at most {MAX_PODS_PER_NODE} (the kubelet's --max-pods is 110 by default)",
            sc.pods_per_node()
        ));
    }
    for (name, v) in [("rate-low", a.rate_low), ("rate-high", a.rate_high)] {
        if let Some(x) = v
            && !(x.is_finite() && x >= 0.0)
        {
            return Err(format!("--{name} must be a number >= 0, got {x}"));
        }
    }
    match &mut sc.load {
        Load::Daily {
            low_per_10min,
            high_per_10min,
            peak_hour,
        } => {
            if let Some(x) = a.rate_low {
                *low_per_10min = x;
            }
            if let Some(x) = a.rate_high {
                *high_per_10min = x;
            }
            if let Some(h) = a.peak_hour {
                if !(0.0..=24.0).contains(&h) {
                    return Err(format!("--peak-hour must be in [0, 24], got {h}"));
                }
                *peak_hour = h;
            }
            if *low_per_10min > *high_per_10min {
                return Err(format!(
                    "--rate-low ({low_per_10min}) must not exceed --rate-high ({high_per_10min})"
                ));
            }
            if a.class_size.is_some() || a.class_at.is_some() {
                return Err("--class-size and --class-at apply to --scenario burst".into());
            }
        }
        Load::Class {
            background_per_10min,
            size,
            at,
            ..
        } => {
            if let Some(x) = a.rate_low {
                *background_per_10min = x;
            }
            if let Some(n) = a.class_size {
                if f64::from(n) > MAX_LAUNCHES {
                    return Err(format!(
                        "--class-size must be at most {MAX_LAUNCHES} launches, got {n}"
                    ));
                }
                *size = n;
            }
            if let Some(t) = a.class_at {
                *at = ms(t);
            }
            if a.rate_high.is_some() || a.peak_hour.is_some() {
                return Err(
                    "--rate-high and --peak-hour apply to daily scenarios (binder, small)".into(),
                );
            }
        }
        Load::Replay { .. } => {}
    }
    if let Some(d) = a.session_mean {
        if d.is_zero() {
            return Err("--session-mean must be positive".into());
        }
        sc.session_mean = ms(d);
    }
    if let Some(s) = a.session_sigma {
        if !(s.is_finite() && (0.0..=3.0).contains(&s)) {
            return Err(format!("--session-sigma must be in [0, 3], got {s}"));
        }
        sc.session_sigma = s;
    }
    if let Some(d) = a.session_cap {
        sc.session_cap = ms(d).max(scenario::MIN);
    }
    if let Some(d) = a.node_ready {
        sc.node_ready = ms(d);
    }
    if let Some(d) = a.image_pull {
        sc.image_pull = ms(d);
    }
    if let Some(f) = a.delay_spread {
        if !(f.is_finite() && (0.0..=0.9).contains(&f)) {
            return Err(format!("--delay-spread must be in [0, 0.9], got {f}"));
        }
        sc.delay_spread = f;
    }
    if let Some(n) = a.min_nodes {
        sc.autoscaler.min_nodes = n;
    }
    if let Some(n) = a.max_nodes {
        sc.autoscaler.max_nodes = n;
    }
    if sc.autoscaler.min_nodes == 0 || sc.autoscaler.min_nodes > sc.autoscaler.max_nodes {
        return Err(format!(
            "need 1 <= --min-nodes ({}) <= --max-nodes ({})",
            sc.autoscaler.min_nodes, sc.autoscaler.max_nodes
        ));
    }
    if sc.autoscaler.max_nodes > MAX_NODES {
        return Err(format!(
            "--max-nodes must be at most {MAX_NODES}, got {}",
            sc.autoscaler.max_nodes
        ));
    }
    let room = u64::from(sc.autoscaler.max_nodes) * sc.pods_per_node();
    if let Some(r) = a.replicas
        && (r > MAX_REPLICAS || u64::from(r) > room)
    {
        return Err(format!(
            "--replicas must be at most {} (at most {MAX_REPLICAS}, and no more than \
             --max-nodes {} nodes hold: {room}), got {r}",
            room.min(u64::from(MAX_REPLICAS)),
            sc.autoscaler.max_nodes
        ));
    }
    if let Some(d) = a.late_after {
        sc.late_after = Some(ms(d));
    }
    if let Some(d) = a.recreate_delay {
        sc.recreate_delay = ms(d).max(1);
    }
    for (flag, d, field) in [
        (
            "--preemption-delay",
            a.preemption_delay,
            &mut sc.preemption_delay,
        ),
        ("--start-delay", a.start_delay, &mut sc.start_delay),
        ("--watch-delay", a.watch_delay, &mut sc.watch_delay),
        ("--pdb-recount", a.pdb_recount, &mut sc.pdb_recount),
    ] {
        let Some(d) = d else { continue };
        // A compressed replay on a loaded machine measures minutes (bench/coldstart).
        if d > Duration::from_secs(3600) {
            return Err(format!(
                "{flag} {}: at most 1h",
                selfdestruct_decision::duration::format(d)
            ));
        }
        *field = ms(d);
    }
    if let Some(d) = a.unneeded_time {
        sc.autoscaler.unneeded_time = ms(d);
    }
    if let Some(p) = a.user_placement {
        sc.user_placement = p;
    }
    // The timers a compressed replay on the real stack sets (bench/coldstart).
    const DAY: Duration = Duration::from_secs(24 * 3600);
    for (name, v, lo, hi, slot) in [
        (
            "scan-interval",
            a.scan_interval,
            MIN_PERIOD,
            Duration::from_secs(600),
            &mut sc.autoscaler.scan,
        ),
        (
            "scale-down-delay-after-add",
            a.scale_down_delay_after_add,
            Duration::ZERO,
            DAY,
            &mut sc.autoscaler.delay_after_add,
        ),
        (
            "unremovable-node-recheck-timeout",
            a.unremovable_node_recheck_timeout,
            MIN_PERIOD,
            DAY,
            &mut sc.autoscaler.unremovable_recheck,
        ),
        (
            "new-pod-hold",
            a.new_pod_hold,
            Duration::ZERO,
            Duration::from_secs(600),
            &mut sc.autoscaler.new_pod_hold,
        ),
        (
            "created-resolution",
            a.created_resolution,
            Duration::from_millis(1),
            Duration::from_secs(600),
            &mut sc.autoscaler.created_resolution,
        ),
        (
            "node-delete-delay-after-taint",
            a.node_delete_delay_after_taint,
            Duration::ZERO,
            Duration::from_secs(600),
            &mut sc.autoscaler.delete_delay_after_taint,
        ),
        (
            "eviction-retry",
            a.eviction_retry,
            MIN_PERIOD,
            Duration::from_secs(600),
            &mut sc.autoscaler.eviction_retry,
        ),
        (
            "max-pod-eviction-time",
            a.max_pod_eviction_time,
            MIN_PERIOD,
            DAY,
            &mut sc.autoscaler.max_pod_eviction_time,
        ),
        (
            "gate-lag",
            a.gate_lag,
            Duration::ZERO,
            Duration::from_secs(3600),
            &mut sc.gate_lag,
        ),
    ] {
        if let Some(d) = v {
            if d < lo || d > hi {
                return Err(format!(
                    "--{name} must be in [{}s, {}s], got {}s",
                    lo.as_secs(),
                    hi.as_secs(),
                    d.as_secs_f64()
                ));
            }
            *slot = ms(d);
        }
    }
    if let Some(g) = a.image_size_gib {
        if !(g.is_finite() && (0.001..=100.0).contains(&g)) {
            return Err(format!("--image-size-gib must be in [0.001, 100], got {g}"));
        }
        sc.image_size_mib = ((g * 1024.0).round() as u64).max(1);
    }
    for (name, v, slot) in [
        (
            "descheduling-interval",
            a.descheduling_interval,
            &mut sc.peers.descheduler_interval,
        ),
        (
            "max-pod-lifetime",
            a.max_pod_lifetime,
            &mut sc.peers.max_pod_lifetime,
        ),
        (
            "rebalancer-interval",
            a.rebalancer_interval,
            &mut sc.peers.rebalancer_interval,
        ),
    ] {
        if let Some(d) = v {
            if d < MIN_PERIOD {
                return Err(format!("--{name} must be at least 1s"));
            }
            *slot = ms(d);
        }
    }
    sc.default_spreading = a.default_spreading;
    if let Some(w) = a.spread_weight {
        if !(w.is_finite() && w >= 0.0) {
            return Err(format!("--spread-weight must be >= 0, got {w}"));
        }
        sc.spread_weight = w;
    }
    launches_bounded(a, &sc)?;
    Ok(sc)
}

/// Refuses a synthetic load of more than [`MAX_LAUNCHES`] launches a run (the rate flags times
/// the warm-up and measured hours, plus the class), naming the flags that set it.
fn launches_bounded(a: &Args, sc: &Scenario) -> Result<(), String> {
    let (class, daily) = match sc.load {
        Load::Class { size, .. } => (f64::from(size), false),
        Load::Daily { .. } => (0.0, true),
        Load::Replay { .. } => return Ok(()),
    };
    // The rates without the class (Scenario::rates adds it to the mean).
    let minutes = sc.end() as f64 / scenario::MIN as f64;
    let mean = (0..sc.end() / scenario::MIN)
        .map(|m| sc.rate_per_min(m * scenario::MIN))
        .sum::<f64>()
        / minutes.max(1.0);
    let launches = mean * minutes + class;
    if launches <= MAX_LAUNCHES {
        return Ok(());
    }
    let given: Vec<&str> = [
        ("--rate-low", a.rate_low.is_some()),
        ("--rate-high", a.rate_high.is_some() && daily),
        ("--class-size", a.class_size.is_some()),
        ("--hours", a.hours.is_some()),
        ("--warmup", a.warmup.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, set)| set.then_some(flag))
    .collect();
    Err(format!(
        "{}: about {launches:.0} launches a run, at most {MAX_LAUNCHES} (the 30-day replay of \
         sim/README.md has 2.9 million)",
        if given.is_empty() {
            "the scenario".to_string()
        } else {
            given.join(", ")
        }
    ))
}

/// How long after the end of the measured window a user may still wait before the engine
/// gives up on it (the engine's drain limit).
const WAIT_LIMIT: scenario::Ms = 12 * HOUR;

/// Refuses launches that a cluster of `--max-nodes` nodes cannot start before the engine gives
/// up on them, whatever the policy: a lower bound, as if every node were there from the start
/// and each user took the first room freed (first come, first served). Otherwise such input
/// ends in users that never ran, which reads as a fault of the model.
fn room_suffices(sc: &Scenario, arrivals: &[scenario::Arrival]) -> Result<(), String> {
    use std::cmp::Reverse;
    let room = (u64::from(sc.autoscaler.max_nodes) * sc.pods_per_node()) as usize;
    let limit = sc.end() + WAIT_LIMIT;
    // When each of the `room` places frees up.
    let mut frees: std::collections::BinaryHeap<Reverse<scenario::Ms>> =
        std::collections::BinaryHeap::with_capacity(room.min(arrivals.len()));
    for (i, a) in arrivals.iter().enumerate() {
        let start = if frees.len() < room {
            a.at
        } else {
            frees.pop().map_or(a.at, |Reverse(t)| t.max(a.at))
        };
        if start > limit {
            let at = arrivals.partition_point(|b| b.at < a.at.saturating_sub(scenario::MIN));
            return Err(format!(
                "the launches need more room than the cluster has: --max-nodes {} nodes hold {room} \
                 users, and even with every node there from the start, launch {} (at {:.1}h, \
                 {} launches in the minute before it) would wait until {:.1}h, beyond the run's \
                 end ({:.1}h) plus {}h; raise --max-nodes or lower the load",
                sc.autoscaler.max_nodes,
                i + 1,
                a.at as f64 / HOUR as f64,
                i + 1 - at,
                start as f64 / HOUR as f64,
                sc.end() as f64 / HOUR as f64,
                WAIT_LIMIT / HOUR,
            ));
        }
        frees.push(Reverse(start + a.session));
    }
    Ok(())
}

/// The configured row.
fn configured(a: &Args, sc: &Scenario, replicas: u32, name: &str) -> Result<Setup, String> {
    let images = match a.required_images {
        true => scenario::user_image(sc),
        false => Vec::new(),
    };
    Ok(Setup {
        name: name.into(),
        row: scenario::Row::Configured,
        replicas,
        policy: a.policy.policy(images).map_err(|e| e.to_string())?,
        gate: a.gate,
        peer: scenario::Peer::Selfdestruct,
        pin: false,
    })
}

fn parse_range(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--sweep-replicas {s:?}: expected A..B, e.g. 0..40");
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let b = b.strip_prefix('=').unwrap_or(b);
    let a: u32 = a.trim().parse().map_err(|_| bad())?;
    let b: u32 = b.trim().parse().map_err(|_| bad())?;
    if a > b {
        return Err(bad());
    }
    if b > MAX_REPLICAS {
        return Err(format!(
            "--sweep-replicas {s:?}: at most {MAX_REPLICAS} replicas"
        ));
    }
    Ok((a, b))
}

/// The rows without `none` for `--recommend` (their replica counts are searched).
fn recommend_rows(rows: Vec<Setup>) -> Vec<Setup> {
    rows.into_iter()
        .filter(|r| r.row != scenario::Row::None)
        .collect()
}

fn main() -> ExitCode {
    // The agent's settings are read from the flags only: the environment of the
    // shell does not change a simulation.
    let flags_only = Args::command().mut_args(|a| a.env(None));
    let args = match flags_only
        .try_get_matches()
        .and_then(|m| Args::from_arg_matches(&m))
    {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let mut sc = match scenario(&args) {
        Ok(sc) => sc,
        Err(e) => return fail(&e),
    };
    let trace = if args.arrivals.is_empty() {
        None
    } else {
        let opts = ReadOptions {
            origin: args.origin.clone(),
            skip_bad_lines: args.skip_bad_lines,
        };
        let started = Instant::now();
        match Trace::read(&args.arrivals, &opts) {
            Ok(t) => {
                t.apply(&mut sc, args.origin.as_deref());
                if !args.json {
                    let lines: u64 = t.files.iter().map(|f| f.lines).sum();
                    eprintln!(
                        "simulate: read {lines} lines ({} launches, {} days) in {:.1}s",
                        t.launches.len(),
                        t.days,
                        started.elapsed().as_secs_f64()
                    );
                }
                Some(t)
            }
            Err(e) => return fail(&e.to_string()),
        }
    };
    let config = match configured(&args, &sc, sc.replicas, "configured") {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    if args.sweep_step == 0 {
        return fail("--sweep-step must be at least 1");
    }
    let range = match args.sweep_replicas.as_deref().map(parse_range).transpose() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if let Some((lo, hi)) = range
        && !args.recommend
        && (hi - lo) / args.sweep_step + 1 > MAX_SWEEP_COUNTS
    {
        return fail(&format!(
            "--sweep-replicas {lo}..{hi} in steps of --sweep-step {} gives {} replica counts: \
             at most {MAX_SWEEP_COUNTS}",
            args.sweep_step,
            (hi - lo) / args.sweep_step + 1
        ));
    }
    let mut rows = match range {
        Some((lo, hi)) if !args.recommend => {
            let mut rows = Vec::new();
            let mut r = lo;
            while r <= hi {
                rows.push(Setup {
                    name: format!("{r} static"),
                    row: scenario::Row::Static,
                    replicas: r,
                    policy: scenario::static_policy(),
                    gate: false,
                    peer: scenario::Peer::Selfdestruct,
                    pin: false,
                });
                match configured(&args, &sc, r, &format!("{r} configured")) {
                    Ok(c) => rows.push(c),
                    Err(e) => return fail(&e),
                }
                r += args.sweep_step;
            }
            rows
        }
        _ if args.recommend => recommend_rows(scenario::standard_rows(&sc, config.clone())),
        _ => scenario::standard_rows(&sc, config.clone()),
    };
    if let Some(only) = &args.only {
        let wanted: Vec<&str> = only
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if wanted.is_empty() {
            let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
            return fail(&format!(
                "--only {only:?} names no row (rows: {})",
                names.join(", ")
            ));
        }
        if let Some(unknown) = wanted.iter().find(|w| !rows.iter().any(|r| r.name == **w)) {
            let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
            return fail(&format!(
                "--only: no row {unknown:?} (rows: {})",
                names.join(", ")
            ));
        }
        rows.retain(|r| wanted.contains(&r.name.as_str()));
    }
    let n_seeds = args.seeds.unwrap_or(match &trace {
        Some(t) => 7u64.div_ceil(t.days.max(1)),
        None => 10,
    });
    if n_seeds == 0 || n_seeds > 1000 {
        return fail("--seeds must be in 1..=1000");
    }
    let seeds: Vec<u64> = (0..n_seeds).map(|i| args.seed.wrapping_add(i)).collect();
    let arrivals: Vec<Vec<scenario::Arrival>> = seeds
        .iter()
        .map(|&s| match &trace {
            Some(t) => t.arrivals(&sc, s),
            None => sc.arrivals(s),
        })
        .collect();
    for a in &arrivals {
        if let Err(e) = room_suffices(&sc, a) {
            return fail(&e);
        }
    }
    if let Some(t) = &trace
        && t.skipped > 0
    {
        eprintln!(
            "simulate: skipped {} bad lines (first: {})",
            t.skipped,
            t.skipped_examples.join("; ")
        );
    }
    if args.recommend {
        let target = Target {
            max_waiting: match (args.target_wait, args.target_cold) {
                (None, Some(_)) => None,
                (w, _) => Some(w.unwrap_or(0)),
            },
            max_cold_pct: args.target_cold,
        };
        let range = range.unwrap_or_else(|| recommend::default_range(&sc));
        let started = Instant::now();
        // A line per count run, on stderr: a 30-day search takes minutes.
        let mut rec = recommend::recommend(
            &sc,
            &rows,
            range,
            &seeds,
            &arrivals,
            target,
            args.check,
            &|line: &str| eprintln!("simulate: recommend: {line}"),
        );
        rec.place_buffer(
            &sc,
            &recommend::BufferPlacement {
                namespace: args.buffer_namespace.clone(),
                node_selector: args.buffer_node_selector.clone(),
                tolerations: args.buffer_toleration.clone(),
            },
        );
        if args.json {
            println!("{}", recommend::json(&sc, &seeds, &rec));
        } else {
            print!("{}", report::header(&sc, &seeds));
            println!("  configured:   {}", report::describe(&config));
            println!();
            print!("{}", recommend::table(&rec));
            if args.schedule
                && let Some(t) = &trace
            {
                let found = rec.manifest_policy.as_ref().and_then(|name| {
                    let f = rec.policies.iter().find(|f| &f.policy == name)?;
                    let row = rows.iter().find(|r| &r.name == name)?;
                    Some((f.replicas?, f.results.clone(), row.clone()))
                });
                match found {
                    Some((flat, results, row)) => {
                        let schedule = schedule_of(&args, Baseline::default());
                        let p = selfdestruct_sim::schedule::propose(
                            t,
                            &sc,
                            &row,
                            (flat, results),
                            &schedule,
                            &seeds,
                            &arrivals,
                            target,
                            args.check,
                        );
                        println!();
                        print!("{}", selfdestruct_sim::schedule::describe(&p, &schedule));
                    }
                    None => println!(
                        "\nSchedule (--schedule): no flat count meets the target: nothing to schedule against"
                    ),
                }
            }
            let runs: usize = rec.policies.iter().map(|f| f.tried.len()).sum::<usize>() + 1;
            eprintln!(
                "simulate: {runs} runs x {} seed(s) in {:.1}s",
                seeds.len(),
                started.elapsed().as_secs_f64()
            );
        }
        return verdict(
            &sc,
            rec.policies
                .iter()
                .map(|f| &f.results)
                .chain(std::iter::once(&rec.none)),
        );
    }
    let started = Instant::now();
    let mut results = selfdestruct_sim::run_rows_on(&sc, &rows, &seeds, &arrivals, args.check);
    match schedule_row(&args, &sc, trace.as_ref(), &config) {
        Ok(Some((row, steps))) => {
            results.push(selfdestruct_sim::schedule::run(
                &sc, &row, &seeds, &arrivals, &steps, args.check,
            ));
            rows.push(row);
        }
        Ok(None) => {}
        Err(e) => return fail(&e),
    }
    let elapsed = started.elapsed();
    let summaries: Vec<_> = results.iter().map(|r| r.summary.clone()).collect();
    if let Some(path) = &args.users_out {
        let out = report::users_json(&sc, &rows, seeds[0], &arrivals[0], args.check);
        if let Err(e) = std::fs::write(path, out) {
            eprintln!("simulate: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if args.json {
        println!("{}", report::json(&sc, &seeds, &rows, &results));
    } else {
        print!("{}", report::header(&sc, &seeds));
        println!("  configured:   {}", report::describe(&config));
        println!();
        if args.sweep_replicas.is_some() {
            print!("{}", report::sweep_header(&sc));
            print!("{}", report::table(&summaries, "replicas policy"));
        } else {
            print!("{}", report::table(&summaries, "policy"));
            println!();
            print!("{}", report::what_this_says(&rows, &summaries));
        }
        if trace.is_some() {
            eprintln!(
                "simulate: {} rows x {} seed(s) replayed in {:.1}s",
                rows.len(),
                seeds.len(),
                elapsed.as_secs_f64()
            );
        }
    }
    if let Some(path) = &args.plot {
        let samples = match results.iter().position(|r| r.summary.policy == config.name) {
            Some(i) => results[i].samples.clone(),
            None => {
                let one = selfdestruct_sim::run_rows_on(
                    &sc,
                    std::slice::from_ref(&config),
                    &seeds[..1],
                    &arrivals[..1],
                    args.check,
                );
                one.into_iter()
                    .next()
                    .map(|r| r.samples)
                    .unwrap_or_default()
            }
        };
        let title = format!(
            "{} scenario, seed {}, configured policy{}",
            sc.name,
            args.seed,
            if sc.default_spreading {
                " (default spreading on)"
            } else {
                ""
            }
        );
        let mut samples = samples;
        if let Some(until) = args.plot_until {
            let end = sc.warmup + ms(until.min(MAX_WARMUP));
            samples.retain(|s| s.t <= end);
        }
        let svg =
            selfdestruct_sim::plot::svg(&samples, sc.warmup, &title, &report::describe(&config));
        if let Err(e) = std::fs::write(path, svg) {
            eprintln!("simulate: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    verdict(&sc, summaries.iter())
}

/// The exit code for the results: 0; 2 when users never ran while the cluster was at
/// `--max-nodes` (the load needs more room: the input's fault, not the model's); else 1 on an
/// invariant violation (the model's).
fn verdict<'a>(sc: &Scenario, results: impl Iterator<Item = &'a Summary>) -> ExitCode {
    let bad: Vec<&Summary> = results
        .filter(|s| !s.violations.is_empty() || s.unfinished_users > 0)
        .collect();
    if bad.is_empty() {
        return ExitCode::SUCCESS;
    }
    if let Some(full) = bad
        .iter()
        .find(|s| s.unfinished_users > 0 && s.peak_nodes >= sc.autoscaler.max_nodes)
    {
        return fail(&format!(
            "{} users of row {} never ran with the cluster at --max-nodes {}: the load needs \
             more room; raise --max-nodes or lower the load",
            full.unfinished_users, full.policy, sc.autoscaler.max_nodes
        ));
    }
    eprintln!("simulate: invariant violated (see the rows' violations)");
    ExitCode::from(1)
}
