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
pub(crate) fn is_multiple_pdbs(code: Option<u16>, text: &str) -> bool {
    code == Some(500) && text.contains(MULTIPLE_PDBS)
}

/// The names of the budgets whose selector selects a pod with `labels`, as the
/// eviction subresource matches them (a budget without a selector selects
/// nothing; an empty selector selects every pod of the namespace).
pub(crate) fn selecting(
    pdbs: &[PodDisruptionBudget],
    labels: &BTreeMap<String, String>,
) -> Vec<String> {
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
mod tests;
