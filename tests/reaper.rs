//! The zombie reaper and the children others in the process wait for. kube runs
//! exec-credential plugins (`aws eks get-token`...) through std's
//! `Command::output()` on a blocking thread, and std then waits for that one
//! pid. A reaper that waits for any pid on SIGCHLD can take the plugin's status
//! first, and the token refresh fails with ECHILD. Not PID 1 (as here: the test
//! process is not the init of its PID namespace), the agent's handlers must
//! leave every child alone. Its own binary: a reaper in a test binary that
//! spawns processes for other tests would take theirs too.

use std::process::Command;

use selfdestruct::Signals;

/// Enough runs for the old reaper (waitpid(-1) on every SIGCHLD) to win the
/// race many times over: it lost none of 200 only when it did not reap.
const RUNS: usize = 200;

#[test]
fn not_pid_1_the_signal_handlers_leave_the_children_std_waits_for() {
    assert_ne!(std::process::id(), 1, "the test process is not PID 1");
    // As `selfdestruct::run`: one current-thread runtime, the plugin on a blocking thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let failures = rt.block_on(async {
        let mut signals = Signals::install().expect("signal handlers");
        // The agent's loop awaits this in every select!.
        let handlers = tokio::spawn(async move { signals.terminated().await });
        let mut failures = Vec::new();
        for run in 0..RUNS {
            let out = tokio::task::spawn_blocking(|| Command::new("true").output())
                .await
                .expect("the blocking task ends");
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => failures.push(format!("run {run}: {:?}", o.status)),
                Err(e) => failures.push(format!("run {run}: {e}")),
            }
        }
        handlers.abort();
        failures
    });
    assert!(
        failures.is_empty(),
        "{} of {RUNS} `Command::output()` calls failed while the handlers ran \
         (the reaper took their child): {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}
