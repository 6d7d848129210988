//! The agent's decide-and-act part: the pure decision (`selfdestruct_decision::evaluate`)
//! over a snapshot of the [`View`], with the memory it keeps between decisions, and
//! the move it then makes: evict or delete the own pod, with an Event.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use kube::runtime::events::EventType;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tracing::{debug, info, warn};

use super::view::View;
use crate::api::{Mode, PodApi, outcome_of, rbac_hint};
use crate::clock::Clock;
use crate::config::Config;
use crate::logging::Chain;
use selfdestruct_decision::duration::format as fmt_duration;
use selfdestruct_decision::model::{NodeSummary, OwnPod};
use selfdestruct_decision::{
    Decision, Evaluation, FullNode, Hold, Memory, Outcome, Snapshot, Trigger, evaluate,
};

/// What the decisions remember, and the API client that acts on them.
pub(super) struct Decider {
    pub(super) cfg: Config,
    /// Where `now` comes from (the system clock, or virtual time in tests).
    clock: Clock,
    api: PodApi,
    memory: Memory,
    rng: SmallRng,
    /// The hold last logged (a hold is logged when it changes).
    last_hold: Option<Hold>,
    /// The Warning Event about two PodDisruptionBudgets was posted.
    told_multiple_pdbs: bool,
    /// New nodes already reported as full (a sibling landed on an older node instead).
    full_nodes: BTreeSet<String>,
}

impl Decider {
    pub(super) fn new(cfg: Config, api: PodApi, own: &OwnPod, clock: Clock) -> Self {
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
            mode = if cfg.mode == Mode::Evict { "evict" } else { "delete" },
            dry_run = cfg.dry_run,
            move_to_new_nodes = cfg.policy.move_to_new_nodes,
            "selfdestruct started"
        );
        Decider {
            cfg,
            clock,
            api,
            memory,
            rng: SmallRng::from_os_rng(),
            last_hold: None,
            told_multiple_pdbs: false,
            full_nodes: BTreeSet::new(),
        }
    }

    /// The lifetime timer is on.
    pub(super) fn timer(&self) -> bool {
        self.memory.lifetime.is_some_and(|l| !l.is_zero())
    }

    /// Decides what to do now over `view`, logs it and remembers it (the nodes
    /// found full on the way are reported once and kept from `view`'s candidates).
    pub(super) fn decide(&mut self, own: &OwnPod, view: &mut View) -> Decision {
        let now = self.clock.now();
        self.memory.observe_nodes(now, own, view.nodes.as_deref());
        let snapshot = Snapshot {
            now,
            own,
            nodes: view.nodes.as_deref(),
            siblings: view.siblings.as_deref(),
            siblings_loading: view.siblings_loading,
            policy: &self.cfg.policy,
            memory: &self.memory,
            draw: self.rng.random(),
        };
        let Evaluation { decision, full } = evaluate(&snapshot);
        report_full_nodes(snapshot.nodes, &full, &mut self.full_nodes);
        view.shown_full(&self.full_nodes);
        self.log_decision(&decision, now);
        self.memory.apply(now, &decision);
        decision
    }

    /// Makes the move `trigger` asks for, and remembers how it went.
    pub(super) async fn act(&mut self, own: &OwnPod, trigger: &Trigger) {
        let outcome = self.remove(own, trigger).await;
        self.memory
            .record(self.clock.now(), &outcome, self.rng.random());
        if let Some(at) = self.memory.retry_at {
            let wait = at.duration_since(self.clock.now()).unwrap_or_default();
            info!(retry_in = %fmt_duration(wait), "will re-check then");
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

    /// Evicts or deletes the own pod (or says it would, in a dry run).
    async fn remove(&mut self, own: &OwnPod, trigger: &Trigger) -> Outcome {
        // The verb for the log, and the Event's action.
        let (verb, action) = match self.cfg.mode {
            Mode::Evict => ("evict", "Evict"),
            Mode::Delete => ("delete", "Delete"),
        };
        let reason = trigger.to_string();
        if self.cfg.dry_run {
            // As after a real move, nothing more is decided: the pod is "gone".
            info!(dry_run = true, reason = %reason,
                "dry run: would {verb} own pod {} (pausing now, as after a real move)", own.name);
            return Outcome::Done;
        }
        let res = self
            .api
            .remove(self.cfg.mode, &own.uid, self.cfg.grace_period)
            .await;
        // Two budgets over the pod: a 500 that no retry can cure. Say what is
        // wrong (and once, in an Event) and retry rarely.
        if let Err(e) = &res
            && crate::pdb::is_multiple_pdbs(e.code(), &e.to_string())
        {
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
                self.told_multiple_pdbs = self
                    .api
                    .event(EventType::Warning, &own.uid, action, reason, &why)
                    .await;
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
                self.api
                    .event(EventType::Normal, &own.uid, action, "SelfDestruct", &reason)
                    .await;
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
pub(super) fn report_full_nodes(
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
