//! `selfdestruct`: see the README. Parses the configuration (exit 2 if invalid),
//! installs the signal handlers, discovers the API access once (a kubeconfig
//! the user named that cannot be used exits 2), and runs the agent on a
//! current-thread runtime; with `-- CMD [ARGS...]`, runs CMD as its child
//! instead (the entrypoint wrapper, `src/wrapper.rs`). Nothing that can block
//! (reading a kubeconfig, its `exec` credential plugin) runs on the runtime's
//! thread, which serves the signals (`src/connect.rs`).

use std::future::Future;

use clap::Parser;
use selfdestruct::agent;
use selfdestruct::config::{self, Cli, Command, Config};
use selfdestruct::connect::{self, Access, AccessError};
use selfdestruct::signals::{Signals, WrapperSignals};

fn main() {
    let cli = Cli::parse();
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("selfdestruct: {e}");
        std::process::exit(agent::EXIT_CONFIG)
    };
    if let Some(Command::CheckSettings(c)) = &cli.command {
        // Exactly these settings, as the agent reads them; printed as env entries.
        for (name, value) in config::check_settings(&c.settings).unwrap_or_else(|e| fail(&e)) {
            println!("{}", serde_json::json!({ "name": name, "value": value }));
        }
        std::process::exit(0);
    }
    let cfg = Config::from_args(&cli.agent, std::env::var("RUST_LOG").ok().as_deref())
        .unwrap_or_else(|e| fail(&e));
    let gate = match &cli.command {
        Some(Command::NodeGate(g)) => Some(g.clone()),
        _ => None,
    };
    // `selfdestruct --` alone: a wrapper with nothing to run is a mistake, not a pause.
    let wrapped = !cli.exec.is_empty() || std::env::args_os().skip(1).any(|a| a == "--");
    let command = match cli.exec.split_first() {
        Some((program, args)) => Some((program.clone(), args.to_vec())),
        None if wrapped => {
            fail(&"nothing to run after -- (usage: selfdestruct [OPTIONS] -- CMD [ARGS...])")
        }
        None => None,
    };
    if command.is_some() && gate.is_some() {
        fail(&"node-gate runs no command: drop the -- CMD part");
    }
    selfdestruct::logging::init(cfg.args.log_format, cfg.log_level);
    if !selfdestruct::signals::is_pid1() {
        // As the pause container does: reaping orphans is PID 1's job.
        tracing::warn!(
            "not PID 1: orphaned processes in this PID namespace are reaped by its init, not by selfdestruct"
        );
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("selfdestruct: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async {
        // The handlers come first: a SIGTERM while a kubeconfig is read exits 0.
        if let Some((program, args)) = command {
            let mut signals = match WrapperSignals::install() {
                Ok(s) => s,
                Err(e) => return cannot_install(&e),
            };
            let access = match discover(&cfg, signals.terminated()).await {
                Ok(access) => access,
                Err(code) => return code,
            };
            return selfdestruct::wrapper::run(cfg, program, args, access, signals).await;
        }
        let mut signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => return cannot_install(&e),
        };
        let access = match discover(&cfg, signals.terminated()).await {
            Ok(access) => access,
            Err(code) => return code,
        };
        match gate {
            Some(g) => agent::run_gate(g, access, signals).await,
            None => agent::run(cfg, access, signals).await,
        }
    });
    // Exit at once: nothing is left to flush, and the runtime's shutdown would wait for tasks.
    std::process::exit(code);
}

fn cannot_install(e: &std::io::Error) -> i32 {
    eprintln!("selfdestruct: cannot install signal handlers: {e}");
    1
}

/// The API access, found once, unless `terminated` resolves first; `Err` is the
/// exit code: 0 on SIGTERM/SIGINT, 2 when a kubeconfig the user named (a
/// configuration error, found before anything else starts) cannot be used.
async fn discover(
    cfg: &Config,
    terminated: impl Future<Output = &'static str>,
) -> Result<Result<Access, AccessError>, i32> {
    let discovery = connect::discover(
        |k| std::env::var_os(k),
        cfg.args.identity.kubeconfig.as_deref(),
        &cfg.args.identity.service_account_dir,
    );
    tokio::select! {
        sig = terminated => {
            tracing::info!(signal = sig, "received {sig}, exiting");
            Err(0)
        }
        access = discovery => match access {
            Err(e) if e.is_named() => Err(agent::bad_kubeconfig(&e)),
            access => Ok(access),
        },
    }
}
