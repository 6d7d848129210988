//! `selfdestruct node-gate` against the fake API server. In-process on virtual
//! time (`common::vtime`): it removes the startup taint from its own node only,
//! keeps concurrent taint changes (JSON patch guarded by a `test`, retried),
//! waits for the required images, fails open at the timeout, labels its node warm
//! (with the taint's removal, or alone on a node without it, once the images are
//! listed), leaves an open labelled node alone, reports and retries denials. The real binary: it
//! exits 0 on SIGTERM, pauses without API access, and exits 2 without NODE_NAME.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::vtime::{self, Logs};
use common::*;
use fake_apiserver::{
    FakeCluster, FaultResponse, Matcher, NodeBuilder, RecordedRequest, Rule, Subject,
};
use k8s_openapi::api::core::v1::{ContainerImage, Taint};

const GATE: &str = "startup-taint.cluster-autoscaler.kubernetes.io/images-pending";
const DEDICATED: &str = "hub.jupyter.org/dedicated";
const IMAGE: &str = "quay.io/jupyter/scipy-notebook:2025-01-06";
const USER: &str = "system:serviceaccount:node-gate:node-gate";

/// The gate's RBAC as in manifests/node-gate: nodes get and patch, cluster-wide.
fn gate_subject() -> Subject {
    Subject::new(USER).rule(Rule::new(&["get", "patch"], &["nodes"], None))
}

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
    token: String,
}

impl Gate {
    fn new(nodes: &[NodeBuilder]) -> Gate {
        Self::on(FakeCluster::start(), nodes)
    }

    /// On a fake served in-process (the virtual-time tier).
    fn in_process(nodes: &[NodeBuilder]) -> Gate {
        Self::on(
            FakeCluster::in_process(fake_apiserver::Config::default()),
            nodes,
        )
    }

    fn on(fake: FakeCluster, nodes: &[NodeBuilder]) -> Gate {
        for n in nodes {
            fake.add_node(n.clone());
        }
        Gate {
            fake,
            home: tempdir("node-gate"),
            token: "gate-token".into(),
        }
    }

    /// Starts `selfdestruct node-gate` on `node` with a token for `subject`
    /// (bound to a pod of the DaemonSet on that node), fast test settings and `env`.
    fn start(&self, node: &str, subject: Subject, env: &[(&str, &str)]) -> Proc {
        self.fake
            .add_token(&self.token, subject.bound_to("node-gate-x1y2z"));
        let kubeconfig = self
            .fake
            .write_kubeconfig(&self.home, &self.token, "node-gate");
        let kc = kubeconfig.to_string_lossy().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("KUBECONFIG", &kc),
            ("NODE_NAME", node),
            ("SELFDESTRUCT_GATE_POLL", "1s"),
            ("SELFDESTRUCT_LOG_LEVEL", "debug"),
        ];
        all.extend_from_slice(env);
        Proc::spawn(command(bin(), &["node-gate"], &all, &self.home))
    }

    /// Runs the gate in-process on `node` (see [`Gate::start`]).
    fn run(&self, node: &str, subject: Subject, env: &[(&str, &str)]) -> vtime::Agent {
        self.fake
            .add_token(&self.token, subject.bound_to("node-gate-x1y2z"));
        let mut all: Vec<(&str, &str)> =
            vec![("NODE_NAME", node), ("SELFDESTRUCT_GATE_POLL", "1s")];
        for (k, v) in env {
            all.retain(|(name, _)| name != k);
            all.push((k, v));
        }
        vtime::gate(&self.fake, &self.token, &all)
    }

    fn taint_keys(&self, node: &str) -> Vec<String> {
        self.fake
            .get_node(node)
            .and_then(|n| n.spec)
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect()
    }

    fn gated(&self, node: &str) -> bool {
        self.taint_keys(node).iter().any(|k| k == GATE)
    }

    fn node_requests(&self, method: &str) -> Vec<RecordedRequest> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.path.starts_with("/api/v1/nodes"))
            .collect()
    }

    fn patches(&self) -> Vec<RecordedRequest> {
        self.node_requests("PATCH")
    }

    /// Waits (virtual time) until the gate taint is gone from `node` and the
    /// fake has recorded the successful PATCH.
    async fn wait_open(&self, node: &str, timeout: Duration, logs: &Logs) {
        let path = format!("/api/v1/nodes/{node}");
        assert!(
            vtime::until(timeout, || !self.gated(node)
                && self
                    .patches()
                    .iter()
                    .any(|p| p.path == path && p.status == 200))
            .await,
            "the gate taint is still on {node}; requests {:?}\n{}",
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
    // Exiting at all within `terminate`'s wait is the check; how fast is a figure
    // (a busy machine may stretch it), printed, not asserted.
    eprintln!("SIGTERM to exit: {took:?}");
}

#[tokio::test(start_paused = true)]
async fn removes_the_taint_from_its_own_node_only() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true), user_node("n2", true)]);
    let gate = g.run("n1", gate_subject(), &[]);
    g.wait_open("n1", Duration::from_secs(5), &logs).await;
    shows(&logs, "gate opened: taint removed", Duration::from_secs(2)).await;

    assert_eq!(g.taint_keys("n1"), vec![DEDICATED.to_string()]);
    assert_eq!(g.taint_keys("n2"), vec![DEDICATED, GATE]);
    let patches = g.patches();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let p = &patches[0];
    assert_eq!(p.path, "/api/v1/nodes/n1");
    assert_eq!(p.status, 200);
    assert_eq!(
        p.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    let body = p.body.clone().expect("a JSON patch");
    assert_eq!(body[0]["op"], "test");
    assert_eq!(body[0]["path"], "/spec/taints");
    assert_eq!(body[0]["value"].as_array().map(Vec::len), Some(2));
    assert_eq!(body[1]["op"], "remove");
    assert_eq!(body[1]["path"], "/spec/taints/1");
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

/// A node tainted with the gate key twice (NoSchedule and NoExecute, as a node
/// pool and a provisioner may both add it): both go in one guarded patch.
#[tokio::test(start_paused = true)]
async fn every_taint_with_the_gate_key_is_removed_in_one_patch() {
    let (logs, _guard) = Logs::capture();
    let node = user_node("n1", true).taint(GATE, "", "NoExecute");
    let g = Gate::in_process(&[node]);
    assert_eq!(g.taint_keys("n1"), vec![DEDICATED, GATE, GATE]);
    let gate = g.run("n1", gate_subject(), &[]);
    g.wait_open("n1", Duration::from_secs(5), &logs).await;
    shows(&logs, "gate opened: taint removed", Duration::from_secs(2)).await;
    assert_eq!(g.taint_keys("n1"), vec![DEDICATED.to_string()]);
    let patches = g.patches();
    assert_eq!(patches.len(), 1, "one patch: {patches:?}");
    let body = patches[0].body.clone().expect("a JSON patch");
    assert_eq!(body[0]["op"], "test");
    assert_eq!(body[0]["value"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        body[1],
        serde_json::json!({"op": "remove", "path": "/spec/taints/2"})
    );
    assert_eq!(
        body[2],
        serde_json::json!({"op": "remove", "path": "/spec/taints/1"})
    );
    assert_stops(gate, &logs).await;
}

/// An accepted PATCH whose answer still shows the gate taint (a proxy or
/// webhook that dropped the change) does not open the gate: the gate reads
/// the node again and patches again, and says "gate opened" only then.
#[tokio::test(start_paused = true)]
async fn the_gate_is_open_only_once_the_node_shows_no_gate_taint() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let unchanged = serde_json::to_value(g.fake.get_node("n1").expect("node")).expect("JSON");
    g.fake.fail_next(
        Matcher::new("PATCH", "/api/v1/nodes/n1"),
        FaultResponse::json(200, unchanged),
        1,
    );
    let gate = g.run("n1", gate_subject(), &[]);
    g.wait_open("n1", Duration::from_secs(8), &logs).await;
    shows(&logs, "gate opened: taint removed", Duration::from_secs(2)).await;
    let log = logs.text();
    assert!(
        log.contains("does not show the gate taint gone and the label set; reading the node again"),
        "{log}"
    );
    assert_eq!(log.matches("gate opened").count(), 1, "{log}");
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(statuses, vec![200, 200], "patched again after reading");
    assert_eq!(g.taint_keys("n1"), vec![DEDICATED.to_string()]);
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn a_concurrent_taint_change_is_kept_and_the_patch_retried() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    // Every request waits 300 ms before it is served: the taint added right
    // after the gate's GET lands before its PATCH is applied.
    g.fake.set_latency(Duration::from_millis(300));
    let gate = g.run("n1", gate_subject(), &[]);
    let get = vtime::until_some(Duration::from_secs(5), || {
        g.fake
            .find_request(|r| r.method == "GET" && r.path == "/api/v1/nodes/n1" && r.status == 200)
    })
    .await;
    assert!(get.is_some(), "no GET:\n{}", logs.text());
    assert!(
        g.patches().is_empty(),
        "the PATCH came too early for the test"
    );
    assert!(g.fake.modify_node("n1", |n| {
        let taints = n
            .spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new);
        taints.insert(
            0,
            Taint {
                key: "ToBeDeletedByClusterAutoscaler".into(),
                value: Some("1700000000".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            },
        );
    }));
    g.wait_open("n1", Duration::from_secs(8), &logs).await;

    assert_eq!(
        g.taint_keys("n1"),
        vec![
            "ToBeDeletedByClusterAutoscaler".to_string(),
            DEDICATED.to_string()
        ],
        "the concurrently added taint must survive"
    );
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(
        statuses,
        vec![422, 200],
        "refused by the test, then retried"
    );
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
    g.fake.set_latency(Duration::ZERO);
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn waits_for_the_required_images_then_opens() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let gate = g.run(
        "n1",
        gate_subject(),
        &[
            ("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE),
            ("SELFDESTRUCT_GATE_TIMEOUT", "1m"),
        ],
    );
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
    assert!(g.gated("n1"));
    // Polls once a second (SELFDESTRUCT_GATE_POLL's floor), not in a busy loop:
    // each read at least a poll after the one before.
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

    g.fake.set_node_images(
        "n1",
        vec![ContainerImage {
            names: Some(vec![
                format!(
                    "{}@sha256:{}",
                    IMAGE.split(':').next().unwrap_or_default(),
                    "ab".repeat(32)
                ),
                IMAGE.to_string(),
            ]),
            size_bytes: Some(6_000_000_000),
        }],
    );
    let shown = g.fake.clock().instant();
    // Opened on the first read that saw the images: at the next poll.
    g.wait_open("n1", Duration::from_secs(1), &logs).await;
    assert!(g.patches()[0].at - shown <= Duration::from_secs(1));
    assert_eq!(g.patches().len(), 1);
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
async fn fails_open_after_the_timeout_with_a_warning() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    // A poll that does not divide the timeout: the gate must open at the
    // timeout, not at the next poll after it.
    let started = g.fake.clock().instant();
    let gate = g.run(
        "n1",
        gate_subject(),
        &[
            ("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE),
            ("SELFDESTRUCT_GATE_TIMEOUT", "3s"),
            ("SELFDESTRUCT_GATE_POLL", "2s"),
        ],
    );
    g.wait_open("n1", Duration::from_secs(6), &logs).await;
    // Virtual time: exactly at the timeout (plus the request's own few ms).
    let took = g.patches()[0].at - started;
    assert!(took >= Duration::from_secs(3), "opened after {took:?}");
    assert!(took < Duration::from_millis(3100), "opened after {took:?}");
    shows(&logs, "gate opened", Duration::from_secs(1)).await;
    let log = logs.text();
    let warning = log
        .lines()
        .find(|l| l.contains("fail-open"))
        .unwrap_or_else(|| panic!("no fail-open warning:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains(IMAGE), "{warning}");
    assert_eq!(log.matches("fail-open").count(), 1, "{log}");
    assert_eq!(g.taint_keys("n1"), vec![DEDICATED.to_string()]);
    assert_eq!(g.patches().len(), 1);
    assert_stops(gate, &logs).await;
}

const WARM: &str = "selfdestruct.io/images-warm";

fn warm_label(g: &Gate, node: &str) -> Option<String> {
    g.fake
        .get_node(node)
        .and_then(|n| n.metadata.labels)
        .and_then(|l| l.get(WARM).cloned())
}

fn the_image() -> Vec<ContainerImage> {
    vec![ContainerImage {
        names: Some(vec![IMAGE.to_string()]),
        size_bytes: Some(6_000_000_000),
    }]
}

#[tokio::test(start_paused = true)]
async fn a_node_without_the_taint_already_labelled_is_left_alone() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[
        user_node("n1", false).label(WARM, "true"),
        user_node("n2", true),
    ]);
    let gate = g.run(
        "n1",
        gate_subject(),
        &[("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE)],
    );
    shows(
        &logs,
        "node has no gate taint: nothing to remove",
        Duration::from_secs(5),
    )
    .await;
    vtime::pass(Duration::from_secs(3600)).await;
    assert!(g.patches().is_empty());
    assert_eq!(g.node_requests("GET").len(), 1, "reads its node once");
    assert!(g.gated("n2"));
    assert_eq!(warm_label(&g, "n2"), None);
    assert_stops(gate, &logs).await;
}

/// On a node without the taint (a cluster that runs the DaemonSet for the label
/// alone) the gate waits for the images, then adds the warm label alone, in one
/// PATCH, and stops.
#[tokio::test(start_paused = true)]
async fn a_node_without_the_taint_is_labelled_warm_once_it_lists_the_images() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", false), user_node("n2", true)]);
    let gate = g.run(
        "n1",
        gate_subject(),
        &[("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE)],
    );
    shows(
        &logs,
        "waiting for images before opening the gate",
        Duration::from_secs(5),
    )
    .await;
    vtime::pass(Duration::from_secs(30)).await;
    assert!(
        g.patches().is_empty(),
        "labelled while the image was missing"
    );
    assert_eq!(warm_label(&g, "n1"), None);
    g.fake.set_node_images("n1", the_image());
    assert!(
        vtime::until(Duration::from_secs(2), || warm_label(&g, "n1").is_some()).await,
        "{}",
        logs.text()
    );
    assert_eq!(warm_label(&g, "n1").as_deref(), Some("true"));
    let patches = g.patches();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(
        patches[0].body,
        Some(serde_json::json!([{"op": "add",
            "path": "/metadata/labels/selfdestruct.io~1images-warm", "value": "true"}]))
    );
    assert_eq!(g.taint_keys("n1"), vec![DEDICATED.to_string()]);
    shows(&logs, "node labelled", Duration::from_secs(1)).await;
    vtime::pass(Duration::from_secs(600)).await;
    assert_eq!(g.patches().len(), 1, "done: no more patches");
    assert!(g.gated("n2"));
    assert_stops(gate, &logs).await;
}

/// After a fail-open the taint is gone but the node is not labelled: the gate
/// keeps reading it and labels it once the images are listed.
#[tokio::test(start_paused = true)]
async fn after_a_fail_open_the_label_waits_for_the_images() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let gate = g.run(
        "n1",
        gate_subject(),
        &[
            ("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE),
            ("SELFDESTRUCT_GATE_TIMEOUT", "3s"),
        ],
    );
    g.wait_open("n1", Duration::from_secs(6), &logs).await;
    assert_eq!(warm_label(&g, "n1"), None, "labelled without the images");
    vtime::pass(Duration::from_secs(30)).await;
    assert_eq!(g.patches().len(), 1);
    g.fake.set_node_images("n1", the_image());
    assert!(
        vtime::until(Duration::from_secs(2), || warm_label(&g, "n1").is_some()).await,
        "{}",
        logs.text()
    );
    assert_eq!(g.patches().len(), 2);
    assert_stops(gate, &logs).await;
}

/// With the taint and the images, the label goes in the patch that removes the taint.
#[tokio::test(start_paused = true)]
async fn the_warm_label_goes_in_the_patch_that_opens_the_gate() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true).images(the_image())]);
    let gate = g.run(
        "n1",
        gate_subject(),
        &[("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE)],
    );
    g.wait_open("n1", Duration::from_secs(5), &logs).await;
    assert_eq!(g.patches().len(), 1);
    assert_eq!(warm_label(&g, "n1").as_deref(), Some("true"));
    assert_stops(gate, &logs).await;
    // Without a label setting: the taint alone.
    let g = Gate::in_process(&[user_node("n2", true)]);
    let gate = g.run(
        "n2",
        gate_subject(),
        &[("SELFDESTRUCT_GATE_WARM_LABEL", "none")],
    );
    g.wait_open("n2", Duration::from_secs(5), &logs).await;
    assert_eq!(warm_label(&g, "n2"), None);
    assert_stops(gate, &logs).await;
}

#[test]
fn sigterm_while_waiting_exits_0() {
    let g = Gate::new(&[user_node("n1", true)]);
    let mut gate = g.start(
        "n1",
        gate_subject(),
        &[("SELFDESTRUCT_REQUIRED_IMAGES", IMAGE)],
    );
    assert!(gate.wait_for_log("waiting for images", Duration::from_secs(5)));
    assert_terminates(&mut gate);
    assert!(g.gated("n1"));
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
    let g = Gate::new(&[user_node("n1", true)]);
    let mut gate = g.start("n1", gate_subject(), INVALID_AGENT_SETTINGS);
    assert!(
        wait_until(Duration::from_secs(10), || !g.gated("n1")),
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
    let mut gate = Proc::spawn(command(
        bin(),
        &["node-gate"],
        &[("NODE_NAME", "n1")],
        &home,
    ));
    assert!(
        gate.wait_for_log("no API access", Duration::from_secs(5)),
        "{}",
        gate.log()
    );
    let log = gate.log();
    assert!(log.contains("plain pause container"), "{log}");
    assert!(log.contains("cannot remove its taint"), "{log}");
    std::thread::sleep(Duration::from_millis(300));
    assert_terminates(&mut gate);
}

#[tokio::test(start_paused = true)]
async fn rbac_403_on_patch_is_reported_and_retried() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let read_only = Subject::new(USER).rule(Rule::new(&["get"], &["nodes"], None));
    let gate = g.run("n1", read_only, &[]);
    shows(
        &logs,
        "not allowed to patch the own node",
        Duration::from_secs(5),
    )
    .await;
    assert!(logs.text().contains("ClusterRole"), "{}", logs.text());
    assert!(
        vtime::until(Duration::from_secs(5), || g.patches().len() >= 2).await,
        "the PATCH was not retried:\n{}",
        logs.text()
    );
    assert!(g.patches().iter().all(|p| p.status == 403));
    assert!(gate.is_running());
    assert!(g.gated("n1"));

    // The ClusterRole is fixed: the next retry opens the gate.
    g.fake.add_token(&g.token, gate_subject());
    g.wait_open("n1", Duration::from_secs(6), &logs).await;
    assert_eq!(g.patches().last().map(|p| p.status), Some(200));
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn a_401_is_retried_on_the_transient_backoff_not_the_denied_one() {
    // Credentials that expired for a moment: retried within seconds, not
    // after the polls a denial (403) waits, which are a minute here.
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    g.fake.fail_next(
        Matcher::new("PATCH", "/api/v1/nodes/n1"),
        FaultResponse::failure(401, "Unauthorized", "Unauthorized"),
        3,
    );
    let gate = g.run("n1", gate_subject(), &[("SELFDESTRUCT_GATE_POLL", "60s")]);
    g.wait_open("n1", Duration::from_secs(20), &logs).await;
    let statuses: Vec<u16> = g.patches().iter().map(|p| p.status).collect();
    assert_eq!(statuses, [401, 401, 401, 200], "{}", logs.text());
    assert!(logs.text().contains("(401"), "{}", logs.text());
    assert!(!logs.text().contains("ClusterRole"), "{}", logs.text());
    assert_stops(gate, &logs).await;
}

#[tokio::test(start_paused = true)]
async fn an_admission_denial_is_not_taken_for_a_conflict() {
    let (logs, _guard) = Logs::capture();
    let g = Gate::in_process(&[user_node("n1", true)]);
    let denial = "ValidatingAdmissionPolicy 'selfdestruct-node-gate' with binding \
                  'selfdestruct-node-gate' denied request: the node gate may only remove its taint from its own node";
    g.fake.fail_next(
        Matcher::new("PATCH", "/api/v1/nodes/n1"),
        FaultResponse::failure(
            422,
            "Invalid",
            &format!("nodes \"n1\" is forbidden: {denial}"),
        ),
        1,
    );
    let gate = g.run("n1", gate_subject(), &[]);
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
        let (code, out) = run_to_exit(&["node-gate"], env);
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains("NODE_NAME"), "{out}");
        assert!(out.contains("spec.nodeName"), "{out}");
    }
}
