//! Cold starts on the real stack (issue 34): replays a launch log (the simulator's
//! `--arrivals` CSV: `timestamp,duration`) on a real control plane with the real
//! cluster-autoscaler (kwok) and the stand-in kubelet of `realstack/`, every timer compressed
//! by one factor, then the same trace through `simulate` with the same delays, and writes both
//! to `bench/results/real-stack-rows-apart.json` (`bench/results/real-stack.json` with
//! `--rows-apart false`; with `--plot`, one run's timeline beside the simulator's as an SVG).
//!
//! `cargo test --test coldstart -- --rows static,new-node --placement most-allocated`
//! (after `cargo build --release -p selfdestruct-sim`; `SELFDESTRUCT_KUBE_BIN` as for
//! `tests/cluster.rs`). Every row × placement runs side by side on one control plane, in its
//! own namespace and its own node group, kept apart on its autoscaler (`--rows-apart`). Every
//! node runs the node-gate DaemonSet (its init container pulls the user image:
//! zero-to-jupyterhub's continuous image puller); only the gate rows' nodes register with the
//! startup taint, so only there it opens anything. Delays
//! are given in the trace's (simulated) time; the real stack runs them divided by `--factor`.
//! A placeholder row may carry `+avoid-warm` or `+avoid-warm-required`: its placeholders get
//! the chart's `avoidWarmNodes` (preferred, weight 100, or required) node affinity against the
//! gate's warm label (docs/peers.md, "Keeping placeholders off warm room").

mod class;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use selfdestruct_realstack::{
    Autoscaler, AutoscalerOptions, ControlPlane, ControlPlaneOptions, Kubelet, KubeletOptions,
    POOL, block_on, in_pool, node, ok, placeholder_set, set_env,
};
use selfdestruct_sim::metrics::Sample;
use serde_json::{Value, json};

const IMAGE: &str = "ghcr.io/selfdestruct/selfdestruct:0.1.0";
const USER_IMAGE: &str = "example.org/hub/user:1";
const GROUP: &str = "realstack.selfdestruct.io/group";
/// Every bench node carries it: the node-gate DaemonSet selects it.
const BENCH_NODE: &str = "realstack.selfdestruct.io/bench";
const GATE_TAINT: &str = "startup-taint.cluster-autoscaler.kubernetes.io/images-pending";
/// The taint the cluster-autoscaler puts on a node it drains.
const TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";
/// The label `selfdestruct node-gate` sets on a node once it holds the user image.
const WARM_LABEL: &str = "selfdestruct.io/images-warm";
/// The policies a placeholder row may add (`ROW+POLICY`): `avoid-warm` and
/// `avoid-warm-required` (the chart's `avoidWarmNodes`), `avoid-candidates`
/// (`SELFDESTRUCT_AVOID_DELETION_CANDIDATES`), `pin` (`pinned`).
const POLICIES: [&str; 4] = [
    "avoid-warm",
    "avoid-warm-required",
    "avoid-candidates",
    "pin",
];
const ROWS: [&str; 6] = [
    "static",
    "new-node",
    "gate",
    "gate+new-node",
    "buffer",
    "buffer+gate",
];

#[derive(Parser, Debug, Clone)]
struct Args {
    /// Rows: static, new-node, gate, gate+new-node, buffer, buffer+gate; a placeholder row
    /// with `+avoid-warm` (or `+avoid-warm-required`) keeps its placeholders off warm nodes.
    #[arg(long, value_delimiter = ',', default_value = "static,new-node")]
    rows: Vec<String>,
    /// Users' schedulers, each a set of groups beside the others: most-allocated
    /// (user-scheduler), least-allocated (default-scheduler).
    #[arg(long, value_delimiter = ',', default_value = "most-allocated")]
    placement: Vec<String>,
    /// Every timer is divided by this.
    #[arg(long, default_value_t = 15.0)]
    factor: f64,
    /// The launch log (CSV: timestamp, duration in seconds), one UTC day at most [default: the
    /// form's: bench/coldstart/trace.csv (quick, full), cycling.csv (cycling),
    /// cycling-binder.csv (binder), class.csv (class)].
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Runs (seeds) per row.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Placeholders per row (buffer: chunks) [default: the form's: 4 (quick, full), 8 (cycling,
    /// binder, class)].
    #[arg(long)]
    replicas: Option<u32>,
    /// Node cores (4 GiB a core); users and placeholders take 1 core, 4 GiB [default: the
    /// form's: 4 (quick, full), 16 (cycling, class), 32 (binder)].
    #[arg(long)]
    node_cpu: Option<u32>,
    /// Simulated seconds from the autoscaler's request to node Ready.
    #[arg(long, default_value_t = 90.0)]
    node_ready_s: f64,
    /// Simulated seconds of the user image's pull.
    #[arg(long, default_value_t = 60.0)]
    image_pull_s: f64,
    /// The user image's size (GiB) in the nodes' `status.images` (the schedulers'
    /// ImageLocality score).
    #[arg(long, default_value_t = 8.0)]
    image_size_gib: f64,
    /// A user is "waited" when bound later than this (simulated seconds) after its creation
    /// [default: 15 s, or 3 s real when that is more: a preempting user is bound after the
    /// scheduler's backoff of at least 1 s real, which no factor compresses].
    #[arg(long)]
    wait_threshold_s: Option<f64>,
    /// How late an agent's watch shows a sibling's eviction (real seconds), for the
    /// simulator's side. `bench/coldstart/race.py` over the cycling runs' agents: of 182 moves
    /// the PDB refused, 70 were decided before the winner's eviction showed in its log and 28
    /// within 1 s after it (p50 0.43 s, p90 0.94 s); docs/peers.md.
    #[arg(long, default_value_t = 0.5)]
    watch_delay_s: f64,
    /// How long after a placeholder starts the PDB still refuses evictions (real seconds), for
    /// the simulator's side: `race.py`'s refusals decided within 1 s of a sibling's start
    /// (the disruption controller's recount; docs/peers.md).
    #[arg(long, default_value_t = 0.5)]
    pdb_recount_s: f64,
    /// The results file (merged: rows of other placements are kept); by default
    /// `bench/results/real-stack-rows-apart.json`, or `bench/results/real-stack.json` with
    /// `--rows-apart false`, so the two kinds of runs never share a file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The simulator binary.
    #[arg(long, default_value = "target/release/simulate")]
    simulate: PathBuf,
    /// Nodes (then pods) the stand-in kubelet works on at once in a tick (1: one after the
    /// other, as before issue 34's lag measurement).
    #[arg(long, default_value_t = 32)]
    kubelet_concurrency: usize,
    /// Run the autoscaler with `--salvo-scale-up` (every node group in need resized in one
    /// loop, not one group a loop): without it the groups side by side queue for scale-ups.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
    salvo: bool,
    /// Keep the rows side by side apart on their one autoscaler, as clusters running one
    /// placeholder set each: every pod gets the hold of its own, `--new-pod-scale-up-delay=2s`
    /// (a pod under 2 s old, from its creation's whole second, helps no scale-up), and every
    /// node group its own scale-down delays, `--scale-down-delay-type-local` (a scale-up holds
    /// its own group's scale-down for `--scale-down-delay-after-add`, not every group's), and
    /// every row its own deletion and soft-taint budgets: `--max-drain-parallelism`,
    /// `--max-scale-down-parallelism` and `--max-bulk-soft-taint-count` at their defaults (1, 10
    /// and 10) times the groups. All are one check over the whole cluster by default
    /// (`allPodsAreNew` and `isScaleDownInCooldown` in `core/static_autoscaler.go`,
    /// `ScaleDownBudgetProcessor` in `core/scaledown/budgets`, the soft taints' count in
    /// `softtaint.go`), so the rows lift each other's holds, hold each other's scale-downs and
    /// queue for one drain (docs/peers.md, "Remaining divergence"). On by default: the
    /// simulator models a cluster of one placeholder set, and so does the README.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
    rows_apart: bool,
    /// The named form: "quick" and "full" (the 2-hour ramp on 4-user nodes), "cycling" (three
    /// daily cycles on 16-user nodes, 8 placeholders), "binder" (the Binder day's proportions
    /// scaled down: 32-user nodes, 8 placeholders), "class" (a class after a quiet night on
    /// 16-user nodes, 8 placeholders; rows may add `+schedule-LEAD`: class.rs); its trace and
    /// sizes are the defaults above.
    #[arg(long, default_value = "quick")]
    form: String,
    #[command(flatten)]
    class: class::ClassArgs,
    /// Seeds of the simulator's side (its spread comes from the node delays' spread and the
    /// agents' jitter).
    #[arg(long, default_value_t = 12)]
    sim_seeds: u32,
    /// Re-run only the simulator's side against the real runs already in `--out` (their
    /// measured delays), replacing its sim entries of the same rows, placements and form.
    #[arg(long)]
    sim_only: bool,
    /// Count the runs kept from earlier invocations of the same form, rows and placements
    /// (`target/coldstart-runs/`, one line a finished run) with this invocation's: a matrix
    /// stopped part-way, or run a few runs at a time, adds up (`--runs 0 --resume` only
    /// writes what is kept). Without it the kept runs are set aside (`.prev`) at the start.
    #[arg(long)]
    resume: bool,
    /// Write the first run's timeline of `--plot-row` (the first placement) beside the
    /// simulator's to this SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The row whose timeline is plotted (the simulator plots its `configured` policy, the
    /// agent's defaults: `new-node`).
    #[arg(long, default_value = "new-node")]
    plot_row: String,
    // `cargo test` passes these to a harness = false target.
    #[arg(long, hide = true)]
    nocapture: bool,
}

impl Args {
    /// The results file: `--out`, else the one of the rows apart or side by side.
    fn out(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            PathBuf::from(if self.rows_apart {
                "bench/results/real-stack-rows-apart.json"
            } else {
                "bench/results/real-stack.json"
            })
        })
    }

    /// The form's trace and sizes, each unless given.
    fn form_default(&self, ramp: u32, cycling: u32, binder: u32) -> u32 {
        match self.form.as_str() {
            "cycling" | "class" => cycling,
            "binder" => binder,
            _ => ramp,
        }
    }

    fn trace(&self) -> PathBuf {
        self.trace.clone().unwrap_or_else(|| {
            PathBuf::from(match self.form.as_str() {
                "cycling" => "bench/coldstart/cycling.csv",
                "binder" => "bench/coldstart/cycling-binder.csv",
                "class" => "bench/coldstart/class.csv",
                _ => "bench/coldstart/trace.csv",
            })
        })
    }

    fn wait_threshold_s(&self) -> f64 {
        self.wait_threshold_s
            .unwrap_or((3.0 * self.factor).max(15.0))
    }

    fn replicas(&self) -> u32 {
        self.replicas.unwrap_or(self.form_default(4, 8, 8))
    }

    fn node_cpu(&self) -> u32 {
        self.node_cpu.unwrap_or(self.form_default(4, 16, 32))
    }
}

#[derive(Clone, Copy, Debug)]
struct Launch {
    at: f64,
    session: f64,
}

#[derive(Debug, Default, Clone)]
struct User {
    row: String,
    created: Option<Instant>,
    bound: Option<Instant>,
    ready: Option<Instant>,
    cold: bool,
    node: String,
    /// The scheduler nominated a node for it (`status.nominatedNodeName`): it preempted.
    preempting: bool,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read_trace(path: &Path) -> Vec<Launch> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .collect();
    let ti = header
        .iter()
        .position(|h| *h == "timestamp")
        .expect("a timestamp column");
    let di = header
        .iter()
        .position(|h| *h == "duration")
        .expect("a duration column");
    let mut out = Vec::new();
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let ts: k8s_openapi::jiff::Timestamp = f[ti].parse().expect("an RFC 3339 timestamp");
        let secs = ts.as_second() as f64;
        out.push(Launch {
            at: secs,
            session: f[di].parse().expect("seconds"),
        });
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    // Times from the start of the UTC day (as the simulator replays a day).
    if let Some(first) = out.first().copied() {
        let day0 = (first.at / 86400.0).floor() * 86400.0;
        for l in &mut out {
            l.at -= day0;
        }
    }
    out
}

fn fmt_s(s: f64) -> String {
    format!("{}ms", (s * 1000.0).round().max(0.0) as u64)
}

/// One row under one placement: its own namespace, node pool and node group (`slug`).
#[derive(Clone, Debug)]
struct Group {
    row: String,
    placement: String,
    slug: String,
    scheduler: &'static str,
}

fn groups(rows: &[String], placements: &[String]) -> Vec<Group> {
    let mut out = Vec::new();
    for p in placements {
        let (scheduler, short) = match p.as_str() {
            "most-allocated" => ("user-scheduler", "ma"),
            "least-allocated" => ("default-scheduler", "la"),
            p => panic!("--placement {p}: most-allocated or least-allocated"),
        };
        for row in rows {
            let (base, policies) = split_row(class::base(row));
            assert!(
                ROWS.contains(&base)
                    && policies.iter().all(|p| POLICIES.contains(p))
                    && (policies.is_empty() || !row.starts_with("buffer"))
                    && (class::base(row) == row || class::lead_s(row).is_some()),
                "--rows {row}: one of {}, a placeholder row with any of +{}, each with a last +schedule-LEAD (10m, 150s) or not",
                ROWS.join(", "),
                POLICIES.join(", +")
            );
            out.push(Group {
                row: row.clone(),
                placement: p.clone(),
                slug: format!("{}-{short}", row.replace('+', "-")),
                scheduler,
            });
        }
    }
    out
}

fn gated(row: &str) -> bool {
    row.contains("gate")
}

/// A row's base (one of `ROWS`) and its policy suffixes (each one of `POLICIES`).
fn split_row(row: &str) -> (&str, Vec<&str>) {
    let base = ROWS
        .iter()
        .filter(|b| row == **b || row.starts_with(&format!("{b}+")))
        .max_by_key(|b| b.len())
        .copied()
        .unwrap_or(row);
    let rest = row[base.len()..].split('+').filter(|p| !p.is_empty());
    (base, rest.collect())
}

/// A row without its `+avoid-warm` suffix (the simulator's row: it does not model the
/// warm label's affinity).
fn base_row(row: &str) -> &str {
    let row = class::base(row);
    row.split("+avoid-warm").next().unwrap_or(row)
}

/// Whether a row's placeholders carry the cluster-autoscaler's
/// `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` annotation (`+pin`, the chart's
/// `pinNodes`): a node that holds one is never scaled down (`drainability/rules/safetoevict`).
fn pinned(row: &str) -> bool {
    split_row(row).1.contains(&"pin")
}

/// The node affinity of the chart's `avoidWarmNodes` for a `+avoid-warm` row
/// (`charts/selfdestruct/templates/statefulset.yaml` renders the same terms).
fn avoid_warm(row: &str) -> Option<Value> {
    let row = class::base(row);
    let term = json!({"matchExpressions": [{"key": WARM_LABEL, "operator": "DoesNotExist"}]});
    if row.ends_with("+avoid-warm-required") {
        Some(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}),
        )
    } else if row.ends_with("+avoid-warm") {
        Some(
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]}),
        )
    } else {
        None
    }
}

/// A CapacityBuffer of `replicas` chunks of one user's room in namespace `ns` (its pod
/// template in the pool, tolerating the gate's taint as the placeholders do).
fn buffer_set(ns: &str, replicas: u32) -> Vec<Value> {
    let mut spec = json!({"containers": [{"name": "chunk", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}],
        "tolerations": [{"key": GATE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]});
    in_pool(&mut spec, ns);
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": "user-room", "namespace": ns}, "template": {"spec": spec}}),
        json!({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityBuffer",
            "metadata": {"name": "user-room", "namespace": ns},
            "spec": {"podTemplateRef": {"name": "user-room"}, "replicas": replicas,
                     "provisioningStrategy": "buffer.x-k8s.io/active-capacity"}}),
    ]
}

/// The node group's template: `cpu` cores and 4 GiB a core for users and placeholders, plus
/// 100m and 256 MiB for the node-gate DaemonSet's pod; the gate rows' nodes register with
/// the startup taint.
fn template(slug: &str, cpu: u32, gate: bool) -> Node {
    let mut taints = vec![json!({"key": POOL, "value": slug, "effect": "NoSchedule"})];
    if gate {
        taints.push(json!({"key": GATE_TAINT, "value": "true", "effect": "NoSchedule"}));
    }
    let mut n = node(
        &format!("tpl-{slug}"),
        &[(POOL, slug), (GROUP, slug), (BENCH_NODE, "yes")],
        cpu,
        cpu * 4,
        &taints,
        &[IMAGE],
    );
    let status = n.status.as_mut().unwrap();
    for r in [status.capacity.as_mut(), status.allocatable.as_mut()]
        .into_iter()
        .flatten()
    {
        r.insert("cpu".into(), Quantity(format!("{}m", cpu * 1000 + 100)));
        r.insert(
            "memory".into(),
            Quantity(format!("{}Mi", cpu * 4 * 1024 + 256)),
        );
    }
    selfdestruct_realstack::group_template(n, 20)
}

/// `manifests/node-gate` on every bench node: its init container pulls the user image (the
/// continuous image puller), then `selfdestruct node-gate` lifts the startup taint where
/// there is one (the gate rows) and pauses elsewhere. Timers compressed by `f`.
fn gate_daemonset(cp: &ControlPlane, f: f64) -> Vec<Value> {
    let mut docs = ok(cp.kustomize(&root().join("manifests/node-gate")));
    for d in &mut docs {
        if d["kind"] == "DaemonSet" {
            let spec = &mut d["spec"]["template"]["spec"];
            spec["nodeSelector"] = json!({BENCH_NODE: "yes"});
            spec["tolerations"]
                .as_array_mut()
                .expect("tolerations")
                .push(json!({"key": POOL, "operator": "Exists", "effect": "NoSchedule"}));
            spec["initContainers"][0]["image"] = json!(USER_IMAGE);
            set_env(
                &mut spec["containers"][0],
                &[
                    ("SELFDESTRUCT_GATE_POLL", "1s".to_string()),
                    ("SELFDESTRUCT_GATE_TIMEOUT", fmt_s(900.0 / f)),
                ],
            );
        }
    }
    docs
}

/// The agent's settings of a row, compressed by `f` (the shipped defaults: docs/settings).
fn agent_env(row: &str, f: f64) -> Vec<(String, String)> {
    let mut env = vec![
        ("SELFDESTRUCT_START_JITTER".into(), fmt_s(30.0 / f)),
        ("SELFDESTRUCT_NODE_SETTLE".into(), fmt_s(10.0 / f)),
        ("SELFDESTRUCT_MOVE_JITTER".into(), fmt_s(10.0 / f)),
        ("SELFDESTRUCT_MIN_AGE".into(), fmt_s(120.0 / f)),
        (
            "SELFDESTRUCT_MAX_MOVES_PER_HOUR".into(),
            format!("{}", (12.0 * f).round() as u64),
        ),
    ];
    if split_row(row).1.contains(&"avoid-candidates") {
        env.push((
            "SELFDESTRUCT_AVOID_DELETION_CANDIDATES".into(),
            "true".into(),
        ));
    }
    if !row.contains("new-node") {
        // `static`, `gate`: the stock pause container's behaviour.
        env.push(("SELFDESTRUCT_MOVE_TO_NEW_NODES".into(), "false".into()));
        env.push(("SELFDESTRUCT_MAX_LIFETIME".into(), "0".into()));
        env.push(("SELFDESTRUCT_MIN_LIFETIME".into(), "".into()));
    }
    env
}

fn user_pod(ns: &str, name: &str, scheduler: &str) -> Pod {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"component": "singleuser-server"}},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "notebook", "image": USER_IMAGE,
                "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}});
    in_pool(&mut pod["spec"], ns);
    serde_json::from_value(pod).expect("a pod")
}

fn has_image(n: &Node, image: &str) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.images.as_ref())
        .is_some_and(|is| {
            is.iter()
                .any(|i| i.names.iter().flatten().any(|x| x == image))
        })
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn has_taint(n: &Node, key: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// A node's taints as `key:effect`, the pool's left out.
fn taints_of(n: &Node) -> Vec<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|ts| {
            ts.iter()
                .filter(|t| t.key != POOL)
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect()
        })
        .unwrap_or_default()
}

/// Per group (namespace): each node's free user-sized slots and what holds the taken ones, as
/// the observer sees them: `{node: [warm, ready, free, users, placeholders, soft-tainted]}`,
/// and the Pending users and placeholders. For the per-user "why cold" log.
fn room_of(
    nodes: &HashMap<String, Arc<Node>>,
    pods: &[Arc<Pod>],
    node_cpu: u32,
) -> HashMap<String, Value> {
    let mut per: HashMap<String, BTreeMap<String, [i64; 2]>> = HashMap::new();
    let mut pending: HashMap<String, [i64; 2]> = HashMap::new();
    for p in pods {
        let kind = if label(p, "component") == Some("singleuser-server") {
            0
        } else if label(p, "app.kubernetes.io/component") == Some("placeholder") {
            1
        } else {
            continue;
        };
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        match p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            Some(nn) => per.entry(ns).or_default().entry(nn).or_default()[kind] += 1,
            None => pending.entry(ns).or_default()[kind] += 1,
        }
    }
    let mut out: HashMap<String, Value> = HashMap::new();
    for (name, n) in nodes {
        let Some(g) = n.metadata.labels.as_ref().and_then(|l| l.get(GROUP)) else {
            continue;
        };
        let c = per
            .get(g)
            .and_then(|m| m.get(name))
            .copied()
            .unwrap_or_default();
        let soft = taints_of(n).iter().any(|t| t.ends_with("PreferNoSchedule"));
        let e = out.entry(g.clone()).or_insert_with(
            || json!({"nodes": {}, "pending": pending.get(g).copied().unwrap_or_default()}),
        );
        e["nodes"][name] = json!([
            has_image(n, USER_IMAGE),
            node_ready(n),
            i64::from(node_cpu) - c[0] - c[1],
            c[0],
            c[1],
            soft
        ]);
    }
    out
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
struct RowResult {
    users: u64,
    cold: u64,
    waited: u64,
    node_hours: f64,
    evictions: u64,
    preemptions: u64,
    unbound: u64,
    /// Created → bound of the bound users, simulated seconds.
    bind_s: Vec<f64>,
    /// The stand-in kubelet's lateness, simulated seconds, as the API showed it: per node
    /// added in the run, Ready → user image in `status.images` minus the pull time, and first
    /// seen → Ready minus the boot time; per warm user, bound → Ready minus the start delay.
    image_late_s: Vec<f64>,
    boot_late_s: Vec<f64>,
    start_late_s: Vec<f64>,
    /// The kubelet's tick durations in this run (all groups share it), real milliseconds.
    tick_ms: Vec<f64>,
    /// Created → Ready of every user, simulated seconds (one never Ready: to the window's end).
    ready_s: Vec<f64>,
    /// Created → Ready of the users that preempted a placeholder, simulated seconds: the
    /// victim's end and the scheduler's retry, at least 1 s real (its backoff, uncompressed).
    preempt_s: Vec<f64>,
    /// Created → Ready of the warm users that did not preempt, simulated seconds: the bind
    /// and the container's start (100 ms real), as the observer's 100 ms looks saw them.
    warm_ready_s: Vec<f64>,
    /// A placeholder's going → its successor first seen, simulated seconds: the StatefulSet
    /// controller's re-creation, uncompressed.
    recreate_s: Vec<f64>,
    /// Where the successor of each placeholder that went landed, by why it went (the agent's
    /// move, a user's preemption, a scale-down's drain): see `Landing`.
    moved: Landing,
    preempted: Landing,
    drained: Landing,
    /// The class form's looks at the bell and the calendar controller's Events (class.rs).
    class: Value,
}

/// Where the successors of the placeholders that went were bound: on a node newer than the
/// one its predecessor was bound to when it was bound (`new`), on an older one or the same
/// (`old`), or not within the wait threshold of its creation (`pending`, of which `brought`
/// went to a node first seen after its predecessor went: a node it brought up).
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Landing {
    new: u64,
    old: u64,
    pending: u64,
    brought: u64,
}

impl Landing {
    fn total(&self) -> u64 {
        self.new + self.old + self.pending
    }

    fn json(rs: &[RowResult], k: fn(&RowResult) -> Landing) -> Value {
        let per = |f: fn(&Landing) -> u64| rs.iter().map(|r| f(&k(r))).collect::<Vec<u64>>();
        json!({"all": per(Landing::total), "new": per(|l| l.new), "old": per(|l| l.old),
            "pending": per(|l| l.pending), "brought": per(|l| l.brought)})
    }
}

/// A placeholder pod (one uid) as the observer saw it.
#[derive(Debug, Clone)]
struct PlaceholderSeen {
    namespace: String,
    name: String,
    created: Instant,
    bound: Option<(Instant, String)>,
    /// When it was seen going (a deletion timestamp, or gone from the list).
    gone: Option<Instant>,
    /// Its node carried the autoscaler's `ToBeDeletedByClusterAutoscaler` taint, or was gone,
    /// when it went.
    drained: bool,
}

/// A node as the observer saw it: first seen, Ready, its user image there.
#[derive(Debug, Clone)]
struct NodeSeen {
    group: String,
    seen: Instant,
    ready: Option<Instant>,
    image: Option<Instant>,
    /// Ready or warm at first sight (a group's first node): not counted.
    old: bool,
}

/// The least and the greatest of `v`, as a JSON pair (the runs' or seeds' spread).
fn range(v: &[f64]) -> Value {
    json!([quantile(v, 0.0), quantile(v, 1.0)])
}

/// The `q` quantile of `v` (0 when empty).
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * q).round().max(0.0) as usize)
        .copied()
        .unwrap_or(0.0)
}

fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let f = args.factor;
    let trace = read_trace(&root().join(args.trace()));
    let groups = groups(&args.rows, &args.placement);
    let end_s = trace.iter().map(|l| l.at + l.session).fold(0.0, f64::max);
    // The measured window: to the last session's end plus the scale-down of its node
    // (`--scale-down-unneeded-time` 10 min and a few scans).
    let window_s = trace.iter().map(|l| l.at).fold(0.0, f64::max).max(end_s) + 15.0 * 60.0;
    eprintln!(
        "coldstart: {} launches over {:.0} simulated minutes, factor {f}, {} groups side by side: about {:.1} minutes wall per run",
        trace.len(),
        window_s / 60.0,
        groups.len(),
        window_s / f / 60.0
    );
    let out_path = root().join(args.out());
    let mut out: Vec<Value> = std::fs::read_to_string(&out_path)
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
        .unwrap_or_default();
    // A new run replaces the file's entries of the same rows, placements and form only
    // (with `--sim-only`, its sim entries only).
    out.retain(|r| {
        r["form"] != args.form.as_str()
            || (args.sim_only && r["source"] == "real")
            || !groups
                .iter()
                .any(|g| r["row"] == g.row.as_str() && r["placement"] == g.placement.as_str())
    });
    let wall = Instant::now();
    let kept = KeptRuns::open(&args, &groups);
    let mut per_run: BTreeMap<String, Vec<RowResult>> = kept.results.clone();
    let mut loads = kept.loads.clone();
    let runs_before = loads.len();
    let mut timeline = BTreeMap::new();
    for run in 0..if args.sim_only { 0 } else { args.runs } {
        let t0 = Instant::now();
        let l0 = loadavg();
        let (res, samples) = block_on(run_real(&args, &groups, &trace, window_s, run));
        let l1 = loadavg();
        eprintln!(
            "coldstart run {run}: {:.1} min wall, load average {l0:.2} -> {l1:.2}",
            t0.elapsed().as_secs_f64() / 60.0
        );
        let load = json!({"run": runs_before + run as usize, "wall_min": round2(t0.elapsed().as_secs_f64() / 60.0),
            "loadavg_start": l0, "loadavg_end": l1});
        kept.keep(&load, &res);
        loads.push(load);
        for (slug, r) in res {
            eprintln!(
                "coldstart run {run} {slug}: users {} cold {} waited {} unbound {} node-h {:.2} evictions {} preemptions {}; created->bound p50 {:.1} s, p90 {:.1} s (simulated); late (simulated s, p50/p90): image {:.1}/{:.1}, boot {:.1}/{:.1}, warm start {:.1}/{:.1}; kubelet tick p50/p90/max {:.0}/{:.0}/{:.0} ms",
                r.users,
                r.cold,
                r.waited,
                r.unbound,
                r.node_hours,
                r.evictions,
                r.preemptions,
                quantile(&r.bind_s, 0.5),
                quantile(&r.bind_s, 0.9),
                quantile(&r.image_late_s, 0.5),
                quantile(&r.image_late_s, 0.9),
                quantile(&r.boot_late_s, 0.5),
                quantile(&r.boot_late_s, 0.9),
                quantile(&r.start_late_s, 0.5),
                quantile(&r.start_late_s, 0.9),
                quantile(&r.tick_ms, 0.5),
                quantile(&r.tick_ms, 0.9),
                quantile(&r.tick_ms, 1.0)
            );
            per_run.entry(slug).or_default().push(r);
        }
        if run == 0 {
            let _ = std::fs::write(
                root().join("target/coldstart-timeline-run0.json"),
                serde_json::to_string(&samples).expect("json"),
            );
            timeline = samples;
        }
    }
    let hours = window_s / 3600.0;
    for g in &groups {
        let Some(rs) = per_run.get(&g.slug) else {
            continue;
        };
        let n = rs.len() as f64;
        let col = |k: fn(&RowResult) -> f64| rs.iter().map(k).collect::<Vec<f64>>();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / n;
        let cold = col(|r| r.cold as f64);
        let all_ready: Vec<f64> = rs.iter().flat_map(|r| r.ready_s.clone()).collect();
        let waited = col(|r| r.waited as f64);
        let nh = col(|r| round2(r.node_hours));
        let ev: Vec<f64> = rs
            .iter()
            .map(|r| round2(r.evictions as f64 / hours))
            .collect();
        out.push(json!({"row": g.row, "placement": g.placement, "source": "real",
            "cold": mean(&cold), "waited": mean(&waited),
            "node_hours": round2(mean(&nh)), "evictions_per_hour": round2(mean(&ev)),
            "users": mean(&col(|r| r.users as f64)), "preemptions": mean(&col(|r| r.preemptions as f64)),
            "unbound_at_end": mean(&col(|r| r.unbound as f64)),
            // Created → bound, simulated seconds, all runs: a loaded machine shows here first.
            "bind_s_p50": round2(quantile(&rs.iter().flat_map(|r| r.bind_s.clone()).collect::<Vec<_>>(), 0.5)),
            "bind_s_p90": round2(quantile(&rs.iter().flat_map(|r| r.bind_s.clone()).collect::<Vec<_>>(), 0.9)),
            "runs": rs.len(),
            "per_run": {"cold": cold, "waited": waited, "node_hours": nh, "evictions_per_hour": ev,
                "user_minutes": col(|r| round2(r.ready_s.iter().sum::<f64>() / 60.0))},
            // The users' own wait, created → Ready, simulated seconds, all runs; and the
            // user-minutes lost to it, per run.
            "ready_s": {"p50": round2(quantile(&all_ready, 0.5)), "p90": round2(quantile(&all_ready, 0.9)),
                "p99": round2(quantile(&all_ready, 0.99))},
            "user_minutes": round2(mean(&col(|r| r.ready_s.iter().sum::<f64>() / 60.0))),
            // Where the successors of the placeholders that went landed, per run.
            "landed": {"moved": Landing::json(rs, |r| r.moved),
                "preempted": Landing::json(rs, |r| r.preempted),
                "drained": Landing::json(rs, |r| r.drained)},
            "spread": {"cold": range(&cold), "waited": range(&waited)},
            // The stand-in kubelet's lateness, measured in each run (see RowResult).
            "lag": {
                "image_late_s": lag(rs, |r| &r.image_late_s),
                "boot_late_s": lag(rs, |r| &r.boot_late_s),
                "warm_start_late_s": lag(rs, |r| &r.start_late_s),
                "kubelet_tick_ms": lag(rs, |r| &r.tick_ms),
                "preempt_s": lag(rs, |r| &r.preempt_s),
                "warm_ready_s": lag(rs, |r| &r.warm_ready_s),
                "recreate_s": lag(rs, |r| &r.recreate_s),
            },
            "form": args.form, "factor": f, "groups_side_by_side": groups.len(),
            "wait_threshold_s": args.wait_threshold_s(),
            "kubelet_concurrency": args.kubelet_concurrency, "salvo_scale_up": args.salvo,
            "rows_apart": args.rows_apart,
            "drains_apart": args.rows_apart,
            "wall_min": round2(loads.iter().filter_map(|l| l["wall_min"].as_f64()).sum::<f64>()),
            "load": loads}));
        if let (Some(c), Some(r)) = (class::json(&args, &g.row, rs), out.last_mut()) {
            r["class"] = c;
        }
    }
    for p in &args.placement {
        let delays = measured_delays(&args, &out, p);
        out.extend(class::run_sim(&args, p, window_s, &delays));
        out.extend(run_sim(&args, p, window_s, &delays));
    }
    out.sort_by_key(|r| {
        (
            r["placement"].as_str().unwrap_or_default().to_string(),
            ROWS.iter()
                .position(|x| r["row"] == *x)
                .unwrap_or(ROWS.len()),
            r["source"].as_str().unwrap_or_default().to_string(),
            r["form"].as_str().unwrap_or_default().to_string(),
        )
    });
    std::fs::create_dir_all(out_path.parent().expect("a folder")).expect("results folder");
    std::fs::write(
        &out_path,
        serde_json::to_string_pretty(&out).expect("json") + "\n",
    )
    .expect("write the results");
    if let Some(plot) = args.plot.as_ref().filter(|_| !args.sim_only) {
        write_plot(&args, &groups, &timeline, plot);
    }
    eprintln!(
        "coldstart: {} run(s) of {} groups in {:.1} min wall",
        args.runs,
        groups.len(),
        wall.elapsed().as_secs_f64() / 60.0
    );
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// The autoscaler's flags that keep `groups` rows apart (`--rows-apart`): each its own hold (in
/// real seconds: not compressed by the factor), scale-down delays, and one drain, 10 deletions
/// and 10 soft taints in progress, as each row alone would have.
fn rows_apart_flags(groups: usize) -> [String; 5] {
    [
        "--new-pod-scale-up-delay=2s".to_string(),
        "--scale-down-delay-type-local=true".to_string(),
        format!("--max-drain-parallelism={groups}"),
        format!("--max-scale-down-parallelism={}", 10 * groups),
        format!("--max-bulk-soft-taint-count={}", 10 * groups),
    ]
}

/// Every finished run, one JSON line a run in `target/coldstart-runs/FORM.jsonl` (its
/// load and each group's `RowResult`), so runs add up across invocations (`--resume`).
struct KeptRuns {
    path: PathBuf,
    results: BTreeMap<String, Vec<RowResult>>,
    loads: Vec<Value>,
}

impl KeptRuns {
    /// The kept runs of exactly these groups, apart or not (with `--resume`), else none: the
    /// file is set aside.
    fn open(args: &Args, groups: &[Group]) -> Self {
        let dir = root().join("target/coldstart-runs");
        std::fs::create_dir_all(&dir).expect("target/coldstart-runs");
        let slugs: Vec<&str> = groups.iter().map(|g| g.slug.as_str()).collect();
        // Runs with the rows apart are kept apart: a `--resume` never mixes them with the
        // others (`-drains`: since the deletion budgets went apart too; the runs before that are
        // in the file without it).
        let apart = if args.rows_apart {
            "-rows-apart-drains"
        } else {
            ""
        };
        let path = dir.join(format!("{}{apart}-{}.jsonl", args.form, slugs.join(",")));
        let mut kept = KeptRuns {
            path,
            results: BTreeMap::new(),
            loads: Vec::new(),
        };
        if args.sim_only {
            return kept;
        }
        if !args.resume {
            let _ = std::fs::rename(&kept.path, kept.path.with_extension("jsonl.prev"));
            return kept;
        }
        let text = std::fs::read_to_string(&kept.path).unwrap_or_default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).expect("a kept run");
            let rows: BTreeMap<String, RowResult> =
                serde_json::from_value(v["rows"].clone()).expect("a kept run's rows");
            for (slug, r) in rows {
                kept.results.entry(slug).or_default().push(r);
            }
            kept.loads.push(v["load"].clone());
        }
        eprintln!(
            "coldstart: {} run(s) kept in {}",
            kept.loads.len(),
            kept.path.display()
        );
        kept
    }

    fn keep(&self, load: &Value, res: &BTreeMap<String, RowResult>) {
        use std::io::Write;
        let line = json!({"load": load, "rows": res}).to_string();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("the kept runs");
        writeln!(f, "{line}").expect("keep a run");
    }
}

/// Copies of the image's three binaries, side by side as in the image (the stand-in kubelet
/// runs a container's `/selfdestruct-node-gate` or `/selfdestruct-schedule` from beside the
/// agent's): a build during the runs must not change the binaries of the pods started after
/// it. The agent's copy.
fn copy_binaries() -> PathBuf {
    let dir = root().join(format!("target/coldstart-bin/{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("target/coldstart-bin");
    let agent = Path::new(env!("CARGO_BIN_EXE_selfdestruct"));
    // The schedule's binary is another package's: built beside the agent's by the workspace's
    // tests or `cargo build -p selfdestruct-schedule`.
    let schedule = agent.with_file_name("selfdestruct-schedule");
    for (from, name) in [
        (agent, "selfdestruct"),
        (
            Path::new(env!("CARGO_BIN_EXE_selfdestruct-node-gate")),
            "selfdestruct-node-gate",
        ),
        (schedule.as_path(), "selfdestruct-schedule"),
    ] {
        std::fs::copy(from, dir.join(name)).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (cargo build -p selfdestruct-schedule: the bench runs the image's three binaries)",
                from.display()
            )
        });
    }
    dir.join("selfdestruct")
}

/// Quantiles of a lateness over all runs and per run.
fn lag(rs: &[RowResult], k: fn(&RowResult) -> &Vec<f64>) -> Value {
    let all: Vec<f64> = rs.iter().flat_map(|r| k(r).clone()).collect();
    let per = |q: f64| {
        rs.iter()
            .map(|r| round2(quantile(k(r), q)))
            .collect::<Vec<f64>>()
    };
    json!({"n": all.len(), "p50": round2(quantile(&all, 0.5)), "p90": round2(quantile(&all, 0.9)),
        "max": round2(quantile(&all, 1.0)),
        "per_run_p50": per(0.5), "per_run_p90": per(0.9), "per_run_max": per(1.0)})
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The timeline of `--plot-row` under the first placement (first run) above the
/// simulator's `configured` policy (the agent's defaults) on the same trace, one SVG.
fn write_plot(
    args: &Args,
    groups: &[Group],
    timeline: &BTreeMap<String, Vec<Sample>>,
    path: &Path,
) {
    let Some(g) = groups
        .iter()
        .find(|g| g.row == args.plot_row && g.placement == args.placement[0])
    else {
        eprintln!("coldstart: --plot-row {} was not run", args.plot_row);
        return;
    };
    let samples = timeline.get(&g.slug).cloned().unwrap_or_default();
    // Hours from the first sample (taken at the replay's start).
    let real = selfdestruct_sim::plot::svg(
        &samples,
        samples.first().map_or(0, |s| s.t),
        &format!(
            "real stack: {} ({}), run 1 of {}, factor {}",
            g.row, g.placement, args.runs, args.factor
        ),
        &format!(
            "{}, {} placeholders or chunks, {} groups side by side; times in simulated hours",
            args.trace().display(),
            args.replicas(),
            groups.len()
        ),
    );
    let sim = std::fs::read_to_string(root().join("target/coldstart-sim.svg")).unwrap_or_default();
    let height = |svg: &str| -> f64 {
        svg.split("height=\"")
            .nth(1)
            .and_then(|t| t.split('"').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    let (h1, h2) = (height(&real), height(&sim));
    let combined = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1000\" height=\"{}\" viewBox=\"0 0 1000 {}\">\n{}{}</svg>\n",
        h1 + h2,
        h1 + h2,
        real.replacen("<svg ", "<svg y=\"0\" ", 1),
        sim.replacen("<svg ", &format!("<svg y=\"{h1}\" "), 1)
    );
    std::fs::write(root().join(path), combined).expect("write the plot");
    eprintln!("coldstart: wrote {}", path.display());
}

/// Waits for `what` on the API, for at most `secs` (real seconds).
async fn until<T, Fut: std::future::Future<Output = Option<T>>>(
    what: &str,
    secs: u64,
    check: impl FnMut() -> Fut,
) -> T {
    ok(selfdestruct_realstack::wait::until(what, Duration::from_secs(secs), check).await)
}

async fn run_real(
    args: &Args,
    groups: &[Group],
    trace: &[Launch],
    window_s: f64,
    run: u32,
) -> (BTreeMap<String, RowResult>, BTreeMap<String, Vec<Sample>>) {
    let f = args.factor;
    let d = |s: f64| Duration::from_secs_f64(s / f);
    // A copy of the agent's binary: a build during the runs must not change the agent of the
    // pods started after it.
    let agent_bin = copy_binaries();
    // Heartbeats every 30 s (not 10 s) and a grace of 2 minutes: the one stand-in kubelet
    // beats for every node in turn, and at 150 nodes its 10 s beats delayed pulls and starts
    // by 10-60 s under load (issue 34's quick run of 12 groups).
    let cp = ok(ControlPlane::start(ControlPlaneOptions {
        node_monitor_grace_period: Duration::from_secs(120),
        ..ControlPlaneOptions::default()
    }));
    let kubelet = ok(Kubelet::start(
        &cp,
        KubeletOptions {
            boot_delay: d(args.node_ready_s),
            pull_time: d(args.image_pull_s),
            image_sizes: [(
                USER_IMAGE.to_string(),
                (args.image_size_gib * 1024.0 * 1024.0 * 1024.0) as u64,
            )]
            .into(),
            start_delay: Duration::from_millis(100),
            heartbeat: Duration::from_secs(30),
            selfdestruct_bin: Some(agent_bin.clone()),
            concurrency: args.kubelet_concurrency,
            ..KubeletOptions::default()
        },
    ));
    let t = timers(f);
    let autoscaler = ok(Autoscaler::start(
        &cp,
        AutoscalerOptions {
            templates: groups
                .iter()
                .map(|g| template(&g.slug, args.node_cpu(), gated(&g.row)))
                .collect(),
            group_label: GROUP.into(),
            scan_interval: Duration::from_secs(t.scan_s),
            scale_down_unneeded_time: Duration::from_secs(t.unneeded_s),
            scale_down_delay_after_add: Duration::from_secs(t.unneeded_s),
            capacity_buffer_crd: Some(
                include_str!("../../sim/tests/data/autoscaling.x-k8s.io_capacitybuffers.yaml")
                    .into(),
            ),
            // The autoscaler resizes one node group per loop (`runSingleScaleUp` in
            // `core/static_autoscaler.go`: the expander's one best option). Every row x placement
            // is its own node group on this one autoscaler and replays the same trace, so the
            // groups needing a node at the same moment queued behind each other: p50 37 s, p90
            // 105 s, max 211 s simulated from a group's first unschedulable pod to its scale-up
            // with 12 groups, against p50 0 s, p90 2 s with 2 (`bench/coldstart/queue.py`). A
            // salvo repeats the scale-up within the loop until every pending pod is helped
            // (`runScaleUpSalvo`), as one group alone would get it; it changes nothing for a
            // single group, whose one scale-up already covers all its pods.
            args: args
                .salvo
                .then(|| "--salvo-scale-up=true".to_string())
                .into_iter()
                .chain(
                    args.rows_apart
                        .then(|| rows_apart_flags(groups.len()))
                        .into_iter()
                        .flatten(),
                )
                .collect(),
        },
    ));
    let client = ok(cp.client().await);
    ok(cp.apply(&gate_daemonset(&cp, f)));
    // Each group's first node, warm and open, then its placeholders (or buffer).
    let nodes_api = Api::<Node>::all(client.clone());
    for g in groups {
        let lp = ListParams::default().labels(&format!("{GROUP}={}", g.slug));
        until(
            &format!("{}'s first node warm and open", g.slug),
            300,
            || {
                let a = nodes_api.clone();
                let lp = lp.clone();
                async move {
                    a.list(&lp)
                        .await
                        .ok()
                        .filter(|l| {
                            l.items
                                .iter()
                                .any(|n| has_image(n, USER_IMAGE) && !has_taint(n, GATE_TAINT))
                        })
                        .map(|_| ())
                }
            },
        )
        .await;
    }
    for g in groups {
        if g.row.starts_with("buffer") {
            ok(cp.apply(&buffer_set(&g.slug, args.replicas())));
        } else {
            let mut docs = ok(placeholder_set(
                &cp,
                root(),
                &g.slug,
                &g.slug,
                args.replicas(),
                &agent_env(&g.row, f),
            ));
            for d in docs.iter_mut().filter(|d| d["kind"] == "StatefulSet") {
                if let Some(a) = avoid_warm(&g.row) {
                    d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"] = a;
                }
                if pinned(&g.row) {
                    d["spec"]["template"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] =
                        json!("false");
                }
            }
            ok(cp.apply(&docs));
        }
    }
    for g in groups.iter().filter(|g| !g.row.starts_with("buffer")) {
        let api = Api::<Pod>::namespaced(client.clone(), &g.slug);
        let n = args.replicas() as usize;
        until(&format!("{}'s placeholders Ready", g.slug), 300, || {
            let a = api.clone();
            async move {
                let l = a
                    .list(&ListParams::default().labels("app.kubernetes.io/name=selfdestruct"))
                    .await
                    .ok()?;
                (l.items.iter().filter(|p| pod_ready(p)).count() >= n).then_some(())
            }
        })
        .await;
    }
    // Watch every pod and node.
    let (pods, pw) = reflector::store::<Pod>();
    let (nodes, nw) = reflector::store::<Node>();
    tokio::spawn(
        reflector::reflector(
            pw,
            watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()),
        )
        .default_backoff()
        .for_each(|_| async {}),
    );
    tokio::spawn(
        reflector::reflector(
            nw,
            watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
        )
        .default_backoff()
        .for_each(|_| async {}),
    );
    let _ = pods.wait_until_ready().await;
    let _ = nodes.wait_until_ready().await;
    let users: Arc<Mutex<HashMap<String, User>>> = Arc::default();
    let node_secs: Arc<Mutex<BTreeMap<String, f64>>> = Arc::default();
    let seen: Arc<Mutex<HashMap<String, NodeSeen>>> = Arc::default();
    let timeline: Arc<Mutex<BTreeMap<String, Vec<Sample>>>> = Arc::default();
    let why: Arc<Mutex<BTreeMap<String, Vec<Value>>>> = Arc::default();
    let placeholders: Arc<Mutex<HashMap<String, PlaceholderSeen>>> = Arc::default();
    let class = class::start(args, &cp, &client, groups, run, &agent_bin, &pods, &nodes).await;
    let start = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The observer: bound and Ready times, the node's image at binding, node-seconds, and a
    // sample of every group each simulated minute.
    let observer = {
        let (users, node_secs, stop, timeline, seen, why) = (
            users.clone(),
            node_secs.clone(),
            stop.clone(),
            timeline.clone(),
            seen.clone(),
            why.clone(),
        );
        let node_cpu = args.node_cpu();
        let mut last_room: HashMap<String, Value> = HashMap::new();
        let mut ph_nodes: HashMap<String, String> = HashMap::new();
        let placeholders = placeholders.clone();
        let (pods, nodes) = (pods.clone(), nodes.clone());
        let slugs: Vec<String> = groups.iter().map(|g| g.slug.clone()).collect();
        let sample_every = Duration::from_secs_f64(60.0 / f);
        tokio::spawn(async move {
            let mut last = Instant::now();
            let mut next_sample = last;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = Instant::now();
                let dt = (now - last).as_secs_f64();
                last = now;
                let ns = nodes.state();
                let group_of = |n: &Node| {
                    n.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(GROUP))
                        .cloned()
                };
                {
                    let mut s = node_secs.lock().unwrap();
                    let mut seen = seen.lock().unwrap();
                    for n in &ns {
                        if let Some(g) = group_of(n) {
                            *s.entry(g.clone()).or_default() += dt;
                            let (r, i) = (node_ready(n), has_image(n, USER_IMAGE));
                            let e = seen
                                .entry(n.metadata.name.clone().unwrap_or_default())
                                .or_insert_with(|| NodeSeen {
                                    group: g,
                                    seen: now,
                                    ready: None,
                                    image: None,
                                    old: r || i,
                                });
                            if e.ready.is_none() && r {
                                e.ready = Some(now);
                            }
                            if e.image.is_none() && i {
                                e.image = Some(now);
                            }
                        }
                    }
                }
                let all_pods = pods.state();
                if now >= next_sample {
                    next_sample += sample_every;
                    let t = ((now - start).as_secs_f64() * f * 1000.0) as u64;
                    let mut tl = timeline.lock().unwrap();
                    for slug in &slugs {
                        let mut s = Sample {
                            t,
                            ..Sample::default()
                        };
                        for n in ns.iter().filter(|n| group_of(n).as_ref() == Some(slug)) {
                            s.nodes += 1;
                            s.warm_nodes += u32::from(has_image(n, USER_IMAGE));
                        }
                        for p in all_pods
                            .iter()
                            .filter(|p| p.metadata.namespace.as_ref() == Some(slug))
                        {
                            let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref());
                            if label(p, "component") == Some("singleuser-server") {
                                if p.metadata.deletion_timestamp.is_some() {
                                } else if bound.is_some() {
                                    s.users += 1;
                                } else {
                                    s.users_pending += 1;
                                }
                            } else if label(p, "app.kubernetes.io/component") == Some("placeholder")
                            {
                                if pod_ready(p) && p.metadata.deletion_timestamp.is_none() {
                                    s.placeholders += 1;
                                } else {
                                    s.placeholders_pending += 1;
                                }
                            }
                        }
                        tl.entry(slug.clone()).or_default().push(s);
                    }
                }
                let by_name: HashMap<String, Arc<Node>> = ns
                    .into_iter()
                    .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                    .collect();
                let t_sim = round2((now - start).as_secs_f64() * f);
                let room = room_of(&by_name, &all_pods, node_cpu);
                {
                    let mut w = why.lock().unwrap();
                    for slug in &slugs {
                        let r = room.get(slug).cloned().unwrap_or(Value::Null);
                        if last_room.get(slug) != Some(&r) {
                            last_room.insert(slug.clone(), r.clone());
                            w.entry(slug.clone())
                                .or_default()
                                .push(json!({"t": t_sim, "ev": "room", "room": r}));
                        }
                    }
                    // Placeholders newly bound (or re-created and bound): where, warm or not.
                    for p in all_pods
                        .iter()
                        .filter(|p| label(p, "app.kubernetes.io/component") == Some("placeholder"))
                    {
                        let uid = p.metadata.uid.clone().unwrap_or_default();
                        let Some(nn) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                            continue;
                        };
                        if ph_nodes.get(&uid) != Some(&nn) {
                            ph_nodes.insert(uid, nn.clone());
                            let ns_ = p.metadata.namespace.clone().unwrap_or_default();
                            let n = by_name.get(&nn);
                            w.entry(ns_)
                                .or_default()
                                .push(json!({"t": t_sim, "ev": "ph_bind",
                                "pod": p.metadata.name, "node": nn,
                                "warm": n.is_some_and(|n| has_image(n, USER_IMAGE)),
                                "taints": n.map(|n| taints_of(n)).unwrap_or_default()}));
                        }
                    }
                }
                {
                    let mut phs = placeholders.lock().unwrap();
                    let mut present = std::collections::HashSet::new();
                    for p in all_pods
                        .iter()
                        .filter(|p| label(p, "app.kubernetes.io/component") == Some("placeholder"))
                    {
                        let uid = p.metadata.uid.clone().unwrap_or_default();
                        present.insert(uid.clone());
                        let e = phs.entry(uid).or_insert_with(|| PlaceholderSeen {
                            namespace: p.metadata.namespace.clone().unwrap_or_default(),
                            name: p.metadata.name.clone().unwrap_or_default(),
                            created: now,
                            bound: None,
                            gone: None,
                            drained: false,
                        });
                        if e.bound.is_none()
                            && let Some(nn) = p.spec.as_ref().and_then(|s| s.node_name.clone())
                        {
                            e.bound = Some((now, nn));
                        }
                        if e.gone.is_none() && p.metadata.deletion_timestamp.is_some() {
                            e.gone = Some(now);
                            e.drained = e.bound.as_ref().is_some_and(|(_, nn)| {
                                by_name.get(nn).is_none_or(|n| has_taint(n, TO_BE_DELETED))
                            });
                        }
                    }
                    for (uid, e) in phs.iter_mut().filter(|(_, e)| e.gone.is_none()) {
                        // Gone between two looks: deleted and removed within 100 ms.
                        if !present.contains(uid) {
                            e.gone = Some(now);
                            e.drained = e.bound.as_ref().is_some_and(|(_, nn)| {
                                by_name.get(nn).is_none_or(|n| has_taint(n, TO_BE_DELETED))
                            });
                        }
                    }
                }
                let mut us = users.lock().unwrap();
                for p in all_pods {
                    let key = format!(
                        "{}/{}",
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default()
                    );
                    let Some(u) = us.get_mut(&key) else { continue };
                    if u.bound.is_none()
                        && let Some(nn) = p.spec.as_ref().and_then(|s| s.node_name.clone())
                    {
                        u.bound = Some(now);
                        u.cold = !by_name.get(&nn).is_some_and(|n| has_image(n, USER_IMAGE));
                        let n = by_name.get(&nn);
                        let ns_ = p.metadata.namespace.clone().unwrap_or_default();
                        let first_seen = seen.lock().unwrap().get(&nn).map(|s| {
                            (
                                round2((s.seen.max(start) - start).as_secs_f64() * f),
                                s.ready
                                    .map(|r| round2((r.max(start) - start).as_secs_f64() * f)),
                            )
                        });
                        why.lock().unwrap().entry(ns_.clone()).or_default().push(json!({
                                "t": t_sim, "ev": "bind", "user": p.metadata.name,
                                "created": u.created.map(|c| round2((c.max(start) - start).as_secs_f64() * f)),
                                "node": nn, "cold": u.cold,
                                "node_seen": first_seen.map(|s| s.0), "node_ready": first_seen.and_then(|s| s.1),
                                "taints": n.map(|n| taints_of(n)).unwrap_or_default(),
                                "room": room.get(&ns_)}));
                        u.node = nn;
                    }
                    if u.ready.is_none() && pod_ready(&p) {
                        u.ready = Some(now);
                    }
                    u.preempting |= p
                        .status
                        .as_ref()
                        .is_some_and(|s| s.nominated_node_name.is_some());
                }
            }
        })
    };
    // The driver: one task per launch and group.
    let mut tasks = Vec::new();
    for g in groups {
        for (i, l) in trace.iter().enumerate() {
            let (client, users, slug) = (client.clone(), users.clone(), g.slug.clone());
            let l = *l;
            let scheduler = g.scheduler;
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until((start + Duration::from_secs_f64(l.at / f)).into()).await;
                let name = format!("user-{i:03}");
                let api = Api::<Pod>::namespaced(client, &slug);
                let key = format!("{slug}/{name}");
                users.lock().unwrap().insert(
                    key.clone(),
                    User {
                        row: slug.clone(),
                        created: Some(Instant::now()),
                        ..User::default()
                    },
                );
                if let Err(e) = api
                    .create(&PostParams::default(), &user_pod(&slug, &name, scheduler))
                    .await
                {
                    eprintln!("create {key}: {e}");
                    users.lock().unwrap().remove(&key);
                    return;
                }
                // The session runs from Ready (or from the creation, for a user never Ready).
                let deadline = Instant::now() + Duration::from_secs_f64(l.session / f);
                let ready_at = loop {
                    let r = users.lock().unwrap().get(&key).and_then(|u| u.ready);
                    if let Some(r) = r {
                        break r;
                    }
                    if Instant::now() > deadline {
                        break deadline - Duration::from_secs_f64(l.session / f);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                };
                tokio::time::sleep_until(
                    (ready_at + Duration::from_secs_f64(l.session / f)).into(),
                )
                .await;
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }));
        }
    }
    let window_end = start + Duration::from_secs_f64(window_s / f);
    tokio::time::sleep_until(window_end.into()).await;
    // Sessions that run on past the window are cut there (the trace ends its sessions before).
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = observer.await;
    for t in &tasks {
        t.abort();
    }
    let mut res: BTreeMap<String, RowResult> = BTreeMap::new();
    let threshold = Duration::from_secs_f64(args.wait_threshold_s() / f);
    let window_end_at = start + Duration::from_secs_f64(window_s / f);
    for u in users.lock().unwrap().values() {
        let r = res.entry(u.row.clone()).or_default();
        r.users += 1;
        if let Some(c) = u.created {
            let ready = (u.ready.unwrap_or(window_end_at).max(c) - c).as_secs_f64() * f;
            r.ready_s.push(ready);
            if !u.cold && u.ready.is_some() {
                if u.preempting {
                    r.preempt_s.push(ready);
                } else {
                    r.warm_ready_s.push(ready);
                }
            }
        }
        match (u.created, u.bound) {
            (Some(c), Some(b)) => {
                r.bind_s.push((b - c).as_secs_f64() * f);
                if b - c > threshold {
                    r.waited += 1;
                }
                if u.cold {
                    r.cold += 1;
                } else if let Some(ready) = u.ready {
                    // A warm user waits only for the container's start (100 ms real).
                    r.start_late_s.push(((ready - b).as_secs_f64() - 0.1) * f);
                }
            }
            _ => {
                r.unbound += 1;
                r.waited += 1;
            }
        }
    }
    for (g, s) in node_secs.lock().unwrap().iter() {
        res.entry(g.clone()).or_default().node_hours = s * f / 3600.0;
    }
    for n in seen.lock().unwrap().values().filter(|n| !n.old) {
        let r = res.entry(n.group.clone()).or_default();
        if let Some(ready) = n.ready {
            r.boot_late_s
                .push((ready - n.seen).as_secs_f64() * f - args.node_ready_s);
            if let Some(image) = n.image {
                r.image_late_s
                    .push((image - ready).as_secs_f64() * f - args.image_pull_s);
            }
        }
    }
    let phs = std::mem::take(&mut *placeholders.lock().unwrap());
    let nodes_seen = seen.lock().unwrap().clone();
    landings(&phs, &nodes_seen, &client, threshold, f, &mut res).await;
    let tick_ms: Vec<f64> = kubelet
        .stats()
        .ticks
        .iter()
        .map(|t| t.as_secs_f64() * 1000.0)
        .collect();
    for g in groups {
        res.entry(g.slug.clone()).or_default().tick_ms = tick_ms.clone();
    }
    let logs = root().join("target/coldstart-logs");
    let _ = std::fs::create_dir_all(&logs);
    for g in groups {
        let ev = Api::<Event>::namespaced(client.clone(), &g.slug)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let count = |reason: &str| {
            ev.iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .map(|e| e.count.unwrap_or(1).max(1) as u64)
                .sum::<u64>()
        };
        let r = res.entry(g.slug.clone()).or_default();
        r.evictions = count("SelfDestruct");
        r.preemptions = count("Preempted");
        let _ = std::fs::write(
            logs.join(format!("run{run}-{}-agents.log", g.slug)),
            kubelet.namespace_logs(&g.slug),
        );
    }
    for (slug, evs) in why.lock().unwrap().iter() {
        let text: String = evs.iter().map(|e| e.to_string() + "\n").collect();
        let _ = std::fs::write(logs.join(format!("run{run}-{slug}-why.jsonl")), text);
    }
    let _ = std::fs::write(
        logs.join(format!("run{run}-autoscaler.log")),
        autoscaler.log(),
    );
    let _ = std::fs::write(logs.join(format!("run{run}-kubelet.log")), kubelet.log());
    let _ = std::fs::write(
        logs.join(format!("run{run}-node-gate.log")),
        kubelet.namespace_logs("node-gate"),
    );
    if let Some(c) = class {
        c.finish(&client, f, &mut res).await;
    }
    drop(autoscaler);
    drop(kubelet);
    drop(cp);
    let tl = std::mem::take(&mut *timeline.lock().unwrap());
    (res, tl)
}

/// Where the successor of every placeholder that went landed, by why it went: its
/// `SelfDestruct` Event (the agent's move), the scheduler's `Preempted` Event (a user), or its
/// node being drained by the autoscaler (`PlaceholderSeen::drained`); see `Landing`.
async fn landings(
    phs: &HashMap<String, PlaceholderSeen>,
    nodes: &HashMap<String, NodeSeen>,
    client: &kube::Client,
    threshold: Duration,
    f: f64,
    res: &mut BTreeMap<String, RowResult>,
) {
    let mut why_gone: HashMap<String, String> = HashMap::new();
    let namespaces: std::collections::BTreeSet<&str> =
        phs.values().map(|p| p.namespace.as_str()).collect();
    for ns in namespaces {
        let events = Api::<Event>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        for e in events {
            if let (Some(uid), Some(reason)) = (e.involved_object.uid, e.reason)
                && (reason == "SelfDestruct" || reason == "Preempted")
            {
                why_gone.insert(uid, reason);
            }
        }
    }
    let mut by_name: BTreeMap<(&str, &str), Vec<(&String, &PlaceholderSeen)>> = BTreeMap::new();
    for (uid, p) in phs {
        by_name
            .entry((p.namespace.as_str(), p.name.as_str()))
            .or_default()
            .push((uid, p));
    }
    for ((ns, _), mut lives) in by_name {
        lives.sort_by_key(|(_, p)| p.created);
        for pair in lives.windows(2) {
            let ((uid, before), (_, after)) = (pair[0], pair[1]);
            let (Some(gone), Some((bound_before, _))) = (before.gone, before.bound.as_ref()) else {
                continue;
            };
            let r = res.entry(ns.to_string()).or_default();
            r.recreate_s
                .push((after.created.max(gone) - gone).as_secs_f64() * f);
            let landing = match why_gone.get(uid).map(String::as_str) {
                Some("SelfDestruct") => &mut r.moved,
                Some("Preempted") => &mut r.preempted,
                _ if before.drained => &mut r.drained,
                _ => continue,
            };
            match after.bound.as_ref() {
                Some((t, node)) if *t - after.created <= threshold => {
                    // The node's first sighting is the observer's: a node first seen after the
                    // predecessor was bound is newer than its node.
                    if nodes.get(node).is_none_or(|n| n.seen > *bound_before) {
                        landing.new += 1;
                    } else {
                        landing.old += 1;
                    }
                }
                Some((_, node)) => {
                    landing.pending += 1;
                    if nodes.get(node).is_none_or(|n| n.seen > gone) {
                        landing.brought += 1;
                    }
                }
                None => landing.pending += 1,
            }
        }
    }
}

/// The autoscaler's timers on the real stack (whole seconds, at least 1 s: its flags' and
/// the harness's granularity) and what they are in simulated time.
struct Timers {
    scan_s: u64,
    unneeded_s: u64,
}

fn timers(f: f64) -> Timers {
    let secs = |sim: f64| ((sim / f).floor() as u64).max(1);
    Timers {
        scan_s: secs(10.0),
        unneeded_s: secs(600.0),
    }
}

/// The node delays the simulator is given: the nominal boot and pull plus the stand-in
/// kubelet's lateness as the real runs of this placement and form measured it (the median
/// over their rows of each row's p50), and the relative spread that gives a uniform delay the
/// measured p50-to-p90 width (p90 - p50 = 0.4 × spread × delay), the mean of boot's and
/// pull's. Without real runs: the nominal delays, no spread.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Delays {
    ready_s: f64,
    pull_s: f64,
    spread: f64,
    /// The preempting users' and the re-created placeholders' delays (the median over the
    /// rows of each row's p50), when the runs measured any.
    preempt_s: Option<f64>,
    recreate_s: Option<f64>,
    start_s: Option<f64>,
}

fn measured_delays(args: &Args, out: &[Value], placement: &str) -> Delays {
    let lags: Vec<&Value> = out
        .iter()
        .filter(|r| {
            r["source"] == "real"
                && r["placement"] == placement
                && r["form"] == args.form.as_str()
                && args.rows.iter().any(|row| r["row"] == row.as_str())
        })
        .map(|r| &r["lag"])
        .collect();
    delays_from(args.node_ready_s, args.image_pull_s, &lags)
}

fn delays_from(ready_s: f64, pull_s: f64, lags: &[&Value]) -> Delays {
    let median = |key: &str, q: &str| {
        let v: Vec<f64> = lags.iter().filter_map(|l| l[key][q].as_f64()).collect();
        (!v.is_empty()).then(|| quantile(&v, 0.5))
    };
    let (Some(b50), Some(b90), Some(i50), Some(i90)) = (
        median("boot_late_s", "p50"),
        median("boot_late_s", "p90"),
        median("image_late_s", "p50"),
        median("image_late_s", "p90"),
    ) else {
        return Delays {
            ready_s,
            pull_s,
            spread: 0.0,
            preempt_s: None,
            recreate_s: None,
            start_s: None,
        };
    };
    let (ready, pull) = (ready_s + b50.max(0.0), pull_s + i50.max(0.0));
    let spread = ((b90 - b50).max(0.0) / (0.4 * ready) + (i90 - i50).max(0.0) / (0.4 * pull)) / 2.0;
    Delays {
        ready_s: round2(ready),
        pull_s: round2(pull),
        spread: round2(spread.min(0.9)),
        preempt_s: median("preempt_s", "p50").map(round2),
        recreate_s: median("recreate_s", "p50").map(round2),
        start_s: median("warm_ready_s", "p50").map(round2),
    }
}

/// The same trace through `simulate`, with the same delays in simulated time: the real
/// stack's timers times the factor (the autoscaler's whole seconds, its fixed 2 s hold on
/// very new pods, the gate's lag), and the node delays the real runs measured.
fn run_sim(args: &Args, placement: &str, window_s: f64, delays: &Delays) -> Vec<Value> {
    let f = args.factor;
    let t = timers(f);
    let sim_s = |real_s: f64| format!("{}ms", (real_s * f * 1000.0).round() as u64);
    let bin = root().join(&args.simulate);
    let mut cmd = std::process::Command::new(&bin);
    cmd.current_dir(root()).args([
        "--arrivals".to_string(),
        args.trace().display().to_string(),
        "--warmup".into(),
        "0".into(),
        "--seeds".into(),
        args.sim_seeds.to_string(),
        "--replicas".into(),
        args.replicas().to_string(),
        "--node-cpu".into(),
        args.node_cpu().to_string(),
        "--node-mem-gib".into(),
        (args.node_cpu() * 4).to_string(),
        "--user-cpu".into(),
        "1".into(),
        "--user-mem-gib".into(),
        "4".into(),
        // The agents' backoffs (decision/src/backoff.rs) are fixed, not compressed: a move
        // refused by the PDB waits 5-10 s real, f times that simulated.
        "--agent-backoff-scale".into(),
        f.to_string(),
        // The agents' watch shows a sibling's eviction late (`--watch-delay-s`): agents that see
        // a new node in the same instant race for the PDB's one disruption (docs/peers.md).
        "--watch-delay".into(),
        format!("{}ms", (args.watch_delay_s * f * 1000.0).round()),
        // and the PDB refuses an eviction until its controller has recounted a started one.
        "--pdb-recount".into(),
        format!("{}ms", (args.pdb_recount_s * f * 1000.0).round()),
        // The node gate's pod on every node (manifests/node-gate/daemonset.yaml: 1m, 16 MiB),
        // in the 100m / 256 MiB the templates add: 8 placeholders alone are 49.8 %.
        "--daemonset-cpu".into(),
        "0.001".into(),
        "--daemonset-mem-mib".into(),
        "16".into(),
        "--node-ready".into(),
        format!("{}ms", (delays.ready_s * 1000.0).round() as u64),
        "--image-pull".into(),
        format!("{}ms", (delays.pull_s * 1000.0).round() as u64),
        "--image-size-gib".into(),
        args.image_size_gib.to_string(),
        "--delay-spread".into(),
        delays.spread.to_string(),
        "--min-nodes".into(),
        "1".into(),
        "--max-nodes".into(),
        "20".into(),
        "--scan-interval".into(),
        sim_s(t.scan_s as f64),
        "--unneeded-time".into(),
        sim_s(t.unneeded_s as f64),
        "--scale-down-delay-after-add".into(),
        sim_s(t.unneeded_s as f64),
        // The harness ties the recheck to the unneeded time.
        "--unremovable-node-recheck-timeout".into(),
        sim_s(t.unneeded_s as f64),
        // The autoscaler's unschedulablePodTimeBuffer: 2 s real, not compressed.
        "--new-pod-hold".into(),
        sim_s(2.0),
        // It counts from the pod's creationTimestamp, whole seconds real.
        "--created-resolution".into(),
        sim_s(1.0),
        // The gate's taint goes within about 1 s real of the pull: the kubelet's 100 ms
        // start, the process's start, one GET and one PATCH.
        "--gate-lag".into(),
        sim_s(1.0),
        // The autoscaler's drain: its fixed waits, uncompressed (5 s after the taint, a refused
        // eviction retried every 10 s, a drain refused for 2 minutes fails).
        "--node-delete-delay-after-taint".into(),
        sim_s(5.0),
        "--eviction-retry".into(),
        sim_s(10.0),
        "--max-pod-eviction-time".into(),
        sim_s(120.0),
        "--user-placement".into(),
        placement.to_string(),
        "--only".into(),
        {
            let mut rows: Vec<&str> = Vec::new();
            for r in args.rows.iter().map(|r| base_row(r)) {
                if !rows.contains(&r) {
                    rows.push(r);
                }
            }
            rows.join(",")
        },
        "--json".into(),
        // Every user's node and the nodes' times, for the per-user comparison.
        "--users-out".into(),
        format!("target/coldstart-sim-users-{placement}.json"),
    ]);
    // Simulated seconds. `--late-after`: its "waited" as the real rows', users bound later than
    // the threshold after creation.
    for (flag, v) in [
        ("--preemption-delay", delays.preempt_s),
        ("--recreate-delay", delays.recreate_s),
        ("--start-delay", delays.start_s),
        ("--late-after", Some(args.wait_threshold_s())),
    ] {
        if let Some(v) = v {
            cmd.arg(flag)
                .arg(format!("{}ms", (v * 1000.0).round() as u64));
        }
    }
    cmd.args(&args.class.sim_flags);
    if args.plot.is_some() && placement == args.placement[0] {
        cmd.args(["--plot", "target/coldstart-sim.svg", "--plot-until"])
            .arg(format!("{}s", window_s.ceil()));
    }
    eprintln!("coldstart: {cmd:?}");
    let o = cmd.output().unwrap_or_else(|e| {
        panic!(
            "{}: {e} (cargo build --release -p selfdestruct-sim)",
            bin.display()
        )
    });
    if !o.status.success() {
        // The real runs are kept whatever the simulator says (a row it does not know).
        eprintln!("simulate failed: {}", String::from_utf8_lossy(&o.stderr));
        return Vec::new();
    }
    let v: Value = serde_json::from_slice(&o.stdout).expect("simulate's JSON");
    let _ = std::fs::write(
        root().join(format!("target/coldstart-sim-{placement}.json")),
        &o.stdout,
    );
    sim_rows(args, placement, &v, window_s, delays)
}

/// The simulator's rows. It replays whole UTC days: its node-hours cover 24 h, of which
/// the hours after `window_s` are the cluster left at the end (1 initial node, plus those
/// added, minus those removed) standing idle; those are taken off.
fn sim_rows(args: &Args, placement: &str, v: &Value, window_s: f64, delays: &Delays) -> Vec<Value> {
    let list = v["rows"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for row in &args.rows {
        let Some(r) = list
            .iter()
            .find(|r| r["results"]["policy"].as_str() == Some(class::sim_policy(row)))
        else {
            eprintln!("simulate printed no row {row}");
            continue;
        };
        let per: Vec<Value> = r["per_seed"].as_array().cloned().unwrap_or_default();
        let n = per.len().max(1) as f64;
        let col = |k: &str| {
            per.iter()
                .map(|s| s[k].as_f64().unwrap_or(0.0))
                .collect::<Vec<f64>>()
        };
        let mean = |k: &str| col(k).iter().sum::<f64>() / n;
        let tail_h = (24.0 * 3600.0 - window_s) / 3600.0;
        let node_hours = per
            .iter()
            .map(|s| {
                let end_nodes = 1.0 + s["nodes_added"].as_f64().unwrap_or(0.0)
                    - s["nodes_removed"].as_f64().unwrap_or(0.0);
                s["node_hours"].as_f64().unwrap_or(0.0) - end_nodes * tail_h
            })
            .sum::<f64>()
            / n;
        // Its evictions per hour are over the day: over the window instead.
        let ev = mean("evictions_per_hour") * 24.0 * 3600.0 / window_s;
        out.push(json!({"row": row, "placement": placement, "source": "sim",
            "cold": mean("cold"), "waited": mean("late"),
            "node_hours": round2(node_hours), "node_hours_day": round2(mean("node_hours")),
            "evictions_per_hour": round2(ev), "users": mean("users"),
            "preemptions": round2(mean("preemptions_per_hour") * 24.0),
            "runs": per.len(), "per_run": {"cold": col("cold"), "waited": col("late")},
            "spread": {"cold": range(&col("cold"))},
            // Arrival → running (the sim has no container start), all seeds; minutes per seed.
            "ready_s": {"p50": r["results"]["ttr_p50_s"], "p90": r["results"]["ttr_p90_s"],
                "p99": r["results"]["ttr_p99_s"]},
            "user_minutes": round2(mean("user_minutes")),
            "landed": {"moved": {"all": col("moves_to_new_nodes"), "new": col("moves_on_target")},
                "drained": {"all": col("drain_evictions")}},
            "delays": {"node_ready_s": delays.ready_s, "image_pull_s": delays.pull_s,
                "spread": delays.spread, "preemption_s": delays.preempt_s,
                "recreate_s": delays.recreate_s, "start_s": delays.start_s},
            "form": args.form, "factor": args.factor}));
    }
    out
}
