//! `selfdestruct`: see the README. Parses the configuration (exit 2 if invalid),
//! installs signal handlers, and runs the agent on a current-thread runtime; with
//! `-- CMD [ARGS...]`, runs CMD as its child instead (the entrypoint wrapper,
//! `src/wrapper.rs`).

use selfdestruct::agent;
use selfdestruct::config::{self, Cli, Command, Config};
use selfdestruct::connect::{self, AccessError};
use selfdestruct::node_gate::GateConfig;
use selfdestruct::signals::Signals;

fn main() {
    let cli = Cli::parse_mode(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("selfdestruct: {e}");
        std::process::exit(connect::EXIT_CONFIG)
    };
    let rust_log = std::env::var("RUST_LOG").ok();
    // `selfdestruct --` alone: a wrapper with nothing to run is a mistake, not a pause.
    let wrapped = !cli.exec.is_empty() || std::env::args_os().skip(1).any(|a| a == "--");
    if wrapped && cli.exec.is_empty() {
        fail(&"nothing to run after -- (usage: selfdestruct [OPTIONS] -- CMD [ARGS...])");
    }
    // Each mode validates its own settings: the gate none of the agent's.
    let task = match &cli.command {
        Some(Command::CheckSettings(c)) => {
            // Exactly these settings, as the agent reads them; printed as env entries.
            for (name, value) in config::check_settings(&c.settings).unwrap_or_else(|e| fail(&e)) {
                println!("{}", serde_json::json!({ "name": name, "value": value }));
            }
            std::process::exit(0);
        }
        Some(Command::NodeGate(_)) if wrapped => {
            fail(&"node-gate runs no command: drop the -- CMD part")
        }
        Some(Command::NodeGate(g)) => {
            Task::Gate(GateConfig::new(g, &cli.shared.identity).unwrap_or_else(|e| fail(&e)))
        }
        None => {
            let cfg = Config::from_cli(&cli, rust_log.as_deref()).unwrap_or_else(|e| fail(&e));
            if wrapped {
                Task::Wrapper(cfg)
            } else {
                Task::Agent(cfg)
            }
        }
    };
    let shared = &cli.shared;
    selfdestruct::logging::init(shared.log_format, shared.level(rust_log.as_deref()));
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
            shared.identity.kubeconfig.as_deref(),
            &shared.identity.service_account_dir,
        )
        .await
        {
            return connect::bad_kubeconfig(&e);
        }
        if let Task::Wrapper(cfg) = task {
            return selfdestruct::wrapper::run(cfg, cli.exec).await;
        }
        let signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("selfdestruct: cannot install signal handlers: {e}");
                return 1;
            }
        };
        match task {
            Task::Gate(g) => selfdestruct::node_gate::run(g, &shared.identity, signals).await,
            Task::Agent(cfg) => agent::run(cfg, signals).await,
            Task::Wrapper(_) => unreachable!("the wrapper ran above"),
        }
    });
    // Exit at once: nothing is left to flush, and the runtime's shutdown would wait for tasks.
    std::process::exit(code);
}

/// The mode asked for, with its validated settings.
enum Task {
    Agent(Config),
    Wrapper(Config),
    Gate(GateConfig),
}
