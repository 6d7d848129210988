//! Fuzzing (with proptest) of every parser that reads input from outside the
//! process: durations, image references, label selectors, the Downward API
//! files and the JSON summaries of Nodes and Pods. None may panic on any input;
//! where a printed form exists, printing and parsing again gives the same value.
//! Case counts are small for CI (`PROPTEST_CASES` raises them locally).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::props::proptest_config;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use selfdestruct::config::IdentityHints;
use selfdestruct::identity;
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
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"}
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
        namespace in prop::collection::vec(any::<u8>(), 0..80),
        uid in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
        text_name in prop::option::of("[ \t\n]{0,2}[a-z0-9.-]{0,270}[ \t\n]{0,2}"),
        // what identity::hostname() can return: trimmed, never empty
        host in prop::option::of("[!-~]([ -~]{0,62}[!-~])?"),
    ) {
        let dir = podinfo_dir();
        std::fs::write(dir.join("name"), text_name.clone().map(String::into_bytes).unwrap_or(name)).expect("write");
        std::fs::write(dir.join("namespace"), namespace).expect("write");
        match &uid {
            Some(u) => std::fs::write(dir.join("uid"), u).expect("write"),
            None => { let _ = std::fs::remove_file(dir.join("uid")); }
        }
        let hints = IdentityHints {
            podinfo_dir: dir.clone(),
            service_account_dir: dir.join("no-serviceaccount"),
            ..IdentityHints::default()
        };
        if let Ok(id) = identity::resolve(&hints, host.clone(), Some("fallback-ns")) {
            for v in [&id.name, &id.namespace] {
                prop_assert!(!v.is_empty(), "{id:?}");
                if id.name_from == identity::Source::PodInfo {
                    prop_assert!(!id.name.contains(char::is_whitespace) && id.name.len() <= 253, "{id:?}");
                }
            }
            if let Some(u) = &id.uid {
                prop_assert!(!u.is_empty() && !u.contains(char::is_whitespace), "{id:?}");
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
    let _: BTreeMap<String, String> = BTreeMap::new();
}
