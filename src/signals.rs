//! Pause semantics: wait for SIGTERM/SIGINT without polling, and reap zombies
//! (as PID 1 every orphan in the pod's PID namespace becomes our child).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals the agent listens to.
pub struct Signals {
    term: Signal,
    int: Signal,
    child: Signal,
}

impl Signals {
    /// Installs the handlers (before anything else, so no SIGTERM is missed).
    pub fn install() -> std::io::Result<Self> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            child: signal(SignalKind::child())?,
        })
    }

    /// Resolves with the signal's name on SIGTERM or SIGINT; reaps children on every
    /// SIGCHLD meanwhile. Cancel-safe: usable as a `select!` branch.
    pub async fn terminated(&mut self) -> &'static str {
        loop {
            tokio::select! {
                _ = self.term.recv() => return "SIGTERM",
                _ = self.int.recv() => return "SIGINT",
                _ = self.child.recv() => {
                    let n = reap_zombies();
                    if n > 0 {
                        tracing::debug!(reaped = n, "reaped zombie processes");
                    }
                }
            }
        }
    }
}

/// Reaps every exited child. One SIGCHLD can stand for many children, so this
/// loops until none is left. Returns how many were reaped.
pub fn reap_zombies() -> usize {
    let mut n = 0;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG only writes the status of an exited child.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return n;
        }
        n += 1;
    }
}

/// Whether this process is PID 1 (the init of its PID namespace).
pub fn is_pid1() -> bool {
    std::process::id() == 1
}
