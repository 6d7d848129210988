//! Scenarios (cluster shape, user load, delays) and the policy rows compared.
//!
//! Simulated time is integer milliseconds from the start of the warm-up; the
//! measured window starts after the warm-up, at midnight of the simulated day.

use std::time::Duration;

use selfdestruct_decision::Policy;
use selfdestruct_decision::images::ImageRef;

use crate::random::{Random, Stream};

/// Simulated milliseconds since the start of the run (the start of the warm-up).
pub type Ms = u64;
/// One second.
pub const SEC: Ms = 1_000;
/// One minute.
pub const MIN: Ms = 60 * SEC;
/// One hour.
pub const HOUR: Ms = 60 * MIN;

/// Converts a duration to simulated milliseconds.
pub fn ms(d: Duration) -> Ms {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Simulated milliseconds as the report shows them: `0`, `90s`, `2h`.
pub fn dur(t: Ms) -> String {
    if t == 0 {
        return "0".into();
    }
    selfdestruct_decision::duration::format(Duration::from_millis(t))
}

/// CPU (millicores) and memory (MiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Resources {
    /// Millicores.
    pub cpu_m: u64,
    /// MiB.
    pub mem_mib: u64,
}

impl Resources {
    /// From CPU cores and GiB.
    pub fn new(cpu: f64, mem_gib: f64) -> Self {
        Resources {
            cpu_m: (cpu * 1000.0).round() as u64,
            mem_mib: (mem_gib * 1024.0).round() as u64,
        }
    }

    /// How many pods of size `pod` fit into `self`.
    pub fn fits_times(&self, pod: &Resources) -> u64 {
        let c = self.cpu_m.checked_div(pod.cpu_m).unwrap_or(u64::MAX);
        let m = self.mem_mib.checked_div(pod.mem_mib).unwrap_or(u64::MAX);
        c.min(m)
    }
}

/// How users arrive.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Load {
    /// Poisson arrivals whose rate follows a daily cosine between `low` and `high`
    /// launches per 10 minutes, highest at `peak_hour`.
    Daily {
        /// Launches per 10 minutes at the quietest hour.
        low_per_10min: f64,
        /// Launches per 10 minutes at the peak.
        high_per_10min: f64,
        /// Hour of the day (0-24) of the peak.
        peak_hour: f64,
    },
    /// A steady trickle plus a class: `size` users starting within `window` after `at`.
    Class {
        /// Background launches per 10 minutes.
        background_per_10min: f64,
        /// Users in the class.
        size: u32,
        /// When the class starts, counted from the start of the measured window.
        at: Ms,
        /// The class's users all arrive within this window.
        window: Ms,
        /// Mean session length of the class.
        session_mean: Ms,
    },
    /// Launches replayed from files (`--arrivals`, [`crate::trace::Trace`]); the measured
    /// window is the trace's days. [`Scenario::arrivals`] gives none: the trace does.
    Replay {
        /// The files, in order (consecutive days).
        files: Vec<String>,
        /// Launches replayed (the measured window's).
        launches: u64,
        /// Whole days replayed.
        days: u64,
        /// Mean launches per minute.
        mean_per_min: f64,
        /// Launches per minute in the busiest 10 minutes.
        peak_per_min: f64,
        /// `--origin`.
        origin: Option<String>,
        /// Bad lines skipped (`--skip-bad-lines`).
        skipped_bad_lines: u64,
    },
}

/// The cluster autoscaler's settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AutoscalerConfig {
    /// `--scan-interval`.
    pub scan: Ms,
    /// `--scale-down-unneeded-time`.
    pub unneeded_time: Ms,
    /// `--scale-down-delay-after-add`.
    pub delay_after_add: Ms,
    /// `--scale-down-utilization-threshold`.
    pub utilisation: f64,
    /// From the end of a node's drain (its pods gone) to the node's disappearance.
    pub drain: Ms,
    /// Node group bounds.
    pub min_nodes: u32,
    /// Node group bounds.
    pub max_nodes: u32,
    /// `--frequent-loops-enabled` (default true): a pod that becomes unschedulable starts a loop
    /// at once, and a loop that scaled up is followed by another at once; otherwise a loop runs
    /// `scan` after the last one (`cluster-autoscaler/loop/trigger.go`).
    pub frequent_loops: bool,
    /// `unschedulablePodTimeBuffer` (2 s, `cluster-autoscaler/core/static_autoscaler.go`): while
    /// every unschedulable pod is younger than this, a loop neither scales up nor down ("Unschedulable
    /// pods are very new, waiting one iteration for more").
    pub new_pod_hold: Ms,
    /// The resolution of a pod's `creationTimestamp` as the autoscaler reads it (1 s: the API
    /// keeps whole seconds, `metav1.Time`'s RFC 3339 JSON and `ProtoTime`'s `Seconds` in
    /// `apimachinery/pkg/apis/meta/v1/time_proto.go`), so the hold ends at the creation's
    /// second plus `new_pod_hold`, 0-1 s sooner than the creation plus it.
    pub created_resolution: Ms,
    /// `--unremovable-node-recheck-timeout` (5 min): a node the scale-down simulation found
    /// unremovable (a pod that cannot move) is not looked at again before this.
    pub unremovable_recheck: Ms,
    /// `--node-delete-delay-after-taint` (5 s): from the taint to the drain.
    pub delete_delay_after_taint: Ms,
    /// `DefaultEvictionRetryTime` (10 s, `core/scaledown/actuation/drain.go`): a refused
    /// eviction is tried again this much later.
    pub eviction_retry: Ms,
    /// `--max-pod-eviction-time` (2 min): a drain whose evictions are still refused this long
    /// after the first try fails.
    pub max_pod_eviction_time: Ms,
}

/// Who manages the headroom in a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    /// Placeholder pods whose container is the selfdestruct agent (or the stock pause
    /// container, with the static policy).
    #[default]
    Selfdestruct,
    /// A CapacityBuffer: no pods, chunks simulated by the autoscaler.
    Buffer,
    /// Placeholders all deleted when a new node appears.
    Rebalancer,
    /// Placeholders that each request a whole node.
    NodeBalloon,
    /// Placeholders evicted by the descheduler's PodLifeTime once older than a fixed age.
    PodLifeTime,
}

impl Peer {
    /// The peers' rows of the comparison, in the table's order: name, peer, and whether new
    /// nodes carry the readiness gate.
    pub const ROWS: [(&'static str, Peer, bool); 5] = [
        ("buffer", Peer::Buffer, false),
        ("buffer+gate", Peer::Buffer, true),
        ("rebalancer", Peer::Rebalancer, false),
        ("node-balloon", Peer::NodeBalloon, false),
        ("podlifetime", Peer::PodLifeTime, false),
    ];

    /// Whether the placeholders run the selfdestruct agent.
    pub fn runs_agent(self) -> bool {
        self == Peer::Selfdestruct
    }
}

/// The peers' settings (scenario-level: the same for every row).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PeerConfig {
    /// The rebalancer's loop period (PR #1050: every 10 s).
    pub rebalancer_interval: Ms,
    /// The descheduler's run period (`--descheduling-interval`).
    pub descheduler_interval: Ms,
    /// `maxPodLifeTimeSeconds`.
    pub max_pod_lifetime: Ms,
}

impl Default for PeerConfig {
    fn default() -> Self {
        PeerConfig {
            rebalancer_interval: 10 * SEC,
            descheduler_interval: 5 * MIN,
            max_pod_lifetime: 60 * MIN,
        }
    }
}

/// How the users' scheduler scores nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UserPlacement {
    /// The fullest node that fits (JupyterHub's user-scheduler).
    #[default]
    MostAllocated,
    /// The emptiest node that fits (the default scheduler's LeastAllocated).
    LeastAllocated,
}

impl UserPlacement {
    /// The flag's values.
    pub const NAMES: [&'static str; 2] = ["most-allocated", "least-allocated"];

    /// From a flag value.
    pub fn by_name(name: &str) -> Option<UserPlacement> {
        match name {
            "most-allocated" | "most" => Some(UserPlacement::MostAllocated),
            "least-allocated" | "least" => Some(UserPlacement::LeastAllocated),
            _ => None,
        }
    }

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            UserPlacement::MostAllocated => "most-allocated",
            UserPlacement::LeastAllocated => "least-allocated",
        }
    }
}

/// A simulated cluster and its users.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Scenario {
    /// binder, small, burst.
    pub name: String,
    /// Allocatable resources of a node for users and placeholders.
    pub node: Resources,
    /// Allocatable beyond `node` that no user pod fits in, kept for the DaemonSet pod (the
    /// real-stack bench's node templates add 100m and 256 MiB): only the autoscaler's
    /// utilisation counts it.
    pub node_reserve: Resources,
    /// Requests of the DaemonSet pod every node runs, in `node_reserve`: only the autoscaler's
    /// utilisation counts them.
    pub daemonset: Resources,
    /// The agents' retry backoffs (`decision/src/backoff.rs`) run this many times longer in
    /// simulated time: 1 on a real cluster; the real-stack bench compresses the agents' settings
    /// by its factor but not these, which are fixed.
    pub agent_backoff_scale: f64,
    /// How late an agent's watch shows a sibling's going (0: at once). An agent whose move
    /// falls due within it has not seen the sibling go: it posts its eviction and the
    /// PodDisruptionBudget, whose one disruption the sibling took, refuses it (a 429; the
    /// agent backs off). The real-stack bench's agents: up to about 1 s (docs/peers.md).
    pub watch_delay: Ms,
    /// How long after a placeholder starts the PodDisruptionBudget still allows no disruption
    /// (0: at once): the disruption controller recounts the healthy pods after their change, and
    /// an eviction before it is refused. The real-stack bench's agents: up to about 1 s
    /// (docs/peers.md).
    pub pdb_recount: Ms,
    /// Requests of a user pod (and of a placeholder).
    pub user: Resources,
    /// Arrivals.
    pub load: Load,
    /// Mean session length (lognormal).
    pub session_mean: Ms,
    /// Lognormal shape of session lengths.
    pub session_sigma: f64,
    /// Longest session.
    pub session_cap: Ms,
    /// From the autoscaler's request to node Ready.
    pub node_ready: Ms,
    /// From Ready to the user image on the node (the pre-puller starts at Ready).
    pub image_pull: Ms,
    /// Relative spread (uniform +-) of both node delays.
    pub delay_spread: f64,
    /// With the readiness gate: the taint goes up to this long after the pull
    /// (the node's image list is refreshed with the kubelet's status updates).
    pub gate_lag: Ms,
    /// Placeholder replicas.
    pub replicas: u32,
    /// From eviction or preemption to the StatefulSet's replacement pod.
    pub recreate_delay: Ms,
    /// From a preempting user's arrival to its start: the victim's termination and the
    /// scheduler's retry.
    pub preemption_delay: Ms,
    /// Count the users placed more than this after arriving ([`crate::metrics::Summary::late`]),
    /// as the real-stack bench counts the users it says waited: bound later than its threshold
    /// after creation (`bench/coldstart`, `--wait-threshold-s`). A preempting user is placed
    /// once its victim is gone, `preemption_delay` after the preemption, as the real scheduler
    /// binds it only then. None: not counted.
    pub late_after: Option<Ms>,
    /// From a user's binding to its start on a node with the image (the kubelet's container
    /// start; on a cold node, after the pull).
    pub start_delay: Ms,
    /// Before the measured window (not counted).
    pub warmup: Ms,
    /// Length of the measured window.
    pub measured: Ms,
    /// The default scheduler's PodTopologySpread defaults apply to placeholders
    /// (the shipped StatefulSet opts out).
    pub default_spreading: bool,
    /// Weight of the spreading score against LeastAllocated (the scheduler's is 2).
    pub spread_weight: f64,
    /// The user image (the only image the gate and required images talk about).
    pub user_image: String,
    /// Its size as the nodes report it (`status.images[].sizeBytes`), in MiB: the default
    /// scheduler's ImageLocality score scales with it.
    pub image_size_mib: u64,
    /// Cluster autoscaler.
    pub autoscaler: AutoscalerConfig,
    /// How users are placed.
    pub user_placement: UserPlacement,
    /// The peers' settings.
    pub peers: PeerConfig,
}

impl Scenario {
    /// The names accepted by [`Scenario::by_name`].
    pub const NAMES: [&'static str; 4] = ["binder", "small", "burst", "general"];

    /// A built-in scenario.
    pub fn by_name(name: &str) -> Option<Scenario> {
        match name {
            "binder" => Some(Scenario::binder()),
            "small" => Some(Scenario::small()),
            "burst" => Some(Scenario::burst()),
            "general" => Some(Scenario::general()),
            _ => None,
        }
    }

    /// A Binder-like day: 75-150 launches per 10 minutes, 200-400 concurrent users,
    /// about 100 users per n1-highmem-16 node, an 8 GB image.
    pub fn binder() -> Scenario {
        Scenario {
            name: "binder".into(),
            node: Resources::new(15.89, 100.0),
            agent_backoff_scale: 1.0,
            watch_delay: 0,
            pdb_recount: 0,
            node_reserve: Resources::new(0.1, 0.25),
            daemonset: Resources::new(0.1, 0.25),
            user: Resources::new(0.15, 1.0),
            load: Load::Daily {
                low_per_10min: 75.0,
                high_per_10min: 150.0,
                peak_hour: 16.0,
            },
            session_mean: 27 * MIN,
            session_sigma: 0.9,
            session_cap: 6 * HOUR,
            node_ready: 2 * MIN,
            image_pull: 6 * MIN,
            delay_spread: 0.15,
            gate_lag: 10 * SEC,
            replicas: 25,
            recreate_delay: 2 * SEC,
            preemption_delay: SEC,
            late_after: None,
            start_delay: 0,
            warmup: 2 * HOUR,
            measured: 24 * HOUR,
            default_spreading: false,
            spread_weight: 2.0,
            user_image: "quay.io/jupyter/scipy-notebook:2024-05-01".into(),
            image_size_mib: 8 * 1024,
            autoscaler: AutoscalerConfig {
                scan: 10 * SEC,
                unneeded_time: 10 * MIN,
                delay_after_add: 10 * MIN,
                utilisation: 0.5,
                drain: 30 * SEC,
                min_nodes: 2,
                max_nodes: 50,
                frequent_loops: true,
                new_pod_hold: 2 * SEC,
                created_resolution: SEC,
                unremovable_recheck: 5 * MIN,
                delete_delay_after_taint: 5 * SEC,
                eviction_retry: 10 * SEC,
                max_pod_eviction_time: 2 * MIN,
            },
            user_placement: UserPlacement::MostAllocated,
            peers: PeerConfig::default(),
        }
    }

    /// A small hub: 20-50 users, about 15 users per node, 3 nodes at the peak, 4 placeholders.
    pub fn small() -> Scenario {
        Scenario {
            node: Resources::new(7.91, 26.0),
            user: Resources::new(0.5, 1.5),
            load: Load::Daily {
                low_per_10min: 5.0,
                high_per_10min: 12.5,
                peak_hour: 14.0,
            },
            session_mean: 40 * MIN,
            session_sigma: 0.8,
            replicas: 4,
            autoscaler: AutoscalerConfig {
                min_nodes: 1,
                max_nodes: 10,
                ..Scenario::binder().autoscaler
            },
            ..Scenario::binder()
        }
        .named("small")
    }

    /// A class: 100 users start within 2 minutes on a quiet hub (29 users per node,
    /// 30 placeholders: about one node of headroom).
    pub fn burst() -> Scenario {
        Scenario {
            node: Resources::new(15.89, 58.0),
            user: Resources::new(0.5, 2.0),
            load: Load::Class {
                background_per_10min: 2.0,
                size: 100,
                at: HOUR,
                window: 2 * MIN,
                session_mean: 75 * MIN,
            },
            session_mean: 30 * MIN,
            session_sigma: 0.8,
            session_cap: 3 * HOUR,
            replicas: 30,
            warmup: 30 * MIN,
            measured: 4 * HOUR,
            autoscaler: AutoscalerConfig {
                min_nodes: 1,
                max_nodes: 20,
                ..Scenario::binder().autoscaler
            },
            ..Scenario::binder()
        }
        .named("burst")
    }

    /// A general autoscaled cluster, not JupyterHub: workload pods (1 CPU, 3.5 GiB; 15 a node)
    /// placed by the default scheduler (LeastAllocated), a 90 s image pull, 20-60 launches per
    /// 10 minutes of 45-minute jobs, 8 placeholders.
    pub fn general() -> Scenario {
        Scenario {
            node: Resources::new(15.89, 58.0),
            user: Resources::new(1.0, 3.5),
            load: Load::Daily {
                low_per_10min: 20.0,
                high_per_10min: 60.0,
                peak_hour: 14.0,
            },
            session_mean: 45 * MIN,
            session_sigma: 0.8,
            session_cap: 4 * HOUR,
            image_pull: 90 * SEC,
            replicas: 8,
            user_image: "registry.example/app:1.0".into(),
            image_size_mib: 1024,
            user_placement: UserPlacement::LeastAllocated,
            ..Scenario::binder()
        }
        .named("general")
    }

    fn named(mut self, name: &str) -> Scenario {
        self.name = name.into();
        self
    }

    /// End of the measured window.
    pub fn end(&self) -> Ms {
        self.warmup + self.measured
    }

    /// Users (or placeholders) per empty node.
    pub fn pods_per_node(&self) -> u64 {
        self.node.fits_times(&self.user)
    }

    /// Launches per minute at time `t`.
    pub fn rate_per_min(&self, t: Ms) -> f64 {
        match &self.load {
            Load::Daily {
                low_per_10min,
                high_per_10min,
                peak_hour,
            } => {
                let hour = (t as f64 - self.warmup as f64) / HOUR as f64;
                let phase = std::f64::consts::TAU * (hour - peak_hour + 12.0) / 24.0;
                let per10 =
                    low_per_10min + (high_per_10min - low_per_10min) * (1.0 - phase.cos()) / 2.0;
                per10 / 10.0
            }
            Load::Class {
                background_per_10min,
                ..
            } => background_per_10min / 10.0,
            Load::Replay { .. } => 0.0,
        }
    }

    /// Mean and peak launch rate (per minute) over the measured window.
    pub fn rates(&self) -> (f64, f64) {
        if let Load::Replay {
            mean_per_min,
            peak_per_min,
            ..
        } = &self.load
        {
            return (*mean_per_min, *peak_per_min);
        }
        let (mut sum, mut peak, mut n) = (0.0, 0.0f64, 0u32);
        let mut t = self.warmup;
        while t < self.end() {
            let r = self.rate_per_min(t);
            sum += r;
            peak = peak.max(r);
            n += 1;
            t += MIN;
        }
        let mean = if n == 0 { 0.0 } else { sum / f64::from(n) };
        if let Load::Class {
            size, window, at, ..
        } = &self.load
        {
            let class_rate = f64::from(*size) / (*window).max(MIN) as f64 * MIN as f64;
            let class_mean = if self.measured > *at {
                f64::from(*size) / (self.measured as f64 / MIN as f64)
            } else {
                0.0
            };
            return (mean + class_mean, peak + class_rate);
        }
        (mean, peak)
    }

    /// The rule of thumb for the placeholder count: launches arriving while a node
    /// is being added (peak launch rate x node-ready time).
    pub fn rule_of_thumb(&self) -> f64 {
        self.rates().1 * self.node_ready as f64 / MIN as f64
    }

    pub(crate) fn session(&self, rng: &mut Random, mean: Ms) -> Ms {
        let s = rng.lognormal(mean as f64, self.session_sigma);
        (s as Ms).clamp(MIN, self.session_cap)
    }

    /// Every user arrival of the run (warm-up included), sorted by time.
    pub fn arrivals(&self, seed: u64) -> Vec<Arrival> {
        let mut rng = Random::new(seed, Stream::Arrivals);
        let end = self.end() as f64;
        let peak = (0..=(self.end() / MIN))
            .map(|m| self.rate_per_min(m * MIN))
            .fold(0.0f64, f64::max);
        let mut out = Vec::new();
        if peak > 0.0 {
            let mean_gap = MIN as f64 / peak;
            let mut t = 0.0;
            loop {
                t += rng.exponential(mean_gap);
                if t >= end {
                    break;
                }
                if rng.uniform() * peak < self.rate_per_min(t as Ms) {
                    let session = self.session(&mut rng, self.session_mean);
                    out.push(Arrival {
                        at: t as Ms,
                        session,
                    });
                }
            }
        }
        if let Load::Class {
            size,
            at,
            window,
            session_mean,
            ..
        } = &self.load
        {
            let start = self.warmup + at;
            for _ in 0..*size {
                let t = start + (rng.uniform() * *window as f64) as Ms;
                if t < self.end() {
                    let session = self.session(&mut rng, *session_mean);
                    out.push(Arrival { at: t, session });
                }
            }
        }
        out.sort_by_key(|a| a.at);
        out
    }
}

/// One user launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When the user asks for a server.
    pub at: Ms,
    /// How long the server runs once started.
    pub session: Ms,
}

/// Which row of the comparison a setup is: what the code asks for by row (its name is what
/// the table shows, and a sweep's or a schedule's rows carry other names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Row {
    /// No placeholders.
    None,
    Static,
    Timer,
    NewNode,
    NewNodeImages,
    Gate,
    GateNewNode,
    /// `new-node` that never moves to a node the autoscaler marks as a deletion candidate.
    NewNodeAvoidCandidates,
    /// `static` and `new-node` with placeholders the autoscaler may not evict.
    StaticPin,
    NewNodePin,
    /// A peer's row (`peer` says which).
    Peer,
    /// The policy flags (by default the agent's defaults).
    #[default]
    Configured,
    /// `new-node` on a schedule (`--schedule-baseline`, `--schedule-calendar`).
    Schedule,
}

/// What differs between the rows of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// Row name.
    pub name: String,
    /// Which row.
    pub row: Row,
    /// Placeholder replicas (0: no placeholders).
    pub replicas: u32,
    /// The agent's policy in every placeholder.
    pub policy: Policy,
    /// New nodes carry a startup taint until the user image is pulled.
    pub gate: bool,
    /// Who manages the headroom (selfdestruct's placeholders or a peer).
    pub peer: Peer,
    /// The placeholders carry `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`: the
    /// autoscaler never removes a node holding one (the `+pin` rows).
    pub pin: bool,
}

impl Setup {
    /// Whether the placeholders run the selfdestruct agent: a peer's do not, and neither do
    /// those of a policy that can never move (the stock pause container: `static`, `gate`).
    pub fn runs_agent(&self) -> bool {
        self.peer.runs_agent() && (self.policy.move_to_new_nodes || self.policy.lifetime.is_some())
    }
}

/// The agent's own defaults (`selfdestruct --help`), as the core defines them.
pub fn agent_defaults() -> Policy {
    Policy::default()
}

/// The policy of the stock pause container: never moves.
pub fn static_policy() -> Policy {
    Policy {
        move_to_new_nodes: false,
        lifetime: None,
        ..agent_defaults()
    }
}

/// The user image as the agent would be configured with it.
pub fn user_image(sc: &Scenario) -> Vec<ImageRef> {
    ImageRef::parse(&sc.user_image).map_or_else(|_| Vec::new(), |r| vec![r])
}

/// The rows of the comparison: the seven fixed policies, the peers' rows ([`Peer::ROWS`]) and
/// `configured`.
pub fn standard_rows(sc: &Scenario, configured: Setup) -> Vec<Setup> {
    let row = |kind: Row, name: &str, replicas: u32, policy: Policy, gate: bool| Setup {
        name: name.into(),
        row: kind,
        replicas,
        policy,
        gate,
        peer: Peer::Selfdestruct,
        pin: false,
    };
    let r = sc.replicas;
    let mut rows = vec![
        row(Row::None, "none", 0, static_policy(), false),
        row(Row::Static, "static", r, static_policy(), false),
        row(
            Row::Timer,
            "timer",
            r,
            Policy {
                lifetime: Some((Duration::from_secs(30 * 60), Duration::from_secs(60 * 60))),
                move_to_new_nodes: false,
                ..agent_defaults()
            },
            false,
        ),
        row(Row::NewNode, "new-node", r, agent_defaults(), false),
        row(
            Row::NewNodeImages,
            "new-node+images",
            r,
            Policy {
                required_images: user_image(sc),
                ..agent_defaults()
            },
            false,
        ),
        row(Row::Gate, "gate", r, static_policy(), true),
        row(Row::GateNewNode, "gate+new-node", r, agent_defaults(), true),
    ];
    // Issue 45's policies against the autoscaler removing a warm node of placeholders.
    rows.push(row(
        Row::NewNodeAvoidCandidates,
        "new-node+avoid-candidates",
        r,
        Policy {
            avoid_deletion_candidates: true,
            ..agent_defaults()
        },
        false,
    ));
    for (kind, name, policy) in [
        (Row::StaticPin, "static+pin", static_policy()),
        (Row::NewNodePin, "new-node+pin", agent_defaults()),
    ] {
        rows.push(Setup {
            pin: true,
            ..row(kind, name, r, policy, false)
        });
    }
    rows.extend(Peer::ROWS.iter().map(|&(name, peer, gate)| Setup {
        peer,
        ..row(Row::Peer, name, r, static_policy(), gate)
    }));
    rows.push(configured);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binder_day_has_the_advertised_load() {
        let sc = Scenario::binder();
        let a = sc.arrivals(1);
        let measured: Vec<_> = a.iter().filter(|x| x.at >= sc.warmup).collect();
        let per_10 = measured.len() as f64 / (24.0 * 6.0);
        assert!((100.0..125.0).contains(&per_10), "{per_10}");
        let rates: Vec<f64> = (0..24)
            .map(|h| sc.rate_per_min(sc.warmup + h * HOUR))
            .collect();
        let lo = rates.iter().copied().fold(f64::MAX, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        assert!(
            (7.4..7.6).contains(&lo) && (14.9..15.1).contains(&hi),
            "{lo} {hi}"
        );
        assert_eq!(sc.pods_per_node(), 100);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
    }

    #[test]
    fn burst_has_a_class() {
        let sc = Scenario::burst();
        let a = sc.arrivals(3);
        let start = sc.warmup + HOUR;
        let class = a
            .iter()
            .filter(|x| x.at >= start && x.at < start + 2 * MIN)
            .count();
        assert!(class >= 100, "{class}");
        assert_eq!(sc.pods_per_node(), 29);
    }
}
