//! The zero-to-jupyterhub post-renderer (`manifests/jupyterhub/post-render.sh`)
//! over the chart's real output (`manifests/jupyterhub/testdata/`: the current
//! chart rendered by Helm's engine with pod priority on, with the chart's
//! default values, with placeholders but no priority, and a second release):
//! the patch sets what the agent needs, which is everything the main manifest
//! (`manifests/statefulset.yaml`) relies on, leaves everything else as the
//! chart rendered it, and exactly one PodDisruptionBudget selects the
//! placeholders. Misconfigurations fail the render with one message (no
//! image, no priority below the users', a bad agent setting, checked by the
//! agent's own `check-settings`); replicas 0 passes through unchanged; agent
//! settings arrive in the placeholders' env; every name added comes from the
//! release, so two releases do not collide. The default (minimal) Role gets
//! and evicts only the placeholders' own pods (checked against the fake API
//! server's RBAC), the release's service account may list and watch Nodes,
//! and the Helm 4 plugin (`manifests/jupyterhub/plugin.yaml`) runs the script
//! as Helm does.
//!
//! Needs `kubectl` (for `kubectl kustomize`) and a Python with PyYAML (to turn
//! the rendered YAML into JSON); `bash ci/validate-manifests.sh` installs both
//! into `${TMPDIR:-/tmp}/selfdestruct-validate-venv` (`.ci/run` runs it first).
//! Without them the tests fail, saying so.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const NAMESPACE: &str = "hub-ns";

/// The operator's build of the image (post-render.sh requires one).
const IMAGE: &str = "registry.example/selfdestruct:0.1.0";

/// The placeholders' account, Role and RoleBinding: named after the release
/// ("jhub" in the captured output).
const SERVICE_ACCOUNT: &str = "selfdestruct-jhub";

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

/// The tools; panics saying how to get them.
fn tools() -> (PathBuf, PathBuf) {
    let (Some(k), Some(p)) = (kubectl(), python()) else {
        panic!(
            "needs kubectl and a Python with PyYAML: run `bash ci/validate-manifests.sh` \
             once to install both into ${{TMPDIR:-/tmp}}/selfdestruct-validate-venv (as .ci/run does), \
             or put them in PATH"
        );
    };
    (k, p)
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
    pipe_err(cmd, input).0
}

/// Runs `cmd` with `input` on stdin and returns what it did, whatever its status.
fn run_with_input(cmd: &mut Command, input: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A command that refuses before reading its input closes stdin early.
    if let Err(e) = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
    {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("wait")
}

/// Runs `cmd` with `input` on stdin: (stdout, stderr); panics on failure.
fn pipe_err(cmd: &mut Command, input: &str) -> (String, String) {
    let out = run_with_input(cmd, input);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("UTF-8 output"),
        String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    )
}

/// The chart's output with pod priority on (what the README asks for).
fn chart_output() -> String {
    testdata("z2jh-priority.yaml")
}

/// The chart's output with its default values (no pod priority).
fn chart_defaults() -> String {
    testdata("defaults/z2jh-defaults.yaml")
}

fn testdata(name: &str) -> String {
    std::fs::read_to_string(root().join("manifests/jupyterhub/testdata").join(name))
        .expect("test data")
}

/// post-render.sh over `input`, parsed.
fn post_render(kubectl: &Path, python: &Path, input: &str, variant: &str) -> Vec<Value> {
    post_render_err(kubectl, python, input, variant).0
}

/// post-render.sh for the release namespace, with the pinned kubectl.
fn post_render_command(kubectl: &Path) -> Command {
    post_render_in(kubectl, NAMESPACE)
}

/// post-render.sh for `namespace`, with the pinned kubectl, the operator's
/// image and otherwise the script's defaults (whatever the caller's
/// environment holds).
fn post_render_in(kubectl: &Path, namespace: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("manifests/jupyterhub/post-render.sh"))
        .arg(namespace)
        .env("KUBECTL", kubectl)
        .env("SELFDESTRUCT_IMAGE", IMAGE);
    for own in [
        "SELFDESTRUCT_VARIANT",
        "SELFDESTRUCT_NODE_READER",
        "SELFDESTRUCT_PRIORITY_CHECK",
        "SELFDESTRUCT_BIN",
        "SELFDESTRUCT_NAMESPACE",
    ] {
        cmd.env_remove(own);
    }
    cmd
}

/// Runs `cmd` over `input`, which must fail with nothing on stdout; its stderr.
fn render_fails(cmd: &mut Command, input: &str) -> String {
    let out = run_with_input(cmd, input);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{cmd:?} succeeded: {stderr}");
    assert!(out.stdout.is_empty(), "{cmd:?} printed output: {stderr}");
    stderr
}

/// post-render.sh over `input`: (parsed output, stderr).
fn post_render_err(
    kubectl: &Path,
    python: &Path,
    input: &str,
    variant: &str,
) -> (Vec<Value>, String) {
    let mut cmd = post_render_command(kubectl);
    // "": the script's default variant.
    if !variant.is_empty() {
        cmd.env("SELFDESTRUCT_VARIANT", variant);
    }
    let (out, err) = pipe_err(&mut cmd, input);
    (yaml_docs(python, &out), err)
}

/// Whether a `LabelSelector` selects `labels` (matchLabels and matchExpressions,
/// as the API server reads them; an empty selector selects everything).
fn selects(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let by_labels = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let by_exprs = selector["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().expect("key");
            let values: Vec<&Value> = e["values"].as_array().into_iter().flatten().collect();
            let have = labels.get(key);
            match e["operator"].as_str().expect("operator") {
                "In" => have.is_some_and(|v| values.contains(&v)),
                "NotIn" => have.is_none_or(|v| !values.contains(&v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                op => panic!("operator {op}"),
            }
        })
    });
    by_labels && by_exprs
}

/// The PodDisruptionBudgets that select pods with `labels`.
fn budgets_selecting<'a>(
    docs: &'a [Value],
    labels: &serde_json::Map<String, Value>,
) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| d["kind"] == "PodDisruptionBudget" && selects(&d["spec"]["selector"], labels))
        .collect()
}

/// The one StatefulSet labelled component=user-placeholder.
fn placeholders(docs: &[Value]) -> &Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["kind"] == "StatefulSet" && d["metadata"]["labels"]["component"] == "user-placeholder"
        })
        .collect();
    assert_eq!(found.len(), 1, "one user-placeholder StatefulSet");
    found[0]
}

/// The value of PriorityClass `name` in `docs`.
fn priority_value(docs: &[Value], name: &str) -> i64 {
    docs.iter()
        .find(|d| d["kind"] == "PriorityClass" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("PriorityClass {name} in the output"))["value"]
        .as_i64()
        .expect("value")
}

/// The main manifest's StatefulSet (manifests/statefulset.yaml).
fn main_statefulset(python: &Path) -> Value {
    let text =
        std::fs::read_to_string(root().join("manifests/statefulset.yaml")).expect("main manifest");
    yaml_docs(python, &text).remove(0)
}

/// The one object of `kind` named `name`.
fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}");
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
        "topologySpreadConstraints",
    ] {
        obj.remove(k);
    }
    // The tolerations of the node gate's startup taint and of the autoscaler's
    // soft taint, appended to the chart's list.
    if let Some(t) = spec["tolerations"].as_array_mut()
        && t.ends_with(&added_tolerations())
    {
        t.truncate(t.len() - 2);
    }
    let c = spec["containers"][0].as_object_mut().expect("container");
    c.remove("image");
    c.remove("env");
    if let Some(sc) = c.get_mut("securityContext").and_then(Value::as_object_mut) {
        sc.remove("readOnlyRootFilesystem");
    }
    sts
}

/// The tolerations post-render.sh appends, in order: of the node gate's startup
/// taint and of the cluster autoscaler's soft taint on an empty new node.
fn added_tolerations() -> [Value; 2] {
    [startup_toleration(), deletion_candidate_toleration()]
}

/// The cluster autoscaler's soft taint on an empty new node, tolerated as
/// manifests/statefulset.yaml does (issue 32, 1b).
fn deletion_candidate_toleration() -> Value {
    json!({
        "key": "DeletionCandidateOfClusterAutoscaler",
        "operator": "Exists",
        "effect": "PreferNoSchedule",
    })
}

/// The node gate's startup taint, tolerated as manifests/statefulset.yaml does.
fn startup_toleration() -> Value {
    json!({
        "key": "startup-taint.cluster-autoscaler.kubernetes.io/images-pending",
        "operator": "Exists",
        "effect": "NoSchedule",
    })
}

/// Everything the main manifest (manifests/statefulset.yaml) relies on, on the
/// post-rendered chart output `docs` (the chart's output: `input`), whatever
/// the chart's values; returns the placeholder StatefulSet.
fn check_common(python: &Path, docs: &[Value], input: &[Value]) -> Value {
    let sts = placeholders(docs).clone();
    let pod = &sts["spec"]["template"]["spec"];
    let main = main_statefulset(python);
    let main_pod = &main["spec"]["template"]["spec"];
    // The default scheduler (LeastAllocated), as in the main manifest.
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["schedulerName"], main_pod["schedulerName"]);
    // The opt-out of default topology spreading, exactly the main manifest's,
    // and it selects no placeholder (so it never changes a score).
    assert_eq!(
        pod["topologySpreadConstraints"], main_pod["topologySpreadConstraints"],
        "the topology-spread opt-out of manifests/statefulset.yaml"
    );
    let constraints = pod["topologySpreadConstraints"]
        .as_array()
        .expect("constraints");
    assert_eq!(constraints.len(), 1);
    let pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .expect("labels");
    assert!(!selects(&constraints[0]["labelSelector"], pod_labels));
    // Its own service account, with the token mounted (the chart sets false).
    assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
    assert_eq!(pod["automountServiceAccountToken"], true);
    let sa = find(docs, "ServiceAccount", SERVICE_ACCOUNT);
    assert_ne!(sa["automountServiceAccountToken"], false, "{sa}");
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "still one container");
    assert_eq!(containers[0]["name"], "pause");
    assert_eq!(containers[0]["image"], IMAGE);
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
    // A read-only root filesystem, merged into the chart's security context
    // (which keeps its own fields: compared below with everything else).
    assert_eq!(
        containers[0]["securityContext"]["readOnlyRootFilesystem"], true,
        "{}",
        containers[0]["securityContext"]
    );
    assert_eq!(containers[0]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        containers[0]["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    // The node gate's startup taint is tolerated, after the chart's own
    // tolerations, which stay.
    let tolerations = pod["tolerations"].as_array().expect("tolerations");
    assert!(
        tolerations.ends_with(&added_tolerations()),
        "{tolerations:?}"
    );
    let main_tolerations = main_pod["tolerations"]
        .as_array()
        .expect("main tolerations");
    for t in added_tolerations() {
        assert!(main_tolerations.contains(&t), "{t} not in manifests/");
    }
    assert!(
        tolerations
            .iter()
            .any(|t| t["key"] == "hub.jupyter.org/dedicated" && t["value"] == "user"),
        "the chart's tolerations stay: {tolerations:?}"
    );
    let mode = env.iter().find(|(n, _)| n == "SELFDESTRUCT_MODE");
    assert_eq!(
        mode.map(|m| &m.1),
        Some(&json!("evict")),
        "evicts, honouring the budget"
    );
    // Everything else exactly as the chart rendered it: resources, affinity,
    // tolerations, priority, security context, labels, replicas...
    let chart = placeholders(input).clone();
    assert_eq!(
        without_patched_fields(sts.clone()),
        without_patched_fields(chart.clone()),
        "the patch changed more than the agent needs"
    );
    assert_eq!(
        chart["spec"]["template"]["spec"]["automountServiceAccountToken"], false,
        "the test data is the chart's output (token off)"
    );

    let rb = find(docs, "RoleBinding", SERVICE_ACCOUNT);
    assert_eq!(
        rb["subjects"],
        json!([{
            "kind": "ServiceAccount",
            "name": SERVICE_ACCOUNT,
            "namespace": NAMESPACE,
        }])
    );
    assert_eq!(rb["roleRef"]["name"], SERVICE_ACCOUNT);
    // Exactly one budget selects the placeholders (two make every eviction
    // fail with HTTP 500): the chart's own, now at most one away at a time.
    let budgets = budgets_selecting(docs, pod_labels);
    assert_eq!(
        budgets.len(),
        1,
        "exactly one PodDisruptionBudget selects the placeholders: {budgets:#?}"
    );
    let pdb = budgets[0];
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{pdb}");
    assert!(pdb["spec"].get("minAvailable").is_none(), "{pdb}");
    let chart_budgets = budgets_selecting(input, pod_labels);
    assert_eq!(chart_budgets.len(), 1, "the chart renders its own budget");
    assert_eq!(
        pdb["metadata"]["name"],
        chart_budgets[0]["metadata"]["name"]
    );
    assert_eq!(
        chart_budgets[0]["spec"]["minAvailable"], 0,
        "the chart's output"
    );
    // get and evict name exactly the StatefulSet's pods.
    let role = find(docs, "Role", SERVICE_ACCOUNT);
    let names = placeholder_pod_names(&sts);
    for resource in ["pods", "pods/eviction"] {
        let rules: Vec<&Value> = role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .filter(|r| {
                r["resources"] == json!([resource]) && r["verbs"] != json!(["list", "watch"])
            })
            .collect();
        assert_eq!(rules.len(), 1, "{resource}: {role}");
        assert_eq!(rules[0]["resourceNames"], json!(names), "{resource}");
    }
    // Nodes list/watch for exactly this namespace's service account.
    check_node_reader(docs);
    // The chart's own objects and ours (ServiceAccount, Role, RoleBinding,
    // the node reader's ClusterRole and ClusterRoleBinding): nothing else.
    assert_eq!(docs.len(), input.len() + 5, "{docs:#?}");
    sts
}

/// <statefulset>-0 .. <statefulset>-<replicas-1>.
fn placeholder_pod_names(sts: &Value) -> Vec<String> {
    let name = sts["metadata"]["name"].as_str().expect("name");
    let replicas = sts["spec"]["replicas"].as_i64().unwrap_or(1);
    (0..replicas.max(1))
        .map(|i| format!("{name}-{i}"))
        .collect()
}

/// The ClusterRoleBindings in `docs` whose subjects include the placeholders'
/// service account, with their ClusterRoles' rules.
fn node_grants(docs: &[Value]) -> Vec<(&Value, &Value)> {
    docs.iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding")
        .filter(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["name"] == SERVICE_ACCOUNT
                    && s["namespace"] == NAMESPACE
            })
        })
        .map(|b| {
            let role = b["roleRef"]["name"].as_str().expect("roleRef name");
            assert_eq!(b["roleRef"]["kind"], "ClusterRole");
            (b, find(docs, "ClusterRole", role))
        })
        .collect()
}

fn check_node_reader(docs: &[Value]) {
    let grants = node_grants(docs);
    assert_eq!(
        grants.len(),
        1,
        "one binding for the placeholders: {grants:#?}"
    );
    let (binding, role) = grants[0];
    assert_eq!(
        binding["subjects"],
        json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE }]),
        "bound to exactly that service account"
    );
    assert_eq!(
        role["rules"],
        json!([{ "apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"] }]),
        "nodes list/watch and nothing else"
    );
}

/// The placeholders' priority, which must be below the user pods' (the
/// chart's default-priority class, which the hub gives every user pod).
fn check_priority(docs: &[Value]) {
    let sts = placeholders(docs);
    let class = sts["spec"]["template"]["spec"]["priorityClassName"]
        .as_str()
        .expect("a priorityClassName");
    let users = docs
        .iter()
        .find(|d| {
            d["kind"] == "PriorityClass"
                && d["metadata"]["labels"]["component"] == "default-priority"
        })
        .expect("the chart's priority class for user pods");
    let users = users["value"].as_i64().expect("value");
    let own = priority_value(docs, class);
    assert!(own < users, "placeholders at {own}, users at {users}");
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

const PRIORITY_FIX: &str = "set scheduling.podPriority.enabled: true in the chart's values";

#[test]
fn the_post_renderer_patches_the_charts_user_placeholders() {
    let (kubectl, python) = tools();
    let input_text = chart_output();
    let input = yaml_docs(&python, &input_text);
    let (docs, stderr) = post_render_err(&kubectl, &python, &input_text, "full");
    let sts = check_common(&python, &docs, &input);
    check_priority(&docs);
    assert!(
        stderr.is_empty(),
        "no warning with pod priority on: {stderr}"
    );
    // Sibling awareness limited to this release's placeholders (the chart's
    // app.kubernetes.io labels are on every hub pod; its own selector adds
    // release=<release>).
    assert_eq!(
        sibling_selector(&sts),
        "component=user-placeholder,release=jhub"
    );
    let role = find(&docs, "Role", SERVICE_ACCOUNT);
    assert_eq!(pod_verbs(role), ["get", "list", "watch"]);
}

#[test]
fn the_default_variant_is_minimal_no_list_or_watch_and_no_sibling_awareness() {
    let (kubectl, python) = tools();
    let input_text = chart_output();
    let input = yaml_docs(&python, &input_text);
    // No SELFDESTRUCT_VARIANT: minimal (full's pod list/watch would read
    // every user's JUPYTERHUB_API_TOKEN from the pod specs).
    let docs = post_render(&kubectl, &python, &input_text, "");
    assert_eq!(docs, post_render(&kubectl, &python, &input_text, "minimal"));
    let sts = check_common(&python, &docs, &input);
    check_priority(&docs);
    assert_eq!(sibling_selector(&sts), "none");
    let role = find(&docs, "Role", SERVICE_ACCOUNT);
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
fn with_the_charts_default_values_replicas_0_the_output_passes_through_unchanged() {
    let (kubectl, _python) = tools();
    let input = chart_defaults();
    assert!(
        input.contains("\n  replicas: 0\n"),
        "the capture's placeholders"
    );
    // Not even the image is needed: there are no placeholders to run it.
    let (out, _) = pipe_err(
        post_render_command(&kubectl).env_remove("SELFDESTRUCT_IMAGE"),
        &input,
    );
    assert!(out == input, "replicas 0: not passed through unchanged");
}

#[test]
fn placeholders_without_priority_fail_the_render_unless_the_check_is_off() {
    let (kubectl, python) = tools();
    // The chart's default values with 4 placeholders: no priorityClassName.
    let input_text = testdata("no-priority/z2jh-no-priority.yaml");
    let stderr = render_fails(&mut post_render_command(&kubectl), &input_text);
    assert!(
        stderr.contains("has no priorityClassName")
            && stderr.contains(PRIORITY_FIX)
            && stderr.contains("SELFDESTRUCT_PRIORITY_CHECK=off"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
    // The opt-out, in the environment or as an argument: the rest holds.
    let input = yaml_docs(&python, &input_text);
    let mut by_env = post_render_command(&kubectl);
    by_env.env("SELFDESTRUCT_PRIORITY_CHECK", "off");
    let mut by_arg = post_render_command(&kubectl);
    by_arg.arg("SELFDESTRUCT_PRIORITY_CHECK=off");
    for mut off in [by_env, by_arg] {
        let (out, stderr) = pipe_err(&mut off, &input_text);
        assert!(stderr.is_empty(), "{stderr}");
        let docs = yaml_docs(&python, &out);
        let sts = check_common(&python, &docs, &input);
        assert!(sts["spec"]["template"]["spec"]["priorityClassName"].is_null());
    }
    let stderr = render_fails(
        post_render_command(&kubectl).env("SELFDESTRUCT_PRIORITY_CHECK", "no"),
        &input_text,
    );
    assert!(stderr.contains("SELFDESTRUCT_PRIORITY_CHECK"), "{stderr}");
}

#[test]
fn a_placeholder_priority_not_below_the_users_fails_the_render() {
    let (kubectl, _python) = tools();
    // scheduling.podPriority.userPlaceholderPriority: 0, like defaultPriority.
    let text = chart_output();
    let marker = "name: jhub-user-placeholder-priority";
    let at = text.find(marker).expect("the placeholder PriorityClass");
    let value_at = at + text[at..].find("\nvalue: -10\n").expect("its value");
    let input_text = format!(
        "{}\nvalue: 0\n{}",
        &text[..value_at],
        &text[value_at + "\nvalue: -10\n".len()..]
    );
    let stderr = render_fails(&mut post_render_command(&kubectl), &input_text);
    assert!(
        stderr.contains("jhub-user-placeholder-priority")
            && stderr.contains("not below the user pods' priority")
            && stderr.contains("jhub-default-priority")
            && stderr.contains("scheduling.podPriority.userPlaceholderPriority"),
        "{stderr}"
    );
    // A class the output does not define cannot be checked: it says so.
    let input_text = text.replace(
        "priorityClassName: jhub-user-placeholder-priority",
        "priorityClassName: somewhere-else",
    );
    let stderr = render_fails(&mut post_render_command(&kubectl), &input_text);
    assert!(
        stderr.contains("somewhere-else") && stderr.contains("not in the chart's output"),
        "{stderr}"
    );
    // Both pass with the opt-out.
    pipe(
        post_render_command(&kubectl).env("SELFDESTRUCT_PRIORITY_CHECK", "off"),
        &input_text,
    );
}

#[test]
fn the_post_renderer_leaves_other_charts_alone_and_needs_a_namespace() {
    let (kubectl, _python) = tools();
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n";
    let out = pipe(&mut post_render_command(&kubectl), other);
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
    let (kubectl, python) = tools();
    let input = chart_output();
    let render = |image: &str, variant: &str| {
        run_with_input(
            post_render_command(&kubectl)
                .env("SELFDESTRUCT_VARIANT", variant)
                .env("SELFDESTRUCT_IMAGE", image),
            &input,
        )
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
            assert_eq!(
                placeholders(&docs)["spec"]["template"]["spec"]["containers"][0]["image"],
                image.as_str(),
                "{variant}"
            );
        }
    }
    // As an argument too (it wins over the environment).
    let out = pipe(
        post_render_command(&kubectl).arg("SELFDESTRUCT_IMAGE=registry.example/other:2"),
        &input,
    );
    let docs = yaml_docs(&python, &out);
    assert_eq!(
        placeholders(&docs)["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/other:2"
    );
    // Neither a tag nor a digest: refused, naming the variable.
    // Nor a valid reference: an empty path component, upper case outside a
    // registry host, a separator at an end or doubled, a short digest.
    for bad in [
        "registry.example/selfdestruct",
        "a b:c",
        "x:y/z",
        "reg.example//sd:1",
        "reg.example/sd/:1",
        "Team/selfdestruct:1",
        "reg.example/-sd:1",
        "reg.example/s..d:1",
        "reg.example/sd@sha256:abc",
    ] {
        let out = render(bad, "full");
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("SELFDESTRUCT_IMAGE"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Unset (or empty): the render fails, naming the value to set; no
    // silent default image that nobody publishes.
    for image in [None, Some("")] {
        let mut cmd = post_render_command(&kubectl);
        match image {
            None => cmd.env_remove("SELFDESTRUCT_IMAGE"),
            Some(v) => cmd.env("SELFDESTRUCT_IMAGE", v),
        };
        let stderr = render_fails(&mut cmd, &input);
        assert!(
            stderr.contains("SELFDESTRUCT_IMAGE is not set")
                && stderr.contains("--post-renderer-args SELFDESTRUCT_IMAGE="),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
    }
}

#[test]
fn a_chart_output_written_otherwise_is_read_as_yaml_not_passed_through() {
    let (kubectl, python) = tools();
    let text = chart_output();
    // CRLF line endings (a chart or a values file edited on Windows), and
    // every component label quoted: the same objects to Kubernetes.
    let crlf = text.replace('\n', "\r\n");
    let quoted = text.replace(
        "component: user-placeholder\n",
        "component: \"user-placeholder\"\n",
    );
    assert!(!quoted.contains("component: user-placeholder\n"));
    for (what, input_text) in [("CRLF", crlf), ("quoted labels", quoted)] {
        let input = yaml_docs(&python, &input_text);
        assert_eq!(input, yaml_docs(&python, &text), "{what}: the same objects");
        let (docs, stderr) = post_render_err(&kubectl, &python, &input_text, "");
        assert!(stderr.is_empty(), "{what}: {stderr}");
        check_common(&python, &docs, &input);
        check_priority(&docs);
    }
    // An output kubectl cannot read fails the render (Helm hides a
    // passed-through chart's stderr: nobody would learn that nothing changed).
    let broken = format!("{text}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: [x\n");
    let stderr = render_fails(&mut post_render_command(&kubectl), &broken);
    assert!(
        stderr.contains("could not read the chart's output"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
}

#[test]
fn placeholder_replicas_are_bounded_and_refused_promptly() {
    let (kubectl, _python) = tools();
    let text = chart_output();
    assert!(
        text.contains("\n  replicas: 4\n"),
        "the capture's placeholders"
    );
    for replicas in ["10001", "3000000", "4294967296"] {
        let input = text.replace("\n  replicas: 4\n", &format!("\n  replicas: {replicas}\n"));
        let mut child = post_render_command(&kubectl)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        // A guard, not a measurement: the old script never returned on
        // 3000000 (a name per replica, then kustomize over millions of them).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while child.try_wait().expect("try_wait").is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("replicas {replicas}: still running after 120 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        writer.join().expect("writer");
        let out = child.wait_with_output().expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "replicas {replicas}: accepted");
        assert!(out.stdout.is_empty(), "replicas {replicas}: printed output");
        assert!(
            stderr.contains(&format!("has {replicas} replicas: at most 10000"))
                && stderr.contains("scheduling.userPlaceholder.replicas"),
            "{replicas}: {stderr}"
        );
    }
}

#[test]
fn the_node_reader_can_be_turned_off_and_nothing_cluster_scoped_is_added() {
    let (kubectl, python) = tools();
    let input_text = chart_output();
    let input = yaml_docs(&python, &input_text);
    let out = pipe(
        post_render_command(&kubectl)
            .env("SELFDESTRUCT_NODE_READER", "off")
            .env_remove("SELFDESTRUCT_VARIANT"),
        &input_text,
    );
    let docs = yaml_docs(&python, &out);
    assert!(node_grants(&docs).is_empty());
    assert_eq!(docs.len(), input.len() + 3);
    // Anything else is refused, naming the variable.
    let bad = run_with_input(
        post_render_command(&kubectl).env("SELFDESTRUCT_NODE_READER", "no"),
        &input_text,
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("SELFDESTRUCT_NODE_READER"));
}

#[test]
fn the_helm_4_plugin_runs_the_post_renderer() {
    let (kubectl, python) = tools();
    let dir = root().join("manifests/jupyterhub");
    let text = std::fs::read_to_string(dir.join("plugin.yaml")).expect("plugin.yaml");
    let plugin = yaml_docs(&python, &text).remove(0);
    // Helm 4's plugin.yaml (internal/plugin/metadata_v1.go, runtime_subprocess.go).
    assert_eq!(plugin["apiVersion"], "v1");
    assert_eq!(plugin["type"], "postrenderer/v1");
    assert_eq!(plugin["runtime"], "subprocess");
    assert_eq!(
        plugin["name"], "selfdestruct",
        "--post-renderer selfdestruct"
    );
    let version = plugin["version"].as_str().expect("version");
    assert_eq!(
        version,
        env!("CARGO_PKG_VERSION"),
        "the plugin's version follows the crate's"
    );
    let commands = plugin["runtimeConfig"]["platformCommand"]
        .as_array()
        .expect("platformCommand");
    assert_eq!(commands.len(), 1, "{commands:?}");
    let command = commands[0]["command"].as_str().expect("command");
    let script = command
        .strip_prefix("${HELM_PLUGIN_DIR}/")
        .unwrap_or_else(|| panic!("{command}: not under ${{HELM_PLUGIN_DIR}}"));
    assert_eq!(script, "post-render.sh");
    let path = dir.join(script);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path)
        .expect("the script")
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0, "{} is not executable", path.display());
    // As Helm runs it: the command itself (exec, no shell), HELM_PLUGIN_DIR
    // set, the --post-renderer-args appended, the chart on stdin.
    let out = pipe(
        Command::new(command.replace("${HELM_PLUGIN_DIR}", &dir.to_string_lossy()))
            .arg(NAMESPACE)
            .env("HELM_PLUGIN_DIR", &dir)
            .env("HELM_PLUGIN_NAME", "selfdestruct")
            .env("KUBECTL", &kubectl)
            .env("SELFDESTRUCT_IMAGE", IMAGE)
            .env_remove("SELFDESTRUCT_VARIANT")
            .env_remove("SELFDESTRUCT_NODE_READER")
            .env_remove("SELFDESTRUCT_PRIORITY_CHECK"),
        &chart_output(),
    );
    let docs = yaml_docs(&python, &out);
    assert_eq!(
        placeholders(&docs)["spec"]["template"]["spec"]["serviceAccountName"],
        SERVICE_ACCOUNT
    );
}

/// The agent binary built with these tests, for `check-settings`.
const AGENT: &str = env!("CARGO_BIN_EXE_selfdestruct");

/// What the agent itself says at start-up about `var=value` (its stderr).
fn agent_says(var: &str, value: &str) -> String {
    let out = Command::new(AGENT)
        .env_clear()
        .env(var, value)
        .stdin(Stdio::null())
        .output()
        .expect("run the agent");
    assert_eq!(out.status.code(), Some(2), "{var}={value}: exit 2");
    String::from_utf8_lossy(&out.stderr)
        .trim()
        .trim_start_matches("error: ")
        .to_string()
}

#[test]
fn agent_settings_given_as_arguments_reach_the_placeholders_env_checked_by_the_agent() {
    let (kubectl, python) = tools();
    let input_text = chart_output();
    let input = yaml_docs(&python, &input_text);
    let with_bin = || {
        let mut cmd = post_render_command(&kubectl);
        cmd.env("SELFDESTRUCT_BIN", AGENT);
        cmd
    };
    // The node reader off and a lifetime, in one command (the post-renderer's
    // own setting and the agent's side by side).
    let settings = [
        ("SELFDESTRUCT_MIN_LIFETIME", "6h"),
        ("SELFDESTRUCT_MAX_LIFETIME", "12h"),
        (
            "SELFDESTRUCT_NODE_SELECTOR",
            "hub.jupyter.org/node-purpose=user",
        ),
        ("SELFDESTRUCT_LOG_LEVEL", "debug"),
    ];
    let mut cmd = with_bin();
    cmd.arg("SELFDESTRUCT_NODE_READER=off");
    for (k, v) in settings {
        cmd.arg(format!("{k}={v}"));
    }
    let docs = yaml_docs(&python, &pipe(&mut cmd, &input_text));
    let sts = placeholders(&docs);
    let env = env_of(&sts["spec"]["template"]["spec"]["containers"][0]);
    for (k, v) in settings {
        let found: Vec<_> = env.iter().filter(|(n, _)| n == k).collect();
        assert_eq!(found, [&(k.to_string(), json!(v))], "{env:?}");
    }
    // The Component's entries stay, once each.
    for k in [
        "POD_NAME",
        "POD_UID",
        "SELFDESTRUCT_MODE",
        "SELFDESTRUCT_SIBLING_SELECTOR",
    ] {
        assert_eq!(
            env.iter().filter(|(n, _)| n == k).count(),
            1,
            "{k}: {env:?}"
        );
    }
    assert!(
        node_grants(&docs).is_empty(),
        "SELFDESTRUCT_NODE_READER=off"
    );
    assert_eq!(docs.len(), input.len() + 3);
    // Full variant: a sibling selector of the operator's wins over the
    // post-renderer's.
    let mut cmd = with_bin();
    cmd.env("SELFDESTRUCT_VARIANT", "full")
        .arg("SELFDESTRUCT_SIBLING_SELECTOR=component=user-placeholder,release=jhub,x=y");
    let docs = yaml_docs(&python, &pipe(&mut cmd, &input_text));
    assert_eq!(
        sibling_selector(placeholders(&docs)),
        "component=user-placeholder,release=jhub,x=y"
    );

    // An invalid value or an unknown name fails the render with the agent's
    // own message, naming it.
    for (var, value) in [
        ("SELFDESTRUCT_MAX_LIFETIME", "12 hours please"),
        ("SELFDESTRUCT_NODE_SELECTOR", "a in b"),
        ("SELFDESTRUCT_MAX_MOVES_PER_HOUR", "-1"),
    ] {
        let stderr = render_fails(with_bin().arg(format!("{var}={value}")), &input_text);
        let agent = agent_says(var, value);
        assert!(agent.contains(var), "{agent}");
        assert_eq!(stderr.trim(), format!("post-render.sh: {agent}"));
    }
    // check-settings itself: exit 2, as the agent on a bad setting.
    let checked = Command::new(AGENT)
        .env_clear()
        .args(["check-settings", "SELFDESTRUCT_MODE=maybe"])
        .output()
        .expect("check-settings");
    assert_eq!(checked.status.code(), Some(2));
    assert!(checked.stdout.is_empty());
    let stderr = render_fails(
        with_bin().args([
            "SELFDESTRUCT_MIN_LIFETIME=2h",
            "SELFDESTRUCT_MAX_LIFETIME=1h",
        ]),
        &input_text,
    );
    assert!(
        stderr.contains("invalid SELFDESTRUCT_MIN_LIFETIME"),
        "{stderr}"
    );
    let stderr = render_fails(with_bin().arg("SELFDESTRUCT_MAX_LIFETYME=12h"), &input_text);
    assert!(
        stderr.contains("unknown setting SELFDESTRUCT_MAX_LIFETYME"),
        "{stderr}"
    );
    // The node gate's settings are not the agent's.
    let stderr = render_fails(with_bin().arg("SELFDESTRUCT_GATE_TIMEOUT=5m"), &input_text);
    assert!(
        stderr.contains("unknown setting SELFDESTRUCT_GATE_TIMEOUT"),
        "{stderr}"
    );
    // What the post-renderer fixes: the Downward API, the mode (the Role
    // evicts only), the sibling selector without list/watch.
    for (arg, says) in [
        ("POD_NAME=x", "only SELFDESTRUCT_* settings"),
        ("SELFDESTRUCT_MODE=delete", "eviction only"),
        (
            "SELFDESTRUCT_SIBLING_SELECTOR=a=b",
            "SELFDESTRUCT_VARIANT=full",
        ),
    ] {
        let stderr = render_fails(with_bin().arg(arg), &input_text);
        assert!(stderr.contains(says), "{arg}: {stderr}");
    }
    // Settings without a binary to check them: it says how to get one
    // without a Rust toolchain (the release's binary, checksum-verified, or
    // the image run by a container runtime).
    let mut cmd = post_render_command(&kubectl);
    cmd.env("PATH", "/usr/bin:/bin")
        .arg("SELFDESTRUCT_MAX_LIFETIME=12h");
    let stderr = render_fails(&mut cmd, &input_text);
    for says in [
        "SELFDESTRUCT_BIN",
        "no Rust needed",
        "SHA256SUMS",
        "docker run",
        "docs/jupyterhub.md",
    ] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
}

#[test]
fn check_settings_accepts_the_operators_settings_only_not_the_pods_identity() {
    // The identity and internal variables: the Downward API fills them, and a
    // service-account folder pointed elsewhere turns every placeholder into a
    // plain pause. Exit 2, naming the variable, as the agent on a bad setting.
    for setting in [
        "POD_NAME=placeholder-0",
        "POD_NAMESPACE=jhub",
        "POD_UID=0b7a0c4e-2f7d-4bf3-9f0a-0c2a8f1b7f3e",
        "NODE_NAME=node-a",
        "SELFDESTRUCT_SERVICE_ACCOUNT_DIR=/nonexistent",
        "SELFDESTRUCT_PODINFO_DIR=/nonexistent",
    ] {
        let var = setting.split_once('=').expect("VAR=VALUE").0;
        let out = Command::new(AGENT)
            .env_clear()
            .args(["check-settings", setting])
            .output()
            .expect("check-settings");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{setting}: {stderr}");
        assert!(out.stdout.is_empty(), "{setting}");
        assert!(
            stderr.contains(&format!("{var} is not an agent setting")),
            "{setting}: {stderr}"
        );
    }
    // The documented settings, the shared logging ones included, pass.
    let out = Command::new(AGENT)
        .env_clear()
        .args([
            "check-settings",
            "SELFDESTRUCT_LOG_LEVEL=debug",
            "SELFDESTRUCT_LOG_FORMAT=json",
            "SELFDESTRUCT_MAX_LIFETIME=12h",
            "SELFDESTRUCT_NODE_SETTLE=20s",
        ])
        .output()
        .expect("check-settings");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
    // Through the post-renderer: the render fails, naming it.
    let (kubectl, _python) = tools();
    let stderr = render_fails(
        post_render_command(&kubectl)
            .env("SELFDESTRUCT_BIN", AGENT)
            .arg("SELFDESTRUCT_SERVICE_ACCOUNT_DIR=/nonexistent"),
        &chart_output(),
    );
    assert!(
        stderr.contains("SELFDESTRUCT_SERVICE_ACCOUNT_DIR is not an agent setting"),
        "{stderr}"
    );
}

/// Whether objects of `kind` live in a namespace (the chart's kinds and ours).
fn namespaced(kind: &str) -> bool {
    match kind {
        "ClusterRole" | "ClusterRoleBinding" | "PriorityClass" => false,
        "ConfigMap"
        | "Secret"
        | "Service"
        | "ServiceAccount"
        | "Role"
        | "RoleBinding"
        | "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "PodDisruptionBudget"
        | "NetworkPolicy"
        | "PersistentVolumeClaim"
        | "Job" => true,
        other => panic!("is {other} namespaced? add it here"),
    }
}

/// (kind, namespace, name) of every object of `docs`, installed into `namespace`.
fn identities(docs: &[Value], namespace: &str) -> Vec<(String, String, String)> {
    docs.iter()
        .map(|d| {
            let kind = d["kind"].as_str().expect("kind").to_string();
            let ns = if namespaced(&kind) { namespace } else { "" };
            let name = d["metadata"]["name"].as_str().expect("name").to_string();
            (kind, ns.to_string(), name)
        })
        .collect()
}

#[test]
fn two_releases_install_side_by_side_in_one_namespace_or_two() {
    let (kubectl, python) = tools();
    let render = |input: &str, namespace: &str| {
        yaml_docs(
            &python,
            &pipe(&mut post_render_in(&kubectl, namespace), input),
        )
    };
    let jhub_input = chart_output();
    // A second release, "staging", in the same namespace (the chart's own
    // names prefixed with fullnameOverride: null).
    let staging_input = testdata("staging/z2jh-staging.yaml");
    let jhub = render(&jhub_input, NAMESPACE);
    let staging = render(&staging_input, NAMESPACE);
    let a = identities(&jhub, NAMESPACE);
    let b = identities(&staging, NAMESPACE);
    let shared: Vec<_> = a.iter().filter(|id| b.contains(id)).collect();
    assert!(shared.is_empty(), "one namespace, two releases: {shared:?}");
    // Each release's objects point at its own: account, Role, binding, node
    // reader, pod names.
    for (docs, release) in [(&jhub, "jhub"), (&staging, "staging")] {
        let account = format!("selfdestruct-{release}");
        let sts = placeholders(docs);
        assert_eq!(sts["metadata"]["labels"]["release"], release);
        assert_eq!(
            sts["spec"]["template"]["spec"]["serviceAccountName"],
            account.as_str()
        );
        find(docs, "ServiceAccount", &account);
        let rb = find(docs, "RoleBinding", &account);
        assert_eq!(rb["roleRef"]["name"], account.as_str());
        assert_eq!(rb["subjects"][0]["name"], account.as_str());
        let role = find(docs, "Role", &account);
        assert_eq!(
            role["rules"][0]["resourceNames"],
            json!(placeholder_pod_names(sts))
        );
        let bindings: Vec<&Value> = docs
            .iter()
            .filter(|d| {
                d["kind"] == "ClusterRoleBinding"
                    && d["metadata"]["labels"]["app.kubernetes.io/name"] == "selfdestruct"
            })
            .collect();
        assert_eq!(bindings.len(), 1);
        assert_eq!(
            bindings[0]["subjects"],
            json!([{ "kind": "ServiceAccount", "name": account, "namespace": NAMESPACE }])
        );
        find(
            docs,
            "ClusterRole",
            bindings[0]["roleRef"]["name"].as_str().expect("roleRef"),
        );
    }
    // The same release name in another namespace (a second hub): what the
    // post-renderer adds does not collide, and its cluster-scoped objects
    // differ. (The chart's own cluster-scoped objects are named after the
    // release alone: that is the chart's, not ours.)
    let elsewhere = render(&jhub_input, "other-hub");
    let input = yaml_docs(&python, &jhub_input);
    let chart_ids = identities(&input, "");
    let added = |docs: &[Value], ns: &str| -> Vec<(String, String, String)> {
        identities(docs, ns)
            .into_iter()
            .filter(|(k, _, n)| !chart_ids.iter().any(|(ck, _, cn)| ck == k && cn == n))
            .collect()
    };
    let here = added(&jhub, NAMESPACE);
    let there = added(&elsewhere, "other-hub");
    assert_eq!(here.len(), 5, "{here:?}");
    let shared: Vec<_> = here.iter().filter(|id| there.contains(id)).collect();
    assert!(
        shared.is_empty(),
        "two namespaces, one release name: {shared:?}"
    );
    let cluster_scoped: Vec<_> = there.iter().filter(|(_, ns, _)| ns.is_empty()).collect();
    assert_eq!(cluster_scoped.len(), 2, "{there:?}");
}

/// The `--post-renderer-args` of each `helm upgrade` command in
/// docs/jupyterhub.md, with the doc's `REGISTRY` placeholder filled in.
fn documented_post_renderer_args() -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(root().join("docs/jupyterhub.md")).expect("the doc");
    let blocks: Vec<&str> = doc.split("```").skip(1).step_by(2).collect();
    blocks
        .iter()
        .filter(|b| b.contains("helm upgrade --install"))
        .map(|b| {
            let words: Vec<&str> = b.split_whitespace().filter(|w| *w != "\\").collect();
            words
                .windows(2)
                .filter(|w| w[0] == "--post-renderer-args")
                .map(|w| w[1].replace("REGISTRY", "registry.example"))
                .collect()
        })
        .collect()
}

#[test]
fn the_docs_walk_followed_literally_gives_the_operators_placeholders() {
    let (kubectl, python) = tools();
    // The doc's config.yaml sets what the capture was rendered with.
    let doc = std::fs::read_to_string(root().join("docs/jupyterhub.md")).expect("the doc");
    let values = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the doc's config.yaml");
    let values = yaml_docs(&python, values).remove(0);
    assert_eq!(values["scheduling"]["podPriority"]["enabled"], true);
    assert_eq!(values["scheduling"]["userPlaceholder"]["replicas"], 4);
    let input_text = chart_output();
    assert!(
        input_text.contains(
            "scheduling.podPriority.enabled: true, scheduling.userPlaceholder.replicas: 4"
        )
    );
    let commands = documented_post_renderer_args();
    assert_eq!(commands.len(), 2, "the install and the lifetime commands");
    for args in commands {
        let mut cmd = Command::new("bash");
        cmd.arg(root().join("manifests/jupyterhub/post-render.sh"))
            .args(&args)
            .env("KUBECTL", &kubectl)
            .env("SELFDESTRUCT_BIN", AGENT);
        for own in [
            "SELFDESTRUCT_IMAGE",
            "SELFDESTRUCT_VARIANT",
            "SELFDESTRUCT_NODE_READER",
            "SELFDESTRUCT_PRIORITY_CHECK",
            "SELFDESTRUCT_NAMESPACE",
        ] {
            cmd.env_remove(own);
        }
        let docs = yaml_docs(&python, &pipe(&mut cmd, &input_text));
        let sts = placeholders(&docs);
        let pod = &sts["spec"]["template"]["spec"];
        // The operator's image, a priority below the users', the release's names.
        assert_eq!(
            pod["containers"][0]["image"], "registry.example/selfdestruct:0.1.0",
            "{args:?}"
        );
        check_priority(&docs);
        assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
        // Their agent settings.
        let env = env_of(&pod["containers"][0]);
        for arg in &args {
            let Some((name, value)) = arg.split_once('=') else {
                continue;
            };
            if name.starts_with("SELFDESTRUCT_")
                && !["SELFDESTRUCT_IMAGE", "SELFDESTRUCT_NODE_READER"].contains(&name)
            {
                assert!(
                    env.contains(&(name.to_string(), json!(value))),
                    "{name}: {env:?}"
                );
            }
        }
    }
}
