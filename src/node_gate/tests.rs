//! Unit tests of `node_gate` (a child module: they see its private items).

use super::*;
use std::time::Duration;

use serde_json::{Value, json};

use crate::api::ApiError;

use crate::identity::IdentitySettings;
use selfdestruct_decision::settings::ImageSettings;

#[test]
fn the_node_name_is_one_escaped_segment() {
    assert_eq!(node_url("node-a"), "/api/v1/nodes/node-a");
    assert_eq!(node_url("n?x=1"), "/api/v1/nodes/n%3Fx%3D1");
    assert_eq!(node_url("../pods"), "/api/v1/nodes/..%2Fpods");
}

#[test]
fn settings_default_and_the_own_node_is_required() {
    /// The gate's settings and the shared identity, as `node-gate` reads them.
    #[derive(clap::Parser)]
    struct Gate {
        #[command(flatten)]
        gate: GateSettings,
        #[command(flatten)]
        identity: IdentitySettings,
    }
    let gate = |flags: &[&str]| {
        let argv = [&["node-gate"][..], flags].concat();
        let g = <Gate as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?;
        GateConfig::new(&g.gate, &g.identity).map_err(|e| e.to_string())
    };
    let c = gate(&["--node-name=n1", "--gate-poll=10ms"]).expect("valid");
    assert_eq!(c.gate.taint_key, DEFAULT_TAINT);
    assert_eq!(c.gate.timeout, Duration::from_secs(900));
    assert_eq!(c.gate.poll, Duration::from_secs(1), "at least 1s");
    // Missing is reported as invalid, naming the variable and the Downward API field.
    for missing in [&[][..], &["--node-name= "]] {
        let e = gate(missing).expect_err("no node name");
        assert!(e.contains("invalid NODE_NAME (--node-name)") && e.contains("nodeName"));
    }
}

fn cfg(images: &str) -> GateConfig {
    GateConfig {
        node_name: "n1".into(),
        gate: GateSettings {
            taint_key: DEFAULT_TAINT.into(),
            images: ImageSettings {
                required_images: selfdestruct_decision::images::parse_list(images).expect("valid"),
            },
            timeout: Duration::from_secs(900),
            poll: Duration::from_secs(10),
        },
    }
}

#[test]
fn patch_removes_only_the_gate_taint_and_tests_the_rest() {
    let node = json!({
        "spec": {"taints": [
            {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"},
            {"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"}
        ]},
        "status": {"images": [{"names": ["docker.io/jupyter/scipy-notebook:1"]}]}
    });
    let v = view(&node, &cfg("jupyter/scipy-notebook:1"));
    assert_eq!(v.gate_indices, vec![1]);
    assert!(v.missing.is_empty());
    let patch = removal_patch(&v).expect("has the taint");
    assert_eq!(patch[0]["op"], "test");
    assert_eq!(patch[0]["value"], node["spec"]["taints"]);
    assert_eq!(patch[1], json!({"op": "remove", "path": "/spec/taints/1"}));
}

/// Applies `remove` operations of a JSON patch after checking its `test`.
fn apply(taints: &Value, patch: &Value) -> Vec<Value> {
    let ops = patch.as_array().expect("a JSON patch");
    assert_eq!(ops[0]["op"], "test");
    assert_eq!(&ops[0]["value"], taints, "tests the list as read");
    let mut list = taints.as_array().cloned().unwrap_or_default();
    for op in &ops[1..] {
        assert_eq!(op["op"], "remove");
        let path = op["path"].as_str().expect("path");
        let i: usize = path
            .strip_prefix("/spec/taints/")
            .and_then(|i| i.parse().ok())
            .expect("an index");
        list.remove(i);
    }
    list
}

#[test]
fn every_taint_with_the_key_goes_in_one_guarded_patch() {
    let taints = json!([
        {"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"},
        {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"},
        {"key": DEFAULT_TAINT, "effect": "NoExecute"},
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"},
        {"key": DEFAULT_TAINT, "value": "other", "effect": "PreferNoSchedule"},
    ]);
    let node = json!({"spec": {"taints": taints}});
    let v = view(&node, &cfg(""));
    assert_eq!(v.gate_indices, vec![0, 2, 4]);
    let patch = removal_patch(&v).expect("has the taint");
    assert_eq!(patch.as_array().map(Vec::len), Some(4), "{patch}");
    // Last index first, so each one still names the taint read there.
    let paths: Vec<&str> = patch
        .as_array()
        .into_iter()
        .flatten()
        .skip(1)
        .filter_map(|o| o["path"].as_str())
        .collect();
    assert_eq!(
        paths,
        ["/spec/taints/4", "/spec/taints/2", "/spec/taints/0"]
    );
    let left = apply(&taints, &patch);
    assert_eq!(
        left,
        vec![
            json!({"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"}),
            json!({"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}),
        ],
        "every other taint stays, in order"
    );
    assert_eq!(
        gate_taints_left(&json!({"spec": {"taints": left}}), DEFAULT_TAINT),
        0
    );
    assert_eq!(gate_taints_left(&node, DEFAULT_TAINT), 3);
    assert_eq!(gate_taints_left(&json!({"spec": {}}), DEFAULT_TAINT), 0);
    assert_eq!(
        gate_taints_left(&json!({"kind": "Status"}), DEFAULT_TAINT),
        0
    );
}

#[test]
fn no_taint_no_patch_and_missing_images_are_named() {
    let node = json!({"spec": {}, "status": {}});
    let v = view(&node, &cfg("quay.io/x/y:2"));
    assert!(v.gate_indices.is_empty());
    assert_eq!(removal_patch(&v), None);
    assert_eq!(v.missing, vec!["quay.io/x/y:2".to_string()]);
}

#[test]
fn a_failed_test_is_a_conflict_an_admission_denial_is_not() {
    let status = |code: u16, message: &str| ApiError::Status {
        code,
        reason: "Invalid".into(),
        message: message.into(),
        retry_after: None,
    };
    assert!(is_conflict(&status(
        422,
        "the server rejected our request due to an error in our request"
    )));
    assert!(is_conflict(&status(409, "Operation cannot be fulfilled")));
    assert!(!is_conflict(&status(
        422,
        "nodes \"n1\" is forbidden: ValidatingAdmissionPolicy 'selfdestruct-node-gate' with binding 'selfdestruct-node-gate' denied request: no"
    )));
    assert!(!is_conflict(&status(403, "forbidden")));
    assert!(!is_conflict(&ApiError::Timeout(Duration::from_secs(30))));
}
