//! The cluster autoscaler: scale-up for Pending pods at or above the priority
//! cutoff (users and placeholders), scale-down of nodes without user pods.
//!
//! Scale-up adds, in one go, enough nodes for every Pending pod that fits on no
//! existing or upcoming node. Upcoming capacity counts nodes being provisioned
//! and nodes held back by a startup taint (the readiness gate): pods that will
//! fit there once the taint goes trigger nothing.
//!
//! Scale-down: a node is unneeded when it holds no user pod (bare pods block
//! scale-down), its requests (the larger of CPU and memory, a buffer's chunks on it included)
//! are below the utilisation threshold, and its placeholders fit on the other nodes; a node
//! found unremovable is looked at again only after `unremovable_recheck`. After
//! `unneeded_time` it is drained:
//! empty nodes all at once, at most one node with placeholders per scan. Nothing
//! is removed within `delay_after_add` of a scale-up, while any pod is Pending,
//! or below the minimum node count.
//!
//! A CapacityBuffer's chunks are Pending pods to scale-up as long as they fit nowhere, and
//! scale-down keeps a node unless all chunks still fit on the nodes that stay.

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

/// Where the autoscaler's snapshot holds `chunks` injected chunk pods of size `pod`: first fit
/// over the Ready nodes (gated or not) in creation order, then the booting ones. Per node that
/// exists, in index order.
pub fn chunks_per_node(nodes: &(impl NodeSet + ?Sized), chunks: u64, pod: &Resources) -> Vec<u64> {
    let mut left = chunks;
    let mut out = vec![0; nodes.live().count()];
    for phase in [Phase::Ready, Phase::Provisioning] {
        for (k, (_, n)) in nodes.live().enumerate() {
            if left == 0 {
                return out;
            }
            if n.phase == phase {
                let take = n.free().fits_times(pod).min(left);
                out[k] = take;
                left -= take;
            }
        }
    }
    out
}

/// Updates every node's `unneeded_since` and returns the nodes to drain now. `reserve` pods of
/// size `pod` (a CapacityBuffer's chunks) must still fit on the nodes that stay.
///
/// As `cluster-autoscaler/core/scaledown/planner` does: a node is a candidate when its
/// utilisation (the larger of CPU and memory, chunks placed on it included:
/// `simulator/utilization/info.go`) is below the threshold and it was not found unremovable
/// within `unremovable_recheck`; the removal is then simulated: a user pod (a bare pod) blocks it,
/// and its placeholders and the buffer's chunks must fit on the nodes that stay. A node that fails
/// the simulation is unremovable for `unremovable_recheck` (`--unremovable-node-recheck-timeout`).
pub fn scale_down<N>(
    nodes: &mut N,
    pod: &Resources,
    cfg: &AutoscalerConfig,
    now: Ms,
    last_scale_up: Option<Ms>,
    any_pending: bool,
    reserve: u64,
) -> Vec<usize>
where
    N: NodeSet + std::ops::IndexMut<usize, Output = Node> + ?Sized,
{
    // The nodes that exist, by index; the per-node lists below go by position in it.
    let live: Vec<usize> = nodes.live().map(|(i, _)| i).collect();
    let mut slots: Vec<u64> = live
        .iter()
        .map(|&i| {
            let n = &nodes[i];
            if n.takes_placeholders() {
                n.free().fits_times(pod)
            } else {
                0
            }
        })
        .collect();
    let chunks_on = chunks_per_node(&*nodes, reserve, pod);
    for &i in &live {
        let n = &mut nodes[i];
        if n.unremovable_until.is_some_and(|t| now >= t) {
            n.unremovable_until = None;
        }
    }
    let mut candidates: Vec<usize> = (0..live.len())
        .filter(|&k| {
            let n = &nodes[live[k]];
            let chunks = Resources {
                cpu_m: pod.cpu_m * chunks_on[k],
                mem_mib: pod.mem_mib * chunks_on[k],
            };
            n.phase == Phase::Ready
                && !n.gated
                && n.unremovable_until.is_none()
                && n.utilisation_with(&chunks) < cfg.utilisation
        })
        .collect();
    candidates.sort_by_key(|&k| (nodes[live[k]].placeholders, k));
    let mut unneeded = vec![false; live.len()];
    for &c in &candidates {
        let node = &mut nodes[live[c]];
        if node.users > 0 {
            node.unremovable_until = Some(now + cfg.unremovable_recheck);
            continue;
        }
        let mut need = u64::from(node.placeholders);
        let available: u64 = (0..live.len())
            .filter(|&j| j != c && !unneeded[j])
            .map(|j| slots[j])
            .sum();
        if need + reserve > available {
            node.unremovable_until = Some(now + cfg.unremovable_recheck);
            continue;
        }
        unneeded[c] = true;
        slots[c] = 0;
        for (j, s) in slots.iter_mut().enumerate() {
            if need == 0 {
                break;
            }
            if j != c && !unneeded[j] {
                let take = need.min(*s);
                *s -= take;
                need -= take;
            }
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
    let cooling = last_scale_up.is_some_and(|t| now < t + cfg.delay_after_add);
    if cooling || any_pending {
        return Vec::new();
    }
    let mut active = (live.iter())
        .filter(|&&i| matches!(nodes[i].phase, Phase::Provisioning | Phase::Ready))
        .count();
    let mut ripe: Vec<usize> = (live.iter().copied())
        .filter(|&i| {
            nodes[i]
                .unneeded_since
                .is_some_and(|s| now >= s + cfg.unneeded_time)
        })
        .collect();
    ripe.sort_by_key(|&i| (nodes[i].placeholders, i));
    let mut out = Vec::new();
    let mut non_empty_taken = false;
    for i in ripe {
        if active <= cfg.min_nodes as usize {
            break;
        }
        if nodes[i].placeholders > 0 {
            if non_empty_taken {
                continue;
            }
            non_empty_taken = true;
        }
        active -= 1;
        out.push(i);
    }
    out
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

    #[test]
    fn never_scales_down_a_node_with_a_user() {
        let sc = Scenario::binder();
        let cfg = &sc.autoscaler;
        let mut ns = nodes(&[(90, 0), (1, 0), (0, 5), (0, 0)]);
        let out = scale_down(&mut ns, &sc.user, cfg, 0, None, false, 0);
        assert!(out.is_empty(), "not unneeded long enough");
        assert!(ns[1].unneeded_since.is_none());
        assert!(ns[2].unneeded_since.is_some() && ns[3].unneeded_since.is_some());
        let out = scale_down(&mut ns, &sc.user, cfg, cfg.unneeded_time, None, false, 0);
        assert_eq!(out, vec![3, 2]);
        let mut ns = nodes(&[(90, 0), (1, 0), (0, 5), (0, 0)]);
        scale_down(&mut ns, &sc.user, cfg, 0, None, false, 0);
        let out = scale_down(&mut ns, &sc.user, cfg, cfg.unneeded_time, Some(1), false, 0);
        assert!(out.is_empty(), "just scaled up");
        let out = scale_down(&mut ns, &sc.user, cfg, cfg.unneeded_time, None, true, 0);
        assert!(out.is_empty(), "pods pending");
    }

    #[test]
    fn keeps_placeholders_that_fit_nowhere_else() {
        let sc = Scenario::binder();
        let cfg = AutoscalerConfig {
            min_nodes: 1,
            ..sc.autoscaler.clone()
        };
        let mut ns = nodes(&[(98, 0), (0, 25)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 0);
        assert!(ns[1].unneeded_since.is_none());
        let mut ns = nodes(&[(70, 0), (0, 25)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 0);
        assert!(ns[1].unneeded_since.is_some());
    }

    #[test]
    fn a_buffer_keeps_the_node_its_chunks_need() {
        let sc = Scenario::binder();
        let cfg = AutoscalerConfig {
            min_nodes: 1,
            ..sc.autoscaler.clone()
        };
        // 70 users on one node leave 30 slots: 25 chunks fit without the empty node, 35 do not.
        let mut ns = nodes(&[(70, 0), (0, 0)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 25);
        assert!(ns[1].unneeded_since.is_some());
        let mut ns = nodes(&[(70, 0), (0, 0)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 35);
        assert!(ns[1].unneeded_since.is_none());
    }

    #[test]
    fn a_node_found_unremovable_is_looked_at_again_after_the_recheck_timeout() {
        let sc = Scenario::binder();
        let cfg = AutoscalerConfig {
            min_nodes: 1,
            ..sc.autoscaler.clone()
        };
        // node 1 holds one user: below 50 %, but its bare pod blocks the removal.
        let mut ns = nodes(&[(90, 0), (1, 0)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 0);
        assert_eq!(ns[1].unremovable_until, Some(cfg.unremovable_recheck));
        // The user leaves; the node is not looked at again before the timeout ...
        ns[1].account(&sc.user, false);
        ns[1].users = 0;
        scale_down(&mut ns, &sc.user, &cfg, MIN, None, false, 0);
        assert!(ns[1].unneeded_since.is_none());
        // ... and then found unneeded.
        let t = cfg.unremovable_recheck;
        scale_down(&mut ns, &sc.user, &cfg, t, None, false, 0);
        assert_eq!(ns[1].unneeded_since, Some(t));
        // A node above the threshold is not simulated, so not remembered as unremovable.
        let mut ns = nodes(&[(90, 0), (60, 0)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 0);
        assert!(ns[1].unremovable_until.is_none());
    }

    #[test]
    fn a_buffers_chunks_count_in_the_utilisation_of_the_node_they_are_placed_on() {
        let sc = Scenario::binder();
        let cfg = AutoscalerConfig {
            min_nodes: 1,
            ..sc.autoscaler.clone()
        };
        // An empty old node and a node at 30 users: 55 chunks go first fit to the old node,
        // which is then 55 % utilised: not a candidate, although the chunks would fit on node 1.
        let mut ns = nodes(&[(0, 0), (30, 0)]);
        assert_eq!(chunks_per_node(&ns, 55, &sc.user), vec![55, 0]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 55);
        assert!(ns[0].unneeded_since.is_none() && ns[0].unremovable_until.is_none());
        // 45 chunks leave it at 45 %: unneeded (they fit on node 1).
        let mut ns = nodes(&[(0, 0), (30, 0)]);
        scale_down(&mut ns, &sc.user, &cfg, 0, None, false, 45);
        assert!(ns[0].unneeded_since.is_some());
    }

    #[test]
    fn scale_down_uses_the_larger_of_cpu_and_memory() {
        let sc = Scenario::binder();
        let cfg = AutoscalerConfig {
            min_nodes: 1,
            ..sc.autoscaler.clone()
        };
        // 45 placeholders of a memory-heavy shape: CPU 21 %, memory 54 %, mean 38 %.
        let pod = Resources::new(0.075, 1.2);
        let mut ns = nodes(&[(0, 0), (0, 0)]);
        for _ in 0..45 {
            ns[1].account(&pod, true);
        }
        ns[1].placeholders = 45;
        scale_down(&mut ns, &pod, &cfg, 0, None, false, 0);
        assert!(ns[1].unneeded_since.is_none(), "54 % is not below 50 %");
        assert!(ns[0].unneeded_since.is_some());
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
