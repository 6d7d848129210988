//! Shared helpers of the integration tests: run the real `selfdestruct` binary as
//! a subprocess with a clean environment, collect its log lines, signal it.
#![allow(dead_code)]

pub mod cluster;
// The proptest configuration lives with the decision's property tests (a crate
// this one depends on); tests/parser_fuzz.rs shares it.
#[path = "../../decision/tests/common/mod.rs"]
pub mod props;
pub mod vtime;
// What the schedule's tests (schedule/tests/) share with these: a process and its log.
mod process;
pub use process::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Path of the binary under test: `SELFDESTRUCT_TEST_BIN` if set (another build of it,
/// such as the static release build for the memory figures `tests/hardening.rs` prints),
/// else this build's.
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("SELFDESTRUCT_TEST_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_selfdestruct").into())
    })
}

/// The node gate's binary, beside [`bin`] (the image ships them together).
pub fn gate_bin() -> String {
    let gate = Path::new(bin()).with_file_name("selfdestruct-node-gate");
    gate.to_string_lossy().into_owned()
}

/// Runs the binary to completion and returns (exit code, combined output).
pub fn run_to_exit(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    run_program_to_exit(bin(), args, env)
}

/// The children of `pid` with their state letter (`Z` = zombie), from /proc.
pub fn children_of(pid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[1].parse::<u32>().ok() == Some(pid) {
            out.push((child, f[0].chars().next().unwrap_or('?')));
        }
    }
    out
}

/// The precondition of the PID-1 tests: this machine lets them start a new PID
/// namespace (`unshare --pid --fork --mount-proc`, which needs root or user
/// namespaces). CI runs as root and has `unshare`; where it cannot, the test
/// fails here and says why (it never passes without running).
pub fn require_pid_namespaces() {
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return,
        Ok(o) => format!(
            "{}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("cannot run unshare: {e}"),
    };
    panic!(
        "this test runs selfdestruct as PID 1 of a new PID namespace and needs root (or user \
         namespaces) and util-linux's `unshare`, as CI has; `unshare --pid --fork --mount-proc \
         true` failed here: {why}"
    );
}

/// Shell commands that leave `n` orphans behind for the shell's PID 1 (the
/// `sh -c` around each one exits at once). Each orphan lives until the file
/// `go` appears in `dir` ([`release_orphans`]) and then exits, so a test sees
/// them alive first and then decides when they end, instead of guessing how
/// long a `sleep` takes under load.
pub fn orphans(n: usize, dir: &Path) -> String {
    let go = dir.join("go");
    format!(
        "for i in $(seq {n}); do sh -c 'while [ ! -e \"{}\" ]; do sleep 0.05; done &'; done",
        go.display()
    )
}

/// Lets the orphans of [`orphans`] exit.
pub fn release_orphans(dir: &Path) {
    std::fs::write(dir.join("go"), "").expect("write the release file");
}

/// The children of `pid` that are `sh` (the orphans of [`orphans`], alive or zombie).
pub fn orphan_shells(pid: u32) -> Vec<(u32, char)> {
    children_of(pid)
        .into_iter()
        .filter(|(c, _)| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|comm| comm.trim() == "sh")
        })
        .collect()
}

/// `argv` run as PID 1 of a new PID namespace (with its own /proc), in the
/// clean environment of [`command`].
pub fn in_pid_namespace(argv: &[&str], env: &[(&str, &str)], home: &Path) -> Command {
    let mut args = vec!["--pid", "--fork", "--mount-proc"];
    args.extend_from_slice(argv);
    command("unshare", &args, env, home)
}

/// The PID (outside) of the init of the PID namespace `unshare` started, once it runs.
pub fn init_of(unshare: &Proc, timeout: Duration) -> Option<u32> {
    let mut init = None;
    wait_until(timeout, || {
        init = children_of(unshare.pid()).first().map(|c| c.0);
        init.is_some()
    });
    init
}

/// A kubeconfig in `dir` whose user's `exec` credential plugin never answers
/// (it sleeps 120 s), for a server never reached; and the file where the
/// plugin writes its pid once it runs (see [`kill_plugin`]).
pub fn hanging_plugin_kubeconfig(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let pidfile = dir.join("plugin.pid");
    let script = dir.join("hanging-plugin.sh");
    let text = format!(
        "#!/bin/sh\necho $$ > {}\nexec sleep 120\n",
        pidfile.display()
    );
    std::fs::write(&script, text).expect("write the plugin");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let kubeconfig = dir.join("hanging-plugin-kubeconfig");
    let text = kubeconfig_with_user("http://127.0.0.1:1", &exec_user(&script), "ns");
    std::fs::write(&kubeconfig, text).expect("write the kubeconfig");
    (kubeconfig, pidfile)
}

/// Whether the plugin of [`hanging_plugin_kubeconfig`] runs (it wrote its pid).
pub fn plugin_started(pidfile: &Path) -> bool {
    std::fs::read_to_string(pidfile).is_ok_and(|t| t.trim().parse::<i32>().is_ok())
}

/// Ends the plugin of [`hanging_plugin_kubeconfig`], if it started: the process
/// that ran it leaves it behind when it exits.
pub fn kill_plugin(pidfile: &Path) {
    if let Some(pid) = std::fs::read_to_string(pidfile)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    {
        // SAFETY: a signal to the test's own plugin process (at worst a gone pid).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// The `user:` fields of a kubeconfig whose credentials come from the exec
/// plugin `command`, run non-interactively.
pub fn exec_user(command: &Path) -> String {
    format!(
        "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: {}\n  interactiveMode: Never",
        command.display()
    )
}
