//! The decision: a pure function from a snapshot (now, own pod, nodes, siblings,
//! policy, memory of past attempts, one random draw) to what to do. No I/O, no
//! clock, no randomness of its own: the simulator calls [`decide`], the agent's
//! shell [`evaluate`] (the same decision, with the nodes found full on the way),
//! and both apply the result with [`Memory::apply`] and [`Memory::record`].

use std::cell::OnceCell;
use std::collections::BTreeMap;
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
    /// No move to a node the cluster autoscaler marks as a deletion candidate (its soft
    /// `DeletionCandidateOfClusterAutoscaler` taint, tolerated or not): it finds the node
    /// unneeded and removes it once unneeded long enough, draining what moved there.
    pub avoid_deletion_candidates: bool,
}

impl Policy {
    /// The shipped default of `node_settle`, as the setting's text.
    pub const DEFAULT_NODE_SETTLE: &str = "10s";
    /// The shipped default of `move_jitter`, as the setting's text.
    pub const DEFAULT_MOVE_JITTER: &str = "10s";
    /// The shipped default of `min_age`, as the setting's text.
    pub const DEFAULT_MIN_AGE: &str = "2m";
    /// The shipped default of `max_moves_per_hour`.
    pub const DEFAULT_MAX_MOVES_PER_HOUR: u32 = 12;
    /// The shipped default of `move_to_new_nodes`.
    pub const DEFAULT_MOVE_TO_NEW_NODES: bool = true;
    /// The shipped default of `avoid_deletion_candidates`.
    pub const DEFAULT_AVOID_DELETION_CANDIDATES: bool = false;
}

impl Default for Policy {
    /// The agent's shipped defaults: the `DEFAULT_*` constants, which the settings'
    /// flags (`settings::PolicySettings`) take as their defaults too; no lifetime,
    /// no required images.
    fn default() -> Self {
        let duration = |text| crate::duration::parse(text).expect("a default is a duration");
        Policy {
            lifetime: None,
            move_to_new_nodes: Self::DEFAULT_MOVE_TO_NEW_NODES,
            node_settle: duration(Self::DEFAULT_NODE_SETTLE),
            required_images: Vec::new(),
            move_jitter: duration(Self::DEFAULT_MOVE_JITTER),
            max_moves_per_hour: Self::DEFAULT_MAX_MOVES_PER_HOUR,
            min_age: duration(Self::DEFAULT_MIN_AGE),
            avoid_deletion_candidates: Self::DEFAULT_AVOID_DELETION_CANDIDATES,
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

    /// Notes, from the node view seen at `now`, since when each node has been one a
    /// re-created own pod would land on ([`OwnPod::would_land_on`]): a node that
    /// becomes so is noted at `now`, one that stops being so (tainted, also with an
    /// untolerated PreferNoSchedule taint, cordoned, NotReady) or leaves the view is
    /// forgotten. The agent calls it with every snapshot's view
    /// before deciding (an update of the view wakes the agent, so `now` is when the
    /// change was seen); without a view (`None`) nothing is kept.
    pub fn observe_nodes(&mut self, now: SystemTime, own: &OwnPod, nodes: Option<&[NodeSummary]>) {
        let nodes = nodes.unwrap_or_default();
        let mut usable: Vec<&str> = Vec::with_capacity(nodes.len());
        usable.extend(
            nodes
                .iter()
                .filter(|n| own.would_land_on(n))
                .map(|n| n.name.as_str()),
        );
        // Sorted (a listed view mostly is already), so that the record, visited in
        // the same order, is pruned in one merging pass.
        usable.sort_unstable();
        usable.dedup();
        // Mostly nothing changed since the last view: the record already holds exactly
        // the usable names (both sorted), and nothing is pruned or added.
        if self.usable_since.len() == usable.len()
            && self.usable_since.keys().zip(&usable).all(|(k, u)| k == u)
        {
            return;
        }
        let mut next = usable.iter().peekable();
        self.usable_since.retain(|name, _| {
            while next.next_if(|u| **u < name.as_str()).is_some() {}
            next.peek().is_some_and(|u| **u == name.as_str())
        });
        // What is left is usable: as many entries as usable names, none is new.
        if self.usable_since.len() < usable.len() {
            for name in usable {
                if !self.usable_since.contains_key(name) {
                    self.usable_since.insert(name.to_string(), now);
                }
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
    /// A PreferNoSchedule taint the own pod does not tolerate
    /// ([`OwnPod::untolerated_soft_taint`]): a replacement would be steered to an
    /// old node.
    SoftTaint(String),
    /// The cluster autoscaler marks it as a deletion candidate
    /// ([`Policy::avoid_deletion_candidates`]).
    DeletionCandidate,
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

impl<'a> Snapshot<'a> {
    fn is_self(&self, name: &str, uid: &str) -> bool {
        name == self.own.name || (!uid.is_empty() && uid == self.own.uid)
    }

    /// Whether `node` is a reason to move now; on success, how long it has been Ready.
    pub fn node_verdict(&self, node: &NodeSummary) -> Result<Duration, Reject> {
        self.verdict(node, &OnceCell::new(), None)
    }

    /// [`Snapshot::node_verdict`], the siblings' nodes looked up at most once for all the
    /// nodes of one evaluation: in `placed` if it was built of this view, else in `found`.
    fn verdict(
        &self,
        node: &NodeSummary,
        found: &OnceCell<SiblingNodes>,
        placed: Option<&SiblingNodes>,
    ) -> Result<Duration, Reject> {
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
        // The scheduler would put the replacement elsewhere: a wasted move. Siblings
        // re-created meanwhile say nothing about the node's room (the memory notes
        // the node usable only once the taint is gone).
        if let Some(t) = own.untolerated_soft_taint(node) {
            return Err(Reject::SoftTaint(t.key.clone()));
        }
        if self.policy.avoid_deletion_candidates && node.is_deletion_candidate() {
            return Err(Reject::DeletionCandidate);
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
        // The node could take a pod from when it became Ready and, as far as this
        // agent saw, schedulable (a startup taint or a cordon lifted later moves no
        // Kubernetes time). A caller that keeps no record counts from Ready.
        let usable = self.memory.usable_since.get(&node.name);
        let usable = usable.map_or(since, |t| since.max(*t));
        // The full rule: a sibling created since the node became usable was placed on an
        // old node ([`SiblingNodes::full_witness`]).
        if let Some((nodes, siblings)) = self.nodes.zip(self.siblings) {
            let placed = placed.filter(|p| p.fits(nodes, siblings));
            let placed =
                placed.unwrap_or_else(|| found.get_or_init(|| SiblingNodes::new(nodes, siblings)));
            if let Some(s) = placed.full_witness(siblings, own, scheduled, usable, &node.name) {
                return Err(Reject::Full {
                    sibling: s.name.clone(),
                });
            }
        }
        Ok(self.now.duration_since(since).unwrap_or_default())
    }

    /// The best node to move towards (Ready longest, then by name), the earliest
    /// time a settling node will count, and the nodes found full: one verdict per
    /// node.
    fn node_trigger(
        &self,
        placed: Option<&SiblingNodes>,
    ) -> (Option<Trigger>, Option<SystemTime>, Vec<FullNode<'a>>) {
        self.read_verdicts(&self.node_verdicts(placed))
    }

    /// [`Snapshot::node_trigger`], from the verdicts of the view's nodes.
    fn read_verdicts(
        &self,
        verdicts: &NodeVerdicts,
    ) -> (Option<Trigger>, Option<SystemTime>, Vec<FullNode<'a>>) {
        let nodes = self.nodes.unwrap_or_default();
        let trigger = (verdicts.best)
            .and_then(|(i, since)| Some((nodes.get(i)?, since)))
            .map(|(node, since)| Trigger::NewNode {
                node: node.name.clone(),
                ready_for: self.now.duration_since(since).unwrap_or_default(),
                images_pulled: !self.policy.required_images.is_empty(),
            });
        let full = (verdicts.full.iter())
            .filter_map(|(i, sibling)| {
                Some(FullNode {
                    node: nodes.get(*i)?,
                    sibling: sibling.clone(),
                })
            })
            .collect();
        (trigger, verdicts.next, full)
    }

    /// The verdict on each node of the view, as [`Snapshot::node_trigger`] reads them.
    fn node_verdicts(&self, placed: Option<&SiblingNodes>) -> NodeVerdicts {
        let mut verdicts = NodeVerdicts::default();
        if !self.policy.move_to_new_nodes {
            return verdicts;
        }
        let Some(nodes) = self.nodes else {
            return verdicts;
        };
        let found = OnceCell::new();
        let mut best: Option<(Duration, usize, SystemTime)> = None;
        // A node created before the own pod was scheduled (or with no schedule time) is
        // rejected before the full rule whatever else holds (own node, not Ready, not
        // newer: none of which counts here): skipped without comparing its name.
        let scheduled = self.own.scheduled_at;
        for (i, node) in nodes.iter().enumerate() {
            if scheduled.is_none_or(|s| node.created.is_none_or(|c| c < s)) {
                continue;
            }
            match self.verdict(node, &found, placed) {
                Ok(ready_for) => {
                    let better = best.is_none_or(|(d, b, _)| {
                        ready_for > d || (ready_for == d && node.name < nodes[b].name)
                    });
                    if better {
                        let since = self.now.checked_sub(ready_for).unwrap_or(self.now);
                        best = Some((ready_for, i, since));
                    }
                }
                Err(Reject::Settling { until }) => {
                    verdicts.next = Some(verdicts.next.map_or(until, |n| n.min(until)))
                }
                Err(Reject::Full { sibling }) => verdicts.full.push((i, sibling)),
                Err(_) => {}
            }
        }
        verdicts.best = best.map(|(_, i, since)| (i, since));
        verdicts
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
            .find(|s| (s.pending || s.terminating) && !self.is_self(&s.name, &s.uid))
        {
            return Some((Hold::SiblingBusy(busy.name.clone()), None));
        }
        None
    }
}

/// What the node trigger found in a view ([`node_verdicts`]), by the nodes' positions in
/// it: what a caller keeps while it knows that the view has changed nothing the verdicts
/// read ([`evaluate_verdicts`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeVerdicts {
    /// The node to move towards (Ready longest, then by name), and since when it is Ready.
    pub best: Option<(usize, SystemTime)>,
    /// The earliest time a settling node will count.
    pub next: Option<SystemTime>,
    /// The nodes found full, and the sibling that showed each.
    pub full: Vec<(usize, String)>,
}

/// The verdicts [`decide_placed`] reaches on the nodes of `s`, with `placed` as there.
pub fn node_verdicts(s: &Snapshot, placed: &SiblingNodes) -> NodeVerdicts {
    s.node_verdicts(Some(placed))
}

/// [`evaluate`], with the verdicts on the nodes found before: the same evaluation as long
/// as they are [`node_verdicts`] of `s`.
pub fn evaluate_verdicts<'a>(s: &Snapshot<'a>, verdicts: &NodeVerdicts) -> Evaluation<'a> {
    evaluate_from(s, |s| s.read_verdicts(verdicts))
}

/// A new node a sibling showed full ([`Reject::Full`]).
#[derive(Clone, Debug, PartialEq)]
pub struct FullNode<'a> {
    /// The node.
    pub node: &'a NodeSummary,
    /// The sibling that showed it.
    pub sibling: String,
}

/// A decision and what was found on the way to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation<'a> {
    /// What to do now ([`decide`]).
    pub decision: Decision,
    /// The nodes found full, in the order of the node view. Empty when no node
    /// was looked at: the own pod is finished or terminating, the node trigger is
    /// off, or there is no node view.
    pub full: Vec<FullNode<'a>>,
}

/// Decides what to do now. Pure: same snapshot, same answer.
pub fn decide(s: &Snapshot) -> Decision {
    evaluate(s).decision
}

/// [`decide`], with the nodes found full on the way: one verdict per node per
/// evaluation, for the decision and for the agent's report alike.
pub fn evaluate<'a>(s: &Snapshot<'a>) -> Evaluation<'a> {
    evaluate_placed(s, None)
}

/// [`decide`], with the siblings' nodes looked up once for every agent deciding on the
/// same view (the simulator steps every agent on each change of the view): the same
/// decision as [`decide`]. `placed` must be [`SiblingNodes::new`] of the snapshot's
/// nodes and siblings as they are now: it recognises them by address and length (other
/// slices: it is ignored), so a view changed in place needs a new one.
pub fn decide_placed(s: &Snapshot, placed: &SiblingNodes) -> Decision {
    evaluate_placed(s, Some(placed)).decision
}

/// Where each sibling of a view is placed, as the full rule reads it, and the siblings'
/// names and uids hashed: built once per view and shared by every snapshot of that view
/// ([`decide_placed`]), so that each evaluation compares mostly numbers, not names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiblingNodes {
    /// The slices it was built from (address and length), to recognise them.
    nodes: (usize, usize),
    siblings: (usize, usize),
    /// Per sibling: the earliest creation time of the view's nodes of its node's name
    /// (`None`: no such node, or no time).
    created: Vec<Option<SystemTime>>,
    /// Per sibling: [`fnv1a`] of its name, and of its uid, so that looking for the own
    /// pod among the siblings compares numbers first.
    name_hash: Vec<u64>,
    uid_hash: Vec<u64>,
    /// The positions of the siblings with a creation time, newest first.
    newest_first: Vec<u32>,
}

/// The order of [`SiblingNodes::newest_first`]: the latest creation first, then by position.
fn newest_first_key(siblings: &[Sibling], i: u32) -> (std::cmp::Reverse<Option<SystemTime>>, u32) {
    (std::cmp::Reverse(siblings[i as usize].created), i)
}

/// The 64-bit FNV-1a hash of `s`: a fixed, cheap function (no per-process key), only
/// ever compared before the strings themselves.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl SiblingNodes {
    /// Looks up the node of each sibling in `nodes`.
    pub fn new(nodes: &[NodeSummary], siblings: &[Sibling]) -> Self {
        let mut by_created: BTreeMap<&str, SystemTime> = BTreeMap::new();
        for n in nodes {
            if let Some(c) = n.created {
                by_created
                    .entry(n.name.as_str())
                    .and_modify(|t| *t = (*t).min(c))
                    .or_insert(c);
            }
        }
        let mut newest_first: Vec<u32> = (siblings.iter().zip(0u32..))
            .filter(|(s, _)| s.created.is_some())
            .map(|(_, i)| i)
            .collect();
        newest_first.sort_unstable_by_key(|i| newest_first_key(siblings, *i));
        SiblingNodes {
            nodes: (nodes.as_ptr() as usize, nodes.len()),
            siblings: (siblings.as_ptr() as usize, siblings.len()),
            created: siblings
                .iter()
                .map(|s| by_created.get(s.node_name.as_deref()?).copied())
                .collect(),
            name_hash: siblings.iter().map(|s| fnv1a(&s.name)).collect(),
            uid_hash: siblings.iter().map(|s| fnv1a(&s.uid)).collect(),
            newest_first,
        }
    }

    /// [`SiblingNodes::new`] of `nodes` and `siblings`, from `self` built of the same
    /// nodes and of as many siblings, which differed from `siblings` only at the positions
    /// `changed`: only those are looked up again (the simulator changes a sibling or two
    /// between views).
    pub fn with_changes(
        &self,
        nodes: &[NodeSummary],
        siblings: &[Sibling],
        changed: &[usize],
    ) -> SiblingNodes {
        if self.created.len() != siblings.len() {
            return SiblingNodes::new(nodes, siblings);
        }
        let mut changed = changed.to_vec();
        changed.sort_unstable();
        changed.dedup();
        let mut next = self.clone();
        next.nodes = (nodes.as_ptr() as usize, nodes.len());
        next.siblings = (siblings.as_ptr() as usize, siblings.len());
        next.newest_first
            .retain(|i| changed.binary_search(&(*i as usize)).is_err());
        for i in changed {
            let s = &siblings[i];
            next.created[i] = s.node_name.as_deref().and_then(|name| {
                (nodes.iter())
                    .filter(|n| n.name == name)
                    .filter_map(|n| n.created)
                    .min()
            });
            next.name_hash[i] = fnv1a(&s.name);
            next.uid_hash[i] = fnv1a(&s.uid);
            if s.created.is_some() {
                let i = i as u32;
                let key = newest_first_key(siblings, i);
                let at =
                    (next.newest_first).partition_point(|j| newest_first_key(siblings, *j) < key);
                next.newest_first.insert(at, i);
            }
        }
        next
    }

    /// Whether it was built from these very slices.
    fn fits(&self, nodes: &[NodeSummary], siblings: &[Sibling]) -> bool {
        self.nodes == (nodes.as_ptr() as usize, nodes.len())
            && self.siblings == (siblings.as_ptr() as usize, siblings.len())
    }

    /// The sibling that shows `node` full for the own pod `own` (scheduled at `scheduled`)
    /// ([`Reject::Full`]): the first, in the view's order, that is not the own pod,
    /// was created after `usable`, and was placed on an old node (one created before the
    /// own pod was scheduled, or the own node) other than `node`. A sibling on another new
    /// node, or on a node not in the view (deleted, or outside the node selector), says
    /// nothing about a node. Only the siblings created after `usable` are looked at,
    /// newest first: mostly none.
    fn full_witness<'a>(
        &self,
        siblings: &'a [Sibling],
        own: &OwnPod,
        scheduled: SystemTime,
        usable: SystemTime,
        node: &str,
    ) -> Option<&'a Sibling> {
        let after = |i: usize| siblings[i].created.is_some_and(|c| c > usable);
        // The siblings created after `usable` lead `newest_first`.
        let count = self.newest_first.partition_point(|i| after(*i as usize));
        if count == 0 {
            return None;
        }
        let own_node = own.node_name.as_deref();
        // The own pod: its name, or its uid when it has one ([`Snapshot::is_self`]),
        // the hashes compared first.
        let (name, uid) = (fnv1a(&own.name), fnv1a(&own.uid));
        let is_self = |i: usize, s: &Sibling| {
            (self.name_hash[i] == name && s.name == own.name)
                || (!own.uid.is_empty() && self.uid_hash[i] == uid && s.uid == own.uid)
        };
        let witness = |i: usize| {
            let s = &siblings[i];
            let on_old = self.created[i].is_some_and(|c| c < scheduled)
                || own_node.is_some_and(|o| s.node_name.as_deref() == Some(o));
            on_old && !is_self(i, s) && s.node_name.as_deref().is_some_and(|n| n != node)
        };
        // The first in the view's order: among few such siblings, the least position of
        // those that are witnesses; among many, the first witness in the view's order.
        let first = if 4 * count <= siblings.len() {
            (self.newest_first[..count].iter())
                .map(|i| *i as usize)
                .filter(|i| witness(*i))
                .min()
        } else {
            (0..siblings.len()).find(|i| after(*i) && witness(*i))
        };
        first.map(|i| &siblings[i])
    }
}

fn evaluate_placed<'a>(s: &Snapshot<'a>, placed: Option<&SiblingNodes>) -> Evaluation<'a> {
    evaluate_from(s, |s| s.node_trigger(placed))
}

/// The evaluation, with `node_trigger` the node trigger, the earliest time a settling node
/// will count and the nodes found full ([`Snapshot::node_trigger`]).
fn evaluate_from<'a>(
    s: &Snapshot<'a>,
    node_trigger: impl FnOnce(&Snapshot<'a>) -> (Option<Trigger>, Option<SystemTime>, Vec<FullNode<'a>>),
) -> Evaluation<'a> {
    if s.memory.finished || s.own.terminating {
        return Evaluation {
            decision: Decision::Wait {
                until: None,
                hold: Some(Hold::Finished),
            },
            full: Vec::new(),
        };
    }
    let deadline = match (s.memory.lifetime, s.own.started_at) {
        (Some(l), Some(start)) if !l.is_zero() => Some((later(start, l), l)),
        _ => None,
    };
    let (node_trigger, next_settled, full) = node_trigger(s);
    let decided = |decision| Evaluation { decision, full };
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
        return decided(Decision::Wait { until, hold });
    };
    if let Some((hold, until)) = s.hold() {
        return decided(Decision::Wait {
            until,
            hold: Some(hold),
        });
    }
    decided(match &s.memory.armed {
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
    })
}

#[cfg(test)]
mod tests;
