//! A kubeconfig's `exec` credential plugin, run here rather than by kube (whose
//! `Command::output()` has no time limit and no output limit): in a process group of
//! its own, killed whole when it does not answer in time, its standard output read
//! up to [`MAX_OUTPUT`], non-interactively, as client-go runs it. Its credential
//! counts once its output parses, even if it runs on (then its group is killed).
//! Blocking: run it on a blocking thread. It always returns by its deadline, so no
//! thread or plugin is left behind for the next try to pile onto; and the process
//! groups of the plugins still running are killed at exit ([`kill_running`]).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use kube::config::ExecConfig;

/// The most bytes of a plugin's answer (an `ExecCredential` with a client
/// certificate and key is a few KiB).
pub(crate) const MAX_OUTPUT: usize = 1 << 20;

/// The most bytes of a plugin's standard error kept for the error message (the
/// rest is read and dropped).
const MAX_STDERR: usize = 16 << 10;

/// A plugin's standard output still open this long after it exited is held by a
/// process it started.
const HELD_AFTER_EXIT: Duration = Duration::from_millis(200);

/// What a plugin answered (its `ExecCredential`'s `status`).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Credential {
    pub(crate) token: Option<String>,
    /// RFC 3339.
    pub(crate) expiration_timestamp: Option<String>,
    /// PEM.
    pub(crate) client_certificate_data: Option<String>,
    /// PEM.
    pub(crate) client_key_data: Option<String>,
}

impl Credential {
    /// When the credential expires, if it says so.
    pub(crate) fn expires(&self) -> Result<Option<SystemTime>, PluginError> {
        let Some(t) = &self.expiration_timestamp else {
            return Ok(None);
        };
        let time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
            serde_json::from_value(serde_json::Value::String(t.clone()))
                .map_err(PluginError::Answer)?;
        Ok(Some(crate::summarize::time_of(&time)))
    }
}

#[derive(serde::Deserialize)]
struct ExecCredential {
    status: Option<Credential>,
}

/// Why a plugin gave no credential.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PluginError {
    #[error("the exec credential plugin names no command")]
    NoCommand,
    #[error("cannot start the exec credential plugin {0}")]
    Start(String, #[source] std::io::Error),
    #[error("cannot read the answer of the exec credential plugin {0}")]
    Read(String, #[source] std::io::Error),
    #[error("the exec credential plugin {0} has not answered within {secs}s (killed)", secs = .1.as_secs())]
    TimedOut(String, Duration),
    #[error("the exec credential plugin {0} printed more than {MAX_OUTPUT} bytes (killed)")]
    TooLarge(String),
    #[error("the exec credential plugin {command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: ExitStatus,
        /// Its standard error (at most [`MAX_STDERR`] bytes).
        stderr: String,
    },
    #[error("the exec credential plugin's answer is not an ExecCredential with a status")]
    Answer(#[source] serde_json::Error),
    #[error("the exec credential plugin's answer has no status")]
    NoStatus,
}

impl PluginError {
    /// The plugin did not answer in time: worth another try later.
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, PluginError::TimedOut(..))
    }
}

/// Runs the plugin of `exec` and returns its credential, within `limit`.
pub(crate) fn run(exec: &ExecConfig, limit: Duration) -> Result<Credential, PluginError> {
    let program = exec.command.as_deref().ok_or(PluginError::NoCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(exec.args.iter().flatten());
    let env = exec.env.iter().flatten();
    cmd.envs(env.filter_map(|e| Some((e.get("name")?, e.get("value")?))));
    // As kube: the request's description, never interactive here (no terminal in a pod).
    let mut spec = serde_json::json!({ "interactive": false });
    if exec.provide_cluster_info
        && let Some(cluster) = &exec.cluster
    {
        spec["cluster"] = serde_json::to_value(cluster).unwrap_or_default();
    }
    let info = serde_json::json!({
        "apiVersion": exec.api_version, "kind": "ExecCredential", "spec": spec,
    });
    cmd.env("KUBERNETES_EXEC_INFO", info.to_string());
    for k in exec.drop_env.iter().flatten() {
        cmd.env_remove(k);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: killed whole, with anything it started.
        .process_group(0);
    let start = |e| PluginError::Start(program.to_string(), e);
    let child = {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        let exiting = || std::io::Error::other("selfdestruct is exiting");
        let groups = running.as_mut().ok_or_else(|| start(exiting()))?;
        let child = cmd.spawn().map_err(start)?;
        groups.push(child.id() as libc::pid_t);
        child
    };
    let (stdout, stderr, status) = Running(child).collect(program, limit)?;
    // `None`: reaped by PID 1's reaper first; its answer tells.
    if let Some(status) = status.filter(|s| !s.success()) {
        return Err(PluginError::Failed {
            command: program.to_string(),
            status,
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
        });
    }
    let answer: ExecCredential = serde_json::from_slice(&stdout).map_err(PluginError::Answer)?;
    answer.status.ok_or(PluginError::NoStatus)
}

/// The process groups of the plugins running; `None` once [`kill_running`] killed
/// them: no plugin starts after.
static RUNNING: Mutex<Option<Vec<libc::pid_t>>> = Mutex::new(Some(Vec::new()));

/// Kills the process group of every plugin still running, and starts none after: at
/// the process's exit (SIGTERM too), whatever its PID, as the blocking thread that
/// waits for a plugin is left behind.
pub(crate) fn kill_running() {
    let groups = RUNNING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    for group in groups.into_iter().flatten() {
        // SAFETY: a signal to the process group a plugin leads.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// Whether a plugin's output so far is a whole `ExecCredential` with a status.
fn answered(stdout: &[u8]) -> bool {
    serde_json::from_slice::<ExecCredential>(stdout).is_ok_and(|a| a.status.is_some())
}

/// A started plugin; its process group is killed when this is dropped (anything it
/// left running, holding its output or not, as the plugin itself if it runs on).
struct Running(Child);

/// A plugin's standard output and error, and how it ended (`None`: reaped by
/// another waiter).
type Output = (Vec<u8>, Vec<u8>, Option<ExitStatus>);

impl Running {
    /// Its standard output and error, read to their ends, and how it ended,
    /// within `limit`.
    fn collect(mut self, program: &str, limit: Duration) -> Result<Output, PluginError> {
        let deadline = Instant::now() + limit;
        let child = &mut self.0;
        let mut pipes = [
            child.stdout.take().map(|p| File::from(OwnedFd::from(p))),
            child.stderr.take().map(|p| File::from(OwnedFd::from(p))),
        ];
        let mut out = [Vec::new(), Vec::new()];
        let mut status = None;
        // When it was seen to have exited.
        let mut exited: Option<Instant> = None;
        let mut told = false;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PluginError::TimedOut(program.to_string(), limit));
            }
            if exited.is_none() {
                match child.try_wait() {
                    Ok(Some(s)) => (status, exited) = (Some(s), Some(Instant::now())),
                    Ok(None) => {}
                    // ECHILD: PID 1's reaper took its status.
                    Err(_) => exited = Some(Instant::now()),
                }
            }
            // Its output's end may still be on its way just after it exits.
            let held = exited.is_some_and(|t| t.elapsed() >= HELD_AFTER_EXIT);
            if held && pipes[0].is_some() && !told {
                told = true;
                tracing::warn!(
                    plugin = %program,
                    "the exec credential plugin has exited but its standard output is still open: \
                     a process it started holds it; waiting for it to close (at most {}s)",
                    left.as_secs()
                );
            }
            // Once it has exited and closed its standard output, its standard error is
            // read as far as it is there; till then, wake at least every 50 ms to notice
            // the plugin's exit.
            let done = pipes[0].is_none() && exited.is_some();
            let wait = if done {
                Duration::ZERO
            } else {
                left.min(Duration::from_millis(50))
            };
            let ready = poll(&pipes, wait.as_millis() as libc::c_int);
            if done && !ready[1] {
                break;
            }
            for (i, pipe) in pipes.iter_mut().enumerate() {
                let Some(p) = pipe.as_mut().filter(|_| ready[i]) else {
                    continue;
                };
                let read = p
                    .read(&mut buf)
                    .map_err(|e| PluginError::Read(program.to_string(), e))?;
                if read == 0 {
                    *pipe = None;
                    continue;
                }
                let keep = if i == 0 {
                    read
                } else {
                    read.min(MAX_STDERR.saturating_sub(out[1].len()))
                };
                out[i].extend_from_slice(&buf[..keep]);
                if out[0].len() > MAX_OUTPUT {
                    return Err(PluginError::TooLarge(program.to_string()));
                }
            }
            // A whole credential counts, whether the plugin runs on or not.
            if ready[0] && answered(&out[0]) {
                break;
            }
        }
        let [stdout, stderr] = out;
        Ok((stdout, stderr, status))
    }
}

/// Which of `pipes` can be read without blocking (data or their end), waiting
/// up to `wait_ms`.
fn poll(pipes: &[Option<File>; 2], wait_ms: libc::c_int) -> [bool; 2] {
    let mut fds = pipes.each_ref().map(|p| libc::pollfd {
        // A negative fd is skipped by poll (which then only waits).
        fd: p.as_ref().map_or(-1, |f| f.as_raw_fd()),
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: `fds` is an array of two pollfd.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait_ms) };
    if n <= 0 {
        return [false; 2];
    }
    fds.map(|f| f.fd >= 0 && f.revents != 0)
}

impl Drop for Running {
    fn drop(&mut self) {
        let group = self.0.id() as libc::pid_t;
        // The whole group: the plugin and whatever it started (and left holding its output).
        // SAFETY: a signal to the process group this plugin leads.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
        let _ = self.0.wait();
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(groups) = running.as_mut() {
            groups.retain(|g| *g != group);
        }
    }
}

#[cfg(test)]
mod tests;
