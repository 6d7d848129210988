//! `selfdestruct node-gate`: the main container of an image-puller DaemonSet. Once
//! its init containers have pulled the user images, it removes a startup taint
//! from its own node, so user pods land there only when their images are warm, and
//! labels the node as holding them (in the same patch), so placeholders can keep
//! off warm room. Fail-open after a timeout (the taint goes, the label waits for
//! the images); then it pauses like the pause container.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::{Client, Resource};
use serde_json::{Value, json};
use tracing::{error, info, warn};

use crate::access::Discovered;
use crate::api::{ApiError, request, segment};
use crate::error::Result;
use crate::identity::IdentitySettings;
use crate::jitter::draw;
use crate::logging::Chain;
use crate::signals::{Signals, Stop, on_client_or_pause, pause};
use selfdestruct_decision::backoff::Backoff;
use selfdestruct_decision::selector::{Requirement, Selector};
use selfdestruct_decision::settings::{ImageSettings, Setting, SettingError, duration};
use tokio::time::Instant;

/// The default gate taint (the decision core's, which the simulator shares).
pub(crate) const DEFAULT_TAINT: &str = selfdestruct_decision::model::IMAGES_PENDING_TAINT;

/// The default label the gate sets on its node once the node holds the images.
pub(crate) const DEFAULT_WARM_LABEL: &str = "selfdestruct.io/images-warm";

/// Settings of `selfdestruct node-gate` (its own node comes from the shared
/// [`IdentitySettings`]).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub(crate) struct GateSettings {
    /// Taint to remove from the own node
    #[arg(long = "gate-taint", env = "SELFDESTRUCT_GATE_TAINT", value_name = "KEY",
          default_value = DEFAULT_TAINT, value_parser = Setting(taint_key))]
    pub(crate) taint_key: String,
    /// Open the gate anyway after this long (fail-open)
    #[arg(long = "gate-timeout", env = "SELFDESTRUCT_GATE_TIMEOUT", value_name = "DURATION",
          default_value = "15m", value_parser = Setting(duration))]
    pub(crate) timeout: Duration,
    /// How often to re-read the node while waiting for images (at least 1s)
    #[arg(long = "gate-poll", env = "SELFDESTRUCT_GATE_POLL", value_name = "DURATION",
          default_value = "10s", value_parser = Setting(poll_interval))]
    pub(crate) poll: Duration,
    /// Label set to "true" on the own node once it holds the images [none: no label]
    #[arg(long = "gate-warm-label", env = "SELFDESTRUCT_GATE_WARM_LABEL", value_name = "KEY",
          default_value = DEFAULT_WARM_LABEL, value_parser = Setting(warm_label))]
    pub(crate) warm_label: std::option::Option<String>,
    /// The images the node must report before the gate opens.
    #[command(flatten)]
    pub(crate) images: ImageSettings,
}

/// The gate's validated configuration: its settings and its own node.
#[derive(Debug, Clone, PartialEq)]
pub struct GateConfig {
    pub(crate) node_name: String,
    pub(crate) gate: GateSettings,
}

impl GateConfig {
    /// The gate's settings with its own node, which it requires (`NODE_NAME`).
    pub(crate) fn new(
        gate: &GateSettings,
        identity: &IdentitySettings,
    ) -> Result<Self, SettingError> {
        let node_name = identity.node_name.clone().ok_or_else(|| SettingError {
            setting: "NODE_NAME (--node-name)".into(),
            value: String::new(),
            expected: "the own node's name from the Downward API \
                       (valueFrom: fieldRef: fieldPath: spec.nodeName)"
                .into(),
        })?;
        Ok(GateConfig {
            node_name,
            gate: gate.clone(),
        })
    }
}

fn poll_interval(value: &str) -> Result<Duration, String> {
    duration(value).map(|d| d.max(Duration::from_secs(1)))
}

fn taint_key(value: &str) -> Result<String, String> {
    let key = Selector::parse(value).is_ok_and(|s| matches!(s.0[..], [Requirement::Exists(_)]));
    key.then(|| value.to_string()).ok_or_else(|| {
        "a taint key such as startup-taint.cluster-autoscaler.kubernetes.io/images-pending".into()
    })
}

/// A label key (the same form as a taint key), e.g. `selfdestruct.io/images-warm`; `none`
/// (any case) or empty: no label. (An empty variable counts as unset, so the
/// manifests say `none`.)
fn warm_label(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() || value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    taint_key(value)
        .map(Some)
        .map_err(|_| "a label key such as selfdestruct.io/images-warm, or none".to_string())
}

/// What the gate sees on its node.
#[derive(Debug, PartialEq)]
pub(crate) struct NodeView {
    /// `spec.taints` as sent (null when absent).
    pub(crate) taints: Value,
    /// Indices in `spec.taints` of every taint with the gate key (any effect,
    /// any value), in order.
    pub(crate) gate_indices: Vec<usize>,
    /// Required images the node does not report yet.
    pub(crate) missing: Vec<String>,
    /// `metadata.labels` as sent (null when absent).
    pub(crate) labels: Value,
}

/// Reads the relevant parts of a Node's JSON.
pub(crate) fn view(node: &Value, cfg: &GateConfig) -> NodeView {
    let taints = node["spec"]["taints"].clone();
    let gate_indices = gate_taints(&taints, &cfg.gate.taint_key);
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
        .gate
        .images
        .required_images
        .iter()
        .filter(|want| !names.iter().any(|n| want.matches(n)))
        .map(ToString::to_string)
        .collect();
    let labels = node["metadata"]["labels"].clone();
    NodeView {
        taints,
        gate_indices,
        missing,
        labels,
    }
}

/// Indices of the taints (a `spec.taints` value) whose key is `key`.
fn gate_taints(taints: &Value, key: &str) -> Vec<usize> {
    taints
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, t)| t.get("key").and_then(Value::as_str) == Some(key))
        .map(|(i, _)| i)
        .collect()
}

/// How many taints with the gate key a Node (as the API server returned it,
/// e.g. in answer to the PATCH) still carries: the gate is open only at 0.
pub(crate) fn gate_taints_left(node: &Value, key: &str) -> usize {
    gate_taints(&node["spec"]["taints"], key).len()
}

/// The JSON patch that removes every taint with the gate key (NoSchedule and
/// NoExecute may both be there) and nothing else, guarded by a `test` of the whole
/// taint list as read: if the taints changed meanwhile (the autoscaler adds its own),
/// the server refuses it and the gate reads again. Removals go from the last index
/// to the first, so each index still names its taint. With `label` (the node holds
/// the images and lacks it), the same patch adds that label with value "true"; a node
/// read without labels gets its label map guarded by a `test` that it is still
/// absent, so the `add` never replaces labels set meanwhile. `None`: nothing to do.
pub(crate) fn gate_patch(v: &NodeView, label: Option<&str>) -> Option<Value> {
    let label = label.filter(|k| v.labels.get(k).is_none());
    if v.gate_indices.is_empty() && label.is_none() {
        return None;
    }
    let mut ops = Vec::new();
    if !v.gate_indices.is_empty() {
        ops.push(json!({ "op": "test", "path": "/spec/taints", "value": v.taints }));
        ops.extend(
            v.gate_indices
                .iter()
                .rev()
                .map(|i| json!({ "op": "remove", "path": format!("/spec/taints/{i}") })),
        );
    }
    if let Some(key) = label {
        if v.labels.is_object() {
            // RFC 6901: "~" is "~0", "/" is "~1".
            let escaped = key.replace('~', "~0").replace('/', "~1");
            ops.push(json!({ "op": "add", "path": format!("/metadata/labels/{escaped}"), "value": "true" }));
        } else {
            ops.push(json!({ "op": "test", "path": "/metadata/labels", "value": null }));
            ops.push(json!({ "op": "add", "path": "/metadata/labels", "value": { key: "true" } }));
        }
    }
    Some(Value::Array(ops))
}

/// The own Node's URL, from kube's path for Nodes and the escaped name.
pub(crate) fn node_url(name: &str) -> String {
    format!("{}/{}", Node::url_path(&(), None), segment(name))
}

/// Reads the own Node as JSON: the guarded patch tests the taint list exactly
/// as the server sent it.
async fn get_node(client: &Client, name: &str) -> Result<Value, ApiError> {
    let req = http::Request::get(node_url(name))
        .body(Vec::new())
        .map_err(ApiError::transport)?;
    let body = request(client, req).await?;
    serde_json::from_slice(&body).map_err(ApiError::decode)
}

/// Sends a JSON patch to the own Node; returns the answer (the patched Node).
async fn patch_node(client: &Client, name: &str, patch: &Value) -> Result<Vec<u8>, ApiError> {
    let req = http::Request::patch(node_url(name))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(patch.to_string().into_bytes())
        .map_err(ApiError::transport)?;
    request(client, req).await
}

/// Runs `node-gate` mode on the API `access` `main` discovered: without API
/// access, a plain pause.
pub(crate) async fn run(gate: GateConfig, access: Discovered, signals: Signals) -> Result {
    let cannot = "the node gate cannot remove its taint";
    let run = |client, stop| run_on(gate, client, stop);
    on_client_or_pause(access, |_| "default".into(), signals, cannot, run).await
}

/// [`run`] on `client` until `signals` fires: wait for the images (or the timeout),
/// remove the taint, then pause.
pub async fn run_on(cfg: GateConfig, client: Client, mut signals: Stop) -> Result {
    info!(
        node = %cfg.node_name, taint = %cfg.gate.taint_key,
        required_images = %cfg.gate.images.required_images.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        timeout = %selfdestruct_decision::duration::format(cfg.gate.timeout),
        poll = %selfdestruct_decision::duration::format(cfg.gate.poll),
        "node gate started"
    );
    tokio::select! {
        sig = signals.terminated() => {
            info!(signal = sig, "received {sig} before the gate opened, exiting");
            return Ok(());
        }
        () = open_gate(&cfg, &client) => {}
    }
    pause(signals.terminated()).await
}

/// Where one look at the node leaves the gate.
enum Step {
    /// The node carries no gate taint (any more).
    Opened,
    /// Look again after this long.
    Wait(Duration),
    /// The taints changed between the read and the patch: read again soon.
    Conflict,
}

/// Whether a failed PATCH means "the taints changed since the read" (the `test`
/// operation failed, or a write conflict): read again and retry. A 422 from an
/// admission policy also says Invalid, but names the policy in its message.
pub(crate) fn is_conflict(e: &ApiError) -> bool {
    match e {
        ApiError::Status { code: 409, .. } => true,
        ApiError::Status {
            code: 422, message, ..
        } => !is_admission_denial(message),
        _ => false,
    }
}

fn is_admission_denial(message: &str) -> bool {
    message.contains("ValidatingAdmissionPolicy")
        || message.contains("admission webhook")
        || message.contains("denied request")
        || message.contains("denied the request")
}

/// What the gate has seen and said so far.
struct Progress {
    started: Instant,
    failures: u32,
    conflicts: u32,
    told_waiting: bool,
    told_fail_open: bool,
    told_label_waits: bool,
    /// The taint went at the fail-open; only the label is left.
    opened: bool,
    /// A PATCH was accepted but its answer did not show the node free of the
    /// taint: the next read decides.
    unverified: bool,
}

/// Steps until the own node carries no gate taint, waiting as each step says.
async fn open_gate(cfg: &GateConfig, client: &Client) {
    let mut p = Progress {
        started: Instant::now(),
        failures: 0,
        conflicts: 0,
        told_waiting: false,
        told_fail_open: false,
        told_label_waits: false,
        opened: false,
        unverified: false,
    };
    loop {
        let wait = match step(cfg, client, &mut p).await {
            Step::Opened => return,
            Step::Wait(d) => d,
            Step::Conflict => {
                p.conflicts = p.conflicts.saturating_add(1);
                // At once the first time, then 0.5-1 s doubling up to 30 s, so a taint
                // that flaps does not make a hot loop.
                let backoff = Backoff {
                    base: Duration::from_secs(1),
                    cap: Duration::from_secs(30),
                };
                match p.conflicts {
                    1 => Duration::ZERO,
                    n => backoff.delay(n - 2, draw()),
                }
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One look at the node: read it, wait for the images (until the fail-open
/// deadline), then remove the gate taint and add the warm label with one guarded
/// patch. Done once the node carries no gate taint and (if one is set) the label;
/// after a fail-open the label waits for the images.
async fn step(cfg: &GateConfig, client: &Client, p: &mut Progress) -> Step {
    let (node, taint) = (&cfg.node_name, &cfg.gate.taint_key);
    let deadline = p.started + cfg.gate.timeout;
    let fail_open = Instant::now() >= deadline;
    let v = match get_node(client, node).await {
        Ok(n) => view(&n, cfg),
        Err(e) => return Step::Wait(gate_error(&e, Call::Get, cfg, &mut p.failures)),
    };
    // The warm label, while the node lacks it (with any value: one set by someone
    // else is left as it is).
    let label = cfg.gate.warm_label.as_deref();
    let label = label.filter(|k| v.labels.get(k).is_none());
    if v.gate_indices.is_empty() && label.is_none() {
        if p.unverified {
            info!(%node, %taint, "gate opened: taint removed (checked by reading the node)");
        } else if !p.opened {
            info!(%node, %taint, "node has no gate taint: nothing to remove");
        }
        return Step::Opened;
    }
    let ready = v.missing.is_empty();
    let missing = v.missing.join(",");
    let timeout = selfdestruct_decision::duration::format(cfg.gate.timeout);
    if !ready && !fail_open {
        if !p.told_waiting {
            info!(%node, %missing, %timeout, "waiting for images before opening the gate");
            p.told_waiting = true;
        }
        p.failures = 0;
        // Wake up for the fail-open deadline rather than up to one poll after it.
        let left = deadline.saturating_duration_since(Instant::now());
        return Step::Wait(cfg.gate.poll.min(left).max(Duration::from_millis(10)));
    }
    if ready && p.told_waiting && !p.told_fail_open {
        info!(%node, "required images are on the node");
    } else if !ready && v.gate_indices.is_empty() {
        // Fail-open left only the label, which says the images are there: wait for them.
        if !p.told_label_waits {
            info!(%node, %missing, label = label.unwrap_or_default(), "images still missing: the node is labelled once they are listed");
            p.told_label_waits = true;
        }
        p.failures = 0;
        return Step::Wait(cfg.gate.poll);
    } else if !ready && !p.told_fail_open {
        warn!(
            %node, %missing, %timeout,
            "images still missing after SELFDESTRUCT_GATE_TIMEOUT: opening the gate anyway (fail-open)"
        );
        p.told_fail_open = true;
    }
    let label = label.filter(|_| ready);
    let Some(patch) = gate_patch(&v, label) else {
        return Step::Opened;
    };
    let attempt = p.conflicts + 1;
    let answer = match patch_node(client, node, &patch).await {
        Ok(answer) => answer,
        Err(e) if is_conflict(&e) => {
            info!(%node, error = %Chain(&e), attempt, "taints or labels changed meanwhile; reading the node again");
            return Step::Conflict;
        }
        Err(e) => return Step::Wait(gate_error(&e, Call::Patch, cfg, &mut p.failures)),
    };
    // Done only once the answer shows no taint with the key, and the label.
    let answer = serde_json::from_slice::<Value>(&answer)
        .ok()
        .filter(|n| n["metadata"]["name"] == *node);
    let left = answer.as_ref().map(|n| gate_taints_left(n, taint));
    let labelled = answer
        .as_ref()
        .is_some_and(|n| label.is_none_or(|k| n["metadata"]["labels"].get(k).is_some()));
    if left == Some(0) && labelled {
        let label = label.unwrap_or_default();
        if v.gate_indices.is_empty() {
            info!(%node, %label, "node labelled: it holds the images");
        } else {
            let waited = Duration::from_secs(p.started.elapsed().as_secs());
            info!(
                %node, %taint, removed = v.gate_indices.len(), %label,
                waited = %selfdestruct_decision::duration::format(waited),
                fail_open = !ready,
                "gate opened: taint removed"
            );
        }
        if ready || cfg.gate.warm_label.is_none() {
            return Step::Opened;
        }
        // Opened by the fail-open: the label waits for the images.
        p.opened = true;
        return Step::Wait(cfg.gate.poll);
    }
    let left = left.map_or_else(
        || "unknown (the answer is not the node)".into(),
        |n| n.to_string(),
    );
    warn!(
        %node, %taint, %left, labelled, attempt,
        "the patch was accepted but the node's answer does not show the gate taint gone and the label set; reading the node again"
    );
    p.unverified = true;
    Step::Conflict
}

/// What to do when the taint removal is refused (an admission policy's 403 or a 422).
const REFUSED_REMEDY: &str = "the gate may only remove SELFDESTRUCT_GATE_TAINT from its own node \
    (check that NODE_NAME is spec.nodeName and that the taint key matches \
    manifests/node-gate/admission-policy.yaml); retrying";

/// The request that failed, for the log line and the retry delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Get,
    Patch,
}

/// Logs a failed request and returns the wait before the next try. Denials (403, an
/// admission policy's 422) are retried too (RBAC may be fixed at any time): every poll
/// at first, doubling up to 5 minutes. Other errors, a 401 among them: 0.5-1 s
/// doubling, at most the poll interval (at least one minute).
fn gate_error(e: &ApiError, call: Call, cfg: &GateConfig, failures: &mut u32) -> Duration {
    let node = &cfg.node_name;
    let denied = match e {
        ApiError::Status { code: 401, .. } => {
            warn!(error = %Chain(e), node = %node, "the API server does not accept the gate's credentials (401: expired?); retrying with fresh ones");
            false
        }
        ApiError::Status {
            code: 403, message, ..
        } if is_admission_denial(message) => {
            error!(
                error = %Chain(e), node = %node, taint = %cfg.gate.taint_key,
                "an admission policy refused the taint removal: {REFUSED_REMEDY}"
            );
            true
        }
        ApiError::Status { code: 403, .. } => {
            let verb = if call == Call::Get { "get" } else { "patch" };
            error!(
                error = %Chain(e), node = %node,
                "not allowed to {verb} the own node: bind the ClusterRole of manifests/node-gate (nodes get, patch) to the gate's service account; retrying"
            );
            true
        }
        ApiError::Status { code: 422, .. } => {
            error!(
                error = %Chain(e), node = %node, taint = %cfg.gate.taint_key,
                "the taint removal was refused: {REFUSED_REMEDY}"
            );
            true
        }
        ApiError::Status { code: 404, .. } if call == Call::Get => {
            error!(error = %Chain(e), node = %node, "the own node does not exist: NODE_NAME must be the pod's spec.nodeName (Downward API); retrying");
            false
        }
        _ => {
            warn!(error = %Chain(e), node = %node, "node request failed; retrying");
            false
        }
    };
    let d = if denied {
        Backoff {
            base: cfg.gate.poll,
            cap: cfg.gate.poll.max(Duration::from_secs(300)),
        }
        .delay(*failures, draw())
    } else {
        let d = Backoff::TRANSIENT.delay(*failures, draw());
        match e {
            ApiError::Status {
                retry_after: Some(r),
                ..
            } => d.max(*r),
            _ => d,
        }
        .min(cfg.gate.poll.max(Duration::from_secs(60)))
    };
    *failures = failures.saturating_add(1);
    d
}

#[cfg(test)]
mod tests;
