//! Faults, inputs and scale against the fake API server. In-process on virtual
//! time (`common::vtime`): long outages (during start-up and during open
//! watches), every error the API can answer on every call the agent makes,
//! stalled/dropped watches and a slow server, lists and watches that never
//! settle, absurd durations, 100-200 agents through a burst of node events,
//! 401s, an ERROR 403 in an open watch, server text with control characters, an
//! answer over the size cap, a watch line over its cap, a 200 carrying a failure
//! `Status`, a start time in the future. With the real binary: the node gate's
//! invalid settings (exit codes), a token rotated on disk, an exec plugin's token
//! refused and asked for again, a token file turned into a FIFO, the log of a
//! node 403, and the peak memory with huge node labels and annotations. The
//! own-pod-only admission policy is tested on the real control plane
//! (tests/cluster.rs).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cluster::{NS, Scene, events_path, is_event_about};
use common::vtime::{self, Logs};
use common::*;
use fake_apiserver::{FaultResponse, Matcher, NodeBuilder, RecordedRequest};
use serde_json::json;

/// Lifetime timer only (1 s): the agent moves on its own once the API answers.
const TIMER: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
    ("SELFDESTRUCT_MAX_LIFETIME", "1s"),
];

fn env(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = TIMER.to_vec();
    v.extend_from_slice(extra);
    v
}

/// Every mutation targets `pod` with its `uid` (or is an Event about it).
fn only_own_mutations(s: &Scene, pod: &str, uid: &str) -> Result<(), String> {
    let own = format!("/api/v1/namespaces/{NS}/pods/{pod}");
    for r in s.mutations() {
        let body = r.body.clone().unwrap_or_default();
        let ok = match r.method.as_str() {
            "POST" | "PATCH" if r.path.starts_with(&events_path()) => is_event_about(&r, pod),
            "POST" => {
                r.path == format!("{own}/eviction")
                    && body["deleteOptions"]["preconditions"]["uid"] == uid
            }
            "DELETE" => r.path == own && body["preconditions"]["uid"] == uid,
            _ => false,
        };
        if !ok {
            return Err(format!("mutation {} {} {:?}", r.method, r.path, r.body));
        }
    }
    Ok(())
}

fn accepted_removal(r: &RecordedRequest, pod: &str) -> bool {
    r.path.contains(&format!("/pods/{pod}"))
        && ((r.is_eviction() && r.status == 201) || (r.is_pod_delete() && r.status == 200))
}

/// Requests per whole second since `from`, for `secs` seconds.
fn per_second(reqs: &[RecordedRequest], from: Instant, secs: u64) -> Vec<usize> {
    let mut v = vec![0; secs as usize];
    for r in reqs {
        if let Some(d) = r.at.checked_duration_since(from)
            && let Some(slot) = v.get_mut(d.as_secs() as usize)
        {
            *slot += 1;
        }
    }
    v
}

/// Gaps between consecutive requests matching `pred`.
fn gaps(reqs: &[RecordedRequest], pred: impl Fn(&RecordedRequest) -> bool) -> Vec<Duration> {
    let times: Vec<Instant> = reqs.iter().filter(|r| pred(r)).map(|r| r.at).collect();
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

// ---------------------------------------------------------------------------
// Long outages
// ---------------------------------------------------------------------------

const OUTAGE: Duration = Duration::from_secs(10);

/// The API server is down (connections refused) from before the agent starts,
/// so the very first request (GET of its own pod) fails, for 10 s. Nothing is
/// recorded by a server that is down: the attempts are counted from the agent's
/// log lines (one per failed GET).
#[tokio::test(start_paused = true)]
async fn outage_before_the_own_pod_get() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let uid = s.uid("placeholder-0");
    s.fake.set_outage(true);
    let agent = vtime::agent(&s, "placeholder-0", &env(&[]));
    vtime::pass(OUTAGE).await;
    assert!(
        agent.is_running(),
        "an outage never ends it:\n{}",
        logs.text()
    );
    let tries = logs.text().matches("cannot read own pod").count();
    assert!(
        (3..=6).contains(&tries),
        "capped exponential backoff from 0.5-1 s: 4-5 tries in 10 s, not {tries}:\n{}",
        logs.text()
    );
    assert!(logs.text().contains("retry_in"), "{}", logs.text());
    s.fake.set_outage(false);
    let back = s.fake.clock().instant();
    let ok = vtime::request(&s, Duration::from_secs(25), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await
    .unwrap_or_else(|| panic!("acts once the server is back:\n{}", logs.text()));
    // The next read comes within the backoff step it had reached (tries at
    // 0, 0.5-1, 1.5-3, 3.5-7, 7.5-15 s: the step after 10 s is at most 16 s).
    assert!(ok.at - back <= Duration::from_secs(16), "{}", logs.text());
    only_own_mutations(&s, "placeholder-0", &uid).unwrap_or_else(|e| panic!("{e}"));
    assert!(agent.is_running());
}

/// The agent is up with both watches open; then every request is answered 503
/// (a load balancer in front of a dead apiserver) and open watches are cut, for
/// 10 s. Its lifetime runs out meanwhile. The fake records each attempt: the
/// rate stays low (capped, jittered exponential backoff per retry loop) and the
/// eviction goes through once the server answers again.
#[tokio::test(start_paused = true)]
async fn outage_during_open_watches() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let uid = s.uid("placeholder-0");
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "4s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "4s"),
        ],
    );
    assert!(
        vtime::until(Duration::from_secs(10), || s.fake.open_watches() >= 2).await,
        "{}",
        logs.text()
    );
    let from = s.fake.clock().instant();
    s.fake
        .fail_next(Matcher::any(), FaultResponse::unavailable(), 100_000);
    s.fake.drop_watches();
    vtime::pass(OUTAGE).await;
    assert!(agent.is_running(), "{}", logs.text());
    let during: Vec<RecordedRequest> = s
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.at >= from)
        .collect();
    s.fake.clear_faults();
    let secs = per_second(&during, from, OUTAGE.as_secs());
    let total: usize = secs.iter().sum();
    let node_watch = gaps(&during, |r| r.path == "/api/v1/nodes");
    let sib_watch = gaps(&during, |r| {
        r.path == format!("/api/v1/namespaces/{NS}/pods")
    });
    let evict = gaps(&during, |r| r.is_eviction());
    eprintln!(
        "outage with open watches: {total} requests in {OUTAGE:?} ({:.1}/s), per second {secs:?}",
        total as f64 / OUTAGE.as_secs_f64()
    );
    eprintln!(
        "  gaps: node watch {node_watch:?}\n        sibling watch {sib_watch:?}\n        eviction {evict:?}"
    );
    assert!(total >= 3, "it keeps retrying: {total}");
    assert!(
        total <= 45,
        "no hot loop: three retry loops at 0.5 s doubling make ~15 requests, not {total}"
    );
    assert!(secs.iter().all(|n| *n <= 10), "per second: {secs:?}");
    for g in [&node_watch, &sib_watch, &evict] {
        assert!(
            g.iter().all(|d| *d >= Duration::from_millis(400)),
            "a retry came sooner than the 0.5 s floor: {g:?}"
        );
        if g.len() >= 3 {
            assert!(g[g.len() - 1] > g[0], "the backoff grows: {g:?}");
        }
    }
    assert!(
        logs.text().contains("watch failed, retrying"),
        "{}",
        logs.text()
    );
    let ok = vtime::request(&s, Duration::from_secs(25), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    assert!(
        ok.is_some(),
        "acts once the server is back:\n{}",
        logs.text()
    );
    // The watches are open again.
    assert!(
        vtime::until(Duration::from_secs(20), || s.fake.open_watches() >= 2).await,
        "watches resume: {}",
        logs.text()
    );
    only_own_mutations(&s, "placeholder-0", &uid).unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------
// Every error on every call
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    GetOwnPod,
    NodeList,
    NodeWatch,
    SiblingList,
    SiblingWatch,
    Eviction,
    Delete,
    Event,
}

impl Call {
    const ALL: [Call; 8] = [
        Call::GetOwnPod,
        Call::NodeList,
        Call::NodeWatch,
        Call::SiblingList,
        Call::SiblingWatch,
        Call::Eviction,
        Call::Delete,
        Call::Event,
    ];

    fn matcher(self) -> Matcher {
        let pods = format!("/api/v1/namespaces/{NS}/pods");
        let own = format!("{pods}/placeholder-0");
        match self {
            Call::GetOwnPod => Matcher::custom(move |r| r.method == "GET" && r.path == own),
            Call::NodeList => {
                Matcher::custom(|r| r.method == "GET" && r.path == "/api/v1/nodes" && !r.watch)
            }
            Call::NodeWatch => {
                Matcher::custom(|r| r.method == "GET" && r.path == "/api/v1/nodes" && r.watch)
            }
            Call::SiblingList => {
                Matcher::custom(move |r| r.method == "GET" && r.path == pods && !r.watch)
            }
            Call::SiblingWatch => {
                Matcher::custom(move |r| r.method == "GET" && r.path == pods && r.watch)
            }
            Call::Eviction => Matcher::new("POST", &format!("{own}/eviction")),
            Call::Delete => Matcher::custom(move |r| r.method == "DELETE" && r.path == own),
            Call::Event => Matcher::new("POST", &events_path()),
        }
    }

    /// A log line about this call must contain one of these.
    fn log_words(self) -> &'static [&'static str] {
        match self {
            Call::GetOwnPod => &["cannot read own pod", "own pod not found"],
            Call::NodeList | Call::NodeWatch => &["nodes"],
            Call::SiblingList | Call::SiblingWatch => &["sibling pods"],
            Call::Eviction => &["evict", "PodDisruptionBudget", "already gone"],
            Call::Delete => &["delete", "already gone"],
            Call::Event => &["could not post the Event", "evicted own pod"],
        }
    }

    fn matches(self, r: &RecordedRequest) -> bool {
        let pods = format!("/api/v1/namespaces/{NS}/pods");
        match self {
            Call::GetOwnPod => r.method == "GET" && r.path == format!("{pods}/placeholder-0"),
            Call::NodeList => r.path == "/api/v1/nodes" && !r.watch,
            Call::NodeWatch => r.path == "/api/v1/nodes" && r.watch,
            Call::SiblingList => r.path == pods && !r.watch,
            Call::SiblingWatch => r.path == pods && r.watch,
            Call::Eviction => r.is_eviction(),
            Call::Delete => r.is_pod_delete(),
            Call::Event => r.method == "POST" && r.path.ends_with("/events"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Code(u16),
    TooManyWithRetryAfter,
    Truncated,
    WrongObject,
    OtherPod,
}

impl Fault {
    const ALL: [Fault; 16] = [
        Fault::Code(400),
        Fault::Code(401),
        Fault::Code(403),
        Fault::Code(404),
        Fault::Code(409),
        Fault::Code(410),
        Fault::Code(422),
        Fault::Code(429),
        Fault::TooManyWithRetryAfter,
        Fault::Code(500),
        Fault::Code(502),
        Fault::Code(503),
        Fault::Code(504),
        Fault::Truncated,
        Fault::WrongObject,
        Fault::OtherPod,
    ];

    fn response(self, call: Call) -> FaultResponse {
        let reason = |c: u16| match c {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "",
        };
        match self {
            // A proxy's HTML page rather than a Status.
            Fault::Code(502) => {
                FaultResponse::raw(502, "<html><body>502 Bad Gateway</body></html>")
            }
            Fault::Code(c) => FaultResponse::failure(c, reason(c), &format!("injected {c}")),
            Fault::TooManyWithRetryAfter => FaultResponse::throttled(1),
            Fault::Truncated => FaultResponse::truncated_json(),
            Fault::WrongObject => match call {
                // a Node where a Pod, a list or a Status is expected
                Call::NodeList | Call::NodeWatch => FaultResponse::json(
                    200,
                    json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"}}),
                ),
                _ => FaultResponse::json(
                    200,
                    json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "node-x"},
                           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                ),
            },
            // a Pod with another name
            Fault::OtherPod => FaultResponse::json(
                200,
                json!({"kind": "Pod", "apiVersion": "v1",
                       "metadata": {"name": "placeholder-1", "namespace": NS, "uid": "other-uid"},
                       "spec": {"containers": []}}),
            ),
        }
    }

    /// Whether the agent is expected to evict its pod within the case's time
    /// (after two injected faults): false where it correctly stops (404 on its own
    /// removal; a 409 that is not the uid precondition is retried), backs off for minutes (403/422 on its pod), or
    /// backs off 5-10 s and more (429, whose Retry-After is only a floor under the
    /// backoff; 404 on the GET).
    fn recovers(self, call: Call) -> bool {
        match call {
            // A 401 (expired credentials) is retried on the transient backoff.
            Call::GetOwnPod => !matches!(self, Fault::Code(403 | 404)),
            // A 2xx answer (even a garbled one) to its own removal is success to
            // the agent: it stops, and the fake, having only faked the answer,
            // removed nothing.
            Call::Eviction | Call::Delete => !matches!(
                self,
                Fault::Code(403 | 404 | 422 | 429)
                    | Fault::TooManyWithRetryAfter
                    | Fault::Truncated
                    | Fault::WrongObject
                    | Fault::OtherPod
            ),
            _ => true,
        }
    }
}

struct CaseResult {
    name: String,
    problems: Vec<String>,
    took: Duration,
}

async fn run_case(call: Call, fault: Fault) -> CaseResult {
    let t = Instant::now();
    let name = format!("{call:?} x {fault:?}");
    let mut problems = Vec::new();
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let uid = s.uid("placeholder-0");
    s.fake.fail_next(call.matcher(), fault.response(call), 2);
    let mode: &[(&str, &str)] = if call == Call::Delete {
        &[("SELFDESTRUCT_MODE", "delete")]
    } else {
        &[]
    };
    let agent = vtime::agent(&s, "placeholder-0", &env(mode));
    let hit = vtime::until(Duration::from_secs(15), || {
        s.fake.counters().faults_injected >= 1
    })
    .await;
    if !hit {
        problems.push("the faulted call was never made".into());
    }
    // A clear line about the failed call, after the fault.
    let words = call.log_words();
    let logged = vtime::until(Duration::from_secs(4), || {
        logs.text().lines().any(|l| {
            let level_ok = match call {
                // 410 on a watch is routine: the agent lists again and says so
                Call::NodeWatch | Call::SiblingWatch if fault == Fault::Code(410) => {
                    l.contains("410 Gone") && l.contains("listing again")
                }
                // a failed read must say so (an INFO "watching nodes" line is no news)
                Call::NodeList | Call::NodeWatch | Call::SiblingList | Call::SiblingWatch => {
                    l.contains("WARN") || l.contains("ERROR")
                }
                _ => l.contains("WARN") || l.contains("ERROR") || l.contains("INFO"),
            };
            level_ok && words.iter().any(|w| l.contains(w))
        })
    })
    .await;
    if !logged {
        problems.push(format!("no log line naming the call ({words:?})"));
    }
    if fault.recovers(call) {
        let ok = vtime::request(&s, Duration::from_secs(15), |r| {
            accepted_removal(r, "placeholder-0")
        })
        .await;
        if ok.is_none() {
            problems.push("did not move its pod once the API answered again".into());
        }
    } else {
        // Ten minutes of its retries (or of its pause).
        vtime::pass(Duration::from_secs(600)).await;
    }
    if !agent.is_running() {
        problems.push("exited (or panicked)".into());
    }
    if let Err(e) = only_own_mutations(&s, "placeholder-0", &uid) {
        problems.push(e);
    }
    let calls = s.fake.count_requests(|r| call.matches(r));
    if calls > 30 {
        problems.push(format!("{calls} requests of the faulted call: a hot loop"));
    }
    if !problems.is_empty() {
        problems.push(format!("log:\n{}", logs.text()));
    }
    CaseResult {
        name,
        problems,
        took: t.elapsed(),
    }
}

#[tokio::test(start_paused = true)]
async fn every_api_error_on_every_call_is_logged_survived_and_touches_only_the_own_pod() {
    let t = Instant::now();
    let mut cases: Vec<(Call, Fault)> = Vec::new();
    for call in Call::ALL {
        for fault in Fault::ALL {
            // "a Pod with another name" only means something where a Pod is read.
            if fault == Fault::OtherPod && call != Call::GetOwnPod {
                continue;
            }
            cases.push((call, fault));
        }
    }
    let mut results = Vec::new();
    for (c, f) in cases {
        results.push(run_case(c, f).await);
    }
    let slowest = results.iter().map(|r| r.took).max().unwrap_or_default();
    let failed: Vec<&CaseResult> = results.iter().filter(|r| !r.problems.is_empty()).collect();
    eprintln!(
        "{} (call, fault) cases in {:?} (slowest {slowest:?}), {} failed",
        results.len(),
        t.elapsed(),
        failed.len()
    );
    for r in &failed {
        eprintln!("FAILED {}: {}", r.name, r.problems.join("; "));
    }
    assert!(
        failed.is_empty(),
        "failed cases: {:?}",
        failed.iter().map(|r| &r.name).collect::<Vec<_>>()
    );
}

/// A server (or proxy) that answers every watch with a 200 whose body ends at
/// once (here: truncated JSON) must not be re-watched in a tight loop: the agent
/// treats a watch that ends as a normal timeout and resumes at once, with no
/// backoff (src/watch.rs, `Stop::Resume`).
#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_at_once_is_not_re_requested_in_a_hot_loop() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_LOG_LEVEL", "info"),
            ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
        ],
    );
    s.fake.fail_next(
        Matcher::custom(|r| r.watch),
        FaultResponse::truncated_json(),
        1_000_000,
    );
    assert!(
        logs.show("watching sibling", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    let from = s.fake.clock().instant();
    vtime::pass(Duration::from_secs(60)).await;
    let n = s.fake.count_requests(|r| r.watch && r.at >= from);
    s.fake.clear_faults();
    assert!(agent.is_running());
    // Two watches, each backing off from 0.5-1 s doubling: about 6 each in a minute.
    assert!(
        n <= 20,
        "{n} watch requests in 60 s: a watch that ends at once is retried without backoff \
         (src/watch.rs run(): Stop::Resume continues at once)"
    );
}

#[derive(Clone, Copy, Debug)]
enum WatchFault {
    Stall,
    DropMidLine,
    Slow,
}

async fn run_watch_case(f: WatchFault) -> CaseResult {
    let t = Instant::now();
    let mut problems = Vec::new();
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let uid = s.uid("placeholder-0");
    let lifetime = if matches!(f, WatchFault::Slow) {
        "1s"
    } else {
        "3s"
    };
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", lifetime),
            ("SELFDESTRUCT_MAX_LIFETIME", lifetime),
        ],
    );
    match f {
        WatchFault::Slow => s.fake.set_latency(Duration::from_millis(1500)),
        WatchFault::Stall | WatchFault::DropMidLine => {
            if !vtime::until(Duration::from_secs(10), || s.fake.open_watches() >= 2).await {
                problems.push("watches never opened".into());
            }
            let watches = s.fake.count_requests(|r| r.watch);
            if let WatchFault::Stall = f {
                s.fake.stall_watches();
            } else {
                s.fake.drop_watches_mid_line();
                if !vtime::until(Duration::from_secs(8), || {
                    s.fake.count_requests(|r| r.watch) >= watches + 2
                })
                .await
                {
                    problems.push("the dropped watches were not resumed".into());
                }
                // kube logs the broken chunk ("eof in poll"); the watcher says "watch failed"
                if !vtime::until(Duration::from_secs(3), || {
                    logs.text().contains("watch failed") || logs.text().contains("eof in poll")
                })
                .await
                {
                    problems.push("no log line about the dropped watch".into());
                }
            }
        }
    }
    let ok = vtime::request(&s, Duration::from_secs(20), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    if ok.is_none() {
        problems.push("did not move its pod".into());
    }
    if !agent.is_running() {
        problems.push("died".into());
    }
    if let Err(e) = only_own_mutations(&s, "placeholder-0", &uid) {
        problems.push(e);
    }
    s.fake.resume_watches();
    s.fake.set_latency(Duration::ZERO);
    if !problems.is_empty() {
        problems.push(format!("log:\n{}", logs.text()));
    }
    CaseResult {
        name: format!("{f:?}"),
        problems,
        took: t.elapsed(),
    }
}

#[tokio::test(start_paused = true)]
async fn stalled_and_dropped_watches_and_a_slow_server() {
    let mut results = Vec::new();
    for f in [WatchFault::Stall, WatchFault::DropMidLine, WatchFault::Slow] {
        results.push(run_watch_case(f).await);
    }
    for r in &results {
        eprintln!("{}: {:?} {}", r.name, r.took, r.problems.join("; "));
    }
    assert!(results.iter().all(|r| r.problems.is_empty()));
}

/// An eviction that the server accepts and never answers: the client's time
/// limit (30 s, the one every request has) ends it, the agent says so, backs off
/// and evicts on a later attempt.
#[tokio::test(start_paused = true)]
async fn an_eviction_that_is_never_answered_times_out_and_is_retried() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    s.fake
        .fail_next(Call::Eviction.matcher(), FaultResponse::NeverAnswer, 1);
    let agent = vtime::agent(&s, "placeholder-0", &env(&[]));
    let hung = vtime::request(&s, Duration::from_secs(15), |r| {
        r.is_eviction() && r.status == 0
    })
    .await
    .unwrap_or_else(|| panic!("the eviction never came:\n{}", logs.text()));
    assert!(
        logs.show("no answer within 30s", Duration::from_secs(31))
            .await,
        "no word of the unanswered eviction within the request timeout:\n{}",
        logs.text()
    );
    let done = vtime::request(&s, Duration::from_secs(600), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await
    .unwrap_or_else(|| panic!("no eviction after the timeout:\n{}", logs.text()));
    assert!(done.at > hung.at);
    drop(agent);
}

/// A node list that the server accepts and never answers (a hung apiserver, or
/// a pooled connection to a dead peer): kube sets no read timeout, so without
/// the client's own time limit the node watcher waited forever, silently. Now
/// it gives up after the request timeout (30 s), says so, lists again after
/// its backoff, and sees the node the server added meanwhile.
#[tokio::test(start_paused = true)]
async fn a_list_that_is_never_answered_times_out_and_is_retried() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let node_list =
        |r: &RecordedRequest| r.method == "GET" && r.path == "/api/v1/nodes" && !r.watch;
    s.fake.fail_next(
        Matcher::custom(move |r| r.method == "GET" && r.path == "/api/v1/nodes" && !r.watch),
        FaultResponse::NeverAnswer,
        1,
    );
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_LOG_LEVEL", "info"),
            ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
        ],
    );
    let hung = vtime::request(&s, Duration::from_secs(10), |r| {
        node_list(r) && r.status == 0
    })
    .await
    .unwrap_or_else(|| panic!("the node list never came:\n{}", logs.text()));
    // Served from the retry on: the agent must come to see it.
    s.fake.add_node(NodeBuilder::new("late").ready(true));
    let nodes = s.fake.nodes().len();
    // The request timeout (30 s), then the log line.
    assert!(
        logs.show("list failed, retrying", Duration::from_secs(31))
            .await,
        "no word of the unanswered node list within the request timeout:\n{}",
        logs.text()
    );
    assert!(
        logs.text().contains("no answer within 30s"),
        "{}",
        logs.text()
    );
    // The first backoff step is 0.5-1 s.
    let retry = vtime::request(&s, Duration::from_secs(2), |r| {
        node_list(r) && r.status == 200
    })
    .await
    .unwrap_or_else(|| panic!("no second node list after the backoff:\n{}", logs.text()));
    assert!(retry.at > hung.at);
    assert!(
        logs.show("watching nodes", Duration::from_secs(2)).await,
        "{}",
        logs.text()
    );
    let seen = logs
        .text()
        .lines()
        .find(|l| l.contains("watching nodes"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(
        seen.contains(&format!("count={nodes}")),
        "the agent's first node view has all {nodes} nodes, the late one too: {seen}"
    );
    assert!(agent.is_running(), "{}", logs.text());
}

// ---------------------------------------------------------------------------
// Credentials, server text, answer sizes, a Status in a 200, a future start
// ---------------------------------------------------------------------------

fn unauthorized() -> FaultResponse {
    FaultResponse::failure(401, "Unauthorized", "Unauthorized")
}

/// A 401 means expired or rotated credentials (kube reads a token file again
/// within a minute): the own-pod GET and the eviction are retried on the
/// transient backoff (0.5-1 s doubling), not the 5-10 minutes of a 403, and the
/// hint names the credentials, not the RBAC. Four 401s on each took the old
/// code past 5 minutes.
#[tokio::test(start_paused = true)]
async fn a_401_is_retried_on_the_transient_backoff() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    s.fake
        .fail_next(Call::GetOwnPod.matcher(), unauthorized(), 4);
    s.fake
        .fail_next(Call::Eviction.matcher(), unauthorized(), 4);
    let started = tokio::time::Instant::now();
    let agent = vtime::agent(&s, "placeholder-0", &env(&[]));
    let done = vtime::request(&s, Duration::from_secs(120), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    assert!(
        done.is_some(),
        "no eviction within 120 s of four 401s on the GET and four on the eviction:\n{}",
        logs.text()
    );
    assert_eq!(s.fake.counters().faults_injected, 8, "{}", logs.text());
    let text = logs.text();
    assert!(text.contains("does not accept the credentials"), "{text}");
    assert!(!text.contains("bind the Role"), "{text}");
    assert!(!text.contains("retrying rarely"), "{text}");
    eprintln!("evicted {:?} after the start", started.elapsed());
    drop(agent);
}

/// An ERROR 403 inside an open node watch's stream is no answer about the
/// permission: the agent lists again (a list that is denied would be reported
/// then) and keeps its node view, instead of dropping it for 5-10 minutes with
/// a "cannot list/watch nodes" warning.
#[tokio::test(start_paused = true)]
async fn an_error_403_in_an_open_node_watch_lists_again_and_keeps_the_view() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let agent = vtime::agent(&s, "placeholder-0", &[("SELFDESTRUCT_MAX_LIFETIME", "1h")]);
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    let error = json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "nodes is forbidden: User \"system:serviceaccount:x:y\" cannot watch resource \"nodes\"",
        "reason": "Forbidden", "code": 403}});
    s.fake.fail_next(
        Call::NodeWatch.matcher(),
        FaultResponse::raw(200, format!("{error}\n")),
        1,
    );
    let lists = || s.fake.count_requests(|r| Call::NodeList.matches(r));
    let before = lists();
    s.fake.drop_watches();
    assert!(
        vtime::until(Duration::from_secs(30), || s
            .fake
            .counters()
            .faults_injected
            >= 1)
        .await,
        "the node watch was not re-opened:\n{}",
        logs.text()
    );
    assert!(
        vtime::until(Duration::from_secs(10), || lists() > before).await,
        "no node list after the ERROR 403:\n{}",
        logs.text()
    );
    vtime::pass(Duration::from_secs(5)).await;
    let text = logs.text();
    assert!(!text.contains("cannot list/watch nodes"), "{text}");
    assert!(agent.is_running(), "{text}");
}

/// Server text in the text log: a 500 body with a terminal escape and a CR LF
/// forges no line and writes no escape character; a 100 KB `Status` message
/// makes no 100 KB line (it is cut at 1 KiB, its length noted). The eviction
/// is retried and done.
#[tokio::test(start_paused = true)]
async fn server_text_is_escaped_and_cut_in_the_log() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    s.fake.fail_next(
        Call::Eviction.matcher(),
        FaultResponse::raw(500, "\x1b[31mboom\r\nInjected: log line"),
        1,
    );
    let long = "y".repeat(100_000);
    s.fake.fail_next(
        Call::GetOwnPod.matcher(),
        FaultResponse::failure(500, "InternalError", &long),
        1,
    );
    let agent = vtime::agent(&s, "placeholder-0", &env(&[]));
    let done = vtime::request(&s, Duration::from_secs(60), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    let text = logs.text();
    assert!(done.is_some(), "{text}");
    assert_eq!(s.fake.counters().faults_injected, 2, "{text}");
    assert!(!text.contains('\x1b'), "a raw escape character in the log");
    assert!(!text.contains('\r'), "a raw carriage return in the log");
    assert!(
        !text.lines().any(|l| l.starts_with("Injected")),
        "a forged log line:\n{text}"
    );
    assert!(
        text.contains(r"\u{1b}[31mboom\r\nInjected: log line"),
        "{text}"
    );
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 4096, "a log line of {longest} bytes");
    assert!(text.contains("(100000 bytes in all)"), "{text}");
    drop(agent);
}

/// A non-watch answer longer than 4 MiB (here a 5 MiB own pod) is refused as a
/// transport error, logged, retried with backoff; the agent then starts on the
/// next answer. The old code read any size (a 1 GiB GET: 1 GiB of memory).
#[tokio::test(start_paused = true)]
async fn an_answer_over_the_size_cap_is_refused_and_retried() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let pod = s.fake.get_pod(NS, "placeholder-0").expect("the pod");
    let mut big = serde_json::to_value(&pod).expect("JSON");
    big["metadata"]["annotations"] = json!({"padding": "x".repeat(5 << 20)});
    s.fake
        .fail_next(Call::GetOwnPod.matcher(), FaultResponse::json(200, big), 1);
    let agent = vtime::agent(&s, "placeholder-0", &env(&[]));
    assert!(
        logs.show(
            "answer refused: longer than 4194304 bytes",
            Duration::from_secs(10)
        )
        .await,
        "{}",
        logs.text()
    );
    let done = vtime::request(&s, Duration::from_secs(30), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    assert!(done.is_some(), "{}", logs.text());
    drop(agent);
}

/// A watch line longer than 4 MiB (here one 8 MiB line; in the field an endless
/// line at 20 MB/s, or a 300 MB event) ends the watch as a transport error: logged,
/// backed off, watched again. kube reads a line without a limit: the old code held
/// all of it (761 MiB after 40 s of an endless one) and then failed on its JSON.
#[tokio::test(start_paused = true)]
async fn a_watch_line_over_the_cap_ends_the_watch_and_watches_again() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let agent = vtime::agent(&s, "placeholder-0", &[("SELFDESTRUCT_MAX_LIFETIME", "1h")]);
    let mut line = vec![b'x'; 8 << 20];
    line.push(b'\n');
    let answer = FaultResponse::Respond {
        code: 200,
        body: fake_apiserver::FaultBody::Raw(line),
        headers: Vec::new(),
    };
    s.fake.fail_next(Call::SiblingWatch.matcher(), answer, 1);
    assert!(
        logs.show(
            "watch event refused: a line longer than 4194304 bytes",
            Duration::from_secs(30)
        )
        .await,
        "{}",
        logs.text()
    );
    let refused = s.fake.clock().instant();
    let again = vtime::request(&s, Duration::from_secs(60), |r| {
        Call::SiblingWatch.matches(r) && r.at > refused
    })
    .await;
    assert!(again.is_some(), "not watched again:\n{}", logs.text());
    assert!(agent.is_running());
}

/// An eviction answered 200 with a `Status` of `Failure`, code 429 (as an
/// aggregated server or a proxy may answer): the 429 it carries, as client-go
/// reads it. The agent backs off and evicts on a later try; the old code
/// logged "evicted own pod" and never tried again.
#[tokio::test(start_paused = true)]
async fn a_200_carrying_a_failure_status_is_the_error_it_carries() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": "TooManyRequests", "code": 429,
        "message": "Cannot evict pod as it would violate the pod's disruption budget."});
    s.fake.fail_next(
        Call::Eviction.matcher(),
        FaultResponse::json(200, status),
        1,
    );
    let agent = vtime::agent(&s, "placeholder-0", &env(&[]));
    let done = vtime::request(&s, Duration::from_secs(60), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    let text = logs.text();
    assert!(
        done.is_some(),
        "no eviction after the 200 with a 429 Status:\n{text}"
    );
    assert!(text.contains("outcome=\"busy\""), "{text}");
    assert!(text.contains("HTTP 429 TooManyRequests"), "{text}");
    assert_eq!(s.fake.count_requests(|r| r.is_eviction()), 2, "{text}");
    drop(agent);
}

/// A `startTime` a day ahead (a node clock ahead) no longer turns a 15 s
/// lifetime into a day: it counts from now, with one warning.
#[tokio::test(start_paused = true)]
async fn a_start_time_in_the_future_counts_from_now() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let day = k8s_openapi::jiff::SignedDuration::from_hours(24);
    let moved = s.fake.modify_pod(NS, "placeholder-0", |p| {
        let status = p.status.as_mut().expect("a status");
        let start = status.start_time.as_mut().expect("a start time");
        start.0 = start.0.checked_add(day).expect("a day later");
    });
    assert!(moved);
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "15s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "15s"),
        ],
    );
    let started = tokio::time::Instant::now();
    let done = vtime::request(&s, Duration::from_secs(60), |r| {
        accepted_removal(r, "placeholder-0")
    })
    .await;
    let text = logs.text();
    assert!(
        done.is_some(),
        "no eviction within 60 s of a 15 s lifetime:\n{text}"
    );
    assert!(started.elapsed() >= Duration::from_secs(14), "{text}");
    assert_eq!(
        text.matches("start time is in the future").count(),
        1,
        "{text}"
    );
    drop(agent);
}

// ---------------------------------------------------------------------------
// Scale: many agents, one server, a burst of node events
// ---------------------------------------------------------------------------

/// 100 agents, in-process on one thread: about 6 s of wall time here (200
/// take about 20 s: every pod change goes to every agent's sibling watch).
/// `SELFDESTRUCT_TEST_AGENTS=200` runs the full fleet.
fn fleet_size() -> usize {
    std::env::var("SELFDESTRUCT_TEST_AGENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

#[tokio::test(start_paused = true)]
async fn many_agents_through_a_burst_of_node_events_stay_gentle_and_move_one_at_a_time() {
    let (_logs, _guard) = Logs::capture_at(tracing::level_filters::LevelFilter::WARN);
    let t = Instant::now();
    let n_agents = fleet_size();
    let s = vtime::placeholders(n_agents as i32).await;
    let quiet: &[(&str, &str)] = &[
        ("SELFDESTRUCT_LOG_LEVEL", "warn"),
        ("SELFDESTRUCT_NODE_SETTLE", "1s"),
        ("SELFDESTRUCT_MOVE_JITTER", "2s"),
    ];
    // Start them 50 at a time, each batch once the previous one is watching.
    let mut agents: Vec<vtime::Agent> = Vec::with_capacity(n_agents);
    for batch in (0..n_agents).collect::<Vec<_>>().chunks(50) {
        for i in batch {
            agents.push(vtime::agent(&s, &format!("placeholder-{i}"), quiet));
        }
        let want = 2 * agents.len();
        assert!(
            vtime::until(Duration::from_secs(15), || s.fake.open_watches() >= want).await,
            "{} of {want} watches open",
            s.fake.open_watches()
        );
    }
    let startup = t.elapsed();
    let start_reqs = s.fake.requests().len();
    // The test plays the StatefulSet and its budget (maxUnavailable 1): an evicted
    // placeholder comes back under its name, Pending for a second, then Running and
    // Ready; while one is away, an eviction gets the budget's 429.
    let away = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let budget = away.clone();
    let refused = move |r: &fake_apiserver::RequestInfo| {
        r.path.ends_with("/eviction") && budget.swap(true, std::sync::atomic::Ordering::SeqCst)
    };
    let refusal = FaultResponse::captured("eviction-429-pdb.json");
    s.fake
        .fail_next(Matcher::custom(refused), refusal, usize::MAX);
    let template = fake_apiserver::PodTemplate::placeholder("placeholder", "1", "4Gi");
    let mut returning: Vec<(String, tokio::time::Instant)> = Vec::new();
    // The burst: five nodes join NotReady, turn Ready, get labels and images.
    let burst = s.fake.clock().instant();
    for n in 0..5 {
        s.fake.add_node(
            NodeBuilder::new(&format!("fresh-{n}"))
                .cpu("256")
                .memory("1Ti")
                .ready(false),
        );
    }
    for n in 0..5 {
        s.fake.set_node_ready(&format!("fresh-{n}"), true);
    }
    for round in 0..4 {
        for n in 0..5 {
            s.fake.modify_node(&format!("fresh-{n}"), |node| {
                let labels = node.metadata.labels.get_or_insert_with(Default::default);
                labels.insert("round".into(), round.to_string());
            });
        }
    }
    // Watch the PDB's view: how many placeholders are away at once.
    let window = Duration::from_secs(8);
    let mut max_away = 0;
    let mut away_seen = BTreeMap::new();
    while s.fake.clock().instant() < burst + window {
        let now = tokio::time::Instant::now();
        for i in 0..n_agents {
            let name = format!("placeholder-{i}");
            if s.fake.get_pod(NS, &name).is_none() {
                let mut successor = template.running_pod(NS, &name, "", s.fake.clock().wall());
                let status = successor.status.as_mut().expect("a status");
                status.phase = Some("Pending".into());
                status.conditions = None;
                s.fake.add_pod(successor);
                returning.push((name, now + Duration::from_secs(1)));
            }
        }
        for (name, _) in returning.iter().filter(|(_, at)| *at <= now) {
            let running = template.running_pod(NS, name, "fresh-0", s.fake.clock().wall());
            s.fake.modify_pod(NS, name, |p| {
                (p.spec, p.status) = (running.spec, running.status)
            });
            away.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        returning.retain(|(_, at)| *at > now);
        let pods = s.fake.pods(NS);
        let healthy = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|st| st.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        let away = n_agents - healthy.min(n_agents);
        max_away = max_away.max(away);
        *away_seen.entry(away).or_insert(0u32) += 1;
        vtime::pass(Duration::from_millis(50)).await;
    }
    let reqs: Vec<RecordedRequest> = s
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.at >= burst)
        .collect();
    let secs = per_second(&reqs, burst, window.as_secs());
    let peak = secs.iter().copied().max().unwrap_or(0);
    let accepted: Vec<&RecordedRequest> = reqs
        .iter()
        .filter(|r| r.is_eviction() && r.status == 201)
        .collect();
    let refused = reqs
        .iter()
        .filter(|r| r.is_eviction() && r.status == 429)
        .count();
    let mut moved: Vec<&str> = accepted.iter().map(|r| r.path.as_str()).collect();
    moved.sort_unstable();
    let distinct = {
        let mut m = moved.clone();
        m.dedup();
        m.len()
    };
    // (An agent that panicked has ended.)
    let running = agents.iter().filter(|a| a.is_running()).count();
    eprintln!(
        "{n_agents} agents in-process started in {startup:?} of wall time ({start_reqs} requests); burst of 25 node events:\n  \
         requests per second {secs:?} (peak {peak}/s, {} in {window:?})\n  \
         evictions accepted {}, refused by the PDB {refused}; placeholders away at once: max {max_away} ({away_seen:?})\n  \
         {running} agents running; test took {:?}",
        reqs.len(),
        accepted.len(),
        t.elapsed()
    );
    assert_eq!(running, n_agents, "every agent keeps running");
    assert!(!accepted.is_empty(), "the burst moved placeholders");
    assert_eq!(
        distinct,
        accepted.len(),
        "a placeholder moved twice: {moved:?}"
    );
    assert!(
        max_away <= 1,
        "more than one placeholder away at once ({max_away}): evictions not serialised"
    );
    // Accepted evictions are serialised: each one after the previous pod is back.
    for w in accepted.windows(2) {
        assert!(
            w[1].at - w[0].at >= Duration::from_millis(200),
            "two evictions accepted within {:?}",
            w[1].at - w[0].at
        );
    }
    // A hot loop of 200 agents would be thousands per second; the node events
    // themselves cost nothing (watches), each move costs an Event, an eviction
    // and the siblings' reactions.
    assert!(
        peak <= 3 * n_agents,
        "peak {peak} requests/s from {n_agents} agents: {secs:?}"
    );
    for a in agents {
        assert_eq!(a.stop().await, 0);
    }
}

// ---------------------------------------------------------------------------
// Huge node objects (the real binary: its peak memory)
// ---------------------------------------------------------------------------

/// A field of /proc/PID/status in KiB (`VmHWM:`, the peak resident memory).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_default();
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The label of every big node the placeholder's nodeSelector reads.
const READ_LABEL: &str = "k8s.example.com/label-00007";

/// `count` nodes named `prefix-N` of `labels` labels (about 34 bytes of JSON each)
/// and, if not 0, one annotation of `annotation` bytes.
fn big_nodes(prefix: &str, count: usize, labels: usize, annotation: usize) -> Vec<NodeBuilder> {
    let labels: BTreeMap<String, String> = (0..labels)
        .map(|l| (format!("k8s.example.com/label-{l:05}"), "x".to_string()))
        .collect();
    (0..count)
        .map(|i| {
            let mut n = NodeBuilder::new(&format!("{prefix}-{i:03}"));
            n.labels = labels.clone();
            if annotation > 0 {
                n.annotations
                    .insert("example.com/blob".into(), "a".repeat(annotation));
            }
            n
        })
        .collect()
}

/// Issue 46, items 11 and 12: 110 nodes of 10,000 labels each (a 40 MB list page) took
/// the agent to 212 MiB, 300 nodes of 1,500 labels and a 180 KB annotation each to
/// 96 MiB. A node's metadata is bounded as it is decoded (the labels the placement
/// rules read are kept, the rest and the annotations dropped) and a list page over
/// 8 MiB is asked for again smaller: the agent's peak resident memory (VmHWM, printed)
/// stays under 64 MiB. The nodes are old ones; then two such new nodes join, read in
/// full, and the agent moves to one: the label it reads is kept (the placeholder's
/// nodeSelector names it).
#[test]
fn huge_node_labels_and_annotations_keep_the_agent_under_64_mib() {
    for (what, count, labels, annotation) in [
        ("110 nodes of 10,000 labels", 110, 10_000, 0),
        (
            "300 nodes of 1,500 labels and a 180 KB annotation",
            300,
            1_500,
            180_000,
        ),
    ] {
        let mut nodes = big_nodes("big", count, labels, annotation);
        for n in &mut nodes {
            n.created = Some(std::time::SystemTime::now() - Duration::from_secs(3600));
        }
        let template = fake_apiserver::PodTemplate::placeholder("placeholder", "1", "4Gi")
            .node_selector(READ_LABEL, "x");
        let s = Scene::with_nodes(1, &nodes, template);
        drop(nodes);
        let env = [
            ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
            ("SELFDESTRUCT_NODE_SETTLE", "1s"),
        ];
        let mut agent = s.agent("placeholder-0", &env);
        let listed = format!("count={count}");
        let seen = wait_until(Duration::from_secs(120), || {
            let log = agent.log();
            log.lines()
                .any(|l| l.contains("watching nodes") && l.contains(&listed))
        });
        // The second of the placeholder's scheduling over: the new nodes are newer.
        std::thread::sleep(Duration::from_millis(1100));
        for n in big_nodes("new", 2, labels, annotation) {
            s.fake.add_node(n);
        }
        // A deadline, not a wait: the eviction ends it. On 2 loaded cores (load average 27)
        // the decode of these nodes' lists and full reads took the agent past 60 s.
        let moved = s
            .fake
            .wait_for_request(|r| r.is_eviction(), Duration::from_secs(180));
        let peak = status_kib(agent.pid(), "VmHWM:");
        let [now, anon, file] =
            ["VmRSS:", "RssAnon:", "RssFile:"].map(|f| status_kib(agent.pid(), f));
        println!(
            "{what}: the agent's VmHWM {peak} KiB; after VmRSS {now} KiB \
             (RssAnon {anon}, RssFile {file})"
        );
        assert!(seen, "{what}: no view of {count} nodes:\n{}", agent.log());
        assert!(
            moved.is_some() && agent.log().contains("moving: node new-"),
            "{what}: no move to a new node:\n{}",
            agent.log()
        );
        assert!(agent.is_running(), "{}", agent.log());
        assert!(peak <= 64 << 10, "{what}: VmHWM {peak} KiB");
    }
}

/// Issue 46, item 11: a list page just under the 8 MiB cap, of 20 nodes with 34,000
/// labels of 12 bytes of JSON each (a hostile server's answer), took some 100 MiB to
/// decode: the page cap alone does not bound what its labels cost once decoded, the
/// decode does (it keeps the labels the placement rules read). VmHWM printed, under
/// 64 MiB.
#[test]
fn a_page_of_tiny_labels_under_the_cap_keeps_the_agent_under_64_mib() {
    let template = fake_apiserver::PodTemplate::placeholder("placeholder", "1", "4Gi")
        .node_selector(READ_LABEL, "x");
    let s = Scene::with_nodes(1, &big_nodes("big", 1, 8, 0), template);
    let labels: String = (0..34_000).map(|l| format!("\"k{l:05}\":\"\",")).collect();
    let items: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "{{\"metadata\":{{\"name\":\"tiny-{i:02}\",\"resourceVersion\":\"1\",\
                 \"creationTimestamp\":\"2020-01-01T00:00:00Z\",\"labels\":{{{labels}\"{READ_LABEL}\":\"x\"}}}}}}"
            )
        })
        .collect();
    let page = format!(
        "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\
         \"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[{}]}}",
        s.fake.resource_version(),
        items.join(",")
    );
    assert!(
        page.len() > 8_000_000 && page.len() < 8 << 20,
        "{} bytes",
        page.len()
    );
    let metadata_list = |r: &fake_apiserver::RequestInfo<'_>| {
        r.path == "/api/v1/nodes" && !r.watch && !r.query.contains("fieldSelector")
    };
    s.fake.fail_next(
        Matcher::custom(metadata_list),
        FaultResponse::raw(200, page),
        1,
    );
    let mut agent = s.agent("placeholder-0", &[("SELFDESTRUCT_MAX_LIFETIME", "1h")]);
    let seen = wait_until(Duration::from_secs(120), || {
        let log = agent.log();
        log.lines()
            .any(|l| l.contains("watching nodes") && l.contains("count=20"))
    });
    let peak = status_kib(agent.pid(), "VmHWM:");
    let file = status_kib(agent.pid(), "RssFile:");
    println!("a page of 680,000 tiny labels: the agent's VmHWM {peak} KiB (RssFile {file})");
    assert!(seen, "no view of the 20 nodes:\n{}", agent.log());
    assert!(agent.is_running(), "{}", agent.log());
    assert!(peak <= 64 << 10, "VmHWM {peak} KiB");
}

// ---------------------------------------------------------------------------
// Logs and tokens
// ---------------------------------------------------------------------------

/// The real binary's log set-up: a node 403 gets one line, the agent's own
/// ("cannot list/watch nodes"), and not also kube's raw "watch list error with
/// 403: Api(Status ...)" (kube's watcher logs it before it hands the error on).
#[test]
fn a_node_403_is_logged_by_the_agent_and_not_by_kube_too() {
    let s = Scene::placeholders(1);
    let token = s.token_for("placeholder-0");
    common::cluster::forbid(&s.fake, &token, |r| r.path.starts_with("/api/v1/nodes"));
    let kubeconfig = s.kubeconfig(&token);
    let mut agent = s.agent_with_kubeconfig(
        "placeholder-0",
        &kubeconfig,
        &[("SELFDESTRUCT_MAX_LIFETIME", "1h")],
    );
    assert!(
        agent.wait_for_log("cannot list/watch nodes", Duration::from_secs(15)),
        "{}",
        agent.log()
    );
    let (status, _) = agent.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", agent.log());
    let log = agent.log();
    assert!(!log.contains("error with 403"), "{log}");
    assert!(!log.contains("error 403:"), "{log}");
    assert_eq!(agent.count_log("cannot list/watch nodes"), 1, "{log}");
}

/// A token rotated on disk (a kubeconfig `tokenFile`, read as the in-cluster
/// token is): the own-pod GET answered 401 with the old token is retried on
/// the transient backoff with a client built anew, which reads the file again
/// (kube alone would read it once the token it holds is 50 s old), and the
/// agent starts and moves with the new token at its next try. Real time and
/// the real binary: kube's token cache runs on the system clock. The old code
/// retried a 401 after 5-10 minutes.
#[test]
fn a_token_rotated_on_disk_is_used_at_the_next_try() {
    let s = Scene::placeholders(1);
    let dir = s.home.join("rotated");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "an-expired-token").expect("the token");
    let kubeconfig = dir.join("kubeconfig");
    let user = format!("tokenFile: {}", token_file.display());
    std::fs::write(&kubeconfig, kubeconfig_with_user(&s.fake.url(), &user, NS))
        .expect("the kubeconfig");
    let lifetime = [
        ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
        ("SELFDESTRUCT_MAX_LIFETIME", "1s"),
    ];
    let mut agent = s.agent_with_kubeconfig("placeholder-0", &kubeconfig, &lifetime);
    assert!(
        agent.wait_for_log("cannot read own pod", Duration::from_secs(15)),
        "{}",
        agent.log()
    );
    let rotated = Instant::now();
    s.fake.add_token("the-rotated-token");
    std::fs::write(&token_file, "the-rotated-token").expect("the new token");
    let moved = s.fake.wait_for_request(
        |r| accepted_removal(r, "placeholder-0"),
        Duration::from_secs(30),
    );
    assert!(
        moved.is_some(),
        "no eviction with the rotated token:\n{}",
        agent.log()
    );
    eprintln!(
        "the rotated token was used {:?} after it was written",
        rotated.elapsed()
    );
    assert!(!agent.log().contains("retrying rarely"), "{}", agent.log());
    let (status, _) = agent.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", agent.log());
}

/// An `exec` plugin's token refused (401) is asked for again at the next try:
/// the plugin runs again (as client-go does) and the agent moves with its new
/// token. The old code (kube) held a token without an expiry for good.
#[test]
fn an_exec_plugins_refused_token_is_asked_for_again() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scene::placeholders(1);
    let dir = s.home.join("exec-rotated");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "an-expired-token").expect("the token");
    let plugin = dir.join("plugin.sh");
    let script = format!(
        "#!/bin/sh\nprintf '{{\"apiVersion\": \"client.authentication.k8s.io/v1\", \
         \"kind\": \"ExecCredential\", \"status\": {{\"token\": \"%s\"}}}}' \"$(cat {})\"\n",
        token_file.display()
    );
    std::fs::write(&plugin, script).expect("the plugin");
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_with_user(&s.fake.url(), &exec_user(&plugin), NS),
    )
    .expect("the kubeconfig");
    let mut agent = s.agent_with_kubeconfig("placeholder-0", &kubeconfig, TIMER);
    assert!(
        agent.wait_for_log("cannot read own pod", Duration::from_secs(15)),
        "{}",
        agent.log()
    );
    s.fake.add_token("the-new-token");
    std::fs::write(&token_file, "the-new-token").expect("the new token");
    let moved = s.fake.wait_for_request(
        |r| accepted_removal(r, "placeholder-0"),
        Duration::from_secs(30),
    );
    assert!(
        moved.is_some(),
        "no eviction with the new token:\n{}",
        agent.log()
    );
    let (status, _) = agent.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", agent.log());
}

/// A token file turned into a FIFO nobody writes (or a hung mount) while the
/// agent runs: the read after a 401 waits on a blocking thread, and SIGTERM
/// still exits 0 at once. The old code read it on the thread that serves the
/// signals, and ignored SIGTERM.
#[test]
fn sigterm_while_a_token_file_turned_fifo_is_read_again_exits_0() {
    use std::os::unix::fs::OpenOptionsExt;
    let s = Scene::placeholders(1);
    let dir = s.home.join("fifo-token");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "a-token-the-server-refuses").expect("the token");
    let kubeconfig = dir.join("kubeconfig");
    let user = format!("tokenFile: {}", token_file.display());
    std::fs::write(&kubeconfig, kubeconfig_with_user(&s.fake.url(), &user, NS))
        .expect("the kubeconfig");
    let mut agent = s.agent_with_kubeconfig("placeholder-0", &kubeconfig, TIMER);
    assert!(
        agent.wait_for_log("cannot read own pod", Duration::from_secs(15)),
        "{}",
        agent.log()
    );
    std::fs::remove_file(&token_file).expect("rm");
    mkfifo(&token_file);
    // The next try reads it again (after the 401): a writer can then open it
    // without waiting, and writes nothing, so the read goes on.
    let mut writer = None;
    let reading = wait_until(Duration::from_secs(30), || {
        writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&token_file)
            .ok();
        writer.is_some()
    });
    assert!(reading, "the FIFO was never read:\n{}", agent.log());
    let (status, _) = agent.terminate();
    drop(writer);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", agent.log());
}

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

#[test]
fn every_invalid_node_gate_setting_exits_2_naming_the_variable() {
    let table: &[(&[(&str, &str)], &str)] = &[
        (&[], "NODE_NAME"),
        (&[("NODE_NAME", "")], "NODE_NAME"),
        (&[("NODE_NAME", "   ")], "NODE_NAME"),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_TAINT", "a b")],
            "SELFDESTRUCT_GATE_TAINT",
        ),
        (
            &[
                ("NODE_NAME", "n1"),
                ("SELFDESTRUCT_GATE_TAINT", "key=value"),
            ],
            "SELFDESTRUCT_GATE_TAINT",
        ),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_TAINT", "!key")],
            "SELFDESTRUCT_GATE_TAINT",
        ),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_TAINT", "")],
            "SELFDESTRUCT_GATE_TAINT",
        ),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_TIMEOUT", "soon")],
            "SELFDESTRUCT_GATE_TIMEOUT",
        ),
        (&[("NODE_NAME", "n?x=1")], "NODE_NAME"),
        (&[("NODE_NAME", "../pods/x")], "NODE_NAME"),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_TIMEOUT", "30")],
            "SELFDESTRUCT_GATE_TIMEOUT",
        ),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_POLL", "1")],
            "SELFDESTRUCT_GATE_POLL",
        ),
        (
            &[("NODE_NAME", "n1"), ("SELFDESTRUCT_GATE_POLL", "-5s")],
            "SELFDESTRUCT_GATE_POLL",
        ),
        (
            &[
                ("NODE_NAME", "n1"),
                ("SELFDESTRUCT_REQUIRED_IMAGES", "UPPER/case"),
            ],
            "SELFDESTRUCT_REQUIRED_IMAGES",
        ),
        (
            &[
                ("NODE_NAME", "n1"),
                ("SELFDESTRUCT_GATE_WARM_LABEL", "a/b/c"),
            ],
            "SELFDESTRUCT_GATE_WARM_LABEL",
        ),
    ];
    for (vars, name) in table {
        let (code, out) = run_program_to_exit(&gate_bin(), &[], vars);
        assert_eq!(code, Some(2), "{vars:?}: {out}");
        assert!(out.contains(name), "{vars:?}: must name {name}: {out}");
        assert!(
            out.contains("expected"),
            "{vars:?}: must give the form: {out}"
        );
    }
    // The same through flags.
    for (args, name) in [
        (&["--node-name="][..], "--node-name"),
        (&["--node-name=n1", "--gate-taint=a b"][..], "--gate-taint"),
        (
            &["--node-name=n1", "--gate-timeout=x"][..],
            "--gate-timeout",
        ),
        (&["--node-name=n1", "--gate-poll=1"][..], "--gate-poll"),
    ] {
        let (code, out) = run_program_to_exit(&gate_bin(), args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {out}");
        assert!(out.contains(name), "{args:?}: must name {name}: {out}");
    }
}

/// Durations the parser accepts but no clock can add (`300000000000y` fits a
/// u64 of seconds, not a SystemTime) must be refused naming the variable (the
/// binary then exits 2), or at worst be harmless; the agent must never panic on
/// them, also when a new node makes the settle/min-age/jitter arithmetic run.
#[tokio::test(start_paused = true)]
async fn absurd_durations_are_refused_or_harmless_never_a_crash() {
    const HUGE: &str = "300000000000y";
    let vars = [
        "SELFDESTRUCT_MAX_LIFETIME",
        "SELFDESTRUCT_MIN_AGE",
        "SELFDESTRUCT_NODE_SETTLE",
        "SELFDESTRUCT_MOVE_JITTER",
    ];
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(vars.len() as i32).await;
    let mut agents = Vec::new();
    for (i, var) in vars.iter().enumerate() {
        match vtime::try_config(&[(var, HUGE)]) {
            Err(e) => assert!(
                e.contains(var),
                "{var}={HUGE}: refused without naming it: {e}"
            ),
            Ok(_) => agents.push((
                *var,
                vtime::agent(&s, &format!("placeholder-{i}"), &[(var, HUGE)]),
            )),
        }
    }
    assert!(
        vtime::until(Duration::from_secs(10), || {
            s.fake.open_watches() >= 2 * agents.len()
        })
        .await,
        "{}",
        logs.text()
    );
    eprintln!(
        "absurd durations: {:?} accepted",
        agents.iter().map(|(v, _)| *v).collect::<Vec<_>>()
    );
    s.fake.add_node(NodeBuilder::new("fresh").ready(true));
    vtime::pass(Duration::from_secs(3600)).await;
    let failures: Vec<String> = agents
        .iter()
        .filter(|(_, a)| !a.is_running())
        .map(|(var, _)| format!("{var}={HUGE}: the agent ended"))
        .collect();
    assert!(
        failures.is_empty(),
        "an absurd duration must be refused naming the variable, or be harmless: {failures:#?}\n{}",
        logs.text()
    );
}

// ---------------------------------------------------------------------------
// Lists and watches that never settle (issue 17, items 1 and 7)
// ---------------------------------------------------------------------------

/// How a node list or watch misbehaves, every time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endless {
    /// Every watch request is answered HTTP 410 Gone.
    GoneOnOpen,
    /// Every watch answers 200 with one ERROR event, code 410.
    GoneInStream,
    /// Every list page carries the same `continue` token (and the same node).
    ContinueForever,
}

/// The window over which LIST requests are counted, from the first faulted request.
const WINDOW: Duration = Duration::from_secs(16);

async fn run_endless(case: Endless) -> CaseResult {
    let t = Instant::now();
    let mut problems = Vec::new();
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(1).await;
    let gone = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410});
    let (matcher, response) = match case {
        Endless::GoneOnOpen => (
            Matcher::custom(|r| r.path == "/api/v1/nodes" && r.watch),
            FaultResponse::json(410, gone),
        ),
        Endless::GoneInStream => (
            Matcher::custom(|r| r.path == "/api/v1/nodes" && r.watch),
            FaultResponse::raw(
                200,
                format!("{}\n", json!({"type": "ERROR", "object": gone})).into_bytes(),
            ),
        ),
        Endless::ContinueForever => {
            let node = json!({"metadata": {"name": "node-0", "resourceVersion": "5"}});
            (
                Matcher::custom(|r| r.path == "/api/v1/nodes" && !r.watch),
                FaultResponse::json(
                    200,
                    json!({"kind": "NodeList", "apiVersion": "v1",
                           "metadata": {"resourceVersion": "5", "continue": "the-same-token"},
                           "items": [node]}),
                ),
            )
        }
    };
    s.fake.fail_next(matcher, response, 1_000_000);
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_LOG_LEVEL", "info"),
            ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
        ],
    );
    let Some(first) =
        vtime::request(&s, Duration::from_secs(15), |r| r.path == "/api/v1/nodes").await
    else {
        problems.push(format!("no node request:\n{}", logs.text()));
        return CaseResult {
            name: format!("{case:?}"),
            problems,
            took: t.elapsed(),
        };
    };
    // The window is counted from the first faulted request.
    vtime::until(WINDOW, || s.fake.clock().instant() >= first.at + WINDOW).await;
    let lists = s.fake.count_requests(|r| {
        r.path == "/api/v1/nodes" && !r.watch && r.at >= first.at && r.at < first.at + WINDOW
    });
    eprintln!("{case:?}: {lists} node LIST requests in {WINDOW:?}");
    // Backing off from 0.5-1 s and doubling, at most 5 list cycles fit in 16 s
    // (0.5 + 1 + 2 + 4 + 8 = 15.5 s); a re-list every 1-2 s makes 8 or more. A
    // list that pages forever makes hundreds; abandoned at its second page, each
    // cycle is 2 requests.
    let bound = if case == Endless::ContinueForever {
        12
    } else {
        6
    };
    if lists > bound {
        problems.push(format!(
            "{lists} LIST requests in {WINDOW:?} (at most {bound}): no backoff"
        ));
    }
    if case == Endless::ContinueForever && !logs.text().contains("never ends") {
        problems.push("no log line about the endless list".into());
    }
    if !agent.is_running() {
        problems.push("died".into());
    }
    if !problems.is_empty() {
        problems.push(format!("log:\n{}", logs.text()));
    }
    CaseResult {
        name: format!("{case:?}"),
        problems,
        took: t.elapsed(),
    }
}

#[tokio::test(start_paused = true)]
async fn lists_and_watches_that_never_settle_back_off() {
    let mut results = Vec::new();
    for case in [
        Endless::GoneOnOpen,
        Endless::GoneInStream,
        Endless::ContinueForever,
    ] {
        results.push(run_endless(case).await);
    }
    for r in &results {
        eprintln!("{}: {:?} {}", r.name, r.took, r.problems.join("; "));
    }
    assert!(results.iter().all(|r| r.problems.is_empty()));
}
