//! The agent: the thin I/O shell around [`evaluate`] (the decision, with the
//! nodes found full on the way). One loop, one `select!` over signals, the next
//! wake-up, and the node and sibling watches.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use crate::access::{Access, AccessError, Discovered};
use crate::api::Mode;
use crate::api::{PodApi, outcome_of, rbac_hint};
use crate::candidates::{Candidates, Touched, Wake};
use crate::client::{ClientError, client_retrying};
use crate::clock::Clock;
use crate::config::{Config, Siblings};
use crate::error::{Error, Result};
use crate::identity::{self, Source};
use crate::logging::Chain;
use crate::signals::{Signals, Stop, pause, stop};
use crate::watch::{self, Target, Update};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::events::EventType;
use selfdestruct_decision::backoff::Backoff;
use selfdestruct_decision::duration::format as fmt_duration;
use selfdestruct_decision::model::{NodeSummary, OwnPod, Sibling};
use selfdestruct_decision::selector::Selector;
use selfdestruct_decision::{
    Decision, Evaluation, FullNode, Hold, Memory, Outcome, Snapshot, Trigger, evaluate,
};

/// Runs until SIGTERM/SIGINT (exit code 0) or a configuration error (2), on the
/// API `access` that `main` discovered (a named kubeconfig that cannot be used
/// was refused there).
pub(crate) async fn run(cfg: Config, access: Discovered, signals: Signals) -> Result {
    let mut signals = Stop::Signals(signals);
    let ready = prepare(&cfg, access, &mut signals).await;
    finish(ready, cfg, signals).await
}

/// [`run`] in-process (the tests' virtual-time tier): on `client`, reading the time
/// from `clock`, until `stop` fires; only these three differ from [`run`].
pub async fn run_on(client: kube::Client, cfg: Config, clock: Clock, mut stop: Stop) -> Result {
    let ready = prepare_on(&cfg, &mut stop, ApiSource::Given(client), clock).await;
    finish(ready, cfg, stop).await
}

async fn finish(ready: Result<Ready, NotReady>, cfg: Config, mut signals: Stop) -> Result {
    match ready {
        Ok(ready) => ready.decision_loop(cfg, &mut signals).await,
        Err(NotReady::NoApi(why)) => {
            info!(reason = %why, "no API access: running as a plain pause container");
            pause(signals.terminated()).await
        }
        Err(NotReady::NoClient(e)) => {
            error!(error = %Chain(&e), "cannot build an API client from the kubeconfig: running as a plain pause container");
            pause(signals.terminated()).await
        }
        Err(NotReady::Stopped(sig)) => stop(sig),
        Err(NotReady::BadKubeconfig(e)) => Err(e.into()),
        Err(NotReady::Fatal) => Err(Error::OwnPod),
        Err(NotReady::NotOurs) => pause(signals.terminated()).await,
    }
}

// --- start-up, shared by `run` and the entrypoint wrapper (src/wrapper.rs) ---

/// Why [`prepare`] found no own pod to act on.
pub(crate) enum NotReady {
    /// No API access at all (no kubeconfig, no service-account token).
    NoApi(AccessError),
    /// Access that no client can be built from.
    NoClient(ClientError),
    /// No client can be built from the kubeconfig named by `KUBECONFIG` or
    /// `--kubeconfig` (a configuration error).
    BadKubeconfig(ClientError),
    /// `stop` fired first (SIGTERM/SIGINT): the signal's name.
    Stopped(&'static str),
    /// The own pod cannot be identified; already logged ([`Error::OwnPod`]).
    Fatal,
    /// The pod under the own name is a successor, not ours (already logged; see
    /// [`identity::NotOurs`]). Nothing may be done to it.
    NotOurs,
}

/// Where [`prepare`]'s API client comes from.
enum ApiSource {
    /// A client given (in-process tests).
    Given(kube::Client),
    /// The access `main` discovered, to build one from.
    Discovered(Box<Access>),
}

/// The own pod, read once, with an API client bound to it: what the decision
/// loop needs to start (and what the wrapper's delete on exit needs).
#[derive(Clone)]
pub(crate) struct Ready {
    pub(crate) api: PodApi,
    pub(crate) own: OwnPod,
    clock: Clock,
}

/// Builds a client on `access`, finds the own identity and reads the own pod
/// (retrying), unless `stop` fires first.
pub(crate) async fn prepare(
    cfg: &Config,
    access: Result<Access, AccessError>,
    stop: &mut Stop,
) -> Result<Ready, NotReady> {
    let access = match access {
        Ok(access) => access,
        Err(e) if e.is_missing() => return Err(NotReady::NoApi(e)),
        Err(e) => return Err(NotReady::NoClient(e.into())),
    };
    prepare_on(
        cfg,
        stop,
        ApiSource::Discovered(Box::new(access)),
        Clock::system(),
    )
    .await
}

/// [`prepare`] on a client given (in-process) or built from the discovered access.
async fn prepare_on(
    cfg: &Config,
    stop: &mut Stop,
    source: ApiSource,
    clock: Clock,
) -> Result<Ready, NotReady> {
    let process_start = clock.now();
    let namespace_hint = match &source {
        ApiSource::Discovered(access) => access.namespace.as_deref(),
        ApiSource::Given(client) => Some(client.default_namespace()),
    };
    let id = identity::resolve(&cfg.shared.identity, identity::hostname(), namespace_hint)
        .map_err(|e| {
            error!("{e}");
            NotReady::Fatal
        })?;
    let client = match source {
        ApiSource::Given(client) => client,
        ApiSource::Discovered(access) => {
            debug!(source = %access.source, server = %access.config.cluster_url, "API access");
            let built = tokio::select! {
                sig = stop.terminated() => return Err(NotReady::Stopped(sig)),
                built = client_retrying(&access, &id.namespace) => built,
            };
            built.map_err(|e| {
                if access.named {
                    NotReady::BadKubeconfig(e)
                } else {
                    NotReady::NoClient(e)
                }
            })?
        }
    };
    let api = PodApi::new(client, &id.namespace, &id.name);
    let pod = tokio::select! {
        sig = stop.terminated() => return Err(NotReady::Stopped(sig)),
        pod = fetch_own_pod(&api, &id) => pod,
    };
    let pod = pod.ok_or(NotReady::Fatal)?;
    let mut own = id.own_pod(&pod, process_start).map_err(|e| {
        warn!(pod = %id.name, "{e}");
        NotReady::NotOurs
    })?;
    clamp_future_start(&mut own, clock.now());
    Ok(Ready { api, own, clock })
}

/// A start time in the future (a node clock ahead, a bad answer) would put off
/// the lifetime and the minimum age by as much: it is taken as `now`, with one
/// warning. The same for the time the pod was scheduled.
fn clamp_future_start(own: &mut OwnPod, now: SystemTime) {
    // How far `t` is ahead of `now`, setting it to `now` if it is.
    let clamp = |t: &mut Option<SystemTime>| {
        let ahead = t
            .and_then(|t| t.duration_since(now).ok())
            .filter(|d| !d.is_zero());
        if ahead.is_some() {
            *t = Some(now);
        }
        ahead
    };
    let (start, scheduled) = (clamp(&mut own.started_at), clamp(&mut own.scheduled_at));
    if let Some(by) = start.max(scheduled) {
        warn!(
            pod = %own.name, ahead = %fmt_duration(by),
            "the own pod's start time is in the future (clock skew?): counting from now"
        );
    }
}

impl Ready {
    /// Runs the decision loop until `stop` fires (with [`Stop::Never`]: until the
    /// future is dropped).
    pub(crate) async fn decision_loop(self, cfg: Config, stop: &mut Stop) -> Result {
        let mut agent = Agent::new(cfg, self.api, &self.own, self.clock);
        agent.decision_loop(self.own, stop).await
    }
}

// --- end of the shared start-up ---

/// Reads the own pod, retrying with backoff. `None` means a fatal identification error.
async fn fetch_own_pod(api: &PodApi, id: &identity::Identity) -> Option<Pod> {
    let (name, ns) = (&id.name, &id.namespace);
    let mut failures = 0u32;
    loop {
        let err = match api.get().await {
            Ok(pod) => return Some(pod),
            Err(e) => e,
        };
        let backoff = match err.code() {
            Some(404) if id.name_from == Source::Hostname => {
                error!(
                    pod = %name, namespace = %ns,
                    "no pod named after the hostname: set POD_NAME from the Downward API \
                     (env: - name: POD_NAME, valueFrom: fieldRef: fieldPath: metadata.name)"
                );
                return None;
            }
            Some(404) => {
                warn!(pod = %name, namespace = %ns, "own pod not found; holding on and retrying");
                Backoff::BUSY
            }
            Some(401) => {
                warn!(error = %err, hint = %rbac_hint(err.code(), "get", "pods", ns), "cannot read own pod; retrying");
                Backoff::TRANSIENT
            }
            Some(403) => {
                warn!(error = %err, hint = %rbac_hint(err.code(), "get", "pods", ns), "cannot read own pod; retrying rarely");
                Backoff::DENIED
            }
            _ => {
                warn!(error = %Chain(&err), "cannot read own pod; retrying");
                Backoff::TRANSIENT
            }
        };
        let wait = backoff.delay(failures, crate::jitter::draw());
        failures = failures.saturating_add(1);
        debug!(retry_in = %fmt_duration(wait), "waiting before the next try");
        tokio::time::sleep(wait).await;
    }
}

struct Agent {
    cfg: Config,
    /// Where `now` comes from (the system clock, or virtual time in tests).
    clock: Clock,
    api: PodApi,
    memory: Memory,
    nodes: Option<Vec<NodeSummary>>,
    siblings: Option<Vec<Sibling>>,
    /// The sibling watch runs but has neither listed nor failed yet: moves wait for it.
    siblings_loading: bool,
    label_keys: BTreeSet<String>,
    /// The metadata-only watch of every node (the view's first tier).
    node_rx: Option<mpsc::Receiver<Update<NodeSummary>>>,
    /// The full watches of the candidate nodes (the view's second tier).
    candidates: Option<Candidates>,
    sibling_rx: Option<mpsc::Receiver<Update<Sibling>>>,
    last_hold: Option<Hold>,
    /// The Warning Event about two PodDisruptionBudgets was posted.
    told_multiple_pdbs: bool,
    /// New nodes already reported as full (a sibling landed on an older node instead).
    full_nodes: BTreeSet<String>,
    /// Start-up or a list ran: give memory back before the next wait.
    release_pending: bool,
}

impl Agent {
    fn new(cfg: Config, api: PodApi, own: &OwnPod, clock: Clock) -> Self {
        let memory = Memory::new(&cfg.policy, crate::jitter::draw());
        let deadline = memory
            .lifetime
            .zip(own.started_at)
            .map(|(l, s)| selfdestruct_decision::later(s, l));
        info!(
            pod = %own.name,
            namespace = %own.namespace,
            uid = %own.uid,
            node = own.node_name.as_deref().unwrap_or(""),
            lifetime = memory.lifetime.map(fmt_duration).unwrap_or_else(|| "off".into()),
            expires_in = deadline
                .map(|d| fmt_duration(Duration::from_secs(d.duration_since(clock.now()).unwrap_or_default().as_secs())))
                .unwrap_or_default(),
            mode = if cfg.args.mode == Mode::Evict { "evict" } else { "delete" },
            dry_run = cfg.args.dry_run,
            move_to_new_nodes = cfg.policy.move_to_new_nodes,
            "selfdestruct started"
        );
        let mut agent = Agent {
            clock,
            label_keys: own.label_keys_of_interest(),
            cfg,
            api,
            memory,
            nodes: None,
            siblings: None,
            siblings_loading: false,
            node_rx: None,
            candidates: None,
            sibling_rx: None,
            last_hold: None,
            told_multiple_pdbs: false,
            full_nodes: BTreeSet::new(),
            release_pending: true,
        };
        agent.start_watches(own);
        agent
    }

    fn start_watches(&mut self, own: &OwnPod) {
        // One delay for both lists: a fleet that starts together spreads out.
        let start_delay =
            selfdestruct_decision::scaled(self.cfg.args.start_jitter, crate::jitter::draw());
        if self.cfg.policy.move_to_new_nodes {
            let (tx, rx) = mpsc::channel(64);
            let target = Target {
                selector: self.cfg.args.node_selector.to_string(),
                fields: String::new(),
                what: "nodes",
                max_bytes: watch::NODE_LIST_BYTES,
            };
            // Every node as metadata only; the candidates in full (src/candidates.rs).
            let keys = self.label_keys.clone();
            tokio::spawn(watch::follow(
                Api::<PartialObjectMeta<Node>>::all(self.api.client().clone()),
                target,
                tx,
                start_delay,
                move |n: PartialObjectMeta<Node>| {
                    crate::summarize::node_metadata(n.metadata, &keys)
                },
            ));
            self.node_rx = Some(rx);
            self.candidates = Some(Candidates::new(
                self.api.client().clone(),
                self.label_keys.clone(),
                self.cfg.policy.required_images.clone(),
            ));
        }
        let selector = match &self.cfg.args.sibling_selector {
            Siblings::Off => None,
            Siblings::Selector(s) => Some(s.clone()),
            Siblings::FromLabels => {
                let keys = ["app.kubernetes.io/name", "app.kubernetes.io/instance"];
                let labels: std::collections::BTreeMap<String, String> = own
                    .labels
                    .iter()
                    .filter(|(k, _)| keys.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if labels.is_empty() {
                    info!(
                        "own pod has no app.kubernetes.io/name or app.kubernetes.io/instance label: \
                         sibling awareness off (set SELFDESTRUCT_SIBLING_SELECTOR), relying on the PodDisruptionBudget"
                    );
                    None
                } else {
                    Some(Selector::from_labels(&labels))
                }
            }
        };
        if let Some(sel) = selector {
            let (tx, rx) = mpsc::channel(64);
            let target = Target {
                selector: sel.to_string(),
                fields: String::new(),
                what: "sibling pods",
                max_bytes: watch::SIBLING_LIST_BYTES,
            };
            tokio::spawn(watch::follow(
                Api::<Pod>::namespaced(
                    self.api.client().clone(),
                    &crate::api::segment(&own.namespace),
                ),
                target,
                tx,
                start_delay,
                crate::summarize::sibling,
            ));
            self.sibling_rx = Some(rx);
            self.siblings_loading = true;
        }
    }

    fn on_node(&mut self, own: &OwnPod, update: Update<NodeSummary>) {
        let touched = match &update {
            Update::Upsert(n) => Some(n.name.clone()),
            Update::Remove(name) => Some(name.clone()),
            Update::Reset(_) | Update::Forbidden(_) => None,
            Update::Unlisted(_) => Some(String::new()),
        };
        let applied = apply_update(&mut self.nodes, update, |n| &n.name);
        if let Some(candidates) = &mut self.candidates {
            let touched = touched.as_deref().map_or(Touched::All, Touched::One);
            candidates.sync(own, &mut self.nodes, touched);
        }
        match applied {
            Applied::Listed { first, count } => {
                if first {
                    info!(count, "watching nodes: moving to newer nodes is on");
                }
                self.release_pending = true;
            }
            Applied::Changed | Applied::Unlisted(_) => {}
            Applied::Forbidden(msg) if self.memory.lifetime.is_some_and(|l| !l.is_zero()) => warn!(
                error = %msg,
                "cannot list/watch nodes: moving to newer nodes is off, the lifetime timer still works; \
                 grant list/watch on nodes (rbac/node-reader) to enable it; retrying rarely"
            ),
            Applied::Forbidden(msg) => warn!(
                error = %msg,
                "cannot list/watch nodes, and no SELFDESTRUCT_MAX_LIFETIME is set: this placeholder \
                 will not move until nodes can be read; grant list/watch on nodes \
                 (rbac/node-reader) or set a lifetime; retrying rarely"
            ),
        }
    }

    fn on_sibling(&mut self, own: &mut OwnPod, update: Update<Sibling>) {
        // The own pod is in the sibling list too: notice when it starts terminating.
        let is_own = |s: &Sibling| s.name == own.name && s.uid == own.uid && s.terminating;
        own.terminating |= match &update {
            Update::Reset(all) => all.iter().any(is_own),
            Update::Upsert(s) => is_own(s),
            Update::Remove(_) | Update::Forbidden(_) | Update::Unlisted(_) => false,
        };
        let applied = apply_update(&mut self.siblings, update, |s| &s.name);
        if matches!(
            applied,
            Applied::Listed { .. } | Applied::Forbidden(_) | Applied::Unlisted(_)
        ) {
            self.siblings_loading = false;
        }
        match applied {
            Applied::Listed { first, count } => {
                if first {
                    info!(
                        count,
                        "watching sibling placeholders: no move while one is Pending"
                    );
                }
                self.release_pending = true;
            }
            Applied::Changed => {}
            Applied::Forbidden(msg) => warn!(
                error = %msg,
                "cannot list/watch sibling pods: relying on the PodDisruptionBudget alone to move one at a time"
            ),
            Applied::Unlisted(msg) if self.siblings.is_none() => warn!(
                error = %msg,
                "the first list of sibling pods failed: relying on the PodDisruptionBudget alone \
                 to move one at a time until a retry succeeds"
            ),
            Applied::Unlisted(_) => {}
        }
    }

    async fn decision_loop(&mut self, mut own: OwnPod, signals: &mut Stop) -> Result {
        let mut rng = SmallRng::from_os_rng();
        loop {
            let now = self.clock.now();
            self.memory.observe_nodes(now, &own, self.nodes.as_deref());
            let snapshot = Snapshot {
                now,
                own: &own,
                nodes: self.nodes.as_deref(),
                siblings: self.siblings.as_deref(),
                siblings_loading: self.siblings_loading,
                policy: &self.cfg.policy,
                memory: &self.memory,
                draw: rng.random(),
            };
            let Evaluation { decision, full } = evaluate(&snapshot);
            report_full_nodes(snapshot.nodes, &full, &mut self.full_nodes);
            if let Some(c) = &mut self.candidates {
                c.shown_full(&self.full_nodes);
            }
            self.log_decision(&decision, now);
            self.memory.apply(now, &decision);
            let wake = match decision {
                Decision::Move { trigger } => {
                    let outcome = tokio::select! {
                        sig = signals.terminated() => return stop(sig),
                        o = self.act(&own, &trigger) => o,
                    };
                    self.memory.record(self.clock.now(), &outcome, rng.random());
                    if let Some(at) = self.memory.retry_at {
                        let wait = at.duration_since(self.clock.now()).unwrap_or_default();
                        info!(retry_in = %fmt_duration(wait), "will re-check then");
                    }
                    continue;
                }
                Decision::Arm { at, .. } => Some(at),
                Decision::Wait { until, .. } => until,
            };
            let clock = self.clock;
            let sleep = async {
                match wake {
                    Some(at) => {
                        tokio::time::sleep(at.duration_since(clock.now()).unwrap_or_default()).await
                    }
                    None => std::future::pending().await,
                }
            };
            if std::mem::take(&mut self.release_pending) {
                crate::malloc_trim::release_idle();
            }
            tokio::select! {
                sig = signals.terminated() => return stop(sig),
                () = sleep => {}
                u = recv(&mut self.node_rx) => match u {
                    Some(u) => self.on_node(&own, u),
                    None => self.node_rx = None,
                },
                w = recv_candidate(&mut self.candidates) => {
                    if let Some(c) = &mut self.candidates {
                        c.handle(&own, &mut self.nodes, w);
                    }
                }
                u = recv(&mut self.sibling_rx) => match u {
                    Some(u) => self.on_sibling(&mut own, u),
                    None => {
                        self.sibling_rx = None;
                        self.siblings_loading = false;
                    }
                },
            }
        }
    }

    fn log_decision(&mut self, d: &Decision, now: SystemTime) {
        match d {
            Decision::Move { trigger } => {
                self.last_hold = None;
                info!(decision = "move", reason = %trigger, "moving: {trigger}");
            }
            Decision::Arm { at, trigger } => {
                self.last_hold = None;
                if self.memory.armed.is_none() {
                    let delay = at.duration_since(now).unwrap_or_default();
                    info!(
                        decision = "arm", reason = %trigger, delay = %fmt_duration(delay),
                        "{trigger}: moving in {} unless it no longer holds", fmt_duration(delay)
                    );
                }
            }
            Decision::Wait { until, hold } => {
                if self.memory.armed.is_some() && hold.is_none() {
                    info!(decision = "disarm", "trigger no longer holds: staying");
                }
                if hold != &self.last_hold {
                    if let Some(h) = hold {
                        let why: Cow<str> = match h {
                            Hold::Finished => "own pod is gone or going".into(),
                            Hold::Backoff => "backing off after a failed attempt".into(),
                            Hold::TooYoung => "own pod is younger than SELFDESTRUCT_MIN_AGE".into(),
                            Hold::MoveCap => "SELFDESTRUCT_MAX_MOVES_PER_HOUR reached".into(),
                            Hold::SiblingsNotListed => "sibling placeholders not listed yet".into(),
                            Hold::SiblingBusy(s) => {
                                format!("sibling {s} is Pending or terminating").into()
                            }
                        };
                        info!(decision = "hold", hold = %why, "move due but held: {why}");
                    }
                    self.last_hold = hold.clone();
                }
                debug!(
                    decision = "wait",
                    next = until
                        .map(|u| fmt_duration(u.duration_since(now).unwrap_or_default()))
                        .unwrap_or_else(|| "on events".into()),
                    "waiting"
                );
            }
        }
    }

    async fn act(&mut self, own: &OwnPod, trigger: &Trigger) -> Outcome {
        // The verb for the log, and the Event's action.
        let (verb, action) = match self.cfg.args.mode {
            Mode::Evict => ("evict", "Evict"),
            Mode::Delete => ("delete", "Delete"),
        };
        let reason = trigger.to_string();
        if self.cfg.args.dry_run {
            // As after a real move, nothing more is decided: the pod is "gone".
            info!(dry_run = true, reason = %reason,
                "dry run: would {verb} own pod {} (pausing now, as after a real move)", own.name);
            return Outcome::Done;
        }
        let res = self
            .api
            .remove(self.cfg.args.mode, &own.uid, self.cfg.grace_period)
            .await;
        // Two budgets over the pod: a 500 that no retry can cure. Say what is
        // wrong (and once, in an Event) and retry rarely.
        let multiple_pdbs = res
            .as_ref()
            .err()
            .is_some_and(|e| crate::pdb::is_multiple_pdbs(e.code(), &e.to_string()));
        if multiple_pdbs {
            // Name the budgets if the optional permission to list them is there.
            let named = match self.api.budgets().await {
                Ok(pdbs) => Some(crate::pdb::selecting(&pdbs, &own.labels)),
                Err(e) => {
                    debug!(error = %Chain(&e), "cannot list PodDisruptionBudgets to name them (optional)");
                    None
                }
            };
            let why = crate::pdb::multiple_pdbs_message(
                &own.namespace,
                &own.name,
                &own.labels,
                named.as_deref(),
            );
            warn!(outcome = "multiple-pdbs", "{why}; retrying rarely");
            if !self.told_multiple_pdbs {
                let reason = crate::pdb::EVENT_REASON;
                match self
                    .api
                    .event(EventType::Warning, &own.uid, action, reason, &why)
                    .await
                {
                    Ok(()) => self.told_multiple_pdbs = true,
                    Err(e) => warn!(error = %Chain(&e), "could not post the Event (continuing)"),
                }
            }
            return Outcome::Denied;
        }
        let outcome = outcome_of(&res);
        match (&outcome, &res) {
            (Outcome::Done, _) => {
                info!(
                    outcome = "done",
                    "{verb}ed own pod ({reason}); waiting for SIGTERM"
                );
                // The Event records what happened: posted only once the API
                // accepted the eviction or delete (a 429 posts nothing).
                if let Err(e) = self
                    .api
                    .event(EventType::Normal, &own.uid, action, "SelfDestruct", &reason)
                    .await
                {
                    warn!(error = %Chain(&e), "could not post the Event (continuing)");
                }
            }
            (Outcome::Gone, Err(e)) => {
                info!(outcome = "gone", error = %e, "own pod is already gone or replaced: nothing more to do")
            }
            (Outcome::Busy { .. }, Err(e)) => info!(
                outcome = "busy", error = %e,
                "the PodDisruptionBudget says not now (another placeholder is moving)"
            ),
            (Outcome::Denied, Err(e)) => warn!(
                outcome = "denied", error = %e,
                hint = %rbac_hint(e.code(), verb, "pods", &own.namespace),
                "not allowed to {verb} own pod; retrying rarely"
            ),
            (_, Err(e)) if e.code() == Some(401) => warn!(
                outcome = "failed", error = %e,
                hint = %rbac_hint(e.code(), verb, "pods", &own.namespace),
                "{verb} failed: credentials not accepted; retrying with backoff"
            ),
            (_, Err(e)) => {
                warn!(outcome = "failed", error = %Chain(e), "{verb} failed; retrying with backoff")
            }
            (_, Ok(())) => {}
        }
        outcome
    }
}

/// Says once per node when a sibling's placement shows that a new node is full
/// (`full`, from the evaluation): the one wasted move per new node has happened,
/// and no more moves go there. Nodes that left the view are forgotten (a name may
/// come back as a new node).
pub(crate) fn report_full_nodes(
    nodes: Option<&[NodeSummary]>,
    full: &[FullNode],
    reported: &mut BTreeSet<String>,
) {
    if !reported.is_empty() {
        let in_view: BTreeSet<&str> = nodes
            .into_iter()
            .flatten()
            .map(|n| n.name.as_str())
            .collect();
        reported.retain(|n| in_view.contains(n.as_str()));
    }
    for FullNode { node, sibling } in full {
        if reported.insert(node.name.clone()) {
            info!(
                node = %node.name, sibling = %sibling,
                "node {} is full: sibling {sibling}, created after it became usable, was scheduled \
                 onto an older node; not moving there", node.name
            );
        }
    }
}

/// What a watch update did to a view.
enum Applied {
    /// A full list replaced the view (`first`: there was no view before).
    Listed { first: bool, count: usize },
    /// One object was added, changed or removed.
    Changed,
    /// The view is gone: the watch is not allowed (the message says why).
    Forbidden(String),
    /// The first list failed; the view is unchanged (none, unless an earlier list
    /// arrived).
    Unlisted(String),
}

/// Applies a watch update to a view of summaries kept by name (`None`: no view).
fn apply_update<S>(
    view: &mut Option<Vec<S>>,
    update: Update<S>,
    name: impl Fn(&S) -> &str,
) -> Applied {
    match update {
        Update::Reset(list) => {
            let first = view.is_none();
            let count = list.len();
            *view = Some(list);
            Applied::Listed { first, count }
        }
        Update::Upsert(s) => {
            let list = view.get_or_insert_with(Vec::new);
            match list.iter_mut().find(|x| name(x) == name(&s)) {
                Some(x) => *x = s,
                None => list.push(s),
            }
            Applied::Changed
        }
        Update::Remove(gone) => {
            if let Some(list) = view {
                list.retain(|x| name(x) != gone);
            }
            Applied::Changed
        }
        Update::Forbidden(msg) => {
            *view = None;
            Applied::Forbidden(msg)
        }
        Update::Unlisted(msg) => Applied::Unlisted(msg),
    }
}

async fn recv_candidate(candidates: &mut Option<Candidates>) -> Wake {
    match candidates {
        Some(c) => c.recv().await,
        None => std::future::pending().await,
    }
}

async fn recv<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
