//! Running a binary of the image as a subprocess with a clean environment, its log
//! lines collected; the files its tests give it. Shared by the root crate's integration
//! tests (`tests/common/mod.rs`) and the schedule's (`schedule/tests/`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs `program` to completion and returns (exit code, combined output).
pub fn run_program_to_exit(
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let home = tempdir("run");
    let out = command(program, args, env, &home)
        .output()
        .expect("run the binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}
