//! A fake kube-apiserver for selfdestruct's tests.
//!
//! [`FakeCluster::start`] serves real HTTP/1.1 + JSON on `127.0.0.1` (random
//! port) from its own thread, so it can be used from plain synchronous tests:
//! pods, nodes, events, the eviction subresource, PodDisruptionBudgets,
//! watches (history replay, bookmarks, 410 after compaction), bearer-token RBAC,
//! the own-pod-only admission policy, a StatefulSet controller that re-creates
//! deleted pods under the same name with a new uid, a default-scheduler
//! emulation and fault injection. Responses follow captures from a real
//! kube-apiserver v1.36 (see `fixtures/`).
//!
//! ```no_run
//! use fake_apiserver::{FakeCluster, NodeBuilder, PodTemplate, Subject};
//! let cluster = FakeCluster::start();
//! cluster.add_node(NodeBuilder::new("node-a").cpu("8").memory("32Gi"));
//! cluster.add_statefulset("placeholders", "placeholder", 3,
//!     PodTemplate::placeholder("placeholder", "1", "1Gi"));
//! cluster.add_pdb("placeholders", "placeholder", "app.kubernetes.io/instance=placeholder", 1);
//! cluster.add_token("t0", Subject::placeholder_agent("placeholders", "placeholder").bound_to("placeholder-0"));
//! let kubeconfig = cluster.write_kubeconfig(std::path::Path::new("/tmp"), "t0", "placeholders");
//! # let _ = kubeconfig;
//! ```

#![warn(missing_docs)]

pub mod client;
mod clock;
mod controllers;
pub mod faults;
pub mod in_process;
pub mod objects;
mod patch;
pub mod quantity;
pub mod rbac;
pub mod selector;
mod server;
pub mod status;
mod store;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerImage, Event, Node, Pod, Taint};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch as tokio_watch};

pub use clock::Clock;
pub use faults::{FaultBody, FaultResponse, Matcher, OutageMode, RequestInfo};
pub use objects::{NodeBuilder, PodTemplate, realistic_images};
pub use rbac::{Rule, Subject};
pub use selector::Selector;
pub use status::Status;
pub use store::{Config, Counters, Kind, RecordedRequest};

use controllers::DeleteOpts;
use store::{Action, State};

/// State shared by the handle, the server and the controller task.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Current resourceVersion; watchers wake on change.
    rv_tx: tokio_watch::Sender<u64>,
    /// Wakes the controller task (timers may have changed).
    wake: Notify,
    /// `true` while watches are stalled.
    stall_tx: tokio_watch::Sender<bool>,
    /// (generation, mid_line): bumping the generation drops open watches.
    drop_tx: tokio_watch::Sender<(u64, bool)>,
    /// Bumping closes every open connection.
    kill_tx: tokio_watch::Sender<u64>,
    /// `Some` during an outage.
    outage_tx: tokio_watch::Sender<Option<OutageMode>>,
    /// The outage mode the accept loop has put in effect.
    applied_outage_tx: tokio_watch::Sender<Option<OutageMode>>,
    shutdown_tx: tokio_watch::Sender<bool>,
    open_watches: AtomicUsize,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f`, then the controllers, then notifies watchers and the controller task.
    pub(crate) fn mutate<R>(&self, f: impl FnOnce(&mut State, Instant) -> R) -> R {
        let r = self.mutate_quiet(f);
        self.wake.notify_one();
        r
    }

    fn mutate_quiet<R>(&self, f: impl FnOnce(&mut State, Instant) -> R) -> R {
        let (r, rv) = {
            let mut st = self.lock();
            let now = st.clock.instant();
            let r = f(&mut st, now);
            st.reconcile(now);
            (r, st.rv)
        };
        self.rv_tx.send_if_modified(|v| {
            if *v == rv {
                false
            } else {
                *v = rv;
                true
            }
        });
        r
    }
}

async fn controller_loop(shared: Arc<Shared>) {
    loop {
        let next = shared.mutate_quiet(|st, _| st.next_deadline());
        match next {
            Some(t) => {
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(t)) => {}
                }
            }
            None => shared.wake.notified().await,
        }
    }
}

/// A running fake cluster. Dropping it stops the server.
pub struct FakeCluster {
    shared: Arc<Shared>,
    /// `None` in-process ([`FakeCluster::in_process`]).
    addr: Option<SocketAddr>,
    thread: Option<JoinHandle<()>>,
    /// In-process: the controller task on the caller's runtime.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FakeCluster {
    /// Starts with [`Config::default`] and returns once listening.
    pub fn start() -> Self {
        Self::start_with(Config::default())
    }

    /// Starts with the given configuration and returns once listening.
    ///
    /// # Panics
    /// When no loopback port can be bound or the thread cannot be spawned.
    pub fn start_with(cfg: Config) -> Self {
        let shared = Self::shared(State::new(cfg));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fake-apiserver".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match TcpListener::bind("127.0.0.1:0").await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let addr = match listener.local_addr() {
                        Ok(a) => a,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(addr));
                    tokio::spawn(controller_loop(thread_shared.clone()));
                    server::accept_loop(thread_shared, listener, addr).await;
                });
            })
            .expect("spawn the fake-apiserver thread");
        let addr = match ready_rx.recv() {
            Ok(Ok(addr)) => addr,
            Ok(Err(e)) => panic!("fake-apiserver failed to start: {e}"),
            Err(_) => panic!("fake-apiserver thread died during start"),
        };
        Self {
            shared,
            addr: Some(addr),
            thread: Some(thread),
            task: None,
        }
    }

    /// A fake served in-process, on the caller's tokio runtime, through
    /// [`FakeCluster::service`] (no socket, no thread): with the runtime's time
    /// paused (`tokio::time::pause`), its timers and its wall clock
    /// ([`FakeCluster::clock`]) follow the virtual time.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn in_process(cfg: Config) -> Self {
        let mut state = State::new(cfg);
        state.clock = Clock::following_tokio();
        let shared = Self::shared(state);
        let task = tokio::spawn(controller_loop(shared.clone()));
        shared.applied_outage_tx.send_replace(None);
        Self {
            shared,
            addr: None,
            thread: None,
            task: Some(task),
        }
    }

    /// The fake as a `tower::Service` (in-process, no socket) sending `token`
    /// as the bearer token: for `kube::Client::new`.
    pub fn service(&self, token: Option<&str>) -> in_process::Service {
        in_process::Service {
            shared: self.shared.clone(),
            token: token.map(str::to_string),
        }
    }

    /// The fake's clock.
    pub fn clock(&self) -> Clock {
        self.lock().clock
    }

    fn shared(state: State) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(state),
            rv_tx: tokio_watch::Sender::new(0),
            wake: Notify::new(),
            stall_tx: tokio_watch::Sender::new(false),
            drop_tx: tokio_watch::Sender::new((0, false)),
            kill_tx: tokio_watch::Sender::new(0),
            outage_tx: tokio_watch::Sender::new(None),
            applied_outage_tx: tokio_watch::Sender::new(None),
            shutdown_tx: tokio_watch::Sender::new(false),
            open_watches: AtomicUsize::new(0),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The listening address.
    ///
    /// # Panics
    /// In-process ([`FakeCluster::in_process`]): there is no socket.
    pub fn addr(&self) -> SocketAddr {
        self.addr
            .expect("an in-process fake has no address: use FakeCluster::service")
    }

    /// A kubeconfig (YAML) for this cluster: server = [`FakeCluster::url`],
    /// bearer `token`, context namespace `namespace`, current-context set.
    pub fn kubeconfig_yaml(&self, token: &str, namespace: &str) -> String {
        let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: fake-user\n  user:\n    token: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake-user\n    namespace: {}\ncurrent-context: fake\npreferences: {{}}\n",
            q(&self.url()),
            q(token),
            q(namespace)
        )
    }

    /// Writes [`FakeCluster::kubeconfig_yaml`] to `dir/kubeconfig` and returns the path.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, dir: &Path, token: &str, namespace: &str) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, self.kubeconfig_yaml(token, namespace))
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// A small blocking HTTP client for this cluster.
    pub fn client(&self, token: Option<&str>) -> client::Client {
        client::Client::new(self.addr(), token)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    fn mutate<R>(&self, f: impl FnOnce(&mut State, Instant) -> R) -> R {
        self.shared.mutate(f)
    }

    // ---- configuration ----

    /// Current configuration.
    pub fn config(&self) -> Config {
        self.lock().cfg.clone()
    }

    /// Changes the configuration (affects new timers and new watches).
    pub fn configure(&self, f: impl FnOnce(&mut Config)) {
        f(&mut self.lock().cfg);
    }

    /// Bookmark period for new watches.
    pub fn set_bookmark_interval(&self, d: Duration) {
        self.configure(|c| c.bookmark_interval = d);
    }

    /// StatefulSet re-creation delay.
    pub fn set_recreate_delay(&self, d: Duration) {
        self.configure(|c| c.recreate_delay = d);
    }

    /// Bind-to-Running delay.
    pub fn set_start_delay(&self, d: Duration) {
        self.configure(|c| c.start_delay = d);
    }

    /// Upper bound of graceful termination.
    pub fn set_termination_delay(&self, d: Duration) {
        self.configure(|c| c.termination_delay = d);
    }

    /// How long an eviction stays in a PDB's disruptedPods.
    pub fn set_pdb_disruption_expiry(&self, d: Duration) {
        self.configure(|c| c.pdb_disruption_expiry = d);
    }

    /// Logs one line per request to stderr.
    pub fn set_log_requests(&self, on: bool) {
        self.configure(|c| c.log_requests = on);
    }

    // ---- authentication and admission ----

    /// Registers a bearer token.
    pub fn add_token(&self, token: &str, subject: Subject) {
        self.lock().tokens.insert(token.to_string(), subject);
    }

    /// Forgets a token (requests with it get 401).
    pub fn remove_token(&self, token: &str) {
        self.lock().tokens.remove(token);
    }

    /// Turns the own-pod-only ValidatingAdmissionPolicy on or off: a service
    /// account may then delete or evict only the pod its token is bound to
    /// (422 Invalid otherwise, also for tokens bound to no pod).
    pub fn own_pod_only_policy(&self, on: bool) {
        self.lock().own_pod_only = on;
    }

    // ---- nodes ----

    /// Adds a node (ADDED).
    pub fn add_node(&self, node: NodeBuilder) -> Node {
        self.mutate(|st, _| st.add_node(&node))
    }

    /// Adds a node after `delay`.
    pub fn add_node_after(&self, node: NodeBuilder, delay: Duration) {
        self.mutate(|st, now| st.add_timer(now + delay, Action::AddNode(Box::new(node))));
    }

    /// Sets the Ready condition (with lastTransitionTime) and adds/removes the
    /// `node.kubernetes.io/not-ready:NoSchedule` taint (two MODIFIED events).
    pub fn set_node_ready(&self, name: &str, ready: bool) -> bool {
        self.mutate(|st, _| st.set_node_ready(name, ready))
    }

    /// [`FakeCluster::set_node_ready`] after `delay`.
    pub fn set_node_ready_after(&self, name: &str, ready: bool, delay: Duration) {
        let name = name.to_string();
        self.mutate(|st, now| st.add_timer(now + delay, Action::SetNodeReady { name, ready }));
    }

    /// Replaces `status.images`.
    pub fn set_node_images(&self, name: &str, images: Vec<ContainerImage>) -> bool {
        self.modify_node(name, |n| {
            n.status.get_or_insert_with(Default::default).images =
                (!images.is_empty()).then_some(images);
        })
    }

    /// Replaces `spec.taints`.
    pub fn set_node_taints(&self, name: &str, taints: Vec<Taint>) -> bool {
        self.modify_node(name, |n| {
            n.spec.get_or_insert_with(Default::default).taints =
                (!taints.is_empty()).then_some(taints);
        })
    }

    /// Cordons or uncordons.
    pub fn set_node_unschedulable(&self, name: &str, unschedulable: bool) -> bool {
        self.modify_node(name, |n| {
            n.spec.get_or_insert_with(Default::default).unschedulable =
                unschedulable.then_some(true);
        })
    }

    /// Applies `f` to a node (MODIFIED if anything changed).
    pub fn modify_node(&self, name: &str, f: impl FnOnce(&mut Node)) -> bool {
        self.mutate(|st, _| st.modify_node(name, f).is_some())
    }

    /// Removes a node (DELETED); its pods are removed too.
    pub fn remove_node(&self, name: &str) -> bool {
        self.mutate(|st, now| st.remove_node(name, now).is_some())
    }

    /// A node.
    pub fn get_node(&self, name: &str) -> Option<Node> {
        self.lock().nodes.get(name).cloned()
    }

    /// All nodes, by name.
    pub fn nodes(&self) -> Vec<Node> {
        self.lock().nodes.values().cloned().collect()
    }

    // ---- workloads ----

    /// Adds a StatefulSet (Parallel pod management): pods `name-0..name-{n-1}`
    /// are created now; a deleted pod comes back under the same name with a
    /// new uid after the re-creation delay.
    pub fn add_statefulset(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
        template: PodTemplate,
    ) {
        self.mutate(|st, now| st.add_statefulset(namespace, name, replicas, template, now));
    }

    /// Changes a StatefulSet's replicas.
    pub fn scale_statefulset(&self, namespace: &str, name: &str, replicas: i32) -> bool {
        self.mutate(|st, now| st.scale_statefulset(namespace, name, replicas, now))
    }

    /// Adds a bare pod (namespace `default` when unset). Without a nodeName it
    /// is scheduled; with one, the kubelet starts it.
    pub fn add_pod(&self, pod: Pod) -> Pod {
        self.mutate(|st, now| st.add_pod(pod, now))
    }

    /// Deletes a pod like `kubectl delete pod` (graceful, no preconditions).
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        self.mutate(|st, now| {
            st.delete_pod(
                &(namespace.into(), name.into()),
                &DeleteOpts::default(),
                now,
            )
            .is_ok()
        })
    }

    /// Applies `f` to a pod (MODIFIED if anything changed).
    pub fn modify_pod(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Pod)) -> bool {
        self.mutate(|st, _| st.modify_pod(&(namespace.into(), name.into()), f).is_some())
    }

    /// Flips the pod's Ready / ContainersReady conditions.
    pub fn set_pod_ready(&self, namespace: &str, name: &str, ready: bool) -> bool {
        self.mutate(|st, _| st.set_pod_ready(&(namespace.into(), name.into()), ready))
    }

    /// A pod.
    pub fn get_pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.lock()
            .pods
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Pods of a namespace ("" for all), by name.
    pub fn pods(&self, namespace: &str) -> Vec<Pod> {
        self.lock()
            .pods
            .iter()
            .filter(|(k, _)| namespace.is_empty() || k.0 == namespace)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Whether `n` pods of the namespace are Running and Ready within `timeout`.
    pub fn wait_pods_ready(&self, namespace: &str, n: usize, timeout: Duration) -> bool {
        self.wait_for(
            |c| {
                c.pods(namespace)
                    .iter()
                    .filter(|p| {
                        controllers::pod_ready(p) && p.metadata.deletion_timestamp.is_none()
                    })
                    .count()
                    >= n
            },
            timeout,
        )
    }

    /// Adds a policy/v1 PodDisruptionBudget with `maxUnavailable`, selecting
    /// pods by a label selector string (`app=x,tier in (a,b)`).
    ///
    /// # Panics
    /// On an invalid selector.
    pub fn add_pdb(&self, namespace: &str, name: &str, selector: &str, max_unavailable: i32) {
        let sel = Selector::parse(selector)
            .unwrap_or_else(|e| panic!("add_pdb: bad selector {selector:?}: {e}"));
        self.add_pdb_object(PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector: Some(sel.to_label_selector()),
                max_unavailable: Some(IntOrString::Int(max_unavailable)),
                ..PodDisruptionBudgetSpec::default()
            }),
            status: None,
        });
    }

    /// Adds any PodDisruptionBudget (minAvailable or maxUnavailable, int or %).
    ///
    /// # Panics
    /// On an invalid selector.
    pub fn add_pdb_object(&self, pdb: PodDisruptionBudget) {
        self.mutate(|st, _| st.add_pdb(pdb))
            .unwrap_or_else(|e| panic!("add_pdb_object: {e}"));
    }

    /// A PDB with its current status.
    pub fn get_pdb(&self, namespace: &str, name: &str) -> Option<PodDisruptionBudget> {
        let st = self.lock();
        st.pdb_object(&(namespace.into(), name.into()), st.clock.instant())
    }

    /// Events created in a namespace ("" for all).
    pub fn events(&self, namespace: &str) -> Vec<Event> {
        self.lock()
            .events
            .iter()
            .filter(|(k, _)| namespace.is_empty() || k.0 == namespace)
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Drops the watch history: watches from an older resourceVersion get a
    /// 410 Expired ERROR event.
    pub fn compact(&self) {
        self.lock().compact();
    }

    // ---- requests ----

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// Forgets recorded requests and resets the counters.
    pub fn clear_requests(&self) {
        let mut st = self.lock();
        st.requests.clear();
        st.counters = Counters::default();
    }

    /// Counters.
    pub fn counters(&self) -> Counters {
        self.lock().counters.clone()
    }

    /// The first recorded request matching `pred`.
    pub fn find_request(&self, pred: impl Fn(&RecordedRequest) -> bool) -> Option<RecordedRequest> {
        self.lock().requests.iter().find(|r| pred(r)).cloned()
    }

    /// Number of recorded requests matching `pred`.
    pub fn count_requests(&self, pred: impl Fn(&RecordedRequest) -> bool) -> usize {
        self.lock().requests.iter().filter(|r| pred(r)).count()
    }

    /// Watches currently streaming.
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::SeqCst)
    }

    /// Polls `cond` every 5 ms until it holds (true) or `timeout` passes (false).
    pub fn wait_for(&self, mut cond: impl FnMut(&FakeCluster) -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for a recorded request matching `pred` (including earlier ones).
    pub fn wait_for_request(
        &self,
        pred: impl Fn(&RecordedRequest) -> bool,
        timeout: Duration,
    ) -> Option<RecordedRequest> {
        let mut found = None;
        self.wait_for(
            |c| {
                found = c.lock().requests.iter().find(|r| pred(r)).cloned();
                found.is_some()
            },
            timeout,
        );
        found
    }

    // ---- faults ----

    /// The next `times` requests matching `matcher` get `response` instead of
    /// being served (rules are tried in the order they were added).
    pub fn fail_next(&self, matcher: Matcher, response: FaultResponse, times: usize) {
        self.lock().faults.push(faults::FaultRule {
            matcher,
            response,
            remaining: times,
        });
    }

    /// Removes all pending faults.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Adds latency before every response.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// [`OutageMode::Refuse`]: closes the listener and every open connection;
    /// `false` re-opens the same port. Returns once the change is in effect.
    pub fn set_outage(&self, on: bool) {
        self.set_outage_mode(on.then_some(OutageMode::Refuse));
    }

    /// Starts an outage of a given kind (`None` ends it).
    pub fn set_outage_mode(&self, mode: Option<OutageMode>) {
        self.shared.outage_tx.send_replace(mode);
        if mode.is_some() {
            self.shared.kill_tx.send_modify(|g| *g += 1);
        }
        if self.addr.is_none() {
            // In-process, requests look at the outage itself.
            self.shared.applied_outage_tx.send_replace(mode);
            return;
        }
        let rx = self.shared.applied_outage_tx.subscribe();
        let deadline = Instant::now() + Duration::from_secs(5);
        while *rx.borrow() != mode && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Open and new watches stop sending anything (no events, no bookmarks, no
    /// timeout) while the connection stays open.
    pub fn stall_watches(&self) {
        self.shared.stall_tx.send_replace(true);
    }

    /// Ends [`FakeCluster::stall_watches`].
    pub fn resume_watches(&self) {
        self.shared.stall_tx.send_replace(false);
    }

    /// Aborts every open watch stream (connection closed without the final chunk).
    pub fn drop_watches(&self) {
        self.shared.drop_tx.send_modify(|(g, mid)| {
            *g += 1;
            *mid = false;
        });
    }

    /// Like [`FakeCluster::drop_watches`], after sending half an event line.
    pub fn drop_watches_mid_line(&self) {
        self.shared.drop_tx.send_modify(|(g, mid)| {
            *g += 1;
            *mid = true;
        });
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.shared.shutdown_tx.send_replace(true);
        self.shared.kill_tx.send_modify(|g| *g += 1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}
