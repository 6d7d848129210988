//! `selfdestruct node-gate`: the main container of an image-puller DaemonSet. Once
//! its init containers have pulled the user images, it removes a startup taint
//! from its own node, so user pods land there only when their images are warm.
//! Fail-open after a timeout; then it pauses like the pause container.

use std::time::{Duration, Instant};

use http::Method;
use kube::Client;
use serde_json::{Value, json};
use tracing::{error, info, warn};

use crate::api::{ApiError, request};
use crate::backoff::{Backoff, draw};
use crate::images::ImageRef;
use crate::signals::Signals;

/// The default gate taint: the cluster autoscaler treats the
/// `startup-taint.cluster-autoscaler.kubernetes.io/` prefix as a startup taint and
/// still scales up for pods that don't tolerate it.
pub const DEFAULT_TAINT: &str = "startup-taint.cluster-autoscaler.kubernetes.io/images-pending";

/// The gate's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct GateConfig {
    /// Own node.
    pub node_name: String,
    /// Taint key to remove.
    pub taint_key: String,
    /// Images the node must report first (empty: don't wait).
    pub required_images: Vec<ImageRef>,
    /// Remove the taint anyway after this long.
    pub timeout: Duration,
    /// How often to re-read the node while waiting for images.
    pub poll: Duration,
}

/// What the gate sees on its node.
#[derive(Debug, PartialEq)]
pub struct NodeView {
    /// `spec.taints` as sent (null when absent).
    pub taints: Value,
    /// Index of the gate taint in `spec.taints`.
    pub gate_index: Option<usize>,
    /// Required images the node does not report yet.
    pub missing: Vec<String>,
}

/// Reads the relevant parts of a Node's JSON.
pub fn view(node: &Value, cfg: &GateConfig) -> NodeView {
    let taints = node.pointer("/spec/taints").cloned().unwrap_or(Value::Null);
    let gate_index = taints.as_array().and_then(|ts| {
        ts.iter()
            .position(|t| t.get("key").and_then(Value::as_str) == Some(cfg.taint_key.as_str()))
    });
    let names: Vec<&str> = node
        .pointer("/status/images")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("names").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let missing = cfg
        .required_images
        .iter()
        .filter(|want| !names.iter().any(|n| want.matches(n)))
        .map(ToString::to_string)
        .collect();
    NodeView {
        taints,
        gate_index,
        missing,
    }
}

/// The JSON patch that removes only the gate taint, guarded by a `test` of the
/// whole taint list as read: if anything changed the taints meanwhile (the
/// autoscaler adds and removes its own), the server refuses the patch and the
/// gate reads the node again. `None` when the node has no gate taint.
pub fn removal_patch(v: &NodeView) -> Option<Value> {
    let i = v.gate_index?;
    Some(json!([
        { "op": "test", "path": "/spec/taints", "value": v.taints },
        { "op": "remove", "path": format!("/spec/taints/{i}") },
    ]))
}

async fn get_node(client: &Client, name: &str) -> Result<Value, ApiError> {
    let body = request(client, Method::GET, &format!("/api/v1/nodes/{name}"), None).await?;
    serde_json::from_slice(&body).map_err(|e| ApiError::Decode(e.to_string()))
}

/// Runs the gate: wait for the images (or the timeout), remove the taint, then pause.
pub async fn run(cfg: GateConfig, client: Client, mut signals: Signals) -> i32 {
    tokio::select! {
        sig = signals.terminated() => {
            info!(signal = sig, "received {sig} before the gate opened, exiting");
            return 0;
        }
        () = open_gate(&cfg, &client) => {}
    }
    let sig = signals.terminated().await;
    info!(signal = sig, "received {sig}, exiting");
    0
}

async fn open_gate(cfg: &GateConfig, client: &Client) {
    let started = Instant::now();
    let mut failures = 0u32;
    let mut told_waiting = false;
    loop {
        let fail_open = started.elapsed() >= cfg.timeout;
        let wait = match get_node(client, &cfg.node_name).await {
            Ok(node) => {
                let v = view(&node, cfg);
                if v.gate_index.is_none() {
                    info!(node = %cfg.node_name, taint = %cfg.taint_key, "node has no gate taint: nothing to remove");
                    return;
                }
                if !v.missing.is_empty() && !fail_open {
                    if !told_waiting {
                        info!(node = %cfg.node_name, missing = %v.missing.join(","), "waiting for images before opening the gate");
                        told_waiting = true;
                    }
                    cfg.poll
                } else {
                    if fail_open && !v.missing.is_empty() {
                        warn!(
                            node = %cfg.node_name, missing = %v.missing.join(","),
                            timeout = %crate::duration::format(cfg.timeout),
                            "images still missing after SELFDESTRUCT_GATE_TIMEOUT: opening the gate anyway (fail-open)"
                        );
                    }
                    let Some(patch) = removal_patch(&v) else {
                        return;
                    };
                    let body = (
                        "application/json-patch+json",
                        patch.to_string().into_bytes(),
                    );
                    let path = format!("/api/v1/nodes/{}", cfg.node_name);
                    match request(client, Method::PATCH, &path, Some(body)).await {
                        Ok(_) => {
                            info!(
                                node = %cfg.node_name, taint = %cfg.taint_key,
                                waited = %crate::duration::format(Duration::from_secs(started.elapsed().as_secs())),
                                "gate opened: taint removed"
                            );
                            return;
                        }
                        // The taints changed between read and patch: read again.
                        Err(ApiError::Status {
                            code: 409 | 422, ..
                        }) => {
                            info!(node = %cfg.node_name, "taints changed meanwhile; reading the node again");
                            Backoff::TRANSIENT.delay(0, draw())
                        }
                        Err(e) => gate_error(&e, cfg, &mut failures),
                    }
                }
            }
            Err(e) => gate_error(&e, cfg, &mut failures),
        };
        tokio::time::sleep(wait).await;
    }
}

fn gate_error(e: &ApiError, cfg: &GateConfig, failures: &mut u32) -> Duration {
    let backoff = match e.code() {
        Some(401 | 403 | 422) => {
            error!(
                error = %e, node = %cfg.node_name,
                "not allowed to read or patch the own node: bind the ClusterRole of manifests/node-gate to the gate's service account"
            );
            Backoff::DENIED
        }
        _ => {
            warn!(error = %e, node = %cfg.node_name, "node request failed; retrying");
            Backoff::TRANSIENT
        }
    };
    let d = backoff
        .delay(*failures, draw())
        .min(cfg.poll.max(Duration::from_secs(60)));
    *failures = failures.saturating_add(1);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(images: &str) -> GateConfig {
        GateConfig {
            node_name: "n1".into(),
            taint_key: DEFAULT_TAINT.into(),
            required_images: crate::images::parse_list(images).expect("valid"),
            timeout: Duration::from_secs(900),
            poll: Duration::from_secs(10),
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
        assert_eq!(v.gate_index, Some(1));
        assert!(v.missing.is_empty());
        let patch = removal_patch(&v).expect("has the taint");
        assert_eq!(patch[0]["op"], "test");
        assert_eq!(patch[0]["value"], node["spec"]["taints"]);
        assert_eq!(patch[1], json!({"op": "remove", "path": "/spec/taints/1"}));
    }

    #[test]
    fn no_taint_no_patch_and_missing_images_are_named() {
        let node = json!({"spec": {}, "status": {}});
        let v = view(&node, &cfg("quay.io/x/y:2"));
        assert_eq!(v.gate_index, None);
        assert_eq!(removal_patch(&v), None);
        assert_eq!(v.missing, vec!["quay.io/x/y:2".to_string()]);
    }
}
