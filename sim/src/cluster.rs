//! Nodes, user pods and the two scheduler scorers: MostAllocated (JupyterHub's
//! user-scheduler, for users) and LeastAllocated with optional default
//! PodTopologySpread (the default-scheduler, for placeholders).

use std::time::SystemTime;

use selfdestruct_decision::model::{NodeSummary, Readiness, Taint};

use crate::scenario::{Ms, Resources, UserPlacement};

/// The startup taint of the node readiness gate (`selfdestruct node-gate`'s default):
/// removed once the user image is on the node. The cluster autoscaler treats taints
/// with this prefix as startup taints.
pub const STARTUP_TAINT: &str = selfdestruct_decision::model::IMAGES_PENDING_TAINT;
/// Set by the node lifecycle controller until the node is Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// Set by the cluster autoscaler on a node it drains.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// Set (PreferNoSchedule) by the cluster autoscaler on every node it finds unneeded
/// (`cluster-autoscaler/utils/taints/taints.go`, `DeletionCandidateTaint`). Placeholders
/// tolerate it (every template shipped), users do not.
pub const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";
/// The default TaintToleration score's weight (3, `pkg/scheduler/apis/config/v1/default_plugins.go`;
/// zero-to-jupyterhub's user-scheduler leaves it) times its range: a node with an untolerated
/// PreferNoSchedule taint scores 0, the others 100 (`taint_toleration.go`, `NormalizeScore`,
/// reversed).
const TAINT_TOLERATION: f64 = 3.0 * 100.0;

/// Where a node is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Requested by the autoscaler, not Ready yet.
    Provisioning,
    /// Ready.
    Ready,
    /// Tainted by the autoscaler and being drained.
    Draining,
    /// Gone.
    Removed,
}

/// Nodes by index, of which every pass over the cluster walks those not removed, in index
/// order ([`NodeSet::live`]).
pub trait NodeSet: std::ops::Index<usize, Output = Node> {
    /// The nodes not removed, with their indices, in index order.
    fn live(&self) -> impl Iterator<Item = (usize, &Node)>;
}

impl NodeSet for [Node] {
    fn live(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.iter().enumerate().filter(|(_, n)| n.exists())
    }
}

impl NodeSet for Vec<Node> {
    fn live(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.as_slice().live()
    }
}

/// A run's nodes: every node added, by index (a removed node keeps its place, so that
/// indices hold), and the indices of those not removed. A month's replay adds about a
/// thousand nodes, of which a few dozen exist at a time: the passes over the cluster
/// walk those only.
#[derive(Clone, Debug, Default)]
pub struct Nodes {
    all: Vec<Node>,
    live: Vec<usize>,
}

impl Nodes {
    /// Adds `node`; returns its index.
    pub fn push(&mut self, node: Node) -> usize {
        let i = self.all.len();
        if node.exists() {
            self.live.push(i);
        }
        self.all.push(node);
        i
    }

    /// Node `i` is gone at `now`.
    pub fn remove(&mut self, i: usize, now: Ms) {
        let node = &mut self.all[i];
        node.phase = Phase::Removed;
        node.removed_at = Some(now);
        self.live.retain(|&j| j != i);
    }

    /// How many nodes were added.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// How many nodes exist.
    pub fn count(&self) -> usize {
        self.live.len()
    }

    /// Every node added, removed ones included.
    pub fn all(&self) -> &[Node] {
        &self.all
    }

    /// The nodes, for the results.
    pub fn into_vec(self) -> Vec<Node> {
        self.all
    }
}

impl std::ops::Index<usize> for Nodes {
    type Output = Node;
    fn index(&self, i: usize) -> &Node {
        &self.all[i]
    }
}

impl std::ops::IndexMut<usize> for Nodes {
    fn index_mut(&mut self, i: usize) -> &mut Node {
        &mut self.all[i]
    }
}

impl NodeSet for Nodes {
    fn live(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.live.iter().map(|&i| (i, &self.all[i]))
    }
}

/// A node.
#[derive(Clone, Debug)]
pub struct Node {
    /// `node-000` ...: names sort by creation.
    pub name: String,
    /// Allocatable.
    pub alloc: Resources,
    /// Sum of the requests of the pods bound to it.
    pub used: Resources,
    /// When the autoscaler asked for it.
    pub created: Ms,
    /// When it becomes (became) Ready.
    pub ready_at: Ms,
    /// When the user image is (was) on it.
    pub image_at: Ms,
    /// When the readiness gate removes the startup taint (with the gate).
    pub gate_open_at: Ms,
    /// Phase.
    pub phase: Phase,
    /// The user image is on the node.
    pub image: bool,
    /// Carries the startup taint (readiness gate).
    pub gated: bool,
    /// When it disappeared.
    pub removed_at: Option<Ms>,
    /// User pods bound to it.
    pub users: u32,
    /// Placeholder pods bound to it (not terminating).
    pub placeholders: u32,
    /// Since when the autoscaler finds it unneeded.
    pub unneeded_since: Option<Ms>,
    /// The autoscaler found it unremovable and looks at it again only from then on.
    pub unremovable_until: Option<Ms>,
    /// Carries the autoscaler's soft taint ([`DELETION_CANDIDATE_TAINT`]).
    pub soft_tainted: bool,
}

impl Node {
    /// A node that exists from the start, Ready at `t` with the image.
    pub fn initial(name: String, alloc: Resources, t: Ms) -> Node {
        Node {
            name,
            alloc,
            used: Resources::default(),
            created: t,
            ready_at: t,
            image_at: t,
            gate_open_at: t,
            phase: Phase::Ready,
            image: true,
            gated: false,
            removed_at: None,
            users: 0,
            placeholders: 0,
            unneeded_since: None,
            unremovable_until: None,
            soft_tainted: false,
        }
    }

    /// A node being provisioned: Ready after `ready`, the image `pull` later, and
    /// (with `gate`) the startup taint gone `gate_lag` after that.
    pub fn provisioning(
        name: String,
        alloc: Resources,
        now: Ms,
        ready: Ms,
        pull: Ms,
        gate: Option<Ms>,
    ) -> Node {
        Node {
            created: now,
            ready_at: now + ready,
            image_at: now + ready + pull,
            gate_open_at: now + ready + pull + gate.unwrap_or(0),
            phase: Phase::Provisioning,
            image: false,
            gated: gate.is_some(),
            ..Node::initial(name, alloc, now)
        }
    }

    /// Whether the node still exists (bills, counts towards the node group size).
    pub fn exists(&self) -> bool {
        self.phase != Phase::Removed
    }

    /// Free allocatable resources.
    pub fn free(&self) -> Resources {
        Resources {
            cpu_m: self.alloc.cpu_m.saturating_sub(self.used.cpu_m),
            mem_mib: self.alloc.mem_mib.saturating_sub(self.used.mem_mib),
        }
    }

    /// Whether a pod requesting `req` fits.
    pub fn fits(&self, req: &Resources) -> bool {
        let f = self.free();
        req.cpu_m <= f.cpu_m && req.mem_mib <= f.mem_mib
    }

    /// Over-committed in CPU or memory.
    pub fn overcommitted(&self) -> bool {
        self.used.cpu_m > self.alloc.cpu_m || self.used.mem_mib > self.alloc.mem_mib
    }

    /// Users can be scheduled here (Ready, no startup taint, not draining).
    pub fn takes_users(&self) -> bool {
        self.phase == Phase::Ready && !self.gated
    }

    /// Placeholders can be scheduled here (they tolerate the startup taint).
    pub fn takes_placeholders(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Fraction allocated (mean of CPU and memory, NodeResourcesFit's score) with `extra` added.
    pub fn allocated_with(&self, extra: &Resources) -> f64 {
        let cpu = (self.used.cpu_m + extra.cpu_m) as f64 / self.alloc.cpu_m.max(1) as f64;
        let mem = (self.used.mem_mib + extra.mem_mib) as f64 / self.alloc.mem_mib.max(1) as f64;
        (cpu + mem) / 2.0
    }

    /// Adds (`sign` true) or removes a pod's requests.
    pub fn account(&mut self, req: &Resources, add: bool) {
        if add {
            self.used.cpu_m += req.cpu_m;
            self.used.mem_mib += req.mem_mib;
        } else {
            self.used.cpu_m = self.used.cpu_m.saturating_sub(req.cpu_m);
            self.used.mem_mib = self.used.mem_mib.saturating_sub(req.mem_mib);
        }
    }

    /// What the agent's node watch would hold for this node.
    pub fn summary(&self, at: impl Fn(Ms) -> SystemTime) -> NodeSummary {
        let taint = |key: &str| Taint {
            key: key.into(),
            value: None,
            effect: "NoSchedule".into(),
        };
        let mut taints = Vec::new();
        if self.phase == Phase::Provisioning {
            taints.push(taint(NOT_READY_TAINT));
        }
        if self.gated {
            taints.push(taint(STARTUP_TAINT));
        }
        if self.phase == Phase::Draining {
            taints.push(taint(TO_BE_DELETED_TAINT));
        }
        if self.soft_tainted {
            taints.push(Taint {
                effect: "PreferNoSchedule".into(),
                ..taint(DELETION_CANDIDATE_TAINT)
            });
        }
        let ready = match self.phase {
            Phase::Provisioning => Readiness {
                ready: false,
                since: Some(at(self.created)),
            },
            _ => Readiness {
                ready: true,
                since: Some(at(self.ready_at)),
            },
        };
        NodeSummary {
            name: self.name.clone(),
            // The Node object is registered by its kubelet shortly before it is Ready;
            // before that the cloud VM is not a Node (modelled as created = Ready time).
            created: Some(at(match self.phase {
                Phase::Provisioning => self.created,
                _ => self.ready_at,
            })),
            taints,
            ready,
            images_present: if self.image { vec![0] } else { vec![] },
            ..NodeSummary::default()
        }
    }
}

/// The ImageLocality score every registered node holding the user image gets (the same for
/// each: it depends on the image's spread over the Node objects, Ready or draining; a node still
/// booting is no Node yet).
fn warm_score(nodes: &(impl NodeSet + ?Sized), image_mib: u64) -> f64 {
    let registered = nodes
        .live()
        .filter(|(_, n)| matches!(n.phase, Phase::Ready | Phase::Draining))
        .count();
    let holders = nodes
        .live()
        .filter(|(_, n)| matches!(n.phase, Phase::Ready | Phase::Draining) && n.image)
        .count();
    image_locality(image_mib, holders, registered) as f64
}

/// A user's TaintToleration score on node `n`: users do not tolerate the autoscaler's soft taint.
fn untainted(n: &Node) -> f64 {
    if n.soft_tainted {
        0.0
    } else {
        TAINT_TOLERATION
    }
}

/// Picks the node for a user as zero-to-jupyterhub's user-scheduler does: NodeResourcesFit
/// scored MostAllocated at weight 121 plus ImageLocality at weight 11 (`jupyterhub/values.yaml`,
/// `scheduling.userScheduler.plugins`; an image of `image_mib` MiB), TaintToleration left at its
/// default weight 3: the fullest node that fits, unless a warm node is within about 9 points of
/// it, or an untainted one within about 2.5 points of a node the autoscaler marked as a deletion
/// candidate. Ties go to the older node.
pub fn most_allocated(
    nodes: &(impl NodeSet + ?Sized),
    req: &Resources,
    image_mib: u64,
) -> Option<usize> {
    let warm = warm_score(nodes, image_mib);
    let mut best: Option<(usize, f64)> = None;
    for (i, n) in nodes.live() {
        if n.takes_users() && n.fits(req) {
            let image = if n.image { warm } else { 0.0 };
            let score = 121.0 * 100.0 * n.allocated_with(req) + 11.0 * image + untainted(n);
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// The default scheduler's ImageLocality score (0-100) of a node that holds an image of
/// `size_mib` MiB, when `holders` of the `registered` Node objects hold it
/// (`pkg/scheduler/framework/plugins/imagelocality/image_locality.go`): the size scaled by the
/// image's spread (`holders / registered`), clamped to 23 MB..1000 MB per container (one container
/// here), mapped linearly onto 0-100. A multi-GB image held by more than a few nodes scores 100.
pub fn image_locality(size_mib: u64, holders: usize, registered: usize) -> u64 {
    const MB: u64 = 1024 * 1024;
    const MIN: u64 = 23 * MB;
    const MAX: u64 = 1000 * MB;
    if holders == 0 || registered == 0 {
        return 0;
    }
    let spread = holders as f64 / registered as f64;
    let sum = ((size_mib * MB) as f64 * spread) as u64;
    100 * (sum.clamp(MIN, MAX) - MIN) / (MAX - MIN)
}

/// Picks the node for a user as the default scheduler does: LeastAllocated (NodeResourcesFit,
/// weight 1) plus ImageLocality (weight 1; `pkg/scheduler/apis/config/v1/default_plugins.go`) for
/// an image of `image_mib` MiB; ties go to the older node. The Node objects are the registered
/// nodes (Ready or draining; a node still booting is no Node yet). TaintToleration (weight 3)
/// outweighs both: a node the autoscaler marked as a deletion candidate gets a user only when no
/// other fits. The other default score plugins (NodeResourcesBalancedAllocation, ...) score every
/// node about alike here.
pub fn least_allocated_for_users(
    nodes: &(impl NodeSet + ?Sized),
    req: &Resources,
    image_mib: u64,
) -> Option<usize> {
    let warm = warm_score(nodes, image_mib);
    let mut best: Option<(usize, f64)> = None;
    for (i, n) in nodes.live() {
        if n.takes_users() && n.fits(req) {
            let image = if n.image { warm } else { 0.0 };
            let score = 100.0 * (1.0 - n.allocated_with(req)) + image + untainted(n);
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// Picks the node for a user with the users' scorer.
pub fn place_user(
    nodes: &(impl NodeSet + ?Sized),
    req: &Resources,
    placement: UserPlacement,
    image_mib: u64,
) -> Option<usize> {
    match placement {
        UserPlacement::MostAllocated => most_allocated(nodes, req, image_mib),
        UserPlacement::LeastAllocated => least_allocated_for_users(nodes, req, image_mib),
    }
}

/// Where a user preempts placeholders, as the scheduler's DefaultPreemption chooses
/// (`pkg/scheduler/framework/preemption/preemption.go`, `pickOneNodeForPreemption`; victims per
/// node by `plugins/defaultpreemption/default_preemption.go`, `SelectVictimsOnNode`). On each node
/// the user could run on, the victims are the fewest placeholders that make room, the most
/// recently started first (the older ones are reprieved first: `MoreImportantPod` ranks equal
/// priorities by start time). Among those nodes (every victim has the same priority and PDB): the
/// fewest victims, then the latest start of the earliest-started victim, then the first node.
/// The nodes' allocation plays no part. `starts[n]` holds the start times of the placeholders on
/// node `n`, newest first. Returns the node and the number of victims.
pub fn preemption_node(
    nodes: &(impl NodeSet + ?Sized),
    req: &Resources,
    placeholder: &Resources,
    starts: &[Vec<Ms>],
) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize, Ms)> = None;
    for (i, n) in nodes.live() {
        if !n.takes_users() || n.placeholders == 0 {
            continue;
        }
        let on_node = starts.get(i).map_or(&[][..], Vec::as_slice);
        let mut after = n.clone();
        let mut victims = 0;
        while victims < on_node.len() && !after.fits(req) {
            after.account(placeholder, false);
            victims += 1;
        }
        if victims == 0 || !after.fits(req) {
            continue;
        }
        // The earliest start among the victims: the last of the newest-first list taken.
        let earliest = on_node[victims - 1];
        let better = best.is_none_or(|(_, v, e)| victims < v || (victims == v && earliest > e));
        if better {
            best = Some((i, victims, earliest));
        }
    }
    best.map(|(i, v, _)| (i, v))
}

/// Picks the node for a placeholder: LeastAllocated, plus (with `spreading`
/// = Some(weight)) the default PodTopologySpread score over placeholders per node.
pub fn least_allocated(
    nodes: &(impl NodeSet + ?Sized),
    req: &Resources,
    spreading: Option<f64>,
) -> Option<usize> {
    let feasible = || (nodes.live()).filter(|(_, n)| n.takes_placeholders() && n.fits(req));
    let (max, min) = feasible().fold((0u32, u32::MAX), |(hi, lo), (_, n)| {
        (hi.max(n.placeholders), lo.min(n.placeholders))
    });
    let mut best: Option<(usize, f64)> = None;
    for (i, n) in feasible() {
        let mut score = 100.0 * (1.0 - n.allocated_with(req));
        if let Some(weight) = spreading {
            // The scheduler's normalisation: the node with the fewest matching pods scores 100.
            let spread = if max == 0 {
                100.0
            } else {
                100.0 * f64::from(max + min - n.placeholders) / f64::from(max)
            };
            score += weight * spread;
        }
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}

/// A user's server.
#[derive(Clone, Debug, Default)]
pub struct User {
    /// When the user asked for a server.
    pub arrival: Ms,
    /// How long the server runs.
    pub session: Ms,
    /// Node it was bound to.
    pub node: Option<usize>,
    /// When it was bound.
    pub bound_at: Option<Ms>,
    /// When the server started (after a preemption and an image pull if any).
    pub running_at: Option<Ms>,
    /// The session is over and the pod gone.
    pub ended: bool,
    /// It could neither be scheduled nor preempt a placeholder: it waited for a node.
    pub delayed: bool,
    /// It was bound to a node without the user image.
    pub cold: bool,
    /// It preempted a placeholder.
    pub preempted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: usize, users: u32, phs: u32) -> Node {
        let req = Resources::new(0.15, 1.0);
        let mut n = Node::initial(format!("node-{i:03}"), Resources::new(15.89, 100.0), 0);
        for _ in 0..users + phs {
            n.account(&req, true);
        }
        n.users = users;
        n.placeholders = phs;
        n
    }

    #[test]
    fn users_go_to_the_fullest_node_that_fits() {
        let req = Resources::new(0.15, 1.0);
        let nodes = vec![node(0, 40, 0), node(1, 90, 0), node(2, 100, 0)];
        assert_eq!(most_allocated(&nodes, &req, 8192), Some(1));
        let mut gated = nodes.clone();
        gated[1].gated = true;
        assert_eq!(most_allocated(&gated, &req, 8192), Some(0));
        assert_eq!(
            place_user(&nodes, &req, UserPlacement::LeastAllocated, 8192),
            Some(0)
        );
        assert_eq!(
            place_user(&nodes, &req, UserPlacement::MostAllocated, 8192),
            Some(1)
        );
    }

    #[test]
    fn the_default_scheduler_prefers_a_warm_node_for_a_big_image() {
        let req = Resources::new(0.15, 1.0);
        // Two warm nodes at 60 users, a new empty node still pulling the image.
        let mut nodes = vec![node(0, 60, 0), node(1, 60, 0), node(2, 0, 0)];
        nodes[2].image = false;
        // LeastAllocated alone takes the empty node (100 - 0.5 against 100 - 60.5) ...
        assert_eq!(least_allocated_for_users(&nodes, &req, 0), Some(2));
        // ... an 8 GiB image on 2 of 3 nodes adds 100 to each warm node: a warm one wins.
        assert_eq!(least_allocated_for_users(&nodes, &req, 8192), Some(0));
        // A small image adds little: the empty node wins again.
        assert_eq!(least_allocated_for_users(&nodes, &req, 100), Some(2));
        // A node still booting is no Node object: it neither holds nor dilutes the image.
        nodes[2].phase = Phase::Provisioning;
        assert_eq!(least_allocated_for_users(&nodes, &req, 8192), Some(0));
    }

    #[test]
    fn the_user_scheduler_weighs_the_image_lightly() {
        let req = Resources::new(0.15, 1.0);
        // A warm node at 60 users, a cold one at 65: 5 points fuller, less than ImageLocality's
        // 11/121 x 100 = 9: the warm node.
        let mut nodes = vec![node(0, 60, 0), node(1, 65, 0)];
        nodes[1].image = false;
        assert_eq!(most_allocated(&nodes, &req, 8192), Some(0));
        assert_eq!(most_allocated(&nodes, &req, 0), Some(1));
        // 15 points fuller: the cold one.
        nodes[1] = node(1, 75, 0);
        nodes[1].image = false;
        assert_eq!(most_allocated(&nodes, &req, 8192), Some(1));
    }

    #[test]
    fn image_locality_scales_with_size_and_spread() {
        // 23 MB and below score 0, 1000 MB and above 100 (one container).
        assert_eq!(image_locality(20, 1, 1), 0);
        assert_eq!(image_locality(1000, 1, 1), 100);
        assert_eq!(image_locality(8192, 1, 1), 100);
        // Spread: 8 GiB on 1 of 10 nodes is 819 MiB after scaling: (819 - 23) / 977 -> 81.
        assert_eq!(image_locality(8192, 1, 10), 81);
        assert_eq!(image_locality(8192, 0, 10), 0);
        // 1 GiB on half the nodes: 512 MiB after scaling: (512 - 23) / 977 -> 50.
        assert_eq!(image_locality(1024, 5, 10), 50);
    }

    #[test]
    fn preemption_takes_the_newest_placeholder_whatever_the_allocation() {
        let req = Resources::new(0.15, 1.0);
        let full = vec![node(0, 100, 0), node(1, 95, 5), node(2, 98, 2)];
        assert_eq!(most_allocated(&full, &req, 8192), None);
        // node 2 holds the newest placeholder (started at 50): it is preempted there.
        let starts = vec![vec![], vec![40, 30, 20, 10, 0], vec![50, 5]];
        assert_eq!(preemption_node(&full, &req, &req, &starts), Some((2, 1)));
        // node 1 holds it: there, although node 2 would end up fuller.
        let starts = vec![vec![], vec![60, 30, 20, 10, 0], vec![50, 5]];
        assert_eq!(preemption_node(&full, &req, &req, &starts), Some((1, 1)));
        // Gated nodes take no users, so no preemption there.
        let mut gated = full.clone();
        gated[1].gated = true;
        assert_eq!(preemption_node(&gated, &req, &req, &starts), Some((2, 1)));
        // Fewer victims first: a double-sized user needs 2 on node 1, 2 on node 2; a node with
        // one free slot needs only 1.
        let double = Resources::new(0.30, 2.0);
        let mut roomy = full.clone();
        roomy[1].account(&req, false);
        roomy[1].users -= 1;
        assert_eq!(
            preemption_node(&roomy, &double, &req, &starts),
            Some((1, 1))
        );
    }

    #[test]
    fn the_schedulers_allocation_is_the_mean_fraction() {
        let mut n = Node::initial("n".into(), Resources::new(10.0, 10.0), 0);
        n.account(&Resources::new(1.0, 6.0), true);
        assert!((n.allocated_with(&Resources::default()) - 0.35).abs() < 1e-9);
    }

    /// kubernetes `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`
    /// (`Score`, `NormalizeScore`) at weight 3: a user avoids a node carrying the autoscaler's
    /// `DeletionCandidateOfClusterAutoscaler` when another fits about as well.
    #[test]
    fn users_avoid_a_node_the_autoscaler_marked_for_deletion() {
        let req = Resources::new(0.15, 1.0);
        // LeastAllocated: two warm nodes, the emptier one soft-tainted.
        let mut nodes = vec![node(0, 60, 0), node(1, 30, 0)];
        assert_eq!(least_allocated_for_users(&nodes, &req, 8192), Some(1));
        nodes[1].soft_tainted = true;
        assert_eq!(least_allocated_for_users(&nodes, &req, 8192), Some(0));
        // ... unless nothing else fits.
        let mut full = vec![node(0, 100, 0), node(1, 30, 0)];
        full[1].soft_tainted = true;
        assert_eq!(least_allocated_for_users(&full, &req, 8192), Some(1));
        // MostAllocated (weight 121 on allocation): 300 points are 2.5 points of allocation;
        // a tainted node 2 users fuller loses, 4 users fuller wins.
        let mut nodes = vec![node(0, 40, 0), node(1, 42, 0)];
        nodes[1].soft_tainted = true;
        assert_eq!(most_allocated(&nodes, &req, 8192), Some(0));
        nodes[1] = node(1, 44, 0);
        nodes[1].soft_tainted = true;
        assert_eq!(most_allocated(&nodes, &req, 8192), Some(1));
    }

    #[test]
    fn placeholders_go_to_the_emptiest_node_unless_spreading_outweighs_it() {
        let req = Resources::new(0.15, 1.0);
        // Two old nodes at 80 users and one placeholder each, a new node with two placeholders.
        let nodes = vec![node(0, 80, 1), node(1, 80, 1), node(2, 0, 2)];
        assert_eq!(least_allocated(&nodes, &req, None), Some(2));
        // The old nodes hold fewer placeholders: spreading sends it back.
        let nodes = vec![node(0, 80, 0), node(1, 80, 1), node(2, 0, 2)];
        assert_eq!(least_allocated(&nodes, &req, Some(2.0)), Some(0));
    }

    #[test]
    fn summary_shows_taints_and_images() {
        let mut n = Node::provisioning(
            "node-001".into(),
            Resources::new(1.0, 1.0),
            0,
            10,
            20,
            Some(1),
        );
        let at = |ms: Ms| SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        let s = n.summary(at);
        assert!(!s.ready.ready);
        assert_eq!(s.taints.len(), 2);
        n.phase = Phase::Ready;
        n.gated = false;
        n.image = true;
        let s = n.summary(at);
        assert!(s.ready.ready && s.taints.is_empty());
        assert_eq!(s.images_present, vec![0]);
    }
}
