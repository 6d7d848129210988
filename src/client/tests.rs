//! Unit tests of `client` (a child module: they see its private items).

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::testing::{block_on, tempdir, wait_until};

/// A kubeconfig whose exec plugin writes its pid, starts a process of its own
/// (writing its pid too) and hangs.
fn hanging_plugin_kubeconfig(dir: &Path) -> (std::path::PathBuf, [std::path::PathBuf; 2]) {
    use std::os::unix::fs::PermissionsExt;
    let pids = [dir.join("plugin.pid"), dir.join("plugin-child.pid")];
    let script = dir.join("hanging-plugin.sh");
    let text = format!(
        "#!/bin/sh\necho $$ > {}\nsleep 120 &\necho $! > {}\nexec sleep 120\n",
        pids[0].display(),
        pids[1].display()
    );
    std::fs::write(&script, text).expect("write the plugin");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let kubeconfig = dir.join("hanging-plugin-kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:1\n\
         users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n\
         \x20     command: {}\n      interactiveMode: Never\n\
         contexts:\n- name: c\n  context:\n    cluster: t\n    user: u\n    namespace: ns\n\
         current-context: c\n",
        script.display()
    );
    std::fs::write(&kubeconfig, text).expect("write the kubeconfig");
    (kubeconfig, pids)
}

/// The pid in `file`, if it is there yet.
fn pid_in(file: &Path) -> Option<i32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

#[test]
fn building_a_client_whose_exec_plugin_hangs_gives_up_in_time_and_kills_it() {
    // Issue 32, item 7: the plugin, and what it started, ran on after the time limit.
    let home = tempdir("hanging-plugin-client");
    let (kubeconfig, pids) = hanging_plugin_kubeconfig(&home);
    let env = |k: &str| (k == "KUBECONFIG").then(|| kubeconfig.clone().into_os_string());
    let built = block_on(async {
        let access = crate::access::discover(env, None, &home)
            .await
            .expect("the kubeconfig is usable");
        // A generous bound for the test; the client's own limit is 1 s.
        tokio::time::timeout(
            Duration::from_secs(60),
            client_within(&access, "ns", Duration::from_secs(1)),
        )
        .await
    });
    // Both are gone once the build gave up (the old code left them running).
    // SAFETY: signal 0 only checks that the process exists.
    let alive = |file: &Path| pid_in(file).is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
    let gone = pids
        .each_ref()
        .map(|p| wait_until(Duration::from_secs(10), || !alive(p)));
    for pid in pids.iter().filter_map(|p| pid_in(p)) {
        // SAFETY: a signal to the test's own plugin processes (at worst a gone pid).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(
        pids.iter().all(|p| pid_in(p).is_some()),
        "the plugin never ran"
    );
    assert_eq!(
        gone,
        [true, true],
        "the plugin, or the process it started, still runs"
    );
    match built {
        Ok(Err(e @ ClientError::TimedOut { .. })) => {
            let text = e.to_string();
            assert!(
                text.contains(&kubeconfig.display().to_string()) && text.contains("exec"),
                "names the kubeconfig and the plugin: {text}"
            );
        }
        Ok(Ok(_)) => panic!("a client without credentials"),
        Ok(Err(e)) => panic!("another error: {e}"),
        Err(_) => panic!("the client's time limit did not end the build"),
    }
}
