//! The agent against the fake API server: the lifetime timer, eviction and
//! deletion with the uid precondition, PDB 429s, every error path, dry run and
//! identity discovery run in-process on virtual time (`common::vtime`: "nothing
//! happens for N s" costs no wall time); the real binary for what needs a process
//! (signals and exit codes, the log format on stderr).

mod common;

use std::time::Duration;

use common::cluster::{NS, Scene, events_path, is_event_about};
use common::vtime::{self, Logs};
use common::*;
use fake_apiserver::{FaultResponse, Matcher, NodeBuilder, PodTemplate};

const TIMER_ONLY: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
    ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
    ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = TIMER_ONLY.to_vec();
    v.extend_from_slice(extra);
    v
}

#[tokio::test(start_paused = true)]
async fn evicts_itself_once_its_lifetime_is_up_with_its_uid() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(3).await;
    let uid = s.uid("placeholder-1");
    let agent = vtime::agent(&s, "placeholder-1", TIMER_ONLY);
    let ev = vtime::until_some(Duration::from_secs(15), || {
        s.fake.find_request(|r| r.is_eviction())
    })
    .await
    .unwrap_or_else(|| panic!("no eviction:\n{}", logs.text()));
    assert_eq!(
        ev.path,
        format!("/api/v1/namespaces/{NS}/pods/placeholder-1/eviction")
    );
    let body = ev.body.clone().expect("eviction body");
    assert_eq!(body["deleteOptions"]["preconditions"]["uid"], uid.as_str());
    assert_eq!(body["kind"], "Eviction");
    assert_eq!(ev.status, 201, "{}", logs.text());
    // The Event says why.
    let events = s.fake.events(NS);
    let event = events
        .iter()
        .find(|e| e["regarding"]["name"] == "placeholder-1")
        .expect("an Event about the own pod");
    assert_eq!(event["reason"], "SelfDestruct");
    assert!(
        event["note"]
            .as_str()
            .unwrap_or("")
            .starts_with("lifetime "),
        "{event}"
    );
    assert_eq!(event["regarding"]["uid"], uid.as_str());
    s.assert_only_own_mutations(&[("placeholder-1", &uid)]);
    assert!(
        vtime::until(Duration::from_secs(2), || logs
            .text()
            .contains("waiting for SIGTERM"))
        .await,
        "{}",
        logs.text()
    );
    // Long after, it still pauses and has not acted again.
    vtime::pass(Duration::from_secs(600)).await;
    assert!(agent.is_running(), "keeps pausing after the eviction");
    assert_eq!(s.evictions().len(), 1, "exactly one eviction");
    assert_eq!(agent.stop().await, 0);
}

/// zero-to-jupyterhub's own budget over the placeholders next to ours: the
/// API server refuses every eviction with HTTP 500 (`eviction-500-two-pdbs.json`). The
/// agent says so (a warning and a Warning Event naming the problem and the fix) and
/// retries rarely, instead of backing off on a 5xx in silence.
#[tokio::test(start_paused = true)]
async fn two_budgets_over_the_pod_are_named_in_a_warning_and_an_event() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    for (name, selector) in [
        ("placeholder", "placeholder"),
        ("user-placeholder", "placeholder"),
    ] {
        s.fake.add_pdb(serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/instance": selector}}}
        })).expect("a budget"));
    }
    s.fake.fail_next(
        Matcher::custom(|r| r.path.ends_with("/eviction")),
        FaultResponse::captured("eviction-500-two-pdbs.json"),
        usize::MAX,
    );
    let uid = s.uid("placeholder-0");
    // Without the optional permission to list budgets.
    let budgets = |r: &fake_apiserver::RequestInfo| r.path.ends_with("/poddisruptionbudgets");
    let agent = vtime::agent_denied(&s, "placeholder-0", budgets, TIMER_ONLY);
    let ev = vtime::request(&s, Duration::from_secs(15), |r| r.is_eviction())
        .await
        .unwrap_or_else(|| panic!("no eviction:\n{}", logs.text()));
    assert_eq!(ev.status, 500, "{}", logs.text());
    assert!(
        logs.show(
            "two or more PodDisruptionBudgets select it",
            Duration::from_secs(10)
        )
        .await,
        "{}",
        logs.text()
    );
    let log = logs.of("placeholder-0");
    assert!(log.contains("retrying rarely"), "{log}");
    assert!(log.contains("post-render.sh"), "{log}");
    assert!(
        !log.contains("retrying with backoff"),
        "not a plain 5xx: {log}"
    );
    let event = vtime::until_some(Duration::from_secs(10), || {
        s.fake.events(NS).into_iter().find(|e| {
            e["regarding"]["name"] == "placeholder-0"
                && e["reason"] == "MultiplePodDisruptionBudgets"
        })
    })
    .await
    .unwrap_or_else(|| panic!("no Warning Event:\n{}", logs.text()));
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["regarding"]["uid"], uid.as_str());
    let message = event["note"].as_str().unwrap_or_default();
    assert!(
        message.contains("two or more PodDisruptionBudgets select it")
            && message.contains(&format!("kubectl -n {NS} get poddisruptionbudgets")),
        "{message}"
    );
    // Nothing was evicted; the agent keeps running.
    assert_eq!(s.uid("placeholder-0"), uid);
    assert!(agent.is_running());
    // With the optional permission to list budgets, the warning names them.
    let _named = vtime::agent(&s, "placeholder-1", TIMER_ONLY);
    assert!(
        logs.show_of("placeholder-1", "select it", Duration::from_secs(20))
            .await,
        "{}",
        logs.text()
    );
    let log = logs.of("placeholder-1");
    assert!(
        log.contains("the PodDisruptionBudgets placeholder and user-placeholder select it")
            || log.contains("the PodDisruptionBudgets user-placeholder and placeholder select it"),
        "{log}"
    );
    let uid1 = s.uid("placeholder-1");
    s.assert_only_own_mutations(&[("placeholder-0", &uid), ("placeholder-1", &uid1)]);
}

#[tokio::test(start_paused = true)]
async fn delete_mode_deletes_with_the_uid_precondition() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let uid = s.uid("placeholder-0");
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[
            ("SELFDESTRUCT_MODE", "delete"),
            ("SELFDESTRUCT_GRACE_PERIOD", "3s"),
        ]),
    );
    let del = vtime::request(&s, Duration::from_secs(15), |r| r.is_pod_delete())
        .await
        .unwrap_or_else(|| panic!("no delete:\n{}", logs.text()));
    let body = del.body.clone().expect("delete options");
    assert_eq!(body["preconditions"]["uid"], uid.as_str());
    assert_eq!(body["gracePeriodSeconds"], 3);
    assert_eq!(del.status, 200);
    assert!(s.evictions().is_empty());
    s.assert_only_own_mutations(&[("placeholder-0", &uid)]);
}

#[tokio::test(start_paused = true)]
async fn a_grace_period_under_a_second_is_never_sent_as_a_force_deletion() {
    let (logs, _guard) = Logs::capture();
    // 0 through the API is a force deletion for pods (shared/k8s-fixtures): the
    // object goes at once and the StatefulSet may start the successor while the
    // old container still runs. Without the opt-in, 0 and 500ms are sent as 1.
    for (grace, force, want) in [("500ms", "false", 1), ("0", "false", 1), ("0", "true", 0)] {
        let s = vtime::placeholders(1).await;
        let _agent = vtime::agent(
            &s,
            "placeholder-0",
            &with(&[
                ("SELFDESTRUCT_MODE", "delete"),
                ("SELFDESTRUCT_GRACE_PERIOD", grace),
                ("SELFDESTRUCT_FORCE_DELETE", force),
            ]),
        );
        let del = vtime::request(&s, Duration::from_secs(15), |r| r.is_pod_delete())
            .await
            .unwrap_or_else(|| panic!("no delete:\n{}", logs.text()));
        let body = del.body.clone().expect("delete options");
        assert_eq!(body["gracePeriodSeconds"], want, "{grace} force={force}");
    }
}

#[tokio::test(start_paused = true)]
async fn lifetime_counts_from_the_pod_start_not_the_process_start() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    // The pod started an hour ago (the container restarted since): a 30m lifetime
    // is long over, so it fires after the short jitter instead of in 30 minutes.
    let hour_ago = s.fake.clock().wall() - Duration::from_secs(3600);
    s.fake.modify_pod(NS, "placeholder-0", |p| {
        if let Some(st) = p.status.as_mut() {
            st.start_time = Some(fake_apiserver::objects::time_of(hour_ago));
        }
    });
    let thirty_minutes = [
        ("SELFDESTRUCT_MIN_LIFETIME", "30m"),
        ("SELFDESTRUCT_MAX_LIFETIME", "40m"),
        ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
    ];
    let mut env = thirty_minutes.to_vec();
    env.push(("SELFDESTRUCT_MOVE_JITTER", "2s"));
    let _agent = vtime::agent(&s, "placeholder-0", &env);
    assert!(
        logs.show_of("placeholder-0", "moving in", Duration::from_secs(10))
            .await,
        "an expired lifetime arms a jittered move first:\n{}",
        logs.text()
    );
    let ev = vtime::request(&s, Duration::from_secs(10), |r| r.is_eviction()).await;
    assert!(ev.is_some(), "{}", logs.text());
    // The other pod started now: its 30-40m lifetime counts from now.
    let _fresh = vtime::agent(&s, "placeholder-1", &thirty_minutes);
    let own =
        |r: &fake_apiserver::RecordedRequest| r.is_eviction() && r.path.contains("placeholder-1");
    vtime::pass(Duration::from_secs(29 * 60)).await;
    assert_eq!(
        s.fake.count_requests(own),
        0,
        "{}",
        logs.of("placeholder-1")
    );
    assert!(
        vtime::request(&s, Duration::from_secs(12 * 60), own)
            .await
            .is_some(),
        "{}",
        logs.of("placeholder-1")
    );
}

#[tokio::test(start_paused = true)]
async fn a_pdb_429_is_retried_later_and_then_succeeds() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(3).await;
    // A sibling is not Ready: the PDB (maxUnavailable 1) refuses evictions.
    refuse_evictions(&s);
    // Sibling awareness off: the PDB alone serialises the moves.
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[("SELFDESTRUCT_SIBLING_SELECTOR", "none")]),
    );
    let refused = vtime::request(&s, Duration::from_secs(15), |r| {
        r.is_eviction() && r.status == 429
    })
    .await
    .unwrap_or_else(|| panic!("no 429:\n{}", logs.text()));
    assert!(
        logs.show("PodDisruptionBudget says not now", Duration::from_secs(2))
            .await
    );
    s.fake.clear_faults();
    let ok = vtime::request(&s, Duration::from_secs(30), |r| {
        r.is_eviction() && r.status == 201
    })
    .await
    .unwrap_or_else(|| panic!("never succeeded:\n{}", logs.text()));
    let waited = ok.at.duration_since(refused.at);
    assert!(
        waited >= Duration::from_secs(5),
        "a 429 backs off (BUSY: 5-10 s first): {waited:?}"
    );
    let attempts = s.evictions().len();
    assert!(attempts <= 4, "no hot loop on 429: {attempts} attempts");
}

/// The `SelfDestruct` Event records a move that happened: none while the
/// budget answers 429, one once the eviction is accepted (201), after it.
#[tokio::test(start_paused = true)]
async fn the_event_follows_the_accepted_eviction_and_a_429_posts_none() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(3).await;
    refuse_evictions(&s);
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[("SELFDESTRUCT_SIBLING_SELECTOR", "none")]),
    );
    let refused = |r: &fake_apiserver::RecordedRequest| r.is_eviction() && r.status == 429;
    let event = |r: &fake_apiserver::RecordedRequest| is_event_about(r, "placeholder-0");
    // Two refusals (the first attempt and a retry), and no Event.
    let refused_twice = || s.fake.count_requests(refused) >= 2;
    assert!(
        vtime::until(Duration::from_secs(60), refused_twice).await,
        "{}",
        logs.text()
    );
    assert_eq!(s.fake.count_requests(event), 0, "{}", logs.text());
    s.fake.clear_faults();
    let accepted = vtime::request(&s, Duration::from_secs(60), |r| {
        r.is_eviction() && r.status == 201
    })
    .await
    .unwrap_or_else(|| panic!("never accepted:\n{}", logs.text()));
    let posted = vtime::request(&s, Duration::from_secs(5), event)
        .await
        .unwrap_or_else(|| panic!("no Event after the eviction:\n{}", logs.text()));
    assert!(
        posted.at >= accepted.at,
        "the Event came before the eviction"
    );
    assert_eq!(s.fake.count_requests(event), 1, "{}", logs.text());
    let posted = s
        .fake
        .events(NS)
        .into_iter()
        .find(|e| e["regarding"]["name"] == "placeholder-0")
        .expect("the Event");
    assert_eq!(posted["reason"], "SelfDestruct");
    assert!(
        posted["note"]
            .as_str()
            .unwrap_or("")
            .starts_with("lifetime "),
        "{posted}"
    );
}

/// Every eviction is refused as a PodDisruptionBudget refuses it while a sibling is not
/// Ready (`eviction-429-pdb.json`), until `clear_faults`.
fn refuse_evictions(s: &Scene) {
    s.fake.fail_next(
        Matcher::custom(|r| r.path.ends_with("/eviction")),
        FaultResponse::captured("eviction-429-pdb.json"),
        usize::MAX,
    );
}

/// Sets `pod`'s status.phase (Pending: a sibling that is not placed yet).
fn set_phase(s: &Scene, pod: &str, phase: &str) {
    s.fake.modify_pod(NS, pod, |p| {
        if let Some(st) = p.status.as_mut() {
            st.phase = Some(phase.into());
        }
    });
}

#[tokio::test(start_paused = true)]
async fn sibling_awareness_holds_the_move_while_a_sibling_is_pending() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(3).await;
    s.fake.set_pod_ready(NS, "placeholder-2", false);
    set_phase(&s, "placeholder-2", "Pending");
    let _agent = vtime::agent(&s, "placeholder-0", TIMER_ONLY);
    assert!(
        logs.show("sibling placeholder-2 is Pending", Duration::from_secs(10))
            .await,
        "{}",
        logs.text()
    );
    // Long past its 1-2 s lifetime, it still holds.
    vtime::pass(Duration::from_secs(600)).await;
    assert!(
        s.evictions().is_empty(),
        "no eviction while a sibling is Pending"
    );
    set_phase(&s, "placeholder-2", "Running");
    assert!(
        vtime::request(&s, Duration::from_secs(10), |r| r.is_eviction())
            .await
            .is_some(),
        "moves once the sibling runs:\n{}",
        logs.text()
    );
}

/// Sets `pod`'s status.startTime an hour back (its container restarted since):
/// a lifetime of minutes is due the moment its agent starts.
fn started_an_hour_ago(s: &Scene, pod: &str) {
    let hour_ago = s.fake.clock().wall() - Duration::from_secs(3600);
    s.fake.modify_pod(NS, pod, |p| {
        if let Some(st) = p.status.as_mut() {
            st.start_time = Some(fake_apiserver::objects::time_of(hour_ago));
        }
    });
}

/// A lifetime already due at start-up, and the sibling list comes up to 30 s
/// later (the start jitter): the agent holds until it has seen the siblings, and
/// then holds for the Pending one, instead of moving before it knows.
#[tokio::test(start_paused = true)]
async fn a_due_move_waits_for_the_first_sibling_list() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(3).await;
    s.fake.set_pod_ready(NS, "placeholder-2", false);
    set_phase(&s, "placeholder-2", "Pending");
    started_an_hour_ago(&s, "placeholder-0");
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[("SELFDESTRUCT_START_JITTER", "30s")]),
    );
    vtime::pass(Duration::from_secs(600)).await;
    assert!(
        s.evictions().is_empty(),
        "no eviction before the siblings are known, nor while one is Pending:\n{}",
        logs.text()
    );
    // First held for the list, then for the Pending sibling it showed.
    let log = logs.of("placeholder-0");
    let not_listed = log.find("held: sibling placeholders not listed yet");
    let pending = log.find("held: sibling placeholder-2 is Pending");
    assert!(
        not_listed.is_some() && pending.is_some() && not_listed < pending,
        "{log}"
    );
    set_phase(&s, "placeholder-2", "Running");
    s.fake.set_pod_ready(NS, "placeholder-2", true);
    assert!(
        vtime::request(&s, Duration::from_secs(10), |r| r.is_eviction())
            .await
            .is_some(),
        "moves once the sibling runs:\n{}",
        logs.text()
    );
}

/// Without the permission to list pods, or with a sibling list that fails, the
/// agent does not wait for siblings it cannot see: the PodDisruptionBudget alone
/// keeps the moves one at a time, as before.
#[tokio::test(start_paused = true)]
async fn a_refused_or_failing_sibling_list_does_not_stop_the_moves() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(3).await;
    started_an_hour_ago(&s, "placeholder-0");
    started_an_hour_ago(&s, "placeholder-1");
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    let list = move |r: &fake_apiserver::RequestInfo| r.method == "GET" && r.path == pods;
    let _refused = vtime::agent_denied(&s, "placeholder-0", list, TIMER_ONLY);
    let own = |pod: &'static str| {
        move |r: &fake_apiserver::RecordedRequest| {
            r.is_eviction() && r.status == 201 && r.path.contains(pod)
        }
    };
    assert!(
        vtime::request(&s, Duration::from_secs(30), own("placeholder-0"))
            .await
            .is_some(),
        "{}",
        logs.text()
    );
    assert!(
        logs.of("placeholder-0")
            .contains("cannot list/watch sibling pods"),
        "{}",
        logs.text()
    );
    // Every list of pods fails (the own pod's GET still answers).
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    s.fake.fail_next(
        Matcher::custom(move |r| r.method == "GET" && r.path == pods),
        FaultResponse::internal_error(),
        1_000_000,
    );
    let _failing = vtime::agent(&s, "placeholder-1", TIMER_ONLY);
    assert!(
        vtime::request(&s, Duration::from_secs(60), own("placeholder-1"))
            .await
            .is_some(),
        "{}",
        logs.text()
    );
    assert!(
        logs.of("placeholder-1")
            .contains("the first list of sibling pods failed"),
        "{}",
        logs.text()
    );
}

/// Injects `fault` on every eviction and returns the agent after its first attempt.
async fn against_fault(fault: FaultResponse, logs: &Logs) -> (Scene, vtime::Agent) {
    let s = vtime::placeholders(2).await;
    s.fake.fail_next(
        Matcher::new(
            "POST",
            &format!("/api/v1/namespaces/{NS}/pods/placeholder-0/eviction"),
        ),
        fault,
        1000,
    );
    let agent = vtime::agent(&s, "placeholder-0", TIMER_ONLY);
    assert!(
        vtime::request(&s, Duration::from_secs(15), |r| r.is_eviction())
            .await
            .is_some(),
        "{}",
        logs.text()
    );
    (s, agent)
}

#[tokio::test(start_paused = true)]
async fn gone_or_replaced_stops_trying_and_keeps_pausing() {
    let (logs, _guard) = Logs::capture();
    // As kube-apiserver words them (shared/k8s-fixtures): only these two mean "gone or replaced".
    let replaced = "Operation cannot be fulfilled on Pod \"placeholder-0\": the UID in the \
                    precondition (a) does not match the UID in record (b). The object might have \
                    been deleted and then recreated";
    for (code, reason, message) in [
        (404, "NotFound", "pods \"placeholder-0\" not found"),
        (409, "Conflict", replaced),
    ] {
        let (s, agent) = against_fault(FaultResponse::failure(code, reason, message), &logs).await;
        assert!(
            logs.show("already gone or replaced", Duration::from_secs(3))
                .await,
            "{}",
            logs.text()
        );
        // Far longer than any backoff: no second attempt.
        vtime::pass(Duration::from_secs(3600)).await;
        assert!(agent.is_running(), "{code}: keeps pausing");
        assert_eq!(s.evictions().len(), 1, "{code}: no retry after {code}");
        assert_eq!(agent.stop().await, 0);
    }
}

/// The shipped defaults of the two settings that hold moves back (the scene's fast
/// test settings turn them off).
const DEFAULT_HOLDS: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MIN_AGE", "2m"),
    ("SELFDESTRUCT_MOVE_JITTER", "10s"),
];

#[tokio::test(start_paused = true)]
async fn a_lifetime_shorter_than_the_default_min_age_is_honoured() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let mut env = DEFAULT_HOLDS.to_vec();
    env.push(("SELFDESTRUCT_MAX_LIFETIME", "3s"));
    let _agent = vtime::agent(&s, "placeholder-0", &env);
    // 3 s + up to 10 s of jitter, well before the 2m MIN_AGE.
    let ev = vtime::request(&s, Duration::from_secs(60), |r| r.is_eviction())
        .await
        .unwrap_or_else(|| panic!("the lifetime was not honoured:\n{}", logs.text()));
    assert_eq!(ev.status, 201, "{}", logs.text());
    assert!(
        logs.text().contains("lifetime 3s reached"),
        "{}",
        logs.text()
    );
    assert!(
        !logs.text().contains("younger than SELFDESTRUCT_MIN_AGE"),
        "MIN_AGE does not hold the lifetime:\n{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_move_still_waits_for_min_age() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::with_nodes(
        1,
        &[NodeBuilder::new("node-a").cpu("8").memory("32Gi")],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await;
    let started = s.started_at("placeholder-0").expect("a start time");
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_MIN_AGE", "8s"),
            ("SELFDESTRUCT_NODE_SETTLE", "0"),
            ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
        ],
    );
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    // A new node, created after the placeholder was scheduled (times have second precision).
    vtime::pass(Duration::from_secs(1)).await;
    s.fake
        .add_node(NodeBuilder::new("node-b").cpu("8").memory("32Gi"));
    let ev = vtime::request(&s, Duration::from_secs(60), |r| r.is_eviction())
        .await
        .unwrap_or_else(|| panic!("no move to the new node:\n{}", logs.text()));
    assert!(logs.text().contains("node node-b Ready"), "{}", logs.text());
    // Held until the pod was 8 s old (start time has second precision).
    let age = ev.time.duration_since(started).unwrap_or_default();
    assert!(
        age >= Duration::from_secs(7),
        "moved at age {age:?}, before MIN_AGE:\n{}",
        logs.text()
    );
    assert!(
        logs.text().contains("younger than SELFDESTRUCT_MIN_AGE"),
        "{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn without_pod_uid_a_successor_created_after_the_agent_started_is_not_adopted() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let old_uid = s.uid("placeholder-0");
    let get = || {
        Matcher::new(
            "GET",
            &format!("/api/v1/namespaces/{NS}/pods/placeholder-0"),
        )
    };
    // The agent's first reads of its pod fail ...
    s.fake.fail_next(get(), FaultResponse::unavailable(), 1000);
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[("POD_UID", ""), ("SELFDESTRUCT_MOVE_JITTER", "0")]),
    );
    assert!(
        vtime::request(&s, Duration::from_secs(10), |r| r.method == "GET"
            && r.path.ends_with("/pods/placeholder-0")
            && r.status == 503)
        .await
        .is_some(),
        "{}",
        logs.text()
    );
    // ... while its pod is replaced under the same name by one created an hour later
    // than this process started (past any clock skew).
    assert!(s.fake.delete_pod(NS, "placeholder-0"));
    let later = s.fake.clock().wall() + Duration::from_secs(3600);
    let template = PodTemplate::placeholder("placeholder", "1", "4Gi");
    s.fake
        .add_pod(template.running_pod(NS, "placeholder-0", "node-0", later));
    let successor = s.uid("placeholder-0");
    assert_ne!(successor, old_uid);
    s.fake.clear_faults();
    assert!(
        logs.show("a successor, not ours", Duration::from_secs(15))
            .await,
        "{}",
        logs.text()
    );
    // Its 1-2 s lifetime (no jitter) is long up: it must not act on the successor.
    vtime::pass(Duration::from_secs(600)).await;
    assert!(s.evictions().is_empty(), "{}", logs.text());
    assert_eq!(s.uid("placeholder-0"), successor);
    assert!(agent.is_running(), "keeps pausing");
    assert_eq!(agent.stop().await, 0);
}

#[tokio::test(start_paused = true)]
async fn a_conflict_other_than_the_uid_precondition_is_retried() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    // A PodDisruptionBudget update race: the pod is still there, the eviction may be retried.
    s.fake.fail_next(
        Matcher::new(
            "POST",
            &format!("/api/v1/namespaces/{NS}/pods/placeholder-0/eviction"),
        ),
        FaultResponse::failure(
            409,
            "Conflict",
            "Operation cannot be fulfilled on poddisruptionbudgets.policy \"placeholder\": the \
             object has been modified; please apply your changes to the latest version and try again",
        ),
        1,
    );
    let _agent = vtime::agent(&s, "placeholder-0", TIMER_ONLY);
    assert!(
        vtime::request(&s, Duration::from_secs(20), |r| r.is_eviction()
            && r.status == 201)
        .await
        .is_some(),
        "retried after the conflict:\n{}",
        logs.text()
    );
    let statuses: Vec<u16> = s.evictions().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [409, 201], "{}", logs.text());
}

#[tokio::test(start_paused = true)]
async fn retry_after_zero_does_not_bypass_the_backoff() {
    let (logs, _guard) = Logs::capture();
    // A server that says `Retry-After: 0` on every 429 once drew hundreds of
    // evictions a minute: Retry-After is a floor under the backoff, not a bypass.
    let (s, _agent) = against_fault(FaultResponse::throttled(0), &logs).await;
    assert!(
        vtime::until(Duration::from_secs(40), || s.evictions().len() >= 2).await,
        "{}",
        logs.text()
    );
    let ev = s.evictions();
    let gap = ev[1].at.duration_since(ev[0].at);
    // The first backoff after a 429 is 5-10 s.
    assert!(
        gap >= Duration::from_secs(5),
        "retried after {gap:?}:\n{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn forbidden_logs_an_rbac_hint_and_retries_rarely() {
    let (logs, _guard) = Logs::capture();
    for (code, reason, hint) in [
        (403, "Forbidden", "rbac/role.yaml"),
        (422, "Invalid", "admission policy"),
    ] {
        let (s, agent) = against_fault(FaultResponse::failure(code, reason, "denied"), &logs).await;
        assert!(
            logs.show(hint, Duration::from_secs(3)).await,
            "{code}: {}",
            logs.text()
        );
        // Rarely: not within a minute, but again within the hour.
        vtime::pass(Duration::from_secs(60)).await;
        assert!(agent.is_running());
        assert_eq!(
            s.evictions().len(),
            1,
            "{code}: retries rarely (minutes), not now"
        );
        assert!(
            vtime::until(Duration::from_secs(3600), || s.evictions().len() >= 2).await,
            "{code}: retries:\n{}",
            logs.text()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn server_errors_retry_with_backoff_and_keep_running() {
    let (logs, _guard) = Logs::capture();
    let (s, agent) = against_fault(FaultResponse::internal_error(), &logs).await;
    assert!(
        vtime::until(Duration::from_secs(10), || s.evictions().len() >= 3).await,
        "{}",
        logs.text()
    );
    let times: Vec<_> = s.evictions().iter().map(|r| r.at).collect();
    let gaps: Vec<Duration> = times
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .collect();
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(400)),
        "no hot loop: {gaps:?}"
    );
    assert!(gaps[1] > gaps[0], "backoff grows: {gaps:?}");
    assert!(agent.is_running());
    s.fake.clear_faults();
    assert!(
        vtime::request(&s, Duration::from_secs(15), |r| r.is_eviction()
            && r.status == 201)
        .await
        .is_some(),
        "succeeds once the server recovers:\n{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn survives_an_api_outage_and_acts_once_it_is_back() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[
            ("SELFDESTRUCT_MIN_LIFETIME", "2s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
        ]),
    );
    assert!(
        logs.show("selfdestruct started", Duration::from_secs(10))
            .await,
        "{}",
        logs.text()
    );
    s.fake.set_outage(true);
    // The lifetime runs out during a 5-minute outage.
    vtime::pass(Duration::from_secs(300)).await;
    assert!(
        agent.is_running(),
        "an outage never kills it:\n{}",
        logs.text()
    );
    assert!(logs.text().contains("retrying"), "{}", logs.text());
    s.fake.set_outage(false);
    // Within the backoff it reached meanwhile (capped at 5 minutes).
    assert!(
        vtime::request(&s, Duration::from_secs(300), |r| r.is_eviction()
            && r.status == 201)
        .await
        .is_some(),
        "{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn an_event_that_cannot_be_posted_does_not_stop_the_move() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    s.fake.fail_next(
        Matcher::new("POST", &events_path()),
        FaultResponse::internal_error(),
        100,
    );
    let _agent = vtime::agent(&s, "placeholder-0", TIMER_ONLY);
    assert!(
        vtime::request(&s, Duration::from_secs(15), |r| r.is_eviction()
            && r.status == 201)
        .await
        .is_some(),
        "{}",
        logs.text()
    );
    assert!(
        logs.show("could not post the Event", Duration::from_secs(3))
            .await,
        "{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn dry_run_makes_no_mutating_request() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[("SELFDESTRUCT_DRY_RUN", "true")]),
    );
    assert!(
        logs.show("dry run: would evict", Duration::from_secs(15))
            .await,
        "{}",
        logs.text()
    );
    vtime::pass(Duration::from_secs(600)).await;
    assert!(
        s.mutations().is_empty(),
        "dry run mutated: {:?}",
        s.mutations()
    );
    // Then it pauses as after a real move: the decision is logged once.
    let said = logs.text().matches("dry run: would evict").count();
    assert_eq!(said, 1, "{}", logs.text());
    assert!(
        s.fake.requests().iter().any(|r| r.method == "GET"),
        "it did read its pod"
    );
}

#[tokio::test(start_paused = true)]
async fn finds_its_uid_with_one_get_and_its_identity_from_podinfo_files() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let uid = s.uid("placeholder-1");
    let podinfo = tempdir("podinfo");
    std::fs::write(podinfo.join("name"), "placeholder-1\n").expect("write");
    std::fs::write(podinfo.join("namespace"), NS).expect("write");
    let dir = podinfo.to_string_lossy().to_string();
    // No POD_NAME/POD_NAMESPACE/POD_UID (empty values count as unset).
    let _agent = vtime::agent(
        &s,
        "placeholder-1",
        &with(&[("POD_NAME", ""), ("POD_NAMESPACE", ""), ("POD_UID", "")])
            .into_iter()
            .chain([("SELFDESTRUCT_PODINFO_DIR", dir.as_str())])
            .collect::<Vec<_>>(),
    );
    let ev = vtime::request(&s, Duration::from_secs(15), |r| r.is_eviction())
        .await
        .unwrap_or_else(|| panic!("{}", logs.text()));
    assert!(ev.path.contains("placeholder-1"));
    assert_eq!(
        ev.body.expect("body")["deleteOptions"]["preconditions"]["uid"],
        uid.as_str()
    );
    let gets = s.fake.count_requests(|r| {
        r.method == "GET" && r.path == format!("/api/v1/namespaces/{NS}/pods/placeholder-1")
    });
    assert_eq!(gets, 1, "{}", logs.text());
}

#[test]
fn a_hostname_that_names_no_pod_is_a_configuration_error() {
    let s = Scene::placeholders(1);
    let mut agent = s.agent("placeholder-0", &[("POD_NAME", "")]);
    let status = agent
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("did not exit:\n{}", agent.log()));
    assert_eq!(status.code(), Some(2), "{}", agent.log());
    assert!(agent.log().contains("POD_NAME"), "{}", agent.log());
    assert!(s.mutations().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_successor_under_the_same_name_is_left_alone() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &with(&[("POD_UID", "00000000-0000-0000-0000-000000000000")]),
    );
    assert!(
        logs.show("successor", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    vtime::pass(Duration::from_secs(600)).await;
    assert!(s.mutations().is_empty(), "{:?}", s.mutations());
}

#[tokio::test(start_paused = true)]
async fn without_permission_to_read_its_pod_it_keeps_pausing() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(1).await;
    let agent = vtime::agent_denied(&s, "placeholder-0", |_| true, TIMER_ONLY);
    assert!(
        logs.show("cannot read own pod", Duration::from_secs(10))
            .await,
        "{}",
        logs.text()
    );
    assert!(logs.text().contains("rbac/role.yaml"), "{}", logs.text());
    vtime::pass(Duration::from_secs(600)).await;
    assert!(agent.is_running());
    assert_eq!(agent.stop().await, 0);
}
#[test]
fn sigterm_exits_zero_at_once_while_watching() {
    let s = Scene::placeholders(1);
    let mut agent = s.agent("placeholder-0", &[("SELFDESTRUCT_MAX_LIFETIME", "1h")]);
    assert!(
        agent.wait_for_log("watching", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    let (status, took) = agent.terminate();
    eprintln!("SIGTERM to exit with open watches: {took:?}");
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", agent.log());
}

#[test]
fn json_logs_carry_the_decision_and_reason() {
    let s = Scene::placeholders(2);
    let agent = s.agent(
        "placeholder-0",
        &with(&[("SELFDESTRUCT_LOG_FORMAT", "json")]),
    );
    assert!(
        s.fake
            .wait_for_request(|r| r.is_eviction(), Duration::from_secs(15))
            .is_some()
    );
    assert!(
        agent.wait_for_log("\"decision\":\"move\"", Duration::from_secs(3)),
        "{}",
        agent.log()
    );
    let line = agent
        .log()
        .lines()
        .find(|l| l.contains("\"decision\":\"move\""))
        .map(String::from)
        .expect("move line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON object per line");
    assert!(
        v["reason"].as_str().unwrap_or("").starts_with("lifetime "),
        "{v}"
    );
    assert_eq!(v["level"], "INFO");
}

#[tokio::test(start_paused = true)]
async fn start_jitter_delays_the_first_lists_but_not_the_own_pod_read() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let _agent = vtime::agent(&s, "placeholder-0", &[("SELFDESTRUCT_START_JITTER", "1h")]);
    assert!(
        logs.show("selfdestruct started", Duration::from_secs(10))
            .await,
        "{}",
        logs.text()
    );
    let lists = |s: &Scene| {
        s.fake.count_requests(|r| {
            r.path == "/api/v1/nodes" || r.path == format!("/api/v1/namespaces/{NS}/pods")
        })
    };
    // Some time within the hour, not at once.
    vtime::pass(Duration::from_secs(2)).await;
    assert_eq!(
        lists(&s),
        0,
        "a fleet that starts together must not list together"
    );
    assert!(
        s.fake
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/pods/placeholder-0"))
    );
    assert!(
        vtime::until(Duration::from_secs(3600), || lists(&s) > 0).await,
        "lists within the hour:\n{}",
        logs.text()
    );
}

/// Without read access to Nodes the warning says what still works: the lifetime
/// timer if one is set, and otherwise that the placeholder will not move.
#[tokio::test(start_paused = true)]
async fn without_node_access_the_warning_says_whether_anything_still_moves_it() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::placeholders(2).await;
    let no_nodes = || |r: &fake_apiserver::RequestInfo| r.path.starts_with("/api/v1/nodes");
    // The defaults: no lifetime.
    let _plain = vtime::agent_denied(&s, "placeholder-0", no_nodes(), &[]);
    assert!(
        logs.show_of(
            "placeholder-0",
            "cannot list/watch nodes",
            Duration::from_secs(10)
        )
        .await,
        "{}",
        logs.text()
    );
    let log = logs.of("placeholder-0");
    assert!(
        log.contains("no SELFDESTRUCT_MAX_LIFETIME is set: this placeholder will not move until nodes can be read"),
        "{log}"
    );
    assert!(!log.contains("timer still works"), "{log}");
    // With a lifetime, the timer does still work.
    let _timed = vtime::agent_denied(
        &s,
        "placeholder-1",
        no_nodes(),
        &[("SELFDESTRUCT_MAX_LIFETIME", "1h")],
    );
    assert!(
        logs.show_of(
            "placeholder-1",
            "the lifetime timer still works",
            Duration::from_secs(10)
        )
        .await,
        "{}",
        logs.text()
    );
    assert!(
        !logs.of("placeholder-1").contains("will not move until"),
        "{}",
        logs.text()
    );
}
