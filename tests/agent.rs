//! The real binary against the fake API server: the lifetime timer, eviction and
//! deletion with the uid precondition, PDB 429s, every error path, dry run,
//! identity discovery and signals.

mod common;

use std::time::Duration;

use common::cluster::{NS, Scene, events_path, eventually};
use common::*;
use fake_apiserver::{FaultResponse, Matcher, NodeBuilder, PodTemplate, Rule, Subject};

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

#[test]
fn evicts_itself_once_its_lifetime_is_up_with_its_uid() {
    let s = Scene::placeholders(3);
    let uid = s.uid("placeholder-1");
    let mut agent = s.agent("placeholder-1", TIMER_ONLY);
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no eviction:\n{}", agent.log()));
    assert_eq!(
        ev.path,
        format!("/api/v1/namespaces/{NS}/pods/placeholder-1/eviction")
    );
    let body = ev.body.clone().expect("eviction body");
    assert_eq!(body["deleteOptions"]["preconditions"]["uid"], uid.as_str());
    assert_eq!(body["kind"], "Eviction");
    assert_eq!(ev.status, 201, "{}", agent.log());
    // The StatefulSet re-creates it under the same name with a new uid.
    assert!(eventually(&s, Duration::from_secs(5), |s| {
        s.fake
            .get_pod(NS, "placeholder-1")
            .and_then(|p| p.metadata.uid)
            .is_some_and(|u| u != uid)
    }));
    // The Event says why.
    let events = s.fake.events(NS);
    let event = events
        .iter()
        .find(|e| e.involved_object.name.as_deref() == Some("placeholder-1"))
        .expect("an Event about the own pod");
    assert_eq!(event.reason.as_deref(), Some("SelfDestruct"));
    assert!(
        event
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("lifetime "),
        "{event:?}"
    );
    assert_eq!(event.involved_object.uid.as_deref(), Some(uid.as_str()));
    s.assert_only_own_mutations(&[("placeholder-1", &uid)]);
    assert!(
        agent.wait_for_log("waiting for SIGTERM", Duration::from_secs(2)),
        "{}",
        agent.log()
    );
    assert!(agent.is_running(), "keeps pausing after the eviction");
    assert_eq!(s.evictions().len(), 1, "exactly one eviction");
    let (status, took) = agent.terminate();
    eprintln!("SIGTERM to exit: {took:?}");
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}

/// zero-to-jupyterhub's own budget over the placeholders next to ours: the
/// API server refuses every eviction with HTTP 500. The agent says so (a
/// warning and a Warning Event naming the problem and the fix) and retries
/// rarely, instead of backing off on a 5xx in silence.
#[test]
fn two_budgets_over_the_pod_are_named_in_a_warning_and_an_event() {
    let s = Scene::placeholders(2);
    let mut chart_budget = s
        .fake
        .get_pdb(NS, "placeholder")
        .expect("the scene's budget");
    chart_budget.metadata = Default::default();
    chart_budget.metadata.name = Some("user-placeholder".into());
    chart_budget.metadata.namespace = Some(NS.into());
    chart_budget.status = None;
    if let Some(spec) = chart_budget.spec.as_mut() {
        spec.max_unavailable = None;
        spec.min_available =
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0));
    }
    s.fake.add_pdb_object(chart_budget);
    let uid = s.uid("placeholder-0");
    let mut agent = s.agent("placeholder-0", TIMER_ONLY);
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no eviction:\n{}", agent.log()));
    assert_eq!(ev.status, 500, "{}", agent.log());
    assert!(
        agent.wait_for_log(
            "two or more PodDisruptionBudgets select it",
            Duration::from_secs(10)
        ),
        "{}",
        agent.log()
    );
    let log = agent.log();
    assert!(log.contains("retrying rarely"), "{log}");
    assert!(log.contains("post-render.sh"), "{log}");
    assert!(
        !log.contains("retrying with backoff"),
        "not a plain 5xx: {log}"
    );
    let event = wait_for(Duration::from_secs(10), || {
        s.fake.events(NS).into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("placeholder-0")
                && e.reason.as_deref() == Some("MultiplePodDisruptionBudgets")
        })
    })
    .unwrap_or_else(|| panic!("no Warning Event:\n{}", agent.log()));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.uid.as_deref(), Some(uid.as_str()));
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("two or more PodDisruptionBudgets select it")
            && message.contains(&format!("kubectl -n {NS} get poddisruptionbudgets")),
        "{message}"
    );
    // Nothing was evicted; the agent keeps running.
    assert_eq!(s.uid("placeholder-0"), uid);
    assert!(agent.is_running());
    // With the optional permission to list budgets, the warning names them.
    let lister = Subject::placeholder_agent(NS, "placeholder").rule(Rule::new(
        &["list"],
        &["poddisruptionbudgets"],
        Some(NS),
    ));
    let named = s.agent_as("placeholder-1", lister, TIMER_ONLY);
    assert!(
        named.wait_for_log("select it", Duration::from_secs(20)),
        "{}",
        named.log()
    );
    let log = named.log();
    assert!(
        log.contains("the PodDisruptionBudgets placeholder and user-placeholder select it")
            || log.contains("the PodDisruptionBudgets user-placeholder and placeholder select it"),
        "{log}"
    );
    let uid1 = s.uid("placeholder-1");
    s.assert_only_own_mutations(&[("placeholder-0", &uid), ("placeholder-1", &uid1)]);
}

/// Polls `f` until it returns something or `timeout` passes.
fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let mut found = None;
    wait_until(timeout, || {
        found = f();
        found.is_some()
    });
    found
}

#[test]
fn delete_mode_deletes_with_the_uid_precondition() {
    let s = Scene::placeholders(2);
    let uid = s.uid("placeholder-0");
    let agent = s.agent(
        "placeholder-0",
        &with(&[
            ("SELFDESTRUCT_MODE", "delete"),
            ("SELFDESTRUCT_GRACE_PERIOD", "3s"),
        ]),
    );
    let del = s
        .fake
        .wait_for_request(|r| r.is_pod_delete(), Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no delete:\n{}", agent.log()));
    let body = del.body.clone().expect("delete options");
    assert_eq!(body["preconditions"]["uid"], uid.as_str());
    assert_eq!(body["gracePeriodSeconds"], 3);
    assert_eq!(del.status, 200);
    assert!(s.evictions().is_empty());
    s.assert_only_own_mutations(&[("placeholder-0", &uid)]);
}

#[test]
fn a_grace_period_under_a_second_is_never_sent_as_a_force_deletion() {
    // 0 through the API is a force deletion for pods (shared/k8s-fixtures): the
    // object goes at once and the StatefulSet may start the successor while the
    // old container still runs. Without the opt-in, 0 and 500ms are sent as 1.
    for (grace, force, want) in [("500ms", "false", 1), ("0", "false", 1), ("0", "true", 0)] {
        let s = Scene::placeholders(1);
        let agent = s.agent(
            "placeholder-0",
            &with(&[
                ("SELFDESTRUCT_MODE", "delete"),
                ("SELFDESTRUCT_GRACE_PERIOD", grace),
                ("SELFDESTRUCT_FORCE_DELETE", force),
            ]),
        );
        let del = s
            .fake
            .wait_for_request(|r| r.is_pod_delete(), Duration::from_secs(15))
            .unwrap_or_else(|| panic!("no delete:\n{}", agent.log()));
        let body = del.body.clone().expect("delete options");
        assert_eq!(body["gracePeriodSeconds"], want, "{grace} force={force}");
    }
}

#[test]
fn lifetime_counts_from_the_pod_start_not_the_process_start() {
    let s = Scene::placeholders(2);
    // The pod started an hour ago (the container restarted since): a 30m lifetime
    // is long over, so it fires after the short jitter instead of in 30 minutes.
    let hour_ago =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(1);
    s.fake.modify_pod(NS, "placeholder-0", |p| {
        if let Some(st) = p.status.as_mut() {
            st.start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                hour_ago,
            ));
        }
    });
    let agent = s.agent(
        "placeholder-0",
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "30m"),
            ("SELFDESTRUCT_MAX_LIFETIME", "40m"),
            ("SELFDESTRUCT_MOVE_JITTER", "2s"),
            ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
        ],
    );
    assert!(
        agent.wait_for_log("moving in", Duration::from_secs(10)),
        "an expired lifetime arms a jittered move first:\n{}",
        agent.log()
    );
    assert!(
        s.fake
            .wait_for_request(|r| r.is_eviction(), Duration::from_secs(10))
            .is_some(),
        "{}",
        agent.log()
    );
    // The other pod started now: its 30-40m lifetime counts from now, so the
    // decision is to wait about that long. (Checked on the decision's own
    // deadline: the absence of an eviction within a short window would prove
    // nothing, the move jitter alone delays one.)
    let fresh = s.agent(
        "placeholder-1",
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "30m"),
            ("SELFDESTRUCT_MAX_LIFETIME", "40m"),
            ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
            ("SELFDESTRUCT_LOG_LEVEL", "debug"),
        ],
    );
    let next = wait_for(Duration::from_secs(10), || {
        fresh
            .log()
            .lines()
            .filter(|l| l.contains("decision=\"wait\"") || l.contains("decision=wait"))
            .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("next=")))
            .map(|v| v.trim_matches('"').to_string())
    })
    .unwrap_or_else(|| panic!("no wait decision:\n{}", fresh.log()));
    let next = selfdestruct_decision::duration::parse(&next)
        .unwrap_or_else(|e| panic!("next={next}: {e}\n{}", fresh.log()));
    assert!(
        next > Duration::from_secs(25 * 60) && next <= Duration::from_secs(40 * 60),
        "a pod that just started waits for most of its 30-40m lifetime, not {next:?}:\n{}",
        fresh.log()
    );
}

#[test]
fn a_pdb_429_is_retried_later_and_then_succeeds() {
    let s = Scene::placeholders(3);
    // A sibling is not Ready: the PDB (maxUnavailable 1) refuses evictions.
    s.fake.set_pod_ready(NS, "placeholder-2", false);
    // Sibling awareness off: the PDB alone serialises the moves.
    let agent = s.agent(
        "placeholder-0",
        &with(&[("SELFDESTRUCT_SIBLING_SELECTOR", "none")]),
    );
    let refused = s
        .fake
        .wait_for_request(
            |r| r.is_eviction() && r.status == 429,
            Duration::from_secs(15),
        )
        .unwrap_or_else(|| panic!("no 429:\n{}", agent.log()));
    assert!(agent.wait_for_log("PodDisruptionBudget says not now", Duration::from_secs(2)));
    s.fake.set_pod_ready(NS, "placeholder-2", true);
    let ok = s
        .fake
        .wait_for_request(
            |r| r.is_eviction() && r.status == 201,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|| panic!("never succeeded:\n{}", agent.log()));
    let waited = ok.at.duration_since(refused.at);
    eprintln!("retried {waited:?} after the 429");
    assert!(
        waited >= Duration::from_secs(4),
        "a 429 backs off (BUSY: 5-10 s first)"
    );
    let attempts = s.evictions().len();
    assert!(attempts <= 4, "no hot loop on 429: {attempts} attempts");
}

#[test]
fn sibling_awareness_holds_the_move_while_a_sibling_is_pending() {
    let s = Scene::placeholders(3);
    s.fake.set_pod_ready(NS, "placeholder-2", false);
    s.fake.modify_pod(NS, "placeholder-2", |p| {
        if let Some(st) = p.status.as_mut() {
            st.phase = Some("Pending".into());
        }
    });
    let agent = s.agent("placeholder-0", TIMER_ONLY);
    assert!(
        agent.wait_for_log("sibling placeholder-2 is Pending", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        s.evictions().is_empty(),
        "no eviction while a sibling is Pending"
    );
    s.fake.modify_pod(NS, "placeholder-2", |p| {
        if let Some(st) = p.status.as_mut() {
            st.phase = Some("Running".into());
        }
    });
    assert!(
        s.fake
            .wait_for_request(|r| r.is_eviction(), Duration::from_secs(10))
            .is_some(),
        "moves once the sibling runs:\n{}",
        agent.log()
    );
}

/// Injects `fault` on every eviction and returns the agent after its first attempt.
fn against_fault(fault: FaultResponse) -> (Scene, Proc) {
    let s = Scene::placeholders(2);
    s.fake.fail_next(
        Matcher::new(
            "POST",
            &format!("/api/v1/namespaces/{NS}/pods/placeholder-0/eviction"),
        ),
        fault,
        1000,
    );
    let agent = s.agent("placeholder-0", TIMER_ONLY);
    assert!(
        s.fake
            .wait_for_request(|r| r.is_eviction(), Duration::from_secs(15))
            .is_some(),
        "{}",
        agent.log()
    );
    (s, agent)
}

#[test]
fn gone_or_replaced_stops_trying_and_keeps_pausing() {
    // As kube-apiserver words them (shared/k8s-fixtures): only these two mean "gone or replaced".
    let replaced = "Operation cannot be fulfilled on Pod \"placeholder-0\": the UID in the \
                    precondition (a) does not match the UID in record (b). The object might have \
                    been deleted and then recreated";
    for (code, reason, message) in [
        (404, "NotFound", "pods \"placeholder-0\" not found"),
        (409, "Conflict", replaced),
    ] {
        let (s, mut agent) = against_fault(FaultResponse::failure(code, reason, message));
        assert!(
            agent.wait_for_log("already gone or replaced", Duration::from_secs(3)),
            "{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_secs(2));
        assert!(agent.is_running(), "{code}: keeps pausing");
        assert_eq!(s.evictions().len(), 1, "{code}: no retry after {code}");
        assert_eq!(agent.terminate().0.and_then(|s| s.code()), Some(0));
    }
}

/// The shipped defaults of the two settings that hold moves back (the scene's fast
/// test settings turn them off).
const DEFAULT_HOLDS: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MIN_AGE", "2m"),
    ("SELFDESTRUCT_MOVE_JITTER", "10s"),
];

#[test]
fn a_lifetime_shorter_than_the_default_min_age_is_honoured() {
    let s = Scene::placeholders(2);
    let mut env = DEFAULT_HOLDS.to_vec();
    env.push(("SELFDESTRUCT_MAX_LIFETIME", "3s"));
    let agent = s.agent("placeholder-0", &env);
    // 3 s + up to 10 s of jitter; the bound is only how long to wait for it.
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the lifetime was not honoured:\n{}", agent.log()));
    assert_eq!(ev.status, 201, "{}", agent.log());
    assert!(
        agent.log().contains("lifetime 3s reached"),
        "{}",
        agent.log()
    );
    assert!(
        !agent.log().contains("younger than SELFDESTRUCT_MIN_AGE"),
        "MIN_AGE does not hold the lifetime:\n{}",
        agent.log()
    );
}

#[test]
fn a_node_move_still_waits_for_min_age() {
    let s = Scene::with_nodes(
        1,
        &[NodeBuilder::new("node-a").cpu("8").memory("32Gi")],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    );
    let started = s.started_at("placeholder-0").expect("a start time");
    let agent = s.agent(
        "placeholder-0",
        &[
            ("SELFDESTRUCT_MIN_AGE", "8s"),
            ("SELFDESTRUCT_NODE_SETTLE", "0"),
            ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
        ],
    );
    assert!(
        agent.wait_for_log("watching nodes", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    // A new node, created after the placeholder was scheduled (times have second precision).
    assert!(wait_until(Duration::from_secs(5), || {
        std::time::SystemTime::now() >= started + Duration::from_secs(1)
    }));
    s.fake
        .add_node(NodeBuilder::new("node-b").cpu("8").memory("32Gi"));
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no move to the new node:\n{}", agent.log()));
    assert!(agent.log().contains("node node-b Ready"), "{}", agent.log());
    // Held until the pod was 8 s old (start time has second precision).
    let age = ev.time.duration_since(started).unwrap_or_default();
    assert!(
        age >= Duration::from_secs(7),
        "moved at age {age:?}, before MIN_AGE:\n{}",
        agent.log()
    );
    assert!(
        agent.log().contains("younger than SELFDESTRUCT_MIN_AGE"),
        "{}",
        agent.log()
    );
}

#[test]
fn without_pod_uid_a_successor_created_after_the_agent_started_is_not_adopted() {
    let s = Scene::placeholders(2);
    let old_uid = s.uid("placeholder-0");
    let get = || {
        Matcher::new(
            "GET",
            &format!("/api/v1/namespaces/{NS}/pods/placeholder-0"),
        )
    };
    // The agent's first reads of its pod fail ...
    s.fake.fail_next(get(), FaultResponse::unavailable(), 1000);
    let mut agent = s.agent(
        "placeholder-0",
        &with(&[("POD_UID", ""), ("SELFDESTRUCT_MOVE_JITTER", "0")]),
    );
    assert!(
        s.fake
            .wait_for_request(
                |r| r.method == "GET" && r.path.ends_with("/pods/placeholder-0") && r.status == 503,
                Duration::from_secs(10)
            )
            .is_some(),
        "{}",
        agent.log()
    );
    // ... while its pod is replaced under the same name by one created an hour later
    // than this process started (past any clock skew).
    assert!(s.fake.delete_pod(NS, "placeholder-0"));
    assert!(eventually(&s, Duration::from_secs(10), |s| {
        s.fake
            .get_pod(NS, "placeholder-0")
            .and_then(|p| p.metadata.uid)
            .is_some_and(|u| u != old_uid)
    }));
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    s.fake.modify_pod(NS, "placeholder-0", |p| {
        p.metadata.creation_timestamp = Some(fake_apiserver::objects::time_of(later));
    });
    let successor = s.uid("placeholder-0");
    s.fake.clear_faults();
    assert!(
        agent.wait_for_log("a successor, not ours", Duration::from_secs(15)),
        "{}",
        agent.log()
    );
    // Its 1-2 s lifetime (no jitter) is long up: it must not have acted on the successor.
    std::thread::sleep(Duration::from_secs(3));
    assert!(s.evictions().is_empty(), "{}", agent.log());
    assert_eq!(s.uid("placeholder-0"), successor);
    assert!(agent.is_running(), "keeps pausing");
    assert_eq!(agent.terminate().0.and_then(|s| s.code()), Some(0));
}

#[test]
fn a_conflict_other_than_the_uid_precondition_is_retried() {
    let s = Scene::placeholders(2);
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
    let agent = s.agent("placeholder-0", TIMER_ONLY);
    assert!(
        s.fake
            .wait_for_request(
                |r| r.is_eviction() && r.status == 201,
                Duration::from_secs(20)
            )
            .is_some(),
        "retried after the conflict:\n{}",
        agent.log()
    );
    let statuses: Vec<u16> = s.evictions().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [409, 201], "{}", agent.log());
}

#[test]
fn retry_after_zero_does_not_bypass_the_backoff() {
    // A server that says `Retry-After: 0` on every 429 once drew hundreds of
    // evictions a minute: Retry-After is a floor under the backoff, not a bypass.
    let (s, agent) = against_fault(FaultResponse::throttled(0));
    assert!(
        wait_until(Duration::from_secs(40), || s.evictions().len() >= 2),
        "{}",
        agent.log()
    );
    let ev = s.evictions();
    let gap = ev[1].at.duration_since(ev[0].at);
    // The first backoff after a 429 is 5-10 s; a slow machine only makes it longer.
    assert!(
        gap >= Duration::from_secs(4),
        "retried after {gap:?}:\n{}",
        agent.log()
    );
}

#[test]
fn forbidden_logs_an_rbac_hint_and_retries_rarely() {
    for (code, reason, hint) in [
        (403, "Forbidden", "rbac/role.yaml"),
        (422, "Invalid", "admission policy"),
    ] {
        let (s, mut agent) = against_fault(FaultResponse::failure(code, reason, "denied"));
        assert!(
            agent.wait_for_log(hint, Duration::from_secs(3)),
            "{code}: {}",
            agent.log()
        );
        std::thread::sleep(Duration::from_secs(2));
        assert!(agent.is_running());
        assert_eq!(
            s.evictions().len(),
            1,
            "{code}: retries rarely (minutes), not now"
        );
    }
}

#[test]
fn server_errors_retry_with_backoff_and_keep_running() {
    let (s, mut agent) = against_fault(FaultResponse::internal_error());
    assert!(
        wait_until(Duration::from_secs(10), || s.evictions().len() >= 3),
        "{}",
        agent.log()
    );
    let times: Vec<_> = s.evictions().iter().map(|r| r.at).collect();
    let gaps: Vec<Duration> = times
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .collect();
    eprintln!("retry gaps after 500s: {gaps:?}");
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(400)),
        "no hot loop: {gaps:?}"
    );
    assert!(gaps[1] > gaps[0], "backoff grows: {gaps:?}");
    assert!(agent.is_running());
    s.fake.clear_faults();
    assert!(
        s.fake
            .wait_for_request(
                |r| r.is_eviction() && r.status == 201,
                Duration::from_secs(15)
            )
            .is_some(),
        "succeeds once the server recovers:\n{}",
        agent.log()
    );
}

#[test]
fn survives_an_api_outage_and_acts_once_it_is_back() {
    let s = Scene::placeholders(2);
    let mut agent = s.agent(
        "placeholder-0",
        &with(&[
            ("SELFDESTRUCT_MIN_LIFETIME", "2s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
        ]),
    );
    assert!(
        agent.wait_for_log("selfdestruct started", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    s.fake.set_outage(true);
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        agent.is_running(),
        "an outage never kills it:\n{}",
        agent.log()
    );
    assert!(agent.log().contains("retrying"), "{}", agent.log());
    s.fake.set_outage(false);
    assert!(
        s.fake
            .wait_for_request(
                |r| r.is_eviction() && r.status == 201,
                Duration::from_secs(20)
            )
            .is_some(),
        "{}",
        agent.log()
    );
}

#[test]
fn an_event_that_cannot_be_posted_does_not_stop_the_move() {
    let s = Scene::placeholders(2);
    s.fake.fail_next(
        Matcher::new("POST", &events_path()),
        FaultResponse::internal_error(),
        100,
    );
    let agent = s.agent("placeholder-0", TIMER_ONLY);
    assert!(
        s.fake
            .wait_for_request(
                |r| r.is_eviction() && r.status == 201,
                Duration::from_secs(15)
            )
            .is_some()
    );
    assert!(
        agent.wait_for_log("could not post the Event", Duration::from_secs(3)),
        "{}",
        agent.log()
    );
}

#[test]
fn dry_run_makes_no_mutating_request() {
    let s = Scene::placeholders(2);
    let agent = s.agent("placeholder-0", &with(&[("SELFDESTRUCT_DRY_RUN", "true")]));
    assert!(
        agent.wait_for_log("dry run: would evict", Duration::from_secs(15)),
        "{}",
        agent.log()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        s.mutations().is_empty(),
        "dry run mutated: {:?}",
        s.mutations()
    );
    assert!(
        s.fake.requests().iter().any(|r| r.method == "GET"),
        "it did read its pod"
    );
}

#[test]
fn finds_its_uid_with_one_get_and_its_identity_from_podinfo_files() {
    let s = Scene::placeholders(2);
    let uid = s.uid("placeholder-1");
    let podinfo = tempdir("podinfo");
    std::fs::write(podinfo.join("name"), "placeholder-1\n").expect("write");
    std::fs::write(podinfo.join("namespace"), NS).expect("write");
    let dir = podinfo.to_string_lossy().to_string();
    // No POD_NAME/POD_NAMESPACE/POD_UID (empty values count as unset).
    let agent = s.agent(
        "placeholder-1",
        &with(&[("POD_NAME", ""), ("POD_NAMESPACE", ""), ("POD_UID", "")])
            .into_iter()
            .chain([("SELFDESTRUCT_PODINFO_DIR", dir.as_str())])
            .collect::<Vec<_>>(),
    );
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(15))
        .unwrap_or_else(|| panic!("{}", agent.log()));
    assert!(ev.path.contains("placeholder-1"));
    assert_eq!(
        ev.body.expect("body")["deleteOptions"]["preconditions"]["uid"],
        uid.as_str()
    );
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

#[test]
fn a_successor_under_the_same_name_is_left_alone() {
    let s = Scene::placeholders(2);
    let agent = s.agent(
        "placeholder-0",
        &with(&[("POD_UID", "00000000-0000-0000-0000-000000000000")]),
    );
    assert!(
        agent.wait_for_log("successor", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    std::thread::sleep(Duration::from_secs(3));
    assert!(s.mutations().is_empty(), "{:?}", s.mutations());
}

#[test]
fn without_permission_to_read_its_pod_it_keeps_pausing() {
    let s = Scene::placeholders(1);
    let mut agent = s.agent_as(
        "placeholder-0",
        Subject::new("system:serviceaccount:placeholders:nobody"),
        TIMER_ONLY,
    );
    assert!(
        agent.wait_for_log("cannot read own pod", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    assert!(agent.log().contains("rbac/role.yaml"), "{}", agent.log());
    assert!(agent.is_running());
    assert_eq!(agent.terminate().0.and_then(|s| s.code()), Some(0));
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

#[test]
fn start_jitter_delays_the_first_lists_but_not_the_own_pod_read() {
    let s = Scene::placeholders(2);
    let agent = s.agent("placeholder-0", &[("SELFDESTRUCT_START_JITTER", "1h")]);
    assert!(
        agent.wait_for_log("selfdestruct started", Duration::from_secs(10)),
        "{}",
        agent.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    let lists = s
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/nodes" || r.path == format!("/api/v1/namespaces/{NS}/pods"))
        .count();
    assert_eq!(
        lists, 0,
        "a fleet that starts together must not list together"
    );
    assert!(
        s.fake
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/pods/placeholder-0"))
    );
}
