//! A discrete-event simulator of JupyterHub/Binder placeholder pods whose
//! container is the `selfdestruct` agent. Every placeholder decides with the
//! agent's own [`selfdestruct_decision::decide`]; the simulator models only the
//! cluster around it: users, nodes, the two schedulers, preemption, the
//! PodDisruptionBudget, the StatefulSet and the cluster autoscaler.

pub mod autoscaler;
pub mod cluster;
pub mod engine;
pub mod metrics;
pub mod peers;
pub mod placeholders;
pub mod plot;
pub mod random;
pub mod recommend;
pub mod report;
pub mod scenario;
pub mod schedule;
pub mod trace;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use metrics::{Sample, Summary};
use scenario::{Arrival, HOUR, Scenario, Setup};

/// The results of one row over all seeds.
#[derive(Clone, Debug, Default)]
pub struct RowResult {
    /// Combined over the seeds (see [`metrics::combine`]).
    pub summary: Summary,
    /// One summary per seed.
    pub per_seed: Vec<Summary>,
    /// The first seed's samples (for the plot).
    pub samples: Vec<Sample>,
}

/// Runs every row with each of `seeds` (the same arrivals for every row of a
/// seed), in parallel over the available cores; results come back in the order
/// of `rows`. Byte-identical for the same inputs, whatever the thread timing.
pub fn run_rows(sc: &Scenario, rows: &[Setup], seeds: &[u64], check: bool) -> Vec<RowResult> {
    let arrivals: Vec<Vec<Arrival>> = seeds.iter().map(|&s| sc.arrivals(s)).collect();
    run_rows_on(sc, rows, seeds, &arrivals, check)
}

/// [`run_rows`] on given arrivals, one list per seed (`arrivals[i]` for `seeds[i]`).
pub fn run_rows_on(
    sc: &Scenario,
    rows: &[Setup],
    seeds: &[u64],
    arrivals: &[Vec<Arrival>],
    check: bool,
) -> Vec<RowResult> {
    assert_eq!(arrivals.len(), seeds.len(), "one arrival list per seed");
    let jobs: Vec<(usize, usize)> = (0..rows.len())
        .flat_map(|r| (0..seeds.len()).map(move |s| (r, s)))
        .collect();
    let next = AtomicUsize::new(0);
    type Slot = Option<(Summary, Vec<u64>, Vec<Sample>)>;
    let done: Mutex<Vec<Slot>> = Mutex::new(vec![None; jobs.len()]);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len())
        .max(1);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(r, s)) = jobs.get(j) else { break };
                    let run = engine::simulate(sc, &rows[r], &arrivals[s], seeds[s], check);
                    let samples = if s == 0 { run.log.samples } else { Vec::new() };
                    if let Ok(mut d) = done.lock() {
                        d[j] = Some((run.summary, run.ttr, samples));
                    }
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_default().into_iter();
    let hours = sc.measured as f64 / HOUR as f64;
    rows.iter()
        .map(|_| {
            let parts: Vec<(Summary, Vec<u64>, Vec<Sample>)> =
                done.by_ref().take(seeds.len()).flatten().collect();
            let samples = parts.first().map(|p| p.2.clone()).unwrap_or_default();
            let runs: Vec<(Summary, Vec<u64>)> =
                parts.into_iter().map(|(s, t, _)| (s, t)).collect();
            RowResult {
                summary: metrics::combine(&runs, hours),
                per_seed: runs.into_iter().map(|(s, _)| s).collect(),
                samples,
            }
        })
        .collect()
}
