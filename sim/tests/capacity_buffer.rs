//! The CapacityBuffer that `simulate --recommend` prints validates against the CRD's published
//! schema (tests/data/autoscaling.x-k8s.io_capacitybuffers.yaml, see tests/data/README.md).

use std::process::Command;

use serde_json::Value;

const CRD: &str = include_str!("data/autoscaling.x-k8s.io_capacitybuffers.yaml");

/// The openAPIV3Schema of `version`.
fn schema(version: &str) -> Value {
    let crd: Value = serde_norway::from_str(CRD).expect("the CRD parses");
    crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .expect("the version is in the CRD")
}

/// Every object in a multi-document YAML text.
fn documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The schema's errors for `doc` (empty: valid), plus the CRD's two CEL rules on the spec.
fn errors(doc: &Value) -> Vec<String> {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let version = api.rsplit('/').next().unwrap_or_default();
    assert_eq!(api, format!("autoscaling.x-k8s.io/{version}"));
    let validator = jsonschema::validator_for(&schema(version)).expect("the schema compiles");
    let mut out: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    let spec = &doc["spec"];
    let has = |k: &str| spec.get(k).is_some();
    if has("podTemplateRef") && !(has("replicas") || has("limits")) {
        out.push("podTemplateRef without replicas or limits".into());
    }
    if has("podTemplateRef") && has("scalableRef") {
        out.push("both podTemplateRef and scalableRef".into());
    }
    out
}

/// The buffer's chunks go where user pods go (the user pool's nodeSelector and
/// tolerations, from flags), in a namespace of the user's with its Namespace document, at a
/// priority the autoscaler scales up for (not below its expendable cutoff, -10); the comment
/// names the autoscaler's two flags and the version it needs. Before: namespace `buffers`
/// hard-coded, no Namespace, no selector or tolerations, no priority.
#[test]
fn the_recommended_capacity_buffer_validates_against_the_crd() {
    let out = Command::new(env!("CARGO_BIN_EXE_simulate"))
        .args([
            "--scenario",
            "small",
            "--hours",
            "4",
            "--seeds",
            "1",
            "--recommend",
            "--only",
            "buffer",
            "--buffer-namespace",
            "jhub-buffers",
            "--buffer-node-selector",
            "hub.jupyter.org/node-purpose=user,pool=users",
            "--buffer-toleration",
            "hub.jupyter.org/dedicated=user:NoSchedule",
            "--buffer-toleration",
            "gpu",
        ])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("buffer "))
        .expect("the buffer row");
    let replicas: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (_, yaml) = text
        .split_once("\n---\n")
        .expect("the YAML follows the table");
    for flag in [
        "--capacity-buffer-controller-enabled",
        "--capacity-buffer-pod-injection-enabled",
        "--expendable-pods-priority-cutoff",
        "cluster-autoscaler 1.35",
    ] {
        assert!(yaml.contains(flag), "the comment names {flag}: {yaml}");
    }
    let mut docs = documents(yaml);
    assert_eq!(docs.len(), 3, "{yaml}");
    let namespace = docs.remove(0);
    assert_eq!(namespace["kind"], "Namespace");
    assert_eq!(namespace["metadata"]["name"], "jhub-buffers");
    assert_eq!(docs[0]["kind"], "PodTemplate");
    assert_eq!(docs[0]["metadata"]["namespace"], "jhub-buffers");
    let chunk = &docs[0]["template"]["spec"];
    assert_eq!(
        chunk["nodeSelector"],
        serde_json::json!({"hub.jupyter.org/node-purpose": "user", "pool": "users"})
    );
    assert_eq!(
        chunk["tolerations"],
        serde_json::json!([
            {"key": "hub.jupyter.org/dedicated", "operator": "Equal", "value": "user", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "Exists"}
        ])
    );
    let priority = chunk["priority"].as_i64().expect("a priority");
    assert!(priority >= -10, "below the expendable cutoff: {priority}");
    let buffer = &docs[1];
    assert_eq!(buffer["kind"], "CapacityBuffer");
    assert_eq!(buffer["spec"]["replicas"], replicas, "the row's N");
    assert_eq!(
        buffer["spec"]["podTemplateRef"]["name"],
        docs[0]["metadata"]["name"]
    );
    assert_eq!(
        buffer["metadata"]["namespace"],
        docs[0]["metadata"]["namespace"]
    );
    assert_eq!(errors(buffer), Vec::<String>::new());
}

#[test]
fn the_schema_check_rejects_a_broken_buffer() {
    let yaml = selfdestruct_sim::recommend::capacity_buffer_yaml(
        &selfdestruct_sim::scenario::Scenario::binder(),
        25,
        &selfdestruct_sim::recommend::BufferPlacement::default(),
    );
    let good = documents(&yaml).pop().expect("the buffer");
    assert!(errors(&good).is_empty());
    for (path, value) in [
        ("replicas", serde_json::json!(-1)),
        ("replicas", serde_json::json!("25")),
        ("podTemplateRef", serde_json::json!({"nom": "x"})),
    ] {
        let mut bad = good.clone();
        bad["spec"][path] = value;
        assert!(!errors(&bad).is_empty(), "{path} accepted: {bad}");
    }
    let mut no_count = good.clone();
    no_count["spec"].as_object_mut().unwrap().remove("replicas");
    assert!(!errors(&no_count).is_empty());
}

#[test]
fn the_example_manifest_validates_against_the_crd() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/examples/capacitybuffer-node-gate/"
    );
    let read = |f: &str| std::fs::read_to_string(format!("{dir}{f}")).expect("the example");
    let buffer = documents(&read("capacitybuffer.yaml")).pop().expect("one");
    assert_eq!(errors(&buffer), Vec::<String>::new());
    let template = documents(&read("podtemplate.yaml")).pop().expect("one");
    assert_eq!(template["kind"], "PodTemplate");
    assert_eq!(
        buffer["spec"]["podTemplateRef"]["name"],
        template["metadata"]["name"]
    );
    assert_eq!(
        buffer["metadata"]["namespace"],
        template["metadata"]["namespace"]
    );
}
