//! Unit tests of `summarize` (a child module: they see its private items).

use super::*;
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};

#[test]
fn own_pod_summary_never_needs_optional_fields() {
    let empty = own_pod(&Pod::default());
    assert_eq!(empty.name, "");
    assert_eq!(empty.started_at, None);
    assert!(empty.affinity.is_empty());
    let from_fixture: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "placeholder-0", "namespace": "placeholders", "uid": "u1",
                     "creationTimestamp": "2026-11-22T04:26:01Z", "labels": {"a": "b"}},
        "spec": {"nodeName": "node-a", "containers": [],
                 "tolerations": [{"key": "k", "operator": "Exists"}],
                 "nodeSelector": {"pool": "user"},
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}},
        "status": {"startTime": "2026-11-22T04:26:05Z",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-22T04:26:02Z"}]}
    }))
    .expect("valid pod");
    let own = own_pod(&from_fixture);
    assert_eq!(own.node_name.as_deref(), Some("node-a"));
    assert!(own.started_at > own.scheduled_at);
    assert_eq!(own.tolerations.len(), 1);
    assert_eq!(
        own.label_keys_of_interest(),
        ["pool".to_string(), "zone".to_string()].into()
    );
}

#[test]
fn node_summary_keeps_only_what_is_needed() {
    let object: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"pool": "user", "noise": "x"}, "annotations": {"big": "..."}},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T04:26:05Z"}],
                   "images": [{"names": ["docker.io/library/nginx:1.25"], "sizeBytes": 1}]}
    }))
    .expect("valid node");
    let required = selfdestruct_decision::images::parse_list("nginx:1.25,busybox").expect("valid");
    let s = node(object, &["pool".to_string()].into(), &required);
    assert_eq!(s.labels.len(), 1);
    // PreferNoSchedule too: the decision reads untolerated soft taints.
    assert_eq!(s.taints.len(), 2);
    assert!(s.ready.ready && s.ready.since.is_some());
    assert_eq!(s.images_present, vec![0]);
    assert!(!s.images_truncated);
    let bare = node(Node::default(), &BTreeSet::new(), &required);
    assert!(!bare.ready.ready);
}

#[test]
fn sibling_pending_states() {
    let lite = |node: Option<&str>, phase: Option<&str>| Pod {
        spec: Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: node.map(Into::into),
            ..Default::default()
        }),
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: phase.map(Into::into),
            ..Default::default()
        }),
        ..Pod::default()
    };
    assert!(sibling(lite(None, Some("Pending"))).pending);
    assert!(sibling(lite(Some("n"), Some("Pending"))).pending);
    assert!(sibling(lite(Some("n"), None)).pending);
    assert!(!sibling(lite(Some("n"), Some("Running"))).pending);
}
