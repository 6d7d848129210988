//! Unit tests of `node_gate` (a child module: they see its private items).

use super::*;
use std::time::Duration;

use serde_json::{Value, json};

use crate::api::ApiError;

use selfdestruct_decision::settings::ImageSettings;

#[test]
fn the_node_name_is_one_escaped_segment() {
    assert_eq!(node_url("node-a"), "/api/v1/nodes/node-a");
    assert_eq!(node_url("n?x=1"), "/api/v1/nodes/n%3Fx%3D1");
    assert_eq!(node_url("../pods"), "/api/v1/nodes/..%2Fpods");
}

#[test]
fn settings_default_and_the_own_node_is_required() {
    let gate = |flags: &[&str]| {
        let argv = [&["selfdestruct-node-gate"][..], flags].concat();
        let cli = <Cli as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.config().map_err(|e| e.to_string())
    };
    let c = gate(&["--node-name=n1", "--gate-poll=10ms"]).expect("valid");
    assert_eq!(c.gate.taint_key, DEFAULT_TAINT);
    assert_eq!(c.gate.timeout, Duration::from_secs(900));
    assert_eq!(c.gate.poll, Duration::from_secs(1), "at least 1s");
    assert_eq!(c.gate.warm_label.as_deref(), Some(DEFAULT_WARM_LABEL));
    for off in [
        "--gate-warm-label=",
        "--gate-warm-label=none",
        "--gate-warm-label=None",
    ] {
        let c = gate(&["--node-name=n1", off]).expect("valid");
        assert_eq!(c.gate.warm_label, None, "{off}: no label");
    }
    let c = gate(&["--node-name=n1", "--gate-warm-label=example.org/warm"]).expect("valid");
    assert_eq!(c.gate.warm_label.as_deref(), Some("example.org/warm"));
    for bad in ["a b", "k=v", "!k", "x/y/z", "-a"] {
        let e = gate(&["--node-name=n1", &format!("--gate-warm-label={bad}")])
            .expect_err("not a label key");
        assert!(
            e.contains("SELFDESTRUCT_GATE_WARM_LABEL") && e.contains("label key"),
            "{bad}: {e}"
        );
    }
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
            warm_label: Some(DEFAULT_WARM_LABEL.into()),
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
    let patch = gate_patch(&v, None).expect("has the taint");
    assert_eq!(patch[0]["op"], "test");
    assert_eq!(patch[0]["value"], node["spec"]["taints"]);
    assert_eq!(patch[1], json!({"op": "remove", "path": "/spec/taints/1"}));
}

/// Applies a JSON patch of the gate's operations (`test`, `remove`, `add`) to
/// `node`, as the API server would; panics where a `test` fails.
fn apply_patch(node: &Value, patch: &Value) -> Value {
    let mut out = node.clone();
    for op in patch.as_array().expect("a JSON patch") {
        let path = op["path"].as_str().expect("path");
        let pointer = |out: &Value| out.pointer(path).cloned().unwrap_or(Value::Null);
        match op["op"].as_str() {
            Some("test") => assert_eq!(pointer(&out), op["value"], "test of {path} fails"),
            Some("remove") => {
                let (parent, i) = path.rsplit_once('/').expect("a parent");
                let i: usize = i.parse().expect("an index");
                out.pointer_mut(parent)
                    .and_then(Value::as_array_mut)
                    .expect("a list")
                    .remove(i);
            }
            Some("add") => {
                let (parent, key) = path.rsplit_once('/').expect("a parent");
                let key = key.replace("~1", "/").replace("~0", "~");
                out.pointer_mut(parent)
                    .and_then(Value::as_object_mut)
                    .expect("an object")
                    .insert(key, op["value"].clone());
            }
            other => panic!("unexpected op {other:?}"),
        }
    }
    out
}

#[test]
fn the_warm_label_goes_in_the_taint_patch_or_alone() {
    let gated = json!({
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {"taints": [
            {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"},
            {"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"}
        ]},
    });
    let label = Some(DEFAULT_WARM_LABEL);
    // With the taint removal, in one patch.
    let v = view(&gated, &cfg(""));
    let after = apply_patch(&gated, &gate_patch(&v, label).expect("work"));
    assert_eq!(gate_taints_left(&after, DEFAULT_TAINT), 0);
    assert_eq!(
        after["metadata"]["labels"],
        json!({"kubernetes.io/hostname": "n1", "selfdestruct.io/images-warm": "true"})
    );
    assert_eq!(after["spec"]["taints"].as_array().map(Vec::len), Some(1));
    // Without the taint: the label alone, unguarded (adding one key conflicts with nothing).
    let v = view(&after, &cfg(""));
    assert_eq!(
        gate_patch(&v, label),
        None,
        "labelled and open: nothing to do"
    );
    let mut open = after.clone();
    open["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove(DEFAULT_WARM_LABEL);
    let patch = gate_patch(&view(&open, &cfg("")), label).expect("the label");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/labels/selfdestruct.io~1images-warm", "value": "true"}])
    );
    assert_eq!(apply_patch(&open, &patch), after);
    // A label set by someone else, whatever its value, is left alone.
    let mut theirs = open.clone();
    theirs["metadata"]["labels"][DEFAULT_WARM_LABEL] = json!("false");
    assert_eq!(gate_patch(&view(&theirs, &cfg("")), label), None);
    // No label map at all: added whole, guarded by a test that it is still absent.
    let mut bare = open.clone();
    bare["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels");
    let patch = gate_patch(&view(&bare, &cfg("")), label).expect("the label");
    assert_eq!(
        patch[0],
        json!({"op": "test", "path": "/metadata/labels", "value": null})
    );
    assert_eq!(
        apply_patch(&bare, &patch)["metadata"]["labels"],
        json!({"selfdestruct.io/images-warm": "true"})
    );
    // "~" and "/" escaped (RFC 6901).
    let patch = gate_patch(&view(&open, &cfg("")), Some("a.io/b~c")).expect("the label");
    assert_eq!(patch[0]["path"], "/metadata/labels/a.io~1b~0c");
    // No label asked for, no taint: nothing.
    assert_eq!(gate_patch(&view(&open, &cfg("")), None), None);
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
    let patch = gate_patch(&v, None).expect("has the taint");
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
    assert_eq!(gate_patch(&v, None), None);
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

// --- the pure step: look and answered ---

const IMAGE: &str = "quay.io/jupyter/scipy-notebook:2025-01-06";

/// Node `n1`: tainted with the gate key or not, holding `IMAGE` or not, labelled warm or not.
fn n1(gated: bool, image: bool, warm: bool) -> Value {
    let mut taints =
        vec![json!({"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"})];
    if gated {
        taints.push(json!({"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"}));
    }
    let mut labels = json!({"kubernetes.io/hostname": "n1"});
    if warm {
        labels[DEFAULT_WARM_LABEL] = json!("true");
    }
    let images = if image {
        json!([{"names": [IMAGE]}])
    } else {
        json!([])
    };
    json!({"metadata": {"name": "n1", "labels": labels}, "spec": {"taints": taints},
           "status": {"images": images}})
}

/// What [`look`] decided, without the patch's text.
fn kind(next: &Next) -> String {
    match next {
        Next::Patch { label, ready, .. } => format!("patch label={label:?} ready={ready}"),
        other => format!("{other:?}"),
    }
}

/// A case: its name, the node read, the required images, the time left before the
/// fail-open, the progress before; what [`look`] decides, and says.
type Case = (
    &'static str,
    Value,
    &'static str,
    Duration,
    Progress,
    String,
    Option<Note>,
);

#[test]
fn one_read_of_the_node_decides_what_the_gate_does() {
    let secs = Duration::from_secs;
    let (poll, timeout) = (secs(10), secs(60));
    let label = Some(DEFAULT_WARM_LABEL.to_string());
    let patch =
        |label: &Option<String>, ready: bool| format!("patch label={label:?} ready={ready}");
    let fresh = Progress::default;
    let waited = || Progress {
        told_waiting: true,
        ..Progress::default()
    };
    #[rustfmt::skip]
    let table: Vec<Case> = vec![
        ("gated, nothing required", n1(true, false, false), "", timeout, fresh(),
         patch(&label, true), None),
        ("gated, the image there", n1(true, true, false), IMAGE, timeout, fresh(),
         patch(&label, true), None),
        ("the image came after a wait", n1(true, true, false), IMAGE, timeout, waited(),
         patch(&label, true), Some(Note::ImagesThere)),
        ("gated, the image missing: a poll", n1(true, false, false), IMAGE, timeout, fresh(),
         kind(&Next::Wait(poll)), Some(Note::Waiting)),
        ("said once", n1(true, false, false), IMAGE, timeout, waited(),
         kind(&Next::Wait(poll)), None),
        ("wakes at the fail-open, not a poll after it", n1(true, false, false), IMAGE, secs(3), waited(),
         kind(&Next::Wait(secs(3))), None),
        ("fail-open: the taint alone", n1(true, false, false), IMAGE, Duration::ZERO, waited(),
         patch(&None, false), Some(Note::FailOpen)),
        ("fail-open said once", n1(true, false, false), IMAGE, Duration::ZERO,
         Progress { told_fail_open: true, ..waited() }, patch(&None, false), None),
        ("after the fail-open the label waits", n1(false, false, false), IMAGE, Duration::ZERO,
         Progress { opened: true, ..Progress::default() }, kind(&Next::Wait(poll)), Some(Note::LabelWaits)),
        ("no taint: the label alone, once the image is there", n1(false, true, false), IMAGE, timeout, fresh(),
         patch(&label, true), None),
        ("no taint, the image missing: wait for it", n1(false, false, false), IMAGE, timeout, fresh(),
         kind(&Next::Wait(poll)), Some(Note::Waiting)),
        ("open and labelled", n1(false, true, true), IMAGE, timeout, fresh(),
         kind(&Next::Done), Some(Note::NothingToRemove)),
        ("labelled after a fail-open", n1(false, true, true), IMAGE, timeout,
         Progress { opened: true, ..Progress::default() }, kind(&Next::Done), None),
        ("an accepted patch checked by reading", n1(false, true, true), IMAGE, timeout,
         Progress { unverified: true, ..Progress::default() }, kind(&Next::Done), Some(Note::OpenedChecked)),
    ];
    for (case, node, images, left, mut p, want, note) in table {
        let c = cfg(images);
        let (next, said) = look(&view(&node, &c), &c.gate, left, &mut p);
        assert_eq!((kind(&next), said), (want, note), "{case}");
    }
    // Without a warm label: the taint alone, and then done.
    let mut c = cfg("");
    c.gate.warm_label = None;
    let (next, _) = look(
        &view(&n1(true, true, false), &c),
        &c.gate,
        timeout,
        &mut fresh(),
    );
    assert_eq!(kind(&next), patch(&None, true));
    let (next, _) = look(
        &view(&n1(false, true, false), &c),
        &c.gate,
        timeout,
        &mut fresh(),
    );
    assert_eq!(next, Next::Done);
}

/// The gate's pure step against a server that applies its patches (`apply_patch`),
/// each read `at` after the start (the fail-open at `timeout`): the steps it took.
fn run_gate(mut node: Value, c: &GateConfig, reads: &[(Duration, Option<Value>)]) -> Vec<String> {
    let mut p = Progress::default();
    let mut steps = Vec::new();
    for (at, change) in reads {
        if let Some(change) = change {
            node = change.clone();
        }
        let v = view(&node, c);
        let (next, note) = look(&v, &c.gate, c.gate.timeout.saturating_sub(*at), &mut p);
        steps.push(format!("{} {note:?}", kind(&next)));
        if let Next::Patch {
            patch,
            label,
            ready,
        } = next
        {
            node = apply_patch(&node, &patch);
            let answer = node.to_string().into_bytes();
            let (next, note) =
                answered(&answer, "n1", &v, label.as_deref(), ready, &c.gate, &mut p);
            steps.push(format!("{} {note:?}", kind(&next)));
        }
    }
    steps
}

#[test]
fn a_gate_waits_fails_open_then_labels_the_node_once_the_image_is_listed() {
    let c = cfg(IMAGE);
    let secs = Duration::from_secs;
    let steps = run_gate(
        n1(true, false, false),
        &c,
        &[
            (secs(0), None),
            (secs(10), None),
            (secs(900), None),
            (secs(910), None),
            (secs(920), Some(n1(false, true, false))),
            (secs(930), None),
        ],
    );
    let label = DEFAULT_WARM_LABEL.to_string();
    assert_eq!(
        steps,
        [
            "Wait(10s) Some(Waiting)".to_string(),
            "Wait(10s) None".into(),
            "patch label=None ready=false Some(FailOpen)".into(),
            "Wait(10s) Some(Opened { label: \"\", fail_open: true })".into(),
            "Wait(10s) Some(LabelWaits)".into(),
            "patch label=Some(\"selfdestruct.io/images-warm\") ready=true None".into(),
            format!("Done Some(Labelled {{ label: {label:?} }})"),
            "Done None".into(),
        ]
    );
}

#[test]
fn an_answer_that_does_not_show_the_patch_applied_is_read_again() {
    let c = cfg("");
    let node = n1(true, false, false);
    let v = view(&node, &c);
    let (
        Next::Patch {
            patch,
            label,
            ready,
        },
        _,
    ) = look(&v, &c.gate, c.gate.timeout, &mut Progress::default())
    else {
        panic!("a patch")
    };
    let applied = apply_patch(&node, &patch);
    let mut p = Progress::default();
    let mut answer = |a: &Value| {
        answered(
            a.to_string().as_bytes(),
            "n1",
            &v,
            label.as_deref(),
            ready,
            &c.gate,
            &mut p,
        )
    };
    let label = DEFAULT_WARM_LABEL.to_string();
    assert_eq!(
        answer(&applied),
        (
            Next::Done,
            Some(Note::Opened {
                label,
                fail_open: false
            })
        )
    );
    // A proxy or webhook that dropped the change: the same node back.
    let unverified = |left, labelled| (Next::Reread, Some(Note::Unverified { left, labelled }));
    assert_eq!(answer(&node), unverified(Some(1), false));
    // The label went, the taint stayed; the taint went, the label did not.
    let mut half = node.clone();
    half["metadata"]["labels"][DEFAULT_WARM_LABEL] = json!("true");
    assert_eq!(answer(&half), unverified(Some(1), true));
    let mut half = applied.clone();
    half["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove(DEFAULT_WARM_LABEL);
    assert_eq!(answer(&half), unverified(Some(0), false));
    // Not the node: another node, a Status, no JSON.
    let mut other = applied.clone();
    other["metadata"]["name"] = json!("n2");
    assert_eq!(answer(&other), unverified(None, false));
    assert_eq!(answer(&json!({"kind": "Status"})), unverified(None, false));
    assert_eq!(
        answered(b"<html>", "n1", &v, None, true, &c.gate, &mut p),
        unverified(None, false)
    );
    assert!(p.unverified, "the next read decides");
}

/// The gate's view of any Node (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use crate::testing::props::proptest_config;
    use crate::testing::{json_value, mutate};
    use std::time::Duration;

    use selfdestruct_decision::images;

    fn gate_config(key: &str) -> crate::node_gate::GateConfig {
        crate::node_gate::GateConfig {
            node_name: "n1".into(),
            gate: crate::node_gate::GateSettings {
                taint_key: key.into(),
                images: selfdestruct_decision::settings::ImageSettings {
                    required_images: images::parse_list(
                        "nginx:1.25,quay.io/x/y@sha256:0123456789abcdef0123456789abcdef",
                    )
                    .expect("valid"),
                },
                timeout: Duration::from_secs(60),
                poll: Duration::from_secs(1),
                warm_label: None,
            },
        }
    }

    fn gated_node() -> Value {
        let key = crate::node_gate::DEFAULT_TAINT;
        json!({
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                                {"key": key, "value": "x", "effect": "NoSchedule"},
                                {"key": key, "effect": "NoExecute"}]},
            "status": {"images": [{"names": ["docker.io/library/nginx:1.25"], "sizeBytes": 1}]}
        })
    }

    proptest! {
        #![proptest_config(proptest_config(1000))]

        #[test]
        fn the_gates_view_of_any_node_removes_exactly_its_taints(
            pick in any::<usize>(),
            with in json_value(),
            anything in json_value(),
            key in prop_oneof![Just(crate::node_gate::DEFAULT_TAINT.to_string()), Just("a".to_string()), any::<String>()],
        ) {
            use crate::node_gate::{gate_patch, gate_taints_left, view};
            let cfg = gate_config(&key);
            let mut mutated = gated_node();
            mutate(&mut mutated, pick, with);
            for node in [mutated, anything, gated_node()] {
                let v = view(&node, &cfg);
                prop_assert_eq!(v.gate_indices.len(), gate_taints_left(&node, &key));
                let taints = v.taints.as_array().cloned().unwrap_or_default();
                for i in &v.gate_indices {
                    prop_assert_eq!(taints[*i].get("key").and_then(Value::as_str), Some(key.as_str()));
                }
                prop_assert!(v.missing.len() <= cfg.gate.images.required_images.len());
                match gate_patch(&v, None) {
                    None => prop_assert!(v.gate_indices.is_empty()),
                    Some(patch) => {
                        let ops = patch.as_array().cloned().unwrap_or_default();
                        prop_assert_eq!(&ops[0]["op"], "test");
                        prop_assert_eq!(&ops[0]["value"], &v.taints);
                        // Applied in order, the removals leave every other taint, in order.
                        let mut left = taints.clone();
                        for op in &ops[1..] {
                            prop_assert_eq!(&op["op"], "remove");
                            let i: usize = op["path"]
                                .as_str()
                                .and_then(|p| p.strip_prefix("/spec/taints/"))
                                .and_then(|i| i.parse().ok())
                                .unwrap_or(usize::MAX);
                            prop_assert!(i < left.len(), "{patch}");
                            left.remove(i);
                        }
                        let want: Vec<Value> = taints
                            .iter()
                            .filter(|t| t.get("key").and_then(Value::as_str) != Some(key.as_str()))
                            .cloned()
                            .collect();
                        prop_assert_eq!(left, want);
                    }
                }
            }
        }
    }
}

/// The node gate's ValidatingAdmissionPolicy (`manifests/node-gate/admission-policy.yaml`)
/// evaluated with a CEL interpreter (cel-python) on what the gate really sends:
/// the node before, and after the gate's own JSON patch (`gate_patch`). The
/// policy must let it remove every taint with the gate key in one patch, and
/// refuse anything else a stolen token might try.
///
/// Needs the venv of `ci/validate-manifests.sh` (PyYAML and cel-python), which
/// `.ci/run` installs first; fails without it, saying so.
mod policy {
    use std::io::Write;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use crate::node_gate::{
        DEFAULT_TAINT, DEFAULT_WARM_LABEL, GateConfig, GateSettings, gate_patch, view,
    };
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

    /// The node after the gate's own patch (its `test`s hold: nothing changed),
    /// with the warm label added when `label`.
    fn gate_patched_with(old: &Value, label: bool) -> Value {
        let cfg = GateConfig {
            node_name: "n1".into(),
            gate: GateSettings {
                taint_key: DEFAULT_TAINT.into(),
                images: ImageSettings {
                    required_images: Vec::new(),
                },
                timeout: Duration::from_secs(60),
                poll: Duration::from_secs(1),
                warm_label: Some(DEFAULT_WARM_LABEL.into()),
            },
        };
        let label = label.then_some(DEFAULT_WARM_LABEL);
        let patch = gate_patch(&view(old, &cfg), label).expect("the gate has something to do");
        super::apply_patch(old, &patch)
    }

    fn gate_patched(old: &Value) -> Value {
        gate_patched_with(old, false)
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
        assert_eq!(admitted(&[(twice.clone(), relabelled, "n1")]), [false]);
    }

    /// The warm label: added with the taint removal, or alone on a node without
    /// the taint (a cluster that runs the DaemonSet for the label only); nothing
    /// else may change with it.
    #[test]
    fn the_policy_admits_the_warm_label_and_no_other_label_change() {
        let dedicated =
            json!({"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"});
        let gated = node(json!([
            dedicated,
            {"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"}
        ]));
        let open = node(json!([dedicated]));
        let mut bare = open.clone();
        bare["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("labels");
        for old in [&gated, &open, &bare] {
            let new = gate_patched_with(old, true);
            assert_eq!(
                new["metadata"]["labels"][DEFAULT_WARM_LABEL], "true",
                "{new}"
            );
            assert_eq!(
                admitted(&[(old.clone(), new.clone(), "n1")]),
                [true],
                "{old} -> {new}"
            );
        }
        let with = |old: &Value, key: &str, value: &str| {
            let mut n = old.clone();
            n["metadata"]["labels"][key] = json!(value);
            n
        };
        let labelled = with(&open, DEFAULT_WARM_LABEL, "true");
        let cases = [
            // The warm label on another node than the token's.
            (open.clone(), labelled.clone(), "n2"),
            // Another value.
            (open.clone(), with(&open, DEFAULT_WARM_LABEL, "false"), "n1"),
            // Another label.
            (open.clone(), with(&open, "example.org/x", "true"), "n1"),
            // The warm label and another one.
            (open.clone(), with(&labelled, "example.org/x", "true"), "n1"),
            // The warm label removed, or changed.
            (labelled.clone(), open.clone(), "n1"),
            (
                labelled.clone(),
                with(&open, DEFAULT_WARM_LABEL, "no"),
                "n1",
            ),
            // Another label changed while the taint goes.
            (
                gated.clone(),
                with(&gate_patched(&gated), "kubernetes.io/hostname", "n9"),
                "n1",
            ),
            // The label with a gate taint added.
            (
                open.clone(),
                with(
                    &node(json!([dedicated, {"key": DEFAULT_TAINT, "effect": "NoSchedule"}])),
                    DEFAULT_WARM_LABEL,
                    "true",
                ),
                "n1",
            ),
            // The label with another taint removed.
            (
                open.clone(),
                {
                    let mut n = labelled.clone();
                    n["spec"]["taints"] = json!([]);
                    n
                },
                "n1",
            ),
            // Nothing changed on a labelled node.
            (labelled.clone(), labelled.clone(), "n1"),
        ];
        assert_eq!(admitted(&cases), [false; 10]);
    }
}
