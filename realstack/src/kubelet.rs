//! A stand-in kubelet for every node of the cluster, on a thread of its own.
//!
//! What it does, as a kubelet would:
//! - a node turns `Ready` after a boot delay (from when the kubelet first sees it; a node
//!   first seen Ready counts as booted), gets its `kubernetes.io/hostname` label, and keeps
//!   its `Ready` heartbeat and its Lease in `kube-node-lease` fresh;
//! - images are pulled per node: an image shows in `status.images` only after its pull time,
//!   and a pod whose images are not on its node starts only after the pull;
//! - a container starts a start delay after its images are there; the pod is then `Running`
//!   with the conditions and container statuses a kubelet writes;
//! - a container whose image is the selfdestruct image runs the real `selfdestruct` binary
//!   (or the image's binary its command names, found beside it): the pod's env (Downward
//!   API `fieldRef`s resolved), its projected and downwardAPI volumes written to a folder
//!   (a pod-bound token from the TokenRequest API, the cluster CA, the namespace) and
//!   pointed at by `SELFDESTRUCT_SERVICE_ACCOUNT_DIR` and
//!   `SELFDESTRUCT_PODINFO_DIR`, `KUBERNETES_SERVICE_HOST`/`PORT` naming the apiserver;
//! - a terminating pod gets SIGTERM, SIGKILL after its grace period, and is deleted (grace 0,
//!   uid precondition) once its containers have stopped; a pod deleted at once (grace 0) has
//!   its processes stopped.
//!
//! Nodes labelled [`NO_KUBELET_LABEL`] are left alone (a dead kubelet).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::control_plane::{ControlPlane, client_from};
use crate::proc::Proc;
use crate::{Error, wait};

/// Nodes with this label get no kubelet.
pub const NO_KUBELET_LABEL: &str = "realstack.selfdestruct.io/no-kubelet";
/// The service-account folder a kubelet mounts.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The agent's default podinfo folder.
const PODINFO_DIR: &str = "/etc/podinfo";

/// The kubelet's timers and the selfdestruct image.
#[derive(Clone, Debug)]
pub struct KubeletOptions {
    /// From first sight of a NotReady node to its `Ready`.
    pub boot_delay: Duration,
    /// An image's pull time, unless listed in `pull_times`.
    pub pull_time: Duration,
    /// Pull times by image reference.
    pub pull_times: BTreeMap<String, Duration>,
    /// `status.images[].sizeBytes` by image reference (others: 1 MB, below the scheduler's
    /// ImageLocality threshold of 23 MB, so they score nothing).
    pub image_sizes: BTreeMap<String, u64>,
    /// From images present to the container running.
    pub start_delay: Duration,
    /// Node heartbeat and Lease renewal interval.
    pub heartbeat: Duration,
    /// The repository whose images run `selfdestruct_bin` (`ghcr.io/selfdestruct/selfdestruct`).
    pub selfdestruct_image: String,
    /// The real binary; `None`: such containers are plain pretend containers.
    pub selfdestruct_bin: Option<PathBuf>,
    /// At most this many nodes (then pods) are worked on at once in a tick (at least 1; 1
    /// works through them one after the other, as this kubelet did before).
    pub concurrency: usize,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            boot_delay: Duration::from_secs(2),
            pull_time: Duration::from_secs(1),
            pull_times: BTreeMap::new(),
            image_sizes: BTreeMap::new(),
            start_delay: Duration::from_millis(300),
            heartbeat: Duration::from_secs(10),
            selfdestruct_image: "ghcr.io/selfdestruct/selfdestruct".into(),
            selfdestruct_bin: None,
            concurrency: 32,
        }
    }
}

/// The running kubelet. Dropping it stops its loop and every process it started.
#[derive(Debug)]
pub struct Kubelet {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    dir: PathBuf,
    stats: Arc<std::sync::Mutex<KubeletStats>>,
}

/// How the kubelet's loop kept up.
#[derive(Clone, Debug, Default)]
pub struct KubeletStats {
    /// Each tick's duration (every node's, then every pod's work), one every 100 ms at best.
    pub ticks: Vec<Duration>,
}

/// A NotReady Node as a kubelet registers it (with the not-ready taint), `cpu` cores and
/// `memory_gi` GiB allocatable, `labels`, more `taints` and `images` already present.
pub fn node(
    name: &str,
    labels: &[(&str, &str)],
    cpu: u32,
    memory_gi: u32,
    taints: &[Value],
    images: &[&str],
) -> Node {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let mut all_taints =
        vec![json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})];
    all_taints.extend(taints.iter().cloned());
    let resources =
        json!({"cpu": cpu.to_string(), "memory": format!("{memory_gi}Gi"), "pods": "110"});
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": all_taints},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                            "message": "booting", "lastHeartbeatTime": now(),
                            "lastTransitionTime": now()}],
            "images": images.iter().map(|i| json!({"names": [i], "sizeBytes": 1_000_000})).collect::<Vec<_>>(),
        }
    }))
    .expect("a Node")
}

impl Kubelet {
    /// Starts the kubelet for `cp` on its own thread; returns once its caches are filled.
    pub fn start(cp: &ControlPlane, opts: KubeletOptions) -> Result<Kubelet, Error> {
        let dir = cp
            .dir()
            .join(format!("kubelet-{}", crate::control_plane::free_port()));
        std::fs::create_dir_all(dir.join("pods")).map_err(Error::io("kubelet folder"))?;
        let ctx = Ctx {
            kubeconfig: cp.kubeconfig(),
            port: cp.port,
            ca_pem: cp.ca_pem.clone(),
            dir: dir.clone(),
            opts,
        };
        let stats: Arc<std::sync::Mutex<KubeletStats>> = Arc::default();
        let loop_stats = stats.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("realstack-kubelet".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                rt.block_on(run(ctx, loop_stats, stop_rx, ready_tx));
            })
            .map_err(Error::io("kubelet thread"))?;
        match ready_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(Error::Timeout {
                    what: "the kubelet's caches".into(),
                    secs: 60,
                });
            }
        }
        Ok(Kubelet {
            stop: Some(stop_tx),
            thread: Some(thread),
            dir,
            stats,
        })
    }

    /// Everything the containers named `name` in namespace `ns` wrote (every incarnation,
    /// oldest first).
    pub fn pod_logs(&self, ns: &str, name: &str) -> String {
        let mut files: Vec<(std::time::SystemTime, PathBuf)> =
            std::fs::read_dir(self.dir.join("pods"))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{ns}_{name}_"))
                        && e.path().extension().is_some_and(|x| x == "log")
                })
                .map(|e| {
                    let t = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (t, e.path())
                })
                .collect();
        files.sort();
        files
            .iter()
            .map(|(_, p)| std::fs::read_to_string(p).unwrap_or_default())
            .collect()
    }

    /// The logs of every container run in namespace `ns`.
    pub fn namespace_logs(&self, ns: &str) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(self.dir.join("pods"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&format!("{ns}_")) && n.ends_with(".log") {
                out.push_str(&format!("--- {n}\n"));
                out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        out
    }

    /// How its loop kept up so far.
    pub fn stats(&self) -> KubeletStats {
        self.stats.lock().expect("stats").clone()
    }

    /// The kubelet's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default()
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Ctx {
    kubeconfig: PathBuf,
    port: u16,
    ca_pem: String,
    dir: PathBuf,
    opts: KubeletOptions,
}

struct NodeState {
    uid: String,
    seen: Instant,
    booted: bool,
    images: BTreeSet<String>,
    pulls: BTreeMap<String, Instant>,
    last_beat: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    Pulling,
    Starting(Instant),
    Running,
    Stopping,
}

struct PodState {
    ns: String,
    name: String,
    node: String,
    stage: Stage,
    procs: Vec<(String, Proc)>,
    ip: String,
    start_time: String,
    started_at: String,
    restarts: i32,
    term: Option<(Instant, Duration)>,
    written: Option<&'static str>,
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What the kubelet shares with its concurrent API calls.
struct Sh {
    ctx: Ctx,
    client: kube::Client,
    log: std::sync::Mutex<std::fs::File>,
}

struct Kl {
    sh: Sh,
    nodes: HashMap<String, NodeState>,
    pods: HashMap<String, PodState>,
    dying: Vec<(Instant, Proc)>,
    next_ip: u32,
    stats: Arc<std::sync::Mutex<KubeletStats>>,
}

/// A node's API work in one tick.
#[derive(Clone, Copy, Debug)]
enum NodeAction {
    Boot,
    Beat,
}

/// A pod's API work in one tick.
#[derive(Clone, Copy, Debug)]
enum PodAction {
    Terminate,
    Status(&'static str),
    Start,
}

async fn run(
    ctx: Ctx,
    stats: Arc<std::sync::Mutex<KubeletStats>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    ready_tx: std::sync::mpsc::Sender<Result<(), Error>>,
) {
    let client = match client_from(&ctx.kubeconfig).await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready_tx.send(Err(e));
            return;
        }
    };
    let (nodes, nw) = reflector::store::<Node>();
    let (pods, pw) = reflector::store::<Pod>();
    let node_stream = reflector::reflector(
        nw,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff();
    let pod_stream = reflector::reflector(
        pw,
        watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff();
    tokio::spawn(node_stream.for_each(|_| async {}));
    tokio::spawn(pod_stream.for_each(|_| async {}));
    if nodes.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
        let _ = ready_tx.send(Err(Error::Timeout {
            what: "the kubelet's caches".into(),
            secs: 0,
        }));
        return;
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ctx.dir.join("kubelet.log"))
        .expect("kubelet log");
    let mut kl = Kl {
        sh: Sh {
            ctx,
            client,
            log: std::sync::Mutex::new(log),
        },
        nodes: HashMap::new(),
        pods: HashMap::new(),
        dying: Vec::new(),
        next_ip: 0,
        stats,
    };
    let _ = ready_tx.send(Ok(()));
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tick.tick() => {
                let t0 = Instant::now();
                kl.step(&nodes, &pods).await;
                kl.stats.lock().expect("stats").ticks.push(t0.elapsed());
            }
        }
    }
    for (_, p) in kl.pods.values_mut().flat_map(|p| p.procs.drain(..)) {
        let mut p = p;
        p.kill();
    }
    for (_, mut p) in kl.dying.drain(..) {
        p.kill();
    }
}

impl Kl {
    /// One tick: the nodes' state is brought up to date and their API calls made (at most
    /// `concurrency` nodes at once: a tick waits for its slowest calls, not for the sum of
    /// all of them; about 150 nodes and 600 pods in the cold-start bench), then the pods' the
    /// same way.
    async fn step(&mut self, nodes: &Store<Node>, pods: &Store<Pod>) {
        let now_i = Instant::now();
        let concurrency = self.sh.ctx.opts.concurrency.max(1);
        // Stopped processes of pods that are gone.
        self.dying.retain_mut(|(deadline, p)| {
            if p.try_wait().is_some() {
                return false;
            }
            if Instant::now() >= *deadline {
                p.kill();
                return false;
            }
            true
        });
        let nodes = nodes.state();
        let live: BTreeSet<String> = nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        self.nodes.retain(|n, _| live.contains(n));
        let mut node_todo: HashMap<String, NodeAction> = HashMap::new();
        for node in &nodes {
            if let Some((name, a)) = self.plan_node(node, now_i) {
                node_todo.insert(name, a);
            }
        }
        let sh = &self.sh;
        futures_util::stream::iter(
            self.nodes
                .iter_mut()
                .filter_map(|(name, st)| node_todo.remove(name).map(|a| (name, st, a))),
        )
        .for_each_concurrent(concurrency, |(name, st, a)| async move {
            match a {
                NodeAction::Boot => sh.boot(name, st).await,
                NodeAction::Beat => sh.beat(name, st).await,
            }
        })
        .await;
        let pods = pods.state();
        let present: BTreeSet<String> =
            pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|u| !present.contains(*u))
            .cloned()
            .collect();
        for uid in gone {
            if let Some(mut st) = self.pods.remove(&uid) {
                self.sh.say(format!(
                    "pod {}/{} ({uid}) is gone: stopping its containers",
                    st.ns, st.name
                ));
                for (_, p) in st.procs.drain(..) {
                    p.signal(libc::SIGTERM);
                    self.dying
                        .push((Instant::now() + Duration::from_secs(2), p));
                }
            }
        }
        let mut pod_todo: HashMap<String, (Arc<Pod>, PodAction)> = HashMap::new();
        for pod in pods {
            if let Some((uid, a)) = self.plan_pod(&pod, now_i) {
                pod_todo.insert(uid, (pod, a));
            }
        }
        let sh = &self.sh;
        futures_util::stream::iter(
            self.pods
                .iter_mut()
                .filter_map(|(uid, st)| pod_todo.remove(uid).map(|(p, a)| (uid, st, p, a))),
        )
        .for_each_concurrent(concurrency, |(uid, st, pod, a)| async move {
            match a {
                PodAction::Terminate => sh.terminate(&pod, uid, st).await,
                PodAction::Status(what) => sh.write_status(&pod, uid, st, what).await,
                PodAction::Start => match sh.start_containers(&pod, uid, st).await {
                    Ok(()) => {
                        st.stage = Stage::Running;
                        st.started_at = now();
                        sh.write_status(&pod, uid, st, "running").await;
                    }
                    Err(e) => {
                        sh.say(format!("pod {}/{}: cannot start yet: {e}", st.ns, st.name));
                        st.stage = Stage::Starting(Instant::now() + Duration::from_millis(500));
                    }
                },
            }
        })
        .await;
    }

    /// The node's state (new, booted, pulls done); its API work, if any.
    fn plan_node(&mut self, node: &Arc<Node>, now_i: Instant) -> Option<(String, NodeAction)> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let uid = node.metadata.uid.clone().unwrap_or_default();
        if node
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(NO_KUBELET_LABEL))
        {
            self.nodes.remove(&name);
            return None;
        }
        if self.nodes.get(&name).is_none_or(|s| s.uid != uid) {
            let images: BTreeSet<String> = node
                .status
                .as_ref()
                .and_then(|s| s.images.as_ref())
                .into_iter()
                .flatten()
                .flat_map(|i| i.names.clone().unwrap_or_default())
                .collect();
            let booted = ready(node);
            self.nodes.insert(
                name.clone(),
                NodeState {
                    uid,
                    seen: now_i,
                    booted,
                    images,
                    pulls: BTreeMap::new(),
                    last_beat: now_i,
                },
            );
            // Booted before we saw it: heartbeat at once (its labels too).
            return booted.then_some((name, NodeAction::Boot));
        }
        let boot_delay = self.sh.ctx.opts.boot_delay;
        let heartbeat = self.sh.ctx.opts.heartbeat;
        let st = self.nodes.get_mut(&name).expect("node state");
        let done: Vec<String> = st
            .pulls
            .iter()
            .filter(|(_, at)| **at <= now_i)
            .map(|(i, _)| i.clone())
            .collect();
        for i in &done {
            st.pulls.remove(i);
            st.images.insert(i.clone());
        }
        if !st.booted && now_i >= st.seen + boot_delay {
            st.booted = true;
            Some((name, NodeAction::Boot))
        } else if st.booted && (!done.is_empty() || now_i >= st.last_beat + heartbeat) {
            Some((name, NodeAction::Beat))
        } else {
            None
        }
    }

    /// The pod's state (new, pulls asked of its node, exited containers); its API work, if any.
    fn plan_pod(&mut self, pod: &Arc<Pod>, now_i: Instant) -> Option<(String, PodAction)> {
        let uid = pod.metadata.uid.clone()?;
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone())?;
        if !self.nodes.get(&node).is_some_and(|n| n.booted) {
            return None;
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        if !self.pods.contains_key(&uid) {
            self.next_ip += 1;
            let ip = format!("10.244.{}.{}", self.next_ip / 250, self.next_ip % 250 + 1);
            self.pods.insert(
                uid.clone(),
                PodState {
                    ns: ns.clone(),
                    name: name.clone(),
                    node: node.clone(),
                    stage: Stage::Pulling,
                    procs: Vec::new(),
                    ip,
                    start_time: now(),
                    started_at: String::new(),
                    restarts: 0,
                    term: None,
                    written: None,
                },
            );
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Some((uid, PodAction::Terminate));
        }
        let stage = self.pods[&uid].stage;
        let action = match stage {
            Stage::Pulling => {
                let spec = pod.spec.as_ref().expect("spec");
                let images: Vec<String> = spec
                    .init_containers
                    .iter()
                    .flatten()
                    .chain(spec.containers.iter())
                    .filter_map(|c| c.image.clone())
                    .collect();
                let opts = &self.sh.ctx.opts;
                let nst = self.nodes.get_mut(&node).expect("node");
                let mut missing = false;
                for i in images {
                    if !nst.images.contains(&i) {
                        missing = true;
                        let t = opts.pull_times.get(&i).copied().unwrap_or(opts.pull_time);
                        nst.pulls.entry(i).or_insert(now_i + t);
                    }
                }
                let st = self.pods.get_mut(&uid).expect("pod");
                if !missing {
                    st.stage = Stage::Starting(now_i + opts.start_delay);
                }
                (st.written != Some("pending")).then_some(PodAction::Status("pending"))
            }
            Stage::Starting(at) if now_i >= at => Some(PodAction::Start),
            Stage::Running => {
                let st = self.pods.get_mut(&uid).expect("pod");
                let mut exited = Vec::new();
                for (c, p) in st.procs.iter_mut() {
                    if let Some(s) = p.try_wait() {
                        exited.push(format!("{c}: {s}"));
                    }
                }
                if exited.is_empty() {
                    None
                } else {
                    // restartPolicy Always: start again after a second.
                    st.procs.clear();
                    st.restarts += 1;
                    st.stage = Stage::Starting(now_i + Duration::from_secs(1));
                    self.sh.say(format!(
                        "pod {ns}/{name}: exited ({}); restarting",
                        exited.join(", ")
                    ));
                    Some(PodAction::Status("restarting"))
                }
            }
            _ => None,
        };
        action.map(|a| (uid, a))
    }
}

impl Sh {
    fn say(&self, msg: impl AsRef<str>) {
        use std::io::Write;
        let mut log = self.log.lock().expect("kubelet log");
        let _ = writeln!(log, "{} {}", now_micro(), msg.as_ref());
    }

    fn node_status_patch(&self, name: &str, st: &NodeState, transition: bool) -> Value {
        let t = now();
        let cond = |type_: &str, status: &str, reason: &str| {
            let mut c = json!({"type": type_, "status": status, "reason": reason,
                "message": reason, "lastHeartbeatTime": t});
            if transition {
                c["lastTransitionTime"] = json!(t);
            }
            c
        };
        json!({"status": {
            "conditions": [
                cond("Ready", "True", "KubeletReady"),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "images": st.images.iter().map(|i| json!({"names": [i],
                "sizeBytes": self.ctx.opts.image_sizes.get(i).copied().unwrap_or(1_000_000)})).collect::<Vec<_>>(),
        }})
    }

    async fn boot(&self, name: &str, st: &mut NodeState) {
        let api = Api::<Node>::all(self.client.clone());
        let labels = json!({"metadata": {"labels": {"kubernetes.io/hostname": name}}});
        if let Err(e) = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&labels))
            .await
        {
            self.say(format!("node {name}: hostname label: {e}"));
        }
        let patch = self.node_status_patch(name, st, true);
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => self.say(format!("node {name}: Ready")),
            Err(e) => self.say(format!("node {name}: Ready: {e}")),
        }
        self.lease(name).await;
        st.last_beat = Instant::now();
    }

    async fn beat(&self, name: &str, st: &mut NodeState) {
        let api = Api::<Node>::all(self.client.clone());
        let patch = self.node_status_patch(name, st, false);
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            self.say(format!("node {name}: heartbeat: {e}"));
        }
        self.lease(name).await;
        st.last_beat = Instant::now();
    }

    async fn lease(&self, name: &str) {
        let api = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            self.client.clone(),
            "kube-node-lease",
        );
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()}
        });
        if let Err(e) = api
            .patch(
                name,
                &PatchParams::apply("realstack-kubelet").force(),
                &Patch::Apply(&lease),
            )
            .await
        {
            self.say(format!("node {name}: lease: {e}"));
        }
    }

    fn is_selfdestruct(&self, image: &str) -> bool {
        let repo = image.rsplit_once('@').map_or(image, |(r, _)| r);
        let repo = match repo.rsplit_once(':') {
            Some((r, tag)) if !tag.contains('/') => r,
            _ => repo,
        };
        self.ctx.opts.selfdestruct_bin.is_some() && repo == self.ctx.opts.selfdestruct_image
    }

    async fn terminate(&self, pod: &Arc<Pod>, uid: &str, st: &mut PodState) {
        let grace = Duration::from_secs(
            pod.metadata
                .deletion_grace_period_seconds
                .unwrap_or(30)
                .max(0) as u64,
        );
        if st.stage == Stage::Running || !st.procs.is_empty() {
            if st.term.is_none() {
                st.term = Some((Instant::now(), grace));
                for (_, p) in &st.procs {
                    p.signal(libc::SIGTERM);
                }
            }
            let (at, grace) = st.term.expect("term");
            let mut all_done = true;
            for (_, p) in st.procs.iter_mut() {
                if p.try_wait().is_none() {
                    if Instant::now() >= at + grace {
                        p.kill();
                    } else {
                        all_done = false;
                    }
                }
            }
            if !all_done {
                return;
            }
        }
        st.stage = Stage::Stopping;
        st.procs.clear();
        let (ns, name) = (st.ns.clone(), st.name.clone());
        let api = Api::<Pod>::namespaced(self.client.clone(), &ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => self.say(format!(
                "pod {ns}/{name} ({uid}): containers stopped; deleted"
            )),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => self.say(format!("pod {ns}/{name}: delete: {e}")),
        }
    }

    async fn write_status(&self, pod: &Arc<Pod>, uid: &str, st: &mut PodState, what: &'static str) {
        if st.written == Some(what) && what != "restarting" {
            return;
        }
        st.written = Some(what);
        let spec = pod.spec.as_ref().expect("spec");
        let running = what == "running";
        let t = now();
        let cond = |type_: &str, ok: bool| {
            json!({"type": type_, "status": if ok { "True" } else { "False" },
                   "lastProbeTime": null, "lastTransitionTime": t})
        };
        let cid = |c: &Container| format!("realstack://{uid}/{}", c.name);
        let containers: Vec<Value> = spec
            .containers
            .iter()
            .map(|c| {
                let state = if running {
                    json!({"running": {"startedAt": st.started_at}})
                } else {
                    json!({"waiting": {"reason": "ContainerCreating"}})
                };
                let mut s = json!({"name": c.name, "image": c.image, "imageID": "",
                    "ready": running, "started": running, "restartCount": st.restarts,
                    "state": state});
                if running {
                    s["containerID"] = json!(cid(c));
                    s["imageID"] =
                        json!(format!("{}@sha256:0", c.image.clone().unwrap_or_default()));
                }
                s
            })
            .collect();
        let inits: Vec<Value> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| {
                let state = if running {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed",
                        "startedAt": st.started_at, "finishedAt": st.started_at, "containerID": cid(c)}})
                } else {
                    json!({"waiting": {"reason": "PodInitializing"}})
                };
                json!({"name": c.name, "image": c.image, "imageID": "", "ready": running,
                    "restartCount": 0, "state": state})
            })
            .collect();
        let patch = json!({"status": {
            "phase": if running { "Running" } else { "Pending" },
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": st.ip, "podIPs": [{"ip": st.ip}],
            "startTime": st.start_time,
            "conditions": [
                cond("PodReadyToStartContainers", true),
                cond("Initialized", running),
                cond("Ready", running),
                cond("ContainersReady", running),
                cond("PodScheduled", true),
            ],
            "containerStatuses": containers,
            "initContainerStatuses": inits,
        }});
        let (ns, name) = (st.ns.clone(), st.name.clone());
        let api = Api::<Pod>::namespaced(self.client.clone(), &ns);
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            self.say(format!("pod {ns}/{name}: status {what}: {e}"));
        } else {
            self.say(format!("pod {ns}/{name} ({uid}) on {}: {what}", st.node));
        }
    }

    /// Prepares the volumes and env of each selfdestruct container and starts it.
    async fn start_containers(
        &self,
        pod: &Arc<Pod>,
        uid: &str,
        st: &mut PodState,
    ) -> Result<(), Error> {
        let spec = pod.spec.as_ref().expect("spec");
        let bin = match &self.ctx.opts.selfdestruct_bin {
            Some(b) => b.clone(),
            None => return Ok(()),
        };
        let ours: Vec<&Container> = spec
            .containers
            .iter()
            .filter(|c| c.image.as_deref().is_some_and(|i| self.is_selfdestruct(i)))
            .collect();
        if ours.is_empty() {
            return Ok(());
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pod_json = serde_json::to_value(pod.as_ref()).expect("pod json");
        let mut pod_json = pod_json;
        pod_json["status"]["podIP"] = json!(st.ip);
        pod_json["status"]["hostIP"] = json!("127.0.0.1");
        let pod_dir = self.ctx.dir.join("pods").join(uid);
        // Volumes: name -> host folder.
        let mut volumes: HashMap<String, PathBuf> = HashMap::new();
        for v in spec.volumes.iter().flatten() {
            let vdir = pod_dir.join("volumes").join(&v.name);
            std::fs::create_dir_all(&vdir).map_err(Error::io("volume folder"))?;
            if let Some(d) = &v.downward_api {
                for item in d.items.iter().flatten() {
                    if let Some(f) = &item.field_ref {
                        write_file(&vdir.join(&item.path), &field(&pod_json, &f.field_path))?;
                    }
                }
            }
            if let Some(p) = &v.projected {
                for src in p.sources.iter().flatten() {
                    if let Some(t) = &src.service_account_token {
                        let token = self
                            .token(pod, t.audience.clone(), t.expiration_seconds)
                            .await?;
                        write_file(&vdir.join(&t.path), &token)?;
                    }
                    if let Some(cm) = &src.config_map {
                        let data = self.config_map_data(&ns, &cm.name).await?;
                        for item in cm.items.iter().flatten() {
                            let value = if item.key == "ca.crt" && !data.contains_key("ca.crt") {
                                self.ctx.ca_pem.clone()
                            } else {
                                data.get(&item.key).cloned().unwrap_or_default()
                            };
                            write_file(&vdir.join(&item.path), &value)?;
                        }
                    }
                    if let Some(d) = &src.downward_api {
                        for item in d.items.iter().flatten() {
                            if let Some(f) = &item.field_ref {
                                write_file(
                                    &vdir.join(&item.path),
                                    &field(&pod_json, &f.field_path),
                                )?;
                            }
                        }
                    }
                }
            }
            // A configMap volume: its keys (or the items named) as files, read once at start.
            if let Some(cm) = &v.config_map {
                let data = self.config_map_data(&ns, &cm.name).await?;
                match &cm.items {
                    Some(items) => {
                        for item in items {
                            let value = data.get(&item.key).cloned().unwrap_or_default();
                            write_file(&vdir.join(&item.path), &value)?;
                        }
                    }
                    None => {
                        for (key, value) in &data {
                            write_file(&vdir.join(key), value)?;
                        }
                    }
                }
            }
            volumes.insert(v.name.clone(), vdir);
        }
        for c in ours {
            let mut mounts: Vec<(String, PathBuf)> = Vec::new();
            for m in c.volume_mounts.iter().flatten() {
                if let Some(h) = volumes.get(&m.name) {
                    let host = match &m.sub_path {
                        Some(s) if !s.is_empty() => h.join(s),
                        _ => h.clone(),
                    };
                    mounts.push((m.mount_path.clone(), host));
                }
            }
            let host_path = |p: &str| -> Option<String> {
                mounts.iter().find_map(|(m, h)| {
                    p.strip_prefix(m.as_str())
                        .filter(|r| r.is_empty() || r.starts_with('/'))
                        .map(|r| format!("{}{r}", h.display()))
                })
            };
            let empty = pod_dir.join("empty");
            // The image's entrypoint, `/selfdestruct`, is the agent's binary (`bin`, whatever
            // its file is called); a command naming another of the image's binaries
            // (`/selfdestruct-schedule`) runs the one beside it.
            let named = c.command.iter().flatten().next().map(Path::new);
            let bin = match named.and_then(Path::file_name) {
                Some(file) if file != "selfdestruct" => bin.with_file_name(file),
                _ => bin.clone(),
            };
            let mut cmd = std::process::Command::new(&bin);
            cmd.env_clear();
            cmd.env("PATH", "/usr/bin:/bin");
            cmd.env("HOME", &pod_dir);
            cmd.env("KUBERNETES_SERVICE_HOST", "127.0.0.1");
            cmd.env("KUBERNETES_SERVICE_PORT", self.ctx.port.to_string());
            cmd.env(
                "SELFDESTRUCT_SERVICE_ACCOUNT_DIR",
                host_path(SA_DIR).unwrap_or_else(|| empty.display().to_string()),
            );
            cmd.env(
                "SELFDESTRUCT_PODINFO_DIR",
                host_path(PODINFO_DIR).unwrap_or_else(|| empty.display().to_string()),
            );
            for e in c.env.iter().flatten() {
                let value = if let Some(v) = &e.value {
                    v.clone()
                } else if let Some(f) = e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()) {
                    field(&pod_json, &f.field_path)
                } else {
                    continue;
                };
                let value = if e.name.starts_with("SELFDESTRUCT_") && value.starts_with('/') {
                    host_path(&value).unwrap_or(value)
                } else {
                    value
                };
                cmd.env(&e.name, value);
            }
            // The command's own arguments, then the container's.
            let mut args: Vec<String> = Vec::new();
            if let Some(command) = &c.command {
                args.extend(command.iter().skip(1).cloned());
            }
            args.extend(c.args.iter().flatten().cloned());
            cmd.args(&args);
            cmd.current_dir(&pod_dir);
            let log = self
                .ctx
                .dir
                .join("pods")
                .join(format!("{ns}_{name}_{uid}_{}_{}.log", c.name, st.restarts));
            let p =
                Proc::spawn(&format!("{ns}/{name}/{}", c.name), cmd, &log).map_err(|source| {
                    Error::Spawn {
                        what: format!("{ns}/{name}"),
                        source,
                    }
                })?;
            self.say(format!(
                "pod {ns}/{name} ({uid}): started {} as pid {}",
                c.name,
                p.pid()
            ));
            st.procs.push((c.name.clone(), p));
        }
        Ok(())
    }

    /// The data of the ConfigMap `name` in `ns` (for a volume of the pod).
    async fn config_map_data(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, Error> {
        let m = Api::<ConfigMap>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .map_err(Error::kube(format!("configmap {name}")))?;
        Ok(m.data.unwrap_or_default())
    }

    /// A token bound to the pod, as a kubelet's projected token is.
    async fn token(
        &self,
        pod: &Pod,
        audience: Option<String>,
        expiration: Option<i64>,
    ) -> Result<String, Error> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let spec = pod.spec.as_ref().expect("spec");
        let sa = spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into());
        let api = Api::<ServiceAccount>::namespaced(self.client.clone(), &ns);
        let audiences: Vec<String> = audience.into_iter().filter(|a| !a.is_empty()).collect();
        let tr = json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {
                "audiences": audiences,
                "expirationSeconds": expiration.unwrap_or(3607),
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                    "name": pod.metadata.name, "uid": pod.metadata.uid}
            }
        });
        let answer: Value = api
            .create_subresource("token", &sa, &PostParams::default(), &tr)
            .await
            .map_err(Error::kube(format!("a token for {ns}/{sa}")))?;
        Ok(answer["status"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("volume folder"))?;
    }
    std::fs::write(path, text).map_err(Error::io(format!("write {}", path.display())))
}

/// A Downward API `fieldPath` of `pod` (as JSON): `metadata.name`, `spec.nodeName`,
/// `metadata.labels['k']`, ...
fn field(pod: &Value, path: &str) -> String {
    if let Some((map, key)) = path.split_once("['") {
        let key = key.trim_end_matches("']");
        let m: Vec<&str> = map.split('.').collect();
        let mut v = pod;
        for p in m {
            v = &v[p];
        }
        return v[key].as_str().unwrap_or_default().to_string();
    }
    let mut v = pod;
    for p in path.split('.') {
        v = &v[p];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Waits until the kubelet's node `name` is Ready (as the apiserver says).
pub async fn wait_ready(client: &kube::Client, name: &str, timeout: Duration) -> Result<(), Error> {
    let api = Api::<Node>::all(client.clone());
    wait::until(&format!("node {name} Ready"), timeout, || {
        let api = api.clone();
        async move {
            api.get_opt(name)
                .await
                .ok()
                .flatten()
                .filter(ready)
                .map(|_| ())
        }
    })
    .await
}
