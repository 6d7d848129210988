//! Moving to fresh nodes where only a fake can show it: no read access to Nodes, a
//! broken or expired watch, the node selector, a gated node's history. In-process on
//! virtual time (`common::vtime`). The moves themselves, one at a time onto a new node
//! until it is full, with the real scheduler and StatefulSet, are the real-stack tier's
//! (tests/cluster.rs).

mod common;

use std::time::Duration;

use common::cluster::NS;
use common::vtime::{self, Logs};
use fake_apiserver::{NodeBuilder, PodTemplate, RequestInfo};

fn node(name: &str) -> NodeBuilder {
    NodeBuilder::new(name).cpu("4").memory("16Gi")
}

#[tokio::test(start_paused = true)]
async fn without_node_permission_it_warns_and_falls_back_to_the_timer() {
    let (logs, _guard) = Logs::capture();
    let template = PodTemplate::placeholder("placeholder", "1", "4Gi");
    let s = vtime::with_nodes(3, &[node("node-a")], template).await;
    let env = [
        ("SELFDESTRUCT_MIN_LIFETIME", "2s"),
        ("SELFDESTRUCT_MAX_LIFETIME", "4s"),
        ("SELFDESTRUCT_NODE_SETTLE", "1s"),
        ("SELFDESTRUCT_MOVE_JITTER", "1s"),
        ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
    ];
    let no_nodes = || |r: &RequestInfo| r.path.starts_with("/api/v1/nodes");
    let agents: Vec<vtime::Agent> = (0..3)
        .map(|i| vtime::agent_denied(&s, &format!("placeholder-{i}"), no_nodes(), &env))
        .collect();
    s.fake.add_node(node("node-d"));
    let moved = vtime::until(Duration::from_secs(30), || {
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
            .all(|e| e["note"].as_str().unwrap_or("").starts_with("lifetime ")),
        "every move came from the timer"
    );
    // Each agent warns once, not on every retry: they live through a retry of the
    // denied list (after 5-10 minutes).
    vtime::pass(Duration::from_secs(700)).await;
    let lists = |a: &vtime::Agent| {
        s.fake
            .count_requests(|r| r.path == "/api/v1/nodes" && r.token.as_deref() == Some(&a.token))
    };
    assert!(
        agents.iter().any(|a| lists(a) >= 2),
        "no agent retried the node list:\n{}",
        logs.text()
    );
    for a in &agents {
        let own = logs.of(&a.pod);
        assert!(own.matches("cannot list/watch nodes").count() <= 1, "{own}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_broken_or_expired_watch_is_listed_again_and_still_moves() {
    let (logs, _guard) = Logs::capture();
    let template = PodTemplate::placeholder("placeholder", "1", "4Gi");
    let s = vtime::with_nodes(2, &[node("node-a")], template).await;
    let env = [
        ("SELFDESTRUCT_NODE_SETTLE", "1s"),
        ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
    ];
    let _agent = vtime::agent(&s, "placeholder-0", &env);
    assert!(
        logs.show("watching nodes", Duration::from_secs(10)).await,
        "{}",
        logs.text()
    );
    // Hold the watch so the agent misses a change, compact the history and cut the
    // watch: resuming from its resourceVersion (now older than the compaction) gets
    // 410 Gone, so the agent must list again. Without the hold the agent could see the
    // change first, and resuming from the newest resourceVersion is legal (no 410), as
    // on a real API server.
    s.fake.stall_watches();
    vtime::pass(Duration::from_millis(50)).await;
    for i in 0..3 {
        s.fake.modify_node("node-a", |n| {
            let labels = n.metadata.labels.get_or_insert_default();
            labels.insert("churn".into(), i.to_string());
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
    // API timestamps have whole seconds: the new node's Ready time after the pod's
    // scheduling time.
    vtime::pass(Duration::from_millis(1100)).await;
    s.fake.add_node(node("node-b"));
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
    let template = PodTemplate::placeholder("placeholder", "1", "4Gi");
    let s = vtime::with_nodes(1, &[node("node-a").label("pool", "user")], template).await;
    let env = [
        ("SELFDESTRUCT_NODE_SETTLE", "0"),
        ("SELFDESTRUCT_NODE_SELECTOR", "pool=user"),
    ];
    let _agent = vtime::agent(&s, "placeholder-0", &env);
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
    s.fake.add_node(node("other"));
    vtime::pass(Duration::from_secs(600)).await;
    assert!(
        s.evictions().is_empty(),
        "a node outside the selector is no reason"
    );
    s.fake.add_node(node("node-b").label("pool", "user"));
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
    assert!(!logs.text().contains("node other"), "{}", logs.text());
    assert_eq!(s.evictions().len(), 1, "{}", logs.text());
}

/// The node gate's startup taint keeps a Ready new node from taking pods while its
/// images are pulled. A placeholder re-created in that time (here: one a user
/// preempted) has to land on an old node; that says nothing about the new node once
/// the gate opens (Kubernetes records no time for the taint's removal: the agents note
/// when they first see the node usable), and the placeholders move.
#[tokio::test(start_paused = true)]
async fn a_placeholder_re_created_while_the_gate_was_closed_does_not_mark_the_node_full() {
    let (logs, _guard) = Logs::capture();
    let template = PodTemplate::placeholder("placeholder", "1", "4Gi");
    let old = [node("node-a"), node("node-b"), node("node-c")];
    let s = vtime::with_nodes(6, &old, template.clone()).await;
    let env = [
        ("SELFDESTRUCT_NODE_SETTLE", "1s"),
        ("SELFDESTRUCT_MOVE_JITTER", "1s"),
    ];
    let mut agents: Vec<vtime::Agent> = (0..6)
        .map(|i| vtime::agent(&s, &format!("placeholder-{i}"), &env))
        .collect();
    assert!(vtime::until(Duration::from_secs(10), || s.fake.open_watches() >= 12).await);
    vtime::pass(Duration::from_secs(1)).await;
    let gate = selfdestruct_decision::model::IMAGES_PENDING_TAINT;
    s.fake
        .add_node(node("node-d").taint(gate, "true", "NoSchedule"));
    vtime::pass(Duration::from_secs(60)).await;
    assert!(
        s.evictions().is_empty(),
        "moved towards a gated node:\n{}",
        logs.text()
    );
    // A placeholder goes (a user preempted it); its successor, created after node-d
    // became Ready, lands on an old node (node-d is gated), and its agent starts.
    agents.pop();
    assert!(s.fake.delete_pod(NS, "placeholder-5"));
    vtime::pass(Duration::from_secs(2)).await;
    let now = s.fake.clock().wall();
    s.fake
        .add_pod(template.running_pod(NS, "placeholder-5", "node-c", now));
    agents.push(vtime::agent(&s, "placeholder-5", &env));
    vtime::pass(Duration::from_secs(30)).await;
    assert!(s.evictions().is_empty(), "{}", logs.text());
    // The gate opens: the placeholders move towards node-d.
    s.fake.set_node_taints("node-d", vec![]);
    assert!(
        vtime::until(Duration::from_secs(120), || !s.evictions().is_empty()).await,
        "nothing moved once node-d's gate opened:\n{}",
        logs.text()
    );
    assert!(
        logs.show("moving: node node-d Ready", Duration::from_secs(5))
            .await,
        "{}",
        logs.text()
    );
    assert!(
        !logs.text().contains("node node-d is full"),
        "{}",
        logs.text()
    );
}
