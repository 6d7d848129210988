//! `selfdestruct`: see the README. Parses the command line, runs the mode it names
//! ([`selfdestruct::run`]) and maps how it ended to the exit code, here only.

use selfdestruct::{Cli, Error};

/// SIGTERM/SIGINT ended the mode.
const EXIT_OK: i32 = 0;
/// The runtime or the signal handlers cannot be set up; `schedule preview` cannot read
/// the calendar or some of its events.
const EXIT_FAILURE: i32 = 1;
/// Invalid configuration: a setting, the command line, a kubeconfig the user named,
/// an own pod that cannot be identified (sysexits' `EX_USAGE` is 64: 2 is what
/// Kubernetes users and the docs know).
const EXIT_CONFIG: i32 = 2;
/// The wrapper's command cannot be executed (as in a shell).
const EXIT_CANNOT_EXEC: i32 = 126;
/// The wrapper's command cannot be found (as in a shell).
const EXIT_NOT_FOUND: i32 = 127;

fn main() {
    let cli = Cli::parse_mode(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let code = match selfdestruct::run(&cli) {
        Ok(()) => EXIT_OK,
        Err(e) => exit_code(&e),
    };
    // Exit at once: nothing is left to flush.
    std::process::exit(code);
}

/// The exit code for `e`; says why on stderr unless the log said it where it happened.
fn exit_code(e: &Error) -> i32 {
    match e {
        Error::Child(code) => *code,
        Error::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
        Error::Spawn(_) => EXIT_CANNOT_EXEC,
        Error::OwnPod => EXIT_CONFIG,
        Error::Setup(..) => {
            eprintln!("selfdestruct: {}", e.chain());
            EXIT_FAILURE
        }
        // One line per event, each already quoted where it shows calendar text.
        Error::Calendar(_) => {
            eprintln!("selfdestruct: {e}");
            EXIT_FAILURE
        }
        Error::Client(_) => {
            eprintln!("selfdestruct: {}", e.chain());
            EXIT_CONFIG
        }
        Error::NothingToRun | Error::NoCommand(_) | Error::Setting(_) | Error::Check(_) => {
            eprintln!("selfdestruct: {e}");
            EXIT_CONFIG
        }
    }
}
