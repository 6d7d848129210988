//! Fuzzing (with proptest) of every parser that reads input from outside the
//! process. None may panic on any input; where a printed form exists, printing
//! and parsing again gives the same value; where the result has an invariant
//! (an error names its variable, a summary keeps only what it may), it holds.
//! Case counts are small for CI (`PROPTEST_CASES` raises them locally).
//!
//! The parsers, by where their input comes from:
//!
//! - settings (environment variables and flags): every argument of
//!   `config::Cli::command()` (the agent's and `node-gate`'s), through clap,
//!   `Config::from_cli` and the gate's `GateConfig::new`, so the list cannot fall
//!   behind the settings; the `RUST_LOG` fallback (`config::parse_level`);
//!   and, within them, `duration::parse`, `images::parse_list` /
//!   `ImageRef::parse`, `Selector::parse` (node and sibling selectors, the
//!   gate's taint key), the booleans, modes and Kubernetes names;
//! - the Downward API and the pod's mounts: `identity::resolve` over the
//!   podinfo files (`name`, `namespace`, `uid`), the hostname, the
//!   service-account `namespace` file and the kubeconfig context's namespace;
//! - API access: `connect::discover` over a kubeconfig file of any content
//!   (`KUBECONFIG`), and `connect::in_cluster` over any
//!   `KUBERNETES_SERVICE_HOST`/`_PORT` and `ca.crt`;
//! - API answers the agent reads itself: the `Retry-After` header
//!   (`api::retry_after`), an error answer's body (`api::status_error`, kube's
//!   `Status` through `api::from_kube`) and what it means (`api::outcome_of`,
//!   the uid-precondition message, `pdb::is_multiple_pdbs`,
//!   `node_gate::is_conflict`); Nodes and Pods as summaries
//!   (`summarize::node`, `summarize::own_pod`, `summarize::sibling`);
//!   PodDisruptionBudgets' selectors (`pdb::selecting`); the node gate's view
//!   of its Node (`node_gate::view`, `gate_taints_left`, `removal_patch`).
//!
//! Not parsers: the wrapper's command and arguments are passed to the child
//! as they are; the watch's error handling looks at the status code only.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::props::proptest_config;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use selfdestruct::identity;
use selfdestruct::identity::IdentitySettings;
use selfdestruct_decision::duration;
use selfdestruct_decision::images::{self, ImageRef};
use selfdestruct_decision::selector::Selector;
use serde_json::{Value, json};

/// Text that looks like a duration often enough to reach the parser's insides.
fn duration_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9 .+-]{0,4}[0-9]{0,22}[ ]?(ns|us|ms|s|m|h|d|w|M|y|sec|min|hours|days|parsec)?([0-9]{1,4}(s|m|h))?",
        "[0-9]{1,30}y",
    ]
}

fn image_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "([a-zA-Z0-9.:-]{1,12}/){0,3}[a-z0-9._-]{1,12}(:[a-zA-Z0-9._-]{0,10})?(@[a-z0-9+._-]{0,8}:[0-9a-fA-F]{0,70})?",
        "(docker.io|index.docker.io|localhost:5000|quay.io)/[a-z]{1,5}(/[a-z]{1,5})?(:[a-z0-9]{1,5})?",
    ]
}

fn selector_like() -> impl Strategy<Value = String> {
    let key = "([a-z0-9-]{1,8}(\\.[a-z0-9]{1,4})?/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,6}[A-Za-z0-9])?";
    let value = "([A-Za-z0-9]([A-Za-z0-9._-]{0,6}[A-Za-z0-9])?)?";
    let term = prop_oneof![
        (key, value).prop_map(|(k, v)| format!("{k}={v}")),
        (key, value).prop_map(|(k, v)| format!("{k} == {v}")),
        (key, value).prop_map(|(k, v)| format!("{k}!={v}")),
        key.prop_map(|k| k.to_string()),
        key.prop_map(|k| format!("!{k}")),
        (key, any::<i64>()).prop_map(|(k, n)| format!("{k}>{n}")),
        (key, any::<i64>()).prop_map(|(k, n)| format!("{k} < {n}")),
        (key, prop::collection::vec(value, 1..4))
            .prop_map(|(k, vs)| format!("{k} in ({})", vs.join(", "))),
        (key, prop::collection::vec(value, 1..4))
            .prop_map(|(k, vs)| format!("{k} notin({})", vs.join(","))),
        "[a-z!=<>(), ]{0,8}",
    ];
    prop_oneof![
        any::<String>(),
        prop::collection::vec(term, 0..5).prop_map(|ts| ts.join(",")),
    ]
}

/// Arbitrary JSON, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        prop_oneof![
            Just("2026-11-22T04:26:05Z"),
            Just("0000-01-01T00:00:00Z"),
            Just("1969-12-31T23:59:59Z"),
            Just("9999-12-31T23:59:59.999999999Z"),
            Just("True"),
            Just("Ready"),
            Just("NoSchedule"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-zA-Z]{1,8}",
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("conditions".to_string()),
                    Just("images".to_string()),
                    Just("names".to_string()),
                    Just("taints".to_string()),
                    Just("lastTransitionTime".to_string()),
                    Just("creationTimestamp".to_string()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

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

/// Replaces the value at one path of `v` (chosen by `pick`) with `with`.
fn mutate(v: &mut Value, pick: usize, with: Value) {
    let mut paths: Vec<String> = Vec::new();
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    walk(x, format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    walk(v, String::new(), &mut paths);
    let path = &paths[pick % paths.len()];
    if let Some(slot) = v.pointer_mut(path) {
        *slot = with;
    }
}

fn summarise_node(bytes: &[u8]) {
    if let Ok(node) = serde_json::from_slice::<Node>(bytes) {
        let required =
            images::parse_list("nginx:1.25,quay.io/x/y@sha256:0123456789abcdef0123456789abcdef")
                .expect("valid");
        let keys: BTreeSet<String> = ["pool".to_string()].into();
        let s = selfdestruct::summarize::node(node, &keys, &required);
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
    if let Ok(pod) = serde_json::from_slice::<Pod>(bytes) {
        let own = selfdestruct::summarize::own_pod(&pod);
        assert_eq!(own.name, pod.metadata.name.clone().unwrap_or_default());
        assert_eq!(own.terminating, pod.metadata.deletion_timestamp.is_some());
        let s = selfdestruct::summarize::sibling(pod);
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
    fn durations_never_panic_and_print_back(input in duration_like()) {
        if let Ok(d) = duration::parse(&input) {
            let printed = duration::format(d);
            // format() keeps whole seconds (or the milliseconds of a sub-second value).
            let back = duration::parse(&printed);
            prop_assert!(back.is_ok(), "{input:?} -> {d:?} -> {printed:?} does not parse");
            let back = back.unwrap_or_default();
            if d.as_secs() > 0 {
                prop_assert_eq!(back, Duration::from_secs(d.as_secs()), "{:?} -> {:?}", input, printed);
            } else {
                prop_assert_eq!(back, Duration::from_millis(u64::from(d.subsec_millis())));
            }
        }
    }

    #[test]
    fn whole_second_durations_round_trip(secs in 0u64..10_000_000_000) {
        let d = Duration::from_secs(secs);
        prop_assert_eq!(duration::parse(&duration::format(d)), Ok(d));
    }

    #[test]
    fn image_references_never_panic_and_normalise_idempotently(input in image_like(), other in image_like()) {
        if let Ok(r) = ImageRef::parse(&input) {
            let printed = r.to_string();
            let again = ImageRef::parse(&printed);
            prop_assert_eq!(again.as_ref(), Ok(&r), "{:?} -> {:?}", input, printed);
            prop_assert!(r.matches(&printed), "{input:?} does not match its own form {printed:?}");
            if r.digest.is_none() {
                prop_assert!(r.matches(&input), "{input:?} does not match itself");
            }
            prop_assert!(!printed.contains(char::is_whitespace));
        }
        // matches() accepts only what parses, and agrees with the normalised forms.
        if let Ok(r) = ImageRef::parse(&input) {
            let m = r.matches(&other);
            if m {
                let o = ImageRef::parse(&other);
                prop_assert!(o.is_ok());
                let o = o.unwrap_or_else(|_| r.clone());
                prop_assert_eq!((&o.domain, &o.path), (&r.domain, &r.path));
            }
        }
        let _ = images::parse_list(&format!("{input},{other}"));
    }

    #[test]
    fn selectors_never_panic_and_round_trip(input in selector_like(), labels in prop::collection::btree_map("[a-z]{1,3}", "[a-z0-9]{0,3}", 0..4)) {
        if let Ok(s) = Selector::parse(&input) {
            let printed = s.to_string();
            let again = Selector::parse(&printed);
            prop_assert_eq!(again.as_ref(), Ok(&s), "{:?} -> {:?}", input, printed);
            // matching never panics and is the same for the re-parsed selector
            prop_assert_eq!(s.matches(&labels), again.map(|a| a.matches(&labels)).unwrap_or(!s.matches(&labels)));
        }
    }

    #[test]
    fn selectors_from_labels_round_trip_and_match_them(
        labels in prop::collection::btree_map(
            "([a-z0-9]{1,6}\\.[a-z]{2,4}/)?[a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?",
            "([a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?)?",
            0..5,
        )
    ) {
        let s = Selector::from_labels(&labels);
        prop_assert!(s.matches(&labels));
        let printed = s.to_string();
        prop_assert_eq!(Selector::parse(&printed), Ok(s), "{:?}", printed);
    }

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

proptest! {
    // Each case writes three files: fewer cases.
    #![proptest_config(proptest_config(256))]

    #[test]
    fn downward_api_files_of_any_content_never_panic(
        name in prop::collection::vec(any::<u8>(), 0..300),
        namespace in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
        uid in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
        text_name in prop::option::of("[ \t\n]{0,2}[a-z0-9.-]{0,270}[ \t\n]{0,2}"),
        // what identity::hostname() can return: trimmed, never empty
        host in prop::option::of("[!-~]([ -~]{0,62}[!-~])?"),
        // the service account's namespace file, and the kubeconfig context's namespace
        sa_namespace in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
        kubeconfig_namespace in prop::option::of(prop_oneof![any::<String>(), "[a-z0-9-]{0,64}"]),
    ) {
        let dir = podinfo_dir();
        let write = |file: &str, content: Option<&[u8]>| match content {
            Some(c) => std::fs::write(dir.join(file), c).expect("write"),
            None => {
                let _ = std::fs::remove_file(dir.join(file));
            }
        };
        write("name", Some(text_name.as_ref().map_or(name.as_slice(), |t| t.as_bytes())));
        write("namespace", namespace.as_deref());
        write("uid", uid.as_deref());
        std::fs::create_dir_all(dir.join("sa")).expect("mkdir");
        write("sa/namespace", sa_namespace.as_deref());
        let hints = IdentitySettings {
            podinfo_dir: dir.clone(),
            service_account_dir: dir.join("sa"),
            ..IdentitySettings::default()
        };
        match identity::resolve(&hints, host.clone(), kubeconfig_namespace.as_deref()) {
            Ok(id) => {
                // Whatever the source, what comes out is a Kubernetes name.
                prop_assert!(identity::is_dns1123_subdomain(&id.name), "{id:?}");
                prop_assert!(identity::is_dns1123_label(&id.namespace), "{id:?}");
                if let Some(u) = &id.uid {
                    prop_assert!(!u.is_empty() && !u.contains(char::is_whitespace), "{id:?}");
                }
            }
            Err(e) => {
                // The error names the variable that fixes it.
                let text = e.to_string();
                prop_assert!(text.contains("POD_NAME") || text.contains("POD_NAMESPACE"), "{text}");
            }
        }
    }
}

fn podinfo_dir() -> std::path::PathBuf {
    thread_local! {
        static DIR: std::path::PathBuf = {
            let d = std::env::temp_dir().join(format!(
                "selfdestruct-fuzz-podinfo-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).expect("temp dir");
            d
        };
    }
    DIR.with(Clone::clone)
}

/// The label maps generated above are valid by construction; a sanity check
/// that the generator is not vacuous.
#[test]
fn generators_reach_valid_inputs() {
    // A fixed seed: the count is a property of the generators, not of the draw (with a
    // fresh seed each run, about 10% valid selectors sat at the bound now and then).
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        proptest_config(300),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let (mut sel_ok, mut img_ok, mut dur_ok) = (0, 0, 0);
    for _ in 0..300 {
        let s = selector_like()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        sel_ok += usize::from(Selector::parse(&s).is_ok_and(|s| !s.is_empty()));
        let i = image_like().new_tree(&mut runner).expect("tree").current();
        img_ok += usize::from(ImageRef::parse(&i).is_ok());
        let d = duration_like()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        dur_ok += usize::from(duration::parse(&d).is_ok());
    }
    eprintln!("valid of 300: selectors {sel_ok}, images {img_ok}, durations {dur_ok}");
    assert!(sel_ok > 30 && img_ok > 30 && dur_ok > 30);
    // The kubeconfig and in-cluster bases are usable before they are mutated.
    let dir = podinfo_dir().join("kube-valid");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("config");
    std::fs::write(&path, valid_kubeconfig().to_string()).expect("write");
    let env = |k: &str| (k == "KUBECONFIG").then(|| path.clone().into_os_string());
    let access = block_on(selfdestruct::connect::discover(env, None, &dir))
        .unwrap_or_else(|e| panic!("the base kubeconfig: {e}"));
    assert_eq!(access.namespace.as_deref(), Some("ns"));
    std::fs::write(dir.join("token"), "a-token").expect("write");
    std::fs::write(dir.join("ca.crt"), ca_pem()).expect("write");
    let access = block_on(selfdestruct::connect::in_cluster(
        "10.96.0.1",
        Some("443"),
        &dir,
    ))
    .unwrap_or_else(|e| panic!("the base in-cluster account: {e}"));
    assert_eq!(
        access.config.cluster_url.to_string(),
        "https://10.96.0.1:443/"
    );
}

/// A value for any setting: anything, or close to the accepted forms.
fn setting_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        duration_like(),
        "(true|false|yes|no|on|off|1|0|TRUE|False|maybe|)",
        "(evict|delete|eviction|exit|text|json|none|info|debug|off|warning|x)",
        "[a-z0-9=,!() ./:@-]{0,24}",
        image_like(),
        selector_like(),
    ]
}

/// `Cli::command()` with no environment variables: only the flags count.
fn cli_without_env() -> clap::Command {
    use clap::CommandFactory;
    selfdestruct::config::Cli::command()
        .mut_args(|a| a.env(None))
        .mut_subcommand("node-gate", |c| c.mut_args(|a| a.env(None)))
}

/// Every setting of the agent (`gate` false) or of `node-gate` (`gate` true):
/// its long flag and environment variable.
fn settings(gate: bool) -> Vec<(String, String)> {
    use clap::CommandFactory;
    let mut cmd = selfdestruct::config::Cli::command();
    // Built, so that the subcommand holds the shared (global) settings too.
    cmd.build();
    let cmd = if gate {
        cmd.find_subcommand("node-gate")
            .cloned()
            .expect("the node-gate subcommand")
    } else {
        cmd
    };
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env()?.to_string_lossy().to_string();
            Some((long.to_string(), env))
        })
        .collect()
}

/// Parses the settings from `argv` (after the program name) as `main` does;
/// `Err` is the message, which must name `names`.
fn parse_settings(argv: &[String]) -> Result<(), String> {
    use clap::FromArgMatches;
    let mut full = vec!["selfdestruct".to_string()];
    full.extend_from_slice(argv);
    let matches = cli_without_env()
        .try_get_matches_from(full)
        .map_err(|e| e.to_string())?;
    let cli = selfdestruct::config::Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    match &cli.command {
        Some(selfdestruct::config::Command::NodeGate(g)) => {
            selfdestruct::node_gate::GateConfig::new(g, &cli.shared.identity)
                .map_err(|e| e.to_string())?;
        }
        _ => {
            selfdestruct::config::Config::from_cli(&cli).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[test]
fn the_settings_walk_finds_every_kind_of_setting() {
    // The walk below finds the settings in clap's description: it is not empty,
    // and it reaches the ones named in the README's tables.
    let agent = settings(false);
    let gate = settings(true);
    for var in [
        "SELFDESTRUCT_MIN_LIFETIME",
        "SELFDESTRUCT_NODE_SELECTOR",
        "SELFDESTRUCT_REQUIRED_IMAGES",
        "SELFDESTRUCT_SIBLING_SELECTOR",
        "POD_UID",
        "SELFDESTRUCT_LOG_LEVEL",
    ] {
        assert!(agent.iter().any(|(_, e)| e == var), "{var}: {agent:?}");
    }
    for var in [
        "SELFDESTRUCT_GATE_TAINT",
        "SELFDESTRUCT_GATE_TIMEOUT",
        "NODE_NAME",
    ] {
        assert!(gate.iter().any(|(_, e)| e == var), "{var}: {gate:?}");
    }
    assert!(agent.len() >= 20, "{agent:?}");
}

proptest! {
    // Each case parses every setting (about 30) once.
    #![proptest_config(proptest_config(128))]

    #[test]
    fn any_value_of_any_setting_parses_or_names_its_variable(value in setting_value()) {
        for (long, env) in settings(false) {
            let argv = [format!("--{long}={value}")];
            if let Err(e) = parse_settings(&argv) {
                prop_assert!(e.contains(&env) || e.contains(&format!("--{long}")), "--{long}={value:?}: {e}");
            }
        }
        for (long, env) in settings(true) {
            let mut argv = vec!["node-gate".to_string(), format!("--{long}={value}")];
            if long != "node-name" {
                argv.push("--node-name=n1".into());
            }
            if let Err(e) = parse_settings(&argv) {
                prop_assert!(e.contains(&env) || e.contains(&format!("--{long}")), "node-gate --{long}={value:?}: {e}");
            }
        }
    }

    #[test]
    fn rust_log_of_any_content_is_a_fallback_never_an_error(value in prop_oneof![
        any::<String>(),
        "((selfdestruct|kube|[a-z_:]{1,8})=)?(trace|debug|info|warn|warning|error|off|INFO|x)?(,[a-z=]{0,12}){0,3}",
    ]) {
        use clap::FromArgMatches;
        let matches = cli_without_env().try_get_matches_from(["selfdestruct"]).expect("defaults");
        let cli = selfdestruct::config::Cli::from_arg_matches(&matches).expect("defaults");
        prop_assert!(selfdestruct::config::Config::from_cli(&cli).is_ok());
        let level = selfdestruct::config::parse_level(&value);
        let want = level.unwrap_or(tracing::level_filters::LevelFilter::INFO);
        prop_assert_eq!(cli.shared.level(Some(&value)), want, "RUST_LOG={:?}", value);
        // `selfdestruct=LEVEL` first wins over the rest of the list.
        let ours = format!("selfdestruct=debug,{value}");
        prop_assert_eq!(selfdestruct::config::parse_level(&ours), Some(tracing::level_filters::LevelFilter::DEBUG));
    }
}

/// A kubeconfig kube and kubectl accept, as JSON (which is YAML).
fn valid_kubeconfig() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1", "tls-server-name": "k"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
        "preferences": {}
    })
}

/// Runs `f` on a current-thread runtime (connect's functions are async).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// `connect::discover` with `KUBECONFIG` naming a file of `content`: a
/// kubeconfig asked for is used or refused as a configuration error naming the
/// variable, never skipped for another source.
fn discover_kubeconfig(content: &[u8]) -> Result<(), String> {
    let dir = podinfo_dir().join("kube");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("config");
    std::fs::write(&path, content).expect("write");
    let env = |k: &str| match k {
        "KUBECONFIG" => Some(path.clone().into_os_string()),
        _ => None,
    };
    match block_on(selfdestruct::connect::discover(
        env,
        None,
        &dir.join("no-sa"),
    )) {
        Ok(access) => {
            if !access.named {
                return Err("a KUBECONFIG kubeconfig is not marked as named".into());
            }
            Ok(())
        }
        Err(e) if e.is_named() && e.to_string().contains("KUBECONFIG=") => Ok(()),
        Err(e) => Err(format!("{e:?}")),
    }
}

/// A self-signed CA certificate in PEM, made once.
fn ca_pem() -> &'static str {
    static PEM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PEM.get_or_init(|| {
        rcgen::generate_simple_self_signed(vec!["kubernetes.default.svc".to_string()])
            .expect("certificate")
            .cert
            .pem()
    })
}

proptest! {
    // Each case writes files and builds kube configurations: fewer cases.
    #![proptest_config(proptest_config(128))]

    #[test]
    fn kubeconfig_files_of_any_content_are_used_or_refused_by_name(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        pick in any::<usize>(),
        with in json_value(),
        cut in any::<usize>(),
    ) {
        prop_assert_eq!(discover_kubeconfig(&bytes), Ok(()), "{:?}", String::from_utf8_lossy(&bytes));
        let mut v = valid_kubeconfig();
        mutate(&mut v, pick, with);
        let text = serde_json::to_vec(&v).unwrap_or_default();
        // No credential plugin: it would run a command.
        prop_assume!(!String::from_utf8_lossy(&text).contains("\"exec\""));
        prop_assert_eq!(discover_kubeconfig(&text), Ok(()), "{}", String::from_utf8_lossy(&text));
        let cut = cut % (text.len() + 1);
        prop_assert_eq!(discover_kubeconfig(&text[..cut]), Ok(()), "{}", String::from_utf8_lossy(&text[..cut]));
    }

    #[test]
    fn in_cluster_settings_and_ca_of_any_content_never_panic(
        host in prop_oneof![any::<String>(), "[0-9a-f.:\\[\\]]{0,20}", Just("10.96.0.1".to_string())],
        port in prop::option::of(prop_oneof![any::<String>(), "[0-9]{0,6}"]),
        ca in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            any::<usize>().prop_map(|cut| ca_pem().as_bytes()[..cut % (ca_pem().len() + 1)].to_vec()),
            Just(ca_pem().as_bytes().to_vec()),
        ],
    ) {
        let dir = podinfo_dir().join("in-cluster");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("token"), "a-token").expect("write");
        std::fs::write(dir.join("ca.crt"), &ca).expect("write");
        // A token is there: the account is either usable or refused with the reason.
        match block_on(selfdestruct::connect::in_cluster(&host, port.as_deref(), &dir)) {
            Ok(access) => prop_assert!(!access.named),
            Err(e) if !e.is_missing() => prop_assert!(!e.to_string().is_empty()),
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }
}

/// An error answer's body: anything, or a `Status` of any shape.
fn error_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..400),
        (any::<String>(), any::<String>(), prop::option::of(any::<i64>()), json_value()).prop_map(
            |(reason, message, retry, extra)| {
                let mut v = json!({
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": reason, "message": message, "code": 429,
                    "details": {"retryAfterSeconds": retry, "causes": extra}
                });
                if retry.is_none() {
                    v["details"] = Value::Null;
                }
                serde_json::to_vec(&v).unwrap_or_default()
            }
        ),
        json_value().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        prop_oneof![
            Just("the UID in the precondition (a) does not match the UID in record (b)"),
            Just("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."),
            Just("ValidatingAdmissionPolicy 'own-pod-only' denied request"),
        ]
        .prop_map(|m| serde_json::to_vec(&json!({"kind": "Status", "message": m})).unwrap_or_default()),
    ]
}

proptest! {
    #![proptest_config(proptest_config(1000))]

    #[test]
    fn retry_after_headers_of_any_content(
        bytes in prop::collection::vec(any::<u8>(), 0..40),
        secs in any::<u64>(),
        pad in "[ \t]{0,2}",
    ) {
        let _ = selfdestruct::api::retry_after(&bytes);
        prop_assert_eq!(
            selfdestruct::api::retry_after(format!("{pad}{secs}{pad}").as_bytes()),
            Some(Duration::from_secs(secs))
        );
        // The HTTP-date form is not used by kube-apiserver: ignored, not misread.
        prop_assert_eq!(selfdestruct::api::retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn error_answers_of_any_content_classify(
        code in 400u16..600,
        body in error_body(),
        header in prop::option::of(prop_oneof![
            prop::collection::vec(any::<u8>(), 0..20),
            (0u64..100_000).prop_map(|s| s.to_string().into_bytes()),
        ]),
    ) {
        use selfdestruct::api::{ApiError, outcome_of, retry_after, status_error};
        use selfdestruct_decision::Outcome;
        let status = http::StatusCode::from_u16(code).expect("a status code");
        let header_secs = header.as_deref().and_then(retry_after);
        let e = status_error(status, &body, header_secs);
        let text = e.to_string();
        let ApiError::Status { code: c, message, retry_after: ra, .. } = &e else {
            return Err(TestCaseError::fail(format!("not a Status error: {e:?}")));
        };
        prop_assert_eq!(*c, code);
        // The header wins over the body's details.
        if header_secs.is_some() {
            prop_assert_eq!(*ra, header_secs);
        }
        // Quoted: at most 1 KiB and a note of the length, no control character
        // (the body's raw bytes never reach a log line).
        prop_assert!(message.len() <= selfdestruct::logging::QUOTE_LIMIT + 40, "{message:?}");
        prop_assert!(!text.chars().any(char::is_control), "{text:?}");
        let outcome = outcome_of(&Err(e.clone()));
        match code {
            404 => prop_assert_eq!(outcome, Outcome::Gone),
            409 => prop_assert_eq!(
                outcome == Outcome::Gone,
                selfdestruct::api::is_uid_precondition_failure(message)
            ),
            429 => prop_assert_eq!(outcome, Outcome::Busy { retry_after: *ra }),
            403 | 422 => prop_assert_eq!(outcome, Outcome::Denied),
            _ => prop_assert_eq!(outcome, Outcome::Failed),
        }
        if selfdestruct::pdb::is_multiple_pdbs(e.code(), &text) {
            prop_assert_eq!(code, 500);
        }
        let conflict = selfdestruct::node_gate::is_conflict(&e);
        if code == 409 {
            prop_assert!(conflict);
        } else if code != 422 {
            prop_assert!(!conflict);
        }
        // The same Status through kube's client error.
        if let Ok(s) = serde_json::from_slice::<kube::core::Status>(&body) {
            let details = s.details.as_ref().map(|d| d.retry_after_seconds).filter(|s| *s > 0);
            let k = selfdestruct::api::from_kube(kube::Error::Api(Box::new(s)));
            prop_assert_eq!(
                match k {
                    ApiError::Status { retry_after, .. } => retry_after,
                    _ => Some(Duration::MAX),
                },
                details.map(|d| Duration::from_secs(u64::from(d)))
            );
        }
    }
}

fn valid_pdb() -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "placeholder", "namespace": "ns"},
        "spec": {"maxUnavailable": 1, "selector": {
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "component", "operator": "In", "values": ["placeholder"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]
        }}
    })
}

/// A label map as the API server allows it.
fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        "([a-z0-9]{1,6}\\.[a-z]{2,4}/)?[a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?",
        "([a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?)?",
        0..4,
    )
}

fn gate_config(key: &str) -> selfdestruct::node_gate::GateConfig {
    selfdestruct::node_gate::GateConfig {
        node_name: "n1".into(),
        gate: selfdestruct::node_gate::GateSettings {
            taint_key: key.into(),
            images: selfdestruct_decision::settings::ImageSettings {
                required_images: images::parse_list(
                    "nginx:1.25,quay.io/x/y@sha256:0123456789abcdef0123456789abcdef",
                )
                .expect("valid"),
            },
            timeout: Duration::from_secs(60),
            poll: Duration::from_secs(1),
        },
    }
}

fn gated_node() -> Value {
    let key = selfdestruct::node_gate::DEFAULT_TAINT;
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
    fn budgets_of_any_shape_select_only_what_they_name(
        pick in any::<usize>(),
        with in json_value(),
        any_budget in json_value(),
        pod_labels in labels(),
    ) {
        let mut v = valid_pdb();
        mutate(&mut v, pick, with);
        let pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget> = [v, any_budget]
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        let names: Vec<String> = pdbs.iter().filter_map(|p| p.metadata.name.clone()).collect();
        for n in selfdestruct::pdb::selecting(&pdbs, &pod_labels) {
            prop_assert!(names.contains(&n), "{n} is not a budget's name");
        }
        // A budget whose matchLabels are the pod's labels selects it.
        let own: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "own"}, "spec": {"selector": {"matchLabels": pod_labels}}
        })).expect("a budget");
        prop_assert_eq!(selfdestruct::pdb::selecting(&[own], &pod_labels), vec!["own".to_string()]);
    }

    #[test]
    fn the_gates_view_of_any_node_removes_exactly_its_taints(
        pick in any::<usize>(),
        with in json_value(),
        anything in json_value(),
        key in prop_oneof![Just(selfdestruct::node_gate::DEFAULT_TAINT.to_string()), Just("a".to_string()), any::<String>()],
    ) {
        use selfdestruct::node_gate::{gate_taints_left, removal_patch, view};
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
            match removal_patch(&v) {
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
