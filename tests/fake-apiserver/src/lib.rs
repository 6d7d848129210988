//! A fake kube-apiserver for selfdestruct's tests: what only a fake can do. It serves
//! the objects a test puts in place (pods, nodes, PodDisruptionBudgets; the Events the
//! agent posts) over real HTTP/1.1 + JSON on `127.0.0.1` ([`FakeCluster::start`]) or
//! in-process on virtual time ([`FakeCluster::in_process`]), with lists paged and
//! watches as kube-apiserver serves them (replay, bookmarks, 410 after compaction,
//! `PartialObjectMetadata`), and the faults a real server cannot be made to show:
//! scripted answers ([`FakeCluster::fail_next`]), latency, outages, stalled and cut
//! watches. Nothing acts on its own: no controllers, scheduler, kubelet, RBAC or
//! admission (the real-stack tier, `tests/cluster.rs`, has those). An eviction or a
//! delete removes the pod at once (uid precondition checked); a PATCH or PUT answers
//! the object as stored. Answers are shaped after the captures of a real
//! kube-apiserver v1.36.2 in `fixtures/` (`tests/fixtures.rs` replays them).

#![warn(missing_docs)]

mod clock;
pub mod faults;
pub mod in_process;
pub mod objects;
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

use k8s_openapi::api::core::v1::{ContainerImage, Node, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;

pub use clock::Clock;
pub use faults::{FaultBody, FaultResponse, Matcher, RequestInfo};
pub use objects::{NodeBuilder, PodTemplate, realistic_images};
pub use status::Status;
pub use store::{Config, Counters, Kind, RecordedRequest};

use store::State;

/// State shared by the handle and the server.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Current resourceVersion; watchers wake on change.
    rv_tx: tokio_watch::Sender<u64>,
    /// `true` while watches are stalled.
    stall_tx: tokio_watch::Sender<bool>,
    /// (generation, mid_line): bumping the generation drops open watches.
    drop_tx: tokio_watch::Sender<(u64, bool)>,
    /// Bumping closes every open connection.
    kill_tx: tokio_watch::Sender<u64>,
    /// `true` during an outage.
    outage_tx: tokio_watch::Sender<bool>,
    /// The outage the accept loop has put in effect.
    applied_outage_tx: tokio_watch::Sender<bool>,
    shutdown_tx: tokio_watch::Sender<bool>,
    open_watches: AtomicUsize,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f`, then wakes the watchers if the resourceVersion moved.
    pub(crate) fn mutate<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let (r, rv) = {
            let mut st = self.lock();
            let r = f(&mut st);
            (r, st.rv)
        };
        self.rv_tx
            .send_if_modified(|v| std::mem::replace(v, rv) != rv);
        r
    }
}

/// A running fake cluster. Dropping it stops the server.
pub struct FakeCluster {
    shared: Arc<Shared>,
    /// `None` in-process ([`FakeCluster::in_process`]).
    addr: Option<SocketAddr>,
    thread: Option<JoinHandle<()>>,
}

impl FakeCluster {
    /// Starts with [`Config::default`] and returns once listening.
    pub fn start() -> Self {
        Self::start_with(Config::default())
    }

    /// Starts with the given configuration, on its own thread, and returns once listening.
    ///
    /// # Panics
    /// When no loopback port can be bound or the thread cannot be spawned.
    pub fn start_with(cfg: Config) -> Self {
        let shared = Self::shared(State::new(cfg));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_shared = shared.clone();
        let serve = move || {
            let failed = |e: std::io::Error| drop(ready_tx.send(Err(e.to_string())));
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return failed(e),
            };
            rt.block_on(async {
                let bound = TcpListener::bind("127.0.0.1:0").await;
                let (listener, addr) = match bound.and_then(|l| Ok((l.local_addr()?, l))) {
                    Ok((addr, l)) => (l, addr),
                    Err(e) => return failed(e),
                };
                let _ = ready_tx.send(Ok(addr));
                server::accept_loop(thread_shared, listener, addr).await;
            });
        };
        let thread = std::thread::Builder::new()
            .name("fake-apiserver".into())
            .spawn(serve)
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
        }
    }

    /// A fake served in-process through [`FakeCluster::service`] (no socket, no
    /// thread): with the runtime's time paused (`tokio::time::pause`), its timers and
    /// its wall clock ([`FakeCluster::clock`]) follow the virtual time.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn in_process(cfg: Config) -> Self {
        let mut state = State::new(cfg);
        state.clock = Clock::following_tokio();
        Self {
            shared: Self::shared(state),
            addr: None,
            thread: None,
        }
    }

    /// The fake as a `tower::Service` (in-process, no socket) sending `token` as the
    /// bearer token: for `kube::Client::new`.
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
            stall_tx: tokio_watch::Sender::new(false),
            drop_tx: tokio_watch::Sender::new((0, false)),
            kill_tx: tokio_watch::Sender::new(0),
            outage_tx: tokio_watch::Sender::new(false),
            applied_outage_tx: tokio_watch::Sender::new(false),
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

    /// A kubeconfig (YAML) for this cluster: server [`FakeCluster::url`], bearer
    /// `token`, context namespace `namespace`.
    pub fn kubeconfig_yaml(&self, token: &str, namespace: &str) -> String {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: fake-user\n  user:\n    token: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake-user\n    namespace: {}\ncurrent-context: fake\npreferences: {{}}\n",
            q(&self.url()),
            q(token),
            q(namespace)
        )
    }

    /// Writes [`FakeCluster::kubeconfig_yaml`] to `dir/kubeconfig`; its path.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, dir: &Path, token: &str, namespace: &str) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, self.kubeconfig_yaml(token, namespace))
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    fn mutate<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.shared.mutate(f)
    }

    /// Changes the configuration (affects new watches).
    pub fn configure(&self, f: impl FnOnce(&mut Config)) {
        f(&mut self.lock().cfg);
    }

    // ---- authentication ----

    /// Accepts a bearer token (requests with another get 401).
    pub fn add_token(&self, token: &str) {
        self.lock().tokens.insert(token.to_string());
    }

    /// Forgets a token (requests with it get 401).
    pub fn remove_token(&self, token: &str) {
        self.lock().tokens.remove(token);
    }

    // ---- nodes ----

    /// Adds a node (ADDED), created now unless the builder says when.
    pub fn add_node(&self, node: NodeBuilder) -> Node {
        self.mutate(|st| {
            let built = node.build_at(st.clock.wall());
            st.insert_node(built)
        })
    }

    /// Sets the Ready condition (with its transition time) and the
    /// `node.kubernetes.io/not-ready:NoSchedule` taint a NotReady node carries.
    pub fn set_node_ready(&self, name: &str, ready: bool) -> bool {
        let t = objects::time_of(self.clock().wall());
        self.modify_node(name, |n| {
            let status = n.status.get_or_insert_with(Default::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            conditions.retain(|c| c.type_ != "Ready");
            conditions.push(objects::ready_condition(ready, t));
            let spec = n.spec.get_or_insert_with(Default::default);
            let mut taints = spec.taints.take().unwrap_or_default();
            objects::set_not_ready_taint(&mut taints, !ready);
            spec.taints = (!taints.is_empty()).then_some(taints);
        })
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

    /// Applies `f` to a node (MODIFIED if anything changed).
    pub fn modify_node(&self, name: &str, f: impl FnOnce(&mut Node)) -> bool {
        self.mutate(|st| st.modify_node(name, f).is_some())
    }

    /// Removes a node (DELETED).
    pub fn remove_node(&self, name: &str) -> bool {
        self.mutate(|st| st.remove_node(name).is_some())
    }

    /// A node.
    pub fn get_node(&self, name: &str) -> Option<Node> {
        self.lock().nodes.get(name).cloned()
    }

    /// All nodes, by name.
    pub fn nodes(&self) -> Vec<Node> {
        self.lock().nodes.values().cloned().collect()
    }

    // ---- pods, budgets, events ----

    /// Adds a pod (namespace `default` when unset) as it is (ADDED), with a uid and a
    /// creation time unless it has them ([`PodTemplate::running_pod`] builds a running one).
    pub fn add_pod(&self, pod: Pod) -> Pod {
        self.mutate(|st| st.insert_pod(pod))
    }

    /// Removes a pod (DELETED), as a deletion that completed.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        self.mutate(|st| st.remove_pod(&(namespace.into(), name.into())).is_some())
    }

    /// Applies `f` to a pod (MODIFIED if anything changed).
    pub fn modify_pod(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Pod)) -> bool {
        self.mutate(|st| st.modify_pod(&(namespace.into(), name.into()), f).is_some())
    }

    /// Sets the pod's Ready and ContainersReady conditions.
    pub fn set_pod_ready(&self, namespace: &str, name: &str, ready: bool) -> bool {
        let status = if ready { "True" } else { "False" };
        self.modify_pod(namespace, name, |p| {
            let conditions = p
                .status
                .get_or_insert_with(Default::default)
                .conditions
                .get_or_insert_with(Vec::new);
            for c in conditions
                .iter_mut()
                .filter(|c| ["Ready", "ContainersReady"].contains(&c.type_.as_str()))
            {
                c.status = status.into();
            }
        })
    }

    /// A pod.
    pub fn get_pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.lock()
            .pods
            .get(&(namespace.into(), name.into()))
            .cloned()
    }

    /// Pods of a namespace ("" for all), by name.
    pub fn pods(&self, namespace: &str) -> Vec<Pod> {
        let st = self.lock();
        let pods = st
            .pods
            .iter()
            .filter(|(k, _)| namespace.is_empty() || k.0 == namespace);
        pods.map(|(_, p)| p.clone()).collect()
    }

    /// Adds a PodDisruptionBudget, served as it is (no status is computed).
    pub fn add_pdb(&self, mut pdb: PodDisruptionBudget) {
        self.mutate(|st| {
            st.new_meta(&mut pdb.metadata);
            let namespace = pdb.metadata.namespace.clone().unwrap_or_default();
            let name = pdb.metadata.name.clone().unwrap_or_default();
            st.pdbs.insert((namespace, name), pdb);
        });
    }

    /// The events.k8s.io/v1 Events created in a namespace ("" for all).
    pub fn events(&self, namespace: &str) -> Vec<Value> {
        let st = self.lock();
        let events = st
            .events
            .iter()
            .filter(|(k, _)| namespace.is_empty() || k.0 == namespace);
        events.map(|(_, e)| e.clone()).collect()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Drops the watch history: watches from an older resourceVersion get a 410
    /// Expired ERROR event.
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
        while !cond(self) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
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
                found = c.find_request(&pred);
                found.is_some()
            },
            timeout,
        );
        found
    }

    // ---- faults ----

    /// The next `times` requests matching `matcher` get `response` instead of being
    /// served (rules are tried in the order they were added).
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

    /// An outage: the listener and every open connection closed (in-process: every
    /// request refused); `false` re-opens the same port. Returns once it is in effect.
    pub fn set_outage(&self, on: bool) {
        self.shared.outage_tx.send_replace(on);
        if on {
            self.shared.kill_tx.send_modify(|g| *g += 1);
        }
        if self.addr.is_none() {
            return;
        }
        let rx = self.shared.applied_outage_tx.subscribe();
        let deadline = Instant::now() + Duration::from_secs(5);
        while *rx.borrow() != on && Instant::now() < deadline {
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
        self.shared
            .drop_tx
            .send_modify(|(g, mid)| (*g, *mid) = (*g + 1, false));
    }

    /// Like [`FakeCluster::drop_watches`], after sending half an event line.
    pub fn drop_watches_mid_line(&self) {
        self.shared
            .drop_tx
            .send_modify(|(g, mid)| (*g, *mid) = (*g + 1, true));
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.shared.shutdown_tx.send_replace(true);
        self.shared.kill_tx.send_modify(|g| *g += 1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
