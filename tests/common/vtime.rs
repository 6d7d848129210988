//! The virtual-time tier: the agent runs in-process (`agent::run_on`) against
//! the fake API server served in-process (`FakeCluster::in_process`, a
//! `tower::Service` under `kube::Client::new`), on a runtime whose time is paused
//! (`#[tokio::test(start_paused = true)]`). Nothing does real I/O, so whenever
//! every task waits, tokio advances the clock to the next timer: "nothing happens
//! for N s" costs no wall time, and the agent's and the fake's clocks
//! (`Clock::following_tokio`, one base) read the same virtual time.
//!
//! What needs a real process (signals, exit codes, the wrapper, TLS, PID 1, the
//! image) stays on the black-box tier (`common::cluster`).
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{CommandFactory, Parser};
use fake_apiserver::{Config as FakeConfig, FakeCluster, NodeBuilder, PodTemplate, RequestInfo};
use selfdestruct::{Cli, Clock, Config, GateConfig, Stop, Task};
use tracing::Instrument;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

use super::cluster::{NS, Scene, forbid};

/// How often the waits below look again (virtual time).
const STEP: Duration = Duration::from_millis(20);

/// Wall time after which a virtual-time test counts as hung (they take well
/// under a second each, unloaded).
pub const HANG: Duration = Duration::from_secs(300);

/// Keeps the log capture and the hang watch of [`Logs::capture`] on.
pub struct Capture {
    _default: tracing::subscriber::DefaultGuard,
    /// Dropped with the capture: tells the watch the test ended.
    _done: std::sync::mpsc::Sender<()>,
}

/// Log lines of the agents of one test, captured from `tracing` on this thread.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures this thread's logs (selfdestruct at debug, libraries at warn)
    /// until the guard is dropped. The runtime of a `#[tokio::test]` runs every
    /// task on the test's thread, so the agents' watch tasks are captured too.
    ///
    /// The guard also watches for a test that cannot end: virtual time only
    /// advances while every task waits, so a task that never waits (a hot loop)
    /// would hang the test instead of failing it. After [`HANG`] of wall time the
    /// process is aborted with the last log lines.
    pub fn capture() -> (Logs, Capture) {
        Self::capture_at(LevelFilter::DEBUG)
    }

    /// [`Logs::capture`] with selfdestruct's lines at `level` (a fleet at debug
    /// spends its time formatting lines).
    pub fn capture_at(level: LevelFilter) -> (Logs, Capture) {
        let logs = Logs::default();
        let sink = logs.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || sink.clone())
            .with_timer(VirtualUptime(tokio::time::Instant::now()))
            .with_ansi(false)
            .with_target(false);
        let filter = Targets::new()
            .with_target("selfdestruct", level)
            .with_default(LevelFilter::WARN);
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::Layer::with_filter(layer, filter));
        let guard = tracing::subscriber::set_default(subscriber);
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let seen = logs.clone();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(HANG) {
                let text = seen.text();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!(
                    "a virtual-time test is still running after {HANG:?} of wall time: a task \
                     that never waits keeps tokio from advancing the clock (a hot loop?). Last \
                     log lines:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
                std::process::abort();
            }
        });
        (
            logs,
            Capture {
                _default: guard,
                _done: done,
            },
        )
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
    }

    /// The lines of the agents of `pod` (their loops run in a span naming the pod).
    pub fn of(&self, pod: &str) -> String {
        let span = format!("{{pod={pod} ");
        self.text()
            .lines()
            .filter(|l| l.contains(&span))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if std::env::var_os("SELFDESTRUCT_TEST_ECHO").is_some() {
            eprint!("  | {}", String::from_utf8_lossy(buf));
        }
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Log times: virtual seconds since the capture began.
struct VirtualUptime(tokio::time::Instant);

impl tracing_subscriber::fmt::time::FormatTime for VirtualUptime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        let t = tokio::time::Instant::now().saturating_duration_since(self.0);
        write!(w, "+{:.3}s", t.as_secs_f64())
    }
}

/// Polls `f` every [`STEP`] of virtual time until it holds (true) or `limit` of
/// virtual time has passed (false). The limit only stops a test whose condition
/// never comes; it costs no wall time.
pub async fn until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(STEP).await;
    }
}

/// Like [`until`], returning what `f` found.
pub async fn until_some<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let mut found = None;
    until(limit, || {
        found = f();
        found.is_some()
    })
    .await;
    found
}

/// The first request matching `pred`, once made (within `limit` of virtual time).
pub async fn request(
    scene: &Scene,
    limit: Duration,
    pred: impl Fn(&fake_apiserver::RecordedRequest) -> bool,
) -> Option<fake_apiserver::RecordedRequest> {
    request_of(&scene.fake, limit, pred).await
}

/// [`request`] on `fake`.
pub async fn request_of(
    fake: &FakeCluster,
    limit: Duration,
    pred: impl Fn(&fake_apiserver::RecordedRequest) -> bool,
) -> Option<fake_apiserver::RecordedRequest> {
    until_some(limit, || fake.find_request(&pred)).await
}

impl Logs {
    /// Whether a line containing `needle` is logged within `limit` of virtual time.
    pub async fn show(&self, needle: &str, limit: Duration) -> bool {
        until(limit, || self.text().contains(needle)).await
    }

    /// The lines of the agent of the pod with `uid`.
    pub fn of_uid(&self, uid: &str) -> String {
        let span = format!(" uid={uid}}}");
        self.text()
            .lines()
            .filter(|l| l.contains(&span))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether the agent of `pod` logs a line containing `needle` within `limit`.
    pub async fn show_of(&self, pod: &str, needle: &str, limit: Duration) -> bool {
        until(limit, || self.of(pod).contains(needle)).await
    }
}

/// Lets `d` of virtual time pass with the agents and the fake running.
pub async fn pass(d: Duration) {
    tokio::time::sleep(d).await;
}

/// A fake cluster in-process with `replicas` Ready placeholders (see
/// [`Scene::placeholders`]).
pub async fn placeholders(replicas: i32) -> Scene {
    with_nodes(
        replicas,
        &[],
        PodTemplate::placeholder("placeholder", "1", "4Gi"),
    )
    .await
}

/// The same on the given nodes.
pub async fn with_nodes(replicas: i32, nodes: &[NodeBuilder], template: PodTemplate) -> Scene {
    Scene::set_up(
        FakeCluster::in_process(FakeConfig::default()),
        replicas,
        nodes,
        template,
    )
}

/// The agent's [`Config`] from settings named by their environment variables, as
/// the binary would read them (through the same `Cli`).
///
/// # Panics
/// On a name that is no setting's variable, or an invalid value.
pub fn config(env: &[(&str, &str)]) -> Config {
    try_config(env).unwrap_or_else(|e| panic!("{env:?}: {e}"))
}

/// [`config`], or the message the binary would exit 2 with.
pub fn try_config(env: &[(&str, &str)]) -> Result<Config, String> {
    let argv = flags(&Cli::command(), vec!["selfdestruct".to_string()], env);
    let cli = Cli::parse_mode(&argv).map_err(|e| e.to_string())?;
    match Task::from_cli(&cli).map_err(|e| e.to_string())? {
        Task::Agent(cfg) => Ok(cfg),
        _ => Err(format!("{argv:?}: not the agent")),
    }
}

/// The node gate's configuration from its settings' and the shared settings'
/// environment variables (see [`config`]).
pub fn gate_config(env: &[(&str, &str)]) -> GateConfig {
    let command = selfdestruct::node_gate::Cli::command();
    let argv = flags(&command, vec!["selfdestruct-node-gate".into()], env);
    let cli = selfdestruct::node_gate::Cli::try_parse_from(&argv);
    let cli = cli.unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    cli.config().unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

/// `argv` with one `--flag=value` per setting of `command` named by its variable.
fn flags<'a>(
    command: &clap::Command,
    mut argv: Vec<String>,
    env: impl IntoIterator<Item = &'a (&'a str, &'a str)>,
) -> Vec<String> {
    for (var, value) in env {
        // Empty values count as unset, as for the environment.
        if value.is_empty() {
            continue;
        }
        let arg = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == *var))
            .unwrap_or_else(|| panic!("{var} is no setting's environment variable"));
        let long = arg
            .get_long()
            .unwrap_or_else(|| panic!("{var} has no flag"));
        argv.push(format!("--{long}={value}"));
    }
    argv
}

/// Starts `selfdestruct-node-gate` in-process on `fake` with `token` (known to the
/// fake) and the settings `env` (by their variables).
pub fn gate(fake: &FakeCluster, token: &str, env: &[(&str, &str)]) -> Agent {
    fake.add_token(token);
    let cfg = gate_config(env);
    let node = env.iter().find(|(k, _)| *k == "NODE_NAME");
    let node = node.map(|(_, v)| v.to_string()).unwrap_or_default();
    let client = selfdestruct::client_over(fake.service(Some(token)), "default");
    let (stop, rx) = tokio::sync::watch::channel(false);
    let span = tracing::info_span!(target: "selfdestruct", "gate", node = %node);
    let task = tokio::spawn(
        selfdestruct::node_gate::run_on(cfg, client, Stop::Shutdown(rx)).instrument(span),
    );
    Agent {
        pod: node,
        token: token.to_string(),
        task,
        stop,
    }
}

/// An agent running in-process; stopped (as by SIGTERM) when dropped.
pub struct Agent {
    pub pod: String,
    /// Its bearer token (the fake records it with each request).
    pub token: String,
    task: tokio::task::JoinHandle<Result<(), selfdestruct::Error>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Agent {
    /// Whether the agent still runs (it pauses after its move, as the binary does).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Stops it as SIGTERM would; its exit code (0: an error fails the test).
    pub async fn stop(mut self) -> i32 {
        self.stop.send_replace(true);
        match (&mut self.task).await.expect("the agent task") {
            Ok(()) => 0,
            Err(e) => panic!("the agent failed: {}", e.chain()),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the agent of `pod` in-process with the Downward API settings, fast test
/// settings and `env` on top (as [`Scene::agent`]).
pub fn agent(scene: &Scene, pod: &str, env: &[(&str, &str)]) -> Agent {
    agent_denied(scene, pod, |_| false, env)
}

/// [`agent`] whose requests that `denied` names are forbidden (403, as RBAC answers).
pub fn agent_denied(
    scene: &Scene,
    pod: &str,
    denied: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    env: &[(&str, &str)],
) -> Agent {
    let token = scene.token_for(pod);
    forbid(&scene.fake, &token, denied);
    let client = selfdestruct::client_over(scene.fake.service(Some(&token)), NS);
    let (uid, node) = scene.uid_and_node(pod);
    let podinfo = scene.home.join("no-podinfo").to_string_lossy().to_string();
    let service_account = scene
        .home
        .join("no-serviceaccount")
        .to_string_lossy()
        .to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("POD_NAME", pod),
        ("POD_NAMESPACE", NS),
        ("POD_UID", &uid),
        ("NODE_NAME", &node),
        ("SELFDESTRUCT_PODINFO_DIR", &podinfo),
        ("SELFDESTRUCT_SERVICE_ACCOUNT_DIR", &service_account),
        ("SELFDESTRUCT_MIN_AGE", "0"),
        ("SELFDESTRUCT_MOVE_JITTER", "0"),
        ("SELFDESTRUCT_START_JITTER", "0"),
        ("SELFDESTRUCT_LOG_LEVEL", "debug"),
    ];
    // Later settings win, as in the environment.
    for (k, v) in env {
        all.retain(|(name, _)| name != k);
        all.push((k, v));
    }
    let cfg = config(&all);
    let (wall, at) = scene
        .fake
        .clock()
        .base()
        .expect("an in-process fake follows tokio's clock");
    let clock = Clock::following_tokio(wall, at);
    let (stop, rx) = tokio::sync::watch::channel(false);
    // The span's target passes the log filter: its fields name the agent's lines.
    let span = tracing::info_span!(target: "selfdestruct", "agent", pod = %pod, uid = %uid);
    let task = tokio::spawn(
        selfdestruct::agent::run_on(client, cfg, clock, Stop::Shutdown(rx)).instrument(span),
    );
    Agent {
        pod: pod.to_string(),
        token,
        task,
        stop,
    }
}
