//! `selfdestruct`: a pause-style container for Kubernetes placeholder pods that
//! evicts its own pod when moving it helps: on a jittered lifetime, or when a
//! newer node is ready for it.
//!
//! The decision (`selfdestruct_decision::decide`, in the `decision/` crate) is a
//! pure function over a snapshot; the agent (`agent`) is a thin I/O shell around it.
//!
//! The public API is what the binaries and the integration tests use: the agent's
//! [`Cli`], [`Task`] and [`run`] (`src/main.rs`), the node gate's `node_gate::Cli`
//! (`src/bin/selfdestruct-node-gate.rs`), [`base`] (what the image's other binaries,
//! `selfdestruct-schedule` too, stand on) and [`Error`], and for the in-process tier the
//! `run_on` of the agent and of the node gate, [`client_over`], [`Clock`] and [`Stop`].
//! Everything else is `pub(crate)`.
#![warn(missing_docs)]

mod access;
pub mod agent;
mod api;
mod candidates;
mod client;
mod clock;
mod config;
mod connect;
mod error;
mod exec_plugin;
mod forward;
mod identity;
mod jitter;
mod logging;
mod malloc_trim;
pub mod node_gate;
mod pdb;
mod signals;
mod summarize;
#[cfg(test)]
mod testing;
mod token_file;
mod watch;
mod wrapper;

use std::ffi::OsString;

pub use access::{AccessError, KubeconfigError};
pub use client::{ClientError, client_over};
pub use clock::Clock;
pub use config::{Cli, Config};
pub use error::{CheckError, Error};
pub use forward::forward;
pub use node_gate::GateConfig;
pub use signals::{Signals, Stop};

use access::Discovered;
use config::{Command, SharedSettings, check_settings};
use signals::WrapperSignals;

/// What every binary of the image stands on: the settings they share, the API access
/// and requests, the own pod's identity, pause semantics, logging, and [`host`], which
/// runs a mode with all of them; then [`exit_code`], the one mapping of an [`Error`] to
/// an exit code. The calendar controller (`selfdestruct-schedule`, the `schedule/`
/// crate) is built on it; the agent's binary does not link the controller.
pub mod base {
    pub use crate::access::{Access, Discovered};
    pub use crate::api::{ApiError, pods, post_event, request, segment};
    pub use crate::config::SharedSettings;
    pub use crate::identity::{IdentitySettings, is_dns1123_label, read_trimmed, subdomain};
    pub use crate::jitter::draw;
    pub use crate::logging::Chain;
    pub use crate::malloc_trim::release_idle;
    pub use crate::signals::{Connect, Signals, Stop, on_client_or_pause, stop};
    pub use crate::{EXIT_FAILURE, EXIT_OK, exit_code, host};
}

/// A mode with its validated settings: what `selfdestruct` runs.
pub enum Task {
    /// `check-settings`: the settings, valid, as (variable, value).
    Check(Vec<(String, String)>),
    /// The agent.
    Agent(Config),
    /// The entrypoint wrapper: the agent's settings, the program and its arguments.
    Wrapper(Config, OsString, Vec<OsString>),
}

impl Task {
    /// The mode `cli` asks for, its settings validated.
    pub fn from_cli(cli: &Cli) -> Result<Task, Error> {
        let command = cli
            .exec
            .split_first()
            .map(|(p, args)| (p.clone(), args.to_vec()));
        Ok(match (&cli.command, command) {
            (Some(Command::CheckSettings(c)), _) => Task::Check(check_settings(&c.settings)?),
            // `selfdestruct --` alone: a wrapper with nothing to run is a mistake, not a pause.
            (_, None) if cli.wrapped => return Err(Error::NothingToRun),
            (None, Some((program, args))) => Task::Wrapper(Config::from_cli(cli)?, program, args),
            (None, None) => Task::Agent(Config::from_cli(cli)?),
        })
    }
}

/// Runs the mode `cli` asks for to its end: `Ok` on SIGTERM/SIGINT. The agent runs
/// on [`host`]; the entrypoint wrapper the same way with its own signal handlers,
/// which forward signals to its child.
pub fn run(cli: &Cli) -> Result<(), Error> {
    match Task::from_cli(cli)? {
        Task::Check(settings) => {
            // Exactly these settings, as the agent reads them; printed as env entries.
            for (name, value) in settings {
                println!("{}", serde_json::json!({ "name": name, "value": value }));
            }
            Ok(())
        }
        Task::Agent(cfg) => host(&cli.shared, |access, signals| {
            agent::run(cfg, access, signals)
        }),
        Task::Wrapper(cfg, program, args) => on_runtime(&cli.shared, async {
            // The handlers come first: a SIGTERM while a kubeconfig is read exits 0.
            let mut signals = WrapperSignals::install().map_err(cannot_install)?;
            let access = tokio::select! {
                sig = signals.terminated() => return signals::stop(sig),
                access = connect::discover(&cli.shared.identity) => access?,
            };
            wrapper::run(cfg, program, args, access, signals).await
        }),
    }
}

/// Runs `mode` to its end as every binary of the image runs its mode: `Ok` on
/// SIGTERM/SIGINT. Logs as `shared` says, installs the signal handlers, discovers the
/// API access once (a named kubeconfig that cannot be used is [`Error::Client`]) and
/// runs `mode` on it on a current-thread runtime. Nothing that can block (a kubeconfig
/// read, an `exec` plugin) runs on the runtime's thread, which serves the signals.
pub fn host<F>(
    shared: &SharedSettings,
    mode: impl FnOnce(Discovered, Signals) -> F,
) -> Result<(), Error>
where
    F: Future<Output = Result<(), Error>>,
{
    on_runtime(shared, async {
        // The handlers come first: a SIGTERM while a kubeconfig is read exits 0.
        let mut signals = Signals::install().map_err(cannot_install)?;
        let access = tokio::select! {
            sig = signals.terminated() => return signals::stop(sig),
            access = connect::discover(&shared.identity) => access?,
        };
        mode(access, signals).await
    })
}

fn cannot_install(e: std::io::Error) -> Error {
    Error::Setup("install signal handlers", e)
}

/// Sets up the log as `shared` says and runs `run` on a current-thread runtime.
fn on_runtime(
    shared: &SharedSettings,
    run: impl Future<Output = Result<(), Error>>,
) -> Result<(), Error> {
    logging::init(
        shared.log_format,
        shared.level(std::env::var("RUST_LOG").ok().as_deref()),
    );
    if !signals::is_pid1() {
        // As the pause container does: reaping orphans is PID 1's job.
        tracing::warn!(
            "not PID 1: orphaned processes in this PID namespace are reaped by its init, not by selfdestruct"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Setup("start the runtime", e))?;
    let done = runtime.block_on(run);
    // Nothing is left to flush, and the runtime's shutdown would wait for tasks; an exec
    // plugin still running is left with its blocking thread: killed here.
    runtime.shutdown_background();
    exec_plugin::kill_running();
    done
}

/// SIGTERM/SIGINT ended the mode.
pub const EXIT_OK: i32 = 0;
/// The runtime or the signal handlers cannot be set up; `selfdestruct-schedule preview`
/// cannot read the calendar or some of its events.
pub const EXIT_FAILURE: i32 = 1;
/// Invalid configuration: a setting, the command line, a kubeconfig the user named,
/// an own pod that cannot be identified, a binary an old subcommand runs that is not
/// there (sysexits' `EX_USAGE` is 64: 2 is what Kubernetes users and the docs know).
const EXIT_CONFIG: i32 = 2;
/// The wrapper's command cannot be executed (as in a shell).
const EXIT_CANNOT_EXEC: i32 = 126;
/// The wrapper's command cannot be found (as in a shell).
const EXIT_NOT_FOUND: i32 = 127;

/// The exit code for `e`; says why on stderr (as `program`) unless the log said it where
/// it happened. The one mapping of every binary of the image.
pub fn exit_code(program: &str, e: &Error) -> i32 {
    match e {
        Error::Child(code) => *code,
        Error::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
        Error::Spawn(_) => EXIT_CANNOT_EXEC,
        Error::OwnPod => EXIT_CONFIG,
        Error::Setup(..) => {
            eprintln!("{program}: {}", e.chain());
            EXIT_FAILURE
        }
        Error::Client(_) | Error::Moved { .. } => {
            eprintln!("{program}: {}", e.chain());
            EXIT_CONFIG
        }
        Error::NothingToRun | Error::Setting(_) | Error::Check(_) => {
            eprintln!("{program}: {e}");
            EXIT_CONFIG
        }
    }
}
