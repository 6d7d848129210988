//! Decision inputs for tests, built in one place: the decision's unit tables and
//! property tests (decision/tests/) and the simulator's tests all start from these.
//!
//! A [`World`] owns everything a [`Snapshot`] borrows; its defaults are a quiet
//! cluster (the own pod on `old` since t=0, one old node, no lifetime, the node
//! trigger on, no jitter) seen at t=1000 s, to be changed field by field.

use std::time::{Duration, SystemTime};

use crate::model::{NodeSummary, OwnPod, Readiness, Sibling};
use crate::{Decision, Memory, Policy, Reject, Snapshot, decide};

/// The builder's epoch, in seconds since 1970 (2027-01-15): [`at`] counts from here.
pub const T0: u64 = 1_800_000_000;
/// One hour.
pub const HOUR: Duration = Duration::from_secs(3600);
/// The own pod's name in [`own_pod`].
pub const OWN: &str = "placeholder-0";
/// The own pod's uid in [`own_pod`].
pub const OWN_UID: &str = "uid-own";

/// `secs` seconds after [`T0`].
pub fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_secs(secs)
}

/// The own pod [`OWN`] on node `old`, started and scheduled at t=0.
pub fn own_pod() -> OwnPod {
    OwnPod {
        name: OWN.into(),
        namespace: "placeholders".into(),
        uid: OWN_UID.into(),
        node_name: Some("old".into()),
        started_at: Some(at(0)),
        scheduled_at: Some(at(0)),
        ..OwnPod::default()
    }
}

/// A schedulable node created and Ready since t=`since` seconds, holding no images.
pub fn ready_node(name: &str, since: u64) -> NodeSummary {
    NodeSummary {
        name: name.into(),
        created: Some(at(since)),
        ready: Readiness {
            ready: true,
            since: Some(at(since)),
        },
        ..NodeSummary::default()
    }
}

/// A sibling placeholder running on `node` since t=0.
pub fn running_sibling(name: &str, node: &str) -> Sibling {
    Sibling {
        name: name.into(),
        uid: format!("uid-{name}"),
        created: Some(at(0)),
        node_name: Some(node.into()),
        pending: false,
        terminating: false,
    }
}

/// The node trigger alone: no lifetime, 30 s settle, no jitter, no rate limit, no minimum age.
pub fn quiet_policy() -> Policy {
    Policy {
        lifetime: None,
        move_to_new_nodes: true,
        node_settle: Duration::from_secs(30),
        required_images: vec![],
        move_jitter: Duration::ZERO,
        max_moves_per_hour: 0,
        min_age: Duration::ZERO,
        avoid_deletion_candidates: false,
    }
}

/// Everything a snapshot borrows, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    /// The decision's "now".
    pub now: SystemTime,
    /// The own pod.
    pub own: OwnPod,
    /// The node watch's view (`None`: no node access, timer mode).
    pub nodes: Option<Vec<NodeSummary>>,
    /// The sibling watch's view (`None`: siblings not watched).
    pub siblings: Option<Vec<Sibling>>,
    /// Sibling awareness on, its first list not arrived yet.
    pub siblings_loading: bool,
    /// The settings.
    pub policy: Policy,
    /// Past attempts and armed timers.
    pub memory: Memory,
    /// The random draw in [0, 1).
    pub draw: f64,
}

impl Default for World {
    fn default() -> Self {
        World {
            now: at(1000),
            own: own_pod(),
            nodes: Some(vec![ready_node("old", 0)]),
            siblings: None,
            siblings_loading: false,
            policy: quiet_policy(),
            memory: Memory::default(),
            draw: 0.5,
        }
    }
}

impl World {
    /// The quiet world of the module's doc (the same as `World::default()`).
    pub fn new() -> Self {
        World::default()
    }

    /// The snapshot borrowing this world.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            now: self.now,
            own: &self.own,
            nodes: self.nodes.as_deref(),
            siblings: self.siblings.as_deref(),
            siblings_loading: self.siblings_loading,
            policy: &self.policy,
            memory: &self.memory,
            draw: self.draw,
        }
    }

    /// [`decide`] on this world.
    pub fn decide(&self) -> Decision {
        decide(&self.snapshot())
    }

    /// Whether `node` is a candidate for a move, and since how long it has been one.
    pub fn verdict(&self, node: &NodeSummary) -> Result<Duration, Reject> {
        self.snapshot().node_verdict(node)
    }

    /// Adds a node to the node watch's view (creating the view if there was none).
    pub fn with_node(mut self, node: NodeSummary) -> Self {
        self.nodes.get_or_insert_with(Vec::new).push(node);
        self
    }

    /// Whether another placeholder is Pending or terminating (the sibling hold's condition).
    pub fn sibling_busy(&self) -> bool {
        self.siblings.iter().flatten().any(|s| {
            let is_self = s.name == self.own.name || (!s.uid.is_empty() && s.uid == self.own.uid);
            !is_self && (s.pending || s.terminating)
        })
    }

    /// Attempts in the hour before `now` (and any recorded in the future).
    pub fn recent_attempts(&self) -> usize {
        self.memory
            .attempts
            .iter()
            .filter(|t| self.now.duration_since(**t).is_ok_and(|d| d < HOUR) || **t > self.now)
            .count()
    }
}
