//! `selfdestruct-node-gate`'s I/O against the fake API server, where only a fake can
//! show it. In-process on virtual time (`common::vtime`): one guarded patch to its own
//! node, polls while waiting (not a busy loop), the fail-open at the timeout, denials
//! reported and retried, a conflict or an answer that does not show the patch applied
//! read again. The PATCH answers are scripted: the fake applies no patch (the real-stack
//! tier, tests/cluster.rs, shows the taint lifted and the label set; the pure step's
//! tables, src/node_gate/tests.rs, what each read decides). The real binary: it exits 0
//! on SIGTERM, pauses without API access, and exits 2 without NODE_NAME.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::vtime::{self, Logs};
use common::*;
use fake_apiserver::{FakeCluster, FaultResponse, Matcher, NodeBuilder, RecordedRequest};
use k8s_openapi::api::core::v1::{ContainerImage, Taint};
use serde_json::{Value, json};

const GATE: &str = "startup-taint.cluster-autoscaler.kubernetes.io/images-pending";
const DEDICATED: &str = "hub.jupyter.org/dedicated";
const IMAGE: &str = "quay.io/jupyter/scipy-notebook:2025-01-06";
const WARM: &str = "selfdestruct.io/images-warm";
const TOKEN: &str = "gate-token";

/// A user node, gated or not, with the z2jh user-node taint.
fn user_node(name: &str, gated: bool) -> NodeBuilder {
    let n = NodeBuilder::new(name).taint(DEDICATED, "user", "NoSchedule");
    if gated {
        n.taint(GATE, "true", "NoSchedule")
    } else {
        n
    }
}

struct Gate {
    fake: FakeCluster,
    home: PathBuf,
}

impl Gate {
    fn new(fake: FakeCluster, nodes: &[NodeBuilder]) -> Gate {
        for n in nodes {
            fake.add_node(n.clone());
        }
        Gate {
            fake,
            home: tempdir("node-gate"),
        }
    }

    /// On a fake served in-process (the virtual-time tier).
    fn in_process(nodes: &[NodeBuilder]) -> Gate {
        Self::new(
            FakeCluster::in_process(fake_apiserver::Config::default()),
            nodes,
        )
    }

    /// Starts the binary's `node-gate` on `node` with fast test settings and `env`.
    fn start(&self, node: &str, env: &[(&str, &str)]) -> Proc {
        self.fake.add_token(TOKEN);
        let kc = self.fake.write_kubeconfig(&self.home, TOKEN, "node-gate");
        let kc = kc.to_string_lossy().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("KUBECONFIG", &kc),
            ("NODE_NAME", node),
            ("SELFDESTRUCT_GATE_POLL", "1s"),
            ("SELFDESTRUCT_LOG_LEVEL", "debug"),
        ];
        all.extend_from_slice(env);
        Proc::spawn(command(&gate_bin(), &[], &all, &self.home))
    }

    /// Runs the gate in-process on `node` (see [`Gate::start`]).
    fn run(&self, node: &str, env: &[(&str, &str)]) -> vtime::Agent {
        let mut all: Vec<(&str, &str)> =
            vec![("NODE_NAME", node), ("SELFDESTRUCT_GATE_POLL", "1s")];
        for (k, v) in env {
            all.retain(|(name, _)| name != k);
            all.push((k, v));
        }
        vtime::gate(&self.fake, TOKEN, &all)
    }

    /// The next `times` PATCHes of `node` answer `answer` (200).
    fn answer(&self, node: &str, answer: Value, times: usize) {
        let matcher = Matcher::new("PATCH", &format!("/api/v1/nodes/{node}"));
        self.fake
            .fail_next(matcher, FaultResponse::json(200, answer), times);
    }

    /// `node` as stored, with the gate taints gone and the warm label set: what the API
    /// server answers to the gate's patch.
    fn opened(&self, node: &str) -> Value {
        let mut n =
            serde_json::to_value(self.fake.get_node(node).expect("the node")).expect("JSON");
        if let Some(taints) = n["spec"]["taints"].as_array_mut() {
            taints.retain(|t| t["key"] != GATE);
        }
        n["metadata"]["labels"][WARM] = json!("true");
        n
    }

    fn node_requests(&self, method: &str) -> Vec<RecordedRequest> {
        let all = self.fake.requests().into_iter();
        all.filter(|r| r.method == method && r.path.starts_with("/api/v1/nodes"))
            .collect()
    }

    fn patches(&self) -> Vec<RecordedRequest> {
        self.node_requests("PATCH")
    }

    /// Waits (virtual time) for a PATCH of `node` answered 200 and the gate's "opened".
    async fn wait_open(&self, node: &str, timeout: Duration, logs: &Logs) {
        let path = format!("/api/v1/nodes/{node}");
        let patched = || {
            self.patches()
                .iter()
                .any(|p| p.path == path && p.status == 200)
        };
        assert!(
            vtime::until(timeout, patched).await,
            "no accepted patch of {node}; requests {:?}\n{}",
            self.fake
                .requests()
                .iter()
                .map(|r| format!("{} {} {}", r.method, r.path, r.status))
                .collect::<Vec<_>>(),
            logs.text()
        );
    }
}

/// The gate logs `text` within `within` (virtual time); else fails with the log.
async fn shows(logs: &Logs, text: &str, within: Duration) {
    assert!(
        logs.show(text, within).await,
        "no {text:?} in:\n{}",
        logs.text()
    );
}

/// Still running, and stops (as on SIGTERM) with 0.
async fn assert_stops(gate: vtime::Agent, logs: &Logs) {
    assert!(gate.is_running(), "exited early:\n{}", logs.text());
    assert_eq!(gate.stop().await, 0, "{}", logs.text());
}

fn assert_terminates(gate: &mut Proc) {
    assert!(gate.is_running(), "exited early:\n{}", gate.log());
    let (status, took) = gate.terminate();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "SIGTERM must exit 0:\n{}",
        gate.log()
    );
    // Exiting at all within `terminate`'s wait is the check; how fast is a figure.
    eprintln!("SIGTERM to exit: {took:?}");
}

#[tokio::test(start_paused = true)]
async fn one_guarded_patch_of_its_own_node_then_it_pauses() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true), user_node("n2", true)]);
    g.answer("n1", g.opened("n1"), 1);
    let gate = g.run("n1", &[]);
    g.wait_open("n1", Duration::from_secs(5), &logs).await;
    shows(&logs, "gate opened: taint removed", Duration::from_secs(2)).await;
    let patches = g.patches();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let p = &patches[0];
    assert_eq!(
        p.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    let body = p.body.clone().expect("a JSON patch");
    assert_eq!(
        (body[0]["op"].as_str(), body[0]["path"].as_str()),
        (Some("test"), Some("/spec/taints"))
    );
    assert_eq!(body[0]["value"].as_array().map(Vec::len), Some(2));
    assert_eq!(body[1], json!({"op": "remove", "path": "/spec/taints/1"}));
    // Every request was about the own node, and none was a list or watch.
    for r in g.fake.requests() {
        assert_eq!(r.path, "/api/v1/nodes/n1", "{} {}", r.method, r.path);
    }
    // Then it pauses: no more requests, for an hour.
    let before = g.fake.requests().len();
    vtime::pass(Duration::from_secs(3600)).await;
    assert_eq!(
        g.fake.requests().len(),
        before,
        "requests after the gate opened"
    );
    assert_stops(gate, &logs).await;
}

/// An accepted PATCH whose answer still shows the gate taint (a proxy or webhook
/// that dropped the change) does not open the gate: the gate reads the node again and
/// patches again, and says "gate opened" only then.
#[tokio::test(start_paused = true)]
async fn the_gate_is_open_only_once_the_node_shows_no_gate_taint() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let unchanged = serde_json::to_value(g.fake.get_node("n1").expect("node")).expect("JSON");
    g.answer("n1", unchanged, 1);
    g.answer("n1", g.opened("n1"), 1);
    let gate = g.run("n1", &[]);
    shows(&logs, "gate opened: taint removed", Duration::from_secs(8)).await;
    let log = logs.text();
    assert!(
        log.contains("does not show the gate taint gone and the label set; reading the node again"),
        "{log}"
    );
    assert_eq!(log.matches("gate opened").count(), 1, "{log}");
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(statuses, vec![200, 200], "patched again after reading");
    assert_stops(gate, &logs).await;
}

/// Another taint added between the gate's read and its patch: the patch's `test` fails
/// (the API server's 422), the gate reads the node again and patches the new list.
#[tokio::test(start_paused = true)]
async fn a_concurrent_taint_change_is_kept_and_the_patch_retried() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    // Every request waits 300 ms before it is served: the taint added right after the
    // gate's GET lands before its PATCH is served, refused by its `test` (422).
    g.fake.set_latency(Duration::from_millis(300));
    let failed_test = "the server rejected our request due to an error in our request";
    let patch = Matcher::new("PATCH", "/api/v1/nodes/n1");
    g.fake.fail_next(
        patch,
        FaultResponse::failure(422, "Invalid", failed_test),
        1,
    );
    let gate = g.run("n1", &[]);
    let read = vtime::request_of(&g.fake, Duration::from_secs(5), |r| {
        r.method == "GET" && r.status == 200
    })
    .await;
    assert!(
        read.is_some() && g.patches().is_empty(),
        "no GET first:\n{}",
        logs.text()
    );
    let autoscaler = Taint {
        key: "ToBeDeletedByClusterAutoscaler".into(),
        value: Some("1700000000".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    };
    assert!(g.fake.modify_node("n1", |n| {
        n.spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new)
            .insert(0, autoscaler)
    }));
    g.answer("n1", g.opened("n1"), 1);
    g.wait_open("n1", Duration::from_secs(8), &logs).await;
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(statuses, [422, 200], "refused by the test, then retried");
    g.fake.set_latency(Duration::ZERO);
    shows(
        &logs,
        "taints or labels changed meanwhile; reading the node again",
        Duration::from_secs(2),
    )
    .await;
    // The retry tested the new list and removed the gate taint at its new index.
    let retry = g.patches()[1].body.clone().expect("a JSON patch");
    assert_eq!(retry[0]["value"].as_array().map(Vec::len), Some(3));
    assert_eq!(retry[1]["path"], "/spec/taints/2");
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn it_polls_for_the_required_images_then_opens_at_the_next_read() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let env = [
        ("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE),
        ("SELFDESTRUCT_GATE_TIMEOUT", "1m"),
    ];
    let gate = g.run("n1", &env);
    shows(
        &logs,
        "waiting for images before opening the gate",
        Duration::from_secs(5),
    )
    .await;
    assert!(
        logs.text().contains(IMAGE),
        "names the missing image:\n{}",
        logs.text()
    );
    let first = g.node_requests("GET").len();
    vtime::pass(Duration::from_secs(30)).await;
    assert!(g.patches().is_empty(), "patched while images were missing");
    // Polls once a second (SELFDESTRUCT_GATE_POLL's floor), not in a busy loop.
    let gets = g.node_requests("GET");
    assert!(
        (29..=31).contains(&(gets.len() - first)),
        "{} GETs in 30 s",
        gets.len() - first
    );
    for pair in gets.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(gap >= Duration::from_secs(1), "GETs {gap:?} apart");
    }
    let image = ContainerImage {
        names: Some(vec![IMAGE.to_string()]),
        size_bytes: Some(6_000_000_000),
    };
    g.fake.set_node_images("n1", vec![image]);
    g.answer("n1", g.opened("n1"), 1);
    let shown = g.fake.clock().instant();
    g.wait_open("n1", Duration::from_secs(1), &logs).await;
    assert!(
        g.patches()[0].at - shown <= Duration::from_secs(1),
        "at the next poll"
    );
    shows(
        &logs,
        "required images are on the node",
        Duration::from_secs(2),
    )
    .await;
    assert!(!logs.text().contains("fail-open"));
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn fails_open_at_the_timeout_with_a_warning() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    // A poll that does not divide the timeout: the gate opens at the timeout, not at
    // the next poll after it. No warm label without the images.
    let mut opened = g.opened("n1");
    opened["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove(WARM);
    g.answer("n1", opened, 1);
    let started = g.fake.clock().instant();
    let env = [
        ("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE),
        ("SELFDESTRUCT_GATE_TIMEOUT", "3s"),
        ("SELFDESTRUCT_GATE_POLL", "2s"),
    ];
    let gate = g.run("n1", &env);
    g.wait_open("n1", Duration::from_secs(6), &logs).await;
    let took = g.patches()[0].at - started;
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_millis(3100),
        "opened after {took:?}"
    );
    shows(&logs, "gate opened", Duration::from_secs(1)).await;
    let log = logs.text();
    let warning = log
        .lines()
        .find(|l| l.contains("fail-open"))
        .unwrap_or_else(|| panic!("no fail-open warning:\n{log}"));
    assert!(
        warning.contains("WARN") && warning.contains(IMAGE),
        "{warning}"
    );
    assert_eq!(log.matches("fail-open").count(), 1, "{log}");
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn an_open_labelled_node_is_read_once_and_left_alone() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", false).label(WARM, "true")]);
    let gate = g.run("n1", &[("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE)]);
    shows(
        &logs,
        "node has no gate taint: nothing to remove",
        Duration::from_secs(5),
    )
    .await;
    vtime::pass(Duration::from_secs(3600)).await;
    assert!(g.patches().is_empty());
    assert_eq!(g.node_requests("GET").len(), 1, "reads its node once");
    assert_stops(gate, &logs).await;
}

#[test]
fn sigterm_while_waiting_exits_0() {
    let g = Gate::new(FakeCluster::start(), &[user_node("n1", true)]);
    let mut gate = g.start("n1", &[("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE)]);
    assert!(gate.wait_for_log("waiting for images", Duration::from_secs(5)));
    assert_terminates(&mut gate);
    assert!(g.patches().is_empty());
}

/// The agent's settings that `node-gate` does not read, each with an invalid value (a
/// ConfigMap shared with the placeholders may carry them).
const INVALID_AGENT_SETTINGS: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MAX_LIFETIME", "bogus"),
    ("SELFDESTRUCT_MODE", "destroy"),
    ("SELFDESTRUCT_SIBLING_SELECTOR", "a=b,,"),
    ("SELFDESTRUCT_MAX_MOVES_PER_HOUR", "many"),
];

#[test]
fn an_invalid_agent_only_setting_does_not_stop_the_gate() {
    let g = Gate::new(FakeCluster::start(), &[user_node("n1", true)]);
    g.answer("n1", g.opened("n1"), 1);
    let mut gate = g.start("n1", INVALID_AGENT_SETTINGS);
    assert!(
        gate.wait_for_log("gate opened", Duration::from_secs(10)),
        "the gate did not open:\n{}",
        gate.log()
    );
    assert_terminates(&mut gate);
    // The agent refuses each of them (exit 2 naming it).
    for (var, value) in INVALID_AGENT_SETTINGS {
        let (code, out) = run_to_exit(&[], &[(var, value)]);
        assert_eq!(code, Some(2), "{var}={value}: {out}");
        assert!(out.contains(&format!("invalid {var}")), "{out}");
    }
}

#[test]
fn without_api_access_it_pauses() {
    let home = tempdir("node-gate-no-api");
    let mut gate = Proc::spawn(command(&gate_bin(), &[], &[("NODE_NAME", "n1")], &home));
    assert!(
        gate.wait_for_log("no API access", Duration::from_secs(5)),
        "{}",
        gate.log()
    );
    let log = gate.log();
    assert!(
        log.contains("plain pause container") && log.contains("cannot remove its taint"),
        "{log}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_terminates(&mut gate);
}

#[tokio::test(start_paused = true)]
async fn rbac_403_on_patch_is_reported_and_retried() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let patch = Matcher::new("PATCH", "/api/v1/nodes/n1");
    g.fake.fail_next(
        patch,
        FaultResponse::failure(403, "Forbidden", "nodes \"n1\" is forbidden"),
        2,
    );
    g.answer("n1", g.opened("n1"), 1);
    let gate = g.run("n1", &[]);
    shows(
        &logs,
        "not allowed to patch the own node",
        Duration::from_secs(5),
    )
    .await;
    assert!(logs.text().contains("ClusterRole"), "{}", logs.text());
    // Retried until the ClusterRole is fixed (here: the third try).
    g.wait_open("n1", Duration::from_secs(10), &logs).await;
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(statuses, [403, 403, 200]);
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn a_401_is_retried_on_the_transient_backoff_not_the_denied_one() {
    // Credentials that expired for a moment: retried within seconds, not after the
    // polls a denial (403) waits, which are a minute here.
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let patch = Matcher::new("PATCH", "/api/v1/nodes/n1");
    g.fake.fail_next(
        patch,
        FaultResponse::failure(401, "Unauthorized", "Unauthorized"),
        3,
    );
    g.answer("n1", g.opened("n1"), 1);
    let gate = g.run("n1", &[("SELFDESTRUCT_GATE_POLL", "60s")]);
    g.wait_open("n1", Duration::from_secs(20), &logs).await;
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(statuses, [401, 401, 401, 200], "{}", logs.text());
    assert!(
        logs.text().contains("(401") && !logs.text().contains("ClusterRole"),
        "{}",
        logs.text()
    );
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn an_admission_denial_is_not_taken_for_a_conflict() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let denial = "ValidatingAdmissionPolicy 'selfdestruct-node-gate' with binding \
                  'selfdestruct-node-gate' denied request: the node gate may only remove its taint from its own node";
    let message = format!("nodes \"n1\" is forbidden: {denial}");
    let patch = Matcher::new("PATCH", "/api/v1/nodes/n1");
    g.fake
        .fail_next(patch, FaultResponse::failure(422, "Invalid", &message), 1);
    g.answer("n1", g.opened("n1"), 1);
    let gate = g.run("n1", &[]);
    shows(
        &logs,
        "the taint removal was refused",
        Duration::from_secs(5),
    )
    .await;
    assert!(!logs.text().contains("taints changed meanwhile"));
    // Retried after a backoff (0.5-1 poll), not at once.
    g.wait_open("n1", Duration::from_secs(4), &logs).await;
    let p = g.patches();
    assert_eq!(p.len(), 2);
    let gap = p[1].at.duration_since(p[0].at);
    assert!(gap >= Duration::from_millis(500), "retried after {gap:?}");
    assert_stops(gate, &logs).await;
}

#[test]
fn node_name_is_required() {
    for env in [&[][..], &[("NODE_NAME", "")][..]] {
        let (code, out) = run_program_to_exit(&gate_bin(), &[], env);
        assert_eq!(code, Some(2), "{out}");
        assert!(
            out.contains("NODE_NAME") && out.contains("spec.nodeName"),
            "{out}"
        );
    }
}
