//! `selfdestruct`: see the README. Parses the mode's settings (exit 2 if invalid),
//! installs the signal handlers, discovers the API access once (a named kubeconfig that
//! cannot be used exits 2) and runs the mode on a current-thread runtime. Nothing that
//! can block (a kubeconfig read, an `exec` plugin) runs on the runtime's thread, which
//! serves the signals (`src/connect.rs`).

use std::future::Future;

use selfdestruct::agent;
use selfdestruct::config::{self, Cli, Command, Config};
use selfdestruct::connect::{self, Access, AccessError};
use selfdestruct::identity::IdentitySettings;
use selfdestruct::node_gate::GateConfig;
use selfdestruct::schedule::ScheduleConfig;
use selfdestruct::signals::{Signals, WrapperSignals};

fn main() {
    let cli = Cli::parse_mode(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("selfdestruct: {e}");
        std::process::exit(connect::EXIT_CONFIG)
    };
    if let Some(Command::CheckSettings(c)) = &cli.command {
        // Exactly these settings, as the agent reads them; printed as env entries.
        for (name, value) in config::check_settings(&c.settings).unwrap_or_else(|e| fail(&e)) {
            println!("{}", serde_json::json!({ "name": name, "value": value }));
        }
        std::process::exit(0);
    }
    // `selfdestruct --` alone: a wrapper with nothing to run is a mistake, not a pause.
    let wrapped = !cli.exec.is_empty() || std::env::args_os().skip(1).any(|a| a == "--");
    let command = match cli.exec.split_first() {
        Some((program, args)) => Some((program.clone(), args.to_vec())),
        None if wrapped => {
            fail(&"nothing to run after -- (usage: selfdestruct [OPTIONS] -- CMD [ARGS...])")
        }
        None => None,
    };
    // Each mode validates its own settings: the gate none of the agent's.
    let task = match (&cli.command, command) {
        (Some(Command::NodeGate(_)), Some(_)) => {
            fail(&"node-gate runs no command: drop the -- CMD part")
        }
        (Some(Command::Schedule(_)), Some(_)) => {
            fail(&"schedule runs no command: drop the -- CMD part")
        }
        (Some(Command::Schedule(s)), None) => Task::Schedule(
            ScheduleConfig::new(s, &cli.shared.identity).unwrap_or_else(|e| fail(&e)),
        ),
        (Some(Command::NodeGate(g)), None) => {
            Task::Gate(GateConfig::new(g, &cli.shared.identity).unwrap_or_else(|e| fail(&e)))
        }
        (_, command) => {
            let cfg = Config::from_cli(&cli).unwrap_or_else(|e| fail(&e));
            match command {
                Some((program, args)) => Task::Wrapper(cfg, program, args),
                None => Task::Agent(cfg),
            }
        }
    };
    let identity = &cli.shared.identity;
    selfdestruct::logging::init(
        cli.shared.log_format,
        cli.shared.level(std::env::var("RUST_LOG").ok().as_deref()),
    );
    if !selfdestruct::signals::is_pid1() {
        // As the pause container does: reaping orphans is PID 1's job.
        tracing::warn!(
            "not PID 1: orphaned processes in this PID namespace are reaped by its init, not by selfdestruct"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("selfdestruct: cannot start the runtime: {e}");
            std::process::exit(1)
        });
    let code = runtime.block_on(async {
        // The handlers come first: a SIGTERM while a kubeconfig is read exits 0.
        match task {
            Task::Agent(cfg) => match signals_and_access(identity).await {
                Ok((signals, access)) => agent::run(cfg, access, signals).await,
                Err(code) => code,
            },
            Task::Gate(g) => match signals_and_access(identity).await {
                Ok((signals, access)) => selfdestruct::node_gate::run(g, access, signals).await,
                Err(code) => code,
            },
            Task::Schedule(s) => match signals_and_access(identity).await {
                Ok((signals, access)) => selfdestruct::schedule::run(s, access, signals).await,
                Err(code) => code,
            },
            Task::Wrapper(cfg, program, args) => {
                let mut signals = match WrapperSignals::install() {
                    Ok(s) => s,
                    Err(e) => return cannot_install(&e),
                };
                match discover(identity, signals.terminated()).await {
                    Ok(access) => {
                        selfdestruct::wrapper::run(cfg, program, args, access, signals).await
                    }
                    Err(code) => code,
                }
            }
        }
    });
    // Exit at once: nothing is left to flush, and the runtime's shutdown would wait for tasks.
    std::process::exit(code);
}

fn cannot_install(e: &std::io::Error) -> i32 {
    eprintln!("selfdestruct: cannot install signal handlers: {e}");
    1
}

/// The agent's and the gate's signal handlers, installed first, and the API access
/// found once; `Err` is the exit code.
async fn signals_and_access(
    identity: &IdentitySettings,
) -> Result<(Signals, Result<Access, AccessError>), i32> {
    let mut signals = Signals::install().map_err(|e| cannot_install(&e))?;
    let access = discover(identity, signals.terminated()).await?;
    Ok((signals, access))
}

/// The API access, found once, unless `terminated` resolves first; `Err` is the
/// exit code: 0 on SIGTERM/SIGINT, 2 when a kubeconfig the user named (a
/// configuration error, found before anything else starts) cannot be used.
async fn discover(
    identity: &IdentitySettings,
    terminated: impl Future<Output = &'static str>,
) -> Result<Result<Access, AccessError>, i32> {
    let discovery = connect::discover(
        |k| std::env::var_os(k),
        identity.kubeconfig.as_deref(),
        &identity.service_account_dir,
    );
    tokio::select! {
        sig = terminated => Err(selfdestruct::signals::stop(sig)),
        access = discovery => match access {
            Err(e) if e.is_named() => Err(connect::bad_kubeconfig(&e)),
            access => Ok(access),
        },
    }
}

/// The mode asked for, with its validated settings.
enum Task {
    Agent(Config),
    Wrapper(Config, std::ffi::OsString, Vec<std::ffi::OsString>),
    Gate(GateConfig),
    Schedule(ScheduleConfig),
}
