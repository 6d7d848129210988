//! The real binary as an entrypoint wrapper (`selfdestruct -- CMD ARGS...`) and
//! as a pod-TTL sidecar: signal forwarding, exit codes, zombie reaping as PID 1,
//! `SELFDESTRUCT_ON_EXIT=delete` and the lifetime eviction around a running
//! child, against the fake API server.

mod common;

use std::time::Duration;

use common::cluster::{NS, Scene};
use common::*;
use fake_apiserver::{FakeCluster, FaultResponse, Matcher, PodTemplate};

/// A child that says it is ready, then waits; on `sig` it says so and exits 7.
fn trapping(sig: &str) -> String {
    format!(
        "trap 'echo child got {sig}; exit 7' {sig}; echo child ready; while :; do sleep 0.05; done"
    )
}

/// Whether the child printed exactly `line` (the wrapper's own log lines quote
/// the command, so a plain `contains` would match them).
fn said(p: &Proc, line: &str) -> bool {
    p.lines.lock().expect("log lock").iter().any(|l| l == line)
}

/// The wrapper around `sh -c script` without any API access.
fn wrap(script: &str, env: &[(&str, &str)]) -> (Proc, std::path::PathBuf) {
    let home = tempdir("wrap");
    let p = Proc::spawn(command(bin(), &["--", "sh", "-c", script], env, &home));
    (p, home)
}

#[test]
fn forwards_every_signal_and_exits_with_the_childs_code() {
    let signals = [
        (libc::SIGTERM, "TERM"),
        (libc::SIGINT, "INT"),
        (libc::SIGHUP, "HUP"),
        (libc::SIGQUIT, "QUIT"),
        (libc::SIGUSR1, "USR1"),
        (libc::SIGUSR2, "USR2"),
    ];
    for (num, name) in signals {
        let (mut p, _home) = wrap(&trapping(name), &[]);
        assert!(
            wait_until(Duration::from_secs(10), || said(&p, "child ready")),
            "{name}: {}",
            p.log()
        );
        // Without API access it still works as an init, and says what it cannot do.
        assert!(
            p.wait_for_log("cannot move the pod", Duration::from_secs(30)),
            "{name}: {}",
            p.log()
        );
        p.signal(num);
        let status = p
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{name}: no exit:\n{}", p.log()));
        assert!(
            said(&p, &format!("child got {name}")),
            "{name}: the child did not get it:\n{}",
            p.log()
        );
        assert_eq!(status.code(), Some(7), "{name}: {}", p.log());
    }
}

#[test]
fn sigterm_waits_for_the_child_to_finish() {
    // The child takes its time to shut down: the wrapper must not exit before it.
    let (mut p, _home) = wrap(
        "trap 'sleep 1; echo child done; exit 0' TERM; echo child ready; while :; do sleep 0.05; done",
        &[],
    );
    assert!(wait_until(Duration::from_secs(10), || said(
        &p,
        "child ready"
    )));
    let (status, took) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
    assert!(took >= Duration::from_millis(900), "exited after {took:?}");
    assert!(said(&p, "child done"), "{}", p.log());
}

#[test]
fn exit_codes_are_propagated() {
    for (script, want) in [
        ("exit 0", 0),
        ("exit 3", 3),
        ("kill -KILL $$", 137),
        ("kill -TERM $$", 143),
    ] {
        let (mut p, _home) = wrap(script, &[]);
        let status = p
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{script}: no exit:\n{}", p.log()));
        assert_eq!(status.code(), Some(want), "{script}: {}", p.log());
    }
    let (code, out) = run_to_exit(&["--", "/nonexistent/command"], &[]);
    assert_eq!(code, Some(127), "{out}");
    let (code, out) = run_to_exit(&["--"], &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("nothing to run"), "{out}");
    let (code, out) = run_to_exit(&["--", "true"], &[("SELFDESTRUCT_ON_EXIT", "restart")]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("SELFDESTRUCT_ON_EXIT"), "{out}");
}

#[test]
fn reaps_orphans_as_pid_1_and_keeps_the_childs_status() {
    require_pid_namespaces();
    let home = tempdir("wrap-pid1");
    // The child orphans five shells, which become the wrapper's (PID 1's)
    // children and live until released, then keeps running.
    let child = format!("{}; echo child ready; exec sleep 600", orphans(5, &home));
    let mut p = Proc::spawn(in_pid_namespace(
        &[bin(), "--", "sh", "-c", &child],
        &[],
        &home,
    ));
    assert!(
        wait_until(Duration::from_secs(10), || said(&p, "child ready")),
        "{}",
        p.log()
    );
    let init = init_of(&p, Duration::from_secs(30)).expect("the wrapper as PID 1");
    // Its log line and the child's come through two pipes: wait for it.
    assert!(
        wait_until(Duration::from_secs(10), || p.log().contains("pid1=true")),
        "not PID 1 in its namespace:\n{}",
        p.log()
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            let kids = orphan_shells(init);
            kids.len() == 5 && kids.iter().all(|(_, s)| *s != 'Z')
        }),
        "five live orphans under the wrapper: {:?}",
        children_of(init)
    );
    release_orphans(&home);
    assert!(
        wait_until(Duration::from_secs(20), || orphan_shells(init).is_empty()),
        "the wrapper as PID 1 must reap every orphan; left: {:?}\n{}",
        orphan_shells(init),
        p.log()
    );
    let kids = children_of(init);
    assert!(
        kids.iter().any(|(_, s)| *s != 'Z'),
        "the child still runs: {kids:?}"
    );
    // SIGTERM to PID 1 reaches the child (`sleep`), which dies of it: 128 + 15.
    // SAFETY: signalling the wrapper we started (PID 1 of its namespace).
    unsafe {
        libc::kill(init as i32, libc::SIGTERM);
    }
    let status = p
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no exit:\n{}", p.log()));
    assert_eq!(status.code(), Some(143), "{}", p.log());
}

/// The wrapper (`args` before the command) for `pod` of the scene, with the
/// Downward API env and a token of its own.
fn wrapper_in(scene: &Scene, pod: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
    let kubeconfig = scene.kubeconfig_for(pod);
    let uid = scene.uid(pod);
    let kc = kubeconfig.to_string_lossy().to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("KUBECONFIG", &kc),
        ("POD_NAME", pod),
        ("POD_NAMESPACE", NS),
        ("POD_UID", &uid),
        ("SELFDESTRUCT_MIN_AGE", "0"),
        ("SELFDESTRUCT_MOVE_JITTER", "0"),
        ("SELFDESTRUCT_START_JITTER", "0"),
        ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
        ("SELFDESTRUCT_LOG_LEVEL", "debug"),
    ];
    all.extend_from_slice(env);
    Proc::spawn(command(bin(), args, &all, &scene.home))
}

#[test]
fn on_exit_delete_deletes_the_own_pod_with_its_uid_then_exits_with_the_childs_code() {
    let s = Scene::placeholders(2);
    let uid = s.uid("placeholder-0");
    let mut p = wrapper_in(
        &s,
        "placeholder-0",
        &["--", "sh", "-c", "sleep 1; exit 5"],
        // A grace period of 0 is sent as 1 (no force deletion without the opt-in).
        &[
            ("SELFDESTRUCT_ON_EXIT", "delete"),
            ("SELFDESTRUCT_GRACE_PERIOD", "0"),
        ],
    );
    let status = p
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no exit:\n{}", p.log()));
    assert_eq!(status.code(), Some(5), "{}", p.log());
    let deletes: Vec<_> = s
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.is_pod_delete())
        .collect();
    assert_eq!(deletes.len(), 1, "one delete:\n{}", p.log());
    let body = deletes[0].body.clone().expect("delete options");
    assert_eq!(body["preconditions"]["uid"], uid.as_str());
    assert_eq!(body["gracePeriodSeconds"], 1);
    assert_eq!(deletes[0].status, 200);
    assert!(s.evictions().is_empty());
    s.assert_only_own_mutations(&[("placeholder-0", &uid)]);

    // A child stopped by SIGTERM (the pod is going already) takes nothing with it.
    let mut p = wrapper_in(
        &s,
        "placeholder-1",
        &["--", "sh", "-c", &trapping("TERM")],
        &[("SELFDESTRUCT_ON_EXIT", "delete")],
    );
    assert!(
        p.wait_for_log("selfdestruct started", Duration::from_secs(10)),
        "{}",
        p.log()
    );
    let (status, _) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(7), "{}", p.log());
    assert!(p.log().contains("not deleting the own pod"), "{}", p.log());
    assert_eq!(
        s.fake
            .requests()
            .iter()
            .filter(|r| r.is_pod_delete())
            .count(),
        1,
        "no second delete"
    );
}

#[test]
fn a_lifetime_evicts_the_pod_while_the_child_runs_until_sigterm() {
    let s = Scene::placeholders(2);
    let uid = s.uid("placeholder-1");
    let mut p = wrapper_in(
        &s,
        "placeholder-1",
        &["--", "sh", "-c", &trapping("TERM")],
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
            // The default: it holds node moves, never the lifetime.
            ("SELFDESTRUCT_MIN_AGE", "2m"),
        ],
    );
    let ev = s
        .fake
        .wait_for_request(
            |r| r.is_eviction() && r.status == 201,
            Duration::from_secs(60),
        )
        .unwrap_or_else(|| panic!("no eviction:\n{}", p.log()));
    assert_eq!(
        ev.body.expect("eviction body")["deleteOptions"]["preconditions"]["uid"],
        uid.as_str()
    );
    assert!(
        p.wait_for_log("waiting for SIGTERM", Duration::from_secs(30)),
        "{}",
        p.log()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        p.is_running(),
        "the child keeps running until SIGTERM:\n{}",
        p.log()
    );
    assert!(!said(&p, "child got TERM"), "{}", p.log());
    // The kubelet's SIGTERM (after the eviction) is forwarded.
    let (status, took) = p.terminate();
    eprintln!("SIGTERM to exit: {took:?}");
    assert!(said(&p, "child got TERM"), "{}", p.log());
    assert_eq!(status.and_then(|s| s.code()), Some(7), "{}", p.log());
    assert_eq!(s.evictions().len(), 1, "exactly one eviction");
    s.assert_only_own_mutations(&[("placeholder-1", &uid)]);
}

#[test]
fn a_sidecar_gives_any_pod_a_lifetime_and_honours_its_pdb() {
    // Any workload: pods labelled app=web (no placeholder labels), a PDB with
    // maxUnavailable 1, and the sidecar's minimal Role of
    // manifests/examples/pod-ttl-sidecar (no list/watch: sibling awareness off).
    const APP: &str = "web";
    let s = Scene::set_up(FakeCluster::start(), 0, &[], PodTemplate::new());
    let now = s.fake.clock().wall();
    for pod in ["web-0", "web-1"] {
        s.fake.add_pod(
            PodTemplate::new()
                .label("app", APP)
                .running_pod(NS, pod, "node-0", now),
        );
    }
    // web-1 is not Ready: the budget refuses evictions (`eviction-429-pdb.json`).
    let eviction = Matcher::custom(|r| r.path.ends_with("/eviction"));
    s.fake.fail_next(
        eviction,
        FaultResponse::captured("eviction-429-pdb.json"),
        usize::MAX,
    );
    let uid = s.uid("web-0");
    let sidecar = wrapper_in(
        &s,
        "web-0",
        &[],
        &[
            ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
            ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
            ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
            // The default: it holds node moves, never the lifetime.
            ("SELFDESTRUCT_MIN_AGE", "2m"),
        ],
    );
    let refused = s
        .fake
        .wait_for_request(
            |r| r.is_eviction() && r.status == 429,
            Duration::from_secs(15),
        )
        .unwrap_or_else(|| panic!("no 429:\n{}", sidecar.log()));
    assert!(sidecar.wait_for_log("PodDisruptionBudget says not now", Duration::from_secs(30)));
    s.fake.clear_faults();
    let ok = s
        .fake
        .wait_for_request(
            |r| r.is_eviction() && r.status == 201,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|| panic!("never succeeded:\n{}", sidecar.log()));
    eprintln!(
        "retried {:?} after the 429",
        ok.at.duration_since(refused.at)
    );
    assert!(ok.path.ends_with("/pods/web-0/eviction"));
    assert!(s.evictions().len() <= 4, "no hot loop on 429");
    s.assert_only_own_mutations(&[("web-0", &uid)]);
}

#[test]
fn a_hanging_exec_plugin_holds_neither_the_childs_exit_nor_its_signals() {
    // Issue 27, item 1: the plugin ran on the thread that waits for the child
    // and forwards the signals.
    let child_exits = "sleep 1; exit 3";
    let child_traps = trapping("TERM");
    for script in [child_exits, child_traps.as_str()] {
        let home = tempdir("wrap-hanging-plugin");
        let (kubeconfig, pidfile) = hanging_plugin_kubeconfig(&home);
        let kc = kubeconfig.display().to_string();
        let env = [
            ("KUBECONFIG", kc.as_str()),
            ("POD_NAME", "p"),
            ("POD_NAMESPACE", NS),
        ];
        let mut p = Proc::spawn(command(bin(), &["--", "sh", "-c", script], &env, &home));
        let started = wait_until(Duration::from_secs(60), || plugin_started(&pidfile));
        if script == child_traps {
            assert!(
                wait_until(Duration::from_secs(30), || said(&p, "child ready")),
                "{}",
                p.log()
            );
            p.signal(libc::SIGTERM);
        }
        // Well under the plugin's 30 s build timeout: the exit must not wait for it.
        let status = p.wait_exit(Duration::from_secs(25));
        kill_plugin(&pidfile);
        assert!(started, "the plugin never ran:\n{}", p.log());
        let status = status.unwrap_or_else(|| panic!("{script}: no exit:\n{}", p.log()));
        if script == child_traps {
            assert!(said(&p, "child got TERM"), "{}", p.log());
            assert_eq!(status.code(), Some(7), "{}", p.log());
        } else {
            assert_eq!(status.code(), Some(3), "{}", p.log());
        }
    }
}

#[test]
fn on_exit_delete_is_bounded_in_time_and_ended_by_sigterm() {
    // Issue 27, item 7: three unanswered 30 s DELETEs, and SIGTERM ignored meanwhile.
    let s = Scene::placeholders(2);
    s.fake.fail_next(
        Matcher::custom(|r| r.method == "DELETE"),
        FaultResponse::NeverAnswer,
        100,
    );
    let unanswered_delete = |pod: &'static str| {
        move |r: &fake_apiserver::RecordedRequest| {
            r.is_pod_delete() && r.path.ends_with(pod) && r.status == 0
        }
    };
    let delete_on_exit = [("SELFDESTRUCT_ON_EXIT", "delete")];
    // Nothing answers: the wrapper gives up within its limit (20 s) and exits
    // with the child's code. With SIGTERM during the delete: at once, with it too.
    for (pod, sigterm) in [("/placeholder-0", false), ("/placeholder-1", true)] {
        let mut p = wrapper_in(
            &s,
            pod.trim_start_matches('/'),
            &["--", "sh", "-c", "sleep 1; exit 5"],
            &delete_on_exit,
        );
        assert!(
            s.fake
                .wait_for_request(unanswered_delete(pod), Duration::from_secs(20))
                .is_some(),
            "no delete:\n{}",
            p.log()
        );
        if sigterm {
            p.signal(libc::SIGTERM);
        }
        let bound = if sigterm { 10 } else { 40 };
        let status = p
            .wait_exit(Duration::from_secs(bound))
            .unwrap_or_else(|| panic!("no exit (SIGTERM: {sigterm}):\n{}", p.log()));
        assert_eq!(status.code(), Some(5), "{}", p.log());
        let said = if sigterm {
            "while deleting the own pod"
        } else {
            "was not deleted within"
        };
        assert!(p.log().contains(said), "{}", p.log());
    }
}
