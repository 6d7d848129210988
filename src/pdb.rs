//! The API server's answer to an eviction of a pod that two or more
//! PodDisruptionBudgets select: HTTP 500 "This pod has more than one
//! PodDisruptionBudget, which the eviction subresource does not support."
//! (captured: `eviction-500-two-pdbs.json`). Retrying cannot help until someone
//! removes a budget, so the agent says what is wrong instead of backing off on
//! a 5xx in silence.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::{Selector, SelectorExt};

/// The part of the server's message that names the problem.
const MULTIPLE_PDBS: &str = "more than one PodDisruptionBudget";

/// The Event reason for it.
pub(crate) const EVENT_REASON: &str = "MultiplePodDisruptionBudgets";

/// Whether an eviction's error answer (HTTP status `code`, and the error's
/// text, which carries the server's message) says that two or more
/// PodDisruptionBudgets select the pod.
pub fn is_multiple_pdbs(code: Option<u16>, text: &str) -> bool {
    code == Some(500) && text.contains(MULTIPLE_PDBS)
}

/// The names of the budgets whose selector selects a pod with `labels`, as the
/// eviction subresource matches them (a budget without a selector selects
/// nothing; an empty selector selects every pod of the namespace).
pub fn selecting(pdbs: &[PodDisruptionBudget], labels: &BTreeMap<String, String>) -> Vec<String> {
    pdbs.iter()
        .filter(|pdb| {
            pdb.spec
                .as_ref()
                .and_then(|spec| spec.selector.clone())
                .and_then(|sel| Selector::try_from(sel).ok())
                .is_some_and(|sel| sel.matches(labels))
        })
        .filter_map(|pdb| pdb.metadata.name.clone())
        .collect()
}

/// What to tell the operator: the budgets that select the pod when the agent
/// could list them (`named`; listing them is an optional permission), else
/// which to look for, and how to fix it.
pub(crate) fn multiple_pdbs_message(
    namespace: &str,
    pod: &str,
    labels: &BTreeMap<String, String>,
    named: Option<&[String]>,
) -> String {
    let labels = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let which = match named {
        Some(names) if names.len() >= 2 => {
            format!("the PodDisruptionBudgets {} select it", names.join(" and "))
        }
        _ => "two or more PodDisruptionBudgets select it".to_string(),
    };
    format!(
        "cannot evict pod {namespace}/{pod}: {which} \
         (labels {labels}), and the Eviction API refuses such pods (HTTP 500), so this \
         placeholder can never move. Keep exactly one budget over the placeholders: check \
         `kubectl -n {namespace} get poddisruptionbudgets -o custom-columns=NAME:.metadata.name,SELECTOR:.spec.selector` \
         for those whose selector matches these labels and delete all but one. With \
         zero-to-jupyterhub, deploy with the current manifests/jupyterhub/post-render.sh, which \
         turns the chart's user-placeholder budget into maxUnavailable 1 instead of adding a second one."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let labels: BTreeMap<String, String> =
            [("component", "user-placeholder"), ("release", "jhub")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(selecting(&pdbs, &labels), ["chart", "ours", "everything"]);
    }
}
