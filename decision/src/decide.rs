//! The decision: a pure function from a snapshot (now, own pod, nodes, siblings,
//! policy, memory of past attempts, one random draw) to what to do. No I/O, no
//! clock, no randomness of its own: the agent's shell and the simulator both call
//! [`decide`] and apply the result with [`Memory::apply`] and [`Memory::record`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, SystemTime};

use crate::backoff::Backoff;
use crate::duration::format as fmt_duration;
use crate::images::ImageRef;
use crate::model::{NodeSummary, OwnPod, Sibling};

const HOUR: Duration = Duration::from_secs(3600);

/// Whether an attempt at `t` counts toward the hourly cap at `now`: made within the
/// hour before `now`, or dated after `now` (the clock was stepped back since: it is
/// counted until `now` has passed it by an hour, never forgotten early).
fn within_the_hour(now: SystemTime, t: SystemTime) -> bool {
    t > now || now.duration_since(t).is_ok_and(|d| d < HOUR)
}

/// `t + d`, saturating far in the future instead of overflowing (a snapshot may
/// hold any duration; the decision must never panic).
pub fn later(t: SystemTime, d: Duration) -> SystemTime {
    t.checked_add(d).unwrap_or_else(|| {
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 40);
        far.max(t)
    })
}

/// `d * f` for `f` in [0, 1], never panicking on huge durations or odd floats.
pub fn scaled(d: Duration, f: f64) -> Duration {
    let f = if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        0.0
    };
    Duration::try_from_secs_f64(d.as_secs_f64() * f)
        .unwrap_or(d)
        .min(d)
}

/// The tunable policy (from the configuration).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Lifetime range `[min, max]`; `None` disables the timer.
    pub lifetime: Option<(Duration, Duration)>,
    /// Move when a newer node is ready (needs read access to Nodes).
    pub move_to_new_nodes: bool,
    /// How long a node must have been Ready before it counts.
    pub node_settle: Duration,
    /// Images a node must report before it counts (empty = no image gate).
    pub required_images: Vec<ImageRef>,
    /// Random delay in `[0, move_jitter]` between a trigger and the move.
    pub move_jitter: Duration,
    /// Cap on the agent's own eviction attempts per hour (0 = no cap).
    pub max_moves_per_hour: u32,
    /// No move while the own pod is younger than this.
    pub min_age: Duration,
}

impl Default for Policy {
    /// The agent's shipped defaults (`selfdestruct --help`; the agent's config
    /// tests check that its flags' defaults give exactly this): the node trigger
    /// on, 10s settle, 10s jitter, 12 moves per hour, 2m minimum age, no lifetime,
    /// no required images.
    fn default() -> Self {
        Policy {
            lifetime: None,
            move_to_new_nodes: true,
            node_settle: Duration::from_secs(10),
            required_images: Vec::new(),
            move_jitter: Duration::from_secs(10),
            max_moves_per_hour: 12,
            min_age: Duration::from_secs(120),
        }
    }
}

impl Policy {
    /// Draws a lifetime uniformly from the range with `draw` in [0, 1).
    pub fn draw_lifetime(&self, draw: f64) -> Option<Duration> {
        self.lifetime
            .map(|(min, max)| min.saturating_add(scaled(max.saturating_sub(min), draw)))
    }
}

/// A move that was decided on and waits for its jitter delay to pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Armed {
    /// When to re-check and move.
    pub at: SystemTime,
    /// Why.
    pub trigger: Trigger,
}

/// What the agent remembers between decisions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    /// The lifetime drawn at start-up (`None`: timer off).
    pub lifetime: Option<Duration>,
    /// A pending, jittered move.
    pub armed: Option<Armed>,
    /// Times of the agent's own eviction/delete attempts.
    pub attempts: Vec<SystemTime>,
    /// No attempt before this time (backoff after a failure).
    pub retry_at: Option<SystemTime>,
    /// Consecutive failed attempts (drives the backoff).
    pub failures: u32,
    /// The own pod is gone or going: nothing more to do.
    pub finished: bool,
    /// For each node in the view that the own pod could be scheduled on (Ready, not
    /// cordoned, no untolerated taint, placement accepts it), when this agent first
    /// saw it so, in its current stretch of being so; kept by [`Memory::observe_nodes`].
    /// The "full" rule counts a sibling as evidence only if it was created after this
    /// (Kubernetes records no time for a taint's removal or an uncordon).
    pub usable_since: BTreeMap<String, SystemTime>,
}

/// The outcome of an eviction or delete request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted: the pod is being deleted.
    Done,
    /// 404 or 409: the pod is already gone or the name belongs to a successor.
    Gone,
    /// 429: a PodDisruptionBudget (or the server) says not now.
    Busy {
        /// From a `Retry-After` header or `details.retryAfterSeconds`.
        retry_after: Option<Duration>,
    },
    /// 401/403 or an admission denial (422): a permission problem.
    Denied,
    /// Anything else: 5xx, network, malformed answers.
    Failed,
}

impl Memory {
    /// A fresh memory with a lifetime drawn from the policy.
    pub fn new(policy: &Policy, draw: f64) -> Self {
        Memory {
            lifetime: policy.draw_lifetime(draw),
            ..Memory::default()
        }
    }

    /// Applies a decision: arms, disarms, or records an attempt.
    pub fn apply(&mut self, now: SystemTime, decision: &Decision) {
        match decision {
            Decision::Arm { at, trigger } => {
                self.armed = Some(Armed {
                    at: *at,
                    trigger: trigger.clone(),
                })
            }
            Decision::Move { .. } => {
                self.armed = None;
                self.attempts.retain(|t| within_the_hour(now, *t));
                self.attempts.push(now);
            }
            Decision::Wait { .. } => self.armed = None,
        }
    }

    /// Notes, from the node view seen at `now`, since when each node has been one the
    /// own pod could be scheduled on ([`OwnPod::could_run_on`]): a node that becomes
    /// so is noted at `now`, one that stops being so (tainted, cordoned, NotReady) or
    /// leaves the view is forgotten. The agent calls it with every snapshot's view
    /// before deciding (an update of the view wakes the agent, so `now` is when the
    /// change was seen); without a view (`None`) nothing is kept.
    pub fn observe_nodes(&mut self, now: SystemTime, own: &OwnPod, nodes: Option<&[NodeSummary]>) {
        let usable: BTreeSet<&str> = nodes
            .unwrap_or_default()
            .iter()
            .filter(|n| own.could_run_on(n))
            .map(|n| n.name.as_str())
            .collect();
        self.usable_since
            .retain(|name, _| usable.contains(name.as_str()));
        for name in usable {
            if !self.usable_since.contains_key(name) {
                self.usable_since.insert(name.to_string(), now);
            }
        }
    }

    /// Records the outcome of an attempt; `draw` in [0, 1) jitters the backoff.
    pub fn record(&mut self, now: SystemTime, outcome: &Outcome, draw: f64) {
        let backoff = match outcome {
            Outcome::Done | Outcome::Gone => {
                self.finished = true;
                self.failures = 0;
                self.retry_at = None;
                return;
            }
            Outcome::Busy { .. } => Backoff::BUSY,
            Outcome::Denied => Backoff::DENIED,
            Outcome::Failed => Backoff::TRANSIENT,
        };
        let mut wait = backoff.delay(self.failures, draw);
        // A server's Retry-After is a floor under the backoff, never a way around it
        // (`Retry-After: 0` must not turn the retries into a tight loop).
        if let Outcome::Busy {
            retry_after: Some(after),
        } = outcome
        {
            wait = wait.max((*after).min(Backoff::BUSY.cap));
        }
        self.retry_at = Some(later(now, wait));
        self.failures = self.failures.saturating_add(1);
    }
}

/// Why the agent moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The drawn lifetime has passed.
    Lifetime {
        /// The drawn lifetime.
        lifetime: Duration,
    },
    /// A newer node is ready for this pod.
    NewNode {
        /// Node name.
        node: String,
        /// How long it has been Ready.
        ready_for: Duration,
        /// The node reports every required image.
        images_pulled: bool,
    },
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Lifetime { lifetime } => {
                write!(f, "lifetime {} reached", fmt_duration(*lifetime))
            }
            Trigger::NewNode {
                node,
                ready_for,
                images_pulled,
            } => {
                let ago = Duration::from_secs(ready_for.as_secs());
                write!(f, "node {node} Ready {} ago", fmt_duration(ago))?;
                if *images_pulled {
                    f.write_str(" with images pulled")?;
                }
                Ok(())
            }
        }
    }
}

/// Why a due move is held back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The own pod is gone, going, or already replaced.
    Finished,
    /// Backing off after a failed attempt.
    Backoff,
    /// The own pod is younger than `min_age`.
    TooYoung,
    /// The per-hour attempt cap is used up.
    MoveCap,
    /// Sibling awareness is on but the first list of siblings has not arrived:
    /// a sibling may be Pending.
    SiblingsNotListed,
    /// A sibling placeholder is Pending or terminating: one move at a time.
    SiblingBusy(String),
}

/// What to do now.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Nothing now; decide again at `until` or on the next event (`None`: events only).
    Wait {
        /// Next time-based wake-up.
        until: Option<SystemTime>,
        /// Set when a trigger is due but held back.
        hold: Option<Hold>,
    },
    /// A trigger fired: re-check and move at `at` (the jitter delay).
    Arm {
        /// When.
        at: SystemTime,
        /// Why.
        trigger: Trigger,
    },
    /// Evict (or delete) the own pod now.
    Move {
        /// Why.
        trigger: Trigger,
    },
}

/// Why a node is not a reason to move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reject {
    /// It is the node the own pod runs on.
    OwnNode,
    /// When the own pod was scheduled is not known.
    OwnScheduleUnknown,
    /// Not Ready (or no Ready condition, or no transition time).
    NotReady,
    /// Created before the second the own pod was scheduled in (or creation time
    /// unknown): nothing new, however recently its Ready condition changed.
    NotNewer,
    /// New and Ready, but Ready for less than `node_settle`.
    Settling {
        /// When it will have settled.
        until: SystemTime,
    },
    /// `spec.unschedulable` (cordoned).
    Cordoned,
    /// A NoSchedule/NoExecute taint the own pod does not tolerate.
    Taint(String),
    /// The own pod's nodeSelector or required node affinity excludes it.
    Placement,
    /// Required images not reported by the node.
    ImagesMissing(Vec<String>),
    /// Required images not listed, but the list is truncated: can't confirm.
    ImagesUnconfirmed(Vec<String>),
    /// A sibling created after the node became usable (Ready, and schedulable for the
    /// own pod as far as this agent saw) was scheduled onto an old node (one created
    /// before the own pod was scheduled): the scheduler found this node full.
    Full {
        /// The sibling that showed it.
        sibling: String,
    },
}

/// Everything the decision reads.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot<'a> {
    /// The current time.
    pub now: SystemTime,
    /// The own pod.
    pub own: &'a OwnPod,
    /// The nodes watched, or `None` without node access.
    pub nodes: Option<&'a [NodeSummary]>,
    /// Sibling placeholders, or `None` without that view.
    pub siblings: Option<&'a [Sibling]>,
    /// Sibling awareness is on, but its first list has not arrived (nor been refused
    /// or failed): every move is held ([`Hold::SiblingsNotListed`]).
    pub siblings_loading: bool,
    /// The policy.
    pub policy: &'a Policy,
    /// What the agent remembers.
    pub memory: &'a Memory,
    /// A uniform random number in [0, 1) for the jitter delay.
    pub draw: f64,
}

impl Snapshot<'_> {
    fn is_self(&self, name: &str, uid: &str) -> bool {
        name == self.own.name || (!uid.is_empty() && uid == self.own.uid)
    }

    /// Whether `node` is a reason to move now; on success, how long it has been Ready.
    pub fn node_verdict(&self, node: &NodeSummary) -> Result<Duration, Reject> {
        let own = self.own;
        if own.node_name.as_deref() == Some(node.name.as_str()) {
            return Err(Reject::OwnNode);
        }
        let scheduled = own.scheduled_at.ok_or(Reject::OwnScheduleUnknown)?;
        let since = match (node.ready.ready, node.ready.since) {
            (true, Some(since)) => since,
            _ => return Err(Reject::NotReady),
        };
        // New means created after the own pod was scheduled: an old node whose Ready
        // condition blips (kubelet restart, upgrade) gets a fresh transition time but
        // is not a new node. Both times have second precision; a node created in the
        // same second the pod was scheduled was not Ready then (a Node is registered
        // before it is Ready), so the scheduler could not have chosen it: it is new.
        if node.created.is_none_or(|created| created < scheduled) {
            return Err(Reject::NotNewer);
        }
        let settled = later(since, self.policy.node_settle);
        if self.now < settled {
            return Err(Reject::Settling { until: settled });
        }
        if node.unschedulable {
            return Err(Reject::Cordoned);
        }
        if let Some(t) = own.untolerated_taint(node) {
            return Err(Reject::Taint(t.key.clone()));
        }
        if !own.accepts_node(node) {
            return Err(Reject::Placement);
        }
        let missing: Vec<String> = self
            .policy
            .required_images
            .iter()
            .enumerate()
            .filter(|(i, _)| !node.images_present.contains(i))
            .map(|(_, r)| r.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(if node.images_truncated {
                Reject::ImagesUnconfirmed(missing)
            } else {
                Reject::ImagesMissing(missing)
            });
        }
        if let (Some(siblings), Some(nodes)) = (self.siblings, self.nodes) {
            // The node could take a pod from when it became Ready and, as far as this
            // agent saw, schedulable (a startup taint or a cordon lifted later moves no
            // Kubernetes time). A caller that keeps no record counts from Ready.
            let usable = self
                .memory
                .usable_since
                .get(&node.name)
                .map_or(since, |t| since.max(*t));
            // Old in the sense the own pod counts "new": created before it was
            // scheduled. A sibling on another new node, or on a node not in the view
            // (deleted, or outside the node selector), says nothing about this one.
            // The own node counts as old: the own pod was scheduled onto it.
            let old = |name: &str| {
                own.node_name.as_deref() == Some(name)
                    || nodes
                        .iter()
                        .any(|o| o.name == name && o.created.is_some_and(|c| c < scheduled))
            };
            let placed_on_older = siblings.iter().find(|s| {
                !self.is_self(&s.name, &s.uid)
                    && s.created.is_some_and(|c| c > usable)
                    && s.node_name
                        .as_deref()
                        .is_some_and(|n| n != node.name && old(n))
            });
            if let Some(s) = placed_on_older {
                return Err(Reject::Full {
                    sibling: s.name.clone(),
                });
            }
        }
        Ok(self.now.duration_since(since).unwrap_or_default())
    }

    /// The best node to move towards (Ready longest, then by name), and the
    /// earliest time a settling node will count.
    fn node_trigger(&self) -> (Option<Trigger>, Option<SystemTime>) {
        if !self.policy.move_to_new_nodes {
            return (None, None);
        }
        let Some(nodes) = self.nodes else {
            return (None, None);
        };
        let (mut best, mut next): (Option<(Duration, &NodeSummary)>, Option<SystemTime>) =
            (None, None);
        for node in nodes {
            match self.node_verdict(node) {
                Ok(ready_for) => {
                    let better = best.is_none_or(|(d, b)| {
                        ready_for > d || (ready_for == d && node.name < b.name)
                    });
                    if better {
                        best = Some((ready_for, node));
                    }
                }
                Err(Reject::Settling { until }) => {
                    next = Some(next.map_or(until, |n| n.min(until)))
                }
                Err(_) => {}
            }
        }
        let trigger = best.map(|(ready_for, node)| Trigger::NewNode {
            node: node.name.clone(),
            ready_for,
            images_pulled: !self.policy.required_images.is_empty(),
        });
        (trigger, next)
    }

    /// Until when `min_age` holds node moves back (`None`: old enough, or start unknown).
    /// The lifetime is the user's explicit promise and is not held by it.
    fn too_young_until(&self) -> Option<SystemTime> {
        let start = self.own.started_at?;
        Some(later(start, self.policy.min_age)).filter(|old_enough| self.now < *old_enough)
    }

    fn hold(&self) -> Option<(Hold, Option<SystemTime>)> {
        let (now, memory, policy) = (self.now, self.memory, self.policy);
        if let Some(at) = memory.retry_at.filter(|at| *at > now) {
            return Some((Hold::Backoff, Some(at)));
        }
        if policy.max_moves_per_hour > 0 {
            let recent: Vec<SystemTime> = memory
                .attempts
                .iter()
                .copied()
                .filter(|t| within_the_hour(now, *t))
                .collect();
            if recent.len() >= policy.max_moves_per_hour as usize {
                let until = recent.iter().min().map(|t| later(*t, HOUR));
                return Some((Hold::MoveCap, until));
            }
        }
        if self.siblings_loading {
            return Some((Hold::SiblingsNotListed, None));
        }
        if let Some(busy) = self
            .siblings
            .into_iter()
            .flatten()
            .find(|s| !self.is_self(&s.name, &s.uid) && (s.pending || s.terminating))
        {
            return Some((Hold::SiblingBusy(busy.name.clone()), None));
        }
        None
    }
}

/// Decides what to do now. Pure: same snapshot, same answer.
pub fn decide(s: &Snapshot) -> Decision {
    if s.memory.finished || s.own.terminating {
        return Decision::Wait {
            until: None,
            hold: Some(Hold::Finished),
        };
    }
    let deadline = match (s.memory.lifetime, s.own.started_at) {
        (Some(l), Some(start)) if !l.is_zero() => Some((later(start, l), l)),
        _ => None,
    };
    let (node_trigger, next_settled) = s.node_trigger();
    let lifetime_trigger = deadline
        .filter(|(at, _)| *at <= s.now)
        .map(|(_, lifetime)| Trigger::Lifetime { lifetime });
    // MIN_AGE holds node moves only: a replacement must not chase a node at once.
    let young = node_trigger.as_ref().and(s.too_young_until());
    let trigger = match young {
        None => node_trigger.or(lifetime_trigger),
        Some(_) => lifetime_trigger,
    };
    let Some(trigger) = trigger else {
        let until = [deadline.map(|(at, _)| at), next_settled, young]
            .into_iter()
            .flatten()
            .min();
        let hold = young.map(|_| Hold::TooYoung);
        return Decision::Wait { until, hold };
    };
    if let Some((hold, until)) = s.hold() {
        return Decision::Wait {
            until,
            hold: Some(hold),
        };
    }
    match &s.memory.armed {
        Some(armed) if armed.at <= s.now => Decision::Move { trigger },
        Some(armed) => Decision::Arm {
            at: armed.at,
            trigger,
        },
        None if s.policy.move_jitter.is_zero() => Decision::Move { trigger },
        None => Decision::Arm {
            at: later(s.now, scaled(s.policy.move_jitter, s.draw)),
            trigger,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{World, at, quiet_policy as policy, ready_node};
    use crate::model::{Readiness, Taint, Toleration};
    use crate::selector::Requirement;

    /// Nothing to do until the watches change something.
    const WAIT_FOR_EVENTS: Decision = Decision::Wait {
        until: None,
        hold: None,
    };

    fn node(name: &str, ready_at: u64) -> NodeSummary {
        ready_node(name, ready_at)
    }

    fn moves_to(d: &Decision) -> Option<&str> {
        match d {
            Decision::Move {
                trigger: Trigger::NewNode { node, .. },
            } => Some(node),
            _ => None,
        }
    }

    #[test]
    fn each_candidate_rule_alone() {
        let c = World::new();
        let fresh = node("new", 500);
        assert_eq!(c.verdict(&fresh), Ok(Duration::from_secs(500)));
        let taint = |key: &str, effect: &str| Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
        };
        let table: Vec<(&str, NodeSummary, Reject)> = vec![
            ("own node", node("old", 500), Reject::OwnNode),
            (
                "not ready",
                NodeSummary {
                    ready: Readiness {
                        ready: false,
                        since: Some(at(500)),
                    },
                    ..fresh.clone()
                },
                Reject::NotReady,
            ),
            (
                "ready without time",
                NodeSummary {
                    ready: Readiness {
                        ready: true,
                        since: None,
                    },
                    ..fresh.clone()
                },
                Reject::NotReady,
            ),
            (
                "created before own scheduling",
                NodeSummary {
                    created: Some(at(0) - Duration::from_secs(60)),
                    ..node("new", 0)
                },
                Reject::NotNewer,
            ),
            (
                "settling",
                node("new", 990),
                Reject::Settling { until: at(1020) },
            ),
            (
                "cordoned",
                NodeSummary {
                    unschedulable: true,
                    ..fresh.clone()
                },
                Reject::Cordoned,
            ),
            (
                "autoscaler deleting",
                NodeSummary {
                    taints: vec![taint("ToBeDeletedByClusterAutoscaler", "NoSchedule")],
                    ..fresh.clone()
                },
                Reject::Taint("ToBeDeletedByClusterAutoscaler".into()),
            ),
            (
                "unreachable",
                NodeSummary {
                    taints: vec![taint("node.kubernetes.io/unreachable", "NoExecute")],
                    ..fresh.clone()
                },
                Reject::Taint("node.kubernetes.io/unreachable".into()),
            ),
            (
                "uninitialized",
                NodeSummary {
                    taints: vec![taint(
                        "node.cloudprovider.kubernetes.io/uninitialized",
                        "NoSchedule",
                    )],
                    ..fresh.clone()
                },
                Reject::Taint("node.cloudprovider.kubernetes.io/uninitialized".into()),
            ),
        ];
        for (name, n, want) in table {
            assert_eq!(c.verdict(&n), Err(want), "{name}");
        }
        // PreferNoSchedule taints never block (the summary drops them anyway).
        let soft = NodeSummary {
            taints: vec![taint("x", "PreferNoSchedule")],
            ..fresh.clone()
        };
        assert!(c.verdict(&soft).is_ok());
        // Exactly at the settle boundary it counts.
        assert!(c.verdict(&node("new", 970)).is_ok());
        // Unknown own scheduling time: no node is a reason.
        let mut unknown = World::new();
        unknown.own.scheduled_at = None;
        assert_eq!(unknown.verdict(&fresh), Err(Reject::OwnScheduleUnknown));
    }

    #[test]
    fn tolerated_taints_and_placement_rules() {
        let mut c = World::new();
        let mut n = node("new", 500);
        n.taints = vec![Taint {
            key: "hub.jupyter.org/dedicated".into(),
            value: Some("user".into()),
            effect: "NoSchedule".into(),
        }];
        n.labels = [("pool".to_string(), "user".to_string())].into();
        assert!(matches!(c.verdict(&n), Err(Reject::Taint(_))));
        c.own.tolerations = vec![Toleration {
            key: Some("hub.jupyter.org/dedicated".into()),
            operator: Some("Equal".into()),
            value: Some("user".into()),
            effect: Some("NoSchedule".into()),
        }];
        assert!(c.verdict(&n).is_ok());
        c.own.node_selector = [("pool".to_string(), "other".to_string())].into();
        assert_eq!(c.verdict(&n), Err(Reject::Placement));
        c.own.node_selector = [("pool".to_string(), "user".to_string())].into();
        assert!(c.verdict(&n).is_ok());
        c.own.affinity = vec![crate::model::NodeTerm {
            labels: vec![Requirement::In("zone".into(), vec!["a".into()])],
            fields: vec![],
        }];
        assert_eq!(c.verdict(&n), Err(Reject::Placement));
        n.labels.insert("zone".into(), "a".into());
        assert!(c.verdict(&n).is_ok());
        c.own.affinity.push(crate::model::NodeTerm {
            labels: vec![],
            fields: vec![Requirement::In("metadata.name".into(), vec!["new".into()])],
        });
        n.labels.remove("zone");
        assert!(
            c.verdict(&n).is_ok(),
            "terms are ORed: the name term matches"
        );
    }

    #[test]
    fn image_gate_present_missing_truncated() {
        let mut c = World::new();
        c.policy.required_images =
            crate::images::parse_list("jupyter/scipy:1,quay.io/x/y:2").expect("valid");
        let mut n = node("new", 500);
        assert!(matches!(c.verdict(&n), Err(Reject::ImagesMissing(m)) if m.len() == 2));
        n.images_present = vec![0];
        assert_eq!(
            c.verdict(&n),
            Err(Reject::ImagesMissing(vec!["quay.io/x/y:2".into()]))
        );
        n.images_truncated = true;
        assert!(matches!(c.verdict(&n), Err(Reject::ImagesUnconfirmed(_))));
        n.images_present = vec![0, 1];
        assert!(
            c.verdict(&n).is_ok(),
            "all present even in a truncated list"
        );
        c.nodes = Some(vec![node("old", 0), n]);
        let d = c.decide();
        assert_eq!(moves_to(&d), Some("new"));
        let Decision::Move { trigger } = d else {
            unreachable!()
        };
        assert_eq!(
            trigger.to_string(),
            "node new Ready 8m20s ago with images pulled"
        );
    }

    #[test]
    fn combined_rules_pick_the_longest_ready_valid_node() {
        let mut c = World::new();
        c.nodes = Some(vec![
            node("old", 0),
            NodeSummary {
                unschedulable: true,
                ..node("cordoned", 100)
            },
            node("b-new", 600),
            node("a-new", 600),
            node("settling", 995),
        ]);
        assert_eq!(moves_to(&c.decide()), Some("a-new"));
        c.nodes = Some(vec![node("old", 0), node("settling", 995)]);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(1025)),
                hold: None
            },
            "wakes when the node has settled"
        );
    }

    #[test]
    fn no_node_view_or_trigger_off_means_timer_only() {
        let mut c = World::new();
        c.nodes = None;
        assert_eq!(c.decide(), WAIT_FOR_EVENTS);
        c.nodes = Some(vec![node("new", 500)]);
        c.policy.move_to_new_nodes = false;
        assert_eq!(c.decide(), WAIT_FOR_EVENTS);
    }

    #[test]
    fn lifetime_timer_counts_from_pod_start_and_jitters() {
        let mut c = World::new();
        c.nodes = None;
        c.memory.lifetime = Some(Duration::from_secs(2000));
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(2000)),
                hold: None
            }
        );
        c.now = at(2000);
        c.policy.move_jitter = Duration::from_secs(60);
        c.draw = 0.25;
        let d = c.decide();
        let want = Trigger::Lifetime {
            lifetime: Duration::from_secs(2000),
        };
        assert_eq!(
            d,
            Decision::Arm {
                at: at(2015),
                trigger: want.clone()
            }
        );
        c.memory.apply(c.now, &d);
        c.now = at(2010);
        assert!(
            matches!(c.decide(), Decision::Arm { at: a, .. } if a == at(2015)),
            "keeps its time"
        );
        c.now = at(2015);
        assert_eq!(
            c.decide(),
            Decision::Move {
                trigger: want.clone()
            }
        );
        assert_eq!(want.to_string(), "lifetime 33m20s reached");
        // A restart long after expiry arms with a delay instead of moving at once.
        let mut late = World::new();
        late.nodes = None;
        late.memory.lifetime = Some(Duration::from_secs(10));
        late.policy.move_jitter = Duration::from_secs(60);
        late.draw = 0.9;
        assert!(matches!(late.decide(), Decision::Arm { at: a, .. } if a == at(1054)));
        // Zero lifetime is off.
        late.memory.lifetime = Some(Duration::ZERO);
        assert_eq!(late.decide(), WAIT_FOR_EVENTS);
    }

    #[test]
    fn draw_lifetime_is_uniform_in_range() {
        let mut p = policy();
        assert_eq!(p.draw_lifetime(0.3), None);
        p.lifetime = Some((Duration::from_secs(100), Duration::from_secs(200)));
        assert_eq!(p.draw_lifetime(0.0), Some(Duration::from_secs(100)));
        assert_eq!(p.draw_lifetime(0.5), Some(Duration::from_secs(150)));
        assert_eq!(
            Memory::new(&p, 1.0).lifetime,
            Some(Duration::from_secs(200))
        );
    }

    #[test]
    fn armed_move_is_rechecked_and_dropped_when_the_node_goes() {
        let mut c = World::new();
        c.policy.move_jitter = Duration::from_secs(100);
        c.nodes = Some(vec![node("old", 0), node("new", 500)]);
        let d = c.decide();
        assert!(matches!(d, Decision::Arm { .. }));
        c.memory.apply(c.now, &d);
        c.now = at(1100);
        c.nodes = Some(vec![node("old", 0)]);
        let d = c.decide();
        assert_eq!(d, WAIT_FOR_EVENTS);
        c.memory.apply(c.now, &d);
        assert_eq!(c.memory.armed, None);
    }

    #[test]
    fn churn_controls_hold_moves() {
        let mut c = World::new();
        c.nodes = Some(vec![node("old", 0), node("new", 500)]);
        // min age
        c.policy.min_age = Duration::from_secs(1200);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(1200)),
                hold: Some(Hold::TooYoung)
            }
        );
        c.policy.min_age = Duration::ZERO;
        // per-hour cap
        c.policy.max_moves_per_hour = 2;
        c.memory.attempts = vec![at(100), at(900)];
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(3700)),
                hold: Some(Hold::MoveCap)
            }
        );
        c.now = at(3700);
        assert!(moves_to(&c.decide()).is_some(), "the old attempt aged out");
        c.now = at(1000);
        c.memory.attempts.clear();
        // backoff
        c.memory.retry_at = Some(at(1500));
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(1500)),
                hold: Some(Hold::Backoff)
            }
        );
        c.memory.retry_at = None;
        // finished
        c.memory.finished = true;
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: None,
                hold: Some(Hold::Finished)
            }
        );
        c.memory.finished = false;
        c.own.terminating = true;
        assert!(matches!(
            c.decide(),
            Decision::Wait {
                hold: Some(Hold::Finished),
                ..
            }
        ));
    }

    #[test]
    fn min_age_holds_node_moves_but_not_the_lifetime() {
        let mut c = World::new();
        c.policy.min_age = Duration::from_secs(120);
        c.policy.lifetime = Some((Duration::from_secs(3), Duration::from_secs(3)));
        c.memory.lifetime = Some(Duration::from_secs(3));
        // A 3 s lifetime fires at 3 s although the pod is younger than MIN_AGE.
        c.nodes = Some(vec![node("old", 0)]);
        c.now = at(2);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(3)),
                hold: None
            }
        );
        c.now = at(3);
        assert_eq!(
            c.decide(),
            Decision::Move {
                trigger: Trigger::Lifetime {
                    lifetime: Duration::from_secs(3)
                }
            }
        );
        // ... through the move jitter and the sibling discipline like any move.
        c.policy.move_jitter = Duration::from_secs(10);
        assert!(matches!(
            c.decide(),
            Decision::Arm { at: a, trigger: Trigger::Lifetime { .. } } if a == at(8)
        ));
        c.siblings = Some(vec![sibling("placeholder-1", 1, None, true)]);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: None,
                hold: Some(Hold::SiblingBusy("placeholder-1".into()))
            }
        );
        // A node move still waits for MIN_AGE, even with the lifetime set.
        let mut c = World::new();
        c.policy.min_age = Duration::from_secs(120);
        c.memory.lifetime = Some(Duration::from_secs(3600));
        c.nodes = Some(vec![node("old", 0), node("new", 10)]);
        c.now = at(60);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(120)),
                hold: Some(Hold::TooYoung)
            }
        );
        c.now = at(120);
        assert_eq!(moves_to(&c.decide()), Some("new"));
        // Both due while young: the lifetime goes, the node move does not take its place.
        let mut c = World::new();
        c.policy.min_age = Duration::from_secs(120);
        c.memory.lifetime = Some(Duration::from_secs(30));
        c.nodes = Some(vec![node("old", 0), node("new", 10)]);
        c.now = at(60);
        assert!(matches!(
            c.decide(),
            Decision::Move {
                trigger: Trigger::Lifetime { .. }
            }
        ));
    }

    #[test]
    fn an_old_node_whose_ready_condition_blips_is_not_new() {
        let mut c = World::new();
        // node-b exists since before the own pod was scheduled (at 0) and flips
        // NotReady -> Ready at 900 (kubelet restart): a fresh lastTransitionTime.
        let blip = NodeSummary {
            created: Some(at(0) - Duration::from_secs(86_400)),
            ..node("node-b", 900)
        };
        c.nodes = Some(vec![node("old", 0), blip.clone()]);
        assert_eq!(c.verdict(&blip), Err(Reject::NotNewer));
        assert_eq!(c.decide(), WAIT_FOR_EVENTS);
        // No creation time known: not provably new.
        let unknown = NodeSummary {
            created: None,
            ..node("node-c", 900)
        };
        assert_eq!(c.verdict(&unknown), Err(Reject::NotNewer));
        // Created after the own pod was scheduled, Ready for the settle time: new.
        let fresh = node("node-d", 900);
        assert_eq!(c.verdict(&fresh), Ok(Duration::from_secs(100)));
        // Times have second precision: created in the second the own pod was scheduled
        // in, it was not Ready then, so it is new; a second earlier, it is not.
        let same_second = NodeSummary {
            created: Some(at(0)),
            ..node("node-f", 900)
        };
        assert_eq!(c.verdict(&same_second), Ok(Duration::from_secs(100)));
        let second_before = NodeSummary {
            created: Some(at(0) - Duration::from_secs(1)),
            ..node("node-g", 900)
        };
        assert_eq!(c.verdict(&second_before), Err(Reject::NotNewer));
        // A new node that blips settles again from its new Ready time.
        let reblip = NodeSummary {
            created: Some(at(500)),
            ..node("node-e", 990)
        };
        assert_eq!(
            c.verdict(&reblip),
            Err(Reject::Settling { until: at(1020) })
        );
    }

    fn sibling(name: &str, created: u64, node: Option<&str>, pending: bool) -> Sibling {
        Sibling {
            name: name.into(),
            uid: format!("uid-{name}"),
            created: Some(at(created)),
            node_name: node.map(Into::into),
            pending,
            terminating: false,
        }
    }

    #[test]
    fn sibling_awareness() {
        let mut c = World::new();
        c.nodes = Some(vec![node("old", 0), node("new", 500)]);
        c.siblings = Some(vec![
            sibling("placeholder-0", 0, Some("old"), false),
            sibling("placeholder-1", 0, Some("old"), false),
        ]);
        assert_eq!(moves_to(&c.decide()), Some("new"));
        // a sibling Pending holds every move (also the timer)
        c.siblings = Some(vec![sibling("placeholder-1", 900, None, true)]);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: None,
                hold: Some(Hold::SiblingBusy("placeholder-1".into()))
            }
        );
        // a terminating sibling too
        let mut going = sibling("placeholder-1", 0, Some("old"), false);
        going.terminating = true;
        c.siblings = Some(vec![going]);
        assert!(matches!(
            c.decide(),
            Decision::Wait {
                hold: Some(Hold::SiblingBusy(_)),
                ..
            }
        ));
        // the own pod never holds itself, even while it looks Pending
        c.siblings = Some(vec![sibling("placeholder-0", 0, None, true)]);
        assert_eq!(moves_to(&c.decide()), Some("new"));
        // a sibling created after the node was Ready landed on an older node: full
        c.siblings = Some(vec![sibling("placeholder-1", 700, Some("old"), false)]);
        assert_eq!(
            c.verdict(&node("new", 500)),
            Err(Reject::Full {
                sibling: "placeholder-1".into()
            })
        );
        assert_eq!(c.decide(), WAIT_FOR_EVENTS);
        // ... but landing on the new node, or on another newer node, is no evidence
        c.siblings = Some(vec![sibling("placeholder-1", 700, Some("new"), false)]);
        assert!(c.verdict(&node("new", 500)).is_ok());
        c.nodes = Some(vec![node("old", 0), node("new", 500), node("newer", 600)]);
        c.siblings = Some(vec![sibling("placeholder-1", 700, Some("newer"), false)]);
        assert!(c.verdict(&node("new", 500)).is_ok());
        // a sibling created before the node was Ready says nothing about it
        c.siblings = Some(vec![sibling("placeholder-1", 400, Some("old"), false)]);
        assert!(c.verdict(&node("new", 500)).is_ok());
    }

    /// The "full" rule's evidence: a sibling created after the node became usable
    /// that landed on an old node. Other placements say nothing about the node.
    #[test]
    fn only_a_sibling_on_an_old_node_after_the_node_became_usable_shows_it_full() {
        let old_day = |name: &str| NodeSummary {
            created: Some(at(0) - Duration::from_secs(86_400)),
            ..node(name, 0)
        };
        // Two nodes of one scale-up: n2 Ready at 490 (created 400), new Ready at 500.
        let n2 = NodeSummary {
            created: Some(at(400)),
            ..node("n2", 490)
        };
        let new = node("new", 500);
        let mut c = World::new();
        c.nodes = Some(vec![node("old", 0), old_day("old2"), n2, new.clone()]);
        let full = |s: &str| {
            Err(Reject::Full {
                sibling: s.to_string(),
            })
        };
        let table: Vec<(&str, Sibling, Result<Duration, Reject>)> = vec![
            (
                "on the own node (old: the own pod was scheduled onto it)",
                sibling("placeholder-1", 700, Some("old"), false),
                full("placeholder-1"),
            ),
            (
                "on another old node",
                sibling("placeholder-1", 700, Some("old2"), false),
                full("placeholder-1"),
            ),
            (
                "(a) on a new node that became Ready a little earlier",
                sibling("placeholder-1", 700, Some("n2"), false),
                Ok(Duration::from_secs(500)),
            ),
            (
                "(b) on a node not in the view (deleted, or outside the node selector)",
                sibling("placeholder-1", 700, Some("gone"), false),
                Ok(Duration::from_secs(500)),
            ),
            (
                "on the node itself",
                sibling("placeholder-1", 700, Some("new"), false),
                Ok(Duration::from_secs(500)),
            ),
            (
                "created before the node was Ready",
                sibling("placeholder-1", 400, Some("old2"), false),
                Ok(Duration::from_secs(500)),
            ),
            (
                "created in the second it became Ready",
                sibling("placeholder-1", 500, Some("old2"), false),
                Ok(Duration::from_secs(500)),
            ),
        ];
        let mut wrong = Vec::new();
        for (name, s, want) in table {
            c.siblings = Some(vec![s]);
            let got = c.verdict(&new);
            if got != want {
                wrong.push(format!("{name}: {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        // A node of unknown age is not known to be old.
        c.nodes = Some(vec![
            node("old", 0),
            NodeSummary {
                created: None,
                ..node("unknown", 0)
            },
            new.clone(),
        ]);
        c.siblings = Some(vec![sibling("placeholder-1", 700, Some("unknown"), false)]);
        assert!(c.verdict(&new).is_ok());
    }

    /// (c) The node-gate's startup taint (or a cordon) keeps a Ready node from
    /// taking pods; Kubernetes records no time for its removal, so the agent notes
    /// when it first saw the node usable, and only siblings created after that count.
    #[test]
    fn a_sibling_created_while_the_node_was_not_usable_says_nothing() {
        let gated = NodeSummary {
            taints: vec![crate::model::Taint {
                key: crate::model::IMAGES_PENDING_TAINT.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
            }],
            ..node("new", 500)
        };
        let open = node("new", 500);
        let mut c = World::new();
        // Ready at 500, gated: a sibling re-created at 700 had to go to the old node.
        c.nodes = Some(vec![node("old", 0), gated.clone()]);
        c.siblings = Some(vec![sibling("placeholder-1", 700, Some("old"), false)]);
        c.now = at(600);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(c.memory.usable_since.get("new"), None, "gated: not usable");
        assert_eq!(c.memory.usable_since.get("old"), Some(&at(600)));
        c.now = at(750);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(
            c.verdict(&gated),
            Err(Reject::Taint(crate::model::IMAGES_PENDING_TAINT.into()))
        );
        // The gate opens at 800: the sibling of 700 is no evidence, the node counts.
        c.nodes = Some(vec![node("old", 0), open.clone()]);
        c.now = at(800);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(c.memory.usable_since.get("new"), Some(&at(800)));
        assert_eq!(c.verdict(&open), Ok(Duration::from_secs(300)));
        assert_eq!(moves_to(&c.decide()), Some("new"));
        // Later observations keep the first time.
        c.now = at(900);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(c.memory.usable_since.get("new"), Some(&at(800)));
        // A sibling created after the gate opened that still went to the old node: full.
        c.siblings = Some(vec![sibling("placeholder-1", 850, Some("old"), false)]);
        assert_eq!(
            c.verdict(&open),
            Err(Reject::Full {
                sibling: "placeholder-1".into()
            })
        );
        // Cordoned and uncordoned: usable again from when that was seen.
        let cordoned = NodeSummary {
            unschedulable: true,
            ..open.clone()
        };
        c.nodes = Some(vec![node("old", 0), cordoned]);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(c.memory.usable_since.get("new"), None);
        c.nodes = Some(vec![node("old", 0), open.clone()]);
        c.now = at(950);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(c.memory.usable_since.get("new"), Some(&at(950)));
        assert!(c.verdict(&open).is_ok(), "the sibling of 850 predates 950");
        // Nodes that leave the view are forgotten, and so is everything without a view.
        assert!(c.memory.usable_since.contains_key("old"));
        c.nodes = Some(vec![open.clone()]);
        c.memory.observe_nodes(c.now, &c.own, c.nodes.as_deref());
        assert_eq!(
            c.memory.usable_since.keys().collect::<Vec<_>>(),
            vec!["new"]
        );
        c.memory.observe_nodes(c.now, &c.own, None);
        assert!(c.memory.usable_since.is_empty());
        // The own pod's tolerations count: a placeholder that tolerates the gate's
        // taint can use the gated node at once.
        c.own.tolerations = vec![Toleration {
            key: Some(crate::model::IMAGES_PENDING_TAINT.into()),
            operator: Some("Exists".into()),
            value: None,
            effect: Some("NoSchedule".into()),
        }];
        c.memory.observe_nodes(at(600), &c.own, Some(&[gated]));
        assert_eq!(c.memory.usable_since.get("new"), Some(&at(600)));
    }

    #[test]
    fn no_move_before_the_first_sibling_list() {
        let mut c = World::new();
        c.memory.lifetime = Some(Duration::from_secs(10));
        c.nodes = Some(vec![node("old", 0), node("new", 500)]);
        c.siblings = None;
        c.siblings_loading = true;
        let not_listed = Decision::Wait {
            until: None,
            hold: Some(Hold::SiblingsNotListed),
        };
        assert_eq!(c.decide(), not_listed, "the lifetime and the node are due");
        c.nodes = None;
        assert_eq!(c.decide(), not_listed, "the lifetime alone");
        // The list arrives and shows a Pending sibling: that holds.
        c.siblings_loading = false;
        c.siblings = Some(vec![sibling("placeholder-1", 900, None, true)]);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: None,
                hold: Some(Hold::SiblingBusy("placeholder-1".into()))
            }
        );
        c.siblings = Some(vec![sibling("placeholder-1", 0, Some("old"), false)]);
        assert!(matches!(c.decide(), Decision::Move { .. }));
        // Refused or failed (no view, no longer loading): the PDB alone, as before.
        c.siblings = None;
        assert!(matches!(c.decide(), Decision::Move { .. }));
        // Nothing due: nothing held.
        c.memory.lifetime = None;
        c.siblings_loading = true;
        assert_eq!(c.decide(), WAIT_FOR_EVENTS);
        // A backoff or the cap still say when to look again.
        c.memory.lifetime = Some(Duration::from_secs(10));
        c.memory.retry_at = Some(at(1500));
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(1500)),
                hold: Some(Hold::Backoff)
            }
        );
    }

    /// The clock stepped back: attempts dated in the future count toward the cap,
    /// both when deciding and when a move prunes the record.
    #[test]
    fn attempts_dated_in_the_future_count_until_an_hour_after_them() {
        let mut c = World::new();
        c.nodes = Some(vec![node("old", 0), node("new", 10)]);
        c.policy.max_moves_per_hour = 12;
        let mv = Decision::Move {
            trigger: Trigger::Lifetime {
                lifetime: Duration::from_secs(1),
            },
        };
        let table: Vec<(&str, Vec<u64>, u64, usize)> = vec![
            ("all in the future", (1000..1012).collect(), 500, 13),
            ("an hour old is pruned", vec![0, 100], 3600, 2),
            ("just under an hour is kept", vec![1, 100], 3600, 3),
            ("a mix", vec![0, 3000, 9000], 3700, 3),
        ];
        for (name, attempts, now, kept) in table {
            let mut m = Memory {
                attempts: attempts.iter().map(|t| at(*t)).collect(),
                ..Memory::default()
            };
            m.apply(at(now), &mv);
            assert_eq!(m.attempts.len(), kept, "{name}: {:?}", m.attempts);
        }
        // After a move at 500, twelve attempts dated 1000..1011 still hold the next one.
        c.memory.attempts = (1000..1012).map(at).collect();
        c.now = at(500);
        c.memory.apply(c.now, &mv);
        assert_eq!(
            c.decide(),
            Decision::Wait {
                until: Some(at(500 + 3600)),
                hold: Some(Hold::MoveCap)
            }
        );
    }

    #[test]
    fn a_replacement_never_chases_a_node_that_was_already_there() {
        let mut c = World::new();
        c.nodes = Some(vec![node("old", 0), node("new", 500)]);
        // the moved pod's successor was scheduled after "new" became Ready
        c.own.node_name = Some("old".into());
        c.own.scheduled_at = Some(at(800));
        c.own.started_at = Some(at(800));
        assert_eq!(c.verdict(&node("new", 500)), Err(Reject::NotNewer));
        assert_eq!(c.decide(), WAIT_FOR_EVENTS);
    }

    #[test]
    fn extreme_durations_saturate_instead_of_panicking() {
        let mut c = World::new();
        c.nodes = Some(vec![node("old", 0), node("new", 500)]);
        c.memory.lifetime = Some(Duration::MAX);
        c.policy.node_settle = Duration::MAX;
        c.policy.min_age = Duration::MAX;
        c.policy.move_jitter = Duration::MAX;
        c.draw = f64::NAN;
        assert!(matches!(c.decide(), Decision::Wait { .. }));
        c.policy.node_settle = Duration::ZERO;
        c.policy.min_age = Duration::ZERO;
        c.draw = 1.0;
        assert!(matches!(c.decide(), Decision::Arm { .. }));
        let mut m = Memory::default();
        m.record(
            SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(u32::MAX) << 20),
            &Outcome::Failed,
            1.0,
        );
        assert!(m.retry_at.is_some());
        assert_eq!(scaled(Duration::MAX, 1.0), Duration::MAX);
        assert_eq!(
            scaled(Duration::from_secs(10), f64::INFINITY),
            Duration::ZERO
        );
        let mut p = policy();
        p.lifetime = Some((Duration::ZERO, Duration::MAX));
        assert!(p.draw_lifetime(0.999_999).is_some());
    }

    #[test]
    fn outcomes_update_memory() {
        let now = at(0);
        let mut m = Memory::default();
        m.record(now, &Outcome::Busy { retry_after: None }, 0.0);
        assert_eq!(m.retry_at, Some(at(5)));
        m.record(now, &Outcome::Busy { retry_after: None }, 1.0);
        assert_eq!(m.retry_at, Some(at(20)));
        m.record(
            now,
            &Outcome::Busy {
                retry_after: Some(Duration::from_secs(7)),
            },
            0.0,
        );
        assert_eq!(
            m.retry_at,
            Some(at(20)),
            "Retry-After is a floor, not a way around the backoff"
        );
        // Retry-After: 0 (seen on hostile servers) still backs off, and keeps doubling.
        let mut zero = Memory::default();
        let busy0 = Outcome::Busy {
            retry_after: Some(Duration::ZERO),
        };
        zero.record(now, &busy0, 0.0);
        assert_eq!(zero.retry_at, Some(at(5)));
        zero.record(now, &busy0, 0.0);
        assert_eq!(zero.retry_at, Some(at(10)));
        // A Retry-After longer than the backoff is honoured (up to the cap).
        let mut long = Memory::default();
        long.record(
            now,
            &Outcome::Busy {
                retry_after: Some(Duration::from_secs(100)),
            },
            0.0,
        );
        assert_eq!(long.retry_at, Some(at(100)));
        long.record(
            now,
            &Outcome::Busy {
                retry_after: Some(Duration::from_secs(100_000)),
            },
            0.0,
        );
        assert_eq!(long.retry_at, Some(at(300)), "capped");
        let mut denied = Memory::default();
        denied.record(now, &Outcome::Denied, 0.0);
        assert!(denied.retry_at >= Some(at(300)), "403 retries rarely");
        let mut failed = Memory::default();
        failed.record(now, &Outcome::Failed, 0.0);
        assert_eq!(failed.retry_at, Some(now + Duration::from_millis(500)));
        m.record(now, &Outcome::Gone, 0.0);
        assert!(m.finished && m.retry_at.is_none());
        let mut done = Memory::default();
        done.record(now, &Outcome::Done, 0.0);
        assert!(done.finished);
        // attempts are recorded by apply(Move) and old ones pruned
        let mut m = Memory {
            attempts: vec![at(0)],
            ..Memory::default()
        };
        let mv = Decision::Move {
            trigger: Trigger::Lifetime {
                lifetime: Duration::from_secs(1),
            },
        };
        m.apply(at(4000), &mv);
        assert_eq!(m.attempts, vec![at(4000)]);
    }
}
