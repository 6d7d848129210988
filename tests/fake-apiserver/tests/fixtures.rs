//! Replays every capture in `fixtures/` (from a real kube-apiserver v1.36.2)
//! against the fake and compares status codes and bodies.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use fake_apiserver::NodeBuilder;
use serde_json::{Value, json};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// (status, body) of a capture.
fn fixture(name: &str) -> (u16, Value) {
    let path = fixture_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("fixture JSON");
    (
        v["status"].as_u64().expect("status") as u16,
        v["body"].clone(),
    )
}

/// The capture with names/uids swapped for the fake's.
fn fixture_with(name: &str, replace: &[(&str, &str)]) -> (u16, Value) {
    let (code, body) = fixture(name);
    let mut text = body.to_string();
    for (from, to) in replace {
        text = text.replace(from, to);
    }
    (code, serde_json::from_str(&text).expect("substituted JSON"))
}

const FIXTURE_UID: &str = "dea66450-c714-40d3-8f33-076c30f7f827";

/// Keys of `expected` (recursively, first array element) missing in `actual`.
fn missing_keys(
    expected: &Value,
    actual: &Value,
    path: &str,
    ignore: &[&str],
    out: &mut Vec<String>,
) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                if ignore.contains(&k.as_str()) || ev.is_null() {
                    continue;
                }
                let p = format!("{path}/{k}");
                match a.get(k) {
                    None => out.push(p),
                    Some(av) => missing_keys(ev, av, &p, ignore, out),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if let (Some(ev), Some(av)) = (e.first(), a.first()) {
                missing_keys(ev, av, &format!("{path}/0"), ignore, out);
            }
        }
        (e, a) => {
            if std::mem::discriminant(e) != std::mem::discriminant(a) {
                out.push(format!("{path} (type differs: {e} vs {a})"));
            }
        }
    }
}

fn assert_same_shape(expected: &Value, actual: &Value, ignore: &[&str]) {
    let mut missing = Vec::new();
    missing_keys(expected, actual, "", ignore, &mut missing);
    assert!(
        missing.is_empty(),
        "fields missing in the fake's answer: {missing:#?}\nactual: {actual:#}"
    );
}

#[test]
fn all_fixtures_are_covered() {
    let mut names: Vec<String> = std::fs::read_dir(fixture_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") || n.ends_with(".jsonl"))
        .collect();
    names.sort();
    let covered = [
        "event-create-201.json",
        "eviction-201.json",
        "eviction-409-uid-precondition.json",
        "eviction-422-admission-policy.json",
        "eviction-429-pdb.json",
        "eviction-500-two-pdbs.json",
        "nodes-list-200.json",
        "nodes-list-403.json",
        "nodes-list-metadata-200.json",
        "nodes-watch-metadata.jsonl",
        "nodes-watch.jsonl",
        "pod-delete-200.json",
        "pod-delete-403-other-namespace.json",
        "pod-delete-409-uid-precondition.json",
        "pod-delete-422-admission-policy.json",
        "pod-get-200.json",
        "pod-get-404.json",
    ];
    for n in &names {
        assert!(covered.contains(&n.as_str()), "fixture {n} has no test");
    }
}

#[test]
fn pod_get_200() {
    let c = fixture_cluster();
    let (code, expected) = fixture("pod-get-200.json");
    let r = c
        .client(Some("p0"))
        .get(&pod_path("placeholder-0"))
        .unwrap();
    assert_eq!(r.status, code);
    let body = r.json();
    assert_same_shape(
        &expected,
        &body,
        &["managedFields", "volumes", "volumeMounts"],
    );
    assert_eq!(body["metadata"]["uid"], json!(uid_of(&c, "placeholder-0")));
    assert_eq!(
        body["metadata"]["labels"],
        expected["metadata"]["labels"]
            .clone()
            .as_object()
            .map(|m| {
                let mut m = m.clone();
                m.insert(
                    "controller-revision-hash".into(),
                    body["metadata"]["labels"]["controller-revision-hash"].clone(),
                );
                Value::Object(m)
            })
            .unwrap()
    );
    assert_eq!(body["spec"]["tolerations"], expected["spec"]["tolerations"]);
    assert_eq!(body["status"]["phase"], "Running");
}

#[test]
fn pod_get_404() {
    let c = fixture_cluster();
    let (code, expected) = fixture("pod-get-404.json");
    let r = c.client(Some("p0")).get(&pod_path("nope")).unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
}

#[test]
fn pod_delete_200() {
    let c = fixture_cluster();
    let (code, expected) = fixture("pod-delete-200.json");
    let uid = uid_of(&c, "placeholder-0");
    let before = c.get_pod(NS, "placeholder-0").unwrap();
    let r = c
        .client(Some("p0"))
        .delete(
            &pod_path("placeholder-0"),
            Some(&json!({"preconditions": {"uid": uid}})),
        )
        .unwrap();
    assert_eq!(r.status, code);
    let body = r.json();
    assert_same_shape(
        &expected,
        &body,
        &["managedFields", "volumes", "volumeMounts"],
    );
    assert_eq!(body["kind"], "Pod");
    assert_eq!(body["metadata"]["uid"], json!(uid));
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(body["metadata"]["generation"], 2);
    let old_rv: u64 = before.metadata.resource_version.unwrap().parse().unwrap();
    let new_rv: u64 = body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(new_rv > old_rv);
}

#[test]
fn pod_delete_403_other_namespace() {
    let c = fixture_cluster();
    let (code, expected) = fixture("pod-delete-403-other-namespace.json");
    let r = c
        .client(Some("p0"))
        .delete("/api/v1/namespaces/default/pods/x", None)
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
}

#[test]
fn pod_delete_409_uid_precondition() {
    let c = fixture_cluster();
    let uid = uid_of(&c, "placeholder-0");
    let (code, expected) = fixture_with(
        "pod-delete-409-uid-precondition.json",
        &[(FIXTURE_UID, &uid)],
    );
    let r = c
        .client(Some("p0"))
        .delete(
            &pod_path("placeholder-0"),
            Some(&json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        )
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
    assert_eq!(uid_of(&c, "placeholder-0"), uid, "the pod must survive");
}

#[test]
fn pod_delete_422_admission_policy() {
    let c = fixture_cluster();
    c.own_pod_only_policy(true);
    let (code, expected) = fixture("pod-delete-422-admission-policy.json");
    let r = c
        .client(Some("p0"))
        .delete(&pod_path("placeholder-2"), None)
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
}

#[test]
fn eviction_201() {
    let c = fixture_cluster();
    let (code, expected) = fixture("eviction-201.json");
    let uid = uid_of(&c, "placeholder-1");
    let r = c
        .client(Some("p1"))
        .post(
            &format!("{}/eviction", pod_path("placeholder-1")),
            &eviction_body("placeholder-1", Some(&uid)),
        )
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
}

#[test]
fn eviction_409_uid_precondition_then_budget_used_up() {
    let c = fixture_cluster();
    let uid = uid_of(&c, "placeholder-0");
    let (code, expected) =
        fixture_with("eviction-409-uid-precondition.json", &[(FIXTURE_UID, &uid)]);
    let client = c.client(Some("p0"));
    let r = client
        .post(
            &format!("{}/eviction", pod_path("placeholder-0")),
            &eviction_body(
                "placeholder-0",
                Some("00000000-0000-0000-0000-000000000000"),
            ),
        )
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
    // Observed: the failed eviction still used up the budget.
    let pdb = c
        .client(Some("admin"))
        .get("/apis/policy/v1/namespaces/placeholders/poddisruptionbudgets/placeholder")
        .unwrap()
        .json();
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    assert!(
        pdb["status"]["disruptedPods"]["placeholder-0"].is_string(),
        "{pdb:#}"
    );
    let r = c
        .client(Some("p1"))
        .post(
            &format!("{}/eviction", pod_path("placeholder-1")),
            &eviction_body("placeholder-1", None),
        )
        .unwrap();
    assert_eq!(r.status, 429);
}

#[test]
fn eviction_422_admission_policy() {
    let c = fixture_cluster();
    c.own_pod_only_policy(true);
    let (code, expected) = fixture("eviction-422-admission-policy.json");
    let r = c
        .client(Some("p0"))
        .post(
            &format!("{}/eviction", pod_path("placeholder-2")),
            &eviction_body("placeholder-2", None),
        )
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
}

#[test]
fn eviction_429_pdb() {
    let c = fixture_cluster();
    // A sibling is not Ready (the capture had one Pending).
    c.set_pod_ready(NS, "placeholder-2", false);
    let (code, expected) = fixture("eviction-429-pdb.json");
    let r = c
        .client(Some("p1"))
        .post(
            &format!("{}/eviction", pod_path("placeholder-1")),
            &eviction_body("placeholder-1", None),
        )
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
    assert!(r.header("retry-after").is_none());
}

#[test]
fn eviction_500_two_pdbs() {
    let c = fixture_cluster();
    // A second budget over the same pods, as zero-to-jupyterhub's
    // user-placeholder (minAvailable 0) next to one with maxUnavailable 1.
    let mut second = c
        .get_pdb(NS, "placeholder")
        .expect("the fixture cluster's budget");
    second.metadata = Default::default();
    second.metadata.name = Some("user-placeholder".into());
    second.metadata.namespace = Some(NS.into());
    second.status = None;
    if let Some(spec) = second.spec.as_mut() {
        spec.max_unavailable = None;
        spec.min_available =
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0));
    }
    c.add_pdb_object(second);
    let uid = uid_of(&c, "placeholder-1");
    let (code, expected) = fixture("eviction-500-two-pdbs.json");
    let r = c
        .client(Some("p1"))
        .post(
            &format!("{}/eviction", pod_path("placeholder-1")),
            &eviction_body("placeholder-1", Some(&uid)),
        )
        .unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
    assert_eq!(
        uid_of(&c, "placeholder-1"),
        uid,
        "the pod is still there, not evicted"
    );
}

#[test]
fn nodes_list_200() {
    let c = fixture_cluster();
    let (code, expected) = fixture("nodes-list-200.json");
    let r = c
        .client(Some("admin"))
        .get("/api/v1/nodes?limit=500")
        .unwrap();
    assert_eq!(r.status, code);
    let body = r.json();
    assert_same_shape(
        &expected,
        &body,
        &[
            "managedFields",
            "kubectl.kubernetes.io/last-applied-configuration",
        ],
    );
    assert_eq!(body["kind"], "NodeList");
    assert!(
        body["items"][0].get("kind").is_none(),
        "list items carry no kind"
    );
    assert_eq!(
        body["items"][0]["status"]["images"][0]["names"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn nodes_list_403() {
    let c = fixture_cluster();
    let (code, expected) = fixture("nodes-list-403.json");
    let r = c.client(Some("p0")).get("/api/v1/nodes").unwrap();
    assert_eq!(r.status, code);
    assert_eq!(r.json(), expected);
}

#[test]
fn event_create_201() {
    let c = fixture_cluster();
    let (code, expected) = fixture("event-create-201.json");
    let uid = uid_of(&c, "placeholder-0");
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "placeholder-0.", "namespace": NS},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": "placeholder-0", "uid": uid, "apiVersion": "v1"},
        "reason": "SelfDestruct",
        "message": "lifetime 37m12s reached",
        "source": {"component": "selfdestruct"},
        "firstTimestamp": "2026-11-22T04:27:05Z",
        "lastTimestamp": "2026-11-22T04:27:05Z",
        "count": 1,
        "type": "Normal"
    });
    let r = c
        .client(Some("p0"))
        .post(&format!("/api/v1/namespaces/{NS}/events"), &event)
        .unwrap();
    assert_eq!(r.status, code);
    let body = r.json();
    assert_same_shape(&expected, &body, &["managedFields"]);
    let name = body["metadata"]["name"].as_str().unwrap();
    assert!(
        name.starts_with("placeholder-0.") && name.len() == "placeholder-0.".len() + 5,
        "{name}"
    );
    assert!(
        name[14..]
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit())
    );
    assert_eq!(body["involvedObject"]["uid"], json!(uid));
    assert_eq!(c.events(NS).len(), 1);
}

/// kube's `metadata_watcher` lists with this `Accept` (and watches with `as=PartialObjectMetadata`).
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA_WATCH: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// The body of a capture stored without the request/status envelope.
fn plain_fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture_dir().join(name)).expect("fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

#[test]
fn nodes_list_metadata_200() {
    let c = fixture_cluster();
    let expected = plain_fixture("nodes-list-metadata-200.json");
    let r = c
        .client(Some("admin"))
        .with_accept(METADATA_LIST)
        .get("/api/v1/nodes?limit=500")
        .unwrap();
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_same_shape(&expected, &body, &["managedFields", "annotations"]);
    assert_eq!(body["kind"], "PartialObjectMetadataList");
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
    let item = &body["items"][0];
    assert_eq!(item["kind"], "PartialObjectMetadata");
    let keys: Vec<&String> = item.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"], "metadata only");
}

#[test]
fn nodes_watch_metadata_jsonl() {
    let c = fixture_cluster();
    let expected: Vec<Value> =
        std::fs::read_to_string(fixture_dir().join("nodes-watch-metadata.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let rv = c.resource_version();
    let mut w = c
        .client(Some("admin"))
        .with_accept(METADATA_WATCH)
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .unwrap();
    assert_eq!(w.status(), 200);
    // A status-only change (the kubelet's heartbeat) still arrives as MODIFIED.
    c.set_node_ready("node-a", false);
    let got = w.collect_until_end(Duration::from_secs(5)).unwrap();
    let modified = got
        .iter()
        .find(|e| e["type"] == "MODIFIED")
        .expect("a MODIFIED event");
    assert_same_shape(&expected[0], modified, &["managedFields", "annotations"]);
    let keys: Vec<&String> = modified["object"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"], "metadata only");
    assert_eq!(modified["object"]["kind"], "PartialObjectMetadata");
}

#[test]
fn nodes_watch_jsonl() {
    let c = fixture_cluster();
    let expected: Vec<Value> = std::fs::read_to_string(fixture_dir().join("nodes-watch.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rv = c.resource_version();
    let mut w = c
        .client(Some("admin"))
        .watch(&format!("/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=1"))
        .unwrap();
    assert_eq!(w.status(), 200);
    c.configure(|cfg| cfg.bookmark_interval = Duration::from_secs(60));
    c.add_node(
        NodeBuilder::new("node-b")
            .label("hub.jupyter.org/node-purpose", "user")
            .ready(false),
    );
    c.set_node_ready("node-b", true);
    let got = w.collect_until_end(Duration::from_secs(5)).unwrap();
    let types: Vec<&str> = got.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let expected_types: Vec<&str> = expected
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), expected_types.first());
    assert_eq!(types.last(), Some(&"BOOKMARK"));
    // ADDED carries the not-ready taint and full Node objects, like the capture.
    assert_same_shape(
        &expected[0]["object"],
        &got[0]["object"],
        &[
            "managedFields",
            "annotations",
            "daemonEndpoints",
            "nodeInfo",
        ],
    );
    assert_eq!(
        got[0]["object"]["spec"]["taints"],
        expected[0]["object"]["spec"]["taints"]
    );
    let ready = got.iter().any(|e| {
        e["type"] == "MODIFIED"
            && e["object"]["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
    });
    let untainted = got
        .iter()
        .any(|e| e["type"] == "MODIFIED" && e["object"]["spec"].get("taints").is_none());
    assert!(ready && untainted, "{types:?}");
    // The final bookmark points at the last event's resourceVersion.
    let last_event_rv = &got[got.len() - 2]["object"]["metadata"]["resourceVersion"];
    let bookmark = &got[got.len() - 1]["object"];
    assert_eq!(&bookmark["metadata"]["resourceVersion"], last_event_rv);
    assert_eq!(bookmark["kind"], expected.last().unwrap()["object"]["kind"]);
}
