//! `selfdestruct-node-gate`: the main container of an image-puller DaemonSet. Once
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
use crate::config::SharedSettings;
use crate::error::Result;
use crate::identity::IdentitySettings;
use crate::jitter::draw;
use crate::logging::Chain;
use crate::signals::{Signals, Stop, on_client_or_pause, pause};
use selfdestruct_decision::backoff::Backoff;
use selfdestruct_decision::duration::format as fmt_duration;
use selfdestruct_decision::selector::{Requirement, Selector};
use selfdestruct_decision::settings::{ImageSettings, Setting, SettingError, duration};
use tokio::time::Instant;

/// The default gate taint (the decision core's, which the simulator shares).
pub(crate) const DEFAULT_TAINT: &str = selfdestruct_decision::model::IMAGES_PENDING_TAINT;

/// The default label the gate sets on its node once the node holds the images.
pub(crate) const DEFAULT_WARM_LABEL: &str = "selfdestruct.io/images-warm";

/// `selfdestruct-node-gate`'s command line: the settings every binary of the image
/// reads (logging, the own pod's identity, API access) and the gate's own.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "selfdestruct-node-gate",
    version,
    about = "Image-puller gate: remove a startup taint from the own node once its images are \
             pulled, and label it warm.",
    long_about = None,
    after_help = "Durations: 90s, 15m, 1h30m. Without API access it behaves like the pause \
                  container. Exit codes: 0 on SIGTERM/SIGINT, 2 on invalid configuration."
)]
pub struct Cli {
    /// The settings of every binary.
    #[command(
        flatten,
        next_help_heading = "Every binary (logging, identity, API access)"
    )]
    pub(crate) shared: SharedSettings,
    /// The gate's settings.
    #[command(flatten, next_help_heading = "The node gate")]
    pub(crate) gate: GateSettings,
}

impl Cli {
    /// The gate's validated configuration.
    pub fn config(&self) -> Result<GateConfig, SettingError> {
        GateConfig::new(&self.gate, &self.shared.identity)
    }
}

/// Runs the gate to its end (`Ok` on SIGTERM/SIGINT) on [`crate::host`].
pub fn main(cli: &Cli) -> Result {
    let cfg = cli.config()?;
    crate::host(&cli.shared, |access, signals| run(cfg, access, signals))
}

/// Settings of `selfdestruct-node-gate` (its own node comes from the shared
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

/// Runs the gate on the API `access` [`crate::host`] discovered: without API access, a
/// plain pause.
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
        timeout = %fmt_duration(cfg.gate.timeout),
        poll = %fmt_duration(cfg.gate.poll),
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

/// Steps until the own node carries no gate taint, waiting as each step says.
async fn open_gate(cfg: &GateConfig, client: &Client) {
    let started = Instant::now();
    let (mut p, mut failures, mut conflicts) = (Progress::default(), 0u32, 0u32);
    loop {
        let wait = match step(cfg, client, started, &mut p, &mut failures, conflicts + 1).await {
            Next::Done => return,
            Next::Wait(d) => d,
            Next::Patch { .. } => unreachable!("step sends the patch"),
            Next::Reread => {
                conflicts = conflicts.saturating_add(1);
                // At once the first time, then 0.5-1 s doubling up to 30 s, so a taint
                // that flaps does not make a hot loop.
                let backoff = Backoff {
                    base: Duration::from_secs(1),
                    cap: Duration::from_secs(30),
                };
                match conflicts {
                    1 => Duration::ZERO,
                    n => backoff.delay(n - 2, draw()),
                }
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One look at the node, the I/O around [`look`] and [`answered`]: read it, decide,
/// send the patch if so (`attempt` counts the reads after a conflict, for the log).
async fn step(
    cfg: &GateConfig,
    client: &Client,
    started: Instant,
    p: &mut Progress,
    failures: &mut u32,
    attempt: u32,
) -> Next {
    let node = &cfg.node_name;
    let v = match get_node(client, node).await {
        Ok(n) => view(&n, cfg),
        Err(e) => return Next::Wait(gate_error(&e, Call::Get, cfg, failures)),
    };
    let left = (started + cfg.gate.timeout).saturating_duration_since(Instant::now());
    let (next, note) = look(&v, &cfg.gate, left, p);
    say(note, &v, cfg, started, attempt);
    let Next::Patch {
        patch,
        label,
        ready,
    } = next
    else {
        if let Next::Wait(_) = next {
            *failures = 0;
        }
        return next;
    };
    let answer = match patch_node(client, node, &patch).await {
        Ok(answer) => answer,
        Err(e) if is_conflict(&e) => {
            info!(%node, error = %Chain(&e), attempt, "taints or labels changed meanwhile; reading the node again");
            return Next::Reread;
        }
        Err(e) => return Next::Wait(gate_error(&e, Call::Patch, cfg, failures)),
    };
    let (next, note) = answered(&answer, node, &v, label.as_deref(), ready, &cfg.gate, p);
    say(note, &v, cfg, started, attempt);
    next
}

/// Logs what the gate notes, with what it read of its node (`v`).
fn say(note: Option<Note>, v: &NodeView, cfg: &GateConfig, started: Instant, attempt: u32) {
    let (node, taint) = (&cfg.node_name, &cfg.gate.taint_key);
    let (missing, timeout) = (v.missing.join(","), fmt_duration(cfg.gate.timeout));
    let warm = cfg.gate.warm_label.as_deref().unwrap_or_default();
    match note {
        None => {}
        Some(Note::NothingToRemove) => {
            info!(%node, %taint, "node has no gate taint: nothing to remove")
        }
        Some(Note::OpenedChecked) => {
            info!(%node, %taint, "gate opened: taint removed (checked by reading the node)")
        }
        Some(Note::Waiting) => {
            info!(%node, %missing, %timeout, "waiting for images before opening the gate")
        }
        Some(Note::ImagesThere) => info!(%node, "required images are on the node"),
        Some(Note::LabelWaits) => info!(
            %node, %missing, label = warm,
            "images still missing: the node is labelled once they are listed"
        ),
        Some(Note::FailOpen) => warn!(
            %node, %missing, %timeout,
            "images still missing after SELFDESTRUCT_GATE_TIMEOUT: opening the gate anyway (fail-open)"
        ),
        Some(Note::Labelled { label }) => {
            info!(%node, %label, "node labelled: it holds the images")
        }
        Some(Note::Opened { label, fail_open }) => info!(
            %node, %taint, removed = v.gate_indices.len(), %label, fail_open,
            waited = %fmt_duration(Duration::from_secs(started.elapsed().as_secs())),
            "gate opened: taint removed"
        ),
        Some(Note::Unverified { left, labelled }) => {
            let left = left.map_or_else(
                || "unknown (the answer is not the node)".into(),
                |n| n.to_string(),
            );
            warn!(
                %node, %taint, %left, labelled, attempt,
                "the patch was accepted but the node's answer does not show the gate taint gone and the label set; reading the node again"
            )
        }
    }
}

// --- the pure step: what the gate does on one read of its node, tested without I/O ---

/// What the gate has seen and said so far: the memory of [`look`] and [`answered`].
#[derive(Debug, Default, PartialEq)]
struct Progress {
    told_waiting: bool,
    told_fail_open: bool,
    told_label_waits: bool,
    /// The taint went at the fail-open; only the label is left.
    opened: bool,
    /// A PATCH was accepted but its answer did not show the node free of the taint:
    /// the next read decides.
    unverified: bool,
}

/// What the gate does next.
#[derive(Debug, PartialEq)]
enum Next {
    /// Done: the node carries no gate taint, and the warm label if it holds the images.
    Done,
    /// Read the node again after this long.
    Wait(Duration),
    /// Read the node again soon: the taints changed meanwhile, or the answer to a patch
    /// did not show it applied.
    Reread,
    /// Send this guarded patch, which adds `label` (`ready`: the images are there).
    Patch {
        patch: Value,
        label: Option<String>,
        ready: bool,
    },
}

/// What the gate says about it (each once, where that matters).
#[derive(Debug, PartialEq)]
enum Note {
    NothingToRemove,
    OpenedChecked,
    Waiting,
    ImagesThere,
    LabelWaits,
    FailOpen,
    Labelled { label: String },
    Opened { label: String, fail_open: bool },
    Unverified { left: Option<usize>, labelled: bool },
}

/// `note`, unless `told` says it was said already.
fn once(told: &mut bool, note: Note) -> Option<Note> {
    (!std::mem::replace(told, true)).then_some(note)
}

/// One read of the node (`v`), `left` before the fail-open: wait for the images (until
/// the fail-open), then remove the gate taint and add the warm label with one guarded
/// patch. Done once the node carries no gate taint and (if one is set) the label; after
/// a fail-open the label waits for the images.
fn look(
    v: &NodeView,
    gate: &GateSettings,
    left: Duration,
    p: &mut Progress,
) -> (Next, Option<Note>) {
    // The warm label, while the node lacks it (with any value: one set by someone
    // else is left as it is).
    let label = gate
        .warm_label
        .as_deref()
        .filter(|k| v.labels.get(k).is_none());
    if v.gate_indices.is_empty() && label.is_none() {
        let note = match p.unverified {
            true => Some(Note::OpenedChecked),
            false => (!p.opened).then_some(Note::NothingToRemove),
        };
        return (Next::Done, note);
    }
    let ready = v.missing.is_empty();
    if !ready && !left.is_zero() {
        // Wake up for the fail-open deadline rather than up to one poll after it.
        let wait = gate.poll.min(left).max(Duration::from_millis(10));
        return (Next::Wait(wait), once(&mut p.told_waiting, Note::Waiting));
    }
    let note = if ready && p.told_waiting && !p.told_fail_open {
        Some(Note::ImagesThere)
    } else if !ready && v.gate_indices.is_empty() {
        // Fail-open left only the label, which says the images are there: wait for them.
        return (
            Next::Wait(gate.poll),
            once(&mut p.told_label_waits, Note::LabelWaits),
        );
    } else if !ready {
        once(&mut p.told_fail_open, Note::FailOpen)
    } else {
        None
    };
    let label = label.filter(|_| ready);
    match gate_patch(v, label) {
        Some(patch) => (
            Next::Patch {
                patch,
                label: label.map(String::from),
                ready,
            },
            note,
        ),
        None => (Next::Done, note),
    }
}

/// The API server's `answer` to the patch [`look`] made of `v` (adding `label`;
/// `ready`: the images are there): done only once the answer, the node `node`, shows
/// no taint with the gate key, and the label.
fn answered(
    answer: &[u8],
    node: &str,
    v: &NodeView,
    label: Option<&str>,
    ready: bool,
    gate: &GateSettings,
    p: &mut Progress,
) -> (Next, Option<Note>) {
    let answer = serde_json::from_slice::<Value>(answer).ok();
    let answer = answer.filter(|n| n["metadata"]["name"] == *node);
    let left = answer
        .as_ref()
        .map(|n| gate_taints_left(n, &gate.taint_key));
    let labelled = answer
        .as_ref()
        .is_some_and(|n| label.is_none_or(|k| n["metadata"]["labels"].get(k).is_some()));
    if left != Some(0) || !labelled {
        p.unverified = true;
        return (Next::Reread, Some(Note::Unverified { left, labelled }));
    }
    let label = label.unwrap_or_default().to_string();
    let note = match v.gate_indices.is_empty() {
        true => Note::Labelled { label },
        false => Note::Opened {
            label,
            fail_open: !ready,
        },
    };
    if ready || gate.warm_label.is_none() {
        return (Next::Done, Some(note));
    }
    // Opened by the fail-open: the label waits for the images.
    p.opened = true;
    (Next::Wait(gate.poll), Some(note))
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
