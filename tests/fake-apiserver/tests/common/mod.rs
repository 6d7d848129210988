//! Shared setup: the cluster the fixtures were captured from.
#![allow(dead_code)]

use std::time::Duration;

use fake_apiserver::{Config, FakeCluster, NodeBuilder, PodTemplate, Rule, Subject};

pub const NS: &str = "placeholders";
pub const SA_USER: &str = "system:serviceaccount:placeholders:placeholder";

/// Short delays so tests take seconds.
pub fn fast_config() -> Config {
    Config {
        bookmark_interval: Duration::from_millis(200),
        recreate_delay: Duration::from_millis(50),
        start_delay: Duration::from_millis(20),
        termination_delay: Duration::from_millis(20),
        pdb_disruption_expiry: Duration::from_secs(2),
        seed: Some(42),
        ..Config::default()
    }
}

/// The Role of the fixtures: pods get/list/watch/delete, pods/eviction create,
/// events create in `placeholders`; no node access.
pub fn fixture_subject() -> Subject {
    Subject::new(SA_USER)
        .rule(Rule::new(
            &["get", "list", "watch", "delete"],
            &["pods"],
            Some(NS),
        ))
        .rule(Rule::new(&["create"], &["pods/eviction"], Some(NS)))
        .rule(Rule::new(&["create"], &["events"], Some(NS)))
}

/// Namespace `placeholders`, StatefulSet `placeholder` x3, PDB maxUnavailable 1,
/// tokens `admin`, `p0`..`p2` (bound to placeholder-N), `unbound`; all pods Ready.
pub fn fixture_cluster() -> FakeCluster {
    let c = FakeCluster::start_with(fast_config());
    c.add_node(
        NodeBuilder::new("node-a")
            .label("hub.jupyter.org/node-purpose", "user")
            .realistic_images(2),
    );
    c.add_statefulset(
        NS,
        "placeholder",
        3,
        PodTemplate::placeholder("placeholder", "100m", "128Mi"),
    );
    c.add_pdb(
        NS,
        "placeholder",
        "app.kubernetes.io/instance=placeholder",
        1,
    );
    c.add_token("admin", Subject::admin());
    for i in 0..3 {
        c.add_token(
            &format!("p{i}"),
            fixture_subject().bound_to(&format!("placeholder-{i}")),
        );
    }
    c.add_token("unbound", fixture_subject());
    assert!(
        c.wait_pods_ready(NS, 3, Duration::from_secs(5)),
        "placeholders did not become ready"
    );
    c
}

pub fn uid_of(c: &FakeCluster, name: &str) -> String {
    c.get_pod(NS, name)
        .and_then(|p| p.metadata.uid)
        .expect("pod exists")
}

pub fn pod_path(name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/pods/{name}")
}

pub fn eviction_body(name: &str, uid: Option<&str>) -> serde_json::Value {
    let mut v = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": NS}
    });
    if let Some(uid) = uid {
        v["deleteOptions"] = serde_json::json!({"preconditions": {"uid": uid}});
    }
    v
}
