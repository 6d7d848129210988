//! Moving to fresh nodes, end to end: one agent per placeholder pod (started and
//! stopped by a kubelet emulation), a fake API server with nodes, a StatefulSet, a
//! PDB and a LeastAllocated scheduler. In-process on virtual time
//! (`common::vtime`); the fleet of real processes is in tests/hardening.rs.

mod common;

use std::time::Duration;

use common::cluster::{NS, Scene, events_path, is_event_about};
use common::vtime::{self, Kubelet, Logs};
use fake_apiserver::{Config, FakeCluster, NodeBuilder, PodTemplate, Rule, Subject};
use k8s_openapi::api::core::v1::{ContainerImage, Pod};

const USER_IMAGE: &str = "quay.io/jupyter/scipy-notebook:2024-05-01";

fn user_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "users", "labels": {"component": "singleuser-server"}},
        "spec": {"nodeName": node, "containers": [{"name": "notebook", "image": USER_IMAGE,
                 "resources": {"requests": {"cpu": "6", "memory": "24Gi"}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("valid pod")
}

/// Three busy 8-CPU nodes, each with 6 CPUs of users and two 1-CPU placeholders.
/// A new 4-CPU node takes three placeholders before the default scheduler
/// (LeastAllocated, counting the incoming pod) rates it no better than an old
/// node: a fourth move is the one wasted move, and then moves stop.
async fn busy_cluster() -> Scene {
    let fake = FakeCluster::in_process(Config::default());
    for n in ["node-a", "node-b", "node-c"] {
        fake.add_node(NodeBuilder::new(n).cpu("8").memory("32Gi"));
        fake.add_pod(user_pod(&format!("user-{n}"), n));
    }
    // A real node is registered seconds before any pod can be scheduled onto it
    // (it is NotReady first). API times have whole seconds: without this pause the
    // old nodes would be created in the second their placeholders were scheduled
    // in, which counts as new (and a sibling landing there as no sign of a full node).
    vtime::pass(Duration::from_secs(1)).await;
    fake.add_statefulset(
        NS,
        "placeholder",
        6,
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    );
    fake.add_pdb(
        NS,
        "placeholder",
        "app.kubernetes.io/instance=placeholder",
        1,
    );
    let running = vtime::until(Duration::from_secs(60), || {
        fake.pods(NS)
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count()
            == 6
    })
    .await;
    assert!(running);
    for n in ["node-a", "node-b", "node-c"] {
        assert_eq!(
            placeholders_on(&fake, n),
            2,
            "two placeholders per old node"
        );
    }
    Scene {
        fake,
        home: common::tempdir("move"),
    }
}

fn placeholders_on(fake: &FakeCluster, node: &str) -> usize {
    fake.pods(NS)
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count()
}

fn image(names: &[&str]) -> ContainerImage {
    ContainerImage {
        names: Some(names.iter().map(|s| s.to_string()).collect()),
        size_bytes: Some(8_000_000_000),
    }
}

const FAST: &[(&str, &str)] = &[
    ("SELFDESTRUCT_NODE_SETTLE", "1s"),
    ("SELFDESTRUCT_MOVE_JITTER", "1s"),
    ("SELFDESTRUCT_REQUIRED_IMAGES", USER_IMAGE),
];

#[tokio::test(start_paused = true)]
async fn placeholders_move_one_at_a_time_onto_a_new_node_once_it_is_ready_with_images() {
    let (logs, _guard) = Logs::capture();
    let s = busy_cluster().await;
    let originals: Vec<(String, String)> = s
        .fake
        .pods(NS)
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default(),
                p.metadata.uid.clone().unwrap_or_default(),
            )
        })
        .collect();
    let mut kubelet = Kubelet::new(&s, FAST, Subject::placeholder_agent(NS, "placeholder"));
    assert!(
        kubelet
            .run_until(Duration::from_secs(10), |_| { kubelet_watching(&s) })
            .await,
        "agents did not start watching"
    );
    // API timestamps have whole seconds, and a node is new only if it was created
    // after the own pod was scheduled: let the second of the scheduling end.
    vtime::pass(Duration::from_secs(1)).await;
    // 1. A fourth node appears NotReady: nothing moves.
    s.fake.add_node(
        NodeBuilder::new("node-d")
            .cpu("4")
            .memory("16Gi")
            .ready(false),
    );
    kubelet.run_until(Duration::from_secs(600), |_| false).await;
    assert!(s.evictions().is_empty(), "moved towards a NotReady node");
    // 2. Ready, but the user image is not pulled yet: still nothing.
    s.fake.set_node_ready("node-d", true);
    kubelet.run_until(Duration::from_secs(600), |_| false).await;
    assert!(
        s.evictions().is_empty(),
        "moved before the images were there"
    );
    // 3. The image appears: placeholders move onto it, one at a time.
    let images_at = s.fake.clock().instant();
    s.fake.set_node_images("node-d", vec![image(&[USER_IMAGE])]);
    let filled = kubelet
        .run_until(Duration::from_secs(40), |s| {
            placeholders_on(&s.fake, "node-d") == 3
        })
        .await;
    assert!(filled, "node-d did not fill up:\n{}", logs.text());
    // 4. The new node is full. By design at most one more move is wasted: its
    // replacement lands on an old node, every other agent then reads node-d as full,
    // and no move follows. Wait for exactly that state, not for a quiet window: a
    // placeholder in PDB backoff may make the wasted move late.
    let settled = kubelet
        .run_until(Duration::from_secs(120), |s| {
            let wasted = wasted_moves(s, &originals);
            !wasted.is_empty()
                && wasted
                    .iter()
                    .all(|(_, replacement)| is_running(s, replacement))
        })
        .await;
    assert!(settled, "the one wasted move never came:\n{}", logs.text());
    let unmoved: Vec<String> = originals
        .iter()
        .filter(|(name, uid)| s.uid(name) == *uid)
        .map(|(_, uid)| uid.clone())
        .collect();
    let all_saw_full = kubelet
        .run_until(Duration::from_secs(30), |_| {
            unmoved
                .iter()
                .all(|uid| logs.of_uid(uid).contains("node node-d is full"))
        })
        .await;
    assert!(
        all_saw_full,
        "every unmoved placeholder reads node-d as full:\n{}",
        logs.text()
    );
    // And an hour later, nothing has moved since.
    let moves = s.evictions().len();
    kubelet.step = Duration::from_secs(1);
    kubelet
        .run_until(Duration::from_secs(3600), |_| false)
        .await;
    assert_eq!(s.evictions().len(), moves, "{}", logs.text());
    let all = s.evictions();
    let ok: Vec<_> = all.iter().filter(|r| r.status == 201).collect();
    eprintln!(
        "evictions: {} accepted, {} refused by the PDB",
        ok.len(),
        all.len() - ok.len()
    );
    for r in all.iter().filter(|r| r.status != 201) {
        eprintln!(
            "refused: {} {} -> {} at +{:?}",
            r.method,
            r.path,
            r.status,
            r.at.duration_since(images_at)
        );
    }
    assert!(
        ok.iter().all(|r| r.at >= images_at),
        "no move before the images"
    );
    let wasted = wasted_moves(&s, &originals);
    assert_eq!(wasted.len(), 1, "at most one wasted move: {wasted:?}");
    let first_wasted = ok
        .iter()
        .find(|r| r.path.split('/').nth(6) == Some(wasted[0].0.as_str()))
        .expect("the wasted move's eviction");
    assert!(
        ok.iter().all(|r| r.at <= first_wasted.at),
        "a move after the wasted one:\n{}",
        logs.text()
    );
    let on_new = placeholders_on(&s.fake, "node-d");
    assert_eq!(
        ok.len(),
        on_new + 1,
        "{} moves for {on_new} placeholders on the new node and one wasted\n{}",
        ok.len(),
        logs.text()
    );
    // Only original pods moved, each at most once (a replacement never chases the node).
    let mut moved = Vec::new();
    for r in &ok {
        let uid = r
            .body
            .as_ref()
            .map(|b| b["deleteOptions"]["preconditions"]["uid"].clone())
            .unwrap_or_default();
        let uid = uid.as_str().unwrap_or_default().to_string();
        assert!(
            originals.iter().any(|(_, u)| *u == uid),
            "a replacement moved: {uid}"
        );
        assert!(!moved.contains(&uid), "moved twice: {uid}");
        moved.push(uid);
    }
    // One at a time: each accepted eviction comes after the previous one's
    // replacement pod was Running again, as the API server saw it (the pod's start
    // time, which has second precision: compared as a floor, it can miss an overlap
    // within one second but never reports a false one).
    for pair in ok.windows(2) {
        let (first, next) = (pair[0], pair[1]);
        let name = first.path.split('/').nth(6).unwrap_or_default();
        let replaced = s.started_at(name).expect("the replacement is running");
        assert!(
            next.time >= replaced,
            "two placeholders were moving at once: {} evicted before {name}'s replacement ran",
            next.path
        );
    }
    // Nothing but each placeholder's own pod was ever mutated.
    let all: Vec<(String, String)> = kubelet
        .started
        .iter()
        .map(|(n, u, _)| (n.clone(), format!("\"{u}\"")))
        .collect();
    let allowed: Vec<(&str, serde_json::Value)> = all
        .iter()
        .map(|(n, u)| {
            (
                n.as_str(),
                serde_json::from_str::<serde_json::Value>(u).unwrap_or_default(),
            )
        })
        .collect();
    for r in s.mutations() {
        let target = r.path.split('/').nth(6).unwrap_or_default();
        let body = r.body.clone().unwrap_or_default();
        let ok = if r.path.starts_with(&events_path()) {
            allowed.iter().any(|(n, _)| is_event_about(&r, n))
        } else {
            allowed
                .iter()
                .any(|(n, u)| *n == target && body["deleteOptions"]["preconditions"]["uid"] == *u)
        };
        assert!(ok, "foreign mutation {} {}", r.method, r.path);
        assert!(
            r.path.starts_with(&format!("/api/v1/namespaces/{NS}/"))
                || r.path.starts_with(&events_path()),
            "outside the namespace: {}",
            r.path
        );
    }
    let logs = logs.text();
    assert!(
        logs.contains("node node-d Ready"),
        "the reason names the node:\n{logs}"
    );
    assert!(logs.contains("with images pulled"), "{logs}");
}

/// Accepted moves of original placeholders whose replacement landed on an old node:
/// (name, replacement uid).
fn wasted_moves(s: &Scene, originals: &[(String, String)]) -> Vec<(String, String)> {
    originals
        .iter()
        .filter_map(|(name, uid)| {
            let now = s.fake.get_pod(NS, name)?;
            let replacement = now.metadata.uid.clone()?;
            let node = now.spec.as_ref()?.node_name.clone()?;
            (replacement != *uid && node != "node-d").then(|| (name.clone(), replacement))
        })
        .collect()
}

fn is_running(s: &Scene, uid: &str) -> bool {
    s.fake.pods(NS).iter().any(|p| {
        p.metadata.uid.as_deref() == Some(uid)
            && p.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Running")
    })
}

fn kubelet_watching(s: &Scene) -> bool {
    s.fake.open_watches() >= 12
}

#[tokio::test(start_paused = true)]
async fn without_node_permission_it_warns_and_falls_back_to_the_timer() {
    let (logs, _guard) = Logs::capture();
    let s = busy_cluster().await;
    let no_nodes = Subject::new("system:serviceaccount:placeholders:placeholder")
        .rule(Rule::new(
            &["get", "list", "watch", "delete"],
            &["pods"],
            Some(NS),
        ))
        .rule(Rule::new(&["create"], &["pods/eviction"], Some(NS)))
        .rule(Rule::new(&["create"], &["events"], Some(NS)));
    let mut kubelet = Kubelet::new(
        &s,
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "2s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "4s"),
            ("SELFDESTRUCT_NODE_SETTLE", "1s"),
            ("SELFDESTRUCT_MOVE_JITTER", "1s"),
        ],
        no_nodes,
    );
    s.fake
        .add_node(NodeBuilder::new("node-d").cpu("3").memory("12Gi"));
    let moved = kubelet
        .run_until(Duration::from_secs(30), |s| {
            s.evictions().iter().filter(|r| r.status == 201).count() >= 2
        })
        .await;
    let all = logs.text();
    assert!(moved, "timer moves did not happen:\n{all}");
    assert!(
        all.contains("cannot list/watch nodes"),
        "a clear warning:\n{all}"
    );
    assert!(
        all.contains("rbac/node-reader"),
        "names the missing permission:\n{all}"
    );
    let events = s.fake.events(NS);
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|e| e.message.as_deref().unwrap_or("").starts_with("lifetime ")),
        "every move came from the timer"
    );
    // Each agent warns once, not on every retry: the agents running now live
    // through a retry of the denied list (after 5-10 minutes; no agent is
    // started meanwhile, so no pod moves twice).
    vtime::pass(Duration::from_secs(700)).await;
    let retried = kubelet.agents.values().any(|(_, a)| {
        s.fake
            .count_requests(|r| r.path == "/api/v1/nodes" && r.token.as_deref() == Some(&a.token))
            >= 2
    });
    assert!(retried, "no agent retried the node list:\n{}", logs.text());
    for uid in kubelet.agents.keys() {
        let own = logs.of_uid(uid);
        assert!(own.matches("cannot list/watch nodes").count() <= 1, "{own}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_broken_or_expired_watch_is_listed_again_and_still_moves() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::with_nodes(
        2,
        &[NodeBuilder::new("node-a").cpu("4").memory("16Gi")],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await;
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_NODE_SETTLE", "1s"),
            ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
        ],
    );
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    // Hold the watch so the agent misses a change, compact the history and
    // cut the watch: resuming from its resourceVersion (now older than the
    // compaction) gets 410 Gone, so the agent must list again. Without the
    // hold the agent could see the change first, and resuming from the newest
    // resourceVersion is legal (no 410), as on a real API server.
    s.fake.stall_watches();
    vtime::pass(Duration::from_millis(50)).await;
    for i in 0..3 {
        s.fake.modify_node("node-a", |n| {
            n.metadata
                .labels
                .get_or_insert_default()
                .insert("churn".into(), i.to_string());
        });
    }
    s.fake.compact();
    s.fake.drop_watches_mid_line();
    s.fake.resume_watches();
    assert!(
        logs.show("listing again", Duration::from_secs(15)).await,
        "no re-list after 410:\n{}",
        logs.text()
    );
    // API timestamps have whole seconds: make the new node's Ready time later
    // than the pod's scheduling time.
    vtime::pass(Duration::from_millis(1100)).await;
    s.fake
        .add_node(NodeBuilder::new("node-b").cpu("4").memory("16Gi"));
    assert!(
        vtime::request(&s, Duration::from_secs(15), |r| r.is_eviction())
            .await
            .is_some(),
        "no move after the re-list:\n{}",
        logs.text()
    );
    assert!(
        logs.show("node node-b Ready", Duration::from_secs(3)).await,
        "{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn the_node_selector_limits_which_nodes_count() {
    let (logs, _guard) = Logs::capture();
    let s = vtime::with_nodes(
        1,
        &[NodeBuilder::new("node-a")
            .cpu("4")
            .memory("16Gi")
            .label("pool", "user")],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await;
    let _agent = vtime::agent(
        &s,
        "placeholder-0",
        &[
            ("SELFDESTRUCT_NODE_SETTLE", "0"),
            ("SELFDESTRUCT_NODE_SELECTOR", "pool=user"),
        ],
    );
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    // "watching nodes" follows the list; the watch request comes just after.
    let watch = vtime::request(&s, Duration::from_secs(10), |r| {
        r.path == "/api/v1/nodes" && r.watch
    })
    .await
    .expect("a node watch");
    assert_eq!(
        watch.query_param("labelSelector").as_deref(),
        Some("pool=user")
    );
    // A node outside the selector: no reason to move, for ten minutes; then one
    // inside, and the move is for that one.
    s.fake
        .add_node(NodeBuilder::new("other").cpu("4").memory("16Gi"));
    vtime::pass(Duration::from_secs(600)).await;
    assert!(
        s.evictions().is_empty(),
        "a node outside the selector is no reason"
    );
    s.fake.add_node(
        NodeBuilder::new("node-b")
            .cpu("4")
            .memory("16Gi")
            .label("pool", "user"),
    );
    assert!(
        vtime::until(Duration::from_secs(10), || !s.evictions().is_empty()).await,
        "{}",
        logs.text()
    );
    assert!(
        logs.show("moving: node node-b Ready", Duration::from_secs(5))
            .await,
        "the move is for node-b:\n{}",
        logs.text()
    );
    assert!(
        !logs.text().contains("node other"),
        "a node outside the selector is no reason:\n{}",
        logs.text()
    );
    assert_eq!(s.evictions().len(), 1, "{}", logs.text());
}

/// The node gate's startup taint keeps a Ready new node from taking pods while
/// its images are pulled. A placeholder re-created in that time (here: one a user
/// preempted) has to land on an old node; that says nothing about the new node
/// once the gate opens (Kubernetes records no time for the taint's removal: the
/// agents note when they first see the node usable), and the placeholders move.
#[tokio::test(start_paused = true)]
async fn a_placeholder_re_created_while_the_gate_was_closed_does_not_mark_the_node_full() {
    let (logs, _guard) = Logs::capture();
    let s = busy_cluster().await;
    let mut kubelet = Kubelet::new(
        &s,
        &[
            ("SELFDESTRUCT_NODE_SETTLE", "1s"),
            ("SELFDESTRUCT_MOVE_JITTER", "1s"),
        ],
        Subject::placeholder_agent(NS, "placeholder"),
    );
    assert!(
        kubelet
            .run_until(Duration::from_secs(10), |_| { kubelet_watching(&s) })
            .await,
        "agents did not start watching"
    );
    vtime::pass(Duration::from_secs(1)).await;
    let gate = selfdestruct_decision::model::IMAGES_PENDING_TAINT;
    s.fake
        .add_node(NodeBuilder::new("node-d").cpu("4").memory("16Gi").taint(
            gate,
            "true",
            "NoSchedule",
        ));
    kubelet.run_until(Duration::from_secs(60), |_| false).await;
    assert!(
        s.evictions().is_empty(),
        "moved towards a gated node:\n{}",
        logs.text()
    );
    // A placeholder goes (a user preempted it); its successor is created after
    // node-d became Ready and, node-d being gated, lands on an old node.
    let uid = s.uid("placeholder-5");
    assert!(s.fake.delete_pod(NS, "placeholder-5"));
    let back = kubelet
        .run_until(Duration::from_secs(60), |s| {
            s.fake.get_pod(NS, "placeholder-5").is_some_and(|p| {
                p.metadata.uid.as_deref() != Some(uid.as_str())
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some("node-d")
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        })
        .await;
    assert!(
        back,
        "the successor did not run on an old node:\n{}",
        logs.text()
    );
    kubelet.run_until(Duration::from_secs(30), |_| false).await;
    assert!(s.evictions().is_empty(), "{}", logs.text());
    // The gate opens: placeholders move onto node-d.
    s.fake.set_node_taints("node-d", vec![]);
    let moved = kubelet
        .run_until(Duration::from_secs(120), |s| {
            placeholders_on(&s.fake, "node-d") >= 1
        })
        .await;
    assert!(
        moved,
        "nothing moved onto node-d once its gate opened:\n{}",
        logs.text()
    );
    assert!(
        !logs
            .text()
            .contains("node node-d is full: sibling placeholder-5"),
        "{}",
        logs.text()
    );
}
