//! Watch semantics: replay, synthetic ADDED, 410 after compaction, bookmarks,
//! timeouts, selector transitions, stalled and dropped streams.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fake_apiserver::{FakeCluster, NodeBuilder, Subject};
use serde_json::Value;

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

fn cluster_with_nodes() -> FakeCluster {
    let c = FakeCluster::start_with(fast_config());
    c.add_token("admin", Subject::admin());
    c.add_node(NodeBuilder::new("a").label("pool", "user"));
    c.add_node(NodeBuilder::new("b").label("pool", "core"));
    c
}

#[test]
fn replays_history_then_streams_live() {
    let c = cluster_with_nodes();
    let rv = c.resource_version();
    c.set_node_unschedulable("a", true);
    c.add_node(NodeBuilder::new("c"));
    let mut w = c
        .client(Some("admin"))
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=5"
        ))
        .unwrap();
    let e1 = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(
        (
            e1["type"].as_str(),
            e1["object"]["metadata"]["name"].as_str()
        ),
        (Some("MODIFIED"), Some("a"))
    );
    let e2 = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(
        (
            e2["type"].as_str(),
            e2["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("c"))
    );
    let rv1: u64 = e1["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let rv2: u64 = e2["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv < rv1 && rv1 < rv2);
    // Nothing more until something changes.
    assert!(w.next_event(Duration::from_millis(200)).is_err());
    c.remove_node("b");
    let e3 = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(
        (
            e3["type"].as_str(),
            e3["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("b"))
    );
}

#[test]
fn resource_version_zero_starts_with_added() {
    let c = cluster_with_nodes();
    for q in ["resourceVersion=0", "resourceVersion=", ""] {
        let mut w = c
            .client(Some("admin"))
            .watch(&format!(
                "/api/v1/nodes?watch=true&{q}&labelSelector=pool%3Duser"
            ))
            .unwrap();
        let e = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
        assert_eq!(e["type"], "ADDED", "{q}");
        assert_eq!(e["object"]["metadata"]["name"], "a");
        assert!(
            w.next_event(Duration::from_millis(150)).is_err(),
            "only the matching node"
        );
    }
}

#[test]
fn compacted_history_gives_410_expired() {
    let c = cluster_with_nodes();
    let old = c.resource_version() - 1;
    c.compact();
    let mut w = c
        .client(Some("admin"))
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={old}&allowWatchBookmarks=true"
        ))
        .unwrap();
    assert_eq!(w.status(), 200);
    let events = w.collect_until_end(Duration::from_secs(2)).unwrap();
    assert_eq!(types(&events), ["ERROR"]);
    let status = &events[0]["object"];
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    assert_eq!(
        status["message"],
        format!("too old resource version: {old} ({})", c.resource_version())
    );
    // From the current resourceVersion all is fine.
    let mut w = c
        .client(Some("admin"))
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={}&timeoutSeconds=1",
            c.resource_version()
        ))
        .unwrap();
    c.set_node_ready("a", false);
    let events = w.collect_until_end(Duration::from_secs(3)).unwrap();
    assert_eq!(types(&events), ["MODIFIED", "MODIFIED"]);
}

#[test]
fn bookmarks_and_timeout() {
    let c = cluster_with_nodes();
    c.set_bookmark_interval(Duration::from_millis(150));
    let rv = c.resource_version();
    let start = Instant::now();
    let mut w = c
        .client(Some("admin"))
        .watch(&format!("/api/v1/nodes?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1"))
        .unwrap();
    let events = w.collect_until_end(Duration::from_secs(3)).unwrap();
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(950) && elapsed < Duration::from_millis(2000),
        "{elapsed:?}"
    );
    assert!(events.len() >= 5, "{events:?}");
    for e in &events {
        assert_eq!(e["type"], "BOOKMARK");
        assert_eq!(
            e["object"],
            serde_json::json!({"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}})
        );
    }
    // Without allowWatchBookmarks: no bookmark, clean close at the timeout.
    let mut w = c
        .client(Some("admin"))
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .unwrap();
    assert!(
        w.collect_until_end(Duration::from_secs(3))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn label_selector_transitions() {
    let c = cluster_with_nodes();
    let rv = c.resource_version();
    let mut w = c
        .client(Some("admin"))
        .watch(&format!("/api/v1/nodes?watch=true&resourceVersion={rv}&labelSelector=pool%3Duser&timeoutSeconds=1"))
        .unwrap();
    let relabel = |name: &str, pool: &str| {
        c.modify_node(name, |n| {
            n.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("pool".into(), pool.into());
        })
    };
    relabel("b", "user"); // starts matching
    c.set_node_unschedulable("b", true); // still matching
    relabel("a", "core"); // stops matching
    relabel("a", "batch"); // still not matching
    let events = w.collect_until_end(Duration::from_secs(3)).unwrap();
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().into(),
                e["object"]["metadata"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("ADDED".into(), "b".into()),
            ("MODIFIED".into(), "b".into()),
            ("DELETED".into(), "a".into())
        ]
    );
}

#[test]
fn pod_watch_in_namespace() {
    let c = fixture_cluster();
    let mut w = c
        .client(Some("p0"))
        .watch(&format!("/api/v1/namespaces/{NS}/pods?watch=true&labelSelector=statefulset.kubernetes.io%2Fpod-name%3Dplaceholder-0&allowWatchBookmarks=true"))
        .unwrap();
    let first = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "placeholder-0");
    assert_eq!(first["object"]["kind"], "Pod");
    c.set_pod_ready(NS, "placeholder-1", false);
    c.set_pod_ready(NS, "placeholder-0", false);
    let next = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(next["type"], "MODIFIED");
    assert_eq!(next["object"]["metadata"]["name"], "placeholder-0");
    let bookmark = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "Pod");
    assert_eq!(c.open_watches(), 1);
}

#[test]
fn dropped_watches() {
    let c = cluster_with_nodes();
    let admin = c.client(Some("admin"));
    for mid_line in [false, true] {
        let mut w = admin
            .watch("/api/v1/nodes?watch=true&timeoutSeconds=30")
            .unwrap();
        assert_eq!(types(&w.collect_n(2)), ["ADDED", "ADDED"]);
        assert!(c.wait_for(|c| c.open_watches() == 1, Duration::from_secs(2)));
        if mid_line {
            c.drop_watches_mid_line();
        } else {
            c.drop_watches();
        }
        let err = w
            .next_event(Duration::from_secs(2))
            .expect_err("stream must break");
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
        assert!(c.wait_for(|c| c.open_watches() == 0, Duration::from_secs(2)));
    }
    // New watches are not affected by an earlier drop.
    let mut w = admin
        .watch("/api/v1/nodes?watch=true&timeoutSeconds=1")
        .unwrap();
    assert_eq!(
        w.collect_until_end(Duration::from_secs(3)).unwrap().len(),
        2
    );
}

#[test]
fn stalled_watches() {
    let c = cluster_with_nodes();
    c.set_bookmark_interval(Duration::from_millis(50));
    let rv = c.resource_version();
    let mut w = c
        .client(Some("admin"))
        .watch(&format!("/api/v1/nodes?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=30"))
        .unwrap();
    assert_eq!(
        w.next_event(Duration::from_secs(2)).unwrap().unwrap()["type"],
        "BOOKMARK"
    );
    c.stall_watches();
    std::thread::sleep(Duration::from_millis(100));
    // Drain what was in flight before the stall.
    while w.next_event(Duration::from_millis(100)).is_ok() {}
    c.set_node_unschedulable("a", true);
    assert!(
        w.next_event(Duration::from_millis(300)).is_err(),
        "stalled: nothing arrives"
    );
    c.resume_watches();
    let mut got_modified = false;
    for _ in 0..10 {
        let e = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
        if e["type"] == "MODIFIED" {
            got_modified = true;
            break;
        }
    }
    assert!(got_modified);
}

trait CollectN {
    fn collect_n(&mut self, n: usize) -> Vec<Value>;
}

impl CollectN for fake_apiserver::client::WatchStream {
    fn collect_n(&mut self, n: usize) -> Vec<Value> {
        (0..n)
            .map(|_| self.next_event(Duration::from_secs(2)).unwrap().unwrap())
            .collect()
    }
}

#[test]
fn send_initial_events_ends_with_marked_bookmark() {
    let c = cluster_with_nodes();
    let mut w = c
        .client(Some("admin"))
        .watch("/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
        .unwrap();
    let events = w.collect_n(3);
    assert_eq!(types(&events), ["ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(
        events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        events[2]["object"]["metadata"]["resourceVersion"],
        c.resource_version().to_string()
    );
}
