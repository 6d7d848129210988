//! The peers that selfdestruct is compared with, each modelled as it works
//! (sources and approximations: docs/peers.md).
//!
//! - [`Peer::Buffer`]: a CapacityBuffer (`buffer.x-k8s.io/active-capacity`). No pod runs; the
//!   autoscaler keeps `replicas` user-sized chunks of free space in Ready and booting nodes.
//! - [`Peer::Rebalancer`]: datahub's rebalancer (PR #1050). Every scan, when a new node has
//!   appeared, it deletes every placeholder at once.
//! - [`Peer::NodeBalloon`]: datahub's node placeholders (PR #2337). Each balloon requests a
//!   whole node's allocatable.
//! - [`Peer::PodLifeTime`]: the descheduler's `PodLifeTime` plugin on a periodic run, evicting
//!   placeholders older than a fixed age through the eviction API (the PDB applies).
//!
//! [`Peer`], its rows ([`Peer::ROWS`]) and [`PeerConfig`] live in [`crate::scenario`] (which
//! imports nothing of the simulator's); `Peer`'s methods here are all the event loop and the
//! report ask of a peer: a new peer is a variant with its rows there, and its arms here. The
//! functions below are the peers' rules, free of the event loop, so they are tested alone.

use crate::cluster::{Node, NodeSet, Phase};
use crate::metrics::MoveReason;
use crate::scenario::{Ms, Peer, PeerConfig, Resources, Scenario, dur};

/// What a peer's own loop ([`Peer::scan`]) does in one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Placeholders it takes away (deleted or evicted), in order, and why.
    pub evict: Vec<(usize, MoveReason)>,
    /// Evictions the PodDisruptionBudget refused.
    pub refused: u64,
}

/// The placeholders as a peer's loop sees them.
pub struct ScanInput<'a> {
    pub now: Ms,
    pub nodes: &'a [Node],
    /// Per placeholder, its start time if it is running.
    pub started: &'a [Option<Ms>],
    pub config: &'a PeerConfig,
}

impl Peer {
    /// What the peer does in `sc`, for the report's header (`None`: selfdestruct).
    pub fn describe(self, sc: &Scenario) -> Option<String> {
        let p = &sc.peers;
        Some(match self {
            Peer::Selfdestruct => return None,
            Peer::Buffer => format!(
                "buffer = {} user-sized chunks kept free by the autoscaler (no pods)",
                sc.replicas
            ),
            Peer::Rebalancer => format!(
                "rebalancer deletes every placeholder when a node appears (scan {})",
                dur(p.rebalancer_interval)
            ),
            Peer::NodeBalloon => format!(
                "node-balloon = {} whole-node placeholder(s)",
                balloons_for(sc.replicas, sc.pods_per_node())
            ),
            Peer::PodLifeTime => format!(
                "podlifetime evicts placeholders older than {} every {} (PDB applies)",
                dur(p.max_pod_lifetime),
                dur(p.descheduler_interval)
            ),
        })
    }

    /// Placeholder pods for `replicas` users' worth of room: none for a buffer, whole-node
    /// balloons, else `replicas`.
    pub fn pods(self, replicas: u32, pods_per_node: u64) -> u32 {
        match self {
            Peer::Buffer => 0,
            Peer::NodeBalloon => balloons_for(replicas, pods_per_node),
            Peer::Selfdestruct | Peer::Rebalancer | Peer::PodLifeTime => replicas,
        }
    }

    /// What one placeholder pod requests: a node's allocatable for a balloon, else a user's.
    pub fn pod_size(self, sc: &Scenario) -> Resources {
        match self {
            Peer::NodeBalloon => sc.node,
            Peer::Selfdestruct | Peer::Buffer | Peer::Rebalancer | Peer::PodLifeTime => sc.user,
        }
    }

    /// User-sized chunks the autoscaler keeps free for `replicas` (a CapacityBuffer's).
    pub fn buffer_chunks(self, replicas: u32) -> u32 {
        match self {
            Peer::Buffer => replicas,
            Peer::Selfdestruct | Peer::Rebalancer | Peer::NodeBalloon | Peer::PodLifeTime => 0,
        }
    }

    /// Whether each Pending placeholder asks the autoscaler for a whole node.
    pub fn whole_node_pods(self) -> bool {
        self == Peer::NodeBalloon
    }

    /// The period of the peer's own loop ([`Peer::scan`]), if it has one.
    pub fn scan_every(self, config: &PeerConfig) -> Option<Ms> {
        match self {
            Peer::Rebalancer => Some(config.rebalancer_interval),
            Peer::PodLifeTime => Some(config.descheduler_interval),
            Peer::Selfdestruct | Peer::Buffer | Peer::NodeBalloon => None,
        }
    }

    /// One run of the peer's loop. `known` is the rebalancer's memory of the nodes it has seen
    /// Ready.
    pub fn scan(self, input: &ScanInput<'_>, known: &mut Vec<bool>) -> ScanOutcome {
        match self {
            Peer::Rebalancer => {
                // When a node has appeared since the last scan, delete every running
                // placeholder at once (a delete: the PDB does not apply). The first scan
                // learns the nodes that were there before it started.
                let first = known.is_empty();
                if !rebalancer_scan(input.nodes, known) || first {
                    return ScanOutcome::default();
                }
                ScanOutcome {
                    evict: (0..input.started.len())
                        .filter(|&p| input.started[p].is_some())
                        .map(|p| (p, MoveReason::Rebalancer))
                        .collect(),
                    refused: 0,
                }
            }
            Peer::PodLifeTime => {
                // One descheduler run of PodLifeTime through the eviction API.
                let unavailable = input.started.iter().filter(|s| s.is_none()).count() as u32;
                let run = podlifetime_run(
                    input.started,
                    input.now,
                    input.config.max_pod_lifetime,
                    unavailable,
                    1,
                );
                ScanOutcome {
                    evict: run
                        .evicted
                        .into_iter()
                        .map(|p| (p, MoveReason::PodLifeTime))
                        .collect(),
                    refused: run.refused.len() as u64,
                }
            }
            Peer::Selfdestruct | Peer::Buffer | Peer::NodeBalloon => ScanOutcome::default(),
        }
    }
}

/// How many balloons stand for `replicas` user-sized placeholders: enough whole nodes to hold
/// them (at least one when `replicas` > 0).
pub fn balloons_for(replicas: u32, pods_per_node: u64) -> u32 {
    let per = u32::try_from(pods_per_node.max(1)).unwrap_or(u32::MAX);
    replicas.div_ceil(per)
}

/// Chunks of size `chunk` that fit into the free space of the nodes the autoscaler counts for
/// a buffer: Ready (with or without a startup taint) and still booting.
pub fn chunks_that_fit(nodes: &(impl NodeSet + ?Sized), chunk: &Resources) -> u64 {
    nodes
        .live()
        .filter(|(_, n)| matches!(n.phase, Phase::Provisioning | Phase::Ready))
        .map(|(_, n)| n.free().fits_times(chunk))
        .sum()
}

/// The buffer's chunks that fit nowhere: the autoscaler treats them as Pending pods.
pub fn unplaced_chunks(nodes: &(impl NodeSet + ?Sized), chunks: u32, chunk: &Resources) -> u64 {
    u64::from(chunks).saturating_sub(chunks_that_fit(nodes, chunk))
}

/// The rebalancer's scan: the Ready nodes not `known` before. Returns whether to delete every
/// placeholder now (a node appeared since the last scan) and updates `known`.
pub fn rebalancer_scan(nodes: &[Node], known: &mut Vec<bool>) -> bool {
    known.resize(nodes.len(), false);
    let mut new = false;
    for (i, n) in nodes.iter().enumerate() {
        if n.phase == Phase::Ready && !known[i] {
            known[i] = true;
            new = true;
        }
    }
    new
}

/// What one PodLifeTime run does to the placeholders.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifetimeRun {
    /// Evicted (the PDB allowed it).
    pub evicted: Vec<usize>,
    /// Refused by the PDB (HTTP 429).
    pub refused: Vec<usize>,
}

/// One descheduler run of PodLifeTime. `pods` holds, per placeholder, its start time if it is
/// running and `None` otherwise; `unavailable` counts the replicas not running (Pending or
/// terminating); the PDB allows `max_unavailable`. Pods older than `max_age` are tried, oldest
/// first; each eviction makes one more replica unavailable, so once the budget is spent the
/// rest of the run is refused.
pub fn podlifetime_run(
    pods: &[Option<Ms>],
    now: Ms,
    max_age: Ms,
    unavailable: u32,
    max_unavailable: u32,
) -> LifetimeRun {
    let mut old: Vec<(Ms, usize)> = pods
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.filter(|&s| now.saturating_sub(s) > max_age)
                .map(|s| (s, i))
        })
        .collect();
    old.sort_unstable();
    let mut run = LifetimeRun::default();
    let mut down = unavailable;
    for (_, i) in old {
        if down < max_unavailable {
            down += 1;
            run.evicted.push(i);
        } else {
            run.refused.push(i);
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{MIN, Scenario};

    fn filled(i: usize, users: u32) -> Node {
        let sc = Scenario::binder();
        let mut n = Node::initial(format!("node-{i:03}"), sc.node, 0);
        for _ in 0..users {
            n.account(&sc.user, true);
        }
        n.users = users;
        n
    }

    #[test]
    fn the_buffer_needs_a_node_exactly_when_a_chunk_no_longer_fits() {
        let sc = Scenario::binder();
        // 100 users a node: 25 chunks fit while 75 users are on the one node.
        let nodes = vec![filled(0, 75)];
        assert_eq!(chunks_that_fit(&nodes, &sc.user), 25);
        assert_eq!(unplaced_chunks(&nodes, 25, &sc.user), 0);
        let nodes = vec![filled(0, 76)];
        assert_eq!(unplaced_chunks(&nodes, 25, &sc.user), 1);
        // a booting node counts: nothing is unplaced
        let mut with_new = nodes.clone();
        with_new.push(Node::provisioning(
            "node-001".into(),
            sc.node,
            0,
            MIN,
            MIN,
            None,
        ));
        assert_eq!(unplaced_chunks(&with_new, 25, &sc.user), 0);
        // a draining node does not
        with_new[1].phase = Phase::Draining;
        assert_eq!(unplaced_chunks(&with_new, 25, &sc.user), 1);
    }

    #[test]
    fn the_rebalancer_fires_once_per_new_ready_node() {
        let sc = Scenario::binder();
        let mut nodes = vec![filled(0, 10)];
        let mut known = Vec::new();
        assert!(
            rebalancer_scan(&nodes, &mut known),
            "the first scan sees node-000"
        );
        assert!(!rebalancer_scan(&nodes, &mut known));
        nodes.push(Node::provisioning(
            "node-001".into(),
            sc.node,
            0,
            MIN,
            MIN,
            None,
        ));
        assert!(!rebalancer_scan(&nodes, &mut known), "not Ready yet");
        nodes[1].phase = Phase::Ready;
        assert!(rebalancer_scan(&nodes, &mut known));
        assert!(!rebalancer_scan(&nodes, &mut known));
    }

    #[test]
    fn podlifetime_evicts_no_younger_pod_and_the_pdb_refuses_the_rest() {
        let now = 10 * 60 * MIN;
        let max = 60 * MIN;
        // ages: 2h, 30m, not running, 3h, exactly 1h
        let pods = [
            Some(now - 120 * MIN),
            Some(now - 30 * MIN),
            None,
            Some(now - 180 * MIN),
            Some(now - 60 * MIN),
        ];
        let run = podlifetime_run(&pods, now, max, 0, 1);
        assert_eq!(run.evicted, vec![3], "the oldest goes first");
        assert_eq!(run.refused, vec![0]);
        // one replica already down: every eviction of the run is refused
        let run = podlifetime_run(&pods, now, max, 1, 1);
        assert!(run.evicted.is_empty());
        assert_eq!(run.refused, vec![3, 0]);
    }

    #[test]
    fn balloons_cover_the_placeholders_in_whole_nodes() {
        assert_eq!(balloons_for(0, 100), 0);
        assert_eq!(balloons_for(25, 100), 1);
        assert_eq!(balloons_for(101, 100), 2);
        assert_eq!(balloons_for(30, 29), 2);
    }
}
