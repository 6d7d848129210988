//! The agent: the thin I/O shell around `selfdestruct_decision::evaluate`. One
//! loop, one `select!` over signals, the next wake-up and the changes of the
//! [`View`] (the watches); [`Decider`] decides over the view and acts.

mod decide;
mod view;

use std::time::SystemTime;

use tracing::{debug, error, warn};

use crate::access::{Access, Discovered};
use crate::api::{PodApi, rbac_hint};
use crate::client::ClientError;
use crate::clock::Clock;
use crate::config::Config;
use crate::connect::{Api, connect, no_access};
use crate::error::{Error, Result};
use crate::identity::{self, Source};
use crate::logging::Chain;
use crate::signals::{Signals, Stop, pause, stop};
use crate::summarize::PodObject;
use decide::Decider;
use selfdestruct_decision::Decision;
use selfdestruct_decision::backoff::Backoff;
use selfdestruct_decision::duration::format as fmt_duration;
use selfdestruct_decision::model::OwnPod;
use view::View;

/// Runs until SIGTERM/SIGINT (exit code 0) or a configuration error (2), on the
/// API `access` that `main` discovered.
pub(crate) async fn run(cfg: Config, access: Discovered, signals: Signals) -> Result {
    let mut signals = Stop::Signals(signals);
    let start = prepare(&cfg, access, &mut signals).await?;
    finish(start, cfg, signals).await
}

/// [`run`] in-process (the tests' virtual-time tier): on `client`, reading the time
/// from `clock`, until `stop` fires; only these three differ from [`run`].
pub async fn run_on(client: kube::Client, cfg: Config, clock: Clock, mut stop: Stop) -> Result {
    let process_start = clock.now();
    let id = resolve(&cfg, Some(client.default_namespace()))?;
    let start = on_client(&mut stop, id, (clock, process_start), client).await?;
    finish(start, cfg, stop).await
}

async fn finish(start: Start, cfg: Config, mut signals: Stop) -> Result {
    match start {
        Start::Ready(ready) => ready.decision_loop(cfg, &mut signals).await,
        Start::NoAccess(why) => {
            no_access(&why, "running as a plain pause container");
            pause(signals.terminated()).await
        }
        Start::NotOurs => pause(signals.terminated()).await,
        Start::Stopped(sig) => stop(sig),
    }
}

// --- start-up, shared by `run` and the entrypoint wrapper (src/wrapper.rs) ---

/// What start-up found: the own pod to act on, or why there is none (the identity
/// that cannot be found, or a kubeconfig the user named that cannot be used, is an
/// error instead).
pub(crate) enum Start {
    /// The own pod, read.
    Ready(Box<Ready>),
    /// No API access.
    NoAccess(ClientError),
    /// The pod under the own name is a successor, not ours (already logged; see
    /// [`identity::NotOurs`]). Nothing may be done to it.
    NotOurs,
    /// `stop` fired first (SIGTERM/SIGINT): the signal's name.
    Stopped(&'static str),
}

/// The own pod, read once, with an API client bound to it: what the decision
/// loop needs to start (and what the wrapper's delete on exit needs).
#[derive(Clone)]
pub(crate) struct Ready {
    pub(crate) api: PodApi,
    pub(crate) own: OwnPod,
    clock: Clock,
}

/// The own identity; `kubeconfig_namespace` is the kubeconfig context's, used last.
fn resolve(cfg: &Config, kubeconfig_namespace: Option<&str>) -> Result<identity::Identity> {
    identity::resolve(&cfg.identity, identity::hostname(), kubeconfig_namespace).map_err(|e| {
        error!("{e}");
        Error::OwnPod
    })
}

/// Builds a client on `access` (`connect`), finds the own identity and reads the own
/// pod (retrying), unless `stop` fires first.
pub(crate) async fn prepare(cfg: &Config, access: Discovered, stop: &mut Stop) -> Result<Start> {
    let clock = Clock::system();
    let process_start = clock.now();
    let mut id = None;
    let namespace = |a: &Access| {
        let found = resolve(cfg, a.namespace.as_deref())?;
        let namespace = found.namespace.clone();
        id = Some(found);
        Ok(namespace)
    };
    let api = tokio::select! {
        sig = stop.terminated() => return Ok(Start::Stopped(sig)),
        api = connect(access, namespace) => api?,
    };
    match (api, id) {
        (Api::Client(client), Some(id)) => {
            on_client(stop, id, (clock, process_start), client).await
        }
        (Api::NoAccess(why), _) => Ok(Start::NoAccess(why)),
        (Api::Client(_), None) => unreachable!("connect names the namespace before the client"),
    }
}

/// [`prepare`] once the client is there: reads the own pod (`clock` and when this
/// process started on it tell a successor from the own pod).
async fn on_client(
    stop: &mut Stop,
    id: identity::Identity,
    (clock, process_start): (Clock, SystemTime),
    client: kube::Client,
) -> Result<Start> {
    let api = PodApi::new(client, &id.namespace, &id.name);
    let pod = tokio::select! {
        sig = stop.terminated() => return Ok(Start::Stopped(sig)),
        pod = fetch_own_pod(&api, &id) => pod,
    };
    let pod = pod.ok_or(Error::OwnPod)?;
    let Ok(mut own) = id
        .own_pod(&pod, process_start)
        .inspect_err(|e| warn!(pod = %id.name, "{e}"))
    else {
        return Ok(Start::NotOurs);
    };
    clamp_future_start(&mut own, clock.now());
    Ok(Start::Ready(Box::new(Ready { api, own, clock })))
}

/// A start time in the future (a node clock ahead, a bad answer) would put off
/// the lifetime and the minimum age by as much: it is taken as `now`, with one
/// warning. The same for the time the pod was scheduled.
fn clamp_future_start(own: &mut OwnPod, now: SystemTime) {
    // How far `t` is ahead of `now`, setting it to `now` if it is.
    let clamp = |t: &mut Option<SystemTime>| {
        let ahead = t
            .and_then(|t| t.duration_since(now).ok())
            .filter(|d| !d.is_zero());
        if ahead.is_some() {
            *t = Some(now);
        }
        ahead
    };
    let (start, scheduled) = (clamp(&mut own.started_at), clamp(&mut own.scheduled_at));
    if let Some(by) = start.max(scheduled) {
        warn!(
            pod = %own.name, ahead = %fmt_duration(by),
            "the own pod's start time is in the future (clock skew?): counting from now"
        );
    }
}

impl Ready {
    /// Runs the decision loop until `stop` fires (with [`Stop::Never`]: until the
    /// future is dropped).
    /// The loop: decide over the view, then move, or wait for the next wake-up
    /// or the next change of the view.
    pub(crate) async fn decision_loop(self, cfg: Config, signals: &mut Stop) -> Result {
        let Ready {
            api,
            mut own,
            clock,
        } = self;
        let client = api.client().clone();
        let mut decider = Decider::new(cfg, api, &own, clock);
        let mut view = View::start(&decider.cfg, &client, &own, decider.timer());
        loop {
            let wake = match decider.decide(&own, &mut view) {
                Decision::Move { trigger } => {
                    tokio::select! {
                        sig = signals.terminated() => return stop(sig),
                        () = decider.act(&own, &trigger) => continue,
                    }
                }
                Decision::Arm { at, .. } => Some(at),
                Decision::Wait { until, .. } => until,
            };
            view.release_idle();
            let wait = wake.map(|at| at.duration_since(clock.now()).unwrap_or_default());
            tokio::select! {
                sig = signals.terminated() => return stop(sig),
                () = tokio::time::sleep(wait.unwrap_or_default()), if wait.is_some() => {}
                () = view.changed(&mut own) => {}
            }
        }
    }
}

// --- end of the shared start-up ---

/// Reads the own pod, retrying with backoff. `None` means a fatal identification error.
async fn fetch_own_pod(api: &PodApi, id: &identity::Identity) -> Option<PodObject> {
    let (name, ns) = (&id.name, &id.namespace);
    let mut failures = 0u32;
    loop {
        let err = match api.get().await {
            Ok(pod) => return Some(pod),
            Err(e) => e,
        };
        let backoff = match err.code() {
            Some(404) if id.name_from == Source::Hostname => {
                error!(
                    pod = %name, namespace = %ns,
                    "no pod named after the hostname: set POD_NAME from the Downward API \
                     (env: - name: POD_NAME, valueFrom: fieldRef: fieldPath: metadata.name)"
                );
                return None;
            }
            Some(404) => {
                warn!(pod = %name, namespace = %ns, "own pod not found; holding on and retrying");
                Backoff::BUSY
            }
            Some(401) => {
                warn!(error = %err, hint = %rbac_hint(err.code(), "get", "pods", ns), "cannot read own pod; retrying");
                Backoff::TRANSIENT
            }
            Some(403) => {
                warn!(error = %err, hint = %rbac_hint(err.code(), "get", "pods", ns), "cannot read own pod; retrying rarely");
                Backoff::DENIED
            }
            _ => {
                warn!(error = %Chain(&err), "cannot read own pod; retrying");
                Backoff::TRANSIENT
            }
        };
        let wait = backoff.delay(failures, crate::jitter::draw());
        failures = failures.saturating_add(1);
        debug!(retry_in = %fmt_duration(wait), "waiting before the next try");
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests;
