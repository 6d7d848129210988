//! `selfdestruct`: a pause-style container for Kubernetes placeholder pods that
//! evicts its own pod when moving it helps: on a jittered lifetime, or when a
//! newer node is ready for it.
//!
//! The decision (`selfdestruct_decision::decide`, in the `decision/` crate) is a
//! pure function over a snapshot; the agent (`agent`) is a thin I/O shell around it.
//!
//! The public API is what the binary (`src/main.rs`) and the integration tests use:
//! [`Cli`], [`Task`], [`run`] and [`Error`], and for the in-process tier the `run_on`
//! of the agent and of the node gate, [`client_over`], [`Clock`] and [`Stop`].
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
mod identity;
mod jitter;
mod logging;
mod malloc_trim;
pub mod node_gate;
mod pdb;
mod schedule;
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
pub use node_gate::GateConfig;
pub use schedule::ScheduleConfig;
pub use signals::{Signals, Stop};

use config::{Command, check_settings};
use signals::WrapperSignals;

/// A mode with its validated settings: what `selfdestruct` runs.
pub enum Task {
    /// `check-settings`: the settings, valid, as (variable, value).
    Check(Vec<(String, String)>),
    /// The agent.
    Agent(Config),
    /// The entrypoint wrapper: the agent's settings, the program and its arguments.
    Wrapper(Config, OsString, Vec<OsString>),
    /// `node-gate`.
    Gate(GateConfig),
    /// `schedule`.
    Schedule(ScheduleConfig),
    /// `schedule preview DAYS`.
    Preview(ScheduleConfig),
}

impl Task {
    /// The mode `cli` asks for, its settings validated: each mode validates its
    /// own (the gate none of the agent's).
    pub fn from_cli(cli: &Cli) -> Result<Task, Error> {
        let identity = &cli.shared.identity;
        let command = cli
            .exec
            .split_first()
            .map(|(p, args)| (p.clone(), args.to_vec()));
        Ok(match (&cli.command, command) {
            (Some(Command::CheckSettings(c)), _) => Task::Check(check_settings(&c.settings)?),
            // `selfdestruct --` alone: a wrapper with nothing to run is a mistake, not a pause.
            (_, None) if cli.wrapped => return Err(Error::NothingToRun),
            (Some(Command::NodeGate(_)), Some(_)) => return Err(Error::NoCommand("node-gate")),
            (Some(Command::Schedule(_)), Some(_)) => return Err(Error::NoCommand("schedule")),
            (Some(Command::Schedule(s)), None) => {
                let cfg = ScheduleConfig::new(s, identity)?;
                match &s.action {
                    Some(_) => Task::Preview(cfg),
                    None => Task::Schedule(cfg),
                }
            }
            (Some(Command::NodeGate(g)), None) => Task::Gate(GateConfig::new(g, identity)?),
            (None, Some((program, args))) => Task::Wrapper(Config::from_cli(cli)?, program, args),
            (None, None) => Task::Agent(Config::from_cli(cli)?),
        })
    }
}

/// Runs the mode `cli` asks for to its end: `Ok` on SIGTERM/SIGINT. Installs the
/// signal handlers, discovers the API access once (a named kubeconfig that cannot be
/// used is [`Error::Kubeconfig`]) and runs the mode on a current-thread runtime.
/// Nothing that can block (a kubeconfig read, an `exec` plugin) runs on the
/// runtime's thread, which serves the signals.
pub fn run(cli: &Cli) -> Result<(), Error> {
    let task = Task::from_cli(cli)?;
    if let Task::Check(settings) = &task {
        // Exactly these settings, as the agent reads them; printed as env entries.
        for (name, value) in settings {
            println!("{}", serde_json::json!({ "name": name, "value": value }));
        }
        return Ok(());
    }
    if let Task::Preview(cfg) = &task {
        return schedule::preview(cfg);
    }
    let (shared, identity) = (&cli.shared, &cli.shared.identity);
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
    let cannot_install = |e| Error::Setup("install signal handlers", e);
    let done = runtime.block_on(async {
        // The handlers come first: a SIGTERM while a kubeconfig is read exits 0.
        if let Task::Wrapper(cfg, program, args) = task {
            let mut signals = WrapperSignals::install().map_err(cannot_install)?;
            let access = tokio::select! {
                sig = signals.terminated() => return signals::stop(sig),
                access = connect::discover(identity) => access?,
            };
            return wrapper::run(cfg, program, args, access, signals).await;
        }
        let mut signals = Signals::install().map_err(cannot_install)?;
        let access = tokio::select! {
            sig = signals.terminated() => return signals::stop(sig),
            access = connect::discover(identity) => access?,
        };
        match task {
            Task::Agent(cfg) => agent::run(cfg, access, signals).await,
            Task::Gate(g) => node_gate::run(g, access, signals).await,
            Task::Schedule(s) => schedule::run(s, access, signals).await,
            Task::Check(_) | Task::Wrapper(..) | Task::Preview(_) => Ok(()),
        }
    });
    // Nothing is left to flush, and the runtime's shutdown would wait for tasks; an exec
    // plugin still running is left with its blocking thread: killed here.
    runtime.shutdown_background();
    exec_plugin::kill_running();
    done
}
