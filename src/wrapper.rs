//! The entrypoint wrapper: `selfdestruct [OPTIONS] -- CMD [ARGS...]` runs CMD as its
//! child and is its init: it forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
//! SIGUSR2, reaps zombies without losing the child's own status, and exits with the
//! child's code (128 + N when signal N killed it).
//!
//! Alongside, the agent's decision loop (with [`Stop::Never`]) applies its triggers to
//! the pod around it: the eviction's SIGTERM is forwarded and the child's exit ends the
//! wrapper. With `SELFDESTRUCT_ON_EXIT=delete`, a child that exits on its own takes the
//! pod with it (a uid-guarded delete) within `DELETE_LIMIT`; SIGTERM or SIGINT during
//! it exits at once. docs/other-workloads.md has the details.

use std::ffi::OsString;
use std::time::Duration;

use kube::runtime::events::EventType;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::access::Discovered;
use crate::agent::{self, Ready, Start};
use crate::api::{Mode, outcome_of, rbac_hint};
use crate::config::{Config, OnExit};
use crate::connect::no_access;
use crate::error::{Error, Result};
use crate::logging::Chain;
use crate::signals::{self, Stop, WrapperSignal, WrapperSignals};
use selfdestruct_decision::Outcome;

/// How long a child's exit waits for the own pod to be read before
/// `SELFDESTRUCT_ON_EXIT=delete` gives up.
const DELETE_SETUP_WAIT: Duration = Duration::from_secs(10);

/// How long `SELFDESTRUCT_ON_EXIT=delete` may take in all (reading the own pod,
/// the Event, the delete and its retries) before the wrapper exits without it.
const DELETE_LIMIT: Duration = Duration::from_secs(20);

/// Runs `program` with `args` as the child, to its end, on the API `access` and the
/// `signals` that `main` set up: [`Error::Child`] with its code if not 0.
pub(crate) async fn run(
    cfg: Config,
    program: OsString,
    args: Vec<OsString>,
    access: Discovered,
    mut signals: WrapperSignals,
) -> Result {
    let argv = std::iter::once(&program).chain(&args);
    let command = argv
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let child = std::process::Command::new(&program)
        .args(&args)
        .spawn()
        .inspect_err(|e| error!(command = %command, error = %e, "cannot start the command"))
        .map_err(Error::Spawn)?;
    // Reaped with waitpid below, not through `Child`: as PID 1 every orphan is
    // ours too, and a reaper must not swallow the child's status.
    let pid = child.id() as libc::pid_t;
    drop(child);
    // Only PID 1 reaps others' children: otherwise a wait for any pid could take
    // the status of a child std waits for (kube's exec-credential plugins).
    let reaper = signals::is_pid1();
    info!(
        pid,
        command = %command,
        on_exit = if cfg.on_exit == OnExit::Delete { "delete" } else { "exit" },
        pid1 = reaper,
        "started the command as the child of selfdestruct"
    );

    // The agent side publishes the own pod here once it has read it.
    let (known, mut own_pod) = watch::channel(None);
    let agent_side = agent_side(cfg.clone(), access, known);
    tokio::pin!(agent_side);

    let mut terminating = None;
    let status = loop {
        tokio::select! {
            sig = signals.recv() => match sig {
                WrapperSignal::Child => {
                    let reaped = signals::reap_children(pid, reaper);
                    if reaped.others > 0 {
                        debug!(reaped = reaped.others, "reaped zombie processes");
                    }
                    if let Some(status) = reaped.child {
                        break status;
                    }
                }
                WrapperSignal::Forward(num, name) => {
                    if num == libc::SIGTERM || num == libc::SIGINT {
                        terminating = Some(name);
                        info!(signal = name, "received {name}: forwarded to the child; exiting when it does");
                    } else {
                        info!(signal = name, "forwarding {name} to the child");
                    }
                    // SAFETY: a signal to our own child, which is not reaped yet
                    // (at worst a zombie), so the pid cannot have been reused.
                    unsafe {
                        libc::kill(pid, num);
                    }
                }
            },
            () = &mut agent_side => {}
        }
    };
    let code = signals::exit_code(status);
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        info!(code, signal, "the child was killed by signal {signal}");
    } else {
        info!(code, "the child exited with code {code}");
    }
    if cfg.on_exit == OnExit::Delete {
        match terminating {
            Some(sig) => info!(
                signal = sig,
                "not deleting the own pod: it is being stopped already ({sig})"
            ),
            None => {
                // Bounded in all, and SIGTERM/SIGINT end it at once: the child is gone,
                // nothing else keeps the container.
                let deletion = tokio::time::timeout(
                    DELETE_LIMIT,
                    delete_on_exit(&cfg, &mut agent_side, &mut own_pod, code),
                );
                tokio::select! {
                    done = deletion => if done.is_err() {
                        warn!(
                            "SELFDESTRUCT_ON_EXIT=delete: the own pod was not deleted within {}s: \
                             exiting without it; the kubelet restarts the container in place",
                            DELETE_LIMIT.as_secs()
                        );
                    },
                    sig = signals.terminated() => info!(
                        signal = sig,
                        "received {sig} while deleting the own pod: exiting with the child's code"
                    ),
                }
            }
        }
    }
    (code == 0).then_some(()).ok_or(Error::Child(code))
}

/// `SELFDESTRUCT_ON_EXIT=delete` after the child exited with `code`: waits for
/// the own pod to be read (the child may have ended first), then deletes it.
async fn delete_on_exit(
    cfg: &Config,
    agent_side: &mut (impl Future<Output = ()> + Unpin),
    own_pod: &mut watch::Receiver<Option<Ready>>,
    code: i32,
) {
    // The agent side (still running) gets a moment to finish reading it.
    let read = tokio::time::timeout(DELETE_SETUP_WAIT, async {
        tokio::select! {
            () = agent_side => None,
            own = own_pod.wait_for(Option::is_some) => own.ok().and_then(|o| o.clone()),
        }
    })
    .await;
    match read.ok().flatten() {
        Some(ready) => delete_own_pod(cfg, &ready, code).await,
        None => warn!(
            "SELFDESTRUCT_ON_EXIT=delete: the own pod is unknown (no API access, see above): \
             cannot delete it; the kubelet restarts the container in place"
        ),
    }
}

/// The agent's decision loop, never returning: it reads the own pod (and
/// publishes it in `known`), then runs until the wrapper drops it. Without API
/// access, or the own pod, it says once what it cannot do: the child runs on.
async fn agent_side(cfg: Config, access: Discovered, known: watch::Sender<Option<Ready>>) {
    let cannot = "cannot move the pod (lifetime, new nodes) or delete it on exit";
    let mut never = Stop::Never;
    match agent::prepare(&cfg, access, &mut never).await {
        Ok(Start::Ready(ready)) => {
            known.send_replace(Some((*ready).clone()));
            // With `Stop::Never` it returns only when dropped.
            let _ = ready.decision_loop(cfg, &mut never).await;
        }
        Ok(Start::NoAccess(why)) => no_access(
            &why,
            &format!(
                "running the command as a plain init (signals forwarded, zombies reaped, its exit code kept), but {cannot}"
            ),
        ),
        Ok(Start::NotOurs) | Err(Error::OwnPod) => {
            warn!(
                "cannot identify the own pod (see above): running the command as a plain init, but {cannot}"
            )
        }
        // The child runs already: a configuration error found now is said, not exited on.
        Err(e) => error!(error = %e.chain(), "running the command as a plain init, but {cannot}"),
        Ok(Start::Stopped(_)) => {}
    }
    std::future::pending::<()>().await
}

/// `SELFDESTRUCT_ON_EXIT=delete`: deletes the own pod with the uid precondition,
/// retrying server and network errors a few times.
async fn delete_own_pod(cfg: &Config, ready: &Ready, code: i32) {
    let (api, uid, namespace) = (&ready.api, &ready.own.uid, &ready.own.namespace);
    let reason =
        format!("command exited with code {code}: deleting the pod (SELFDESTRUCT_ON_EXIT=delete)");
    if cfg.dry_run {
        info!(dry_run = true, reason = %reason, "dry run: would delete own pod");
        return;
    }
    api.event(EventType::Normal, uid, "Delete", "SelfDestruct", &reason)
        .await;
    for attempt in 1..=3u32 {
        let res = api.remove(Mode::Delete, uid, cfg.grace_period).await;
        match (outcome_of(&res), &res) {
            (Outcome::Done, _) => {
                info!(outcome = "done", "deleted own pod ({reason})");
                return;
            }
            (Outcome::Gone, Err(e)) => {
                info!(outcome = "gone", error = %Chain(e), "own pod is already gone or replaced");
                return;
            }
            (Outcome::Denied, Err(e)) => {
                warn!(
                    outcome = "denied", error = %Chain(e),
                    hint = %rbac_hint(e.code(), "delete", "pods", namespace),
                    "not allowed to delete own pod; the kubelet restarts the container in place"
                );
                return;
            }
            (_, Err(e)) if attempt < 3 => {
                warn!(outcome = "failed", error = %Chain(e), attempt, "delete failed; retrying");
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
            }
            (_, Err(e)) => {
                warn!(outcome = "failed", error = %Chain(e), "delete failed; giving up");
                return;
            }
            (_, Ok(())) => return,
        }
    }
}
