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
    let pid = start(&cfg, &program, &args)?;
    // The agent side publishes the own pod here once it has read it; it never ends.
    let (known, mut own_pod) = watch::channel(None);
    let agent_side = agent_side(cfg.clone(), access, known);
    tokio::pin!(agent_side);
    let mut wrapped = Wrapped::default();
    let status = tokio::select! {
        status = wait_for_child(pid, &mut signals, &mut wrapped) => status,
        () = &mut agent_side => unreachable!("the agent side never returns"),
    };
    let Ending {
        code,
        signal,
        delete,
    } = wrapped.ended(status, cfg.on_exit);
    match signal {
        Some(signal) => info!(code, signal, "the child was killed by signal {signal}"),
        None => info!(code, "the child exited with code {code}"),
    }
    if let (OnExit::Delete, Some(sig)) = (cfg.on_exit, wrapped.terminating) {
        info!(
            signal = sig,
            "not deleting the own pod: it is being stopped already ({sig})"
        );
    }
    if delete {
        // Bounded in all, and SIGTERM/SIGINT end it at once: the child is gone, nothing
        // else keeps the container.
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
    (code == 0).then_some(()).ok_or(Error::Child(code))
}

/// Starts `program` with `args` as the child; its pid.
fn start(cfg: &Config, program: &OsString, args: &[OsString]) -> Result<libc::pid_t> {
    let argv = std::iter::once(program).chain(args);
    let command = argv
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let child = std::process::Command::new(program)
        .args(args)
        .spawn()
        .inspect_err(|e| error!(command = %command, error = %e, "cannot start the command"))
        .map_err(Error::Spawn)?;
    // Reaped with waitpid, not through `Child`: as PID 1 every orphan is ours too, and a
    // reaper must not swallow the child's status.
    let pid = child.id() as libc::pid_t;
    info!(
        pid,
        command = %command,
        on_exit = if cfg.on_exit == OnExit::Delete { "delete" } else { "exit" },
        pid1 = signals::is_pid1(),
        "started the command as the child of selfdestruct"
    );
    Ok(pid)
}

/// Passes the signals on to the child `pid` and reaps (as PID 1, every orphan too)
/// until it ends; its wait status.
async fn wait_for_child(
    pid: libc::pid_t,
    signals: &mut WrapperSignals,
    wrapped: &mut Wrapped,
) -> i32 {
    // Only PID 1 reaps others' children: otherwise a wait for any pid could take the
    // status of a child std waits for (kube's exec-credential plugins).
    let reaper = signals::is_pid1();
    loop {
        match signals.recv().await {
            WrapperSignal::Child => {
                let reaped = signals::reap_children(pid, reaper);
                if reaped.others > 0 {
                    debug!(reaped = reaped.others, "reaped zombie processes");
                }
                if let Some(status) = reaped.child {
                    return status;
                }
            }
            WrapperSignal::Forward(num, name) => {
                if wrapped.forwarded(num, name) {
                    info!(
                        signal = name,
                        "received {name}: forwarded to the child; exiting when it does"
                    );
                } else {
                    info!(signal = name, "forwarding {name} to the child");
                }
                // SAFETY: a signal to our own child, which is not reaped yet (at worst a
                // zombie), so the pid cannot have been reused.
                unsafe {
                    libc::kill(pid, num);
                }
            }
        }
    }
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
    for attempt in 1.. {
        let res = api.remove(Mode::Delete, uid, cfg.grace_period).await;
        let outcome = outcome_of(&res);
        let retry = retry_delete(&outcome, attempt);
        match (outcome, res) {
            (Outcome::Done, _) => info!(outcome = "done", "deleted own pod ({reason})"),
            (Outcome::Gone, Err(e)) => {
                info!(outcome = "gone", error = %Chain(&e), "own pod is already gone or replaced")
            }
            (Outcome::Denied, Err(e)) => warn!(
                outcome = "denied", error = %Chain(&e),
                hint = %rbac_hint(e.code(), "delete", "pods", namespace),
                "not allowed to delete own pod; the kubelet restarts the container in place"
            ),
            (_, Err(e)) if retry.is_some() => {
                warn!(outcome = "failed", error = %Chain(&e), attempt, "delete failed; retrying")
            }
            (_, Err(e)) => {
                warn!(outcome = "failed", error = %Chain(&e), "delete failed; giving up")
            }
            (_, Ok(())) => {}
        }
        match retry {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return,
        }
    }
}

// --- the pure part: what the signals and the child's end mean, tested without I/O ---

/// How the child ended, as the wrapper reports it.
#[derive(Debug, PartialEq)]
struct Ending {
    /// The wrapper's exit code: the child's, or 128 + N when signal N killed it.
    code: i32,
    /// The signal that killed the child.
    signal: Option<i32>,
    /// `SELFDESTRUCT_ON_EXIT=delete` applies: the own pod is deleted first.
    delete: bool,
}

/// What the wrapper has seen of the signals.
#[derive(Debug, Default)]
struct Wrapped {
    /// SIGTERM or SIGINT came (and went on to the child): the pod is being stopped.
    terminating: Option<&'static str>,
}

impl Wrapped {
    /// Signal `num` (`name`) goes on to the child: whether it stops the wrapper too
    /// (SIGTERM, SIGINT), once the child has ended.
    fn forwarded(&mut self, num: libc::c_int, name: &'static str) -> bool {
        let stops = num == libc::SIGTERM || num == libc::SIGINT;
        if stops {
            self.terminating = Some(name);
        }
        stops
    }

    /// The child ended with wait `status`: the wrapper's exit code, and whether it first
    /// deletes the own pod (`on_exit` delete, unless the pod is being stopped already).
    fn ended(&self, status: i32, on_exit: OnExit) -> Ending {
        Ending {
            code: signals::exit_code(status),
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
            delete: on_exit == OnExit::Delete && self.terminating.is_none(),
        }
    }
}

/// The wait before another delete after attempt `attempt` (from 1) answered `outcome`;
/// `None`: done, gone, denied, or the third failure.
fn retry_delete(outcome: &Outcome, attempt: u32) -> Option<Duration> {
    match outcome {
        Outcome::Done | Outcome::Gone | Outcome::Denied => None,
        _ => (attempt < 3).then(|| Duration::from_secs(u64::from(attempt))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait status: exited with `code`, or killed by `signal`.
    fn exited(code: i32) -> i32 {
        code << 8
    }
    fn killed(signal: i32) -> i32 {
        signal
    }

    /// Signals passed on, the child's wait status, the on-exit setting, and the end.
    type Case = (&'static [(i32, &'static str)], i32, OnExit, Ending);

    #[test]
    fn the_signals_that_stop_the_wrapper_and_the_childs_end() {
        #[rustfmt::skip]
        let table: &[Case] = &[
            (&[], exited(0), OnExit::Exit, Ending { code: 0, signal: None, delete: false }),
            (&[], exited(3), OnExit::Exit, Ending { code: 3, signal: None, delete: false }),
            (&[], killed(libc::SIGKILL), OnExit::Exit, Ending { code: 137, signal: Some(9), delete: false }),
            // On its own, the child takes the pod with it.
            (&[], exited(0), OnExit::Delete, Ending { code: 0, signal: None, delete: true }),
            (&[], killed(libc::SIGSEGV), OnExit::Delete, Ending { code: 139, signal: Some(11), delete: true }),
            // Signals passed on that stop nothing: still its own end.
            (&[(libc::SIGHUP, "SIGHUP"), (libc::SIGUSR1, "SIGUSR1")], exited(1), OnExit::Delete,
             Ending { code: 1, signal: None, delete: true }),
            // The pod is being stopped (an eviction's SIGTERM, a SIGINT): no delete.
            (&[(libc::SIGTERM, "SIGTERM")], killed(libc::SIGTERM), OnExit::Delete,
             Ending { code: 143, signal: Some(15), delete: false }),
            (&[(libc::SIGQUIT, "SIGQUIT"), (libc::SIGINT, "SIGINT")], exited(0), OnExit::Delete,
             Ending { code: 0, signal: None, delete: false }),
        ];
        for (sent, status, on_exit, want) in table {
            let mut w = Wrapped::default();
            let stops: Vec<bool> = sent.iter().map(|(n, name)| w.forwarded(*n, name)).collect();
            let expected: Vec<bool> = sent.iter().map(|(n, _)| [15, 2].contains(n)).collect();
            assert_eq!(stops, expected, "{sent:?}");
            assert_eq!(
                &w.ended(*status, *on_exit),
                want,
                "{sent:?} {status} {on_exit:?}"
            );
        }
    }

    #[test]
    fn a_delete_on_exit_is_tried_three_times_at_most_and_never_after_an_answer() {
        let failed = Outcome::Failed;
        let busy = Outcome::Busy { retry_after: None };
        assert_eq!(retry_delete(&failed, 1), Some(Duration::from_secs(1)));
        assert_eq!(retry_delete(&busy, 2), Some(Duration::from_secs(2)));
        assert_eq!(retry_delete(&failed, 3), None);
        for answered in [Outcome::Done, Outcome::Gone, Outcome::Denied] {
            assert_eq!(retry_delete(&answered, 1), None, "{answered:?}");
        }
    }
}
