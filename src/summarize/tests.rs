//! Unit tests of `summarize` (a child module: they see its private items).

use super::*;
use std::collections::BTreeSet;

#[test]
fn own_pod_summary_never_needs_optional_fields() {
    let empty = own_pod(&PodObject::default());
    assert_eq!(empty.name, "");
    assert_eq!(empty.started_at, None);
    assert!(empty.affinity.is_empty());
    let from_fixture: PodObject = serde_json::from_value(serde_json::json!({
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
    let object: NodeObject<false> = serde_json::from_value(serde_json::json!({
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
    let bare = node(NodeObject::default(), &BTreeSet::new(), &required);
    assert!(!bare.ready.ready);
}

/// Issue 46, items 11 and 12: a Node's metadata is bounded as it is decoded, in the
/// task of a node watch: the labels it reads are kept, the others, the annotations and
/// the managed fields skipped; outside one every label is kept.
#[test]
fn a_nodes_metadata_is_bounded_as_it_is_decoded() {
    let labels: serde_json::Map<String, serde_json::Value> = (0..10_000)
        .map(|i| (format!("k8s.example.com/label-{i:05}"), "x".into()))
        .collect();
    let json = serde_json::json!({
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"name": "n1", "resourceVersion": "7", "uid": "u",
                     "creationTimestamp": "2026-11-22T04:26:01Z", "labels": labels,
                     "annotations": {"blob": "a".repeat(180_000)},
                     "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:metadata": {}}}]}
    })
    .to_string();
    let keys: BTreeSet<String> = ["k8s.example.com/label-00007".to_string()].into();
    let decode = async || serde_json::from_str::<NodeObject<true>>(&json).expect("a node");
    let node = crate::testing::block_on(keeping_labels(keys.clone(), decode()));
    let meta = &node.metadata;
    assert_eq!(
        meta.labels.as_ref().map(|l| l.keys().cloned().collect()),
        Some(keys)
    );
    assert_eq!(
        (meta.name.as_deref(), meta.resource_version.as_deref()),
        (Some("n1"), Some("7"))
    );
    assert!(meta.creation_timestamp.is_some());
    assert!(meta.annotations.is_none() && meta.managed_fields.is_none() && meta.uid.is_none());
    let all = crate::testing::block_on(decode());
    assert_eq!(all.metadata.labels.map(|l| l.len()), Some(10_000));
}

#[test]
fn sibling_pending_states() {
    let lite = |node: Option<&str>, phase: Option<&str>| PodObject {
        spec: Some(PodSpecRead {
            node_name: node.map(Into::into),
            ..Default::default()
        }),
        status: Some(PodStatusRead {
            phase: phase.map(Into::into),
            ..Default::default()
        }),
        ..PodObject::default()
    };
    assert!(sibling(lite(None, Some("Pending"))).pending);
    assert!(sibling(lite(Some("n"), Some("Pending"))).pending);
    assert!(sibling(lite(Some("n"), None)).pending);
    assert!(!sibling(lite(Some("n"), Some("Running"))).pending);
}

/// Nodes and Pods of any content (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use crate::testing::props::proptest_config;
    use crate::testing::{json_value, mutate};
    use std::collections::BTreeSet;

    use crate::summarize::PodObject;
    use selfdestruct_decision::images;

    use crate::summarize::NodeObject;

    fn valid_node() -> Value {
        json!({
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "n1", "resourceVersion": "7", "labels": {"pool": "user"},
                         "creationTimestamp": "2026-11-22T04:26:01Z"},
            "spec": {"unschedulable": false, "taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T04:26:05Z"}],
                       "images": [{"names": ["docker.io/library/nginx:1.25"], "sizeBytes": 1}]}
        })
    }

    fn valid_pod() -> Value {
        json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "placeholder-1", "uid": "u1", "resourceVersion": "9",
                         "creationTimestamp": "2026-11-22T04:26:01Z",
                         "deletionTimestamp": "2026-11-22T05:26:01Z"},
            "spec": {"nodeName": "n1",
                     "containers": [{"name": "pause", "image": "selfdestruct:1"}],
                     "tolerations": [{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"},
                                     {"operator": "Exists"}],
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{
                             "matchExpressions": [{"key": "pool", "operator": "In", "values": ["user"]},
                                                  {"key": "size", "operator": "Gt", "values": ["3"]}],
                             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n0"]}]
                         }]}}}},
            "status": {"phase": "Running", "startTime": "2026-11-22T04:26:03Z",
                       "conditions": [{"type": "PodScheduled", "status": "True",
                                       "lastTransitionTime": "2026-11-22T04:26:02Z"}]}
        })
    }

    fn summarise_node(bytes: &[u8]) {
        if let Ok(node) = serde_json::from_slice::<NodeObject<false>>(bytes) {
            let required = images::parse_list(
                "nginx:1.25,quay.io/x/y@sha256:0123456789abcdef0123456789abcdef",
            )
            .expect("valid");
            let keys: BTreeSet<String> = ["pool".to_string()].into();
            let s = crate::summarize::node(node, &keys, &required);
            assert!(s.images_present.iter().all(|i| *i < required.len()));
            assert!(s.labels.keys().all(|k| keys.contains(k)));
            assert!(
                s.taints
                    .iter()
                    .all(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            );
        }
    }

    fn summarise_pod(bytes: &[u8]) {
        if let Ok(pod) = serde_json::from_slice::<PodObject>(bytes) {
            let own = crate::summarize::own_pod(&pod);
            assert_eq!(own.name, pod.metadata.name.clone().unwrap_or_default());
            assert_eq!(own.terminating, pod.metadata.deletion_timestamp.is_some());
            let s = crate::summarize::sibling(pod);
            // Not bound to a node means Pending, whatever the phase says.
            if s.node_name.is_none() {
                assert!(s.pending);
            }
            assert_ne!(s.node_name.as_deref(), Some(""));
        }
    }

    proptest! {
        #![proptest_config(proptest_config(1000))]

        #[test]
        fn node_and_pod_json_from_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            summarise_node(&bytes);
            summarise_pod(&bytes);
        }

        #[test]
        fn node_and_pod_json_of_any_shape_never_panics(v in json_value()) {
            let bytes = serde_json::to_vec(&v).unwrap_or_default();
            summarise_node(&bytes);
            summarise_pod(&bytes);
        }

        #[test]
        fn mutated_real_objects_never_panic(pick in any::<usize>(), with in json_value(), cut in any::<usize>()) {
            for base in [valid_node(), valid_pod()] {
                let mut v = base;
                mutate(&mut v, pick, with.clone());
                let bytes = serde_json::to_vec(&v).unwrap_or_default();
                summarise_node(&bytes);
                summarise_pod(&bytes);
                // and truncated anywhere
                let cut = cut % (bytes.len() + 1);
                summarise_node(&bytes[..cut]);
                summarise_pod(&bytes[..cut]);
            }
        }
    }
}
