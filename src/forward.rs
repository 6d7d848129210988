//! The modes that became binaries of their own, for one release: `selfdestruct
//! schedule ...` and `selfdestruct node-gate ...` run `selfdestruct-schedule ...` and
//! `selfdestruct-node-gate ...` found beside this binary, in its place (`exec`: the same
//! pid, so PID 1 stays PID 1), after a deprecation line on stderr.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use crate::error::Error;

/// The old subcommands and the binaries that took them over.
const MOVED: [(&str, &str); 2] = [
    ("schedule", "selfdestruct-schedule"),
    ("node-gate", "selfdestruct-node-gate"),
];

/// The old subcommand `argv` names, its binary, and that binary's arguments: those
/// after the subcommand, after the `--flag=value` ones before it (`selfdestruct
/// --log-level=debug schedule`: the shared settings, which every binary reads). `None`:
/// no old subcommand, the agent's own command line.
fn moved(argv: &[OsString]) -> Option<(&'static str, &'static str, Vec<OsString>)> {
    let flag = |a: &OsString| {
        a.to_str()
            .is_some_and(|a| a.starts_with("--") && a.contains('='))
    };
    let at = 1 + argv.iter().skip(1).position(|a| !flag(a))?;
    let &(subcommand, binary) = MOVED.iter().find(|(old, _)| argv[at] == *old)?;
    let args = argv[1..at].iter().chain(&argv[at + 1..]).cloned().collect();
    Some((subcommand, binary, args))
}

/// Runs the binary of the old subcommand `argv` names in place of this process. Returns
/// only when `argv` names none (`None`), or with why that binary cannot be run.
pub fn forward(argv: &[OsString]) -> Option<Error> {
    let (subcommand, binary, args) = moved(argv)?;
    let exe = std::env::current_exe().unwrap_or_else(|_| argv[0].clone().into());
    let path = exe.with_file_name(binary);
    eprintln!(
        "selfdestruct: warning: `selfdestruct {subcommand}` is deprecated and goes in the next \
         release: run `{binary}` (beside selfdestruct in the image) instead; running {}",
        path.display()
    );
    let source = std::process::Command::new(&path).args(args).exec();
    Some(Error::Moved {
        subcommand,
        path,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved_of(argv: &[&str]) -> Option<(&'static str, Vec<String>)> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let (_, binary, args) = moved(&argv)?;
        let args = args.iter().map(|a| a.to_string_lossy().into_owned());
        Some((binary, args.collect()))
    }

    #[test]
    fn old_subcommands_name_their_binary_and_pass_the_arguments_on() {
        let s = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        /// An argv, and the binary it runs with that binary's arguments (`None`: the agent).
        type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a [&'a str])>);
        let table: &[Case] = &[
            (&["sd", "schedule"], Some(("selfdestruct-schedule", &[]))),
            (
                &["sd", "schedule", "preview", "2", "--from=2026-03-02"],
                Some((
                    "selfdestruct-schedule",
                    &["preview", "2", "--from=2026-03-02"],
                )),
            ),
            (
                &["sd", "--log-level=debug", "node-gate", "--gate-poll=5s"],
                Some((
                    "selfdestruct-node-gate",
                    &["--log-level=debug", "--gate-poll=5s"],
                )),
            ),
            // The agent's own command lines.
            (&["sd"], None),
            (&["sd", "--max-lifetime=1h"], None),
            (&["sd", "check-settings", "SELFDESTRUCT_MODE=evict"], None),
            (&["sd", "--", "schedule"], None),
            (&["sd", "--on-exit=delete", "--", "node-gate"], None),
            // A flag's value that happens to be the old name is no subcommand.
            (&["sd", "--sibling-selector", "node-gate"], None),
        ];
        for (argv, want) in table {
            let want = want.map(|(b, args)| (b, s(args)));
            assert_eq!(moved_of(argv), want, "{argv:?}");
        }
    }
}
