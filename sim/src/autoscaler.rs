//! The cluster autoscaler: scale-up for Pending pods at or above the priority
//! cutoff (users and placeholders), scale-down of nodes without user pods.
//!
//! Scale-up adds, in one go, enough nodes for every Pending pod that fits on no
//! existing or upcoming node. Upcoming capacity counts nodes being provisioned
//! and nodes held back by a startup taint (the readiness gate): pods that will
//! fit there once the taint goes trigger nothing.
//!
//! Scale-down ([`scale_down`], every loop) follows cluster-autoscaler 1.36's planner: which
//! nodes are unneeded and in what order, the PodDisruptionBudget in the removal simulation,
//! the soft taint, the budgets. The drain it starts (taint, evictions through the PDB, failure
//! after `max_pod_eviction_time`) is the event loop's (`crate::engine`). A CapacityBuffer's
//! chunks are Pending pods to scale-up as long as they fit nowhere, and pods to move for
//! scale-down.

use crate::cluster::{Node, NodeSet, Phase};
use crate::scenario::{AutoscalerConfig, Ms, Resources};

/// How many nodes to add for `pending` Pending pods of size `pod`.
pub fn nodes_to_add(
    nodes: &(impl NodeSet + ?Sized),
    pending: u64,
    pod: &Resources,
    node: &Resources,
    cfg: &AutoscalerConfig,
) -> u32 {
    if pending == 0 {
        return 0;
    }
    let upcoming: u64 = nodes
        .live()
        .filter(|(_, n)| matches!(n.phase, Phase::Provisioning | Phase::Ready))
        .map(|(_, n)| n.free().fits_times(pod))
        .sum();
    let unplaced = pending.saturating_sub(upcoming);
    if unplaced == 0 {
        return 0;
    }
    let per_node = node.fits_times(pod).max(1);
    let want = unplaced.div_ceil(per_node);
    let existing = nodes.live().count() as u64;
    let room = u64::from(cfg.max_nodes).saturating_sub(existing);
    u32::try_from(want.min(room)).unwrap_or(u32::MAX)
}

/// How many nodes to add for `pending` Pending pods that each need a whole empty node
/// (node-sized balloons): one per pod beyond the empty nodes Ready or being provisioned.
pub fn nodes_for_whole_node_pods(
    nodes: &(impl NodeSet + ?Sized),
    pending: u64,
    cfg: &AutoscalerConfig,
) -> u32 {
    let empty = nodes
        .live()
        .filter(|(_, n)| {
            matches!(n.phase, Phase::Provisioning | Phase::Ready) && n.used == Resources::default()
        })
        .count() as u64;
    let existing = nodes.live().count() as u64;
    let room = u64::from(cfg.max_nodes).saturating_sub(existing);
    u32::try_from(pending.saturating_sub(empty).min(room)).unwrap_or(u32::MAX)
}

/// What one autoscaler loop's scale-down reads besides the nodes.
#[derive(Clone, Debug, Default)]
pub struct LoopState {
    pub now: Ms,
    /// No deletion starts in this loop: within `delay_after_add` of a scale-up (this loop's
    /// included), or every pod to help is very new (`core/static_autoscaler.go`,
    /// `isScaleDownInCooldown`). The unneeded timers run on.
    pub cooldown: bool,
    /// Pending pods: users, placeholders, and a buffer's chunks (user-sized).
    pub pending_users: u64,
    pub pending_placeholders: u64,
    pub chunks: u64,
    /// Every placeholder is Ready, so the PodDisruptionBudget (maxUnavailable 1) allows one
    /// disruption; otherwise none.
    pub pdb_allows: bool,
    /// A drain (a node with pods to move) is in flight.
    pub draining: bool,
    /// The placeholders are not safe to evict (`cluster-autoscaler.kubernetes.io/safe-to-evict:
    /// "false"`, `simulator/drainability/rules/safetoevict`): a node holding one is unremovable.
    pub pinned: bool,
}

/// Pod requests: a user's, a placeholder's, and the DaemonSet pod on every node; and the node's
/// allocatable beyond its user slots (`reserve`), where the DaemonSet pod runs.
#[derive(Clone, Copy, Debug)]
pub struct Shapes {
    pub user: Resources,
    pub placeholder: Resources,
    pub daemonset: Resources,
    pub reserve: Resources,
}

/// A deletion the autoscaler starts: node `node`, with pods to move (`drain`) or empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removal {
    pub node: usize,
    pub drain: bool,
}

/// `--max-scale-down-parallelism` (10) and `--max-drain-parallelism` (1).
const MAX_DELETIONS: usize = 10;
const MAX_DRAINS: usize = 1;
/// Soft-taint and untaint calls per loop (`--max-bulk-soft-taint-count`).
const SOFT_TAINT_CALLS: usize = 10;

/// A node as the autoscaler's snapshot holds it: its pods, Pending pods packed onto it
/// included, and its free room.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    users: u64,
    placeholders: u64,
    chunks: u64,
    /// Requests of the Pending pods packed onto it.
    packed: Resources,
    free: Resources,
}

impl Held {
    /// No pod to move and none that blocks (`processors/scaledowncandidates/emptycandidates`).
    fn empty(&self) -> bool {
        self.users + self.placeholders + self.chunks == 0
    }
}

/// Packs up to `count` pods of size `pod` first fit onto the nodes at `order`: how many went to
/// each position of `order`, and how many fit nowhere.
fn pack(held: &mut [Held], order: &[usize], count: u64, pod: &Resources) -> (Vec<u64>, u64) {
    let mut left = count;
    let mut took = vec![0; order.len()];
    for (j, &k) in order.iter().enumerate() {
        if left == 0 {
            break;
        }
        let take = held[k].free.fits_times(pod).min(left);
        held[k].free.cpu_m -= take * pod.cpu_m;
        held[k].free.mem_mib -= take * pod.mem_mib;
        took[j] = take;
        left -= take;
    }
    (took, left)
}

/// One loop's scale-down, as `cluster-autoscaler` 1.36 does it (`core/scaledown/planner`,
/// `core/scaledown/unneeded`, `core/scaledown/budgets`; each rule's test names its source).
/// Updates every node's unneeded timer, recheck timeout and soft taint; returns the deletions to
/// start, and whether a soft taint changed.
///
/// - The snapshot: every node's pods plus the Pending pods packed into free room first fit,
///   users, then placeholders, then a buffer's chunks (`FilterOutSchedulable`), Ready nodes first,
///   then nodes booting or behind a startup taint. Those are neither candidates nor destinations
///   (NotStarted, `RunOnce`), nor are nodes being deleted.
/// - No candidates while the group's target size (booting and deleting nodes included) is at its
///   minimum (`PreFilteringScaleDownNodeProcessor`).
/// - A candidate's utilisation is the larger of its CPU and memory requests over allocatable, the
///   DaemonSet pod and the packed Pending pods included, at or below the threshold
///   (`eligibility`, `utilization/info.go`); computed before any removal is simulated.
/// - Order: nodes with nothing to move first, then those unneeded in the previous loop
///   (`EmptySorting`, `PreviousCandidates`), then creation order: a deterministic stand-in for
///   Go's map order and an unstable sort.
/// - Each removal is simulated in turn on what earlier ones left (`categorizeNodes`): a user pod
///   (a bare pod) blocks it; a placeholder blocks it unless the PDB's remaining budget is at least
///   1, and each moved placeholder spends one; the placeholders and chunks must fit first fit on
///   the destinations left (creation order stands in for the snapshot's; no scoring, the soft
///   taint ignored). A node found removable is a destination no more, and what it moved counts on
///   the nodes it moved to. A failed simulation makes the node unremovable for
///   `unremovable_recheck`; a node above the threshold is looked at again next loop.
/// - A node's unneeded time restarts whenever a loop does not find it removable; it is ripe once
///   strictly more than `unneeded_time` has passed (`unneeded.Nodes`).
/// - Every unneeded node carries the soft taint, removed once it is needed (`softtaint.go`), at
///   most 10 calls a loop, nodes being deleted skipped.
/// - Unless in cooldown: the ripe empty nodes, then those with pods to move, while the group stays
///   above its minimum (target size less deletions in progress, `verifyMinSize`); up to 10
///   deletions in progress, at most one drain (`ScaleDownBudgetProcessor`). (`sortByRisk` puts a
///   drain moving two or more placeholders after the others: never two candidates here, as the
///   PDB lets one node of placeholders be unneeded and chunks fill the oldest nodes first.)
pub fn scale_down<N>(
    nodes: &mut N,
    st: &LoopState,
    shapes: &Shapes,
    cfg: &AutoscalerConfig,
) -> (Vec<Removal>, bool)
where
    N: NodeSet + std::ops::IndexMut<usize, Output = Node> + ?Sized,
{
    let now = st.now;
    // The nodes that exist, by index; the per-node lists below go by position in it.
    let live: Vec<usize> = nodes.live().map(|(i, _)| i).collect();
    let settled = |n: &Node| n.phase == Phase::Ready && !n.gated;
    let mut held: Vec<Held> = (live.iter())
        .map(|&i| {
            let n = &nodes[i];
            Held {
                users: u64::from(n.users),
                placeholders: u64::from(n.placeholders),
                free: n.free(),
                ..Held::default()
            }
        })
        .collect();
    // Pending pods go into the room of Ready nodes, then of booting ones.
    let mut room: Vec<usize> = (0..live.len())
        .filter(|&k| settled(&nodes[live[k]]))
        .collect();
    let dests = room.clone();
    room.extend((0..live.len()).filter(|&k| {
        matches!(nodes[live[k]].phase, Phase::Ready | Phase::Provisioning)
            && !settled(&nodes[live[k]])
    }));
    let pending = [
        (st.pending_users, shapes.user, 0),
        (st.pending_placeholders, shapes.placeholder, 1),
        (st.chunks, shapes.user, 2),
    ];
    for (count, pod, kind) in pending {
        let (took, _) = pack(&mut held, &room, count, &pod);
        for (j, &k) in room.iter().enumerate() {
            let h = &mut held[k];
            match kind {
                0 => h.users += took[j],
                1 => h.placeholders += took[j],
                _ => h.chunks += took[j],
            }
            h.packed.cpu_m += took[j] * pod.cpu_m;
            h.packed.mem_mib += took[j] * pod.mem_mib;
        }
    }
    for &i in &live {
        let n = &mut nodes[i];
        if n.unremovable_until.is_some_and(|t| now >= t) {
            n.unremovable_until = None;
        }
    }
    let mut unneeded = vec![false; live.len()];
    let mut moves = vec![0u64; live.len()];
    if live.len() > cfg.min_nodes as usize {
        let (ds, reserve) = (shapes.daemonset, shapes.reserve);
        let utilisation = |n: &Node, h: &Held| {
            let frac = |used: u64, packed: u64, ds: u64, alloc: u64| {
                (used + packed + ds) as f64 / alloc.max(1) as f64
            };
            let cpu = frac(
                n.used.cpu_m,
                h.packed.cpu_m,
                ds.cpu_m,
                n.alloc.cpu_m + reserve.cpu_m,
            );
            frac(
                n.used.mem_mib,
                h.packed.mem_mib,
                ds.mem_mib,
                n.alloc.mem_mib + reserve.mem_mib,
            )
            .max(cpu)
        };
        let mut order: Vec<usize> = (dests.iter().copied())
            .filter(|&k| {
                let n = &nodes[live[k]];
                n.unremovable_until.is_none() && utilisation(n, &held[k]) <= cfg.utilisation
            })
            .collect();
        order.sort_by_key(|&k| (!held[k].empty(), nodes[live[k]].unneeded_since.is_none(), k));
        let mut budget = i64::from(st.pdb_allows);
        for c in order {
            let h = held[c];
            let others: Vec<usize> = (dests.iter().copied())
                .filter(|&k| k != c && !unneeded[k])
                .collect();
            let mut trial = held.clone();
            let (phs, left) = pack(&mut trial, &others, h.placeholders, &shapes.placeholder);
            let (chunks, left_chunks) = pack(&mut trial, &others, h.chunks, &shapes.user);
            let blocked = h.users > 0 || (h.placeholders > 0 && (st.pinned || budget < 1));
            if blocked || left + left_chunks > 0 {
                nodes[live[c]].unremovable_until = Some(now + cfg.unremovable_recheck);
                continue;
            }
            for (j, &k) in others.iter().enumerate() {
                trial[k].placeholders += phs[j];
                trial[k].chunks += chunks[j];
            }
            held = trial;
            unneeded[c] = true;
            moves[c] = h.placeholders + h.chunks;
            budget -= i64::try_from(h.placeholders).unwrap_or(i64::MAX);
        }
    }
    for (k, &i) in live.iter().enumerate() {
        let n = &mut nodes[i];
        if unneeded[k] {
            n.unneeded_since.get_or_insert(now);
        } else {
            n.unneeded_since = None;
        }
    }
    // Soft taints: first off the needed nodes, then onto the unneeded ones.
    let mut calls = SOFT_TAINT_CALLS;
    let mut tainted = false;
    for taint in [false, true] {
        for (k, &i) in live.iter().enumerate() {
            let n = &mut nodes[i];
            if calls > 0
                && n.phase != Phase::Draining
                && n.soft_tainted != unneeded[k]
                && unneeded[k] == taint
            {
                n.soft_tainted = taint;
                calls -= 1;
                tainted = true;
            }
        }
    }
    if st.cooldown {
        return (Vec::new(), tainted);
    }
    let deleting = (live.iter())
        .filter(|&&i| nodes[i].phase == Phase::Draining)
        .count();
    let mut size = live.len() - deleting;
    let ripe = |k: usize| {
        unneeded[k]
            && nodes[live[k]]
                .unneeded_since
                .is_some_and(|s| s + cfg.unneeded_time < now)
    };
    let (mut empty, mut drain) = (Vec::new(), Vec::new());
    for (k, &i) in live.iter().enumerate() {
        if ripe(k) && moves[k] == 0 && size > cfg.min_nodes as usize {
            size -= 1;
            empty.push(i);
        }
    }
    for (k, &i) in live.iter().enumerate() {
        if ripe(k) && moves[k] > 0 && size > cfg.min_nodes as usize {
            size -= 1;
            drain.push(i);
        }
    }
    let mut parallel = MAX_DELETIONS.saturating_sub(deleting);
    empty.truncate(parallel);
    parallel -= empty.len();
    drain.truncate(parallel.min(if st.draining { 0 } else { MAX_DRAINS }));
    let out = (empty.into_iter().map(|node| Removal { node, drain: false }))
        .chain(drain.into_iter().map(|node| Removal { node, drain: true }))
        .collect();
    (out, tainted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{MIN, Scenario};

    fn nodes(fill: &[(u32, u32)]) -> Vec<Node> {
        let sc = Scenario::binder();
        fill.iter()
            .enumerate()
            .map(|(i, &(users, phs))| {
                let mut n = Node::initial(format!("node-{i:03}"), sc.node, 0);
                for _ in 0..users + phs {
                    n.account(&sc.user, true);
                }
                n.users = users;
                n.placeholders = phs;
                n
            })
            .collect()
    }

    #[test]
    fn adds_enough_nodes_counting_upcoming_capacity() {
        let sc = Scenario::binder();
        let cfg = &sc.autoscaler;
        let full = nodes(&[(100, 0), (100, 0)]);
        assert_eq!(nodes_to_add(&full, 0, &sc.user, &sc.node, cfg), 0);
        assert_eq!(nodes_to_add(&full, 1, &sc.user, &sc.node, cfg), 1);
        assert_eq!(nodes_to_add(&full, 250, &sc.user, &sc.node, cfg), 3);
        let mut with_new = full.clone();
        with_new.push(Node::provisioning(
            "node-002".into(),
            sc.node,
            0,
            1,
            1,
            Some(0),
        ));
        assert_eq!(nodes_to_add(&with_new, 100, &sc.user, &sc.node, cfg), 0);
        assert_eq!(nodes_to_add(&with_new, 101, &sc.user, &sc.node, cfg), 1);
        // a gated Ready node still counts as capacity for users
        with_new[2].phase = Phase::Ready;
        assert_eq!(nodes_to_add(&with_new, 100, &sc.user, &sc.node, cfg), 0);
    }

    /// Binder's autoscaler with one node as the minimum.
    fn min1() -> AutoscalerConfig {
        AutoscalerConfig {
            min_nodes: 1,
            ..Scenario::binder().autoscaler
        }
    }

    fn shapes() -> Shapes {
        let sc = Scenario::binder();
        Shapes {
            user: sc.user,
            placeholder: sc.user,
            daemonset: sc.daemonset,
            reserve: sc.node_reserve,
        }
    }

    /// A loop at `now` with nothing Pending, every placeholder Ready, no drain in flight.
    fn at(now: Ms) -> LoopState {
        LoopState {
            now,
            pdb_allows: true,
            ..LoopState::default()
        }
    }

    fn down(ns: &mut [Node], st: &LoopState, cfg: &AutoscalerConfig) -> Vec<Removal> {
        scale_down(ns, st, &shapes(), cfg).0
    }

    fn unneeded(ns: &[Node]) -> Vec<usize> {
        (0..ns.len())
            .filter(|&i| ns[i].unneeded_since.is_some())
            .collect()
    }

    fn empty(node: usize) -> Removal {
        Removal { node, drain: false }
    }

    fn drain(node: usize) -> Removal {
        Removal { node, drain: true }
    }

    /// `simulator/drainability/rules/replicated/rule.go` (`Drainable`: a pod without a
    /// controller blocks the drain); ripeness `core/scaledown/unneeded/nodes.go`
    /// (`unremovableReason`: `since + threshold` strictly before now).
    #[test]
    fn a_user_blocks_and_a_node_is_ripe_only_after_the_unneeded_time() {
        let cfg = Scenario::binder().autoscaler;
        let mut ns = nodes(&[(90, 0), (1, 0), (0, 5), (0, 0)]);
        assert!(
            down(&mut ns, &at(0), &cfg).is_empty(),
            "not unneeded long enough"
        );
        assert_eq!(unneeded(&ns), vec![2, 3]);
        assert!(
            down(&mut ns, &at(cfg.unneeded_time), &cfg).is_empty(),
            "not more than it"
        );
        let out = down(&mut ns, &at(cfg.unneeded_time + 1), &cfg);
        assert_eq!(out, vec![empty(3), drain(2)]);
    }

    /// `core/static_autoscaler.go` (`isScaleDownInCooldown`, `scaleDown`): the cooldown after a
    /// scale-up (or a loop of very new pods) holds the deletions, not the timers.
    #[test]
    fn the_cooldown_holds_deletions_and_the_timers_run_on() {
        let cfg = min1();
        let mut ns = nodes(&[(90, 0), (0, 0)]);
        let cooling = LoopState {
            cooldown: true,
            ..at(0)
        };
        assert!(down(&mut ns, &cooling, &cfg).is_empty());
        let later = cfg.unneeded_time + 1;
        let cooling = LoopState {
            cooldown: true,
            ..at(later)
        };
        assert!(down(&mut ns, &cooling, &cfg).is_empty());
        assert_eq!(ns[1].unneeded_since, Some(0));
        assert_eq!(down(&mut ns, &at(later), &cfg), vec![empty(1)]);
    }

    /// `core/podlistprocessor/filter_out_schedulable.go` (`filterOutSchedulableByPacking`): the
    /// Pending pods that fit are packed into the snapshot first (Ready nodes, then booting ones),
    /// where they count and block like pods bound there; those that fit nowhere change nothing
    /// (there is no check on Pending pods in `StaticAutoscaler.scaleDown`).
    #[test]
    fn pending_pods_occupy_the_room_they_fit_and_block_nothing_else() {
        let cfg = min1();
        let pending = |users: u64| LoopState {
            pending_users: users,
            ..at(0)
        };
        // 30 Pending users fill node 0: node 1 stays empty.
        let mut ns = nodes(&[(70, 0), (0, 0)]);
        down(&mut ns, &pending(30), &cfg);
        assert!(ns[1].unneeded_since.is_some());
        // 40: 30 onto node 0, 10 onto node 1, which they block.
        let mut ns = nodes(&[(70, 0), (0, 0)]);
        down(&mut ns, &pending(40), &cfg);
        assert!(ns[1].unneeded_since.is_none() && ns[1].unremovable_until.is_some());
        // Pending pods that fit nowhere (each bigger than a node): node 1 goes.
        let mut ns = nodes(&[(70, 0), (0, 0)]);
        let huge = Shapes {
            user: Resources::new(20.0, 200.0),
            ..shapes()
        };
        let st = LoopState {
            pending_users: 40,
            ..at(cfg.unneeded_time + 1)
        };
        scale_down(&mut ns, &at(0), &huge, &cfg);
        assert_eq!(scale_down(&mut ns, &st, &huge, &cfg).0, vec![empty(1)]);
    }

    /// `simulator/drainability/rules/pdb/rule.go` (`Drainable`: a pod whose PDB allows fewer than
    /// 1 disruption blocks) and `core/scaledown/pdb/basic.go` (`RemovePods`, called by
    /// `planner.go`'s `categorizeNodes` for every node found removable): with maxUnavailable 1,
    /// one node holding placeholders per loop, and none while a placeholder is not Ready; both
    /// are simulation failures (the recheck timeout). Empty nodes are exempt.
    #[test]
    fn the_pdb_lets_one_placeholder_node_go_per_loop_and_none_while_one_is_not_ready() {
        let cfg = min1();
        let mut ns = nodes(&[(50, 0), (0, 3), (0, 2), (0, 0)]);
        down(&mut ns, &at(0), &cfg);
        assert_eq!(unneeded(&ns), vec![1, 3]);
        assert_eq!(ns[2].unremovable_until, Some(cfg.unremovable_recheck));
        let mut ns = nodes(&[(50, 0), (0, 3), (0, 2), (0, 0)]);
        let st = LoopState {
            pdb_allows: false,
            ..at(0)
        };
        down(&mut ns, &st, &cfg);
        assert_eq!(unneeded(&ns), vec![3]);
        assert!(ns[1].unremovable_until.is_some() && ns[2].unremovable_until.is_some());
    }

    /// `simulator/drainability/rules/safetoevict/rule.go`: a pod annotated
    /// `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` blocks its node's removal
    /// (the `+pin` rows); an empty node still goes.
    #[test]
    fn pinned_placeholders_keep_their_node() {
        let cfg = min1();
        let st = LoopState {
            pinned: true,
            ..at(0)
        };
        let mut ns = nodes(&[(50, 0), (0, 3), (0, 0)]);
        down(&mut ns, &st, &cfg);
        assert_eq!(unneeded(&ns), vec![2]);
        assert_eq!(ns[1].unremovable_until, Some(cfg.unremovable_recheck));
    }

    /// `processors/scaledowncandidates/emptycandidates/empty_candidates_sorting.go` and
    /// `previouscandidates/previous_candidates_sorting.go` (`ScaleDownEarlierThan`), walked in that
    /// order by `planner.go` (`categorizeNodes`), each removal simulated on what the earlier ones
    /// left (`simulator/cluster.go`, `SimulateNodeRemoval`, and `delete(podDestinations, ...)`).
    #[test]
    fn nodes_with_nothing_to_move_go_first_then_those_unneeded_last_loop() {
        let cfg = min1();
        // Node 2 is empty and goes first: no destination is left for node 1's placeholders.
        // (Taken by index, node 1 would move them onto node 2, which would then hold them.)
        let mut ns = nodes(&[(100, 0), (0, 2), (0, 0)]);
        down(&mut ns, &at(0), &cfg);
        assert_eq!(unneeded(&ns), vec![2]);
        assert!(ns[1].unremovable_until.is_some());
        // Of two placeholder nodes, the one unneeded in the last loop keeps the PDB's one slot.
        let mut ns = nodes(&[(50, 0), (0, 3), (0, 2)]);
        ns[2].unneeded_since = Some(0);
        down(&mut ns, &at(MIN), &cfg);
        assert_eq!(unneeded(&ns), vec![2]);
        assert_eq!(ns[2].unneeded_since, Some(0), "its timer runs on");
    }

    /// `simulator/cluster.go` (`RemovalSimulator.findPlaceFor`): the pods move first fit onto
    /// the destinations left; a node removed earlier in the loop is none (`planner.go`:
    /// `delete(podDestinations, ...)`), nor is a node booting or behind a startup taint
    /// (NotStarted: `core/static_autoscaler.go`, `RunOnce`, and `FilterOutNodesWithStartupTaints`).
    #[test]
    fn removals_in_a_loop_add_up_and_booting_nodes_take_nothing() {
        let cfg = min1();
        // A buffer of 6 chunks: 4 fill node 0, 2 go to node 1. Node 2 (empty) goes first and is
        // then no destination for node 1's chunks.
        let mut ns = nodes(&[(96, 0), (0, 0), (0, 0)]);
        let st = LoopState { chunks: 6, ..at(0) };
        down(&mut ns, &st, &cfg);
        assert_eq!(unneeded(&ns), vec![2]);
        assert!(ns[1].unremovable_until.is_some());
        // A gated node takes no placeholder in the simulation.
        let mut ns = nodes(&[(100, 0), (0, 2), (0, 0)]);
        ns[2].gated = true;
        down(&mut ns, &at(0), &cfg);
        assert!(unneeded(&ns).is_empty());
        ns[2].gated = false;
        ns[1].unremovable_until = None;
        down(&mut ns, &at(0), &cfg);
        assert_eq!(
            unneeded(&ns),
            vec![2],
            "ungated, it is empty and goes first"
        );
    }

    /// `core/scaledown/eligibility/eligibility.go` (`isNodeAtOrBelowUtilizationThreshold`: above
    /// the threshold is not underutilised) and `simulator/utilization/info.go` (`Calculate`:
    /// every pod's requests, the DaemonSet pod's included, over the node's whole allocatable).
    #[test]
    fn the_threshold_is_at_or_below_with_the_daemonset_pod_counted() {
        // The bench's 16-core nodes: 16 slots of 1 core / 4 GiB, and 100m / 256 MiB more for
        // the DaemonSet pod (allocatable 16.1 cores, 64.25 GiB).
        let pod = Resources::new(1.0, 4.0);
        let node = |users: u32, phs: u32| {
            let mut n = Node::initial("node".into(), Resources::new(16.0, 64.0), 0);
            for _ in 0..users + phs {
                n.account(&pod, true);
            }
            n.users = users;
            n.placeholders = phs;
            n
        };
        let cfg = min1();
        let with = |ds: Resources| Shapes {
            user: pod,
            placeholder: pod,
            daemonset: ds,
            reserve: Resources::new(0.1, 0.25),
        };
        let found = |phs: u32, sh: &Shapes| {
            let mut ns = vec![node(9, 0), node(0, phs), node(9, 0)];
            scale_down(&mut ns, &at(0), sh, &cfg);
            ns[1].unneeded_since.is_some()
        };
        // The node gate's pod (manifests/node-gate/daemonset.yaml: 1m, 16 MiB): 8 of 16 is
        // 49.8 %, underutilised, as the real autoscaler found new-node-ma-bspws with its 8
        // placeholders ("utilization: {0.4969 0.4983 ...}"); 9 is 56 %.
        let gate = with(Resources::new(0.001, 16.0 / 1024.0));
        assert!(found(8, &gate));
        assert!(!found(9, &gate));
        // A DaemonSet pod filling the reserve (100m, 256 MiB): 8 of 16 is 50.3 %, above; 7 is 44 %.
        let full = with(Resources::new(0.1, 0.25));
        assert!(!found(8, &full));
        assert!(found(7, &full));
    }

    /// `core/scaledown/budgets/budgets.go` (`ScaleDownBudgetProcessor.CropNodes`): at most one
    /// drain in progress (`--max-drain-parallelism`), empty nodes beside it, up to 10 deletions
    /// in progress.
    #[test]
    fn one_drain_at_a_time_and_empty_nodes_beside_it() {
        let cfg = min1();
        let ripe = cfg.unneeded_time + 1;
        let mut ns = nodes(&[(50, 0), (0, 1), (0, 0), (0, 0)]);
        down(&mut ns, &at(0), &cfg);
        let st = LoopState {
            draining: true,
            ..at(ripe)
        };
        assert_eq!(down(&mut ns, &st, &cfg), vec![empty(2), empty(3)]);
        assert_eq!(
            down(&mut ns, &at(ripe), &cfg),
            vec![empty(2), empty(3), drain(1)]
        );
        // Ten deletions in progress leave room for none.
        let mut ns = nodes(&[(50, 0), (0, 0)]);
        for _ in 0..10 {
            let mut n = nodes(&[(0, 0)]).remove(0);
            n.phase = Phase::Draining;
            ns.push(n);
        }
        down(&mut ns, &at(0), &cfg);
        assert!(down(&mut ns, &at(ripe), &cfg).is_empty());
        ns[2].phase = Phase::Removed;
        assert_eq!(down(&mut ns, &at(ripe), &cfg), vec![empty(1)]);
    }

    /// `processors/nodes/pre_filtering_processor.go` (`GetScaleDownCandidates`: no candidate
    /// while the group's target size, booting nodes included, is at its minimum) and
    /// `core/scaledown/unneeded/nodes.go` (`verifyMinSize`: target size less deletions in
    /// progress, each accepted node counted).
    #[test]
    fn the_minimum_is_per_group_on_the_target_size() {
        let cfg = Scenario::binder().autoscaler;
        assert_eq!(cfg.min_nodes, 2);
        let mut ns = nodes(&[(0, 0), (0, 0)]);
        down(&mut ns, &at(0), &cfg);
        assert!(
            unneeded(&ns).is_empty(),
            "at the minimum: no candidate, no timer"
        );
        ns.push(Node::provisioning(
            "node-002".into(),
            ns[0].alloc,
            0,
            MIN,
            MIN,
            None,
        ));
        down(&mut ns, &at(0), &cfg);
        assert_eq!(unneeded(&ns), vec![0, 1]);
        let out = down(&mut ns, &at(cfg.unneeded_time + 1), &cfg);
        assert_eq!(out, vec![empty(0)], "one, down to 2 with the booting node");
    }

    /// `core/scaledown/unneeded/nodes.go` (`Update`: a node not found removable in a loop starts
    /// from zero) and `core/scaledown/planner/planner.go` (`categorizeNodes`: the recheck timeout
    /// only for a failed simulation; `unremovable.Nodes.IsRecent` skips the node until then).
    #[test]
    fn a_miss_restarts_the_timer_and_only_a_failed_simulation_waits_for_the_recheck() {
        let cfg = min1();
        // node 1 holds one user: below 50 %, but its bare pod blocks the removal.
        let mut ns = nodes(&[(90, 0), (1, 0)]);
        down(&mut ns, &at(0), &cfg);
        assert_eq!(ns[1].unremovable_until, Some(cfg.unremovable_recheck));
        // The user leaves; the node is not looked at again before the timeout ...
        ns[1].account(&Scenario::binder().user, false);
        ns[1].users = 0;
        down(&mut ns, &at(MIN), &cfg);
        assert!(ns[1].unneeded_since.is_none());
        // ... and then found unneeded.
        let t = cfg.unremovable_recheck;
        down(&mut ns, &at(t), &cfg);
        assert_eq!(ns[1].unneeded_since, Some(t));
        // A node above the threshold is not simulated, so not remembered as unremovable, and a
        // node missed once starts again.
        let mut ns = nodes(&[(90, 0), (0, 60)]);
        ns[1].unneeded_since = Some(0);
        down(&mut ns, &at(MIN), &cfg);
        assert!(ns[1].unremovable_until.is_none() && ns[1].unneeded_since.is_none());
    }

    /// `simulator/utilization/info.go` (`Calculate`: the pods in the snapshot, a buffer's
    /// injected chunks included).
    #[test]
    fn a_buffers_chunks_count_in_the_utilisation_of_the_node_they_are_placed_on() {
        let cfg = min1();
        // An empty old node and a node at 30 users: 55 chunks go first fit to the old node,
        // which is then 55 % utilised: not a candidate, although the chunks would fit on node 1.
        let mut ns = nodes(&[(0, 0), (30, 0)]);
        down(
            &mut ns,
            &LoopState {
                chunks: 55,
                ..at(0)
            },
            &cfg,
        );
        assert!(ns[0].unneeded_since.is_none() && ns[0].unremovable_until.is_none());
        // 45 chunks leave it at 45 %: unneeded (they fit on node 1).
        let mut ns = nodes(&[(0, 0), (30, 0)]);
        down(
            &mut ns,
            &LoopState {
                chunks: 45,
                ..at(0)
            },
            &cfg,
        );
        assert!(ns[0].unneeded_since.is_some());
        // They must move: with 60 users on node 1 they fit nowhere else.
        let mut ns = nodes(&[(0, 0), (60, 0)]);
        down(
            &mut ns,
            &LoopState {
                chunks: 45,
                ..at(0)
            },
            &cfg,
        );
        assert!(ns[0].unneeded_since.is_none() && ns[0].unremovable_until.is_some());
    }

    #[test]
    fn scale_down_uses_the_larger_of_cpu_and_memory() {
        let cfg = min1();
        // 45 placeholders of a memory-heavy shape: CPU 21 %, memory 54 %, mean 38 %.
        let pod = Resources::new(0.075, 1.2);
        let mut ns = nodes(&[(0, 0), (0, 0)]);
        for _ in 0..45 {
            ns[1].account(&pod, true);
        }
        ns[1].placeholders = 45;
        let sh = Shapes {
            placeholder: pod,
            ..shapes()
        };
        scale_down(&mut ns, &at(0), &sh, &cfg);
        assert!(ns[1].unneeded_since.is_none(), "54 % is above 50 %");
        assert!(ns[0].unneeded_since.is_some());
    }

    /// `core/scaledown/actuation/softtaint.go` (`UpdateSoftDeletionTaints`, called by
    /// `StaticAutoscaler.scaleDown` in every loop): every unneeded node carries the soft taint,
    /// a needed one loses it, at most 10 calls a loop (`--max-bulk-soft-taint-count`), nodes
    /// being deleted left alone.
    #[test]
    fn every_unneeded_node_carries_the_soft_taint_while_it_is_unneeded() {
        let cfg = min1();
        let mut fill = vec![(60, 0)];
        fill.extend([(0, 0); 12]);
        let mut ns = nodes(&fill);
        let cooling = LoopState {
            cooldown: true,
            ..at(0)
        };
        let (_, changed) = scale_down(&mut ns, &cooling, &shapes(), &cfg);
        assert!(changed);
        let tainted = |ns: &[Node]| (0..ns.len()).filter(|&i| ns[i].soft_tainted).count();
        assert_eq!(tainted(&ns), 10, "10 a loop, in cooldown too");
        down(&mut ns, &at(1), &cfg);
        assert_eq!(tainted(&ns), 12);
        assert!(!ns[0].soft_tainted);
        // A user on node 1: it is needed, the taint goes.
        ns[1].account(&Scenario::binder().user, true);
        ns[1].users = 1;
        ns[2].phase = Phase::Draining;
        ns[2].unneeded_since = None;
        let (_, changed) = scale_down(&mut ns, &at(2), &shapes(), &cfg);
        assert!(changed && !ns[1].soft_tainted);
        assert!(ns[2].soft_tainted, "a node being deleted is skipped");
        let (_, changed) = scale_down(&mut ns, &at(3), &shapes(), &cfg);
        assert!(!changed);
    }

    #[test]
    fn a_balloon_needs_an_empty_node() {
        let sc = Scenario::binder();
        let cfg = &sc.autoscaler;
        let ns = nodes(&[(10, 0), (0, 0)]);
        assert_eq!(nodes_for_whole_node_pods(&ns, 1, cfg), 0);
        assert_eq!(nodes_for_whole_node_pods(&ns, 3, cfg), 2);
    }
}
