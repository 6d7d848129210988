//! The discrete-event loop: users arrive and leave, nodes come and go, the
//! schedulers bind pods, the autoscaler scans, and every running placeholder's
//! agent decides with the real decision function whenever its timer fires or
//! what it watches (nodes, sibling placeholders) changes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;
use std::time::SystemTime;

use selfdestruct_decision::model::{NodeSummary, NodeTerm, Sibling, Toleration};
use selfdestruct_decision::{Decision, Hold, NodeVerdicts, Outcome, SiblingNodes, Trigger};

use crate::autoscaler;
use crate::cluster::{self, Node, NodeSet, Nodes, Phase, User};
use crate::metrics::{Log, MoveReason, MoveRecord, Sample, Summary, summarise};
use crate::peers;
use crate::placeholders::{
    Agent, Known, Placeholder, PodState, Settled, Verdicts, sim_ms_ceil, system_time,
};
use crate::random::{Random, Stream};
use crate::scenario::{Arrival, HOUR, MIN, Ms, Resources, SEC, Scenario, Setup};

/// After the measured window, arrivals stop and the run continues until every
/// user runs, but no longer than this.
const DRAIN_LIMIT: Ms = 12 * HOUR;
/// Full recount of the per-node counters every this often (when checking).
const RECOUNT_EVERY: Ms = 10 * MIN;

/// How a view's siblings changed since the view before, as far as a [`Settled`]
/// decision reads them.
#[derive(Debug, Default)]
struct SiblingChange {
    /// The placed siblings that left (their pods re-created), by replica.
    gone: Vec<usize>,
    /// The nodes siblings were placed on (bound): each node's name and creation time in
    /// the view (the earliest of that name's, as the full rule reads it).
    placed: Vec<(String, Option<SystemTime>)>,
}

/// How many views' sibling changes are kept ([`Engine::same_decision`]); an agent
/// that last decided on an older view decides again.
const SIBLING_CHANGES: usize = 64;

/// The result of one run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The row of the table.
    pub summary: Summary,
    /// Everything logged (moves, samples ...).
    pub log: Log,
    /// Final user states.
    pub users: Vec<User>,
    /// Final node states.
    pub nodes: Vec<Node>,
    /// Sorted times to running of the measured users.
    pub ttr: Vec<Ms>,
    /// When the run was given up because its [`Stop`] was reached (the summary then counts
    /// only what happened until then); None for a run to the end.
    pub stopped_at: Option<Ms>,
}

/// When a run may end early: a search that only asks whether a count meets its target needs
/// no more once the target is missed, and `delayed` and `cold` only grow during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stop {
    /// Stop once more measured users than this waited for room.
    pub delayed: Option<u64>,
    /// Stop once more measured users than this started cold.
    pub cold: Option<u64>,
}

impl Stop {
    /// Run to the end.
    pub const NEVER: Stop = Stop {
        delayed: None,
        cold: None,
    };

    /// Whether `delayed` and `cold` measured users so far are past this.
    fn reached(&self, delayed: u64, cold: u64) -> bool {
        self.delayed.is_some_and(|n| delayed > n) || self.cold.is_some_and(|n| cold > n)
    }
}

/// Runs one row: scenario `sc` with row `setup` on the arrivals `arrivals`.
/// With `check`, invariants are checked after every event (violations end up in
/// the summary); the simulator's own debug builds always check.
pub fn simulate(
    sc: &Scenario,
    setup: &Setup,
    arrivals: &[Arrival],
    seed: u64,
    check: bool,
) -> RunResult {
    Engine::new(sc, setup, arrivals, seed, check).run()
}

/// [`simulate`], given up as soon as `stop` is reached (`RunResult::stopped_at`).
pub fn simulate_until(
    sc: &Scenario,
    setup: &Setup,
    arrivals: &[Arrival],
    seed: u64,
    check: bool,
    stop: Stop,
) -> RunResult {
    let mut engine = Engine::new(sc, setup, arrivals, seed, check);
    engine.stop = stop;
    engine.run()
}

/// [`simulate`] with the StatefulSet's replicas set over time (`selfdestruct schedule`):
/// `steps` are (time, replicas), sorted, the first at 0. The StatefulSet removes the
/// highest ordinals on a scale-down (a running placeholder frees its room at once) and
/// re-creates them on a scale-up; `setup.replicas` is not used.
pub fn simulate_scheduled(
    sc: &Scenario,
    setup: &Setup,
    arrivals: &[Arrival],
    seed: u64,
    check: bool,
    steps: &[(Ms, u32)],
) -> RunResult {
    Engine::scheduled(sc, setup, arrivals, seed, check, steps).run()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival(usize),
    SessionEnd(usize),
    NodeReady(usize),
    ImagePulled(usize),
    GateOpen(usize),
    NodeGone(usize),
    /// A step of the autoscaler's deletion of a node ([`Engine::deletion_step`]).
    Deletion(usize),
    Recreate(usize),
    Wake(usize, u64),
    /// An autoscaler loop; only the latest one scheduled (by generation) runs.
    Scan(u64),
    /// The rebalancer's loop or a descheduler run.
    PeerScan,
    Sample,
    /// The scheduled replicas change to `steps[i]`.
    Rescale(usize),
}

/// What the agents watch, rebuilt after every change.
struct View {
    nodes: Rc<Vec<NodeSummary>>,
    siblings: Rc<Vec<Sibling>>,
    /// The siblings' nodes, looked up once for every agent that decides on this view
    /// ([`View::placed`]).
    placed: std::cell::OnceCell<SiblingNodes>,
    /// Changes with `nodes` only (not with the siblings): the usable nodes
    /// ([`Engine::usable_version`]) are found again only on a new version.
    version: u64,
    /// Counts the views built.
    number: u64,
}

impl View {
    fn placed(&self) -> &SiblingNodes {
        self.placed
            .get_or_init(|| SiblingNodes::new(&self.nodes, &self.siblings))
    }
}

/// What [`selfdestruct_decision::model::OwnPod::would_land_on`] reads of the own pod:
/// tolerations, nodeSelector, required node affinity.
type Template = (
    Vec<Toleration>,
    std::collections::BTreeMap<String, String>,
    Vec<NodeTerm>,
);

struct Engine<'a> {
    sc: &'a Scenario,
    setup: &'a Setup,
    arrivals: &'a [Arrival],
    check: bool,
    now: Ms,
    queue: BinaryHeap<Reverse<(Ms, u64, Event)>>,
    seq: u64,
    nodes: Nodes,
    users: Vec<User>,
    pending_users: VecDeque<usize>,
    placeholders: Vec<Placeholder>,
    /// Per placeholder: the move record waiting for the replacement's node.
    landing: Vec<Option<usize>>,
    node_rng: Random,
    agent_rng: Random,
    sched_dirty: bool,
    view_dirty: bool,
    view: Option<Rc<View>>,
    /// The node view of the last view, its version ([`View::version`]), and what it was
    /// built from: per existing node, its index, phase, image, gate and soft taint.
    nodes_view: Option<Rc<Vec<NodeSummary>>>,
    nodes_version: u64,
    node_keys: Vec<(usize, Phase, bool, bool, bool)>,
    /// The names of the nodes a re-created pod of the agents' template would land on
    /// ([`selfdestruct_decision::model::OwnPod::would_land_on`]) in the node view of
    /// version `.0`, sorted, once each, and their own version: a new one only when that
    /// list (or the template) changed ([`Engine::usable_version`]).
    usable: Option<(u64, Template, Vec<String>, u64)>,
    usable_versions: u64,
    /// The siblings of the last view, and what they were built from: the replicas scaled
    /// away, and per placeholder its incarnation and state.
    siblings: Rc<Vec<Sibling>>,
    siblings_absent: Vec<bool>,
    sibling_keys: Vec<Option<(u32, PodState)>>,
    /// The views built, and of the last few ([`SIBLING_CHANGES`]) how their siblings
    /// changed since the view before: `None` when the list was rebuilt (replicas scaled).
    views: u64,
    sibling_changes: VecDeque<(u64, Option<SiblingChange>)>,
    /// The last view's siblings' nodes, if looked up, and its node version: the next
    /// view with the same nodes updates them where its siblings changed.
    last_placed: Option<(u64, SiblingNodes)>,
    last_scale_up: Option<Ms>,
    /// The autoscaler's deletions in progress, from the taint to the node's disappearance.
    deleting: Vec<Deletion>,
    last_recount: Ms,
    log: Log,
    /// Requests of one placeholder pod (a user's; a node's for balloons).
    placeholder_size: Resources,
    /// The rebalancer's view: nodes it has seen Ready.
    known_ready: Vec<bool>,
    /// The generation of the next autoscaler loop (a triggered loop replaces the timer's).
    loop_gen: u64,
    /// Per placeholder: the scheduler has marked its current (Pending) pod unschedulable.
    unschedulable: Vec<bool>,
    /// A placeholder may be Pending: false once the scheduler found none, until one is
    /// re-created (the scheduler runs on every arrival and every session's end).
    placeholders_pending: bool,
    /// Scheduled replicas over time (empty: `setup.replicas` throughout).
    steps: &'a [(Ms, u32)],
    /// Per placeholder: scaled away by the schedule (no pod, not a sibling).
    absent: Vec<bool>,
    /// When to give up the run.
    stop: Stop,
    /// Measured users (arrived in the measured window) delayed so far, and started cold.
    delayed: u64,
    cold: u64,
}

/// A node the autoscaler is deleting (`core/scaledown/actuation`).
#[derive(Clone, Copy, Debug)]
struct Deletion {
    node: usize,
    /// It had pods to move (a drain, of which one at a time), or was empty.
    drain: bool,
    /// Once the evictions started: when they are given up (`--max-pod-eviction-time` after
    /// the first).
    deadline: Option<Ms>,
}

/// How many placeholder pods a row runs: none for a buffer, whole-node balloons for
/// `replicas` users' worth of room, else `replicas`.
pub fn placeholder_pods(sc: &Scenario, setup: &Setup) -> u32 {
    setup.peer.pods(setup.replicas, sc.pods_per_node())
}

impl<'a> Engine<'a> {
    fn new(
        sc: &'a Scenario,
        setup: &'a Setup,
        arrivals: &'a [Arrival],
        seed: u64,
        check: bool,
    ) -> Self {
        Self::scheduled(sc, setup, arrivals, seed, check, &[])
    }

    /// An engine whose replicas follow `steps` (empty: `setup.replicas`).
    fn scheduled(
        sc: &'a Scenario,
        setup: &'a Setup,
        arrivals: &'a [Arrival],
        seed: u64,
        check: bool,
        steps: &'a [(Ms, u32)],
    ) -> Self {
        let pods = if steps.is_empty() {
            placeholder_pods(sc, setup) as usize
        } else {
            steps.iter().map(|s| s.1).max().unwrap_or(0) as usize
        };
        let first = steps.first().map_or(pods, |s| s.1 as usize);
        Engine {
            sc,
            setup,
            arrivals,
            check: check || cfg!(debug_assertions),
            now: 0,
            queue: BinaryHeap::new(),
            seq: 0,
            nodes: Nodes::default(),
            users: arrivals
                .iter()
                .map(|a| User {
                    arrival: a.at,
                    session: a.session,
                    ..User::default()
                })
                .collect(),
            pending_users: VecDeque::new(),
            placeholders: (0..pods).map(|i| Placeholder::new(i, 0)).collect(),
            landing: vec![None; pods],
            node_rng: Random::new(seed, Stream::Nodes),
            agent_rng: Random::new(seed, Stream::Agents),
            sched_dirty: true,
            view_dirty: true,
            view: None,
            nodes_view: None,
            nodes_version: 0,
            usable: None,
            usable_versions: 0,
            node_keys: Vec::new(),
            siblings: Rc::new(Vec::new()),
            // Unlike any `absent`: the first view builds the siblings.
            siblings_absent: vec![true; pods + 1],
            sibling_keys: Vec::new(),
            views: 0,
            sibling_changes: VecDeque::new(),
            last_placed: None,
            last_scale_up: None,
            deleting: Vec::new(),
            last_recount: 0,
            log: Log::default(),
            placeholder_size: setup.peer.pod_size(sc),
            known_ready: Vec::new(),
            loop_gen: 0,
            unschedulable: vec![false; pods],
            placeholders_pending: true,
            steps,
            absent: (0..pods).map(|i| i >= first).collect(),
            stop: Stop::NEVER,
            delayed: 0,
            cold: 0,
        }
    }

    /// Whether user `u` arrived in the measured window.
    fn measured(&self, u: usize) -> bool {
        (self.sc.warmup..self.sc.end()).contains(&self.users[u].arrival)
    }

    /// Schedules the autoscaler's next loop at `at`, replacing the one scheduled before.
    fn schedule_loop(&mut self, at: Ms) {
        self.loop_gen += 1;
        let generation = self.loop_gen;
        self.push(at, Event::Scan(generation));
    }

    /// A pod has just become unschedulable: with frequent loops the autoscaler's pod observer
    /// starts a loop at once (`cluster-autoscaler/loop/trigger.go`).
    fn pod_unschedulable(&mut self) {
        if self.sc.autoscaler.frequent_loops {
            self.schedule_loop(self.now);
        }
    }

    fn push(&mut self, at: Ms, ev: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at.max(self.now), self.seq, ev)));
    }

    fn violation(&mut self, what: String) {
        if self.log.violations.len() < 20 {
            self.log
                .violations
                .push(format!("t={}s: {what}", self.now / SEC));
        }
    }

    fn run(mut self) -> RunResult {
        let initial = self.sc.autoscaler.min_nodes.max(1) as usize;
        for i in 0..initial {
            self.nodes
                .push(Node::initial(node_name(i), self.sc.node, 0));
        }
        if !self.arrivals.is_empty() {
            self.push(self.arrivals[0].at, Event::Arrival(0));
        }
        self.schedule_loop(self.sc.autoscaler.scan);
        if let Some(every) = self.setup.peer.scan_every(&self.sc.peers) {
            self.push(every, Event::PeerScan);
        }
        self.push(self.sc.warmup, Event::Sample);
        for (i, &(at, _)) in self.steps.iter().enumerate().skip(1) {
            self.push(at, Event::Rescale(i));
        }
        self.settle();
        let end = self.sc.end();
        let mut stopped_at = None;
        while let Some(Reverse((t, _, ev))) = self.queue.pop() {
            if t >= end && self.pending_users.is_empty() {
                break;
            }
            if t > end + DRAIN_LIMIT {
                let n = self.pending_users.len();
                self.violation(format!(
                    "{n} users still pending {}h after the end",
                    DRAIN_LIMIT / HOUR
                ));
                break;
            }
            self.now = t;
            self.handle(ev);
            self.settle();
            if self.check {
                self.check_invariants();
            }
            if (self.sc.warmup..end).contains(&self.now) {
                let existing = self.nodes.count() as u32;
                self.log.peak_nodes = self.log.peak_nodes.max(existing);
            }
            if self.stop.reached(self.delayed, self.cold) {
                stopped_at = Some(self.now);
                break;
            }
        }
        let unfinished = self.users.iter().filter(|u| u.running_at.is_none()).count();
        if unfinished > 0 && stopped_at.is_none() {
            self.violation(format!("{unfinished} users never ran"));
        }
        let summary = summarise(
            &self.setup.name,
            self.setup.replicas,
            &self.users,
            self.nodes.all(),
            &self.log,
            (self.sc.warmup, end),
            (self.sc.late_after).map(|after| (after, self.sc.preemption_delay)),
        );
        let ttr = crate::metrics::times_to_running(&self.users, self.sc.warmup, end);
        RunResult {
            summary,
            ttr,
            stopped_at,
            log: self.log,
            users: self.users,
            nodes: self.nodes.into_vec(),
        }
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Arrival(u) => {
                self.pending_users.push_back(u);
                self.sched_dirty = true;
                if u + 1 < self.arrivals.len() {
                    self.push(self.arrivals[u + 1].at, Event::Arrival(u + 1));
                }
            }
            Event::SessionEnd(u) => {
                let user = &mut self.users[u];
                user.ended = true;
                if let Some(n) = user.node {
                    let node = &mut self.nodes[n];
                    node.account(&self.sc.user, false);
                    node.users -= 1;
                }
                self.sched_dirty = true;
            }
            Event::NodeReady(n) => {
                let node = &mut self.nodes[n];
                if node.phase == Phase::Provisioning {
                    node.phase = Phase::Ready;
                    let (image_at, gate_at, gated) = (node.image_at, node.gate_open_at, node.gated);
                    self.push(image_at, Event::ImagePulled(n));
                    if gated {
                        self.push(gate_at, Event::GateOpen(n));
                    }
                    self.sched_dirty = true;
                    self.view_dirty = true;
                }
            }
            Event::ImagePulled(n) => {
                self.nodes[n].image = true;
                self.view_dirty = true;
            }
            Event::GateOpen(n) => {
                self.nodes[n].gated = false;
                self.sched_dirty = true;
                self.view_dirty = true;
            }
            Event::NodeGone(n) => {
                let node = &self.nodes[n];
                if node.users > 0 || node.placeholders > 0 {
                    let (u, p) = (node.users, node.placeholders);
                    self.violation(format!(
                        "removed {} with {u} users, {p} placeholders",
                        node.name
                    ));
                }
                self.nodes.remove(n, self.now);
                self.deleting.retain(|d| d.node != n);
                self.view_dirty = true;
            }
            Event::Deletion(n) => self.deletion_step(n),
            Event::Recreate(p) => {
                let ph = &mut self.placeholders[p];
                if matches!(ph.state, PodState::Terminating { .. }) && !self.absent[p] {
                    ph.incarnation += 1;
                    ph.state = PodState::Pending { created: self.now };
                    self.placeholders_pending = true;
                    self.unschedulable[p] = false;
                    self.sched_dirty = true;
                    self.view_dirty = true;
                }
            }
            Event::Wake(p, generation) => {
                let due = self.placeholders[p]
                    .agent
                    .as_ref()
                    .is_some_and(|a| a.generation == generation);
                if due {
                    if let Some(a) = self.placeholders[p].agent.as_mut() {
                        a.wake = None;
                    }
                    self.step_agent(p);
                }
            }
            Event::Scan(generation) => {
                if generation == self.loop_gen {
                    let scaled_up = self.autoscale();
                    // After a scale-up the next loop starts at once (frequent loops); otherwise
                    // the timer (or an unschedulable pod) starts it.
                    let next = if scaled_up && self.sc.autoscaler.frequent_loops {
                        self.now
                    } else {
                        self.now + self.sc.autoscaler.scan
                    };
                    self.schedule_loop(next);
                }
            }
            Event::PeerScan => {
                self.peer_scan();
                if let Some(every) = self.setup.peer.scan_every(&self.sc.peers) {
                    self.push(self.now + every.max(1), Event::PeerScan);
                }
            }
            Event::Sample => {
                self.sample();
                if self.now + MIN < self.sc.end() {
                    self.push(self.now + MIN, Event::Sample);
                }
            }
            Event::Rescale(i) => self.rescale(self.steps[i].1 as usize),
        }
    }

    /// The StatefulSet scaled to `want`: ordinals from `want` up go (a running pod
    /// frees its room), those below come back as new Pending pods.
    fn rescale(&mut self, want: usize) {
        for p in 0..self.placeholders.len() {
            let keep = p < want;
            if keep != self.absent[p] {
                continue;
            }
            self.absent[p] = !keep;
            let now = self.now;
            let ph = &mut self.placeholders[p];
            match (keep, ph.state) {
                (false, PodState::Running { node, created, .. }) => {
                    let n = &mut self.nodes[node];
                    n.account(&self.placeholder_size, false);
                    n.placeholders -= 1;
                    ph.state = PodState::Terminating {
                        node,
                        created,
                        until: now,
                    };
                    ph.agent = None;
                    self.landing[p] = None;
                }
                (true, PodState::Terminating { .. }) => {
                    ph.incarnation += 1;
                    ph.state = PodState::Pending { created: now };
                }
                _ => {}
            }
        }
        self.placeholders_pending = true;
        self.sched_dirty = true;
        self.view_dirty = true;
    }

    /// Runs the schedulers and the agents until nothing changes.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            if self.sched_dirty {
                self.sched_dirty = false;
                self.schedule();
            } else if self.view_dirty {
                self.view_dirty = false;
                self.last_placed = (self.view.take())
                    .and_then(Rc::into_inner)
                    .and_then(|v| Some((v.version, v.placed.into_inner()?)));
                for p in 0..self.placeholders.len() {
                    if self.placeholders[p].agent.is_some() && !self.same_decision(p) {
                        self.step_agent(p);
                    }
                }
            } else {
                return;
            }
        }
        self.violation("the schedulers and agents never settled".into());
    }

    // ----- schedulers -----

    fn schedule(&mut self) {
        let pod = self.sc.user;
        while let Some(&u) = self.pending_users.front() {
            if let Some(n) = cluster::place_user(
                &self.nodes,
                &pod,
                self.sc.user_placement,
                self.sc.image_size_mib,
            ) {
                self.pending_users.pop_front();
                self.bind_user(u, n, false);
            } else if let Some((n, victims)) = cluster::preemption_node(
                &self.nodes,
                &pod,
                &self.placeholder_size,
                &self.placeholder_starts(),
            ) {
                for v in self.victims_on(n, victims) {
                    self.evict(v);
                    self.log.preemptions.push(self.now);
                }
                self.pending_users.pop_front();
                self.bind_user(u, n, true);
            } else {
                // Every user requests the same: none of the others fits either.
                let mut new = false;
                for i in 0..self.pending_users.len() {
                    let w = self.pending_users[i];
                    if !self.users[w].delayed {
                        new = true;
                        self.users[w].delayed = true;
                        self.delayed += u64::from(self.measured(w));
                    }
                }
                if new {
                    self.pod_unschedulable();
                }
                break;
            }
        }
        if !self.placeholders_pending {
            return;
        }
        let mut pending: Vec<(Ms, usize)> = self
            .placeholders
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p.state {
                PodState::Pending { created } if !self.absent[i] => Some((created, i)),
                _ => None,
            })
            .collect();
        self.placeholders_pending = !pending.is_empty();
        pending.sort_unstable();
        let spreading = self.sc.default_spreading.then_some(self.sc.spread_weight);
        let mut new = false;
        for (_, p) in pending {
            match cluster::least_allocated(&self.nodes, &self.placeholder_size, spreading) {
                Some(n) => self.bind_placeholder(p, n),
                None => {
                    new |= !self.unschedulable[p];
                    self.unschedulable[p] = true;
                }
            }
        }
        if new {
            self.pod_unschedulable();
        }
    }

    /// Per node, the start times of its running placeholders, newest first.
    fn placeholder_starts(&self) -> Vec<Vec<Ms>> {
        let mut starts = vec![Vec::new(); self.nodes.len()];
        for p in &self.placeholders {
            if let PodState::Running { node, bound_at, .. } = p.state {
                starts[node].push(bound_at);
            }
        }
        for s in &mut starts {
            s.sort_unstable_by(|a, b| b.cmp(a));
        }
        starts
    }

    /// The `count` placeholders a preempting user evicts on node `n`: the most recently started
    /// (the scheduler reprieves the older ones first).
    fn victims_on(&self, n: usize, count: usize) -> Vec<usize> {
        let mut on_node: Vec<(Ms, usize)> = self
            .placeholders
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p.state {
                PodState::Running { node, bound_at, .. } if node == n => Some((bound_at, i)),
                _ => None,
            })
            .collect();
        on_node.sort_unstable_by(|a, b| b.cmp(a));
        on_node.into_iter().take(count).map(|(_, i)| i).collect()
    }

    fn bind_user(&mut self, u: usize, n: usize, preempted: bool) {
        let now = self.now;
        let node = &mut self.nodes[n];
        node.account(&self.sc.user, true);
        node.users += 1;
        let cold = !node.image;
        let image_at = node.image_at;
        self.cold += u64::from(cold && self.measured(u));
        let user = &mut self.users[u];
        user.node = Some(n);
        user.bound_at = Some(now);
        user.cold = cold;
        user.preempted = preempted;
        let start = if preempted {
            now + self.sc.preemption_delay
        } else {
            now + self.sc.start_delay
        };
        let running = if cold {
            start.max(image_at + self.sc.start_delay)
        } else {
            start
        };
        user.running_at = Some(running);
        let end = running + user.session;
        self.push(end, Event::SessionEnd(u));
    }

    fn bind_placeholder(&mut self, p: usize, n: usize) {
        let now = self.now;
        let node = &mut self.nodes[n];
        node.account(&self.placeholder_size, true);
        node.placeholders += 1;
        let node_name = node.name.clone();
        let warm = node.image;
        let created = match self.placeholders[p].state {
            PodState::Pending { created } => created,
            _ => now,
        };
        let draw = self.agent_rng.uniform();
        let ph = &mut self.placeholders[p];
        ph.state = PodState::Running {
            node: n,
            created,
            bound_at: now,
        };
        ph.agent = self.setup.runs_agent().then(|| {
            Agent::start(
                ph,
                &node_name,
                now,
                self.setup.gate,
                &self.setup.policy,
                draw,
            )
        });
        if let Some(m) = self.landing[p].take() {
            self.log.moves[m].landed = Some(node_name);
            self.log.moves[m].landed_warm = Some(warm);
        }
        self.view_dirty = true;
    }

    /// Evicts (or preempts) a running placeholder: its node frees the requests,
    /// the agent stops, the StatefulSet re-creates the pod after `recreate_delay`.
    fn evict(&mut self, p: usize) {
        let PodState::Running { node, created, .. } = self.placeholders[p].state else {
            return;
        };
        let n = &mut self.nodes[node];
        n.account(&self.placeholder_size, false);
        n.placeholders -= 1;
        let until = self.now + self.sc.recreate_delay;
        let ph = &mut self.placeholders[p];
        ph.state = PodState::Terminating {
            node,
            created,
            until,
        };
        ph.agent = None;
        self.push(until, Event::Recreate(p));
        self.sched_dirty = true;
        self.view_dirty = true;
    }

    // ----- agents -----

    fn view(&mut self) -> Rc<View> {
        if let Some(v) = &self.view {
            return Rc::clone(v);
        }
        // The node view changes far less often than the siblings do: it is rebuilt only
        // when an existing node's phase, image or gate changed, or the set changed.
        let keys =
            || (self.nodes.live()).map(|(i, n)| (i, n.phase, n.image, n.gated, n.soft_tainted));
        let same = self.nodes_view.is_some() && keys().eq(self.node_keys.iter().copied());
        if !same {
            let nodes: Vec<NodeSummary> = (self.nodes.live())
                .map(|(_, n)| n.summary(system_time))
                .collect();
            self.node_keys = keys().collect();
            self.nodes_version += 1;
            self.nodes_view = Some(Rc::new(nodes));
        }
        let nodes = Rc::clone(self.nodes_view.as_ref().expect("built above"));
        let version = self.nodes_version;
        // The siblings: only the entries of placeholders whose pod changed are rebuilt (in
        // place, once the last view is dropped), unless the replicas changed.
        let nodes_all = self.nodes.all();
        let name = |i: usize| nodes_all[i].name.clone();
        let mut change: Option<SiblingChange> = Some(SiblingChange::default());
        // The positions in the list that changed (`None`: all).
        let mut changed: Option<Vec<usize>> = Some(Vec::new());
        if self.siblings_absent != self.absent {
            change = None;
            changed = None;
            self.siblings_absent.clone_from(&self.absent);
            self.sibling_keys = vec![None; self.placeholders.len()];
            self.siblings = Rc::new(
                self.placeholders
                    .iter()
                    .zip(&self.absent)
                    .filter(|(_, gone)| !**gone)
                    .map(|(p, _)| p.sibling(name))
                    .collect(),
            );
            for (p, ph) in self.placeholders.iter().enumerate() {
                self.sibling_keys[p] = Some((ph.incarnation, ph.state));
            }
        } else {
            let list = Rc::make_mut(&mut self.siblings);
            let mut j = 0;
            for (p, ph) in self.placeholders.iter().enumerate() {
                if self.absent[p] {
                    continue;
                }
                let key = Some((ph.incarnation, ph.state));
                if self.sibling_keys[p] != key {
                    let new = ph.sibling(name);
                    let old = &list[j];
                    if let Some(c) = change.as_mut() {
                        let other = old.uid != new.uid
                            || old.node_name != new.node_name
                            || old.created != new.created;
                        if old.node_name.is_some() && other {
                            c.gone.push(p);
                        }
                        if let Some(name) = new.node_name.as_deref()
                            && other
                        {
                            let created = (nodes.iter())
                                .filter(|n| n.name == name)
                                .filter_map(|n| n.created)
                                .min();
                            c.placed.push((name.to_string(), created));
                        }
                    }
                    list[j] = new;
                    self.sibling_keys[p] = key;
                    if let Some(c) = changed.as_mut() {
                        c.push(j);
                    }
                }
                j += 1;
            }
        }
        let siblings = Rc::clone(&self.siblings);
        let placed = std::cell::OnceCell::new();
        if let Some((v, last)) = self.last_placed.take()
            && v == version
            && let Some(changed) = changed
        {
            let _ = placed.set(last.with_changes(&nodes, &siblings, &changed));
        }
        self.views += 1;
        if self.sibling_changes.len() == SIBLING_CHANGES {
            self.sibling_changes.pop_front();
        }
        self.sibling_changes.push_back((self.views, change));
        let v = Rc::new(View {
            nodes,
            siblings,
            placed,
            version,
            number: self.views,
        });
        self.view = Some(Rc::clone(&v));
        v
    }

    /// Placeholder `p`'s agent records its eviction's `outcome` (a refusal is counted), its
    /// backoff in the scenario's time; false if it has no agent.
    fn record_eviction(&mut self, p: usize, outcome: &Outcome, draw: f64) -> bool {
        let (now, backoff_scale) = (self.now, self.sc.agent_backoff_scale);
        let Some(agent) = self.placeholders[p].agent.as_mut() else {
            return false;
        };
        agent.record(now, outcome, draw, backoff_scale);
        if matches!(outcome, Outcome::Busy { .. }) {
            self.log.refused += 1;
        }
        true
    }

    /// Whether every sibling of `p` that is away went less than the watch delay ago
    /// ([`crate::scenario::Scenario::watch_delay`]): `p`'s watch still shows them all Running.
    fn unseen_going(&self, p: usize) -> bool {
        let delay = self.sc.watch_delay;
        let mut away = (self.placeholders.iter().enumerate())
            .zip(&self.absent)
            .filter(|((q, ph), gone)| {
                *q != p && !**gone && !matches!(ph.state, PodState::Running { .. })
            })
            .map(|((_, ph), _)| &ph.state)
            .peekable();
        delay > 0
            && away.peek().is_some()
            && away.all(|s| {
                matches!(s, PodState::Terminating { until, .. }
                    if self.now < until.saturating_sub(self.sc.recreate_delay) + delay)
            })
    }

    /// The PodDisruptionBudget (maxUnavailable 1): an eviction is allowed only while every
    /// replica is running, each for at least the disruption controller's recount ([`crate::scenario::Scenario::pdb_recount`]).
    fn pdb_allows(&self) -> bool {
        let counted = |bound_at: Ms| bound_at + self.sc.pdb_recount <= self.now;
        (self.placeholders.iter().zip(&self.absent)).all(|(p, gone)| {
            *gone || matches!(p.state, PodState::Running { bound_at, .. } if counted(bound_at))
        })
    }

    /// Whether placeholder `p`'s agent, [`Settled`] since its last decision, would decide
    /// the same again on the current view: then that decision stands, with the draws and
    /// the count of a decision made ([`Engine::step_agent`]). With `check`, it is made
    /// anyway and compared.
    fn same_decision(&mut self, p: usize) -> bool {
        let view = self.view();
        let now = self.now;
        // The node version and the witnesses of the settled decision: those of the verdicts
        // it was made on.
        let Some((settled, known)) = self.placeholders[p]
            .agent
            .as_ref()
            .filter(|a| a.wake.is_none_or(|w| w > now))
            .and_then(|a| Some((a.settled.as_ref()?, a.verdicts.as_ref()?)))
        else {
            return false;
        };
        let witnesses = &known.witnesses;
        if known.nodes != view.version
            || self
                .sibling_changes
                .front()
                .is_none_or(|c| c.0 > settled.view + 1)
        {
            return false;
        }
        let mut changes = (self.sibling_changes.iter().rev()).take_while(|c| c.0 > settled.view);
        let unaffected = match &settled.busy {
            None => changes.all(|c| {
                (c.1.as_ref()).is_some_and(|c| c.gone.iter().all(|g| !witnesses.contains(g)))
            }),
            Some(busy) => {
                changes.all(|c| c.1.as_ref().is_some_and(|c| c.placed.is_empty()))
                    && first_busy(&view.siblings, &self.placeholders[p].name) == Some(busy)
            }
        };
        if !unaffected {
            return false;
        }
        let draw = self.agent_rng.uniform();
        let _record_draw = self.agent_rng.uniform();
        self.log.decide_calls += 1;
        self.log.same_decisions += 1;
        let check = self.check;
        let policy = &self.setup.policy;
        let Some(agent) = self.placeholders[p].agent.as_mut() else {
            return false;
        };
        if check {
            let mut again = agent.clone();
            let (decision, _) = again.decide_in(
                now,
                &view.nodes,
                &view.siblings,
                Verdicts::Placed(view.placed()),
                agent.observed,
                policy,
                draw,
            );
            let expected = (agent.settled.as_ref()).map(|s| s.decision.clone());
            if Some(&decision) != expected.as_ref() || again.memory != agent.memory {
                let what =
                    format!("agent {p} left out a changed decision: {expected:?}, {decision:?}");
                self.violation(what);
                return false;
            }
        }
        if let Some(s) = agent.settled.as_mut() {
            s.view = view.number;
        }
        true
    }

    /// The verdicts on the nodes placeholder `p`'s agent found last, when they hold on
    /// `view` ([`Known`]).
    fn known_verdicts(&self, p: usize, view: &View) -> Option<NodeVerdicts> {
        let agent = self.placeholders[p].agent.as_ref()?;
        let known = agent.verdicts.as_ref()?;
        let now = system_time(self.now);
        if known.nodes != view.version
            || known.found.next.is_some_and(|t| now >= t)
            || self
                .sibling_changes
                .front()
                .is_none_or(|c| c.0 > known.view + 1)
        {
            return None;
        }
        let own = &agent.own;
        let old = |(name, created): &(String, Option<SystemTime>)| {
            own.node_name.as_deref() == Some(name.as_str())
                || created.zip(own.scheduled_at).is_some_and(|(c, s)| c < s)
        };
        let hold = (self.sibling_changes.iter().rev())
            .take_while(|c| c.0 > known.view)
            .all(|c| {
                c.1.as_ref().is_some_and(|c| {
                    c.gone.iter().all(|g| !known.witnesses.contains(g)) && !c.placed.iter().any(old)
                })
            });
        hold.then(|| known.found.clone())
    }

    /// Lets placeholder `p`'s agent decide (with the real decision function) and act.
    fn step_agent(&mut self, p: usize) {
        for _ in 0..8 {
            let view = self.view();
            let now = self.now;
            let draw = self.agent_rng.uniform();
            let record_draw = self.agent_rng.uniform();
            let setup: &Setup = self.setup;
            let policy = &setup.policy;
            let version = self.usable_version(p, &view);
            let known = self.known_verdicts(p, &view);
            let check = self.check && known.is_some();
            let Some(agent) = self.placeholders[p].agent.as_mut() else {
                return;
            };
            let fresh = check.then(|| {
                let mut again = agent.clone();
                let placed = Verdicts::Placed(view.placed());
                again.decide_in(
                    now,
                    &view.nodes,
                    &view.siblings,
                    placed,
                    version,
                    policy,
                    draw,
                )
            });
            let verdicts = match known {
                Some(found) => {
                    self.log.verdicts_reused += 1;
                    Verdicts::Known(found)
                }
                None => Verdicts::Placed(view.placed()),
            };
            let (decision, found) = agent.decide_in(
                now,
                &view.nodes,
                &view.siblings,
                verdicts,
                version,
                policy,
                draw,
            );
            let witnesses: Option<Vec<usize>> = (found.iter())
                .flat_map(|f| f.full.iter())
                .map(|(_, w)| Placeholder::ordinal(w))
                .collect();
            let witnesses = witnesses.map(|mut w| {
                w.sort_unstable();
                w.dedup();
                w
            });
            agent.verdicts = found.zip(witnesses).map(|(found, witnesses)| Known {
                found,
                view: view.number,
                nodes: view.version,
                witnesses,
            });
            if let Some((want, _)) = fresh
                && want != decision
            {
                let what = format!("agent {p} decided on stale verdicts: {decision:?}, {want:?}");
                self.violation(what);
            }
            let Some(agent) = self.placeholders[p].agent.as_mut() else {
                return;
            };
            self.log.decide_calls += 1;
            agent.settled = None;
            match decision {
                Decision::Move { trigger } => {
                    // Asked only for a move (it reads every replica).
                    let allowed = self.pdb_allows();
                    let outcome = if allowed {
                        Outcome::Done
                    } else {
                        Outcome::Busy { retry_after: None }
                    };
                    if !self.record_eviction(p, &outcome, record_draw) {
                        return;
                    }
                    if !allowed {
                        continue;
                    }
                    self.log_move(p, &trigger);
                    self.evict(p);
                    return;
                }
                Decision::Arm { at, .. } => {
                    self.set_wake(p, Some(sim_ms_ceil(at)));
                    return;
                }
                Decision::Wait { until, hold } => {
                    if matches!(hold, Some(Hold::SiblingBusy(_))) && self.unseen_going(p) {
                        // Its watch has not shown the sibling going yet: it posts its
                        // eviction, and the PodDisruptionBudget refuses it.
                        let busy = Outcome::Busy { retry_after: None };
                        if !self.record_eviction(p, &busy, record_draw) {
                            return;
                        }
                        continue;
                    }
                    let busy = match &hold {
                        None | Some(Hold::Finished) => Some(None),
                        Some(Hold::SiblingBusy(name)) if until.is_none() => {
                            Some(Some(name.clone()))
                        }
                        _ => None,
                    };
                    if let Some(busy) = busy
                        && let Some(agent) = self.placeholders[p].agent.as_mut()
                        && agent.verdicts.is_some()
                    {
                        agent.settled = Some(Settled {
                            decision: Decision::Wait { until, hold },
                            view: view.number,
                            busy,
                        });
                    }
                    self.set_wake(p, until.map(sim_ms_ceil));
                    return;
                }
            }
        }
        self.violation(format!("agent {p} kept moving without settling"));
    }

    /// The version of the nodes placeholder `p`'s agent would note usable in `view`
    /// ([`selfdestruct_decision::Memory::observe_nodes`]): the same version means the
    /// same names, so an agent that observed it already holds exactly these names and
    /// observing again changes nothing. Found once per node view for every agent of
    /// the same template (all of them, in a run), not once per agent.
    fn usable_version(&mut self, p: usize, view: &View) -> Option<u64> {
        let own = &self.placeholders[p].agent.as_ref()?.own;
        let template_is = |t: &Template| {
            t.0 == own.tolerations && t.1 == own.node_selector && t.2 == own.affinity
        };
        if let Some((nodes, template, _, version)) = &self.usable
            && *nodes == view.version
            && template_is(template)
        {
            return Some(*version);
        }
        let mut names: Vec<&str> = (view.nodes.iter())
            .filter(|n| own.would_land_on(n))
            .map(|n| n.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        let version = match &mut self.usable {
            Some((nodes, template, known, version))
                if template_is(template)
                    && known.iter().map(String::as_str).eq(names.iter().copied()) =>
            {
                *nodes = view.version;
                *version
            }
            _ => {
                self.usable_versions += 1;
                let template = (
                    own.tolerations.clone(),
                    own.node_selector.clone(),
                    own.affinity.clone(),
                );
                let names = names.into_iter().map(str::to_string).collect();
                self.usable = Some((view.version, template, names, self.usable_versions));
                self.usable_versions
            }
        };
        Some(version)
    }

    fn set_wake(&mut self, p: usize, wake: Option<Ms>) {
        let Some(agent) = self.placeholders[p].agent.as_mut() else {
            return;
        };
        if agent.wake == wake {
            return;
        }
        agent.generation += 1;
        agent.wake = wake;
        let generation = agent.generation;
        if let Some(at) = wake {
            self.push(at, Event::Wake(p, generation));
        }
    }

    fn log_move(&mut self, p: usize, trigger: &Trigger) {
        let reason = match trigger {
            Trigger::Lifetime { .. } => MoveReason::Lifetime,
            Trigger::NewNode { node, .. } => MoveReason::NewNode {
                node: node.clone(),
                image_on_node: self.nodes.all().iter().any(|n| &n.name == node && n.image),
            },
        };
        self.log_move_for(p, reason);
    }

    fn log_move_for(&mut self, p: usize, reason: MoveReason) {
        let PodState::Running { node, .. } = self.placeholders[p].state else {
            return;
        };
        self.landing[p] = Some(self.log.moves.len());
        self.log.moves.push(MoveRecord {
            at: self.now,
            placeholder: self.placeholders[p].name.clone(),
            from: self.nodes[node].name.clone(),
            reason,
            landed: None,
            landed_warm: None,
        });
    }

    // ----- peers -----

    /// One run of the peer's own loop ([`Peer::scan`]): the placeholders it takes away go.
    fn peer_scan(&mut self) {
        let started: Vec<Option<Ms>> = self
            .placeholders
            .iter()
            .map(|p| match p.state {
                PodState::Running { bound_at, .. } => Some(bound_at),
                _ => None,
            })
            .collect();
        let input = peers::ScanInput {
            now: self.now,
            nodes: self.nodes.all(),
            started: &started,
            config: &self.sc.peers,
        };
        let out = self.setup.peer.scan(&input, &mut self.known_ready);
        self.log.refused += out.refused;
        for (p, reason) in out.evict {
            self.log_move_for(p, reason);
            self.evict(p);
        }
    }

    // ----- autoscaler -----

    /// One autoscaler loop. Returns whether it scaled up.
    fn autoscale(&mut self) -> bool {
        let pending_placeholders = self
            .placeholders
            .iter()
            .zip(&self.absent)
            .filter(|(p, gone)| !**gone && matches!(p.state, PodState::Pending { .. }))
            .count();
        // The oldest unschedulable pod's creation (users: their arrival; a placeholder: its
        // re-creation by the StatefulSet).
        let oldest_pending = self
            .pending_users
            .iter()
            .map(|&u| self.users[u].arrival)
            .chain(self.placeholders.iter().zip(&self.absent).filter_map(
                |(p, gone)| match p.state {
                    PodState::Pending { created } if !gone => Some(created),
                    _ => None,
                },
            ))
            .min();
        let chunks = self.setup.peer.buffer_chunks(self.setup.replicas);
        let cfg = &self.sc.autoscaler;
        // The placeholders still on nodes being drained are Pending pods to scale-up
        // (`core/podlistprocessor/currently_drained_nodes.go`).
        let drained: usize = (self.nodes.live())
            .filter(|(_, n)| n.phase == Phase::Draining)
            .map(|(_, n)| n.placeholders as usize)
            .sum();
        let (user_sized, whole_node) = if self.setup.peer.whole_node_pods() {
            (
                self.pending_users.len() as u64,
                (pending_placeholders + drained) as u64,
            )
        } else {
            (
                (self.pending_users.len() + pending_placeholders + drained) as u64,
                0,
            )
        };
        let unplaced_chunks = peers::unplaced_chunks(&self.nodes, chunks, &self.sc.user);
        // "Unschedulable pods are very new, waiting one iteration for more"
        // (`core/static_autoscaler.go`, `allPodsAreNew`): no scale-up while every unschedulable
        // pod is younger than the hold, counted from its creation's whole second (the API's
        // timestamps). A buffer's injected chunks are never new (the real stack scales up for
        // them at the first loop).
        let stamped = |t: Ms| t - t % cfg.created_resolution.max(1);
        let very_new = unplaced_chunks == 0
            && oldest_pending.is_some_and(|t| self.now < stamped(t) + cfg.new_pod_hold);
        // A buffer's chunks are Pending pods to the autoscaler while they fit nowhere.
        let add = if very_new {
            0
        } else {
            autoscaler::nodes_to_add(
                &self.nodes,
                user_sized + u64::from(chunks),
                &self.sc.user,
                &self.sc.node,
                cfg,
            ) + autoscaler::nodes_for_whole_node_pods(&self.nodes, whole_node, cfg)
        };
        let existing = self.nodes.count() as u32;
        let add = add.min(cfg.max_nodes.saturating_sub(existing));
        for _ in 0..add {
            let spread = self.sc.delay_spread;
            let ready =
                self.sc.node_ready as f64 * self.node_rng.between(1.0 - spread, 1.0 + spread);
            let pull =
                self.sc.image_pull as f64 * self.node_rng.between(1.0 - spread, 1.0 + spread);
            let lag = self.sc.gate_lag as f64 * self.node_rng.uniform();
            let gate = self.setup.gate.then_some(lag as Ms);
            let i = self.nodes.len();
            let node = Node::provisioning(
                node_name(i),
                self.sc.node,
                self.now,
                ready as Ms,
                pull as Ms,
                gate,
            );
            let ready_at = node.ready_at;
            let i = self.nodes.push(node);
            self.push(ready_at, Event::NodeReady(i));
            self.view_dirty = true;
        }
        if add > 0 {
            self.last_scale_up = Some(self.now);
            self.log.scale_ups.push((self.now, add));
        }
        let state = autoscaler::LoopState {
            now: self.now,
            cooldown: very_new
                || (self.last_scale_up).is_some_and(|t| self.now < t + cfg.delay_after_add),
            pending_users: self.pending_users.len() as u64,
            pending_placeholders: pending_placeholders as u64,
            chunks: u64::from(chunks),
            pdb_allows: self.pdb_allows(),
            draining: self.deleting.iter().any(|d| d.drain),
            pinned: self.setup.pin,
        };
        let shapes = autoscaler::Shapes {
            user: self.sc.user,
            placeholder: self.placeholder_size,
            daemonset: self.sc.daemonset,
            reserve: self.sc.node_reserve,
        };
        let (removals, tainted) =
            autoscaler::scale_down(&mut self.nodes, &state, &shapes, &self.sc.autoscaler);
        self.view_dirty |= tainted;
        for r in removals {
            self.start_deletion(r);
        }
        if self.check && self.now >= self.last_recount + RECOUNT_EVERY {
            self.last_recount = self.now;
            self.recount();
        }
        add > 0
    }

    /// Taints and cordons node `r.node` (`ToBeDeletedByClusterAutoscaler`); its deletion goes on
    /// `--node-delete-delay-after-taint` later ([`Engine::deletion_step`]).
    fn start_deletion(&mut self, r: autoscaler::Removal) {
        let n = r.node;
        if self.nodes[n].users > 0 {
            let name = self.nodes[n].name.clone();
            self.violation(format!("scale-down chose {name}, which holds user pods"));
            return;
        }
        self.nodes[n].phase = Phase::Draining;
        self.nodes[n].unneeded_since = None;
        self.deleting.push(Deletion {
            node: n,
            drain: r.drain,
            deadline: None,
        });
        let at = self.now + self.sc.autoscaler.delete_delay_after_taint;
        self.push(at, Event::Deletion(n));
        self.view_dirty = true;
    }

    /// A step of node `n`'s deletion (`core/scaledown/actuation`: `Actuator.deleteNodesAsync`,
    /// `Evictor.DrainNode`). After the taint's delay the pods to move are looked at again with
    /// the live PodDisruptionBudget: a placeholder on an empty node's, or one on a drained node
    /// while the PDB allows no disruption, aborts it. Then every placeholder on the node is
    /// evicted through the PDB at once, those refused (429) again every `eviction_retry`: with
    /// maxUnavailable 1, one at a time, each once the last one's replacement runs, and in
    /// competition with the agents' own moves. A drain still refused `max_pod_eviction_time`
    /// after its first try fails. Aborted or failed, the node is untainted and the placeholders
    /// evicted stay evicted; once none is left, the node goes `drain` later. (An eviction is by
    /// name, so CA's retry of a pod its agent moved would hit the replacement; here a placeholder
    /// gone from the node counts as evicted.)
    fn deletion_step(&mut self, n: usize) {
        let Some(k) = self.deleting.iter().position(|d| d.node == n) else {
            return;
        };
        let d = self.deleting[k];
        let cfg = &self.sc.autoscaler;
        let on_node = self.nodes[n].placeholders;
        let give_up = match d.deadline {
            None => on_node > 0 && (!d.drain || !self.pdb_allows()),
            Some(deadline) => self.now >= deadline,
        };
        if give_up {
            self.deleting.remove(k);
            self.nodes[n].phase = Phase::Ready;
            self.log.failed_deletions += 1;
            self.sched_dirty = true;
            self.view_dirty = true;
            return;
        }
        if d.deadline.is_none() {
            self.deleting[k].deadline = Some(self.now + cfg.max_pod_eviction_time);
        }
        let retry = self.now + cfg.eviction_retry;
        for p in 0..self.placeholders.len() {
            let here =
                matches!(self.placeholders[p].state, PodState::Running { node, .. } if node == n);
            if here && self.pdb_allows() {
                self.evict(p);
                self.log.drain_evictions += 1;
            }
        }
        if self.nodes[n].placeholders > 0 {
            self.push(retry, Event::Deletion(n));
        } else {
            self.log.scale_downs.push(self.now);
            self.push(self.now + self.sc.autoscaler.drain, Event::NodeGone(n));
        }
    }

    // ----- checks and samples -----

    fn check_invariants(&mut self) {
        let pod = self.sc.user;
        let ph = self.placeholder_size;
        let mut bad = Vec::new();
        for n in self.nodes.all() {
            let pods = u64::from(n.users + n.placeholders);
            let want = Resources {
                cpu_m: u64::from(n.users) * pod.cpu_m + u64::from(n.placeholders) * ph.cpu_m,
                mem_mib: u64::from(n.users) * pod.mem_mib + u64::from(n.placeholders) * ph.mem_mib,
            };
            if n.overcommitted() {
                bad.push(format!(
                    "{} over-committed: {:?} > {:?}",
                    n.name, n.used, n.alloc
                ));
            }
            if n.used != want {
                bad.push(format!("{} accounts {:?} for {pods} pods", n.name, n.used));
            }
            if n.phase == Phase::Removed && pods > 0 {
                bad.push(format!("{} removed with {pods} pods", n.name));
            }
        }
        if !self.placeholders_pending
            && (self.placeholders.iter().zip(&self.absent))
                .any(|(p, gone)| !gone && matches!(p.state, PodState::Pending { .. }))
        {
            bad.push("a placeholder is Pending, the scheduler looks for none".into());
        }
        for p in &self.placeholders {
            if let PodState::Running { node, .. } = p.state
                && !matches!(self.nodes[node].phase, Phase::Ready | Phase::Draining)
            {
                bad.push(format!(
                    "{} runs on {:?} node {}",
                    p.name, self.nodes[node].phase, self.nodes[node].name
                ));
            }
        }
        for b in bad {
            self.violation(b);
        }
    }

    /// Recounts every node's pods from the pods themselves.
    fn recount(&mut self) {
        let mut users = vec![0u32; self.nodes.len()];
        let mut phs = vec![0u32; self.nodes.len()];
        for u in &self.users {
            if let (Some(n), false) = (u.node, u.ended) {
                users[n] += 1;
            }
        }
        for p in &self.placeholders {
            if let PodState::Running { node, .. } = p.state {
                phs[node] += 1;
            }
        }
        let mut bad = Vec::new();
        for (i, n) in self.nodes.all().iter().enumerate() {
            if n.users != users[i] || n.placeholders != phs[i] {
                bad.push(format!(
                    "{} counts {}/{} users/placeholders, holds {}/{}",
                    n.name, n.users, n.placeholders, users[i], phs[i]
                ));
            }
        }
        for b in bad {
            self.violation(b);
        }
    }

    fn sample(&mut self) {
        let mut s = Sample {
            t: self.now,
            users_pending: self.pending_users.len() as u32,
            ..Sample::default()
        };
        for (_, n) in self.nodes.live() {
            s.nodes += 1;
            s.warm_nodes += u32::from(n.image && n.phase != Phase::Provisioning);
            s.users += n.users;
            s.placeholders += n.placeholders;
        }
        s.placeholders_pending = self.placeholders.len() as u32 - s.placeholders;
        self.log.samples.push(s);
    }
}

/// The first sibling, in the view's order, that is Pending or terminating and is not named
/// `own`: the one [`Hold::SiblingBusy`] names.
fn first_busy<'a>(siblings: &'a [Sibling], own: &str) -> Option<&'a String> {
    (siblings.iter())
        .find(|s| (s.pending || s.terminating) && s.name != own)
        .map(|s| &s.name)
}

fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Peer, Row, static_policy};

    fn setup(peer: Peer, replicas: u32) -> Setup {
        Setup {
            name: "peer".into(),
            row: Row::Peer,
            replicas,
            policy: static_policy(),
            gate: false,
            peer,
            pin: false,
        }
    }

    /// A node with `users` user pods' requests (the users themselves are not modelled here).
    fn node_with(sc: &Scenario, i: usize, users: u32) -> Node {
        let mut n = Node::initial(node_name(i), sc.node, 0);
        for _ in 0..users {
            n.account(&sc.user, true);
        }
        n.users = users;
        n
    }

    fn running(e: &Engine) -> usize {
        e.placeholders
            .iter()
            .filter(|p| matches!(p.state, PodState::Running { .. }))
            .count()
    }

    /// Runs the queued events up to and including `end`.
    fn run_until(e: &mut Engine, end: Ms) {
        while let Some(&Reverse((t, _, ev))) = e.queue.peek() {
            if t > end {
                break;
            }
            e.queue.pop();
            e.now = t;
            e.handle(ev);
            e.settle();
        }
    }

    /// One full node and one placeholder re-created at 3.5 s that fits nowhere.
    fn one_unschedulable_placeholder(sc: &Scenario, row: &Setup) -> Vec<(Ms, u32)> {
        let mut e = Engine::new(sc, row, &[], 1, true);
        e.nodes.push(node_with(sc, 0, sc.pods_per_node() as u32));
        e.schedule_loop(sc.autoscaler.scan);
        e.now = 3_500;
        e.placeholders[0].state = PodState::Pending { created: 3_500 };
        e.settle();
        run_until(&mut e, 30 * SEC);
        e.log.scale_ups
    }

    /// The view's caches: the node view kept (with its version) while only siblings
    /// change, and the agents observing the nodes only on a new version. At every
    /// step of a busy day of the gated new-node row, the view's nodes are those rebuilt
    /// from the nodes, a version never comes back with other nodes, and observing the
    /// current view again changes no agent's memory (an agent skipping a changed view
    /// would be left with a stale record).
    #[test]
    fn the_cached_node_view_is_the_rebuilt_one_and_agents_miss_no_change() {
        let sc = Scenario::small();
        let rows = crate::scenario::standard_rows(&sc, setup(Peer::Selfdestruct, 1));
        let row = rows.iter().find(|r| r.name == "gate+new-node").unwrap();
        let arrivals = sc.arrivals(1);
        let mut e = Engine::new(&sc, row, &arrivals, 1, true);
        for i in 0..sc.autoscaler.min_nodes.max(1) as usize {
            e.nodes.push(Node::initial(node_name(i), sc.node, 0));
        }
        e.push(arrivals[0].at, Event::Arrival(0));
        e.schedule_loop(sc.autoscaler.scan);
        e.settle();
        let mut seen: Vec<(u64, Vec<NodeSummary>)> = Vec::new();
        let (mut versions, mut decided) = (0, 0);
        let mut steps = 0;
        while let Some(Reverse((t, _, ev))) = e.queue.pop() {
            if t > 8 * HOUR {
                break;
            }
            e.now = t;
            e.handle(ev);
            e.settle();
            steps += 1;
            let view = e.view();
            let rebuilt: Vec<NodeSummary> = e
                .nodes
                .all()
                .iter()
                .filter(|n| n.exists())
                .map(|n| n.summary(system_time))
                .collect();
            assert_eq!(*view.nodes, rebuilt, "t={t}");
            let names: Vec<&str> = e.nodes.all().iter().map(|n| n.name.as_str()).collect();
            let siblings: Vec<Sibling> = e
                .placeholders
                .iter()
                .zip(&e.absent)
                .filter(|(_, gone)| !**gone)
                .map(|(p, _)| p.sibling(|i| names[i].to_string()))
                .collect();
            assert_eq!(*view.siblings, siblings, "t={t}");

            match seen.iter().find(|(v, _)| *v == view.version) {
                Some((_, nodes)) => assert_eq!(*nodes, rebuilt, "version {}", view.version),
                None => seen.push((view.version, rebuilt)),
            }
            versions = versions.max(view.version);
            for p in &e.placeholders {
                if let Some(a) = &p.agent
                    && a.observed.is_some()
                {
                    let mut again = a.memory.clone();
                    again.observe_nodes(system_time(t), &a.own, Some(&view.nodes));
                    assert_eq!(again, a.memory, "t={t} {}", p.name);
                    // The view's sibling lookup is that of this view's siblings.
                    let snapshot = selfdestruct_decision::Snapshot {
                        now: system_time(t),
                        own: &a.own,
                        nodes: Some(&view.nodes),
                        siblings: Some(&view.siblings),
                        siblings_loading: false,
                        policy: &row.policy,
                        memory: &a.memory,
                        draw: 0.5,
                    };
                    assert_eq!(
                        selfdestruct_decision::decide_placed(&snapshot, view.placed()),
                        selfdestruct_decision::decide(&snapshot),
                        "t={t} {}",
                        p.name
                    );
                    decided += 1;
                }
            }
        }
        assert!(
            versions > 10 && steps > 10 * versions,
            "{versions} node views in {steps} steps"
        );
        assert!(decided > 1000, "{decided}");
    }

    /// An agent's decision is left out only when it would be its last one, and made on
    /// earlier verdicts on the nodes only while they hold: with `check`, every decision
    /// left out is made anyway and compared (a violation when it differs, or when the
    /// memory changed), and every decision on earlier verdicts is made on fresh ones too.
    /// The burst scenario (a wave of users preempts placeholders, whose replacements may
    /// land where their pods were, within one view) for every row that runs the agent.
    #[test]
    fn a_decision_is_left_out_or_reuses_verdicts_only_when_it_would_be_the_same() {
        let sc = Scenario::burst();
        let rows = crate::scenario::standard_rows(&sc, setup(Peer::Selfdestruct, 1));
        let arrivals = sc.arrivals(1);
        for row in rows.iter().filter(|r| r.runs_agent()) {
            let run = simulate(&sc, row, &arrivals, 1, true);
            assert_eq!(run.log.violations, Vec::<String>::new(), "{}", row.name);
            let (left_out, reused) = (run.log.same_decisions, run.log.verdicts_reused);
            assert!(
                left_out > 0 && reused > 0,
                "{}: {left_out}, {reused}",
                row.name
            );
        }
    }

    /// Two nodes: node 0 with `users` users' requests and the placeholders from `phs` on, node 1
    /// holding placeholders `0..phs` (bound at 0), whose drain is started at 0.
    fn draining(sc: &Scenario, row: &Setup, users: u32, phs: usize) -> Engine<'static> {
        let sc: &'static Scenario = Box::leak(Box::new(sc.clone()));
        let row: &'static Setup = Box::leak(Box::new(row.clone()));
        let mut e = Engine::new(sc, row, &[], 1, true);
        e.nodes.push(node_with(sc, 0, users));
        e.nodes.push(node_with(sc, 1, 0));
        for p in 0..e.placeholders.len() {
            e.bind_placeholder(p, usize::from(p < phs));
        }
        e.settle();
        e.start_deletion(autoscaler::Removal {
            node: 1,
            drain: true,
        });
        e
    }

    /// kubernetes/autoscaler `cluster-autoscaler/core/scaledown/actuation/drain.go`
    /// (`Evictor.initiateEviction`, `evictPod`: every pod evicted at once, a refused one retried
    /// every 10 s) after `actuator.go`'s `deleteNodesAsync` waits out
    /// `--node-delete-delay-after-taint`: through the PDB (maxUnavailable 1) the placeholders go
    /// one at a time, each once the last one's replacement runs.
    #[test]
    fn a_drain_evicts_the_placeholders_one_at_a_time_through_the_pdb() {
        let sc = Scenario::small();
        let mut e = draining(&sc, &setup(Peer::Selfdestruct, 3), 5, 3);
        let on_node = |e: &Engine| e.nodes[1].placeholders;
        run_until(&mut e, 4_999);
        assert_eq!(on_node(&e), 3, "the taint's delay");
        run_until(&mut e, 5 * SEC);
        assert_eq!(on_node(&e), 2);
        run_until(&mut e, 15 * SEC - 1);
        assert_eq!(on_node(&e), 2, "refused until the next retry");
        assert_eq!(e.nodes[0].placeholders, 1, "the replacement runs");
        run_until(&mut e, 25 * SEC);
        assert_eq!(on_node(&e), 0);
        assert_eq!(e.log.scale_downs, vec![25 * SEC]);
        assert_eq!(e.log.drain_evictions, 3);
        run_until(&mut e, 25 * SEC + sc.autoscaler.drain);
        assert_eq!(e.nodes[1].phase, Phase::Removed);
        assert_eq!(e.nodes[0].placeholders, 3);
        assert!(e.log.violations.is_empty(), "{:?}", e.log.violations);
    }

    /// `drain.go` (`evictPod` gives up at `--max-pod-eviction-time`; `initiateEviction` fails the
    /// drain) and `actuation/delete_in_batch.go` (`CleanUpAndRecordFailedScaleDownEvent`: the
    /// taint goes, what was evicted stays evicted).
    #[test]
    fn a_drain_refused_for_the_eviction_time_fails_and_keeps_what_it_evicted() {
        let sc = Scenario::small();
        let per = sc.pods_per_node() as u32;
        // Node 0 is full: the first replacement stays Pending, so the PDB refuses the rest.
        let mut e = draining(&sc, &setup(Peer::Selfdestruct, 3), per, 3);
        let deadline = 5 * SEC + sc.autoscaler.max_pod_eviction_time;
        run_until(&mut e, deadline - 1);
        assert_eq!(e.nodes[1].phase, Phase::Draining);
        assert_eq!(e.nodes[1].placeholders, 2);
        run_until(&mut e, deadline);
        assert_eq!(e.nodes[1].phase, Phase::Ready);
        assert_eq!(e.log.failed_deletions, 1);
        assert_eq!(e.log.drain_evictions, 1);
        assert!(e.log.scale_downs.is_empty());
        // Untainted, the node takes the replacement back.
        assert_eq!(e.nodes[1].placeholders, 3);
        assert!(e.log.violations.is_empty(), "{:?}", e.log.violations);
    }

    /// `actuator.go` (`deleteNodesAsync`: the pods to move are found again with the live
    /// PodDisruptionBudget after the taint's delay; a placeholder whose PDB allows no disruption
    /// aborts the drain), and the agents' moves spend the same budget as the drain's evictions.
    #[test]
    fn the_drain_and_the_agents_moves_share_the_pdb() {
        let sc = Scenario::small();
        let row = setup(Peer::Selfdestruct, 3);
        // Placeholder 2 runs on node 0 and moves (evicted) at 4 s: at 5 s the drain is aborted.
        let mut e = draining(&sc, &row, 5, 2);
        run_until(&mut e, 4 * SEC);
        e.now = 4 * SEC;
        e.evict(2);
        run_until(&mut e, 5 * SEC);
        assert_eq!(e.nodes[1].phase, Phase::Ready);
        assert_eq!(e.log.failed_deletions, 1);
        assert_eq!(e.nodes[1].placeholders, 2);
        // It moves at 14 s instead: the drain's second eviction, at 15 s, is refused; at 25 s
        // it goes.
        let mut e = draining(&sc, &row, 5, 2);
        run_until(&mut e, 14 * SEC);
        assert_eq!(e.nodes[1].placeholders, 1);
        e.now = 14 * SEC;
        e.evict(2);
        run_until(&mut e, 15 * SEC);
        assert_eq!(e.nodes[1].placeholders, 1, "refused");
        run_until(&mut e, 25 * SEC);
        assert_eq!(e.nodes[1].placeholders, 0);
        assert_eq!(e.log.failed_deletions, 0);
    }

    /// `core/podlistprocessor/currently_drained_nodes.go` (`Process`): the pods still on a node
    /// being drained are Pending pods to scale-up, which adds a node when they fit nowhere else.
    #[test]
    fn the_pods_of_a_node_being_drained_count_for_scale_up() {
        let sc = Scenario::small();
        let per = sc.pods_per_node() as u32;
        let mut e = draining(&sc, &setup(Peer::Selfdestruct, 2), per, 2);
        e.autoscale();
        assert_eq!(e.log.scale_ups, vec![(0, 1)]);
        let mut e = draining(&sc, &setup(Peer::Selfdestruct, 2), per - 2, 2);
        e.autoscale();
        assert!(e.log.scale_ups.is_empty(), "room for both on node 0");
    }

    /// `core/static_autoscaler.go` (`RunOnce`: "Unschedulable pods are very new, waiting one
    /// iteration for more" sets `disableScaleDownForLoop`; `isScaleDownInCooldown`). A pod that
    /// fits nowhere (here, bigger than a node) and is younger than the hold stops the loop's
    /// deletions.
    #[test]
    fn very_new_pods_hold_the_loops_deletions() {
        let mut sc = Scenario::small();
        sc.user = Resources::new(100.0, 100.0);
        // At the maximum: no scale-up (and its cooldown) either way.
        sc.autoscaler.max_nodes = 2;
        let row = setup(Peer::Selfdestruct, 0);
        let arrivals = [Arrival {
            at: 0,
            session: HOUR,
        }];
        let t = sc.autoscaler.unneeded_time + MIN;
        let run = |at: Ms| {
            let mut e = Engine::new(&sc, &row, &arrivals, 1, true);
            e.nodes.push(node_with(&sc, 0, 0));
            e.nodes.push(node_with(&sc, 1, 0));
            e.nodes[1].unneeded_since = Some(0);
            e.users[0].arrival = at;
            e.pending_users.push_back(0);
            e.now = t;
            e.autoscale();
            e.nodes[1].phase
        };
        assert_eq!(run(t - SEC), Phase::Ready, "a pod 1 s old");
        assert_eq!(run(t - 3 * SEC), Phase::Draining, "3 s old");
    }

    #[test]
    fn a_new_unschedulable_pod_starts_a_loop_that_waits_one_iteration() {
        let sc = Scenario::small();
        let row = setup(Peer::Selfdestruct, 1);
        // Frequent loops: the pod starts a loop at once (3.5 s), which finds it "very new" and
        // waits; the next loop, one scan later, scales up.
        assert_eq!(one_unschedulable_placeholder(&sc, &row), vec![(13_500, 1)]);
        // Without them: the timer's loop at 10 s, when the pod is 6.5 s old.
        let mut fixed = sc.clone();
        fixed.autoscaler.frequent_loops = false;
        assert_eq!(
            one_unschedulable_placeholder(&fixed, &row),
            vec![(10_000, 1)]
        );
        // A pod younger than the hold at the timer's loop waits for the next one.
        let mut late = fixed.clone();
        late.autoscaler.scan = 4_000;
        assert_eq!(one_unschedulable_placeholder(&late, &row), vec![(8_000, 1)]);
    }

    #[test]
    fn the_hold_counts_from_the_creation_second() {
        let mut sc = Scenario::small();
        sc.autoscaler.scan = 1_700;
        let row = setup(Peer::Selfdestruct, 1);
        // Created at 3.5 s, stamped 3 s: the hold ends at 5 s, so the loop at 5.2 s scales up.
        assert_eq!(one_unschedulable_placeholder(&sc, &row), vec![(5_200, 1)]);
        // Stamped to the millisecond: the hold ends at 5.5 s, the 5.2 s loop waits and the
        // 6.9 s one scales up.
        sc.autoscaler.created_resolution = 1;
        assert_eq!(one_unschedulable_placeholder(&sc, &row), vec![(6_900, 1)]);
    }

    #[test]
    fn a_preempting_user_evicts_the_newest_placeholder_of_the_chosen_node() {
        let sc = Scenario::small();
        let row = setup(Peer::Selfdestruct, 3);
        let arrivals = [Arrival {
            at: 0,
            session: HOUR,
        }];
        let mut e = Engine::new(&sc, &row, &arrivals, 1, true);
        let per = sc.pods_per_node() as u32;
        e.nodes.push(node_with(&sc, 0, per - 2));
        e.nodes.push(node_with(&sc, 1, per - 1));
        // placeholders 0 and 1 on node 0 (started at 1 s and 3 s), 2 on node 1 (at 5 s): both
        // nodes are full, the newest placeholder is on node 1, so the user goes there.
        for (p, n, t) in [(0, 0, 1_000), (1, 0, 3_000), (2, 1, 5_000)] {
            e.now = t;
            e.bind_placeholder(p, n);
        }
        e.pending_users.push_back(0);
        e.schedule();
        assert!(e.users[0].preempted && e.users[0].node == Some(1));
        assert!(matches!(
            e.placeholders[2].state,
            PodState::Terminating { .. }
        ));
        assert!(matches!(e.placeholders[0].state, PodState::Running { .. }));
        assert!(matches!(e.placeholders[1].state, PodState::Running { .. }));
        // Another user: node 0 is the only one with placeholders; its newest (1) goes.
        e.users.push(User::default());
        e.pending_users.push_back(1);
        e.schedule();
        assert!(e.users[1].preempted && e.users[1].node == Some(0));
        assert!(matches!(
            e.placeholders[1].state,
            PodState::Terminating { .. }
        ));
        assert!(matches!(e.placeholders[0].state, PodState::Running { .. }));
    }

    #[test]
    fn the_rebalancer_deletes_every_placeholder_within_one_scan() {
        let sc = Scenario::small();
        let row = setup(Peer::Rebalancer, 4);
        let mut e = Engine::new(&sc, &row, &[], 1, true);
        e.nodes.push(node_with(&sc, 0, 9));
        e.nodes.push(node_with(&sc, 1, 9));
        e.schedule();
        assert_eq!(running(&e), 4);
        e.now = 10 * SEC;
        e.peer_scan();
        assert_eq!(running(&e), 4, "the first scan only learns the nodes");
        e.nodes.push(node_with(&sc, 2, 0));
        e.now = 20 * SEC;
        e.peer_scan();
        assert_eq!(running(&e), 0, "all deleted in the scan that saw the node");
        assert_eq!(e.log.moves.len(), 4);
        assert!(e.log.moves.iter().all(|m| m.at == 20 * SEC));
        assert!(e.placeholders.iter().all(|p| p.agent.is_none()));
        // re-created, they all go to the new (emptiest) node
        e.now = 30 * SEC;
        for p in 0..4 {
            e.handle(Event::Recreate(p));
        }
        e.schedule();
        assert_eq!(e.nodes[2].placeholders, 4);
        e.peer_scan();
        assert_eq!(running(&e), 4, "no new node: nothing deleted");
    }

    #[test]
    fn a_node_balloon_is_preempted_whole() {
        let sc = Scenario::binder();
        let row = setup(Peer::NodeBalloon, 25);
        let arrivals = [Arrival {
            at: 0,
            session: HOUR,
        }];
        let mut e = Engine::new(&sc, &row, &arrivals, 1, true);
        assert_eq!(
            e.placeholders.len(),
            1,
            "25 users' room is one 100-user balloon"
        );
        e.nodes.push(node_with(&sc, 0, 100));
        e.nodes.push(node_with(&sc, 1, 0));
        e.schedule();
        assert_eq!(e.nodes[1].placeholders, 1);
        assert_eq!(
            e.nodes[1].free().fits_times(&sc.user),
            0,
            "the balloon fills it"
        );
        e.pending_users.push_back(0);
        e.schedule();
        assert_eq!(e.log.preemptions.len(), 1);
        assert!(e.users[0].preempted && e.users[0].node == Some(1));
        assert_eq!(running(&e), 0);
        assert_eq!(
            e.nodes[1].free().fits_times(&sc.user),
            99,
            "one preemption freed the whole node"
        );
    }

    #[test]
    fn the_buffer_runs_no_pod_and_scales_up_when_a_chunk_no_longer_fits() {
        let sc = Scenario::binder();
        let row = setup(Peer::Buffer, 25);
        let mut e = Engine::new(&sc, &row, &[], 1, true);
        assert!(e.placeholders.is_empty());
        e.nodes.push(node_with(&sc, 0, 75));
        e.nodes.push(node_with(&sc, 1, 100));
        e.autoscale();
        assert!(
            e.log.scale_ups.is_empty(),
            "25 chunks fit into 25 free slots"
        );
        e.nodes[0].account(&sc.user, true);
        e.nodes[0].users += 1;
        e.autoscale();
        assert_eq!(
            e.log.scale_ups,
            vec![(0, 1)],
            "the 25th chunk no longer fits"
        );
        e.autoscale();
        assert_eq!(
            e.log.scale_ups.len(),
            1,
            "the booting node holds the chunks"
        );
        // a whole day: no placeholder pod, no decision, no eviction
        let arrivals = sc.arrivals(1);
        let run = simulate(&sc, &row, &arrivals, 1, true);
        assert!(
            run.log
                .samples
                .iter()
                .all(|s| s.placeholders == 0 && s.placeholders_pending == 0)
        );
        assert_eq!(run.log.decide_calls, 0);
        assert!(run.log.moves.is_empty() && run.log.preemptions.is_empty());
        assert!(
            run.summary.violations.is_empty(),
            "{:?}",
            run.summary.violations
        );
    }

    #[test]
    fn podlifetime_runs_show_the_pdbs_refusals() {
        let sc = Scenario::binder();
        let row = setup(Peer::PodLifeTime, 25);
        let run = simulate(&sc, &row, &sc.arrivals(1), 1, true);
        assert!(run.summary.refused_evictions > 0, "429s show");
        assert!(
            run.log
                .moves
                .iter()
                .all(|m| m.reason == MoveReason::PodLifeTime
                    && m.at % sc.peers.descheduler_interval == 0)
        );
        assert!(
            run.summary.violations.is_empty(),
            "{:?}",
            run.summary.violations
        );
    }
}
