//! Pause semantics of the real binary, without any API server: it blocks, exits 0
//! at once on SIGTERM/SIGINT, reaps zombies as PID 1, and refuses bad settings
//! with exit code 2 before doing anything else.

mod common;

use std::time::Duration;

use common::*;

fn pause_mode() -> (Proc, std::path::PathBuf) {
    let home = tempdir("pause");
    let p = Proc::spawn(command(bin(), &[], &[], &home));
    assert!(
        p.wait_for_log("plain pause container", Duration::from_secs(10)),
        "no pause-mode line:\n{}",
        p.log()
    );
    (p, home)
}

#[test]
fn without_api_access_it_pauses_and_says_why() {
    let (mut p, _home) = pause_mode();
    assert!(
        p.log()
            .contains("no kubeconfig and no in-cluster service account"),
        "{}",
        p.log()
    );
    assert!(
        p.log().contains("not PID 1"),
        "warns when it is not PID 1: {}",
        p.log()
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(p.is_running(), "pause mode must keep running");
}

#[test]
fn sigterm_and_sigint_exit_zero_at_once() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let (mut p, _home) = pause_mode();
        let t = std::time::Instant::now();
        p.signal(sig);
        let status = p
            .wait_exit(Duration::from_secs(5))
            .expect("exits after the signal");
        eprintln!("signal {sig} -> exit in {:?}", t.elapsed());
        assert_eq!(status.code(), Some(0), "signal {sig}: {}", p.log());
        assert!(p.log().contains("exiting"), "{}", p.log());
    }
}

#[test]
fn idle_pause_does_not_busy_loop() {
    let (p, _home) = pause_mode();
    let ticks = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let f: Vec<&str> = after.split_whitespace().collect();
        f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0)
    };
    let before = ticks(p.pid());
    std::thread::sleep(Duration::from_secs(2));
    let used = ticks(p.pid()) - before;
    eprintln!("CPU ticks used in 2 s idle: {used}");
    // A busy loop would use ~200 ticks (100 Hz) in 2 s; an idle pause uses none.
    assert!(used < 20, "idle pause used {used} ticks in 2 s");
}

#[test]
fn version_and_help() {
    let (code, out) = run_to_exit(&["--version"], &[]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("selfdestruct "), "{out}");
    let (code, out) = run_to_exit(&["--help"], &[]);
    assert_eq!(code, Some(0));
    for var in [
        "SELFDESTRUCT_MIN_LIFETIME",
        "SELFDESTRUCT_MODE",
        "POD_NAME",
        "SELFDESTRUCT_NODE_SETTLE",
    ] {
        assert!(out.contains(var), "--help lacks {var}");
    }
}

#[test]
fn a_cross_setting_error_and_a_bad_flag_exit_2_too() {
    // One bad value per setting, through its variable: tests/startup.rs walks them all.
    let (code, out) = run_to_exit(
        &[],
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "2h"),
            ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
        ],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("SELFDESTRUCT_MAX_LIFETIME"), "{out}");
    // the same through flags
    let (code, out) = run_to_exit(&["--mode=nuke"], &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--mode"), "{out}");
}

/// Starts `init` as PID 1 of a new PID namespace after orphaning five shells
/// into it (see [`orphans`]), waits until init runs with the five alive as its
/// children, and lets them exit. Returns `unshare` (dropping it ends the
/// namespace: see [`end_namespace`]) and init's pid outside.
fn init_with_exiting_orphans(init: &str, env: &[(&str, &str)]) -> (Proc, u32) {
    let home = tempdir("pid1");
    let script = format!("{}; exec {init}", orphans(5, &home));
    let p = Proc::spawn(in_pid_namespace(&["sh", "-c", &script], env, &home));
    let name = init.split(' ').next().unwrap_or(init);
    let name = name.rsplit('/').next().unwrap_or(name);
    let mut init_pid = None;
    let ready = wait_until(Duration::from_secs(20), || {
        init_pid = children_of(p.pid()).first().map(|c| c.0).filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        });
        init_pid.is_some_and(|pid| {
            let kids = orphan_shells(pid);
            kids.len() == 5 && kids.iter().all(|(_, s)| *s != 'Z')
        })
    });
    let init_pid = match (ready, init_pid) {
        (true, Some(pid)) => pid,
        _ => panic!(
            "{init} did not start as PID 1 with five live orphans: {:?}\n{}",
            init_pid.map(orphan_shells),
            p.log()
        ),
    };
    release_orphans(&home);
    (p, init_pid)
}

/// Ends the namespace of `init_with_exiting_orphans`: ending `unshare` would
/// orphan the namespace's init, so end the init, which ends the whole namespace.
fn end_namespace(init_pid: u32) {
    // SAFETY: SIGKILL to the init this test started.
    unsafe {
        libc::kill(init_pid as i32, libc::SIGKILL);
    }
}

#[test]
fn reaps_zombies_as_pid_1() {
    require_pid_namespaces();
    // Control: a PID 1 that never reaps keeps the five exited orphans as zombies,
    // so the check below can fail.
    let (control, init) = init_with_exiting_orphans("sleep 600", &[]);
    assert!(
        wait_until(Duration::from_secs(20), || {
            let kids = orphan_shells(init);
            kids.len() == 5 && kids.iter().all(|(_, s)| *s == 'Z')
        }),
        "the control init should keep 5 zombies: {:?}",
        orphan_shells(init)
    );
    end_namespace(init);
    drop(control);
    // selfdestruct as PID 1 reaps them: none is left, alive or zombie.
    let (p, init) = init_with_exiting_orphans(bin(), &[]);
    let reaped = wait_until(Duration::from_secs(20), || orphan_shells(init).is_empty());
    let left = orphan_shells(init);
    end_namespace(init);
    assert!(
        reaped,
        "selfdestruct as PID 1 must reap every orphan; left: {left:?}\n{}",
        p.log()
    );
}
