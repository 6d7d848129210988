//! The zero-to-jupyterhub post-renderer (`manifests/jupyterhub/post-render.sh`)
//! over a checked-in copy of what the chart renders for its user placeholders
//! (`manifests/jupyterhub/testdata/user-placeholder.yaml`): the patch sets what
//! the agent needs and leaves everything else as the chart rendered it.
//!
//! Needs `kubectl` (for `kubectl kustomize`) and a Python with PyYAML (to turn
//! the rendered YAML into JSON); `bash ci/validate-manifests.sh` installs both
//! into `${TMPDIR:-/tmp}/selfdestruct-validate-venv`. Without them the tests
//! say SKIPPED and pass.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const NAMESPACE: &str = "hub-ns";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn venv_bin(name: &str) -> PathBuf {
    let tmp = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    tmp.join("selfdestruct-validate-venv/bin").join(name)
}

fn runs(program: &Path, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// kubectl from $KUBECTL, the validation venv, or PATH.
fn kubectl() -> Option<PathBuf> {
    let candidates = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .into_iter()
        .chain([venv_bin("kubectl"), PathBuf::from("kubectl")]);
    candidates
        .into_iter()
        .find(|k| runs(k, &["version", "--client"]))
}

/// A Python that can import yaml: the validation venv's, else python3.
fn python() -> Option<PathBuf> {
    [venv_bin("python"), PathBuf::from("python3")]
        .into_iter()
        .find(|p| runs(p, &["-c", "import yaml"]))
}

/// The tools, or None after printing why the test is skipped.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let (Some(k), Some(p)) = (kubectl(), python()) else {
        eprintln!(
            "SKIPPED: needs kubectl and a Python with PyYAML (run `bash ci/validate-manifests.sh` \
             once to install both into ${{TMPDIR:-/tmp}}/selfdestruct-validate-venv, or put them in PATH)"
        );
        return None;
    };
    Some((k, p))
}

/// Every YAML document of `text`, as JSON.
fn yaml_docs(python: &Path, text: &str) -> Vec<Value> {
    let script = "import json, sys, yaml\n\
                  docs = [d for d in yaml.safe_load_all(sys.stdin) if d is not None]\n\
                  json.dump(docs, sys.stdout)";
    let out = pipe(Command::new(python).args(["-c", script]), text);
    serde_json::from_str::<Vec<Value>>(&out).expect("JSON from the YAML")
}

/// Runs `cmd` with `input` on stdin; panics with its stderr on failure.
fn pipe(cmd: &mut Command, input: &str) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn chart_output() -> String {
    std::fs::read_to_string(root().join("manifests/jupyterhub/testdata/user-placeholder.yaml"))
        .expect("test data")
}

/// post-render.sh over `input`, parsed.
fn post_render(kubectl: &Path, python: &Path, input: &str, variant: &str) -> Vec<Value> {
    let out = pipe(
        Command::new("bash")
            .arg(root().join("manifests/jupyterhub/post-render.sh"))
            .arg(NAMESPACE)
            .env("KUBECTL", kubectl)
            .env("SELFDESTRUCT_VARIANT", variant)
            .env_remove("SELFDESTRUCT_IMAGE"),
        input,
    );
    yaml_docs(python, &out)
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in {docs:#?}");
    found[0]
}

fn env_of(container: &Value) -> Vec<(String, Value)> {
    container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let v = if e["value"].is_null() {
                e["valueFrom"].clone()
            } else {
                e["value"].clone()
            };
            (e["name"].as_str().expect("name").to_string(), v)
        })
        .collect()
}

/// Removes exactly what the patch may change, so the rest can be compared.
fn without_patched_fields(mut sts: Value) -> Value {
    let spec = &mut sts["spec"]["template"]["spec"];
    let obj = spec.as_object_mut().expect("pod spec");
    for k in [
        "schedulerName",
        "serviceAccountName",
        "automountServiceAccountToken",
    ] {
        obj.remove(k);
    }
    let c = spec["containers"][0].as_object_mut().expect("container");
    c.remove("image");
    c.remove("env");
    sts
}

fn check_common(docs: &[Value], input: &[Value]) -> Value {
    let sts = find(docs, "StatefulSet").clone();
    let pod = &sts["spec"]["template"]["spec"];
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["serviceAccountName"], "selfdestruct-user-placeholder");
    assert_eq!(pod["automountServiceAccountToken"], true);
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "still one container");
    assert_eq!(containers[0]["name"], "pause");
    assert_eq!(
        containers[0]["image"],
        "ghcr.io/selfdestruct/selfdestruct:0.1.0"
    );
    let env = env_of(&containers[0]);
    for (name, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
        ("NODE_NAME", "spec.nodeName"),
    ] {
        let v = env
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} missing: {env:?}"));
        assert_eq!(v.1, json!({ "fieldRef": { "fieldPath": field } }), "{name}");
    }
    // Everything else exactly as the chart rendered it: resources, affinity,
    // tolerations, priority, security context, labels, replicas...
    let chart = find(input, "StatefulSet").clone();
    assert_eq!(
        without_patched_fields(sts.clone()),
        without_patched_fields(chart.clone()),
        "the patch changed more than the agent needs"
    );
    assert_eq!(
        chart["spec"]["template"]["spec"]["automountServiceAccountToken"], false,
        "the test data is the chart's output (token off)"
    );

    let sa = find(docs, "ServiceAccount");
    assert_eq!(sa["metadata"]["name"], "selfdestruct-user-placeholder");
    let rb = find(docs, "RoleBinding");
    assert_eq!(
        rb["subjects"],
        json!([{
            "kind": "ServiceAccount",
            "name": "selfdestruct-user-placeholder",
            "namespace": NAMESPACE,
        }])
    );
    assert_eq!(rb["roleRef"]["name"], "selfdestruct-user-placeholder");
    let pdb = find(docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    // The budget selects the placeholders (and nothing the chart labels otherwise).
    let pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .expect("labels");
    for (k, v) in pdb["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(pod_labels.get(k), Some(v), "PDB selector {k}");
    }
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"]["component"],
        "user-placeholder"
    );
    // The chart's own objects and ours: nothing else appears.
    assert_eq!(docs.len(), input.len() + 4, "{docs:#?}");
    sts
}

fn pod_verbs(role: &Value) -> Vec<String> {
    role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| r["resources"] == json!(["pods"]))
        .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

fn sibling_selector(sts: &Value) -> Value {
    let env = env_of(&sts["spec"]["template"]["spec"]["containers"][0]);
    env.into_iter()
        .find(|(n, _)| n == "SELFDESTRUCT_SIBLING_SELECTOR")
        .map(|(_, v)| v)
        .expect("SELFDESTRUCT_SIBLING_SELECTOR")
}

#[test]
fn the_post_renderer_patches_the_charts_user_placeholders() {
    let Some((kubectl, python)) = tools() else {
        return;
    };
    let input_text = chart_output();
    let input = yaml_docs(&python, &input_text);
    let docs = post_render(&kubectl, &python, &input_text, "full");
    let sts = check_common(&docs, &input);
    // Sibling awareness limited to the placeholders (the chart's
    // app.kubernetes.io labels are on every hub pod).
    assert_eq!(sibling_selector(&sts), "component=user-placeholder");
    let role = find(&docs, "Role");
    assert_eq!(pod_verbs(role), ["get", "list", "watch"]);
}

#[test]
fn the_minimal_variant_has_no_list_or_watch_and_no_sibling_awareness() {
    let Some((kubectl, python)) = tools() else {
        return;
    };
    let input_text = chart_output();
    let input = yaml_docs(&python, &input_text);
    let docs = post_render(&kubectl, &python, &input_text, "minimal");
    let sts = check_common(&docs, &input);
    assert_eq!(sibling_selector(&sts), "none");
    let role = find(&docs, "Role");
    assert_eq!(pod_verbs(role), ["get"]);
    let all: Vec<String> = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .flat_map(|r| {
            let res = r["resources"][0].as_str().unwrap_or_default().to_string();
            r["verbs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |v| format!("{res}:{}", v.as_str().unwrap_or_default()))
        })
        .collect();
    assert_eq!(all, ["pods:get", "pods/eviction:create", "events:create"]);
}

#[test]
fn the_post_renderer_leaves_other_charts_alone_and_needs_a_namespace() {
    let Some((kubectl, _python)) = tools() else {
        return;
    };
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n";
    let out = pipe(
        Command::new("bash")
            .arg(root().join("manifests/jupyterhub/post-render.sh"))
            .arg(NAMESPACE)
            .env("KUBECTL", &kubectl),
        other,
    );
    assert_eq!(out, other, "no user placeholders: passed through");
    let status = Command::new("bash")
        .arg(root().join("manifests/jupyterhub/post-render.sh"))
        .env("KUBECTL", &kubectl)
        .env_remove("HELM_NAMESPACE")
        .env_remove("SELFDESTRUCT_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run post-render.sh");
    assert!(!status.success(), "no namespace: refuses");
}

#[test]
fn the_post_renderer_takes_the_image_from_selfdestruct_image() {
    let Some((kubectl, python)) = tools() else {
        return;
    };
    let render = |image: &str, variant: &str| {
        Command::new("bash")
            .arg(root().join("manifests/jupyterhub/post-render.sh"))
            .arg(NAMESPACE)
            .env("KUBECTL", &kubectl)
            .env("SELFDESTRUCT_VARIANT", variant)
            .env("SELFDESTRUCT_IMAGE", image)
            .stdin(
                std::fs::File::open(
                    root().join("manifests/jupyterhub/testdata/user-placeholder.yaml"),
                )
                .expect("test data"),
            )
            .output()
            .expect("run post-render.sh")
    };
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    for variant in ["full", "minimal"] {
        for image in [
            "registry.example:5000/team/selfdestruct:dev-1".to_string(),
            format!("registry.example/selfdestruct@{digest}"),
        ] {
            let out = render(&image, variant);
            assert!(
                out.status.success(),
                "{image}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let docs = yaml_docs(&python, &String::from_utf8_lossy(&out.stdout));
            let sts = find(&docs, "StatefulSet");
            assert_eq!(
                sts["spec"]["template"]["spec"]["containers"][0]["image"],
                image.as_str(),
                "{variant}"
            );
        }
    }
    // Neither a tag nor a digest: refused, naming the variable.
    for bad in ["registry.example/selfdestruct", "a b:c", "x:y/z"] {
        let out = render(bad, "full");
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("SELFDESTRUCT_IMAGE"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
