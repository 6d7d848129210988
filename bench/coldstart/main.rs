//! Cold starts on the real stack (issue 34, items 1-2, the quick form): replays a launch log
//! (the simulator's `--arrivals` CSV: `timestamp,duration`) on a real control plane with the
//! real cluster-autoscaler (kwok) and the stand-in kubelet of `realstack/`, every timer
//! compressed by one factor, then the same trace through `simulate` with the same delays, and
//! writes both to `bench/results/real-stack.json`.
//!
//! `cargo test --test coldstart -- --rows static,new-node --placement most-allocated`
//! (after `cargo build --release -p selfdestruct-sim`; `SELFDESTRUCT_KUBE_BIN` as for
//! `tests/cluster.rs`). Each row runs side by side on one control plane, in its own namespace
//! and its own node group. Delays are given in the trace's (simulated) time; the real stack
//! runs them divided by `--factor`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use selfdestruct_realstack::{
    Autoscaler, AutoscalerOptions, ControlPlane, ControlPlaneOptions, Kubelet, KubeletOptions,
    block_on, chain, node, ok,
};
use serde_json::{Value, json};

const IMAGE: &str = "ghcr.io/selfdestruct/selfdestruct:0.1.0";
const USER_IMAGE: &str = "example.org/hub/user:1";
const POOL: &str = "realstack.selfdestruct.io/pool";
const GROUP: &str = "realstack.selfdestruct.io/group";
const USER_LABEL: &str = "component=singleuser-server";

#[derive(Parser, Debug)]
struct Args {
    /// Rows: static, new-node, buffer.
    #[arg(long, value_delimiter = ',', default_value = "static,new-node")]
    rows: Vec<String>,
    /// Users' scheduler: most-allocated (user-scheduler) or least-allocated (default-scheduler).
    #[arg(long, default_value = "most-allocated")]
    placement: String,
    /// Every timer is divided by this.
    #[arg(long, default_value_t = 15.0)]
    factor: f64,
    /// The launch log (CSV: timestamp, duration in seconds), one UTC day at most.
    #[arg(long, default_value = "bench/coldstart/trace.csv")]
    trace: PathBuf,
    /// Runs (seeds) per row.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Placeholders per row (buffer: chunks).
    #[arg(long, default_value_t = 4)]
    replicas: u32,
    /// Node cores (4 GiB a core); users and placeholders take 1 core, 4 GiB.
    #[arg(long, default_value_t = 4)]
    node_cpu: u32,
    /// Simulated seconds from the autoscaler's request to node Ready.
    #[arg(long, default_value_t = 90.0)]
    node_ready_s: f64,
    /// Simulated seconds of the user image's pull.
    #[arg(long, default_value_t = 60.0)]
    image_pull_s: f64,
    /// A user is "waited" when bound later than this (simulated seconds) after its creation.
    #[arg(long, default_value_t = 15.0)]
    wait_threshold_s: f64,
    /// The results file (merged: rows of other placements are kept).
    #[arg(long, default_value = "bench/results/real-stack.json")]
    out: PathBuf,
    /// The simulator binary.
    #[arg(long, default_value = "target/release/simulate")]
    simulate: PathBuf,
    /// "quick" or "full".
    #[arg(long, default_value = "quick")]
    form: String,
    // `cargo test` passes these to a harness = false target.
    #[arg(long, hide = true)]
    nocapture: bool,
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

fn in_pool(spec: &mut Value, pool: &str) {
    spec["nodeSelector"][POOL] = json!(pool);
    let tol = json!({"key": POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"});
    match spec["tolerations"].as_array_mut() {
        Some(t) => t.push(tol),
        None => spec["tolerations"] = json!([tol]),
    }
}

/// The placeholder set of `manifests/` in namespace `ns` on pool `ns` (as tests/cluster.rs's
/// `placeholder_set`), `replicas` pods and `env`.
fn placeholder_set(
    cp: &ControlPlane,
    ns: &str,
    replicas: u32,
    env: &[(String, String)],
) -> Vec<Value> {
    let mut docs = ok(cp.kustomize(&root().join("manifests")));
    docs.extend(ok(cp.kustomize(&root().join("rbac/node-reader"))));
    let cluster_scoped = ["ClusterRole", "ClusterRoleBinding"];
    let mut out = Vec::new();
    for mut d in docs {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "Namespace" => d["metadata"]["name"] = json!(ns),
            "PriorityClass" => {}
            k if cluster_scoped.contains(&k) => {
                let name = format!(
                    "{}-{ns}",
                    d["metadata"]["name"].as_str().unwrap_or_default()
                );
                d["metadata"]["name"] = json!(name);
            }
            _ => d["metadata"]["namespace"] = json!(ns),
        }
        let text = d.to_string().replace(
            "placeholder-node-reader\"",
            &format!("placeholder-node-reader-{ns}\""),
        );
        let mut d: Value = serde_json::from_str(&text).expect("json");
        if kind == "ClusterRoleBinding" || kind == "RoleBinding" {
            for s in d["subjects"].as_array_mut().into_iter().flatten() {
                s["namespace"] = json!(ns);
            }
        }
        if kind == "StatefulSet" {
            d["spec"]["replicas"] = json!(replicas);
            let spec = &mut d["spec"]["template"]["spec"];
            in_pool(spec, ns);
            let list = spec["containers"][0]["env"].as_array_mut().expect("env");
            for (k, v) in env {
                list.retain(|e| e["name"] != k.as_str());
                list.push(json!({"name": k, "value": v}));
            }
        }
        out.push(d);
    }
    out.sort_by_key(|d| d["kind"] == "StatefulSet");
    out
}

/// A CapacityBuffer of `replicas` chunks of one user's room in namespace `ns` (its pod
/// template in the pool, at priority 0 as the buffer's chunks are placed by the autoscaler only).
fn buffer_set(ns: &str, replicas: u32) -> Vec<Value> {
    let mut spec = json!({"containers": [{"name": "chunk", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]});
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

fn template(row: &str, cpu: u32) -> Node {
    let taints = vec![json!({"key": POOL, "value": row, "effect": "NoSchedule"})];
    let mut n = node(
        &format!("tpl-{row}"),
        &[(POOL, row), (GROUP, row)],
        cpu,
        cpu * 4,
        &taints,
        &[IMAGE],
    );
    n.spec
        .as_mut()
        .unwrap()
        .taints
        .as_mut()
        .unwrap()
        .retain(|t| t.key != "node.kubernetes.io/not-ready");
    n.metadata.annotations = Some(
        [
            ("cluster-autoscaler.kwok.nodegroup/min-count", "1"),
            ("cluster-autoscaler.kwok.nodegroup/max-count", "20"),
            ("cluster-autoscaler.kwok.nodegroup/desired-count", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    n
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
    match row {
        "static" => {
            env.push(("SELFDESTRUCT_MOVE_TO_NEW_NODES".into(), "false".into()));
            env.push(("SELFDESTRUCT_MAX_LIFETIME".into(), "0".into()));
            env.push(("SELFDESTRUCT_MIN_LIFETIME".into(), "".into()));
        }
        _ => {
            env.push(("SELFDESTRUCT_MIN_LIFETIME".into(), fmt_s(6.0 * 3600.0 / f)));
            env.push(("SELFDESTRUCT_MAX_LIFETIME".into(), fmt_s(12.0 * 3600.0 / f)));
        }
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

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[derive(Debug, Default, Clone)]
struct RowResult {
    users: u64,
    cold: u64,
    waited: u64,
    node_hours: f64,
    evictions: u64,
    preemptions: u64,
    unbound: u64,
}

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let f = args.factor;
    let trace = read_trace(&root().join(&args.trace));
    let scheduler = match args.placement.as_str() {
        "most-allocated" => "user-scheduler",
        "least-allocated" => "default-scheduler",
        p => panic!("--placement {p}: most-allocated or least-allocated"),
    };
    let end_s = trace.iter().map(|l| l.at + l.session).fold(0.0, f64::max);
    // The measured window: to the last session's end plus the scale-down of its node
    // (`--scale-down-unneeded-time` 10 min and a few scans).
    let window_s = trace.iter().map(|l| l.at).fold(0.0, f64::max).max(end_s) + 15.0 * 60.0;
    eprintln!(
        "coldstart: {} launches over {:.0} simulated minutes, factor {f}: about {:.1} minutes wall per run",
        trace.len(),
        window_s / 60.0,
        window_s / f / 60.0
    );
    let mut out: Vec<Value> = std::fs::read_to_string(root().join(&args.out))
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
        .unwrap_or_default();
    // A new run replaces the file's entries of the same rows, placement and form only.
    out.retain(|r| {
        r["placement"] != args.placement.as_str()
            || r["form"] != args.form.as_str()
            || !args.rows.iter().any(|row| r["row"] == row.as_str())
    });
    let mut totals: BTreeMap<String, (RowResult, u32)> = BTreeMap::new();
    for run in 0..args.runs {
        let res = block_on(run_real(&args, &trace, scheduler, window_s, run));
        for (row, r) in res {
            eprintln!("coldstart run {run} {row}: {r:?}");
            let t = totals.entry(row).or_default();
            t.0.users += r.users;
            t.0.cold += r.cold;
            t.0.waited += r.waited;
            t.0.node_hours += r.node_hours;
            t.0.evictions += r.evictions;
            t.0.preemptions += r.preemptions;
            t.0.unbound += r.unbound;
            t.1 += 1;
        }
    }
    let hours = window_s / 3600.0;
    for (row, (r, runs)) in &totals {
        let n = f64::from(*runs);
        out.push(json!({"row": row, "placement": args.placement, "source": "real",
            "cold": r.cold as f64 / n, "waited": r.waited as f64 / n,
            "node_hours": round2(r.node_hours / n), "evictions_per_hour": round2(r.evictions as f64 / n / hours),
            "users": r.users as f64 / n, "preemptions": r.preemptions as f64 / n,
            "unbound_at_end": r.unbound as f64 / n,
            "runs": runs, "form": args.form, "factor": f}));
    }
    out.extend(run_sim(&args, window_s));
    std::fs::create_dir_all(root().join(&args.out).parent().expect("a folder"))
        .expect("results folder");
    std::fs::write(
        root().join(&args.out),
        serde_json::to_string_pretty(&out).expect("json") + "\n",
    )
    .expect("write the results");
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

async fn run_real(
    args: &Args,
    trace: &[Launch],
    scheduler: &str,
    window_s: f64,
    run: u32,
) -> BTreeMap<String, RowResult> {
    let f = args.factor;
    let d = |s: f64| Duration::from_secs_f64(s / f);
    let cp = ok(ControlPlane::start(ControlPlaneOptions::default()));
    let kubelet = ok(Kubelet::start(
        &cp,
        KubeletOptions {
            boot_delay: d(args.node_ready_s),
            pull_time: d(args.image_pull_s),
            start_delay: Duration::from_millis(100),
            selfdestruct_bin: Some(PathBuf::from(env!("CARGO_BIN_EXE_selfdestruct"))),
            ..KubeletOptions::default()
        },
    ));
    let autoscaler = ok(Autoscaler::start(
        &cp,
        AutoscalerOptions {
            templates: args
                .rows
                .iter()
                .map(|r| template(r, args.node_cpu))
                .collect(),
            group_label: GROUP.into(),
            scan_interval: d(10.0).max(Duration::from_secs(1)),
            scale_down_unneeded_time: d(600.0).max(Duration::from_secs(1)),
            scale_down_delay_after_add: d(600.0).max(Duration::from_secs(1)),
            capacity_buffer_crd: Some(
                include_str!("../../sim/tests/data/autoscaling.x-k8s.io_capacitybuffers.yaml")
                    .into(),
            ),
            args: vec![],
        },
    ));
    let client = ok(cp.client().await);
    // Each row's first node, then its placeholders (or buffer).
    let nodes_api = Api::<Node>::all(client.clone());
    for row in &args.rows {
        let lp = ListParams::default().labels(&format!("{GROUP}={row}"));
        ok(selfdestruct_realstack::wait::until(
            &format!("{row}'s first node"),
            Duration::from_secs(120),
            || {
                let a = nodes_api.clone();
                let lp = lp.clone();
                async move {
                    a.list(&lp)
                        .await
                        .ok()
                        .filter(|l| l.items.iter().any(|n| has_image(n, IMAGE)))
                        .map(|_| ())
                }
            },
        )
        .await);
    }
    for row in &args.rows {
        if row.starts_with("buffer") {
            ok(cp.apply(&buffer_set(row, args.replicas)));
        } else {
            ok(cp.apply(&placeholder_set(
                &cp,
                row,
                args.replicas,
                &agent_env(row, f),
            )));
            let api = Api::<Pod>::namespaced(client.clone(), row);
            let n = args.replicas as usize;
            ok(selfdestruct_realstack::wait::until(
                &format!("{row}'s placeholders Ready"),
                Duration::from_secs(180),
                || {
                    let a = api.clone();
                    async move {
                        let l = a
                            .list(
                                &ListParams::default()
                                    .labels("app.kubernetes.io/name=selfdestruct"),
                            )
                            .await
                            .ok()?;
                        (l.items.iter().filter(|p| pod_ready(p)).count() >= n).then_some(())
                    }
                },
            )
            .await);
        }
    }
    // Watch users and nodes.
    let (pods, pw) = reflector::store::<Pod>();
    let (nodes, nw) = reflector::store::<Node>();
    tokio::spawn(
        reflector::reflector(
            pw,
            watcher(
                Api::<Pod>::all(client.clone()),
                watcher::Config::default().labels(USER_LABEL),
            ),
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
    let start = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The observer: bound and Ready times, the node's image at binding, node-seconds.
    let observer = {
        let (users, node_secs, stop) = (users.clone(), node_secs.clone(), stop.clone());
        let (pods, nodes) = (pods.clone(), nodes.clone());
        tokio::spawn(async move {
            let mut last = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = Instant::now();
                let dt = (now - last).as_secs_f64();
                last = now;
                let ns = nodes.state();
                {
                    let mut s = node_secs.lock().unwrap();
                    for n in &ns {
                        if let Some(g) = n.metadata.labels.as_ref().and_then(|l| l.get(GROUP)) {
                            *s.entry(g.clone()).or_default() += dt;
                        }
                    }
                }
                let by_name: HashMap<String, Arc<Node>> = ns
                    .into_iter()
                    .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                    .collect();
                let mut us = users.lock().unwrap();
                for p in pods.state() {
                    let key = format!(
                        "{}/{}",
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default()
                    );
                    let Some(u) = us.get_mut(&key) else { continue };
                    if u.bound.is_none() {
                        if let Some(nn) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                            u.bound = Some(now);
                            u.cold = !by_name.get(&nn).is_some_and(|n| has_image(n, USER_IMAGE));
                            u.node = nn;
                        }
                    }
                    if u.ready.is_none() && pod_ready(&p) {
                        u.ready = Some(now);
                    }
                }
            }
        })
    };
    // The driver: one task per launch and row.
    let mut tasks = Vec::new();
    for row in &args.rows {
        for (i, l) in trace.iter().enumerate() {
            let (client, users, row) = (client.clone(), users.clone(), row.clone());
            let l = *l;
            let scheduler = scheduler.to_string();
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until((start + Duration::from_secs_f64(l.at / f)).into()).await;
                let name = format!("user-{i:03}");
                let api = Api::<Pod>::namespaced(client, &row);
                let key = format!("{row}/{name}");
                users.lock().unwrap().insert(
                    key.clone(),
                    User {
                        row: row.clone(),
                        created: Some(Instant::now()),
                        ..User::default()
                    },
                );
                if let Err(e) = api
                    .create(&PostParams::default(), &user_pod(&row, &name, &scheduler))
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
    let threshold = Duration::from_secs_f64(args.wait_threshold_s / f);
    for u in users.lock().unwrap().values() {
        let r = res.entry(u.row.clone()).or_default();
        r.users += 1;
        match (u.created, u.bound) {
            (Some(c), Some(b)) => {
                if b - c > threshold {
                    r.waited += 1;
                }
                if u.cold {
                    r.cold += 1;
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
    for row in &args.rows {
        let ev = Api::<Event>::namespaced(client.clone(), row)
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
        let r = res.entry(row.clone()).or_default();
        r.evictions = count("SelfDestruct");
        r.preemptions = count("Preempted");
    }
    let _ = std::fs::write(
        cp.dir()
            .parent()
            .unwrap_or(Path::new("/tmp"))
            .join(format!("coldstart-{run}-autoscaler.log")),
        autoscaler.log(),
    );
    drop(autoscaler);
    drop(kubelet);
    drop(cp);
    res
}

/// The same trace through `simulate`, with the same delays where it has flags.
fn run_sim(args: &Args, window_s: f64) -> Vec<Value> {
    let bin = root().join(&args.simulate);
    let mut cmd = std::process::Command::new(&bin);
    cmd.current_dir(root()).args([
        "--arrivals".to_string(),
        args.trace.display().to_string(),
        "--warmup".into(),
        "0".into(),
        "--seeds".into(),
        args.runs.to_string(),
        "--replicas".into(),
        args.replicas.to_string(),
        "--node-cpu".into(),
        args.node_cpu.to_string(),
        "--node-mem-gib".into(),
        (args.node_cpu * 4).to_string(),
        "--user-cpu".into(),
        "1".into(),
        "--user-mem-gib".into(),
        "4".into(),
        "--node-ready".into(),
        format!("{}s", args.node_ready_s),
        "--image-pull".into(),
        format!("{}s", args.image_pull_s),
        "--delay-spread".into(),
        "0".into(),
        "--min-nodes".into(),
        "1".into(),
        "--max-nodes".into(),
        "20".into(),
        "--unneeded-time".into(),
        "10m".into(),
        "--user-placement".into(),
        args.placement.clone(),
        "--only".into(),
        args.rows.join(","),
        "--json".into(),
    ]);
    eprintln!("coldstart: {cmd:?}");
    let o = cmd.output().unwrap_or_else(|e| {
        panic!(
            "{}: {e} (cargo build --release -p selfdestruct-sim)",
            bin.display()
        )
    });
    assert!(
        o.status.success(),
        "simulate: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("simulate's JSON");
    let _ = std::fs::write(root().join("target/coldstart-sim.json"), &o.stdout);
    sim_rows(args, &v, window_s)
}

/// The simulator's rows. It replays whole UTC days: its node-hours cover 24 h, of which
/// the hours after `window_s` are the cluster left at the end (1 initial node, plus those
/// added, minus those removed) standing idle; those are taken off.
fn sim_rows(args: &Args, v: &Value, window_s: f64) -> Vec<Value> {
    let list = v["rows"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for row in &args.rows {
        let Some(r) = list
            .iter()
            .find(|r| r["results"]["policy"].as_str() == Some(row.as_str()))
        else {
            eprintln!("simulate printed no row {row}");
            continue;
        };
        let per: Vec<Value> = r["per_seed"].as_array().cloned().unwrap_or_default();
        let n = per.len().max(1) as f64;
        let mean = |k: &str| {
            per.iter()
                .map(|s| s[k].as_f64().unwrap_or(0.0))
                .sum::<f64>()
                / n
        };
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
        out.push(
            json!({"row": row, "placement": args.placement, "source": "sim",
            "cold": mean("cold"), "waited": mean("delayed"),
            "node_hours": round2(node_hours), "node_hours_day": round2(mean("node_hours")),
            "evictions_per_hour": round2(ev), "users": mean("users"),
            "preemptions": round2(mean("preemptions_per_hour") * 24.0), 
            "runs": per.len(), "form": args.form}),
        );
    }
    out
}
