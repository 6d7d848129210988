//! Shared helpers of the integration tests: run the real `selfdestruct` binary as
//! a subprocess with a clean environment, collect its log lines, signal it.
#![allow(dead_code)]

pub mod cluster;
// The proptest configuration lives with the decision's property tests (a crate
// this one depends on); tests/parser_fuzz.rs shares it.
#[path = "../../decision/tests/common/mod.rs"]
pub mod props;
pub mod vtime;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// A fresh temporary folder for one test (unique within and across test processes).
pub fn tempdir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let d = std::env::temp_dir().join(format!(
        "selfdestruct-test-{tag}-{}-{n}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// A command for the binary with an empty environment (no kubeconfig, no
/// in-cluster variables leak in), plus `env`.
pub fn command(program: &str, args: &[&str], env: &[(&str, &str)], home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("SELFDESTRUCT_PODINFO_DIR", home.join("no-podinfo"))
        .env(
            "SELFDESTRUCT_SERVICE_ACCOUNT_DIR",
            home.join("no-serviceaccount"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A running process whose stdout and stderr lines are collected.
pub struct Proc {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
    pub started: Instant,
}

impl Proc {
    pub fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd.spawn().expect("spawn the binary");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let sink = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if std::env::var_os("SELFDESTRUCT_TEST_ECHO").is_some() {
                        eprintln!("  | {line}");
                    }
                    sink.lock().expect("log lock").push(line);
                }
            });
        }
        Proc {
            child,
            lines,
            started: Instant::now(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        self.lines.lock().expect("log lock").join("\n")
    }

    /// Waits until a log line contains `needle`; false on timeout.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.log().contains(needle))
    }

    pub fn count_log(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .expect("log lock")
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(self.pid() as i32, sig);
        }
    }

    /// Waits for the exit, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // let the reader threads drain
                std::thread::sleep(Duration::from_millis(20));
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// Sends SIGTERM and returns the exit status and how long the exit took.
    pub fn terminate(&mut self) -> (Option<ExitStatus>, Duration) {
        let t = Instant::now();
        self.signal(libc::SIGTERM);
        let status = self.wait_exit(Duration::from_secs(10));
        (status, t.elapsed())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 20 ms until it is true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the binary to completion and returns (exit code, combined output).
pub fn run_to_exit(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let home = tempdir("run");
    let out = command(bin(), args, env, &home)
        .output()
        .expect("run the binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
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

/// A kubeconfig (YAML) with one cluster at `server` and one user, whose
/// fields under `user:` are `user` (one per line, e.g. `tokenFile: /path`),
/// in a context of namespace `namespace`.
pub fn kubeconfig_with_user(server: &str, user: &str, namespace: &str) -> String {
    let user: String = user.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {server}\n\
         users:\n- name: u\n  user:\n{user}\
         contexts:\n- name: c\n  context:\n    cluster: t\n    user: u\n    namespace: {namespace}\n\
         current-context: c\n"
    )
}

/// The `user:` fields of a kubeconfig whose credentials come from the exec
/// plugin `command`, run non-interactively.
pub fn exec_user(command: &Path) -> String {
    format!(
        "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: {}\n  interactiveMode: Never",
        command.display()
    )
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
}
