//! `selfdestruct-schedule`: see docs/schedule.md. Parses the command line, runs the
//! controller or its preview ([`controller::main`]) and maps how it ended to the exit
//! code, here only.

use selfdestruct_schedule::controller::{self, Cli, Error};

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let code = match controller::main(&cli) {
        Ok(()) => selfdestruct::base::EXIT_OK,
        Err(Error::Base(e)) => selfdestruct::base::exit_code("selfdestruct-schedule", &e),
        // One line per event, each already quoted where it shows calendar text.
        Err(e @ Error::Calendar(_)) => {
            eprintln!("selfdestruct-schedule: {e}");
            selfdestruct::base::EXIT_FAILURE
        }
    };
    // Exit at once: nothing is left to flush.
    std::process::exit(code);
}
