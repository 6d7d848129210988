//! Every capture in `fixtures/` (a real kube-apiserver v1.36.2) against the fake: what
//! the fake serves itself has the capture's status and shape; a hostile answer it does
//! not make up (RBAC's 403, an admission policy's 422, a budget's 429 or 500) is served
//! as captured when a test scripts it (`FaultResponse::captured`).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use fake_apiserver::{FaultResponse, Matcher, NodeBuilder};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// (status, body) of a capture.
fn fixture(name: &str) -> (u16, Value) {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join(name)).expect("a fixture"))
            .expect("fixture JSON");
    (
        v["status"].as_u64().expect("status") as u16,
        v["body"].clone(),
    )
}

/// The lines of a captured watch stream.
fn stream(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join(name)).expect("a fixture");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Paths of `expected`'s keys (recursively, first array element) missing in `actual`.
fn missing(expected: &Value, actual: &Value, path: &str, ignore: &[&str], out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e
                .iter()
                .filter(|(k, v)| !ignore.contains(&k.as_str()) && !v.is_null())
            {
                match a.get(k) {
                    None => out.push(format!("{path}/{k}")),
                    Some(av) => missing(ev, av, &format!("{path}/{k}"), ignore, out),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if let (Some(ev), Some(av)) = (e.first(), a.first()) {
                missing(ev, av, &format!("{path}/0"), ignore, out);
            }
        }
        (e, a) if std::mem::discriminant(e) != std::mem::discriminant(a) => {
            out.push(format!("{path} (type differs: {e} vs {a})"))
        }
        _ => {}
    }
}

/// Asserts that `actual` has every field of `expected` but those `ignore` names (a
/// space-separated list: what the fake leaves out, as no controller or kubelet fills it).
fn assert_shape(expected: &Value, actual: &Value, ignore: &str) {
    let ignore: Vec<&str> = ignore.split_whitespace().collect();
    let mut out = Vec::new();
    missing(expected, actual, "", &ignore, &mut out);
    assert!(
        out.is_empty(),
        "fields missing in the fake's answer: {out:#?}\n{actual:#}"
    );
}

/// The captures the fake reproduces itself, and those it serves when scripted.
const SERVED: &[&str] = &[
    "eviction-201.json",
    "eviction-409-uid-precondition.json",
    "nodes-list-200.json",
    "nodes-list-metadata-200.json",
    "nodes-watch-metadata.jsonl",
    "nodes-watch.jsonl",
    "pod-delete-200.json",
    "pod-delete-409-uid-precondition.json",
    "pod-get-200.json",
    "pod-get-404.json",
];
const SCRIPTED: &[&str] = &[
    "event-create-201.json",
    "eviction-422-admission-policy.json",
    "eviction-429-pdb.json",
    "eviction-500-two-pdbs.json",
    "nodes-list-403.json",
    "pod-delete-403-other-namespace.json",
    "pod-delete-422-admission-policy.json",
];

#[test]
fn every_capture_is_replayed() {
    for entry in std::fs::read_dir(fixtures()).expect("fixtures/") {
        let name = entry
            .expect("an entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".json") || name.ends_with(".jsonl") {
            assert!(
                SERVED.contains(&name.as_str()) || SCRIPTED.contains(&name.as_str()),
                "{name} has no test"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_scripted_capture_is_served_as_captured() {
    let c = cluster();
    for name in SCRIPTED {
        c.fail_next(Matcher::any(), FaultResponse::captured(name), 1);
        assert_eq!(
            call(&c, "GET", "/api/v1/nodes", None).await,
            fixture(name),
            "{name}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn pods_get_delete_and_evict_as_captured() {
    let c = cluster();
    let pod = format!("/api/v1/namespaces/{NS}/pods/placeholder-0");
    let uid = c
        .get_pod(NS, "placeholder-0")
        .and_then(|p| p.metadata.uid)
        .expect("a uid");
    let (code, body) = call(&c, "GET", &pod, None).await;
    let (want, expected) = fixture("pod-get-200.json");
    assert_eq!(code, want);
    assert_shape(
        &expected,
        &body,
        "managedFields volumes volumeMounts env securityContext ownerReferences generateName generation annotations hostname subdomain dnsPolicy enableServiceLinks priority priorityClassName preemptionPolicy restartPolicy schedulerName serviceAccount serviceAccountName imagePullPolicy terminationMessagePath terminationMessagePolicy hostIP hostIPs podIP podIPs qosClass imageID containerID lastState restartCount image volumeMounts allocatedResources resources user observedGeneration labels tolerations",
    );
    // A uid precondition that does not hold: 409, worded as the real server words it.
    let wrong = json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    let eviction = format!("{pod}/eviction");
    for (method, path, body, name) in [
        (
            "DELETE",
            &pod,
            wrong.clone(),
            "pod-delete-409-uid-precondition.json",
        ),
        (
            "POST",
            &eviction,
            json!({"kind": "Eviction", "deleteOptions": wrong}),
            "eviction-409-uid-precondition.json",
        ),
    ] {
        let (want, expected) = fixture(name);
        let expected = expected
            .to_string()
            .replace("dea66450-c714-40d3-8f33-076c30f7f827", &uid);
        let expected: Value = serde_json::from_str(&expected).expect("JSON");
        assert_eq!(
            call(&c, method, path, Some(body)).await,
            (want, expected),
            "{name}"
        );
    }
    // With its uid: deleted (the pod as the graceful deletion left it), then gone.
    let (code, body) = call(
        &c,
        "DELETE",
        &pod,
        Some(json!({"preconditions": {"uid": uid}})),
    )
    .await;
    let (want, expected) = fixture("pod-delete-200.json");
    assert_eq!(code, want);
    assert_shape(
        &expected["metadata"],
        &body["metadata"],
        "managedFields ownerReferences generateName generation annotations labels",
    );
    assert_eq!(call(&c, "GET", &pod, None).await.0, 404);
    let one = format!("/api/v1/namespaces/{NS}/pods/placeholder-1");
    let (code, body) = call(
        &c,
        "POST",
        &format!("{one}/eviction"),
        Some(json!({"kind": "Eviction"})),
    )
    .await;
    assert_eq!((code, body), fixture("eviction-201.json"));
    assert_eq!(call(&c, "GET", &one, None).await.0, 404, "evicted: gone");
    let nope = format!("/api/v1/namespaces/{NS}/pods/nope");
    assert_eq!(
        call(&c, "GET", &nope, None).await,
        fixture("pod-get-404.json")
    );
}

#[tokio::test(start_paused = true)]
async fn nodes_listed_and_watched_in_full_or_as_metadata_as_captured() {
    let c = cluster();
    let (code, body) = call(&c, "GET", "/api/v1/nodes", None).await;
    let (want, expected) = fixture("nodes-list-200.json");
    assert_eq!(code, want);
    assert_shape(
        &expected,
        &body,
        "managedFields annotations daemonEndpoints nodeInfo podCIDR podCIDRs config runtimeHandlers features volumesAttached volumesInUse",
    );
    assert!(
        body["items"][0].get("kind").is_none(),
        "list items carry no kind"
    );
    let (_, body) = call_as(&c, "GET", "/api/v1/nodes?limit=500", METADATA_LIST, None).await;
    let text = std::fs::read_to_string(fixtures().join("nodes-list-metadata-200.json"))
        .expect("a fixture");
    assert_shape(
        &serde_json::from_str(&text).expect("JSON"),
        &body,
        "managedFields annotations",
    );
    let keys: Vec<&String> = body["items"][0]
        .as_object()
        .expect("an item")
        .keys()
        .collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"], "metadata only");
    // Watches: a full Node ADDED NotReady with its taint, MODIFIED, the closing BOOKMARK.
    let expected = stream("nodes-watch.jsonl");
    let rv = c.resource_version();
    let path = format!(
        "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=5"
    );
    let mut w = Watch::open(&c, &path, "application/json").await;
    c.configure(|cfg| cfg.bookmark_interval = Duration::from_secs(60));
    c.add_node(
        NodeBuilder::new("node-b")
            .label("hub.jupyter.org/node-purpose", "user")
            .ready(false),
    );
    c.set_node_ready("node-b", true);
    let added = w.next(Duration::from_secs(1)).await.expect("ADDED");
    assert_shape(
        &expected[0]["object"],
        &added["object"],
        "managedFields annotations daemonEndpoints nodeInfo podCIDR podCIDRs config runtimeHandlers features",
    );
    assert_eq!(
        added["object"]["spec"]["taints"],
        expected[0]["object"]["spec"]["taints"]
    );
    assert_eq!(w.types().await, ["MODIFIED", "BOOKMARK"]);
    let expected = stream("nodes-watch-metadata.jsonl");
    let mut w = Watch::open(
        &c,
        &format!(
            "/api/v1/nodes?watch=true&resourceVersion={}",
            c.resource_version()
        ),
        METADATA_WATCH,
    )
    .await;
    c.set_node_ready("node-a", false);
    let modified = w.next(Duration::from_secs(1)).await.expect("MODIFIED");
    assert_shape(&expected[0], &modified, "managedFields annotations");
    assert_eq!(modified["object"]["kind"], "PartialObjectMetadata");
}
