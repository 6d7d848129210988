//! `selfdestruct-node-gate`: see docs/node-gate.md. Parses the command line, runs the
//! gate ([`selfdestruct::node_gate::main`]) and maps how it ended to the exit code
//! ([`selfdestruct::exit_code`]).

use selfdestruct::node_gate::{self, Cli};

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let code = match node_gate::main(&cli) {
        Ok(()) => selfdestruct::EXIT_OK,
        Err(e) => selfdestruct::exit_code("selfdestruct-node-gate", &e),
    };
    // Exit at once: nothing is left to flush.
    std::process::exit(code);
}
