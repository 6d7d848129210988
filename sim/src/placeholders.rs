//! Placeholder pods and the agent glue: each running placeholder keeps the real
//! agent's [`Memory`] and decides with the real [`decide`], given the same
//! summaries (own pod, nodes, siblings) the agent builds from its watches.

use std::time::{Duration, SystemTime};

use selfdestruct_decision::model::{NodeSummary, OwnPod, Sibling, Toleration};
use selfdestruct_decision::{
    Decision, Memory, NodeVerdicts, Outcome, Policy, SiblingNodes, Snapshot, evaluate,
    evaluate_verdicts, node_verdicts,
};

use crate::cluster::{DELETION_CANDIDATE_TAINT, STARTUP_TAINT};
use crate::scenario::Ms;

/// Simulated time 0 as wall-clock time (any fixed instant works).
pub const EPOCH_OFFSET_SECS: u64 = selfdestruct_decision::builder::T0;

/// Simulated milliseconds to the `SystemTime` the decision reads.
pub fn system_time(t: Ms) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_OFFSET_SECS) + Duration::from_millis(t)
}

/// A `SystemTime` from the decision back to simulated milliseconds, rounded up
/// so that waking at the result never comes before the requested instant.
pub fn sim_ms_ceil(t: SystemTime) -> Ms {
    let d = t.duration_since(system_time(0)).unwrap_or_default();
    let whole = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if d.as_nanos().is_multiple_of(1_000_000) {
        whole
    } else {
        whole.saturating_add(1)
    }
}

/// The life of one incarnation of a placeholder pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Created, not bound (or not started) yet.
    Pending {
        /// Creation time.
        created: Ms,
    },
    /// Bound and running its agent.
    Running {
        /// Node index.
        node: usize,
        /// Creation time.
        created: Ms,
        /// Bind time (= start time).
        bound_at: Ms,
    },
    /// Evicted or preempted; the StatefulSet re-creates it at `until`.
    Terminating {
        /// Node index it was on.
        node: usize,
        /// Creation time.
        created: Ms,
        /// When the replacement pod appears.
        until: Ms,
    },
}

/// Replica `N` is `placeholder-N`.
const NAME_PREFIX: &str = "placeholder-";

/// One StatefulSet replica.
#[derive(Clone, Debug)]
pub struct Placeholder {
    /// `placeholder-N`: stays across re-creations.
    pub name: String,
    /// Counts re-creations: the uid is derived from it.
    pub incarnation: u32,
    /// Current pod.
    pub state: PodState,
    /// The agent of the running pod.
    pub agent: Option<Agent>,
}

impl Placeholder {
    /// Replica `i`, Pending since `now`.
    pub fn new(i: usize, now: Ms) -> Placeholder {
        Placeholder {
            name: format!("{NAME_PREFIX}{i}"),
            incarnation: 0,
            state: PodState::Pending { created: now },
            agent: None,
        }
    }

    /// The replica named `name` ([`Placeholder::new`]).
    pub fn ordinal(name: &str) -> Option<usize> {
        name.strip_prefix(NAME_PREFIX)?.parse().ok()
    }

    /// The current pod's uid.
    pub fn uid(&self) -> String {
        format!("{}-uid-{}", self.name, self.incarnation)
    }

    /// What a sibling's pod watch shows of this pod.
    pub fn sibling(&self, node_name: impl Fn(usize) -> String) -> Sibling {
        let (created, node, pending, terminating) = match self.state {
            PodState::Pending { created } => (created, None, true, false),
            PodState::Running { node, created, .. } => (created, Some(node), false, false),
            PodState::Terminating { node, created, .. } => (created, Some(node), false, true),
        };
        Sibling {
            name: self.name.clone(),
            uid: self.uid(),
            created: Some(system_time(created)),
            node_name: node.map(node_name),
            pending,
            terminating,
        }
    }
}

/// The in-container agent of one running placeholder pod.
#[derive(Clone, Debug)]
pub struct Agent {
    /// Its own pod, as the agent sees it.
    pub own: OwnPod,
    /// The real agent's memory.
    pub memory: Memory,
    /// Next time-based wake-up.
    pub wake: Option<Ms>,
    /// Invalidates older wake-up events.
    pub generation: u64,
    /// The version of the node view last observed ([`Agent::decide_in`]).
    pub observed: Option<u64>,
    /// Set after a decision to wait with nothing to move for: what a later view must
    /// change for the same decision not to follow ([`Settled`]).
    pub settled: Option<Settled>,
    /// The verdicts on the nodes of the view of the last decision ([`Known`]).
    pub verdicts: Option<Known>,
}

/// The verdicts on the nodes of a view, and what a later view must change for them not to
/// hold: the nodes (a new node version), the clock (the first settling node's time), a
/// witness leaving (its pod re-created: a full node may then take the pod), or a sibling
/// placed on a node old to this pod (a new witness: a node may be found full). Siblings
/// added, Pending or terminating, or placed on newer nodes, change no verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Known {
    /// The verdicts.
    pub found: NodeVerdicts,
    /// The view they were found on ([`crate::engine`]'s count of views), and its node
    /// version.
    pub view: u64,
    pub nodes: u64,
    /// The witnesses of the nodes found full ([`Placeholder::ordinal`]).
    pub witnesses: Vec<usize>,
}

/// Where [`Agent::decide_in`] takes the verdicts on the nodes from.
pub enum Verdicts<'a> {
    /// Scans the view ([`selfdestruct_decision::decide`]).
    Scan,
    /// Looks the siblings' nodes up in the view's [`SiblingNodes`].
    Placed(&'a SiblingNodes),
    /// Found before, and known to hold ([`Known`]).
    Known(NodeVerdicts),
}

/// An agent's last decision was to wait, and a later view with the same nodes brings the
/// same decision while it changes nothing that decision read:
/// - with no trigger (no node to move to, no lifetime reached, none held back) or
///   finished: the decision reads the siblings only through the full rule, which then
///   rejected every node that reached it, each for a sibling (its witness), and the clock
///   only through the wait's end. A sibling added, placed, pending or terminating adds
///   witnesses or matters only with a trigger, and a witness that stays keeps its node
///   full: until the wait's end, the same decision unless a witness left (its pod
///   re-created);
/// - held back by a busy sibling (`busy`), with no end: the trigger stays (only a sibling
///   placed can show its node full; time only adds triggers, and ends the backoff and the
///   move cap, which then did not hold), so the same decision while no sibling is placed
///   and the first busy sibling stays the same.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The decision.
    pub decision: Decision,
    /// The last view it stood on ([`crate::engine`]'s count of views).
    pub view: u64,
    /// The busy sibling named, when held back by one. (The node version and the witnesses
    /// are those of the agent's [`Known`] verdicts, found with this decision: a decision
    /// that finds new verdicts ends the settling.)
    pub busy: Option<String>,
}

impl Agent {
    /// Starts the agent of a pod bound to `node_name` at `now`. The pod tolerates the
    /// autoscaler's soft taint, as every template shipped does; `gate` adds the toleration of
    /// the readiness gate's startup taint.
    pub fn start(
        p: &Placeholder,
        node_name: &str,
        now: Ms,
        gate: bool,
        policy: &Policy,
        draw: f64,
    ) -> Agent {
        let tolerate = |key: &str, effect: &str| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            value: None,
            effect: Some(effect.into()),
        };
        let mut tolerations = vec![tolerate(DELETION_CANDIDATE_TAINT, "PreferNoSchedule")];
        if gate {
            tolerations.push(tolerate(STARTUP_TAINT, "NoSchedule"));
        }
        Agent {
            own: OwnPod {
                name: p.name.clone(),
                namespace: "placeholders".into(),
                uid: p.uid(),
                node_name: Some(node_name.into()),
                started_at: Some(system_time(now)),
                scheduled_at: Some(system_time(now)),
                tolerations,
                ..OwnPod::default()
            },
            memory: Memory::new(policy, draw),
            wake: None,
            generation: 0,
            observed: None,
            settled: None,
            verdicts: None,
        }
    }

    /// One decision with the real [`decide`], applied to the memory as the agent does.
    pub fn decide(
        &mut self,
        now: Ms,
        nodes: &[NodeSummary],
        siblings: &[Sibling],
        policy: &Policy,
        draw: f64,
    ) -> Decision {
        (self.decide_in(now, nodes, siblings, Verdicts::Scan, None, policy, draw)).0
    }

    /// [`Agent::decide`], with the verdicts on the nodes from `verdicts` (the
    /// [`SiblingNodes`] of `nodes` and `siblings`, shared by every agent deciding on that
    /// view, or verdicts known to hold), and `version` a version of the nodes of `nodes`
    /// this agent would note usable (a new version whenever those names may have changed):
    /// the same decision. The node view is observed only when that version changed,
    /// because observing the same usable nodes again changes nothing (the memory then
    /// holds exactly them, and nothing else writes that record). With the decision, the
    /// verdicts it read (none when scanned).
    #[allow(clippy::too_many_arguments)]
    pub fn decide_in(
        &mut self,
        now: Ms,
        nodes: &[NodeSummary],
        siblings: &[Sibling],
        verdicts: Verdicts,
        version: Option<u64>,
        policy: &Policy,
        draw: f64,
    ) -> (Decision, Option<NodeVerdicts>) {
        let now = system_time(now);
        if version.is_none() || version != self.observed {
            self.memory.observe_nodes(now, &self.own, Some(nodes));
            self.observed = version;
        }
        let snapshot = Snapshot {
            now,
            own: &self.own,
            nodes: Some(nodes),
            siblings: Some(siblings),
            siblings_loading: false,
            policy,
            memory: &self.memory,
            draw,
        };
        let (decision, verdicts) = match verdicts {
            Verdicts::Scan => (evaluate(&snapshot).decision, None),
            Verdicts::Placed(placed) => {
                let found = node_verdicts(&snapshot, placed);
                (evaluate_verdicts(&snapshot, &found).decision, Some(found))
            }
            Verdicts::Known(found) => (evaluate_verdicts(&snapshot, &found).decision, Some(found)),
        };
        self.memory.apply(now, &decision);
        (decision, verdicts)
    }

    /// Records the eviction's outcome as the agent does, its backoff `backoff_scale` times
    /// longer in simulated time (see [`crate::scenario::Scenario::agent_backoff_scale`]).
    pub fn record(&mut self, now: Ms, outcome: &Outcome, draw: f64, backoff_scale: f64) {
        let t = system_time(now);
        self.memory.record(t, outcome, draw);
        if let Some(at) = self.memory.retry_at {
            let wait = at.duration_since(t).unwrap_or_default();
            self.memory.retry_at = Some(t + wait.mul_f64(backoff_scale));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips_and_rounds_up() {
        assert_eq!(sim_ms_ceil(system_time(12_345)), 12_345);
        assert_eq!(sim_ms_ceil(system_time(10) + Duration::from_micros(1)), 11);
        assert_eq!(sim_ms_ceil(SystemTime::UNIX_EPOCH), 0);
    }

    /// The shipped templates (`charts/selfdestruct/templates/statefulset.yaml`) tolerate the
    /// autoscaler's soft taint: the agent sees it on a node and still counts the node usable.
    #[test]
    fn the_pod_tolerates_the_autoscalers_soft_taint() {
        let mut node = crate::cluster::Node::initial(
            "node-001".into(),
            crate::scenario::Resources::new(1.0, 1.0),
            0,
        );
        node.soft_tainted = true;
        let summary = node.summary(system_time);
        let taint = &summary.taints[0];
        assert_eq!(
            (taint.key.as_str(), taint.effect.as_str()),
            (DELETION_CANDIDATE_TAINT, "PreferNoSchedule")
        );
        let agent = Agent::start(
            &Placeholder::new(0, 0),
            "node-000",
            0,
            false,
            &Policy::default(),
            0.5,
        );
        assert!(agent.own.would_land_on(&summary));
        assert!(agent.own.tolerations.iter().any(|t| t.tolerates(taint)));
    }

    /// `decision/src/backoff.rs` (`Backoff::BUSY`, 10 s, equal jitter): the real agents of the
    /// bench at factor 15 wait 6 s and 8 s real after a PodDisruptionBudget's 429 ("will re-check
    /// then", run 3's new-node-ma), 90 s and 120 s of its simulated time.
    #[test]
    fn a_refused_move_backs_off_scaled_to_simulated_time() {
        let busy = Outcome::Busy { retry_after: None };
        let retry = |scale: f64| {
            let p = Placeholder::new(0, 0);
            let mut agent = Agent::start(&p, "node-000", 0, false, &Policy::default(), 0.5);
            agent.record(1000, &busy, 0.0, scale);
            sim_ms_ceil(agent.memory.retry_at.expect("a retry")) - 1000
        };
        assert_eq!(retry(1.0), 5000);
        assert_eq!(retry(15.0), 75_000);
    }

    #[test]
    fn siblings_show_pending_and_terminating() {
        let mut p = Placeholder::new(3, 5);
        let name = |i: usize| format!("node-{i:03}");
        let s = p.sibling(name);
        assert!(s.pending && s.node_name.is_none());
        p.state = PodState::Terminating {
            node: 1,
            created: 5,
            until: 9,
        };
        let s = p.sibling(name);
        assert!(s.terminating && s.node_name.as_deref() == Some("node-001"));
        assert_eq!(s.uid, "placeholder-3-uid-0");
    }

    #[test]
    fn the_simulated_agent_decides_as_the_core_on_the_same_world() {
        use selfdestruct_decision::Trigger;
        use selfdestruct_decision::builder::{World, at, ready_node, running_sibling};
        let policy = World::new().policy;
        let p = Placeholder::new(0, 0);
        let mut agent = Agent::start(&p, "old", 0, false, &policy, 0.25);
        let nodes = vec![ready_node("old", 0), ready_node("new", 900)];
        let siblings = vec![running_sibling("placeholder-1", "old")];
        let world = World {
            now: at(1000),
            own: agent.own.clone(),
            nodes: Some(nodes.clone()),
            siblings: Some(siblings.clone()),
            siblings_loading: false,
            policy: policy.clone(),
            memory: agent.memory.clone(),
            draw: 0.25,
        };
        let want = world.decide();
        assert!(
            matches!(&want, Decision::Move { trigger: Trigger::NewNode { node, .. } } if node == "new"),
            "{want:?}"
        );
        assert_eq!(
            agent.decide(1_000_000, &nodes, &siblings, &policy, 0.25),
            want
        );
        // a sibling still Pending holds both the same way
        let pending = vec![Placeholder::new(1, 0).sibling(|_| "old".into())];
        let mut held = Agent::start(&p, "old", 0, false, &policy, 0.25);
        let world = World {
            siblings: Some(pending.clone()),
            memory: held.memory.clone(),
            ..world
        };
        assert_eq!(
            held.decide(1_000_000, &nodes, &pending, &policy, 0.25),
            world.decide()
        );
        assert!(!matches!(world.decide(), Decision::Move { .. }));
    }
}
