//! Pause semantics: wait for SIGTERM/SIGINT without polling, and reap zombies when
//! PID 1. Not PID 1, nothing is reaped, as in the pause container: a `waitpid(-1)`
//! would also take the status of children others wait for by pid (kube's exec
//! plugins, through std's `Command::output()`), which then fail with ECHILD; as PID 1
//! that conflict remains (docs/reliability.md, "Zombies").
//!
//! The ground floor: it names no other module but `malloc_trim` (tests/layout.rs checks
//! it). A mode reaches the API through `connect` (above it), which implements [`Connect`].

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals the agent listens to.
pub struct Signals {
    term: Signal,
    int: Signal,
    /// SIGCHLD, only when this process reaps (PID 1).
    child: Option<Signal>,
}

/// What the agent's loop stops on: the process's own signals ([`Signals`]), or
/// nothing at all ([`Stop::Never`]) when another part of the process (the
/// entrypoint wrapper, `src/wrapper.rs`) owns the signals and ends the loop by
/// dropping its future.
pub enum Stop {
    /// SIGTERM/SIGINT end the loop; SIGCHLD reaps zombies when PID 1.
    Signals(Signals),
    /// The loop never returns on its own.
    Never,
    /// In-process (the tests' virtual-time tier): ends when the value turns
    /// `true` or the sender is dropped, as "shutdown".
    Shutdown(tokio::sync::watch::Receiver<bool>),
}

impl Stop {
    /// Resolves like [`Signals::terminated`], or never. Cancel-safe.
    pub async fn terminated(&mut self) -> &'static str {
        match self {
            Stop::Signals(s) => s.terminated().await,
            Stop::Never => std::future::pending().await,
            Stop::Shutdown(rx) => {
                let _ = rx.wait_for(|stop| *stop).await;
                "shutdown"
            }
        }
    }
}

impl Signals {
    /// Installs the handlers (before anything else, so no SIGTERM is missed).
    /// As PID 1 also the SIGCHLD handler, then reaps the zombies already there.
    pub fn install() -> std::io::Result<Self> {
        let reaper = is_pid1();
        let signals = Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            child: reaper.then(|| signal(SignalKind::child())).transpose()?,
        };
        if reaper {
            // After the handler: a child that exits from here on is signalled.
            reap_zombies();
        }
        Ok(signals)
    }

    /// Resolves with the signal's name on SIGTERM or SIGINT; as PID 1 reaps
    /// children on every SIGCHLD meanwhile. Cancel-safe: usable as a `select!` branch.
    pub async fn terminated(&mut self) -> &'static str {
        loop {
            tokio::select! {
                _ = self.term.recv() => return "SIGTERM",
                _ = self.int.recv() => return "SIGINT",
                Some(()) = async { self.child.as_mut()?.recv().await } => {
                    let n = reap_zombies();
                    if n > 0 {
                        tracing::debug!(reaped = n, "reaped zombie processes");
                    }
                }
            }
        }
    }
}

/// Reaps every exited child (one SIGCHLD can stand for many); returns how many.
/// Only for PID 1 (see the module's note).
fn reap_zombies() -> usize {
    // No child has pid 0: every reaped process counts as "other".
    reap_children(0, true).others
}

/// What [`reap_children`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reaped {
    /// How many other children (orphans, when PID 1) were reaped.
    pub(crate) others: usize,
    /// The raw wait status of the watched child, if it exited.
    pub(crate) child: Option<i32>,
}

/// With `all` (PID 1): reaps every exited child like [`reap_zombies`], but
/// keeps the wait status of `child` when its pid comes back, so a wrapper that
/// is PID 1 can both reap the orphans and learn how its own child ended.
/// Without `all`: waits (without blocking) for `child` alone, leaving every
/// other child to whoever waits for it.
pub(crate) fn reap_children(child: libc::pid_t, all: bool) -> Reaped {
    let which = if all { -1 } else { child };
    let mut out = Reaped::default();
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG only writes the status of an exited child.
        let pid = unsafe { libc::waitpid(which, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return out;
        }
        if pid == child {
            out.child = Some(status);
        } else {
            out.others += 1;
        }
        if !all {
            return out;
        }
    }
}

/// The exit code a shell would report for a wait status: the exit code, or
/// 128 + the signal number when the process was killed by a signal.
pub(crate) fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// The signals the entrypoint wrapper passes on to its child.
pub(crate) const FORWARDED: [(libc::c_int, &str); 6] = [
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGUSR2, "SIGUSR2"),
];

/// What the wrapper's handlers report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WrapperSignal {
    /// One of [`FORWARDED`]: its number and name.
    Forward(libc::c_int, &'static str),
    /// SIGCHLD: some child changed state.
    Child,
}

/// The entrypoint wrapper's handlers: every signal of `FORWARDED`, and SIGCHLD.
/// Installed first (by `main`, before anything reads a kubeconfig, and so before
/// the child is started), so nothing is missed.
pub(crate) struct WrapperSignals {
    forward: Vec<(libc::c_int, &'static str, Signal)>,
    child: Signal,
}

impl WrapperSignals {
    /// Installs the handlers.
    pub(crate) fn install() -> std::io::Result<Self> {
        let forward =
            FORWARDED.map(|(num, name)| Ok((num, name, signal(SignalKind::from_raw(num))?)));
        Ok(WrapperSignals {
            forward: forward.into_iter().collect::<std::io::Result<_>>()?,
            child: signal(SignalKind::child())?,
        })
    }

    /// The next signal. Cancel-safe: usable as a `select!` branch.
    pub(crate) async fn recv(&mut self) -> WrapperSignal {
        let forward = self.forward.iter_mut().map(|(num, name, s)| {
            let (num, name) = (*num, *name);
            Box::pin(async move {
                s.recv().await;
                WrapperSignal::Forward(num, name)
            })
        });
        let any = futures_util::future::select_all(forward);
        tokio::select! {
            // SIGCHLD first: a child's exit is acted on before a late signal
            // is forwarded to a pid that is gone.
            biased;
            _ = self.child.recv() => WrapperSignal::Child,
            (sig, _, _) = any => sig,
        }
    }

    /// Resolves with the signal's name on SIGTERM or SIGINT, for when there is
    /// no child to forward them to (before it is started, after it ended); as
    /// PID 1 reaps zombies meanwhile, and ignores the other signals. Cancel-safe.
    pub(crate) async fn terminated(&mut self) -> &'static str {
        loop {
            match self.recv().await {
                WrapperSignal::Forward(libc::SIGTERM | libc::SIGINT, name) => return name,
                WrapperSignal::Child if is_pid1() => _ = reap_zombies(),
                WrapperSignal::Forward(..) | WrapperSignal::Child => {}
            }
        }
    }
}

/// A plain pause container: gives the start-up memory back, then waits for
/// SIGTERM/SIGINT (`Ok`, whatever a mode's error type).
pub(crate) async fn pause<E>(terminated: impl Future<Output = &'static str>) -> Result<(), E> {
    crate::malloc_trim::release_idle();
    stop(terminated.await)
}

/// Logs that `signal` ends the process, which is no error.
pub fn stop<E>(signal: &str) -> Result<(), E> {
    tracing::info!(signal, "received {signal}, exiting");
    Ok(())
}

/// A mode's way to the API, as `connect` (src/connect.rs, above this floor) gives it
/// from the access found: a client with the default namespace `namespace` picks, or
/// `None`, no access here (said already); `Err` is a configuration error.
pub trait Connect<N, E> {
    /// The API client.
    type Client;
    /// The client; `cannot` says what the mode cannot do without one.
    fn client(
        self,
        namespace: N,
        cannot: &str,
    ) -> impl Future<Output = Result<Option<Self::Client>, E>>;
}

/// A mode on the client `access` gives (`namespace` picks its default namespace) until
/// `signals` fires; without one, a plain pause. The node gate's and `schedule`'s way to
/// run (the agent and the wrapper call `connect` themselves).
pub async fn on_client_or_pause<A: Connect<N, E>, N, E, F>(
    access: A,
    namespace: N,
    mut signals: Signals,
    cannot: &str,
    run_on: impl FnOnce(A::Client, Stop) -> F,
) -> Result<(), E>
where
    F: Future<Output = Result<(), E>>,
{
    let client = tokio::select! {
        sig = signals.terminated() => return stop(sig),
        client = access.client(namespace, cannot) => client?,
    };
    match client {
        Some(client) => run_on(client, Stop::Signals(signals)).await,
        None => pause(signals.terminated()).await,
    }
}

/// Whether this process is PID 1 (the init of its PID namespace).
pub(crate) fn is_pid1() -> bool {
    std::process::id() == 1
}
