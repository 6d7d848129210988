//! What a run records, and the per-row summary computed from it.

use serde::Serialize;

use crate::cluster::{Node, User};
use crate::scenario::{HOUR, MIN, Ms, SEC};

/// Why the agent moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MoveReason {
    /// The drawn lifetime passed.
    Lifetime,
    /// A newer node was ready.
    NewNode {
        /// The node.
        node: String,
        /// The node held the user image at the move.
        image_on_node: bool,
    },
    /// datahub's rebalancer deleted it (a node appeared).
    Rebalancer,
    /// The descheduler's PodLifeTime evicted it.
    PodLifeTime,
}

/// One eviction initiated by an agent (or by a peer's controller).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MoveRecord {
    /// When.
    pub at: Ms,
    /// Which replica.
    pub placeholder: String,
    /// Node it left.
    pub from: String,
    /// Why.
    pub reason: MoveReason,
    /// Node the replacement pod was bound to.
    pub landed: Option<String>,
    /// That node held the user image when the replacement was bound.
    pub landed_warm: Option<bool>,
}

/// The cluster at one instant (for the plot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Time.
    pub t: Ms,
    /// Nodes that exist (billed), including those being provisioned or drained.
    pub nodes: u32,
    /// Nodes holding the user image.
    pub warm_nodes: u32,
    /// User pods bound (running or pulling).
    pub users: u32,
    /// User pods Pending.
    pub users_pending: u32,
    /// Placeholders running.
    pub placeholders: u32,
    /// Placeholders Pending or terminating.
    pub placeholders_pending: u32,
}

/// Everything a run logs besides the final pod and node states.
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// Agent-initiated evictions that were accepted.
    pub moves: Vec<MoveRecord>,
    /// Agent-initiated evictions refused by the PodDisruptionBudget (429).
    pub refused: u64,
    /// Times a user preempted a placeholder.
    pub preemptions: Vec<Ms>,
    /// Placeholders evicted by the autoscaler draining a node.
    pub drain_evictions: u64,
    /// Times of scale-ups and nodes added.
    pub scale_ups: Vec<(Ms, u32)>,
    /// Times nodes were deleted (drained, or empty).
    pub scale_downs: Vec<Ms>,
    /// Deletions the autoscaler started and gave up (a drain refused too long, or aborted).
    pub failed_deletions: u64,
    /// Calls of `selfdestruct_decision::decide`.
    pub decide_calls: u64,
    /// Of those, the decisions known to be the agent's last one, left out
    /// (`Engine::same_decision`).
    pub same_decisions: u64,
    /// Decisions made on the verdicts on the nodes found for an earlier one
    /// (`selfdestruct_sim::placeholders::Known`).
    pub verdicts_reused: u64,
    /// Most nodes existing at once during the measured window.
    pub peak_nodes: u32,
    /// Invariant violations (empty in a correct run).
    pub violations: Vec<String>,
    /// Samples once a minute over the measured window.
    pub samples: Vec<Sample>,
}

/// One row of the results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Row name.
    pub policy: String,
    /// Placeholder replicas.
    pub replicas: u32,
    /// Users that arrived in the measured window.
    pub users: u64,
    /// Users that waited for a node (nothing fit, nothing to preempt).
    pub delayed: u64,
    /// `delayed` in percent of `users`.
    pub delayed_pct: f64,
    /// Users placed more than [`crate::scenario::Scenario::late_after`] after arriving (never
    /// placed included); 0 when it is not set.
    pub late: u64,
    /// Users bound to a node without the image.
    pub cold: u64,
    /// `cold` in percent of `users`.
    pub cold_pct: f64,
    /// Users that preempted a placeholder.
    pub preempting: u64,
    /// Time to running (seconds), median.
    pub ttr_p50_s: f64,
    /// Time to running, 90th percentile.
    pub ttr_p90_s: f64,
    /// Time to running, 95th percentile.
    pub ttr_p95_s: f64,
    /// Time to running, 99th percentile.
    pub ttr_p99_s: f64,
    /// Time to running, worst.
    pub ttr_max_s: f64,
    /// Time to running, mean.
    pub ttr_mean_s: f64,
    /// The users' time to running added up, minutes (a user that never ran: to the window's
    /// end); in `combine`, the mean per run.
    pub user_minutes: f64,
    /// Node-hours billed in the measured window.
    pub node_hours: f64,
    /// Most nodes at once.
    pub peak_nodes: u32,
    /// Nodes added.
    pub nodes_added: u32,
    /// Nodes removed.
    pub nodes_removed: u32,
    /// Agent-initiated evictions per hour.
    pub evictions_per_hour: f64,
    /// Preemptions of placeholders by users per hour.
    pub preemptions_per_hour: f64,
    /// Most agent-initiated evictions within any 60 s.
    pub burst_60s: u32,
    /// Moves towards a new node whose replacement pod landed on that node.
    pub moves_on_target: u64,
    /// Moves towards a new node whose replacement pod was bound somewhere.
    pub moves_to_new_nodes: u64,
    /// Agent evictions refused by the PDB.
    pub refused_evictions: u64,
    /// Placeholders evicted by scale-down drains.
    pub drain_evictions: u64,
    /// Node deletions the autoscaler started and gave up.
    pub failed_deletions: u64,
    /// Calls of the real decision function.
    pub decide_calls: u64,
    /// Users that never ran.
    pub unfinished_users: u64,
    /// Invariant violations.
    pub violations: Vec<String>,
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[Ms], p: f64) -> Ms {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Most events of `times` (sorted) within any window of length `window`.
pub fn longest_burst(times: &[Ms], window: Ms) -> u32 {
    let (mut best, mut lo) = (0usize, 0usize);
    for hi in 0..times.len() {
        while times[hi] - times[lo] >= window {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    u32::try_from(best).unwrap_or(u32::MAX)
}

/// Times to running (sorted) of the users that arrived in `[from, to)` and ran.
pub fn times_to_running(users: &[User], from: Ms, to: Ms) -> Vec<Ms> {
    let mut ttr: Vec<Ms> = users
        .iter()
        .filter(|u| u.arrival >= from && u.arrival < to)
        .filter_map(|u| u.running_at.map(|r| r - u.arrival))
        .collect();
    ttr.sort_unstable();
    ttr
}

/// Summarises a run over the window `[from, to)`.
pub fn summarise(
    name: &str,
    replicas: u32,
    users: &[User],
    nodes: &[Node],
    log: &Log,
    (from, to): (Ms, Ms),
    late_after: Option<(Ms, Ms)>,
) -> Summary {
    let window: Vec<&User> = users
        .iter()
        .filter(|u| u.arrival >= from && u.arrival < to)
        .collect();
    let n = window.len() as u64;
    let pct = |k: u64| {
        if n == 0 {
            0.0
        } else {
            round2(100.0 * k as f64 / n as f64)
        }
    };
    let delayed = window.iter().filter(|u| u.delayed).count() as u64;
    let late = late_after.map_or(0, |(after, preemption_delay)| {
        (window.iter())
            .filter(|u| {
                let placed = u
                    .bound_at
                    .map(|b| b + if u.preempted { preemption_delay } else { 0 });
                placed.is_none_or(|p| p > u.arrival + after)
            })
            .count() as u64
    });
    let cold = window.iter().filter(|u| u.cold).count() as u64;
    let preempting = window.iter().filter(|u| u.preempted).count() as u64;
    let ttr = times_to_running(users, from, to);
    let unfinished = n - ttr.len() as u64;
    let secs = |m: Ms| round2(m as f64 / SEC as f64);
    let mean = if ttr.is_empty() {
        0.0
    } else {
        ttr.iter().sum::<Ms>() as f64 / ttr.len() as f64 / SEC as f64
    };
    let node_ms: Ms = nodes
        .iter()
        .map(|nd| {
            let start = nd.created.max(from);
            let end = nd.removed_at.unwrap_or(to).min(to);
            end.saturating_sub(start)
        })
        .sum();
    let hours = (to - from) as f64 / HOUR as f64;
    let per_hour = |k: usize| {
        if hours > 0.0 {
            round2(k as f64 / hours)
        } else {
            0.0
        }
    };
    let move_times: Vec<Ms> = log
        .moves
        .iter()
        .map(|m| m.at)
        .filter(|t| (from..to).contains(t))
        .collect();
    let preemptions = log
        .preemptions
        .iter()
        .filter(|t| (from..to).contains(*t))
        .count();
    let (mut on_target, mut to_new) = (0, 0);
    for m in log.moves.iter().filter(|m| (from..to).contains(&m.at)) {
        if let (MoveReason::NewNode { node, .. }, Some(landed)) = (&m.reason, &m.landed) {
            to_new += 1;
            on_target += u64::from(node == landed);
        }
    }
    Summary {
        policy: name.into(),
        replicas,
        users: n,
        delayed,
        delayed_pct: pct(delayed),
        late,
        cold,
        cold_pct: pct(cold),
        preempting,
        ttr_p50_s: secs(percentile(&ttr, 50.0)),
        ttr_p90_s: secs(percentile(&ttr, 90.0)),
        ttr_p95_s: secs(percentile(&ttr, 95.0)),
        ttr_p99_s: secs(percentile(&ttr, 99.0)),
        ttr_max_s: secs(ttr.last().copied().unwrap_or(0)),
        ttr_mean_s: round2(mean),
        user_minutes: round2(
            window
                .iter()
                .map(|u| u.running_at.unwrap_or(to).max(u.arrival) - u.arrival)
                .sum::<Ms>() as f64
                / MIN as f64,
        ),
        node_hours: round2(node_ms as f64 / HOUR as f64),
        peak_nodes: log.peak_nodes,
        nodes_added: log
            .scale_ups
            .iter()
            .filter(|(t, _)| (from..to).contains(t))
            .map(|(_, k)| *k)
            .sum(),
        nodes_removed: log
            .scale_downs
            .iter()
            .filter(|t| (from..to).contains(*t))
            .count() as u32,
        evictions_per_hour: per_hour(move_times.len()),
        preemptions_per_hour: per_hour(preemptions),
        burst_60s: longest_burst(&move_times, MIN),
        moves_on_target: on_target,
        moves_to_new_nodes: to_new,
        refused_evictions: log.refused,
        drain_evictions: log.drain_evictions,
        failed_deletions: log.failed_deletions,
        decide_calls: log.decide_calls,
        unfinished_users: unfinished,
        violations: log.violations.clone(),
    }
}

/// Combines the runs of one row over several seeds: counts are summed,
/// node-hours averaged per run, percentages and percentiles recomputed over all users, per-hour rates
/// taken over all hours, peaks and bursts the worst of any run.
pub fn combine(runs: &[(Summary, Vec<Ms>)], hours_per_run: f64) -> Summary {
    let Some((first, _)) = runs.first() else {
        return Summary::default();
    };
    let mut ttr: Vec<Ms> = runs.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    ttr.sort_unstable();
    let sum = |f: fn(&Summary) -> u64| runs.iter().map(|(s, _)| f(s)).sum::<u64>();
    let users = sum(|s| s.users);
    let pct = |k: u64| {
        if users == 0 {
            0.0
        } else {
            round2(100.0 * k as f64 / users as f64)
        }
    };
    let hours = hours_per_run * runs.len() as f64;
    let rate = |f: fn(&Summary) -> f64| {
        if hours > 0.0 {
            round2(runs.iter().map(|(s, _)| f(s) * hours_per_run).sum::<f64>() / hours)
        } else {
            0.0
        }
    };
    let secs = |m: Ms| round2(m as f64 / SEC as f64);
    let (delayed, cold) = (sum(|s| s.delayed), sum(|s| s.cold));
    Summary {
        policy: first.policy.clone(),
        replicas: first.replicas,
        users,
        delayed,
        delayed_pct: pct(delayed),
        late: sum(|s| s.late),
        cold,
        cold_pct: pct(cold),
        preempting: sum(|s| s.preempting),
        ttr_p50_s: secs(percentile(&ttr, 50.0)),
        ttr_p90_s: secs(percentile(&ttr, 90.0)),
        ttr_p95_s: secs(percentile(&ttr, 95.0)),
        ttr_p99_s: secs(percentile(&ttr, 99.0)),
        ttr_max_s: secs(ttr.last().copied().unwrap_or(0)),
        user_minutes: round2(
            runs.iter().map(|(s, _)| s.user_minutes).sum::<f64>() / runs.len() as f64,
        ),
        ttr_mean_s: if ttr.is_empty() {
            0.0
        } else {
            round2(ttr.iter().sum::<Ms>() as f64 / ttr.len() as f64 / SEC as f64)
        },
        node_hours: round2(runs.iter().map(|(s, _)| s.node_hours).sum::<f64>() / runs.len() as f64),
        peak_nodes: runs.iter().map(|(s, _)| s.peak_nodes).max().unwrap_or(0),
        nodes_added: runs.iter().map(|(s, _)| s.nodes_added).sum(),
        nodes_removed: runs.iter().map(|(s, _)| s.nodes_removed).sum(),
        evictions_per_hour: rate(|s| s.evictions_per_hour),
        preemptions_per_hour: rate(|s| s.preemptions_per_hour),
        burst_60s: runs.iter().map(|(s, _)| s.burst_60s).max().unwrap_or(0),
        moves_on_target: sum(|s| s.moves_on_target),
        moves_to_new_nodes: sum(|s| s.moves_to_new_nodes),
        refused_evictions: sum(|s| s.refused_evictions),
        drain_evictions: sum(|s| s.drain_evictions),
        failed_deletions: sum(|s| s.failed_deletions),
        decide_calls: sum(|s| s.decide_calls),
        unfinished_users: sum(|s| s.unfinished_users),
        violations: runs
            .iter()
            .flat_map(|(s, _)| s.violations.iter().cloned())
            .collect(),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_bursts() {
        let v: Vec<Ms> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 95.0), 95);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[], 50.0), 0);
        assert_eq!(
            longest_burst(&[0, 10, 59_999, 60_000, 61_000, 200_000], MIN),
            3
        );
        assert_eq!(longest_burst(&[], MIN), 0);
    }

    #[test]
    fn late_users_are_placed_past_the_threshold_as_the_bench_counts_them() {
        let user = |arrival: Ms, bound: Option<Ms>, preempted: bool| User {
            arrival,
            bound_at: bound,
            preempted,
            ..User::default()
        };
        let users = [
            // placed at once, and 45 s late to the millisecond: not late
            user(100 * SEC, Some(100 * SEC), false),
            user(100 * SEC, Some(145 * SEC), false),
            // 46 s: late
            user(100 * SEC, Some(146 * SEC), false),
            // preempting at 40 s, placed 10 s later, once the victim is gone: late
            user(100 * SEC, Some(140 * SEC), true),
            // preempting at 30 s: placed at 40 s, not late
            user(100 * SEC, Some(130 * SEC), true),
            // never placed: late
            user(100 * SEC, None, false),
            // before the window: not counted
            user(10 * SEC, None, false),
        ];
        let late = |after| {
            summarise(
                "r",
                1,
                &users,
                &[],
                &Log::default(),
                (60 * SEC, HOUR),
                after,
            )
            .late
        };
        assert_eq!(late(Some((45 * SEC, 10 * SEC))), 3);
        // Without the preemption's delay the preempting users are placed at once.
        assert_eq!(late(Some((45 * SEC, 0))), 2);
        assert_eq!(late(None), 0, "not counted unless asked");
    }
}
