//! `selfdestruct`, the placeholder agent (and the entrypoint wrapper): see the README.
//! Runs the binary an old subcommand names ([`selfdestruct::forward`]), else parses the
//! command line, runs the mode it names ([`selfdestruct::run`]) and maps how it ended to
//! the exit code ([`selfdestruct::exit_code`]).

use selfdestruct::Cli;

const PROGRAM: &str = "selfdestruct";

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let done = match selfdestruct::forward(&argv) {
        Some(e) => Err(e),
        None => selfdestruct::run(&Cli::parse_mode(argv).unwrap_or_else(|e| e.exit())),
    };
    let code = done.map_or_else(
        |e| selfdestruct::exit_code(PROGRAM, &e),
        |()| selfdestruct::EXIT_OK,
    );
    // Exit at once: nothing is left to flush.
    std::process::exit(code);
}
