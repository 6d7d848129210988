//! The objects as the test put them, the global resourceVersion, per-kind watch
//! history and the request log: everything behind the cluster's mutex.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

use crate::clock::Clock;
use crate::faults::FaultRule;
use crate::objects::Rng;

/// Tunables of a fake cluster.
#[derive(Clone, Debug)]
pub struct Config {
    /// Period of BOOKMARK events on watches with `allowWatchBookmarks=true`.
    pub bookmark_interval: Duration,
    /// Seed for uids and names (`None`: from the clock).
    pub seed: Option<u64>,
    /// Log `METHOD path?query status` per request to stderr.
    pub log_requests: bool,
    /// Watch timeout when the client sends no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// Watch history entries kept per kind before the oldest are compacted.
    pub history_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(1),
            seed: None,
            log_requests: false,
            default_watch_timeout: Duration::from_secs(1800),
            history_limit: 100_000,
        }
    }
}

/// One request as the fake saw and answered it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path without query.
    pub path: String,
    /// Raw query string ("" when none).
    pub query: String,
    /// Body parsed as JSON, if it was JSON.
    pub body: Option<Value>,
    /// `Content-Type` header.
    pub content_type: Option<String>,
    /// Bearer token.
    pub token: Option<String>,
    /// Status code answered (0: connection closed by a fault, or no answer yet).
    pub status: u16,
    /// Bytes of the response body sent so far (a watch's grow while it runs).
    pub bytes_sent: Arc<AtomicU64>,
    /// Whether the client asked for metadata only (`Accept:
    /// ...;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`).
    pub metadata_only: bool,
    /// Whether this was a watch.
    pub watch: bool,
    /// When the request arrived.
    pub at: Instant,
    /// When the request arrived (wall clock).
    pub time: SystemTime,
}

impl RecordedRequest {
    /// A decoded query parameter.
    pub fn query_param(&self, key: &str) -> Option<String> {
        crate::server::query_pairs(&self.query)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// `true` for `POST .../pods/{name}/eviction`.
    pub fn is_eviction(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/eviction")
    }

    /// `true` for a list or watch of Nodes that returns them in full (not as
    /// `PartialObjectMetadata`).
    pub fn is_full_node_read(&self) -> bool {
        self.method == "GET" && self.path.starts_with("/api/v1/nodes") && !self.metadata_only
    }

    /// `true` for `DELETE .../pods/{name}`.
    pub fn is_pod_delete(&self) -> bool {
        self.method == "DELETE" && self.path.contains("/pods/")
    }
}

/// Counters since start (or the last [`crate::FakeCluster::clear_requests`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests answered by an injected fault.
    pub faults_injected: u64,
}

/// A watchable resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// core/v1 Pod.
    Pod,
    /// core/v1 Node.
    Node,
}

impl Kind {
    /// `Pod` / `Node`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pod => "Pod",
            Self::Node => "Node",
        }
    }
}

/// Namespace and name (namespace empty for cluster-scoped objects).
pub(crate) type Key = (String, String);

/// One change in the history.
#[derive(Clone, Debug)]
pub(crate) struct HistEntry {
    pub rv: u64,
    pub ty: &'static str,
    pub obj: Arc<Value>,
    /// The object before this change (for selector transitions).
    pub prev: Option<Arc<Value>>,
    /// `obj` serialized.
    pub json: Arc<str>,
}

/// The history of one kind.
#[derive(Debug, Default)]
pub(crate) struct History {
    pub entries: VecDeque<HistEntry>,
    /// Changes with rv <= compacted are gone.
    pub compacted: u64,
    /// Latest JSON of each live object.
    pub current: HashMap<Key, Arc<Value>>,
}

impl History {
    /// Entries with rv > since, or `Err(oldest)` when some were compacted.
    pub fn since(&self, since: u64) -> Result<Vec<HistEntry>, u64> {
        if since < self.compacted {
            return Err(self.compacted);
        }
        let start = self.entries.partition_point(|e| e.rv <= since);
        Ok(self.entries.range(start..).cloned().collect())
    }
}

/// Everything behind the mutex.
pub(crate) struct State {
    pub cfg: Config,
    pub rv: u64,
    pub pods: BTreeMap<Key, Pod>,
    pub nodes: BTreeMap<String, Node>,
    /// events.k8s.io/v1 Events as created, by namespace and name.
    pub events: BTreeMap<Key, Value>,
    pub pdbs: BTreeMap<Key, PodDisruptionBudget>,
    pub pod_history: History,
    pub node_history: History,
    pub rng: Rng,
    /// The bearer tokens accepted (any other gets 401).
    pub tokens: HashSet<String>,
    pub requests: Vec<RecordedRequest>,
    pub counters: Counters,
    pub faults: Vec<FaultRule>,
    pub latency: Duration,
    /// Where `now` comes from.
    pub clock: Clock,
}

impl State {
    pub fn new(cfg: Config) -> Self {
        let rng = cfg.seed.map(Rng::new).unwrap_or_else(Rng::from_time);
        Self {
            clock: Clock::real(),
            cfg,
            // A fresh cluster is not at resourceVersion 0: leave room for the
            // objects a real cluster has before anything is added.
            rv: 100,
            pods: BTreeMap::new(),
            nodes: BTreeMap::new(),
            events: BTreeMap::new(),
            pdbs: BTreeMap::new(),
            pod_history: History::default(),
            node_history: History::default(),
            rng,
            tokens: HashSet::new(),
            requests: Vec::new(),
            counters: Counters::default(),
            faults: Vec::new(),
            latency: Duration::ZERO,
        }
    }

    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub fn history(&self, kind: Kind) -> &History {
        match kind {
            Kind::Pod => &self.pod_history,
            Kind::Node => &self.node_history,
        }
    }

    /// Stamps a new resourceVersion on `obj` and appends the change to the history.
    fn record<T: Serialize + Metadata<Ty = ObjectMeta>>(
        &mut self,
        kind: Kind,
        key: &Key,
        obj: &mut T,
        ty: &'static str,
    ) {
        let rv = self.next_rv();
        obj.metadata_mut().resource_version = Some(rv.to_string());
        let value = Arc::new(serde_json::to_value(&*obj).unwrap_or(Value::Null));
        let json: Arc<str> = Arc::from(value.to_string());
        let limit = self.cfg.history_limit.max(1);
        let hist = match kind {
            Kind::Pod => &mut self.pod_history,
            Kind::Node => &mut self.node_history,
        };
        let prev = if ty == "DELETED" {
            hist.current.remove(key)
        } else {
            hist.current.insert(key.clone(), value.clone())
        };
        hist.entries.push_back(HistEntry {
            rv,
            ty,
            obj: value,
            prev,
            json,
        });
        while hist.entries.len() > limit {
            if let Some(old) = hist.entries.pop_front() {
                hist.compacted = old.rv;
            }
        }
    }

    /// Drops all history: watches from an older resourceVersion get 410.
    pub fn compact(&mut self) {
        let rv = self.rv;
        for h in [&mut self.pod_history, &mut self.node_history] {
            h.entries.clear();
            h.compacted = rv;
        }
    }

    /// A uid and creation time for an object that has none.
    pub fn new_meta(&mut self, meta: &mut ObjectMeta) {
        if meta.uid.is_none() {
            meta.uid = Some(self.rng.uuid());
        }
        if meta.creation_timestamp.is_none() {
            meta.creation_timestamp = Some(crate::objects::time_of(self.clock.wall()));
        }
    }

    // ---- pods ----

    /// Adds (or replaces) a pod: ADDED.
    pub fn insert_pod(&mut self, mut pod: Pod) -> Pod {
        let namespace = pod
            .metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        let key = (
            namespace.clone(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        self.new_meta(&mut pod.metadata);
        self.record(Kind::Pod, &key, &mut pod, "ADDED");
        self.pods.insert(key, pod.clone());
        pod
    }

    /// Applies `f` to a pod and emits MODIFIED (only when something changed).
    pub fn modify_pod(&mut self, key: &Key, f: impl FnOnce(&mut Pod)) -> Option<Pod> {
        let mut pod = self.pods.get(key)?.clone();
        let before = pod.clone();
        f(&mut pod);
        if pod != before {
            self.record(Kind::Pod, key, &mut pod, "MODIFIED");
            self.pods.insert(key.clone(), pod.clone());
        }
        Some(pod)
    }

    /// Removes a pod: DELETED.
    pub fn remove_pod(&mut self, key: &Key) -> Option<Pod> {
        let mut pod = self.pods.remove(key)?;
        self.record(Kind::Pod, key, &mut pod, "DELETED");
        Some(pod)
    }

    // ---- nodes ----

    /// Adds a node: ADDED.
    pub fn insert_node(&mut self, mut node: Node) -> Node {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.new_meta(&mut node.metadata);
        self.record(
            Kind::Node,
            &(String::new(), name.clone()),
            &mut node,
            "ADDED",
        );
        self.nodes.insert(name, node.clone());
        node
    }

    /// Applies `f` to a node and emits MODIFIED (only when something changed).
    pub fn modify_node(&mut self, name: &str, f: impl FnOnce(&mut Node)) -> Option<Node> {
        let mut node = self.nodes.get(name)?.clone();
        let before = node.clone();
        f(&mut node);
        if node != before {
            let key = (String::new(), name.to_string());
            self.record(Kind::Node, &key, &mut node, "MODIFIED");
            self.nodes.insert(name.to_string(), node.clone());
        }
        Some(node)
    }

    /// Removes a node: DELETED (its pods stay: the test removes them if it means to).
    pub fn remove_node(&mut self, name: &str) -> Option<Node> {
        let mut node = self.nodes.remove(name)?;
        let key = (String::new(), name.to_string());
        self.record(Kind::Node, &key, &mut node, "DELETED");
        Some(node)
    }
}
