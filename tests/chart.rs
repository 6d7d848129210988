//! The Helm chart (`charts/selfdestruct/`), rendered by Helm's own engine
//! (`ci/render-chart.py`: helm-python-sdk, Helm v4's Go SDK as a library):
//!
//! - `manifests/` (the node gate's `manifests/node-gate/` too), `rbac/` and
//!   the JupyterHub Component (`manifests/jupyterhub/selfdestruct/`) are
//!   rendered from it by `ci/render-manifests.sh`: the committed files equal
//!   a fresh render, byte for byte, and `kubectl kustomize manifests/` (plus
//!   `rbac/node-reader/`) holds the chart's objects field for field but for
//!   Helm's own labels;
//! - `charts/selfdestruct/ci/full-values.yaml` turns on every optional part,
//!   and each one shows up as asked; the node gate's admission policy has the
//!   rules of `manifests/node-gate/admission-policy.yaml`;
//! - values.schema.json refuses bad values, each with a message naming the
//!   value and what is wrong;
//! - the schema's settings are exactly the agent's and the node gate's (walked
//!   from `selfdestruct::Cli::command()` and `node_gate::Cli`'s), and every value the full values
//!   file gives them is one the agent's own parser accepts.
//!
//! Strict validation of the rendered objects against the Kubernetes schemas
//! (1.33 and 1.36) is in `ci/validate-manifests.sh`, beside the
//! kustomizations'. Needs the venv that script builds in
//! `${TMPDIR:-/tmp}/selfdestruct-validate-venv` (helm-python-sdk, PyYAML,
//! kubectl); without it the tests fail, saying so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const CHART: &str = "charts/selfdestruct";
const FULL_VALUES: &str = "charts/selfdestruct/ci/full-values.yaml";

/// Labels only the chart puts on its objects' metadata: Helm's own.
const HELM_LABELS: [&str; 3] = [
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
];

/// The agent's settings the chart's `settings` map leaves out, and why.
const NOT_IN_THE_CHART: [(&str, &str); 3] = [
    ("SELFDESTRUCT_ON_EXIT", "the entrypoint wrapper's only"),
    (
        "SELFDESTRUCT_PODINFO_DIR",
        "the chart passes the identity as env",
    ),
    ("SELFDESTRUCT_SERVICE_ACCOUNT_DIR", "hidden, for the tests"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn venv_bin(name: &str) -> PathBuf {
    std::env::temp_dir()
        .join("selfdestruct-validate-venv/bin")
        .join(name)
}

/// The venv's Python, which can import helm_python and yaml.
fn python() -> PathBuf {
    let python = venv_bin("python");
    let ok = Command::new(&python)
        .args(["-c", "import helm_python, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "needs {} with helm-python-sdk and PyYAML: run `bash ci/validate-manifests.sh` once \
         (as .ci/run does)",
        python.display()
    );
    python
}

/// ci/render-chart.py with a release name, a namespace and more arguments
/// (values files, `--set-json K=JSON`), as JSON objects.
fn render_output(release: &str, namespace: &str, extra: &[&str]) -> Output {
    Command::new(python())
        .current_dir(root())
        .args(["ci/render-chart.py", CHART, release, namespace, "--json"])
        .args(extra)
        .output()
        .expect("run ci/render-chart.py")
}

fn render(release: &str, namespace: &str, extra: &[&str]) -> Vec<Value> {
    let out = render_output(release, namespace, extra);
    assert!(
        out.status.success(),
        "the chart does not render with {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON from ci/render-chart.py")
}

/// `kubectl kustomize DIR` with the venv's kubectl, as JSON objects.
fn kustomize(dir: &str) -> Vec<Value> {
    let out = Command::new(venv_bin("kubectl"))
        .current_dir(root())
        .args(["kustomize", dir])
        .output()
        .expect("run kubectl kustomize (the venv of ci/validate-manifests.sh)");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&out.stdout)
}

/// Every YAML document of `yaml`, as JSON (PyYAML, from the venv).
fn yaml_docs(yaml: &[u8]) -> Vec<Value> {
    let script = "import json, sys, yaml\n\
                  json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)";
    let mut child = Command::new(python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), yaml).expect("write");
    let json = child.wait_with_output().expect("python");
    serde_json::from_slice(&json.stdout).expect("JSON from the YAML")
}

/// The one YAML document of a file of the repository, as JSON.
fn yaml_file(path: &str) -> Value {
    let text = std::fs::read(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut docs = yaml_docs(&text);
    assert_eq!(docs.len(), 1, "{path}");
    docs.remove(0)
}

/// Objects by "Kind namespace/name".
fn by_key(docs: Vec<Value>) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for d in docs {
        let key = format!(
            "{} {}/{}",
            d["kind"].as_str().expect("kind"),
            d["metadata"]["namespace"].as_str().unwrap_or(""),
            d["metadata"]["name"].as_str().expect("name")
        );
        assert!(map.insert(key.clone(), d).is_none(), "{key} twice");
    }
    map
}

/// The chart's objects without Helm's own labels.
fn without_helm_labels(mut docs: Vec<Value>) -> Vec<Value> {
    for d in &mut docs {
        let labels = d["metadata"]["labels"]
            .as_object_mut()
            .expect("every chart object has labels");
        for l in HELM_LABELS {
            assert!(labels.remove(l).is_some(), "no {l} on {}", d["kind"]);
        }
    }
    docs
}

/// Every difference between two sets of objects, one line each.
fn differences(
    chart: &BTreeMap<String, Value>,
    kustomize: &BTreeMap<String, Value>,
) -> Vec<String> {
    let mut diffs = Vec::new();
    for key in chart.keys().chain(kustomize.keys()) {
        match (chart.get(key), kustomize.get(key)) {
            (Some(a), Some(b)) if a != b => {
                diffs.push(format!("{key}: {}", first_difference(a, b, "")))
            }
            (Some(_), None) => diffs.push(format!("{key}: only in the chart")),
            (None, Some(_)) => diffs.push(format!("{key}: only in the kustomization")),
            _ => {}
        }
    }
    diffs.dedup();
    diffs
}

/// Where `a` (the chart's) and `b` (the kustomization's) first differ, and how.
fn first_difference(a: &Value, b: &Value, at: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if va != vb {
                    return first_difference(va, vb, &format!("{at}.{k}"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                if va != vb {
                    return first_difference(va, vb, &format!("{at}[{i}]"));
                }
            }
        }
        _ => {}
    }
    format!("{at}: the chart has {a}, the kustomization {b}")
}

/// The objects of kustomizations, by key.
fn kustomized(dirs: &[&str]) -> BTreeMap<String, Value> {
    by_key(dirs.iter().flat_map(|d| kustomize(d)).collect())
}

/// What `kubectl apply -k manifests/` applies is the chart's render, through
/// kustomize's transformers too (namespace, images).
#[test]
fn the_default_render_is_manifests_plus_the_node_reader_object_for_object() {
    let namespace = ["--set-json", "namespace.create=true"];
    let chart = by_key(without_helm_labels(render(
        "placeholder",
        "placeholders",
        &namespace,
    )));
    let kustomize = kustomized(&["manifests", "rbac/node-reader"]);
    assert!(kustomize.len() >= 9, "{:?}", kustomize.keys());
    let diffs = differences(&chart, &kustomize);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));

    // Without the node reader: manifests/ alone, which leaves it out.
    let chart = by_key(without_helm_labels(render(
        "placeholder",
        "placeholders",
        &[&namespace[..], &["--set-json", "nodeReader.enabled=false"]].concat(),
    )));
    let diffs = differences(&chart, &kustomized(&["manifests"]));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// The command that renders the committed deployment YAML from the chart.
const RENDER_MANIFESTS: &str = "bash ci/render-manifests.sh";
/// The first line of every file it writes.
const GENERATED: &str = "# GENERATED by `bash ci/render-manifests.sh`";

/// Every file below `dir` (relative to the repository), recursively.
fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_below(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// One source of deployment YAML: manifests/, rbac/ and the JupyterHub
/// Component are what `ci/render-manifests.sh` renders from the chart now,
/// byte for byte, and every file that says it is generated is one it writes.
#[test]
fn the_committed_yaml_is_a_fresh_render_of_the_chart() {
    python(); // the venv, or a message naming it
    let out = std::env::temp_dir().join(format!(
        "selfdestruct-render-manifests-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new("bash")
        .current_dir(root())
        .args(["ci/render-manifests.sh", "--out"])
        .arg(&out)
        .output()
        .expect("run ci/render-manifests.sh");
    assert!(
        run.status.success(),
        "{RENDER_MANIFESTS} failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let written: Vec<String> = String::from_utf8(run.stdout)
        .expect("paths")
        .lines()
        .map(str::to_string)
        .collect();
    for must in [
        "manifests/kustomization.yaml",
        "manifests/statefulset.yaml",
        "rbac/role.yaml",
        "manifests/node-gate/daemonset.yaml",
        "manifests/jupyterhub/selfdestruct/statefulset-patch.yaml",
    ] {
        assert!(
            written.iter().any(|w| w == must),
            "{must} not written: {written:?}"
        );
    }
    let mut stale = Vec::new();
    for path in &written {
        let fresh = std::fs::read(out.join(path)).expect("fresh render");
        assert!(fresh.starts_with(GENERATED.as_bytes()), "{path}: no header");
        match std::fs::read(root().join(path)) {
            Ok(committed) if committed == fresh => {}
            Ok(committed) => {
                let (c, f) = (
                    String::from_utf8_lossy(&committed),
                    String::from_utf8_lossy(&fresh),
                );
                let line = c
                    .lines()
                    .zip(f.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(c.lines().count().min(f.lines().count()));
                stale.push(format!(
                    "{path}: differs from a fresh render at line {}:\n  committed: {:?}\n  rendered:  {:?}",
                    line + 1,
                    c.lines().nth(line).unwrap_or("<end of file>"),
                    f.lines().nth(line).unwrap_or("<end of file>"),
                ));
            }
            Err(e) => stale.push(format!("{path}: {e}")),
        }
    }
    // A file that says it is generated but is no longer written.
    let mut committed = Vec::new();
    for dir in ["manifests", "rbac"] {
        files_below(&root().join(dir), &mut committed);
    }
    for file in committed {
        let rel = file.strip_prefix(root()).expect("below the root");
        let rel = rel.to_str().expect("UTF-8 path").to_string();
        let text = std::fs::read(&file).expect("read");
        if text.starts_with(GENERATED.as_bytes()) && !written.contains(&rel) {
            stale.push(format!(
                "{rel}: says it is generated, but {RENDER_MANIFESTS} no longer writes it"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        stale.is_empty(),
        "the deployment YAML is not a fresh render of the chart: run `{RENDER_MANIFESTS}` and \
         commit what it writes (do not edit generated files: change charts/selfdestruct)\n{}",
        stale.join("\n")
    );
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the render"))
}

fn env(container: &Value) -> BTreeMap<String, Value> {
    container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let value = e.get("value").cloned().unwrap_or(e["valueFrom"].clone());
            (e["name"].as_str().expect("name").to_string(), value)
        })
        .collect()
}

#[test]
fn the_full_values_file_renders_every_optional_part() {
    let docs = render("hub", "hub-ns", &[FULL_VALUES]);
    let image = "registry.example.org/team/selfdestruct@sha256:\
                 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    // The release namespace, enforcing Pod Security "restricted".
    let labels = &find(&docs, "Namespace", "hub-ns")["metadata"]["labels"];
    for mode in ["enforce", "audit", "warn"] {
        assert_eq!(
            labels[format!("pod-security.kubernetes.io/{mode}")],
            "restricted"
        );
    }
    // The priority class under its own name, used by every set.
    assert_eq!(
        find(&docs, "PriorityClass", "hub-placeholders")["value"],
        -10
    );
    // Two sets: the first with the release-wide values, the second with its own.
    // Named after the release and the set.
    let cpu = find(&docs, "StatefulSet", "hub-cpu");
    let gpu = find(&docs, "StatefulSet", "hub-gpu");
    for (set, set_name) in [(cpu, "cpu"), (gpu, "gpu")] {
        let pod = &set["spec"]["template"]["spec"];
        assert_eq!(pod["priorityClassName"], "hub-placeholders");
        assert_eq!(
            pod["imagePullSecrets"],
            json!([{"name": "registry-credentials"}])
        );
        assert_eq!(pod["containers"][0]["image"], image);
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "Always");
        // The gate's taint first, whatever the set tolerates besides.
        assert_eq!(
            pod["tolerations"][0],
            json!({"key": "example.org/images-pending", "operator": "Exists", "effect": "NoSchedule"})
        );
        // Then the cluster autoscaler's soft taint on an empty new node (issue 32, 1b).
        assert_eq!(
            pod["tolerations"][1],
            json!({"key": "DeletionCandidateOfClusterAutoscaler", "operator": "Exists", "effect": "PreferNoSchedule"})
        );
        // Its own selector: the set's name as the component label.
        assert_eq!(
            set["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"],
            set_name
        );
    }
    assert_eq!(cpu["spec"]["replicas"], 2);
    assert_eq!(gpu["spec"]["replicas"], 1);
    let (cpu_pod, gpu_pod) = (
        &cpu["spec"]["template"]["spec"],
        &gpu["spec"]["template"]["spec"],
    );
    assert_eq!(
        cpu_pod["nodeSelector"],
        json!({"hub.jupyter.org/node-purpose": "user"})
    );
    assert_eq!(
        gpu_pod["nodeSelector"],
        json!({"cloud.google.com/gke-accelerator": "nvidia-l4"})
    );
    assert_eq!(
        cpu_pod["tolerations"][2]["key"],
        "hub.jupyter.org/dedicated"
    );
    assert_eq!(gpu_pod["tolerations"][2]["key"], "nvidia.com/gpu");
    assert!(cpu_pod["affinity"]["podAntiAffinity"].is_object());
    assert!(gpu_pod["affinity"]["nodeAffinity"].is_object());
    assert!(gpu_pod["affinity"].get("podAntiAffinity").is_none());
    assert_eq!(
        gpu_pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        1
    );
    // Settings: every one of the release's, the set's own over them, all as strings.
    let cpu_env = env(&cpu_pod["containers"][0]);
    let gpu_env = env(&gpu_pod["containers"][0]);
    assert_eq!(cpu_env["SELFDESTRUCT_MAX_MOVES_PER_HOUR"], "12");
    assert_eq!(gpu_env["SELFDESTRUCT_MAX_MOVES_PER_HOUR"], "2");
    assert_eq!(cpu_env["SELFDESTRUCT_DRY_RUN"], "false");
    assert_eq!(
        gpu_env["SELFDESTRUCT_REQUIRED_IMAGES"],
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-01-06"
    );
    assert_eq!(cpu_env["POD_UID"]["fieldRef"]["fieldPath"], "metadata.uid");
    assert_eq!(cpu_env.len(), 4 + 17, "{cpu_env:?}");

    // The node reader and the own-pod-only policy, for this release's account
    // (cluster-scoped: named after the release and its namespace).
    let subject = &find(&docs, "ClusterRoleBinding", "hub-node-reader.hub-ns")["subjects"][0];
    assert_eq!(
        subject,
        &json!({"kind": "ServiceAccount", "name": "hub", "namespace": "hub-ns"})
    );
    let own_pod = find(
        &docs,
        "ValidatingAdmissionPolicy",
        "hub-own-pod-only.hub-ns",
    );
    assert_eq!(
        own_pod["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:hub-ns:hub'"
    );
    let binding = find(
        &docs,
        "ValidatingAdmissionPolicyBinding",
        "hub-own-pod-only.hub-ns",
    );
    assert_eq!(
        binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "hub-ns"
    );

    // The node gate: one puller per image, its taint, its settings, its own
    // instance label (so its pods are neither siblings nor in the budget).
    let gate = find(&docs, "DaemonSet", "hub-node-gate");
    let pod = &gate["spec"]["template"]["spec"];
    let pulled: Vec<&Value> = pod["initContainers"]
        .as_array()
        .expect("init containers")
        .iter()
        .map(|c| &c["image"])
        .collect();
    assert_eq!(
        pulled,
        [
            "quay.io/jupyter/scipy-notebook:2025-01-06",
            "quay.io/jupyter/pytorch-notebook:cuda12-2025-01-06"
        ]
    );
    assert_eq!(pod["containers"][0]["image"], image);
    // The gate's own binary, named by the DaemonSet (the image's entrypoint is the agent's).
    assert_eq!(
        pod["containers"][0]["command"],
        json!(["/selfdestruct-node-gate"])
    );
    assert!(pod["containers"][0]["args"].is_null());
    let gate_env = env(&pod["containers"][0]);
    assert_eq!(
        gate_env["SELFDESTRUCT_GATE_TAINT"],
        "example.org/images-pending"
    );
    assert_eq!(gate_env["SELFDESTRUCT_GATE_POLL"], "10s");
    assert_eq!(pod["tolerations"][0]["key"], "example.org/images-pending");
    assert_eq!(
        pod["nodeSelector"],
        json!({"hub.jupyter.org/node-purpose": "user"})
    );
    let labels = &pod["serviceAccountName"];
    assert_eq!(labels, "hub-node-gate");
    let gate_labels = &gate["spec"]["template"]["metadata"]["labels"];
    let budget = &find(&docs, "PodDisruptionBudget", "hub")["spec"]["selector"]["matchLabels"];
    assert!(
        budget
            .as_object()
            .expect("matchLabels")
            .iter()
            .any(|(k, v)| gate_labels[k] != *v),
        "the budget selects the gate's pods: {gate_labels}"
    );
    assert_eq!(
        find(&docs, "ClusterRoleBinding", "hub-node-gate.hub-ns")["subjects"][0]["name"],
        "hub-node-gate"
    );
}

/// `value` with every run of whitespace in its strings made one space:
/// kustomize writes the policy's folded CEL with an extra blank line where a
/// line is more indented, which changes no expression.
fn single_spaced(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Value::Array(a) => Value::Array(a.iter().map(single_spaced).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), single_spaced(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The chart's node-gate policy holds the rules of
/// manifests/node-gate/admission-policy.yaml: the same validations and
/// variables, with the release's account and taint where the manifest names
/// its own.
#[test]
fn the_node_gate_policy_has_the_rules_of_the_manifest() {
    let taint = "startup-taint.cluster-autoscaler.kubernetes.io/images-pending";
    let docs = render(
        "node-gate",
        "node-gate",
        &["--set-json", "nodeGate.enabled=true"],
    );
    let chart = find(
        &docs,
        "ValidatingAdmissionPolicy",
        "node-gate-node-gate.node-gate",
    );
    let manifest = kustomize("manifests/node-gate");
    let manifest = find(
        &manifest,
        "ValidatingAdmissionPolicy",
        "selfdestruct-node-gate.node-gate",
    );
    for field in [
        "failurePolicy",
        "matchConstraints",
        "variables",
        "validations",
    ] {
        assert_eq!(
            single_spaced(&chart["spec"][field]),
            single_spaced(&manifest["spec"][field]),
            "spec.{field}"
        );
    }
    assert_eq!(
        chart["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:node-gate:node-gate-node-gate'"
    );
    // Another taint reaches the policy, its message and the gate.
    let docs = render(
        "hub",
        "hub",
        &[
            "--set-json",
            r#"nodeGate={"enabled":true,"taint":"example.org/pending"}"#,
        ],
    );
    let policy = find(&docs, "ValidatingAdmissionPolicy", "hub-node-gate.hub").to_string();
    assert!(
        policy.contains("'example.org/pending'") && !policy.contains(taint),
        "{policy}"
    );
}

/// `avoidWarmNodes` gives the placeholders node affinity against the gate's warm
/// label (preferred of its weight, or required, added to each required term of
/// a set's own affinity); off by default; the gate gets the same label key, and
/// so does its admission policy.
#[test]
fn avoid_warm_nodes_keeps_placeholders_off_the_gates_warm_label() {
    let warm = "selfdestruct.io/images-warm";
    let term = json!({"key": warm, "operator": "DoesNotExist"});
    let affinity = |docs: &[Value], name: &str| {
        find(docs, "StatefulSet", name)["spec"]["template"]["spec"]["affinity"].clone()
    };
    // Off by default: the pod anti-affinity alone.
    let docs = render("hub", "hub", &["--set-json", "nodeGate.enabled=true"]);
    let a = affinity(&docs, "hub-placeholder");
    assert!(a["nodeAffinity"].is_null(), "{a}");
    assert!(a["podAntiAffinity"].is_object(), "{a}");
    let gate = find(&docs, "DaemonSet", "hub-node-gate");
    assert_eq!(
        env(&gate["spec"]["template"]["spec"]["containers"][0])["SELFDESTRUCT_GATE_WARM_LABEL"],
        warm
    );
    let policy = find(&docs, "ValidatingAdmissionPolicy", "hub-node-gate.hub").to_string();
    assert!(policy.contains(&format!("'{warm}'")), "{policy}");
    // Preferred, of its weight, beside the pod anti-affinity.
    let docs = render(
        "hub",
        "hub",
        &[
            "--set-json",
            r#"avoidWarmNodes={"mode":"preferred","weight":40}"#,
        ],
    );
    let a = affinity(&docs, "hub-placeholder");
    assert_eq!(
        a["nodeAffinity"],
        json!({"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 40, "preference": {"matchExpressions": [term]}}]})
    );
    assert!(a["podAntiAffinity"].is_object(), "{a}");
    // Required, added to every term of a set's own required affinity; a set may
    // turn it off; another label key follows nodeGate.warmLabel.
    let docs = render(
        "hub",
        "hub",
        &[
            "--set-json",
            r#"avoidWarmNodes={"mode":"required"}"#,
            "--set-json",
            r#"nodeGate={"warmLabel":"example.org/warm"}"#,
            "--set-json",
            r#"placeholders=[{"name":"a"},{"name":"b","avoidWarmNodes":{"mode":""}},
               {"name":"c","affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
                 {"nodeSelectorTerms":[{"matchExpressions":[{"key":"x","operator":"Exists"}]},
                                       {"matchFields":[{"key":"metadata.name","operator":"In","values":["n"]}]}]}}}}]"#,
        ],
    );
    let other = json!({"key": "example.org/warm", "operator": "DoesNotExist"});
    assert_eq!(
        affinity(&docs, "hub-a")["nodeAffinity"],
        json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [other]}]}})
    );
    assert!(affinity(&docs, "hub-b")["nodeAffinity"].is_null());
    assert_eq!(
        affinity(&docs, "hub-c")["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"],
        json!([
            {"matchExpressions": [{"key": "x", "operator": "Exists"}, other]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}],
             "matchExpressions": [other]}
        ])
    );
    // No label: the gate is told "none" (an empty variable would count as unset),
    // and its policy allows no label.
    let docs = render(
        "hub",
        "hub",
        &["--set-json", r#"nodeGate={"enabled":true,"warmLabel":""}"#],
    );
    let gate = find(&docs, "DaemonSet", "hub-node-gate");
    assert_eq!(
        env(&gate["spec"]["template"]["spec"]["containers"][0])["SELFDESTRUCT_GATE_WARM_LABEL"],
        "none"
    );
    let policy = find(&docs, "ValidatingAdmissionPolicy", "hub-node-gate.hub");
    assert!(
        policy["spec"]["variables"]
            .as_array()
            .expect("variables")
            .iter()
            .any(|v| v["name"] == "warmLabel" && v["expression"] == "''"),
        "{policy}"
    );
    // Without a label to avoid, or with a bad mode or weight, nothing renders.
    for bad in [
        &[
            "--set-json",
            r#"avoidWarmNodes={"mode":"required"}"#,
            "--set",
            "nodeGate.warmLabel=",
        ][..],
        &["--set-json", r#"avoidWarmNodes={"mode":"always"}"#][..],
        &[
            "--set-json",
            r#"avoidWarmNodes={"mode":"preferred","weight":0}"#,
        ][..],
        &["--set-json", r#"nodeGate={"warmLabel":"a b"}"#][..],
    ] {
        let out = render_output("hub", "hub", bad);
        assert!(!out.status.success(), "{bad:?} rendered");
    }
}

/// `pinNodes` annotates a set's placeholders `safe-to-evict: "false"` (the cluster
/// autoscaler then never scales down their node); off by default; a set's own value
/// wins either way; anything but a boolean is refused.
#[test]
fn pin_nodes_annotates_the_placeholders_against_scale_down() {
    let key = "cluster-autoscaler.kubernetes.io/safe-to-evict";
    let annotations = |docs: &[Value], name: &str| {
        find(docs, "StatefulSet", name)["spec"]["template"]["metadata"]["annotations"].clone()
    };
    let docs = render("hub", "hub", &[]);
    assert!(annotations(&docs, "hub-placeholder").is_null());
    let docs = render(
        "hub",
        "hub",
        &[
            "--set",
            "pinNodes=true",
            "--set-json",
            r#"placeholders=[{"name":"a"},{"name":"b","pinNodes":false}]"#,
        ],
    );
    assert_eq!(annotations(&docs, "hub-a"), json!({key: "false"}));
    assert!(annotations(&docs, "hub-b").is_null());
    let docs = render(
        "hub",
        "hub",
        &[
            "--set-json",
            r#"placeholders=[{"name":"a"},{"name":"b","pinNodes":true}]"#,
        ],
    );
    assert!(annotations(&docs, "hub-a").is_null());
    assert_eq!(annotations(&docs, "hub-b"), json!({key: "false"}));
    for bad in [
        &["--set-json", r#"pinNodes="yes""#][..],
        &["--set-json", r#"placeholders=[{"name":"a","pinNodes":1}]"#][..],
    ] {
        let out = render_output("hub", "hub", bad);
        assert!(!out.status.success(), "{bad:?} rendered");
    }
}

/// values.schema.json (and the chart's own checks) refuse bad values before
/// anything is rendered, each with a message that names the value and says
/// what is wrong.
#[test]
fn the_schema_refuses_bad_values_with_messages() {
    let cases: &[(&str, &[&str])] = &[
        (
            "replica=3",
            &["at ''", "additional properties 'replica' not allowed"],
        ),
        (
            r#"settings={"SELFDESTRUCT_MOVE_TO_NEW_NODE":"true"}"#,
            &[
                "at '/settings'",
                "'SELFDESTRUCT_MOVE_TO_NEW_NODE' not allowed",
            ],
        ),
        (
            r#"settings={"SELFDESTRUCT_NODE_SETTLE":"30"}"#,
            &[
                "at '/settings/SELFDESTRUCT_NODE_SETTLE'",
                "'30' does not match pattern",
            ],
        ),
        (
            r#"settings={"SELFDESTRUCT_MODE":"remove"}"#,
            &[
                "at '/settings/SELFDESTRUCT_MODE'",
                "value must be one of 'evict', 'delete'",
            ],
        ),
        (
            r#"settings={"SELFDESTRUCT_DRY_RUN":"maybe"}"#,
            &[
                "at '/settings/SELFDESTRUCT_DRY_RUN'",
                "value must be one of",
            ],
        ),
        (
            r#"settings={"SELFDESTRUCT_MAX_MOVES_PER_HOUR":-1}"#,
            &["at '/settings/SELFDESTRUCT_MAX_MOVES_PER_HOUR'"],
        ),
        (
            r#"placeholders=[{"name":"Big_Set"}]"#,
            &[
                "at '/placeholders/0/name'",
                "'Big_Set' does not match pattern",
            ],
        ),
        (
            r#"placeholders=[{"name":"a","replica":2}]"#,
            &[
                "at '/placeholders/0'",
                "additional properties 'replica' not allowed",
            ],
        ),
        // No set: only beside a schedule of a CapacityBuffer (tests/chart_schedule.rs).
        (
            "placeholders=[]",
            &["placeholders: [] (no placeholder set)"],
        ),
        (
            r#"placeholders=[{"name":"a"},{"name":"a"}]"#,
            &["two sets are named \"a\""],
        ),
        ("replicas=-1", &["at '/replicas'", "minimum"]),
        (
            r#"resources={"requests":{"cpu":"lots"}}"#,
            &["at '/resources/requests/cpu'"],
        ),
        (
            r#"image={"digest":"sha256:abc"}"#,
            &["at '/image/digest'", "'sha256:abc' does not match pattern"],
        ),
        (
            r#"image={"pullPolicy":"Sometimes"}"#,
            &[
                "at '/image/pullPolicy'",
                "value must be one of 'IfNotPresent', 'Always', 'Never'",
            ],
        ),
        (
            r#"priorityClass={"create":false}"#,
            &["at '/priorityClass/name'", "minLength"],
        ),
        (
            r#"nodeGate={"taint":"a b"}"#,
            &["at '/nodeGate/taint'", "does not match pattern"],
        ),
        (
            r#"nodeGate={"settings":{"SELFDESTRUCT_MODE":"delete"}}"#,
            &["at '/nodeGate/settings'", "'SELFDESTRUCT_MODE' not allowed"],
        ),
        (
            r#"nodeGate={"images":[]}"#,
            &["at '/nodeGate/images'", "minItems"],
        ),
        (
            r#"nodeGate={"name":"Gate"}"#,
            &["at '/nodeGate/name'", "'Gate' does not match pattern"],
        ),
        // The gate's account must not be the placeholders' (the release's name).
        (
            r#"nodeGate={"enabled":true,"name":"placeholder"}"#,
            &["nodeGate.name: \"placeholder\" is the placeholders' ServiceAccount's name"],
        ),
        (r#"namespace={"create":"yes"}"#, &["at '/namespace/create'"]),
        // A minimum above the maximum: the agent would exit 2 on it.
        (
            r#"settings={"SELFDESTRUCT_MIN_LIFETIME":"12h","SELFDESTRUCT_MAX_LIFETIME":"6h"}"#,
            &["settings: SELFDESTRUCT_MIN_LIFETIME (12h) is above SELFDESTRUCT_MAX_LIFETIME (6h)"],
        ),
        (
            r#"settings={"SELFDESTRUCT_MIN_LIFETIME":"1d","SELFDESTRUCT_MAX_LIFETIME":"23h59m"}"#,
            &["SELFDESTRUCT_MIN_LIFETIME (1d) is above SELFDESTRUCT_MAX_LIFETIME (23h59m)"],
        ),
        (
            r#"placeholders=[{"name":"gpu","settings":{"SELFDESTRUCT_MAX_LIFETIME":"1h","SELFDESTRUCT_MIN_LIFETIME":"1.5h"}}]"#,
            &["placeholders[gpu].settings: SELFDESTRUCT_MIN_LIFETIME (1.5h) is above"],
        ),
        // The priority: from -10 to below the users', and why.
        (
            "priorityClass.value=0",
            &[
                "priorityClass.value: 0 is not below the user pods' priority",
                "no user pod could preempt a placeholder",
            ],
        ),
        (
            "priorityClass.value=-11",
            &[
                "priorityClass.value: -11 is below -10",
                "--expendable-pods-priority-cutoff",
                "never adds a node",
            ],
        ),
        (
            r#"priorityClass={"value":-10,"usersPriority":-10}"#,
            &["-10 is not below the user pods' priority (priorityClass.usersPriority: -10"],
        ),
        // A StatefulSet name that the revision-hash label cannot hold.
        (
            r#"placeholders=[{"name":"a-set-name-of-fifty-characters-which-is-allowed-xy"}]"#,
            &[
                "would be named \"placeholder-a-set-name-of-fifty",
                "at most 52 fit",
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (set, want) in cases {
        let out = render_output("placeholder", "placeholders", &["--set-json", set]);
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !want.iter().all(|w| err.contains(w)) {
            failures.push(format!(
                "--set-json {set}: exit {:?}, want {want:?} in: {err}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The SELFDESTRUCT_* settings a StatefulSet's container gets, as the
/// `VARIABLE=VALUE` arguments of `selfdestruct check-settings`.
fn agent_settings(set: &Value) -> Vec<String> {
    env(&set["spec"]["template"]["spec"]["containers"][0])
        .into_iter()
        .filter(|(var, _)| var.starts_with("SELFDESTRUCT_"))
        .map(|(var, value)| format!("{var}={}", value.as_str().expect("a string")))
        .collect()
}

/// One bound of the lifetime set alone (`--set
/// settings.SELFDESTRUCT_MAX_LIFETIME=1h`) is not paired with a default of the
/// other (the chart shipped 6h, which made the agent exit 2 on every
/// placeholder; it now ships no lifetime, the agent's default): the pair comes
/// whole from where the user named it, and the agent's own check accepts what
/// renders.
#[test]
fn one_lifetime_bound_alone_is_not_paired_with_the_charts_default() {
    let lifetime = |settings: &[String]| -> Vec<String> {
        settings
            .iter()
            .filter(|s| s.contains("_LIFETIME="))
            .cloned()
            .collect()
    };
    let cases: &[(&[&str], &[&str])] = &[
        // Nothing set: no lifetime (the agent's default).
        (&[], &[]),
        // The old default pair, set by the user, and a set's own maximum.
        (
            &[
                "--set",
                "settings.SELFDESTRUCT_MIN_LIFETIME=6h",
                "--set",
                "settings.SELFDESTRUCT_MAX_LIFETIME=12h",
                "--set-json",
                r#"placeholders=[{"name":"placeholder","settings":{"SELFDESTRUCT_MAX_LIFETIME":"1h"}}]"#,
            ],
            &["SELFDESTRUCT_MAX_LIFETIME=1h"],
        ),
        (
            &["--set", "settings.SELFDESTRUCT_MAX_LIFETIME=1h"],
            &["SELFDESTRUCT_MAX_LIFETIME=1h"],
        ),
        (
            &["--set", "settings.SELFDESTRUCT_MIN_LIFETIME=13h"],
            &["SELFDESTRUCT_MIN_LIFETIME=13h"],
        ),
        (
            &["--set-string", "settings.SELFDESTRUCT_MAX_LIFETIME=0"],
            &["SELFDESTRUCT_MAX_LIFETIME=0"],
        ),
        // A set that names one bound takes the pair from itself alone.
        (
            &[
                "--set",
                "settings.SELFDESTRUCT_MIN_LIFETIME=1h",
                "--set",
                "settings.SELFDESTRUCT_MAX_LIFETIME=2h",
                "--set-json",
                r#"placeholders=[{"name":"placeholder","settings":{"SELFDESTRUCT_MAX_LIFETIME":"30m"}}]"#,
            ],
            &["SELFDESTRUCT_MAX_LIFETIME=30m"],
        ),
    ];
    let mut wrong = Vec::new();
    for (args, want) in cases {
        let docs = render("placeholder", "placeholders", args);
        let settings = agent_settings(find(&docs, "StatefulSet", "placeholder"));
        if lifetime(&settings) != *want {
            wrong.push(format!(
                "{args:?}: {:?}, want {want:?}",
                lifetime(&settings)
            ));
        }
        let argv = ["selfdestruct", "check-settings"].map(String::from);
        let argv = argv.into_iter().chain(settings.iter().cloned());
        let checked = selfdestruct::Cli::parse_mode(argv)
            .map_err(|e| e.to_string())
            .and_then(|cli| selfdestruct::Task::from_cli(&cli).map_err(|e| e.to_string()));
        if let Err(e) = checked {
            wrong.push(format!("{args:?}: the agent refuses {settings:?}: {e}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every object's "Kind namespace/name" of a render.
fn names(docs: &[Value]) -> Vec<String> {
    by_key(docs.to_vec()).into_keys().collect()
}

/// The full values file (every optional part) without its fixed
/// PriorityClass name (a name the user picks is theirs to keep apart) nor the
/// Namespace (the namespace itself, which one release in it may create).
const ALL_PARTS: [&str; 5] = [
    FULL_VALUES,
    "--set-json",
    "priorityClass.name=null",
    "--set-json",
    "namespace.create=false",
];

/// Two releases of the chart in one namespace (the default sets, and the
/// full values file's) share no object name: the StatefulSets are named
/// after the release and the set (they were named after the set alone, so
/// the second install was refused).
#[test]
fn two_releases_in_one_namespace_share_no_name() {
    for extra in [&[][..], &ALL_PARTS[..]] {
        let a = render("hub", "jupyter", extra);
        let b = render("staging", "jupyter", extra);
        let (a, b) = (names(&a), names(&b));
        let shared: Vec<&String> = a.iter().filter(|n| b.contains(n)).collect();
        assert!(
            shared.is_empty(),
            "{extra:?}: both releases make {shared:?}"
        );
        assert!(
            a.iter().any(|n| n.starts_with("StatefulSet jupyter/hub")),
            "{a:?}"
        );
    }
}

/// The same release name in two namespaces shares no cluster-scoped name
/// (PriorityClass, ClusterRoles and their bindings, admission policies):
/// they carry the namespace. And each binding binds its own namespace's
/// account.
#[test]
fn one_release_name_in_two_namespaces_shares_no_cluster_scoped_name() {
    let render_in = |namespace: &str| {
        let mut docs = render("hub", namespace, &ALL_PARTS);
        docs.retain(|d| d["metadata"]["namespace"].is_null());
        docs
    };
    let (a, b) = (render_in("team-a"), render_in("team-b"));
    let kinds: Vec<&str> = a
        .iter()
        .map(|d| d["kind"].as_str().expect("kind"))
        .collect();
    for kind in [
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let (na, nb) = (names(&a), names(&b));
    let shared: Vec<&String> = na.iter().filter(|n| nb.contains(n)).collect();
    assert!(shared.is_empty(), "both namespaces make {shared:?}");
    for d in &a {
        for subject in d["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subject["namespace"], "team-a", "{d}");
        }
    }
}

/// ci/render-chart.py takes `helm template`'s value flags: `--set-string`
/// (it took the string for a values file and crashed), `-f`/`--values`
/// (comma-separated too), the `--flag=VALUE` form, and Helm's order: files
/// first, then --set-json, --set, --set-string, whatever the command line's
/// order.
#[test]
fn render_chart_takes_helm_templates_value_flags() {
    let set = |docs: &[Value], name: &str| find(docs, "StatefulSet", name).clone();
    // --set-string keeps the value a string: the schema wants a string here.
    let docs = render(
        "hub",
        "hub",
        &["--set-string", "settings.SELFDESTRUCT_MAX_MOVES_PER_HOUR=3"],
    );
    assert!(
        agent_settings(&set(&docs, "hub-placeholder"))
            .contains(&"SELFDESTRUCT_MAX_MOVES_PER_HOUR=3".to_string())
    );
    // ...and the schema refuses a string where it wants a number.
    let out = render_output("hub", "hub", &["--set-string", "replicas=3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("at '/replicas'") && err.contains("want integer"),
        "{err}"
    );
    // -f, --values=, and a bare file: the same render.
    let bare = render("hub", "hub", &[FULL_VALUES]);
    assert_eq!(render("hub", "hub", &["-f", FULL_VALUES]), bare);
    assert_eq!(
        render("hub", "hub", &[&format!("--values={FULL_VALUES}")]),
        bare
    );
    // Helm's order: --set over --set-json over the file, wherever they stand.
    let docs = render(
        "hub",
        "hub",
        &[
            "--set=replicas=5",
            "--set-json",
            "replicas=7",
            "-f",
            FULL_VALUES,
        ],
    );
    assert_eq!(set(&docs, "hub-cpu")["spec"]["replicas"], 5);
    // An unknown flag is refused, naming it.
    let out = render_output("hub", "hub", &["--set-yaml", "a=b"]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--set-yaml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The agent's command line (`selfdestruct`) or the node gate's
/// (`selfdestruct-node-gate`).
fn command_of(gate: bool) -> clap::Command {
    use clap::CommandFactory;
    let mut command = if gate {
        selfdestruct::node_gate::Cli::command()
    } else {
        selfdestruct::Cli::command()
    };
    command.build();
    command
}

/// The SELFDESTRUCT_* variables of the agent's command line or the gate's.
fn agent_variables(gate: bool) -> Vec<String> {
    let command = command_of(gate);
    let mut vars: Vec<String> = command
        .get_arguments()
        .filter_map(|a| a.get_env()?.to_str().map(str::to_string))
        .filter(|v| v.starts_with("SELFDESTRUCT_"))
        .collect();
    vars.sort();
    vars
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join(CHART).join("values.schema.json"))
        .expect("values.schema.json");
    serde_json::from_str(&text).expect("values.schema.json is JSON")
}

fn schema_names(definition: &str) -> Vec<String> {
    let mut names: Vec<String> = schema()["definitions"][definition]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no definitions.{definition}.properties"))
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

#[test]
fn the_schema_names_exactly_the_agents_settings() {
    let agent = agent_variables(false);
    for (var, why) in NOT_IN_THE_CHART {
        assert!(
            agent.iter().any(|v| v == var),
            "{var} ({why}) is gone from the agent"
        );
    }
    let want: Vec<String> = agent
        .iter()
        .filter(|v| NOT_IN_THE_CHART.iter().all(|(n, _)| n != v))
        .cloned()
        .collect();
    assert!(want.len() >= 17, "{want:?}");
    assert_eq!(
        schema_names("agentSettings"),
        want,
        "values.schema.json's settings and the agent's SELFDESTRUCT_* variables differ"
    );

    // The gate: its binary's own (but the taint, nodeGate.taint, the warm
    // label, nodeGate.warmLabel, and those left out above), and the log
    // settings every binary reads.
    let mut gate: Vec<String> = agent_variables(true)
        .into_iter()
        .filter(|v| v != "SELFDESTRUCT_GATE_TAINT" && v != "SELFDESTRUCT_GATE_WARM_LABEL")
        .filter(|v| NOT_IN_THE_CHART.iter().all(|(n, _)| n != v))
        .chain([
            "SELFDESTRUCT_LOG_FORMAT".into(),
            "SELFDESTRUCT_LOG_LEVEL".into(),
        ])
        .collect();
    gate.sort();
    gate.dedup();
    assert_eq!(schema_names("gateSettings"), gate);
}

/// Every setting the full values file gives, in the form the chart renders it
/// (a string), is accepted by the agent's own parser; and so is each setting
/// of the defaults.
#[test]
fn the_agent_accepts_every_setting_the_full_values_file_gives() {
    let docs = render("hub", "hub-ns", &[FULL_VALUES]);
    let flag_of = |command: &clap::Command, var: &str| {
        command
            .get_arguments()
            .find(|a| a.get_env().and_then(|e| e.to_str()) == Some(var))
            .and_then(|a| a.get_long())
            .map(str::to_string)
    };
    let mut checked = 0;
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "StatefulSet" || d["kind"] == "DaemonSet")
    {
        let container = &doc["spec"]["template"]["spec"]["containers"][0];
        let gate = doc["kind"] == "DaemonSet";
        let command = command_of(gate);
        let mut args = vec![command.get_name().to_string()];
        for (var, value) in env(container) {
            let Some(value) = value.as_str() else {
                continue;
            };
            if var == "NODE_NAME" || !var.starts_with("SELFDESTRUCT_") {
                continue;
            }
            let flag = flag_of(&command, &var).unwrap_or_else(|| panic!("{var}: no such setting"));
            args.push(format!("--{flag}={value}"));
            checked += 1;
        }
        if gate {
            // The Downward API's spec.nodeName, which the gate requires.
            args.push("--node-name=node-a".into());
        }
        let parsed = command.try_get_matches_from(&args);
        assert!(
            parsed.is_ok(),
            "{args:?}: {}",
            parsed.err().map(|e| e.to_string()).unwrap_or_default()
        );
    }
    assert!(checked >= 17 + 17 + 5, "{checked}");
}

/// What a release publishes is what the chart and the kustomizations name:
/// the chart's version and appVersion are the crate's, its default image is
/// the repository release.yml pushes to, and every kustomization that names
/// that image pins it to the same version (release.yml refuses a tag
/// otherwise; this catches the drift before a tag).
#[test]
fn the_chart_and_the_kustomizations_pin_the_crates_version() {
    let version = env!("CARGO_PKG_VERSION");
    let chart = yaml_file("charts/selfdestruct/Chart.yaml");
    assert_eq!(chart["version"], version, "Chart.yaml version");
    assert_eq!(chart["appVersion"], version, "Chart.yaml appVersion");
    let values = yaml_file("charts/selfdestruct/values.yaml");
    let image = "ghcr.io/selfdestruct/selfdestruct";
    assert_eq!(values["image"]["repository"], image);
    assert_eq!(values["image"]["tag"], "", "the tag defaults to appVersion");

    let mut pinned = Vec::new();
    let mut stack = vec![root().join("manifests")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.file_name().is_none_or(|n| n != "kustomization.yaml") {
                continue;
            }
            let rel = path.strip_prefix(root()).expect("in the repository");
            let k = yaml_file(rel.to_str().expect("UTF-8 path"));
            for entry in k["images"].as_array().into_iter().flatten() {
                if entry["newName"] == image {
                    assert_eq!(entry["newTag"], version, "{}", rel.display());
                    pinned.push(rel.to_path_buf());
                }
            }
        }
    }
    assert!(pinned.len() >= 3, "{pinned:?}");
}

/// The README's one `helm install` command (its Install section) names the
/// published chart at the crate's version, and its values render: the
/// replicas and resources it sets reach the StatefulSet.
#[test]
fn the_readmes_helm_install_renders_what_it_says() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let deploy = readme
        .split("\n## Install\n")
        .nth(1)
        .expect("an Install section");
    let block = deploy
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in Install");
    let command = block.replace("\\\n", " ");
    let mut words = command.split_whitespace();
    assert_eq!(
        words.by_ref().take(3).collect::<Vec<_>>(),
        ["helm", "install", "placeholder"],
        "Install leads with helm install: {block}"
    );
    let rest: Vec<&str> = words.collect();
    assert_eq!(
        rest[0], "oci://ghcr.io/selfdestruct/charts/selfdestruct",
        "{block}"
    );
    let version = rest.windows(2).find(|w| w[0] == "--version").map(|w| w[1]);
    assert_eq!(version, Some(env!("CARGO_PKG_VERSION")), "{block}");
    let namespace = rest
        .windows(2)
        .find(|w| w[0] == "--namespace")
        .map(|w| w[1])
        .expect("--namespace");
    // --set and --set-json, quoted as a shell would remove the quotes.
    let mut values = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == "--set" || rest[i] == "--set-json" {
            values.push(rest[i].to_string());
            values.push(rest[i + 1].trim_matches('\'').to_string());
            i += 2;
        } else {
            i += 1;
        }
    }
    assert!(values.len() >= 4, "replicas and resources: {values:?}");
    let args: Vec<&str> = values.iter().map(String::as_str).collect();
    let docs = render("placeholder", namespace, &args);
    let set = find(&docs, "StatefulSet", "placeholder");
    let readme_value = |key: &str| {
        values
            .iter()
            .find_map(|v| v.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("the command sets no {key}"))
            .to_string()
    };
    assert_eq!(
        set["spec"]["replicas"].to_string(),
        readme_value("replicas")
    );
    let resources: Value = serde_json::from_str(&readme_value("resources")).expect("JSON");
    assert_eq!(
        set["spec"]["template"]["spec"]["containers"][0]["resources"],
        resources
    );
}

/// NOTES.txt, which `helm install` prints, says where the placeholders are
/// and how to see their moves, for this release and namespace.
#[test]
fn the_notes_say_how_to_see_it_working() {
    let out = Command::new(python())
        .current_dir(root())
        .args(["ci/render-chart.py", CHART, "hub", "hub-ns", "--notes"])
        .output()
        .expect("run ci/render-chart.py");
    let notes = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "kubectl -n hub-ns get pods -l app.kubernetes.io/instance=hub -o wide",
        "kubectl -n hub-ns get events --field-selector reason=SelfDestruct",
        "kubectl -n hub-ns logs hub-placeholder-0",
    ] {
        assert!(notes.contains(want), "NOTES.txt lacks {want:?}:\n{notes}");
    }
    assert!(!notes.contains("nodeReader.enabled is false"), "{notes}");
}

/// The schema and the agent's own parser give the same verdict on each value
/// below, but where the schema is knowingly stricter: it takes enumerated
/// words in lower case only (the agent takes any case), and durations with
/// the short units only.
#[test]
fn the_schema_and_the_agent_agree_on_forms() {
    // (variable, value, schema accepts, agent accepts)
    let table: &[(&str, &str, bool, bool)] = &[
        ("SELFDESTRUCT_NODE_SETTLE", "90s", true, true),
        ("SELFDESTRUCT_NODE_SETTLE", "1h30m", true, true),
        ("SELFDESTRUCT_NODE_SETTLE", "1.5h", true, true),
        ("SELFDESTRUCT_NODE_SETTLE", "500ms", true, true),
        ("SELFDESTRUCT_NODE_SETTLE", "0", true, true),
        ("SELFDESTRUCT_NODE_SETTLE", "30", false, false),
        ("SELFDESTRUCT_NODE_SETTLE", "1h30", false, false),
        ("SELFDESTRUCT_NODE_SETTLE", "-5s", false, false),
        ("SELFDESTRUCT_NODE_SETTLE", "", false, false),
        ("SELFDESTRUCT_MIN_LIFETIME", "", true, true),
        ("SELFDESTRUCT_MIN_LIFETIME", "2d", true, true),
        ("SELFDESTRUCT_MIN_LIFETIME", "2 days", false, true),
        ("SELFDESTRUCT_MODE", "delete", true, true),
        ("SELFDESTRUCT_MODE", "remove", false, false),
        ("SELFDESTRUCT_MODE", "Evict", false, true),
        ("SELFDESTRUCT_DRY_RUN", "yes", true, true),
        ("SELFDESTRUCT_DRY_RUN", "maybe", false, false),
        ("SELFDESTRUCT_MAX_MOVES_PER_HOUR", "0", true, true),
        ("SELFDESTRUCT_MAX_MOVES_PER_HOUR", "-3", false, false),
        ("SELFDESTRUCT_MAX_MOVES_PER_HOUR", "many", false, false),
        ("SELFDESTRUCT_LOG_LEVEL", "debug", true, true),
        ("SELFDESTRUCT_LOG_LEVEL", "loud", false, false),
        ("SELFDESTRUCT_GATE_POLL", "10s", true, true),
        ("SELFDESTRUCT_GATE_POLL", "500ms", true, true),
        ("SELFDESTRUCT_GATE_POLL", "1", false, false),
    ];
    let mut wrong = Vec::new();
    for &(var, value, schema_ok, agent_ok) in table {
        let in_gate = var.starts_with("SELFDESTRUCT_GATE_");
        let key = if in_gate {
            "nodeGate.settings"
        } else {
            "settings"
        };
        let set = format!("{key}={}", json!({ var: value }));
        let out = render_output("p", "ns", &["--set-json", &set]);
        let schema = out.status.success();
        let command = command_of(in_gate);
        let flag = command
            .get_arguments()
            .find(|a| a.get_env().and_then(|e| e.to_str()) == Some(var))
            .and_then(|a| a.get_long())
            .unwrap_or_else(|| panic!("{var}: no such setting"));
        let mut args = vec![command.get_name().to_string()];
        if in_gate {
            args.push("--node-name=node-a".into());
        }
        args.push(format!("--{flag}={value}"));
        let agent = command.try_get_matches_from(&args).is_ok();
        if (schema, agent) != (schema_ok, agent_ok) {
            wrong.push(format!(
                "{var}={value:?}: schema {schema} (want {schema_ok}), agent {agent} (want {agent_ok})"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What a published chart and release carry besides the code: the chart
/// names its home, sources and maintainers; the repository holds the license
/// Cargo.toml declares (the Apache-2.0 text) and a changelog in Keep a
/// Changelog form with an Unreleased section.
#[test]
fn the_chart_names_its_home_and_the_repository_its_license_and_changes() {
    let chart = yaml_file("charts/selfdestruct/Chart.yaml");
    let home = chart["home"].as_str().expect("home");
    assert!(home.starts_with("https://"), "{home}");
    assert!(
        chart["sources"]
            .as_array()
            .is_some_and(|s| s.iter().any(|u| u == home)),
        "{chart}"
    );
    assert!(chart["maintainers"][0]["name"].is_string(), "{chart}");

    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    assert!(cargo.contains("license = \"Apache-2.0\""));
    let license = std::fs::read_to_string(root().join("LICENSE")).expect("LICENSE");
    let words: Vec<&str> = license.split_whitespace().collect();
    assert_eq!(words[..4], ["Apache", "License", "Version", "2.0,"]);
    assert!(license.contains("END OF TERMS AND CONDITIONS"));
    assert!(license.contains("Copyright [yyyy] [name of copyright owner]"));

    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    assert!(changelog.contains("keepachangelog.com"), "Keep a Changelog");
    assert!(changelog.contains("\n## [Unreleased]\n"));
    assert!(changelog.contains(&format!("\n## [{}]", env!("CARGO_PKG_VERSION"))));
}

/// Settings the chart ships set otherwise than the agent's own default, and why.
const SHIPPED_NOT_AS_THE_AGENT: [(&str, &str); 1] = [(
    "SELFDESTRUCT_LOG_FORMAT",
    "a cluster's log pipeline reads one JSON object a line; a terminal reads text",
)];

/// One default for each setting: what the chart (and so `manifests/`, equal to
/// its default render) ships is the agent's own default, but for the few
/// listed above. A lifetime the agent runs without by default is not shipped
/// either (docs/settings.md, "Why no lifetime by default").
#[test]
fn the_chart_ships_the_agents_defaults() {
    use clap::CommandFactory;
    let mut cli = selfdestruct::Cli::command();
    cli.build();
    let defaults: BTreeMap<String, Option<String>> = cli
        .get_arguments()
        .filter_map(|a| {
            let var = a.get_env()?.to_str()?.to_string();
            let default = a
                .get_default_values()
                .first()
                .map(|d| d.to_string_lossy().into_owned());
            Some((var, default))
        })
        .collect();
    let docs = render("placeholder", "placeholders", &[]);
    let set = find(&docs, "StatefulSet", "placeholder");
    let container = &set["spec"]["template"]["spec"]["containers"][0];
    let mut checked = 0;
    for (var, value) in env(container) {
        if !var.starts_with("SELFDESTRUCT_")
            || SHIPPED_NOT_AS_THE_AGENT.iter().any(|(v, _)| *v == var)
        {
            continue;
        }
        let default = defaults
            .get(&var)
            .unwrap_or_else(|| panic!("{var} is not one of the agent's settings"));
        let value = value.as_str().expect("a plain value");
        assert_eq!(
            default.as_deref(),
            Some(value),
            "the chart ships {var}={value}, the agent's default is {default:?}: \
             one default per setting (or list it in SHIPPED_NOT_AS_THE_AGENT with why)"
        );
        checked += 1;
    }
    assert!(
        checked >= 1,
        "no SELFDESTRUCT_* setting in the default render"
    );
    for (var, _) in SHIPPED_NOT_AS_THE_AGENT {
        assert!(defaults.contains_key(var), "{var} is gone from the agent");
    }
}

/// Every argument with an environment variable, of every binary of the image
/// (the agent's, the node gate's, the schedule's): (variable, `--flag`, default
/// value if any).
fn cli_settings() -> Vec<(String, String, Option<String>)> {
    use clap::CommandFactory;
    let mut schedule = selfdestruct_schedule::controller::Cli::command();
    schedule.build();
    let (agent, gate) = (command_of(false), command_of(true));
    let mut commands = vec![&agent, &gate, &schedule];
    commands.extend(schedule.get_subcommands());
    let mut all: Vec<(String, String, Option<String>)> = commands
        .into_iter()
        .flat_map(|c| c.get_arguments())
        .filter_map(|a| {
            let var = a.get_env()?.to_str()?.to_string();
            let flag = format!("--{}", a.get_long()?);
            let default = a
                .get_default_values()
                .first()
                .map(|d| d.to_string_lossy().into_owned())
                .filter(|d| !d.is_empty());
            Some((var, flag, default))
        })
        .collect();
    all.sort();
    all.dedup();
    all
}

/// The docs' `--help` sections are the binaries' `--help`, character for character:
/// docs/settings.md's "`selfdestruct --help`" and docs/node-gate.md's
/// "`selfdestruct-node-gate --help`" (docs/schedule.md's is checked in schedule/tests/).
#[test]
fn the_docs_help_is_the_binarys() {
    for (path, binary, program) in [
        (
            "docs/settings.md",
            "selfdestruct",
            env!("CARGO_BIN_EXE_selfdestruct"),
        ),
        (
            "docs/node-gate.md",
            "selfdestruct-node-gate",
            env!("CARGO_BIN_EXE_selfdestruct-node-gate"),
        ),
    ] {
        let doc = std::fs::read_to_string(root().join(path)).expect(path);
        let heading = format!("## `{binary} --help`\n\n```\n");
        let shown = doc
            .split(&heading)
            .nth(1)
            .and_then(|rest| rest.split("```\n").next())
            .unwrap_or_else(|| panic!("{path} has no {heading:?} section with a code block"));
        let out = Command::new(program)
            .arg("--help")
            .output()
            .expect("run --help");
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).expect("UTF-8 help");
        if shown != help {
            let line = shown
                .lines()
                .zip(help.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(shown.lines().count().min(help.lines().count()));
            panic!(
                "{path}'s `{binary} --help` block differs from the binary's at line {}:\n  \
                 docs: {:?}\n  --help: {:?}\n(paste the output of `cargo run -q --bin {binary} -- --help` there)",
                line + 1,
                shown.lines().nth(line).unwrap_or("<end>"),
                help.lines().nth(line).unwrap_or("<end>"),
            );
        }
    }
}

/// docs/settings.md's table ("Every setting") names exactly the settings of
/// `--help`, each with its flag, and each default clap knows in backticks.
#[test]
fn the_settings_table_is_the_clis() {
    let doc = std::fs::read_to_string(root().join("docs/settings.md")).expect("docs/settings.md");
    let table = doc
        .split("## Every setting")
        .nth(1)
        .expect("docs/settings.md has an \"Every setting\" section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let rows: BTreeMap<String, (String, String)> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let var = cells[0]
                .trim_start_matches("| ")
                .trim_matches('`')
                .to_string();
            (var, (cells[1].to_string(), cells[2].to_string()))
        })
        .collect();
    let cli = cli_settings();
    let mut failures = Vec::new();
    for (var, flag, default) in &cli {
        let Some((flag_cell, default_cell)) = rows.get(var) else {
            failures.push(format!("{var} ({flag}) is not in the table"));
            continue;
        };
        if !flag_cell.contains(&format!("`{flag}`")) {
            failures.push(format!("{var}: the table gives {flag_cell}, --help {flag}"));
        }
        if let Some(d) = default
            && !default_cell.contains(&format!("`{d}`"))
        {
            failures.push(format!(
                "{var}: the table's default is {default_cell}, --help's `{d}`"
            ));
        }
    }
    // Read by kube (`Config::infer`), not by clap: `--kubeconfig` has no `env`.
    let read_by_kube = ["KUBECONFIG"];
    for var in rows.keys() {
        if !cli.iter().any(|(v, _, _)| v == var) && !read_by_kube.contains(&var.as_str()) {
            failures.push(format!("{var} is in the table but not a setting of --help"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
