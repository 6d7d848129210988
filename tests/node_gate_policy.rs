//! The node gate's ValidatingAdmissionPolicy (`manifests/node-gate/admission-policy.yaml`)
//! evaluated with a CEL interpreter (cel-python) on what the gate really sends:
//! the node before, and after the gate's own JSON patch (`removal_patch`). The
//! policy must let it remove every taint with the gate key in one patch, and
//! refuse anything else a stolen token might try.
//!
//! Needs the venv of `ci/validate-manifests.sh` (PyYAML and cel-python), which
//! `.ci/run` installs first; fails without it, saying so.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use selfdestruct::node_gate::{DEFAULT_TAINT, GateConfig, GateSettings, removal_patch, view};
use selfdestruct_decision::settings::ImageSettings;
use serde_json::{Value, json};

/// Evaluates every validation of the policy (its variables first) for each
/// case `{"old", "new", "node"}`; prints one list of booleans per case.
const EVALUATE: &str = r#"
import json, sys, yaml, celpy
from celpy import celtypes
policy = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "ValidatingAdmissionPolicy"][0]
spec = policy["spec"]
env = celpy.Environment()
def evaluate(expr, activation):
    return env.program(env.compile(expr)).evaluate(activation)
out = []
for case in json.load(sys.stdin):
    act = {
        "oldObject": celpy.json_to_cel(case["old"]),
        "object": celpy.json_to_cel(case["new"]),
        "request": celpy.json_to_cel({
            "name": case["old"]["metadata"]["name"],
            "userInfo": {
                "username": "system:serviceaccount:node-gate:node-gate",
                "extra": {"authentication.kubernetes.io/node-name": [case["node"]]},
            },
        }),
    }
    variables = {}
    for v in spec["variables"]:
        act["variables"] = celtypes.MapType({celtypes.StringType(k): x for k, x in variables.items()})
        variables[v["name"]] = evaluate(v["expression"], act)
    act["variables"] = celtypes.MapType({celtypes.StringType(k): x for k, x in variables.items()})
    out.append([bool(evaluate(v["expression"], act)) for v in spec["validations"]])
json.dump(out, sys.stdout)
"#;

fn venv_python() -> PathBuf {
    let tmp = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    tmp.join("selfdestruct-validate-venv/bin/python")
}

/// A Python with PyYAML and cel-python; panics saying how to get one.
fn python() -> PathBuf {
    [venv_python(), PathBuf::from("python3")]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", "import yaml, celpy"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .unwrap_or_else(|| {
            panic!(
                "needs a Python with PyYAML and cel-python: run `bash ci/validate-manifests.sh` once \
                 (as .ci/run does) to install them into ${{TMPDIR:-/tmp}}/selfdestruct-validate-venv"
            )
        })
}

/// Whether the policy admits each `(old node, new node, node named in the token)`.
fn admitted(cases: &[(Value, Value, &str)]) -> Vec<bool> {
    let policy =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/node-gate/admission-policy.yaml");
    let input: Vec<Value> = cases
        .iter()
        .map(|(old, new, node)| json!({"old": old, "new": new, "node": node}))
        .collect();
    let mut child = Command::new(python())
        .args(["-c", EVALUATE])
        .arg(&policy)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(input).to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Vec<bool>> = serde_json::from_slice(&out.stdout).expect("JSON");
    results.iter().map(|r| r.iter().all(|ok| *ok)).collect()
}

fn node(taints: Value) -> Value {
    json!({
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {"providerID": "gce://p/z/n1", "taints": taints},
    })
}

/// The node after the gate's own patch (its `test` holds: nothing changed).
fn gate_patched(old: &Value) -> Value {
    let cfg = GateConfig {
        node_name: "n1".into(),
        gate: GateSettings {
            taint_key: DEFAULT_TAINT.into(),
            images: ImageSettings {
                required_images: Vec::new(),
            },
            timeout: Duration::from_secs(60),
            poll: Duration::from_secs(1),
        },
    };
    let patch = removal_patch(&view(old, &cfg)).expect("the node has the gate taint");
    let mut new = old.clone();
    let taints = new["spec"]["taints"].as_array_mut().expect("taints");
    for op in patch.as_array().expect("ops").iter().skip(1) {
        assert_eq!(op["op"], "remove");
        let i: usize = op["path"]
            .as_str()
            .and_then(|p| p.strip_prefix("/spec/taints/"))
            .and_then(|i| i.parse().ok())
            .expect("index");
        taints.remove(i);
    }
    new
}

#[test]
fn the_policy_admits_the_gates_patch_removing_every_gate_taint() {
    let dedicated =
        json!({"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"});
    let autoscaler =
        json!({"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"});
    let gate = |value: &str, effect: &str| {
        let mut t = json!({"key": DEFAULT_TAINT, "effect": effect});
        if !value.is_empty() {
            t["value"] = json!(value);
        }
        t
    };
    let twice = node(json!([
        dedicated,
        gate("true", "NoSchedule"),
        gate("", "NoExecute")
    ]));
    let once = node(json!([gate("true", "NoSchedule"), dedicated]));
    let thrice = node(json!([
        gate("true", "NoSchedule"),
        autoscaler,
        gate("", "NoExecute"),
        dedicated,
        gate("x", "PreferNoSchedule"),
    ]));
    for old in [&twice, &once, &thrice] {
        let new = gate_patched(old);
        assert_eq!(
            admitted(&[(old.clone(), new.clone(), "n1")]),
            [true],
            "{old} -> {new}"
        );
    }
    // What it must still refuse.
    let cases = [
        // Another node than the token's.
        (twice.clone(), gate_patched(&twice), "n2"),
        // No change at all.
        (twice.clone(), twice.clone(), "n1"),
        // Another taint removed along with the gate's.
        (twice.clone(), node(json!([])), "n1"),
        // Another taint removed instead.
        (
            twice.clone(),
            node(json!([gate("true", "NoSchedule"), gate("", "NoExecute")])),
            "n1",
        ),
        // A gate taint changed while another is removed.
        (
            twice.clone(),
            node(json!([dedicated, gate("false", "NoSchedule")])),
            "n1",
        ),
        // A gate taint added.
        (
            node(json!([dedicated])),
            node(json!([dedicated, gate("true", "NoSchedule")])),
            "n1",
        ),
    ];
    assert_eq!(admitted(&cases), [false; 6]);
    // And a label changed along with the removal.
    let mut relabelled = gate_patched(&twice);
    relabelled["metadata"]["labels"]["x"] = json!("y");
    assert_eq!(admitted(&[(twice, relabelled, "n1")]), [false]);
}
