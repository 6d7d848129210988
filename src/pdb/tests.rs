//! Unit tests of `pdb` (a child module: they see its private items).

use super::*;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::BTreeMap;

/// The captured answer, as the agent's error text carries it.
fn captured() -> (u16, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-apiserver/fixtures/eviction-500-two-pdbs.json");
    let text = std::fs::read_to_string(path).expect("fixture");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let code = v["status"].as_u64().and_then(|c| u16::try_from(c).ok());
    let message = v["body"]["message"].as_str().expect("message");
    (code.expect("status"), format!("HTTP 500 : {message}"))
}

#[test]
fn the_real_answer_is_recognised_and_nothing_else() {
    let (code, text) = captured();
    assert!(is_multiple_pdbs(Some(code), &text));
    // Other 500s, the same words on another status, no answer at all.
    assert!(!is_multiple_pdbs(
        Some(500),
        "HTTP 500 InternalError: etcdserver: request timed out"
    ));
    assert!(!is_multiple_pdbs(Some(429), &text));
    assert!(!is_multiple_pdbs(None, &text));
}

#[test]
fn the_message_names_the_pod_its_labels_and_the_fix() {
    let labels: BTreeMap<String, String> = [
        ("component", "user-placeholder"),
        ("app", "jupyterhub"),
        ("release", "jhub"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let m = multiple_pdbs_message("jhub", "user-placeholder-0", &labels, None);
    for part in [
        "jhub/user-placeholder-0",
        "two or more PodDisruptionBudgets",
        "app=jupyterhub,component=user-placeholder,release=jhub",
        "kubectl -n jhub get poddisruptionbudgets",
        "post-render.sh",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
    // An Event message must stay well under the API's 1 KiB note limit.
    assert!(m.len() < 1024, "{}", m.len());
    let names = [
        "jhub-user-placeholder".to_string(),
        "selfdestruct".to_string(),
    ];
    let m = multiple_pdbs_message("jhub", "user-placeholder-0", &labels, Some(&names));
    assert!(
        m.contains("the PodDisruptionBudgets jhub-user-placeholder and selfdestruct select it"),
        "{m}"
    );
    assert!(m.len() < 1024, "{}", m.len());
}

#[test]
fn the_budgets_that_select_the_pod() {
    let pdb = |name: &str, selector: serde_json::Value| -> PodDisruptionBudget {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"maxUnavailable": 1, "selector": selector}
        }))
        .expect("a budget")
    };
    let mut none: PodDisruptionBudget = pdb("no-selector", serde_json::json!({}));
    if let Some(spec) = none.spec.as_mut() {
        spec.selector = None;
    }
    let pdbs = [
        pdb(
            "chart",
            serde_json::json!({"matchLabels": {"component": "user-placeholder", "release": "jhub"}}),
        ),
        pdb(
            "ours",
            serde_json::json!({"matchExpressions": [{"key": "component", "operator": "In", "values": ["user-placeholder"]}]}),
        ),
        pdb(
            "users",
            serde_json::json!({"matchLabels": {"component": "singleuser-server"}}),
        ),
        pdb("everything", serde_json::json!({})),
        none,
    ];
    let labels: BTreeMap<String, String> = [("component", "user-placeholder"), ("release", "jhub")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(selecting(&pdbs, &labels), ["chart", "ours", "everything"]);
}

/// Budgets of any shape (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use crate::testing::props::proptest_config;
    use crate::testing::{json_value, mutate};
    use std::collections::BTreeMap;

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
            for n in crate::pdb::selecting(&pdbs, &pod_labels) {
                prop_assert!(names.contains(&n), "{n} is not a budget's name");
            }
            // A budget whose matchLabels are the pod's labels selects it.
            let own: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(json!({
                "metadata": {"name": "own"}, "spec": {"selector": {"matchLabels": pod_labels}}
            })).expect("a budget");
            prop_assert_eq!(crate::pdb::selecting(&[own], &pod_labels), vec!["own".to_string()]);
        }
    }
}
