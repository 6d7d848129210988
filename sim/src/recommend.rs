//! `--recommend`: the smallest placeholder replica count that meets a target, per policy.
//!
//! A search per policy over `lo..=hi`. It starts at an estimate from the launches (the most
//! users that start within one node-ready time, net of those that leave: what the placeholders
//! must cover while a node is added) and gallops from there by a step of an eighth of it,
//! doubling, up while the target is not met or down while it is, then halves the bracket between
//! a failing and a meeting count. It assumes that more placeholders never make the target worse,
//! which holds for the count of users waiting for room (each placeholder is one more user's room
//! while a node is added) up to the noise of a single seed's draws; the table shows the result
//! one replica below the answer, so the knee is visible.
//!
//! The runs go to a pool of one worker per core: each policy's next count is run as soon as its
//! previous one is done, not when the slowest policy's is, so no core waits for a round to end.
//! A free worker takes the searches others wait for first, then those of rows with the agent
//! (the longest runs; the most placeholders first), then the rest, which fill in around them. Every search is sequential in
//! itself, so the answers do not depend on the thread timing.

use std::fmt::Write;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::RowResult;
use crate::engine::{self, Stop};
use crate::metrics::{self, Summary};
use crate::scenario::{Arrival, HOUR, Ms, Peer, Row, Scenario, Setup, static_policy};

/// What a replica count must achieve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Target {
    /// At most this many users wait for room (`delayed`) in every run.
    pub max_waiting: Option<u64>,
    /// At most this percentage of users start cold (over all runs).
    pub max_cold_pct: Option<f64>,
}

impl Target {
    /// Whether `r` meets the target.
    pub fn met(&self, r: &RowResult) -> bool {
        let waits = self
            .max_waiting
            .is_none_or(|n| r.per_seed.iter().all(|s| s.delayed <= n));
        let cold = self.max_cold_pct.is_none_or(|p| {
            let s = &r.summary;
            s.users == 0 || 100.0 * s.cold as f64 / s.users as f64 <= p
        });
        waits && cold
    }

    /// In words.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.max_waiting {
            parts.push(if n == 0 {
                "no user waits for room (delayed = 0 in every run)".to_string()
            } else {
                format!("at most {n} users wait for room (delayed) in every run")
            });
        }
        if let Some(p) = self.max_cold_pct {
            parts.push(format!("at most {p}% of users start cold"));
        }
        parts.join(" and ")
    }
}

/// The answer for one policy.
#[derive(Clone, Debug, Serialize)]
pub struct Found {
    /// The policy (row name).
    pub policy: String,
    /// The row searched.
    #[serde(skip)]
    pub setup: Setup,
    /// The smallest count that meets the target, if any in the range.
    pub replicas: Option<u32>,
    /// The results at that count (or at the top of the range when not met).
    pub results: Summary,
    /// The results one replica below the answer (none when the answer is the range's bottom).
    pub below: Option<Summary>,
    /// Node-hours per run at the answer minus those without placeholders.
    pub extra_node_hours: f64,
    /// Counts run, in order, and whether each met the target.
    pub tried: Vec<(u32, bool)>,
}

impl Found {
    /// The `buffer` row (a CapacityBuffer without the readiness gate).
    fn is_buffer(&self) -> bool {
        self.setup.peer == Peer::Buffer && !self.setup.gate
    }
}

/// Everything `--recommend` found.
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    /// The target.
    pub target: Target,
    /// The range searched.
    pub range: (u32, u32),
    /// The first count tried for the rows without the readiness gate (the estimate from the
    /// launches, within the range; each row's is its `tried[0]`).
    pub guess: u32,
    /// Without placeholders.
    pub none: Summary,
    /// One per policy, in the order given.
    pub policies: Vec<Found>,
    /// The row the manifest line is for.
    pub manifest_policy: Option<String>,
    /// The `manifests/statefulset.yaml` line.
    pub manifest_line: Option<String>,
    /// A ready-to-apply PodTemplate and CapacityBuffer when the buffer row meets the target.
    pub capacity_buffer: Option<String>,
}

/// The search for the smallest count meeting a target (also one window's, in
/// `--recommend --schedule`: `crate::schedule::propose`).
#[derive(Clone)]
pub(crate) struct Search {
    lo: u32,
    hi: u32,
    /// The first count to run.
    guess: u32,
    /// The first step of the gallop away from the guess.
    step: u32,
    /// Largest count known to fail, and whether its result is a whole run (not given up
    /// early at the first miss).
    fail: Option<(u32, RowResult, bool)>,
    /// Smallest count known to meet.
    pub(crate) meet: Option<(u32, RowResult)>,
    tried: Vec<(u32, bool)>,
}

impl Search {
    pub(crate) fn new(lo: u32, hi: u32, guess: u32) -> Search {
        let guess = guess.clamp(lo, hi);
        Search {
            lo,
            hi,
            guess,
            step: guess.div_ceil(8).max(1),
            fail: None,
            meet: None,
            tried: Vec::new(),
        }
    }

    /// The gallop's step after `n` counts on one side of the answer: `step`, doubled each time.
    fn gallop(&self, n: usize) -> u32 {
        self.step.saturating_mul(
            1u32.checked_shl(n.saturating_sub(1) as u32)
                .unwrap_or(u32::MAX),
        )
    }

    /// The next count to run, or None when the search is over: the guess; then, from failing
    /// counts, up by the gallop's step (doubling) up to `hi`; from meeting counts, down by it to
    /// `lo`; then halving the bracket.
    pub(crate) fn next(&self) -> Option<u32> {
        let fail = self.fail.as_ref().map(|f| f.0);
        let meet = self.meet.as_ref().map(|m| m.0);
        let n = self.tried.len();
        match (fail, meet) {
            (None, None) => Some(self.guess),
            (Some(f), None) if f >= self.hi => None,
            (Some(f), None) => Some(f.saturating_add(self.gallop(n)).min(self.hi)),
            (None, Some(m)) if m <= self.lo => None,
            (None, Some(m)) => Some(m.saturating_sub(self.gallop(n)).max(self.lo)),
            (Some(f), Some(m)) if m > f + 1 => Some(f + (m - f) / 2),
            (Some(_), Some(_)) => None,
        }
    }

    /// Whether count `r` must run to the end even when it fails: when it fails, its results
    /// are shown (one below a meeting count, or the top of the range when nothing meets).
    fn whole(&self, r: u32) -> bool {
        r >= self.hi || self.meet.as_ref().is_some_and(|m| m.0 == r + 1)
    }

    /// Once the search is over: the failing count whose results are shown but were given up
    /// early, to run again to the end.
    fn rerun(&self) -> Option<u32> {
        match &self.fail {
            Some((f, _, false)) if self.next().is_none() => Some(*f),
            _ => None,
        }
    }

    /// The results of [`Search::rerun`]'s count run to the end (not a new count tried).
    fn rerun_done(&mut self, result: RowResult) {
        if let Some(f) = self.fail.as_mut() {
            f.1 = result;
            f.2 = true;
        }
    }

    /// Records count `r`'s results; `whole`: not given up early.
    pub(crate) fn record(&mut self, r: u32, result: RowResult, met: bool, whole: bool) {
        self.tried.push((r, met));
        if met {
            if self.meet.as_ref().is_none_or(|m| r < m.0) {
                self.meet = Some((r, result));
            }
        } else if self.fail.as_ref().is_none_or(|f| r > f.0) {
            self.fail = Some((r, result, whole));
        }
    }
}

/// The estimate the search starts from for `setup`: the most users that start within one
/// window (node-ready time, one autoscaler scan and the re-creation of a preempted placeholder;
/// with the readiness gate also the image pull and the gate's lag) minus those whose sessions
/// end in it, over the measured part of `arrivals` (each user taken to start at once). Sessions
/// that end free room for the launches, so this is what the placeholders must cover, not every
/// launch of the busiest window (the rule of thumb).
pub fn estimate(sc: &Scenario, setup: &Setup, arrivals: &[Arrival]) -> u32 {
    let mut window = sc.node_ready + sc.autoscaler.scan + sc.recreate_delay;
    if setup.gate {
        window += sc.image_pull + sc.gate_lag;
    }
    // +1 at each start and -1 at each end, in time order (an end before a start at the same
    // time); concurrent users over time.
    let mut steps: Vec<(Ms, i64)> = Vec::with_capacity(2 * arrivals.len());
    for a in arrivals {
        steps.push((a.at, 1));
        steps.push((a.at + a.session, -1));
    }
    steps.sort_unstable();
    let (from, to) = (sc.warmup, sc.end());
    // Concurrent users over time, and the most growth within any `window`: the level after a
    // change minus the least level held in the `window` before it (a monotone deque of the
    // levels held, each with the time it ended).
    let mut level = 0i64;
    let mut minima: std::collections::VecDeque<(Ms, i64)> = std::collections::VecDeque::new();
    let mut most = 0i64;
    for (t, d) in steps {
        while minima.back().is_some_and(|&(_, l)| l >= level) {
            minima.pop_back();
        }
        minima.push_back((t, level));
        level += d;
        while minima.front().is_some_and(|&(ended, _)| ended + window < t) {
            minima.pop_front();
        }
        if (from..to).contains(&t) {
            let low = minima.front().map_or(level, |&(_, l)| l.min(level));
            most = most.max(level - low);
        }
    }
    u32::try_from(most).unwrap_or(u32::MAX)
}

/// One policy's search (or the row without placeholders) in the pool.
struct Chain {
    /// The row, its replica count set per run.
    setup: Setup,
    /// None: the row without placeholders, run once.
    search: Option<Search>,
    /// A row whose placeholders run the agent starts from the answer of its twin without
    /// the agent (`static`, or `gate` with the gate): this chain waits for that one's search.
    after: Option<usize>,
    /// The count being run, and its seeds' results as they come.
    running: Option<Running>,
    /// Nothing more to run.
    over: bool,
    /// The row without placeholders' result.
    result: Option<RowResult>,
}

/// One seed's run: its summary, times to running, and when it was given up.
type Part = (Summary, Vec<Ms>, Option<Ms>);

struct Running {
    replicas: u32,
    /// Run to the end, not given up at the first miss of the target.
    whole: bool,
    /// The run to the end of a count given up early ([`Search::rerun`]).
    rerun: bool,
    /// Seeds handed to a worker so far, and how many to hand out (fewer once a seed has
    /// missed the target: the count fails whatever the others do).
    issued: usize,
    limit: usize,
    /// The seeds' results.
    parts: Vec<Option<Part>>,
    started: Instant,
}

/// Where a run may stop for `target`: once a seed's waiting users or cold starts alone miss
/// it (`users`: the measured users over all seeds, whom the cold percentage is of).
fn stop_for(target: &Target, users: u64) -> Stop {
    let cold = target.max_cold_pct.filter(|_| users > 0).map(|p| {
        // The most cold starts `Target::met` allows, with its own arithmetic.
        let ok = |c: u64| 100.0 * c as f64 / users as f64 <= p;
        let mut c = ((p / 100.0) * users as f64).clamp(0.0, users as f64) as u64;
        while c > 0 && !ok(c) {
            c -= 1;
        }
        while c <= users && ok(c + 1) {
            c += 1;
        }
        c
    });
    Stop {
        delayed: target.max_waiting,
        cold,
    }
}

/// The smallest replica count in `range` meeting `target` for each of `policies` (their
/// replica counts are replaced), on the given arrivals (one list per seed), telling
/// `progress` a line for each count run (which count, its result, how long it took) as it
/// finishes.
#[allow(clippy::too_many_arguments)]
pub fn recommend(
    sc: &Scenario,
    policies: &[Setup],
    range: (u32, u32),
    seeds: &[u64],
    arrivals: &[Vec<Arrival>],
    target: Target,
    check: bool,
    progress: &(dyn Fn(&str) + Sync),
) -> Recommendation {
    search(
        sc, policies, range, seeds, arrivals, target, check, progress, true,
    )
}

/// The searches of [`recommend`]. With `early_stop`, a count whose run misses the target
/// is given up there (no more of its seeds run), unless its results may be shown; a failing
/// count whose results are shown after all is run again to the end. The answers are those of
/// runs to the end (`recommend`'s tests compare the two).
#[allow(clippy::too_many_arguments)]
fn search(
    sc: &Scenario,
    policies: &[Setup],
    range: (u32, u32),
    seeds: &[u64],
    arrivals: &[Vec<Arrival>],
    target: Target,
    check: bool,
    progress: &(dyn Fn(&str) + Sync),
    early_stop: bool,
) -> Recommendation {
    assert_eq!(arrivals.len(), seeds.len(), "one arrival list per seed");
    let (lo, hi) = range;
    let none_row = Setup {
        name: "none".into(),
        row: Row::None,
        replicas: 0,
        policy: static_policy(),
        gate: false,
        peer: Peer::Selfdestruct,
        pin: false,
    };
    let first = arrivals.first().map_or(&[][..], Vec::as_slice);
    let measured = sc.warmup..sc.end();
    let users = arrivals
        .iter()
        .map(|a| a.iter().filter(|a| measured.contains(&a.at)).count() as u64)
        .sum();
    let stop = stop_for(&target, users);
    // Per policy, the first one the same but for its name (`configured` with the agent's
    // defaults is `new-node`): its results are that one's, and only that one is searched.
    let unnamed = |a: &Setup| Setup {
        name: String::new(),
        row: Row::default(),
        ..a.clone()
    };
    let original: Vec<usize> = policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = unnamed(p);
            policies[..i]
                .iter()
                .position(|q| unnamed(q) == p)
                .unwrap_or(i)
        })
        .collect();
    // The chain of each searched policy (chain 0 is the row without placeholders).
    let mut chain_of = vec![0; policies.len()];
    let mut chains: Vec<Chain> = vec![Chain {
        setup: none_row.clone(),
        search: None,
        after: None,
        running: None,
        over: false,
        result: None,
    }];
    for (i, p) in policies.iter().enumerate() {
        if original[i] != i {
            continue;
        }
        chain_of[i] = chains.len();
        chains.push(Chain {
            setup: p.clone(),
            search: Some(Search::new(lo, hi, estimate(sc, p, first))),
            after: None,
            running: None,
            over: false,
            result: None,
        });
    }
    for (i, p) in policies.iter().enumerate() {
        if original[i] != i || !p.runs_agent() {
            continue;
        }
        chains[chain_of[i]].after = policies
            .iter()
            .position(|q| !q.runs_agent() && q.peer == Peer::Selfdestruct && q.gate == p.gate)
            .map(|j| chain_of[original[j]]);
    }
    let state = Mutex::new(chains);
    let wake = Condvar::new();
    let started = Instant::now();
    let hours = sc.measured as f64 / HOUR as f64;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let Ok(mut chains) = state.lock() else { return };
                loop {
                    // The next run: the first chain with a seed left to hand out, starting its
                    // next count when it has none running. First the chains others wait for,
                    // then those with the agent (the longest runs), then the rest: the long
                    // searches start early and the short ones fill in around them.
                    let mut job = None;
                    let mut order: Vec<usize> = (0..chains.len()).collect();
                    order.sort_by_key(|&c| {
                        let awaited = chains.iter().any(|o| o.after == Some(c));
                        // More placeholders, more agents: the longer runs first.
                        let count = (chains[c].running.as_ref().map(|r| r.replicas))
                            .or_else(|| chains[c].search.as_ref().and_then(Search::next));
                        let agent = chains[c].setup.runs_agent();
                        (
                            !awaited,
                            !agent,
                            std::cmp::Reverse(count.filter(|_| agent)),
                            c,
                        )
                    });
                    for c in order {
                        if let Some(twin) = chains[c].after {
                            if !chains[twin].over {
                                continue;
                            }
                            // Start at the twin's answer, galloping by 1 (doubling): the
                            // answers differ by a few replicas, and each count costs a run.
                            let from = chains[twin]
                                .search
                                .as_ref()
                                .and_then(|s| s.meet.as_ref().map(|m| m.0));
                            let chain = &mut chains[c];
                            chain.after = None;
                            if let (Some(from), Some(s)) = (from, chain.search.as_mut()) {
                                *s = Search::new(s.lo, s.hi, from);
                                s.step = 1;
                            }
                        }
                        let chain = &mut chains[c];
                        if chain.over {
                            continue;
                        }
                        if chain.running.is_none() {
                            // (count, run to the end, a rerun)
                            let next = match &chain.search {
                                Some(s) => match s.next() {
                                    Some(r) => Some((r, !early_stop || s.whole(r), false)),
                                    None => s.rerun().map(|r| (r, true, true)),
                                },
                                None => chain.result.is_none().then_some((0, true, false)),
                            };
                            let Some((replicas, whole, rerun)) = next else {
                                chain.over = true;
                                continue;
                            };
                            chain.running = Some(Running {
                                replicas,
                                whole,
                                rerun,
                                issued: 0,
                                limit: seeds.len(),
                                parts: vec![None; seeds.len()],
                                started: Instant::now(),
                            });
                        }
                        if let Some(r) = chain.running.as_mut()
                            && r.issued < r.limit
                        {
                            r.issued += 1;
                            let setup = Setup {
                                replicas: r.replicas,
                                ..chain.setup.clone()
                            };
                            let until = if r.whole { Stop::NEVER } else { stop };
                            job = Some((c, r.issued - 1, setup, until));
                            break;
                        }
                    }
                    let Some((c, s, setup, until)) = job else {
                        if chains.iter().all(|c| c.over) {
                            wake.notify_all();
                            return;
                        }
                        chains = match wake.wait(chains) {
                            Ok(g) => g,
                            Err(_) => return,
                        };
                        continue;
                    };
                    drop(chains);
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        engine::simulate_until(sc, &setup, &arrivals[s], seeds[s], check, until)
                    }));
                    chains = match state.lock() {
                        Ok(g) => g,
                        Err(_) => return,
                    };
                    let run = match run {
                        Ok(run) => run,
                        Err(panic) => {
                            // No other worker waits for this run's result: all stop.
                            chains.iter_mut().for_each(|c| c.over = true);
                            drop(chains);
                            wake.notify_all();
                            std::panic::resume_unwind(panic);
                        }
                    };
                    let chain = &mut chains[c];
                    let Some(r) = chain.running.as_mut() else {
                        continue;
                    };
                    if run.stopped_at.is_some() {
                        // This seed missed the target: so does the count.
                        r.limit = r.issued;
                    }
                    r.parts[s] = Some((run.summary, run.ttr, run.stopped_at));
                    if r.parts.iter().flatten().count() < r.limit {
                        continue;
                    }
                    let Some(r) = chain.running.take() else {
                        continue;
                    };
                    let given_up = r.parts.iter().flatten().find_map(|p| p.2);
                    let runs: Vec<(Summary, Vec<Ms>)> = r
                        .parts
                        .into_iter()
                        .flatten()
                        .map(|(s, t, _)| (s, t))
                        .collect();
                    let result = RowResult {
                        summary: metrics::combine(&runs, hours),
                        per_seed: runs.into_iter().map(|(s, _)| s).collect(),
                        samples: Vec::new(),
                    };
                    let s = &result.summary;
                    let mut line = format!(
                        "{} with {} replicas: {} delayed, {} cold",
                        chain.setup.name, r.replicas, s.delayed, s.cold
                    );
                    if let Some(t) = given_up {
                        let _ = write!(
                            line,
                            " when given up at {:.1} of {:.1} h",
                            t.saturating_sub(sc.warmup) as f64 / HOUR as f64,
                            hours
                        );
                    }
                    match chain.search.as_mut() {
                        Some(search) if r.rerun => {
                            line.push_str(": not met, run to the end for the table");
                            search.rerun_done(result);
                        }
                        Some(search) => {
                            let met = given_up.is_none() && target.met(&result);
                            line.push_str(if met { ": met" } else { ": not met" });
                            search.record(r.replicas, result, met, given_up.is_none());
                        }
                        None => chain.result = Some(result),
                    }
                    progress(&format!(
                        "{line} ({:.1}s; {:.0}s in all)",
                        r.started.elapsed().as_secs_f64(),
                        started.elapsed().as_secs_f64()
                    ));
                    wake.notify_all();
                }
            });
        }
    });
    let mut chains = state.into_inner().unwrap_or_default();
    let none = chains[0]
        .result
        .take()
        .map(|r| r.summary)
        .unwrap_or_default();
    let no_gate = Setup {
        gate: false,
        ..policies.first().cloned().unwrap_or(none_row)
    };
    let guess = estimate(sc, &no_gate, first).clamp(lo, hi);
    let found: Vec<Found> = policies
        .iter()
        .zip(&original)
        .map(|(p, &o)| {
            let s = chains[chain_of[o]]
                .search
                .clone()
                .unwrap_or_else(|| Search::new(lo, hi, lo));
            let (replicas, results, below) = match (s.meet, s.fail) {
                (Some((m, at)), fail) => {
                    let below = fail.filter(|f| f.0 + 1 == m).map(|f| f.1.summary);
                    (Some(m), at.summary, below)
                }
                (None, Some((_, at, _))) => (None, at.summary, None),
                (None, None) => (None, Summary::default(), None),
            };
            Found {
                policy: p.name.clone(),
                setup: p.clone(),
                replicas,
                extra_node_hours: round2(results.node_hours - none.node_hours),
                results,
                below,
                tried: s.tried,
            }
        })
        .collect();
    let manifest = [Row::Configured, Row::NewNode]
        .iter()
        .find_map(|row| found.iter().find(|f| f.setup.row == *row))
        .or_else(|| found.first());
    let manifest_policy = manifest.map(|f| f.policy.clone());
    let manifest_line = manifest
        .and_then(|f| f.replicas)
        .map(|r| format!("replicas: {r}"));
    let capacity_buffer = found
        .iter()
        .find(|f| f.is_buffer())
        .and_then(|f| f.replicas)
        .map(|r| capacity_buffer_yaml(sc, r, &BufferPlacement::default()));
    Recommendation {
        target,
        range,
        guess,
        none,
        policies: found,
        manifest_policy,
        manifest_line,
        capacity_buffer,
    }
}

/// Where the recommended CapacityBuffer goes and which nodes its chunks may take: the user
/// pool's, so the autoscaler reserves room where user pods can run (its chunks pass the
/// scheduler's checks like pods: without the pool's selector and tolerations they reserve room
/// on the wrong nodes of a tainted pool).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BufferPlacement {
    /// The namespace of the buffer and its PodTemplate (a Namespace document is printed too).
    pub namespace: String,
    /// `nodeSelector` of the chunks, in the order given.
    pub node_selector: Vec<(String, String)>,
    /// Tolerations of the chunks.
    pub tolerations: Vec<Toleration>,
}

impl Default for BufferPlacement {
    fn default() -> Self {
        BufferPlacement {
            namespace: "buffers".into(),
            node_selector: Vec::new(),
            tolerations: Vec::new(),
        }
    }
}

/// A toleration, from `KEY[=VALUE][:EFFECT]` (kubectl taint's form; no value: `Exists`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Toleration {
    pub key: String,
    pub value: Option<String>,
    pub effect: Option<String>,
}

/// The chunks' priority: the cluster autoscaler's default `--expendable-pods-priority-cutoff`.
/// It never scales up for a pod below the cutoff, so a buffer below it silently does nothing.
pub const BUFFER_PRIORITY: i32 = -10;

/// A DNS label (namespaces, label name parts).
fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A label key: `[PREFIX/]NAME`, NAME at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn label_key(s: &str) -> bool {
    let (prefix, name) = s.rsplit_once('/').map_or((None, s), |(p, n)| (Some(p), n));
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(|p| p.len() <= 253 && p.split('.').all(dns_label))
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn label_value(s: &str) -> bool {
    s.is_empty() || (label_key(s) && !s.contains('/'))
}

/// `--buffer-namespace`: a DNS label.
pub fn parse_namespace(s: &str) -> Result<String, String> {
    if dns_label(s) {
        Ok(s.to_string())
    } else {
        Err("expected a namespace name (a DNS label: a-z, 0-9 and '-', at most 63)".into())
    }
}

/// One `--buffer-node-selector KEY=VALUE` (clap splits the list at commas).
pub fn parse_node_label(pair: &str) -> Result<(String, String), String> {
    match pair.trim().split_once('=') {
        Some((k, v)) if label_key(k) && label_value(v) => Ok((k.to_string(), v.to_string())),
        _ => Err(format!(
            "expected KEY=VALUE (a node label, e.g. hub.jupyter.org/node-purpose=user), not {pair:?}"
        )),
    }
}

/// `--buffer-toleration KEY[=VALUE][:EFFECT]`, as kubectl taint writes a taint.
pub fn parse_toleration(s: &str) -> Result<Toleration, String> {
    let bad = || {
        format!(
            "expected KEY[=VALUE][:EFFECT] (the user nodes' taint, e.g. \
             hub.jupyter.org/dedicated=user:NoSchedule; EFFECT NoSchedule, PreferNoSchedule or \
             NoExecute), not {s:?}"
        )
    };
    let (rest, effect) = match s.rsplit_once(':') {
        Some((r, e)) => (r, Some(e.to_string())),
        None => (s, None),
    };
    if effect
        .as_deref()
        .is_some_and(|e| !matches!(e, "NoSchedule" | "PreferNoSchedule" | "NoExecute"))
    {
        return Err(bad());
    }
    let (key, value) = match rest.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (rest, None),
    };
    if !label_key(key) || value.as_deref().is_some_and(|v| !label_value(v)) {
        return Err(bad());
    }
    Ok(Toleration {
        key: key.to_string(),
        value,
        effect,
    })
}

/// A YAML scalar for a string (a JSON string is one).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A Namespace, a PodTemplate of one user pod's requests (on the user pool: `placement`'s
/// nodeSelector and tolerations; at the expendable cutoff) and a CapacityBuffer
/// (`autoscaling.x-k8s.io/v1beta1`, the CRD's storage version) keeping `replicas` of them free.
pub fn capacity_buffer_yaml(sc: &Scenario, replicas: u32, placement: &BufferPlacement) -> String {
    let cpu = sc.user.cpu_m;
    let mem = sc.user.mem_mib;
    let ns = &placement.namespace;
    let mut pool = String::new();
    if !placement.node_selector.is_empty() {
        pool.push_str("    nodeSelector:\n");
        for (k, v) in &placement.node_selector {
            let _ = writeln!(pool, "      {}: {}", quoted(k), quoted(v));
        }
    }
    if !placement.tolerations.is_empty() {
        pool.push_str("    tolerations:\n");
        for t in &placement.tolerations {
            let _ = writeln!(pool, "    - key: {}", quoted(&t.key));
            match &t.value {
                Some(v) => {
                    let _ = writeln!(pool, "      operator: Equal\n      value: {}", quoted(v));
                }
                None => pool.push_str("      operator: Exists\n"),
            }
            if let Some(e) = &t.effect {
                let _ = writeln!(pool, "      effect: {e}");
            }
        }
    }
    if pool.is_empty() {
        pool.push_str(
            "    # No nodeSelector or tolerations given (--buffer-node-selector, --buffer-toleration):\n    \
             # on a dedicated or tainted user pool the chunks reserve room on the wrong nodes.\n",
        );
    }
    format!(
        "# Needs cluster-autoscaler 1.35 or later (the v1beta1, namespaced CapacityBuffer; 1.34 has
# only v1alpha1) started with --capacity-buffer-controller-enabled=true and
# --capacity-buffer-pod-injection-enabled=true, and the CapacityBuffer CRD installed
# (kubernetes/autoscaler: cluster-autoscaler/apis/config/crd/). The chunks' priority must not
# be below its --expendable-pods-priority-cutoff (default -10), or the buffer does nothing.
apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: user-chunk
  namespace: {ns}
template:
  spec:
    # The autoscaler's default expendable cutoff: it scales up for chunks at or above it.
    priority: {BUFFER_PRIORITY}
{pool}    containers:
    - name: chunk
      image: registry.k8s.io/pause:3.10
      resources:
        requests:
          cpu: {cpu}m
          memory: {mem}Mi
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata:
  name: users
  namespace: {ns}
spec:
  provisioningStrategy: buffer.x-k8s.io/active-capacity
  podTemplateRef:
    name: user-chunk
  replicas: {replicas}
"
    )
}

impl Recommendation {
    /// The CapacityBuffer for the buffer row's count, placed by `placement` (`recommend` places
    /// it with the defaults).
    pub fn place_buffer(&mut self, sc: &Scenario, placement: &BufferPlacement) {
        self.capacity_buffer = self
            .policies
            .iter()
            .find(|f| f.is_buffer())
            .and_then(|f| f.replicas)
            .map(|r| capacity_buffer_yaml(sc, r, placement));
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The short table.
pub fn table(rec: &Recommendation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "target: {}; replicas searched in {}..={} from {} (the launches' estimate; more with the gate), galloping, then halving",
        rec.target.describe(),
        rec.range.0,
        rec.range.1,
        rec.guess
    );
    let _ = writeln!(
        out,
        "without placeholders: {} delayed, {} cold, {:.1} node-h",
        rec.none.delayed, rec.none.cold, rec.none.node_hours
    );
    let _ = writeln!(out);
    let head = [
        "policy",
        "replicas",
        "delayed",
        "cold",
        "node-h",
        "+node-h",
        "one fewer",
    ];
    let mut lines: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for f in &rec.policies {
        let r = &f.results;
        let one_fewer = match (&f.below, f.replicas) {
            (Some(b), _) => format!("{} delayed, {} cold", b.delayed, b.cold),
            (None, Some(_)) => "(bottom of range)".into(),
            (None, None) => format!("not met at {}", rec.range.1),
        };
        lines.push(vec![
            f.policy.clone(),
            f.replicas.map_or("-".into(), |n| n.to_string()),
            r.delayed.to_string(),
            format!("{} ({:.1}%)", r.cold, r.cold_pct),
            format!("{:.1}", r.node_hours),
            format!("{:+.1}", f.extra_node_hours),
            one_fewer,
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
    for (i, l) in lines.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in l.iter().enumerate() {
            match c {
                0 => {
                    let _ = write!(line, "{cell:<w$}", w = widths[c]);
                }
                6 => {
                    let _ = write!(line, "  {cell}");
                }
                _ => {
                    let _ = write!(line, "  {cell:>w$}", w = widths[c]);
                }
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    let _ = writeln!(out);
    match (&rec.manifest_policy, &rec.manifest_line) {
        (Some(p), Some(line)) => {
            let _ = writeln!(
                out,
                "manifests/statefulset.yaml (the {p} row{}):\n  {line}",
                if rec
                    .policies
                    .iter()
                    .any(|f| f.policy == *p && f.setup.row == Row::Configured)
                {
                    ": the policy flags, by default the agent's defaults as shipped"
                } else {
                    ""
                }
            );
        }
        (Some(p), None) => {
            let _ = writeln!(
                out,
                "manifests/statefulset.yaml: the {p} row does not meet the target up to {} replicas; widen --sweep-replicas",
                rec.range.1
            );
        }
        _ => {}
    }
    if let Some(yaml) = &rec.capacity_buffer {
        let _ = writeln!(
            out,
            "\nA CapacityBuffer instead (the buffer row; no placeholder pods; cluster-autoscaler 1.35+ with\n--capacity-buffer-controller-enabled and --capacity-buffer-pod-injection-enabled):\n---\n{yaml}"
        );
    }
    out
}

/// The JSON document.
#[derive(Serialize)]
struct RecommendJson<'a> {
    scenario: &'a Scenario,
    seeds: &'a [u64],
    rule_of_thumb_replicas: f64,
    #[serde(flatten)]
    recommendation: &'a Recommendation,
}

/// `--recommend --json`.
pub fn json(sc: &Scenario, seeds: &[u64], rec: &Recommendation) -> String {
    let doc = RecommendJson {
        scenario: sc,
        seeds,
        rule_of_thumb_replicas: round2(sc.rule_of_thumb()),
        recommendation: rec,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Most placeholder replicas of a row (`--replicas`, `--sweep-replicas`, the search's range):
/// every placeholder's agent decides again on every change of a sibling, so a run costs the
/// replicas squared.
pub const MAX_REPLICAS: u32 = 2_000;

/// The default upper end of the search: what covers the launches of one node-ready time plus
/// the image pull and the gate's lag at the busiest rate (the gate rows need that much), half
/// again, plus one node's worth; at most what the node group can hold.
pub fn default_range(sc: &Scenario) -> (u32, u32) {
    let (_, peak) = sc.rates();
    let window = (sc.node_ready + sc.image_pull + sc.gate_lag + sc.autoscaler.scan) as f64
        / crate::scenario::MIN as f64;
    let hi = (1.5 * peak * window).ceil() as u64 + sc.pods_per_node();
    let cap = u64::from(sc.autoscaler.max_nodes) * sc.pods_per_node();
    (0, hi.min(cap).min(u64::from(MAX_REPLICAS)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(delayed: &[u64], cold: u64, users: u64) -> RowResult {
        RowResult {
            summary: Summary {
                users,
                cold,
                delayed: delayed.iter().sum(),
                ..Summary::default()
            },
            per_seed: delayed
                .iter()
                .map(|&d| Summary {
                    delayed: d,
                    ..Summary::default()
                })
                .collect(),
            samples: Vec::new(),
        }
    }

    #[test]
    fn targets() {
        let wait0 = Target {
            max_waiting: Some(0),
            max_cold_pct: None,
        };
        assert!(wait0.met(&result(&[0, 0], 50, 100)));
        assert!(!wait0.met(&result(&[0, 1], 0, 100)));
        let both = Target {
            max_waiting: Some(2),
            max_cold_pct: Some(1.0),
        };
        assert!(both.met(&result(&[2, 2], 1, 100)));
        assert!(!both.met(&result(&[2, 2], 2, 100)));
        assert!(!both.met(&result(&[3], 0, 100)));
    }

    #[test]
    fn the_search_gallops_from_the_estimate_then_halves_the_bracket() {
        let search = |lo, hi, guess, knee: u32| {
            let mut s = Search::new(lo, hi, guess);
            while let Some(r) = s.next() {
                assert!(s.tried.iter().all(|t| t.0 != r), "{r} twice: {:?}", s.tried);
                s.record(r, result(&[], 0, 0), r >= knee, true);
            }
            (s.meet.map(|m| m.0), s.fail.map(|f| f.0), s.tried)
        };
        // An estimate near the knee: a step of 8 from 64, then halving.
        let (meet, fail, tried) = search(0, 400, 64, 61);
        assert_eq!((meet, fail), (Some(61), Some(60)), "{tried:?}");
        assert_eq!(tried[..2], [(64, true), (56, false)]);
        assert!(tried.len() <= 5, "{tried:?}");
        let (meet, fail, tried) = search(0, 400, 64, 70);
        assert_eq!((meet, fail), (Some(70), Some(69)), "{tried:?}");
        assert_eq!(tried[..2], [(64, false), (72, true)]);
        assert!(tried.len() <= 5, "{tried:?}");
        // Far off: the step doubles. Met from 13 on; from 4: 4, 5, 7, 11, 19 (met), 15, 13, 12.
        let (meet, fail, tried) = search(0, 400, 4, 13);
        assert_eq!((meet, fail), (Some(13), Some(12)), "{tried:?}");
        assert_eq!(
            tried[..5],
            [(4, false), (5, false), (7, false), (11, false), (19, true)]
        );
        let (meet, fail, tried) = search(0, 400, 100, 13);
        assert_eq!((meet, fail), (Some(13), Some(12)), "{tried:?}");
        assert_eq!(tried[..2], [(100, true), (87, true)]);
        // Met at the bottom; never met.
        assert_eq!(search(5, 40, 9, 0).0, Some(5));
        assert_eq!(search(0, 40, 0, 0).0, Some(0));
        let (meet, fail, tried) = search(0, 40, 9, 1000);
        assert_eq!((meet, fail), (None, Some(40)), "{tried:?}");
    }

    #[test]
    fn the_estimate_is_the_most_growth_of_concurrent_users_within_a_node_ready_time() {
        let mut sc = Scenario::small();
        sc.warmup = 0;
        sc.measured = 10 * HOUR;
        let row = Setup {
            name: "static".into(),
            row: Row::Static,
            replicas: 0,
            policy: static_policy(),
            gate: false,
            peer: Peer::Selfdestruct,
            pin: false,
        };
        let window = sc.node_ready + sc.autoscaler.scan + sc.recreate_delay;
        let at = |t: Ms, session: Ms| Arrival { at: t, session };
        // 30 users within one window, with long sessions: 30.
        let class: Vec<Arrival> = (0..30)
            .map(|i| at(HOUR + i * window / 40, 5 * HOUR))
            .collect();
        assert_eq!(estimate(&sc, &row, &class), 30);
        // The same 30 spread over 30 windows: at most 2 start within one window.
        let spread: Vec<Arrival> = (0..30).map(|i| at(HOUR + i * window, 5 * HOUR)).collect();
        assert!(estimate(&sc, &row, &spread) <= 2);
        // Short sessions that end as others start: the room is reused.
        let churn: Vec<Arrival> = (0..600).map(|i| at(HOUR + i * 6_000, 60_000)).collect();
        assert!(
            estimate(&sc, &row, &churn) <= 11,
            "{}",
            estimate(&sc, &row, &churn)
        );
        // The gate's rows wait out the image pull too: a longer window, more users.
        let steady: Vec<Arrival> = (0..600).map(|i| at(HOUR + i * 10_000, 5 * HOUR)).collect();
        let gated = Setup {
            gate: true,
            ..row.clone()
        };
        assert!(estimate(&sc, &gated, &steady) > estimate(&sc, &row, &steady));
    }
}

#[cfg(test)]
mod early_stop_tests {
    use std::sync::Mutex;

    use super::*;
    use crate::scenario::{agent_defaults, standard_rows};

    /// The searches with runs given up at the first miss of the target, and with every run to
    /// the end: the same recommendation, to the byte (table and JSON), for each target. The
    /// progress lines show that runs were given up and that a count given up was run again for
    /// the table (so the comparison is not vacuous).
    #[test]
    fn giving_up_a_run_at_the_first_miss_finds_what_runs_to_the_end_find() {
        let mut sc = Scenario::small();
        sc.measured = 12 * HOUR;
        let configured = Setup {
            name: "configured".into(),
            row: Row::Configured,
            replicas: 0,
            policy: agent_defaults(),
            gate: false,
            peer: Peer::Selfdestruct,
            pin: false,
        };
        let rows: Vec<Setup> = standard_rows(&sc, configured)
            .into_iter()
            .filter(|r| {
                [
                    "static",
                    "new-node",
                    "gate",
                    "gate+new-node",
                    "buffer",
                    "podlifetime",
                    "configured",
                ]
                .contains(&r.name.as_str())
            })
            .collect();
        let seeds = [3, 4];
        let arrivals: Vec<Vec<Arrival>> = seeds.iter().map(|&s| sc.arrivals(s)).collect();
        let range = (0, 40);
        let targets = [
            Target {
                max_waiting: Some(0),
                max_cold_pct: None,
            },
            Target {
                max_waiting: Some(2),
                max_cold_pct: Some(25.0),
            },
            Target {
                max_waiting: None,
                max_cold_pct: Some(10.0),
            },
        ];
        let (mut given_up, mut rerun) = (0, 0);
        for target in targets {
            let lines = Mutex::new(Vec::new());
            let note = |l: &str| lines.lock().unwrap().push(l.to_string());
            let fast = search(
                &sc, &rows, range, &seeds, &arrivals, target, false, &note, true,
            );
            let slow = search(
                &sc,
                &rows,
                range,
                &seeds,
                &arrivals,
                target,
                false,
                &|_: &str| {},
                false,
            );
            assert_eq!(table(&fast), table(&slow), "{target:?}");
            assert_eq!(
                json(&sc, &seeds, &fast),
                json(&sc, &seeds, &slow),
                "{target:?}"
            );
            let lines = lines.into_inner().unwrap();
            given_up += lines.iter().filter(|l| l.contains("given up")).count();
            rerun += lines
                .iter()
                .filter(|l| l.contains("run to the end"))
                .count();
        }
        assert!(given_up > 0, "no run was given up");
        assert!(rerun > 0, "no count given up was run again for the table");
    }

    #[test]
    fn a_run_stops_when_the_target_is_missed_with_what_it_counted_so_far() {
        let sc = Scenario::small();
        let row = Setup {
            name: "static".into(),
            row: Row::Static,
            replicas: 0,
            policy: static_policy(),
            gate: false,
            peer: Peer::Selfdestruct,
            pin: false,
        };
        let arrivals = sc.arrivals(1);
        let whole = engine::simulate(&sc, &row, &arrivals, 1, false);
        assert!(whole.stopped_at.is_none());
        assert!(whole.summary.delayed > 3 && whole.summary.cold > 3);
        for stop in [
            Stop {
                delayed: Some(3),
                cold: None,
            },
            Stop {
                delayed: None,
                cold: Some(3),
            },
        ] {
            let cut = engine::simulate_until(&sc, &row, &arrivals, 1, false, stop);
            let at = cut.stopped_at.expect("stopped");
            assert!(at < sc.end(), "{at}");
            let s = &cut.summary;
            let counted = if stop.delayed.is_some() {
                s.delayed
            } else {
                s.cold
            };
            // Several users can be found waiting at once.
            assert!(counted > 3, "{stop:?}: {s:?}");
        }
        // A target that is met: the run goes to the end, the same as without a stop.
        let met = Stop {
            delayed: Some(whole.summary.delayed),
            cold: Some(whole.summary.cold),
        };
        let run = engine::simulate_until(&sc, &row, &arrivals, 1, false, met);
        assert!(run.stopped_at.is_none());
        assert_eq!(
            serde_json::to_string(&run.summary).unwrap(),
            serde_json::to_string(&whole.summary).unwrap()
        );
    }

    #[test]
    fn the_cold_stop_is_the_most_cold_starts_the_target_allows() {
        let stop = |p: f64, users: u64| {
            stop_for(
                &Target {
                    max_waiting: None,
                    max_cold_pct: Some(p),
                },
                users,
            )
            .cold
        };
        assert_eq!(stop(10.0, 1000), Some(100));
        assert_eq!(stop(1.0, 150), Some(1));
        assert_eq!(stop(0.0, 150), Some(0));
        assert_eq!(stop(100.0, 7), Some(7));
        assert_eq!(stop(5.0, 0), None);
        for users in 1..300u64 {
            for p in [0.5, 1.0, 3.3, 12.5, 50.0] {
                let c = stop(p, users).unwrap();
                let met = |c: u64| 100.0 * c as f64 / users as f64 <= p;
                assert!(met(c) && !met(c + 1), "{p}% of {users}: {c}");
            }
        }
    }
}
