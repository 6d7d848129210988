//! The printed report (header, aligned table, what the numbers say) and the JSON.

use std::fmt::Write;
use std::time::Duration;

use selfdestruct_decision::Policy;
use selfdestruct_decision::duration::format as fmt_duration;
use serde::Serialize;

use crate::metrics::Summary;
use crate::scenario::{Load, MIN, Peer, Row, Scenario, Setup, UserPlacement, dur};

/// A duration in seconds, compactly: `0s`, `7s`, `6m12s`.
pub fn secs(s: f64) -> String {
    if s < 1.0 {
        return "0s".into();
    }
    fmt_duration(Duration::from_secs(s.round() as u64))
}

/// A policy as one line of text.
pub fn describe(setup: &Setup) -> String {
    if setup.replicas == 0 {
        return "no placeholders".into();
    }
    let p = &setup.policy;
    let mut parts = Vec::new();
    match p.lifetime {
        Some((lo, hi)) => parts.push(format!(
            "lifetime {}-{}",
            fmt_duration(lo),
            fmt_duration(hi)
        )),
        None => parts.push("no lifetime".into()),
    }
    if p.move_to_new_nodes {
        let images = if p.required_images.is_empty() {
            ""
        } else {
            " once the image is on it"
        };
        parts.push(format!(
            "move to a new node{images} (settle {})",
            fmt_duration(p.node_settle)
        ));
    } else {
        parts.push("no node trigger".into());
    }
    if p.lifetime.is_some() || p.move_to_new_nodes {
        parts.push(format!(
            "jitter {}, min age {}, max {}/h",
            fmt_duration(p.move_jitter),
            fmt_duration(p.min_age),
            p.max_moves_per_hour
        ));
    }
    if setup.gate {
        parts.push("node readiness gate".into());
    }
    format!("{} replicas, {}", setup.replicas, parts.join(", "))
}

/// What the counts cover: steady state after a dropped warm-up, or everything from an empty
/// cluster (`--warmup 0`).
pub fn counted(sc: &Scenario) -> String {
    if sc.warmup == 0 {
        format!(
            "counted from an empty cluster ({} nodes, no users; --warmup 0)",
            sc.autoscaler.min_nodes.max(1)
        )
    } else {
        format!(
            "counted in steady state (a {} warm-up dropped)",
            dur(sc.warmup)
        )
    }
}

/// The scenario parameters, a few lines.
pub fn header(sc: &Scenario, seeds: &[u64]) -> String {
    let mut out = String::new();
    let (mean, peak) = sc.rates();
    let runs = match seeds {
        [one] => format!("seed {one}"),
        [first, .., last] => format!(
            "{} runs (seeds {first}..={last}; counts summed, node-h per run, peak and burst the worst run)",
            seeds.len()
        ),
        [] => "no runs".into(),
    };
    let _ = writeln!(
        out,
        "scenario {}: {runs}, each {} {}",
        sc.name,
        dur(sc.measured),
        counted(sc)
    );
    let _ = writeln!(
        out,
        "  nodes:        {:.2} CPU / {:.0} GiB allocatable = {} user pods each; {}..{} nodes; Ready {} after the request, image pulled {} after Ready (+-{:.0}%)",
        sc.node.cpu_m as f64 / 1000.0,
        sc.node.mem_mib as f64 / 1024.0,
        sc.pods_per_node(),
        sc.autoscaler.min_nodes,
        sc.autoscaler.max_nodes,
        dur(sc.node_ready),
        dur(sc.image_pull),
        sc.delay_spread * 100.0
    );
    let load = match &sc.load {
        Load::Daily {
            low_per_10min,
            high_per_10min,
            peak_hour,
        } => format!(
            "{low_per_10min:.0}-{high_per_10min:.0} launches per 10 min on a daily curve peaking at {peak_hour:.0}:00"
        ),
        Load::Class {
            background_per_10min,
            size,
            at,
            window,
            session_mean,
        } => format!(
            "{background_per_10min:.0} launches per 10 min, plus a class of {size} within {} at +{} (sessions {})",
            dur(*window),
            dur(*at),
            dur(*session_mean)
        ),
        Load::Replay {
            files,
            launches,
            days,
            mean_per_min,
            peak_per_min,
            origin,
            skipped_bad_lines,
        } => format!(
            "{launches} launches{} replayed from {} ({days} day{}{}; mean {mean_per_min:.1}/min, busiest 10 minutes {peak_per_min:.1}/min; archive times spread within their minute, the warm-up replays the last day's end)",
            origin
                .as_ref()
                .map(|o| format!(" from origin {o}"))
                .unwrap_or_default(),
            files.join(", "),
            if *days == 1 { "" } else { "s" },
            if *skipped_bad_lines > 0 {
                format!(", {skipped_bad_lines} bad lines skipped")
            } else {
                String::new()
            }
        ),
    };
    let _ = writeln!(
        out,
        "  users:        {load}; sessions lognormal mean {} (sigma {}, cap {}); {:.2} CPU / {:.1} GiB each, placed {}",
        dur(sc.session_mean),
        sc.session_sigma,
        dur(sc.session_cap),
        sc.user.cpu_m as f64 / 1000.0,
        sc.user.mem_mib as f64 / 1024.0,
        match sc.user_placement {
            UserPlacement::MostAllocated =>
                "MostAllocated + ImageLocality, weights 121:11 (JupyterHub's user-scheduler)".into(),
            UserPlacement::LeastAllocated => format!(
                "LeastAllocated + ImageLocality (the default scheduler; a {:.1} GiB image)",
                sc.image_size_mib as f64 / 1024.0
            ),
        }
    );
    let _ = writeln!(
        out,
        "  placeholders: {} replicas (rule of thumb: peak {peak:.1}/min x {} node-ready = {:.0}; mean {mean:.1}/min), priority -10, LeastAllocated, default spreading {}, PDB maxUnavailable 1, re-created after {}",
        sc.replicas,
        dur(sc.node_ready),
        sc.rule_of_thumb(),
        if sc.default_spreading {
            format!("ON (weight {})", sc.spread_weight)
        } else {
            "off (opted out)".into()
        },
        dur(sc.recreate_delay)
    );
    let ca = &sc.autoscaler;
    let _ = writeln!(
        out,
        "  autoscaler:   scan {}{}, scale-up for Pending users and placeholders (upcoming and gated nodes count) once one is {} old (from its creation's {} stamp); scale-down as cluster-autoscaler 1.36: nodes at or below {:.0}% (the larger of CPU and memory, the DaemonSet pod's {}m/{}Mi and a buffer's chunks included) whose pods can move (user pods block; placeholders through the PDB, one node of them a loop), soft-tainted while unneeded, deleted after {} unneeded, not within {} of a scale-up, one drain at a time (evictions through the PDB, retried every {}, given up after {}), unremovable nodes looked at again after {}",
        dur(ca.scan),
        if ca.frequent_loops {
            " (frequent loops: a new unschedulable pod or a scale-up starts a loop at once)"
        } else {
            ""
        },
        dur(ca.new_pod_hold),
        dur(ca.created_resolution),
        ca.utilisation * 100.0,
        sc.daemonset.cpu_m,
        sc.daemonset.mem_mib,
        dur(ca.unneeded_time),
        dur(ca.delay_after_add),
        dur(ca.eviction_retry),
        dur(ca.max_pod_eviction_time),
        dur(ca.unremovable_recheck)
    );
    let mut peers: Vec<Peer> = Peer::ROWS.iter().map(|&(_, peer, _)| peer).collect();
    peers.dedup();
    let peers: Vec<String> = peers.iter().filter_map(|p| p.describe(sc)).collect();
    let _ = writeln!(out, "  peers:        {}", peers.join("; "));
    out
}

/// The aligned table.
pub fn table(rows: &[Summary], label: &str) -> String {
    let head = [
        label,
        "delayed",
        "cold",
        "ttr p50",
        "p95",
        "max",
        "mean",
        "node-h",
        "peak",
        "evict/h",
        "preempt/h",
        "burst60",
    ];
    let mut lines: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        lines.push(vec![
            r.policy.clone(),
            format!("{} ({:.1}%)", r.delayed, r.delayed_pct),
            format!("{} ({:.1}%)", r.cold, r.cold_pct),
            secs(r.ttr_p50_s),
            secs(r.ttr_p95_s),
            secs(r.ttr_max_s),
            format!("{:.2}s", r.ttr_mean_s),
            format!("{:.1}", r.node_hours),
            r.peak_nodes.to_string(),
            format!("{:.1}", r.evictions_per_hour),
            format!("{:.1}", r.preemptions_per_hour),
            r.burst_60s.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in l.iter().enumerate() {
            if c == 0 {
                let _ = write!(line, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(line, "  {cell:>w$}", w = widths[c]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    out
}

/// A short paragraph computed from the numbers: `results` are those of `rows`, in order.
pub fn what_this_says(rows: &[Setup], results: &[Summary]) -> String {
    let pairs = || rows.iter().zip(results);
    let of = |row: Row| pairs().filter(move |(s, _)| s.row == row).map(|(_, r)| r);
    let get = |row: Row| of(row).next();
    let not_configured = || {
        pairs()
            .filter(|(s, _)| s.row != Row::Configured)
            .map(|(_, r)| r)
    };
    let mean = |r: &Summary| format!("{:.2}s", r.ttr_mean_s);
    let mut s = Vec::new();
    if let (Some(none), Some(st)) = (get(Row::None), get(Row::Static)) {
        s.push(format!(
            "Placeholders at all: users delayed by a full cluster go from {} ({:.1}%) without placeholders to {} ({:.1}%) with static ones; mean time-to-running {} -> {}.",
            none.delayed,
            none.delayed_pct,
            st.delayed,
            st.delayed_pct,
            mean(none),
            mean(st)
        ));
    }
    if let (Some(st), Some(nn)) = (get(Row::Static), get(Row::NewNode)) {
        let mut text = format!(
            "Moving at Ready (new-node) takes cold starts from {} ({:.1}%) with static placeholders to {} ({:.1}%): {}",
            st.cold,
            st.cold_pct,
            nn.cold,
            nn.cold_pct,
            relative(st.cold as f64, nn.cold as f64)
        );
        if let Some(ni) = get(Row::NewNodeImages) {
            let gain = -pct_change(st.cold as f64, ni.cold as f64);
            let verdict = if gain.abs() < 15.0 {
                "about as many as static, so waiting for the image gains nothing"
            } else if gain > 0.0 {
                "fewer than static"
            } else {
                "more than static"
            };
            text.push_str(&format!(
                "; waiting for the image before moving (new-node+images) gives {} ({:.1}%), {verdict}",
                ni.cold, ni.cold_pct
            ));
        }
        text.push('.');
        s.push(text);
        if nn.moves_to_new_nodes > 0 {
            s.push(format!(
                "Of the placeholders moved towards a new node, {:.0}% landed on it.",
                100.0 * nn.moves_on_target as f64 / nn.moves_to_new_nodes as f64
            ));
        }
    }
    if let (Some(tm), Some(st)) = (get(Row::Timer), get(Row::Static)) {
        s.push(format!(
            "The lifetime timer alone gives {} cold starts (static: {}) for {:.1} evictions/h.",
            tm.cold, st.cold, tm.evictions_per_hour
        ));
    }
    if let (Some(g), Some(st)) = (get(Row::Gate), get(Row::Static)) {
        let mut text = format!(
            "The node readiness gate gives {} cold starts and delays {} users instead ({:.1}%; static: {}), mean time-to-running {} (static {})",
            g.cold,
            g.delayed,
            g.delayed_pct,
            st.delayed,
            mean(g),
            mean(st)
        );
        if let Some(gn) = get(Row::GateNewNode) {
            text.push_str(&format!(
                "; gate+new-node: {} cold, {} delayed, mean {}",
                gn.cold,
                gn.delayed,
                mean(gn)
            ));
        }
        text.push('.');
        s.push(text);
    }
    let mut ranked: Vec<&Summary> = not_configured().collect();
    ranked.sort_by(|a, b| a.ttr_mean_s.total_cmp(&b.ttr_mean_s));
    if ranked.len() > 1 {
        let order: Vec<String> = ranked
            .iter()
            .map(|r| format!("{} {}", r.policy, mean(r)))
            .collect();
        s.push(format!(
            "Mean time-to-running, best first: {}.",
            order.join(", ")
        ));
    }
    if let Some(st) = get(Row::Static) {
        let movers: Vec<String> = not_configured()
            .filter(|r| r.replicas > 0 && r.evictions_per_hour > 0.0)
            .map(|r| {
                format!(
                    "{} {:+.1}% node-hours, {:.1} evictions/h, at most {} in a minute",
                    r.policy,
                    pct_change(st.node_hours, r.node_hours),
                    r.evictions_per_hour,
                    r.burst_60s
                )
            })
            .collect();
        if !movers.is_empty() {
            s.push(format!(
                "Cost and churn against static: {}.",
                movers.join("; ")
            ));
        }
    }
    let peers: Vec<String> = of(Row::Peer)
        .map(|r| {
            format!(
                "{} {} cold, {} delayed, {:.1} node-h, {:.1} evictions/h{}{}",
                r.policy,
                r.cold,
                r.delayed,
                r.node_hours,
                r.evictions_per_hour,
                if r.burst_60s > 1 {
                    format!(" (up to {} in a minute)", r.burst_60s)
                } else {
                    String::new()
                },
                if r.refused_evictions > 0 {
                    format!(
                        ", {} evictions refused by the PDB (429)",
                        r.refused_evictions
                    )
                } else {
                    String::new()
                }
            )
        })
        .collect();
    if !peers.is_empty() {
        s.push(format!("Peers (docs/peers.md): {}.", peers.join("; ")));
    }
    if let Some(bad) = results
        .iter()
        .find(|r| !r.violations.is_empty() || r.unfinished_users > 0)
    {
        s.push(format!(
            "WARNING: invariant violations in {}: {:?}",
            bad.policy, bad.violations
        ));
    }
    wrap(&s.join(" "), 100)
}

fn relative(base: f64, x: f64) -> String {
    if base == 0.0 {
        return if x == 0.0 {
            "the same".into()
        } else {
            "more".into()
        };
    }
    let change = pct_change(base, x);
    if change <= 0.0 {
        format!("{:.0}% fewer", -change)
    } else {
        format!("{change:.0}% more")
    }
}

fn pct_change(base: f64, x: f64) -> f64 {
    if base == 0.0 {
        0.0
    } else {
        100.0 * (x - base) / base
    }
}

fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A policy in the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyJson {
    /// Row name.
    pub name: String,
    /// One line.
    pub description: String,
    /// Replicas.
    pub replicas: u32,
    /// `[min, max]` seconds.
    pub lifetime_s: Option<[f64; 2]>,
    /// Node trigger.
    pub move_to_new_nodes: bool,
    /// Seconds.
    pub node_settle_s: f64,
    /// Required images.
    pub required_images: Vec<String>,
    /// Seconds.
    pub move_jitter_s: f64,
    /// Cap.
    pub max_moves_per_hour: u32,
    /// Seconds.
    pub min_age_s: f64,
    /// Node readiness gate.
    pub gate: bool,
}

impl PolicyJson {
    /// From a row.
    pub fn new(setup: &Setup) -> Self {
        let p: &Policy = &setup.policy;
        PolicyJson {
            name: setup.name.clone(),
            description: describe(setup),
            replicas: setup.replicas,
            lifetime_s: p.lifetime.map(|(a, b)| [a.as_secs_f64(), b.as_secs_f64()]),
            move_to_new_nodes: p.move_to_new_nodes,
            node_settle_s: p.node_settle.as_secs_f64(),
            required_images: p.required_images.iter().map(|i| i.to_string()).collect(),
            move_jitter_s: p.move_jitter.as_secs_f64(),
            max_moves_per_hour: p.max_moves_per_hour,
            min_age_s: p.min_age.as_secs_f64(),
            gate: setup.gate,
        }
    }
}

/// One row in the JSON: the policy and its results.
#[derive(Clone, Debug, Serialize)]
pub struct RowJson {
    /// The policy.
    pub setup: PolicyJson,
    /// The results, combined over the seeds.
    pub results: Summary,
    /// The results of each seed.
    pub per_seed: Vec<Summary>,
}

/// The whole JSON document.
#[derive(Clone, Debug, Serialize)]
pub struct ReportJson {
    /// Scenario parameters (times in milliseconds).
    pub scenario: Scenario,
    /// Seeds (one run each).
    pub seeds: Vec<u64>,
    /// Peak launch rate x node-ready time.
    pub rule_of_thumb_replicas: f64,
    /// What the counts cover: "steady state" (the warm-up dropped) or "from an empty cluster"
    /// (`--warmup 0`).
    pub counted: &'static str,
    /// Rows.
    pub rows: Vec<RowJson>,
}

/// Builds the JSON document.
pub fn json(sc: &Scenario, seeds: &[u64], rows: &[Setup], results: &[crate::RowResult]) -> String {
    let doc = ReportJson {
        scenario: sc.clone(),
        seeds: seeds.to_vec(),
        rule_of_thumb_replicas: (sc.rule_of_thumb() * 100.0).round() / 100.0,
        counted: if sc.warmup == 0 {
            "from an empty cluster"
        } else {
            "steady state"
        },
        rows: rows
            .iter()
            .zip(results)
            .map(|(s, r)| RowJson {
                setup: PolicyJson::new(s),
                results: r.summary.clone(),
                per_seed: r.per_seed.clone(),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The sweep's preamble: the rule of thumb.
pub fn sweep_header(sc: &Scenario) -> String {
    let (mean, peak) = sc.rates();
    format!(
        "rule of thumb: launches during one node-ready time = peak {peak:.1}/min x {} = {:.0} replicas (mean rate {mean:.1}/min x {} = {:.0})\n",
        dur(sc.node_ready),
        sc.rule_of_thumb(),
        dur(sc.node_ready),
        mean * sc.node_ready as f64 / MIN as f64
    )
}

/// Every row's users, nodes and scale-ups on one seed, as JSON (times in seconds from the
/// start of the replayed day): the real-stack bench compares, user by user, why a user started
/// cold (`bench/coldstart`, `simulate --users-out`).
pub fn users_json(
    sc: &Scenario,
    rows: &[Setup],
    seed: u64,
    arrivals: &[crate::scenario::Arrival],
    check: bool,
) -> String {
    let s = |t: u64| t as f64 / 1000.0;
    let out: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let run = crate::engine::simulate(sc, row, arrivals, seed, check);
            let users: Vec<serde_json::Value> = run
                .users
                .iter()
                .map(|u| {
                    serde_json::json!({"arrival": s(u.arrival), "bound": u.bound_at.map(s),
                        "node": u.node.map(|n| run.nodes[n].name.clone()), "cold": u.cold,
                        "delayed": u.delayed, "preempted": u.preempted})
                })
                .collect();
            let nodes: Vec<serde_json::Value> = run
                .nodes
                .iter()
                .map(|n| {
                    serde_json::json!({"name": n.name, "created": s(n.created),
                        "ready": s(n.ready_at), "image": s(n.image_at),
                        "removed": n.removed_at.map(s)})
                })
                .collect();
            let ups: Vec<(f64, u32)> = run.log.scale_ups.iter().map(|&(t, n)| (s(t), n)).collect();
            serde_json::json!({"row": row.name, "users": users, "nodes": nodes,
                "scale_ups": ups, "preemptions": run.log.preemptions.iter().map(|&t| s(t)).collect::<Vec<_>>()})
        })
        .collect();
    serde_json::to_string(&out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(secs(0.2), "0s");
        assert_eq!(secs(372.0), "6m12s");
        assert_eq!(wrap("a b c", 3), "a b\nc\n");
        assert_eq!(relative(10.0, 5.0), "50% fewer");
        assert_eq!(relative(0.0, 0.0), "the same");
    }

    #[test]
    fn the_paragraph_finds_rows_by_their_type_and_the_header_names_every_peer() {
        let sc = Scenario::binder();
        let configured = Setup {
            name: "configured".into(),
            row: Row::Configured,
            replicas: sc.replicas,
            policy: crate::scenario::agent_defaults(),
            gate: false,
            peer: Peer::Selfdestruct,
            pin: false,
        };
        let mut rows = crate::scenario::standard_rows(&sc, configured);
        // A row's name is what the table shows; the paragraph goes by its type.
        for r in &mut rows {
            r.name = format!("my-{}", r.name);
        }
        let results: Vec<Summary> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| Summary {
                policy: r.name.clone(),
                cold: i as u64,
                ..Summary::default()
            })
            .collect();
        let text = what_this_says(&rows, &results).replace('\n', " ");
        assert!(
            text.contains("with static placeholders to 3 (0.0%)"),
            "{text}"
        );
        assert!(
            text.contains("The lifetime timer alone gives 2 cold"),
            "{text}"
        );
        assert!(
            text.contains("Peers (docs/peers.md): my-buffer 10 cold"),
            "{text}"
        );
        assert!(!text.contains("my-configured"), "{text}");
        let header = header(&sc, &[1]);
        let line = header
            .lines()
            .find_map(|l| l.strip_prefix("  peers:        "));
        let named: Vec<&str> = line
            .into_iter()
            .flat_map(|l| l.split("; "))
            .filter_map(|p| p.split(' ').next())
            .collect();
        assert_eq!(
            named,
            ["buffer", "rebalancer", "node-balloon", "podlifetime"]
        );
    }

    #[test]
    fn the_header_says_what_the_counts_cover() {
        let mut sc = Scenario::binder();
        let h = header(&sc, &[1, 2]);
        assert!(
            h.lines()
                .next()
                .is_some_and(|l| l.contains("steady state (a 2h warm-up dropped)")),
            "{h}"
        );
        sc.warmup = 0;
        let h = header(&sc, &[1]);
        assert!(h.contains("counted from an empty cluster (2 nodes"), "{h}");
        let doc = json(&sc, &[1], &[], &[]);
        assert!(
            doc.contains("\"counted\": \"from an empty cluster\""),
            "{doc}"
        );
    }
}
