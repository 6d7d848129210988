//! `selfdestruct`: see the README. Parses the configuration (exit 2 if invalid),
//! installs signal handlers, and runs the agent on a current-thread runtime; with
//! `-- CMD [ARGS...]`, runs CMD as its child instead (the entrypoint wrapper,
//! `src/wrapper.rs`).

use clap::Parser;
use selfdestruct::agent;
use selfdestruct::config::{self, Cli, Command, Config};
use selfdestruct::connect::{self, AccessError};
use selfdestruct::signals::Signals;

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
    if wrapped && cli.exec.is_empty() {
        fail(&"nothing to run after -- (usage: selfdestruct [OPTIONS] -- CMD [ARGS...])");
    }
    if wrapped && gate.is_some() {
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
        // A kubeconfig the user named but that cannot be used is a configuration
        // error, found before anything else starts.
        if let Err(AccessError::Named(e)) = connect::discover(
            |k| std::env::var_os(k),
            cfg.args.identity.kubeconfig.as_deref(),
            &cfg.args.identity.service_account_dir,
        )
        .await
        {
            return agent::bad_kubeconfig(&e);
        }
        if wrapped {
            return selfdestruct::wrapper::run(cfg, cli.exec).await;
        }
        let signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("selfdestruct: cannot install signal handlers: {e}");
                return 1;
            }
        };
        match gate {
            Some(g) => agent::run_gate(g, cfg, signals).await,
            None => agent::run(cfg, signals).await,
        }
    });
    // Exit at once: nothing is left to flush, and the runtime's shutdown would wait for tasks.
    std::process::exit(code);
}
