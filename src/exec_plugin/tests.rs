//! Unit tests of `exec_plugin` (a child module: they see its private items).

use std::collections::HashMap;
use std::time::Duration;

use super::*;

#[test]
fn a_plugin_gets_its_arguments_and_environment_and_answers_a_credential() {
    let var = |name: &str, value: &str| {
        HashMap::from([("name".into(), name.into()), ("value".into(), value.into())])
    };
    let exec = ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some("/bin/sh".into()),
        args: Some(vec![
            "-c".into(),
            r#"printf '{"status":{"token":"%s-%s-%s-%s"}}' "$1" "$TOKEN_PART" "${UNSET-unset}" "${CARGO_MANIFEST_DIR:-gone}""#
                .into(),
            "sh".into(),
            "arg".into(),
        ]),
        env: Some(vec![
            var("TOKEN_PART", "env"),
            // Without a value: not set.
            HashMap::from([("name".into(), "UNSET".into())]),
        ]),
        // Inherited from the test (cargo sets it), and dropped.
        drop_env: Some(vec!["CARGO_MANIFEST_DIR".into()]),
        ..ExecConfig::default()
    };
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let credential = run(&exec, Duration::from_secs(30)).expect("a credential");
    assert_eq!(credential.token.as_deref(), Some("arg-env-unset-gone"));
}

/// A plugin of `sh -c script`.
fn sh(script: &str) -> ExecConfig {
    ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some("/bin/sh".into()),
        args: Some(vec!["-c".into(), script.into()]),
        ..ExecConfig::default()
    }
}

/// The pid a plugin wrote to `file`.
fn pid_in(file: &std::path::Path) -> libc::pid_t {
    let text = std::fs::read_to_string(file).expect("the plugin wrote a pid");
    text.trim().parse().expect("a pid")
}

/// Issue 46, item 19: a plugin that prints its credential and runs on was killed at the
/// time limit, the credential dropped, and run again (no API request was ever made); one
/// whose process in a session of its own (`setsid`) holds its output was waited for to
/// the limit too, leaving that process behind at each try. A credential counts once it
/// parses; a plugin that runs on is killed then, with its group.
#[test]
fn a_credential_counts_once_it_parses_even_if_the_plugin_runs_on() {
    let dir = crate::testing::tempdir("plugin-runs-on");
    let credential = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}"#;
    let runs_on = dir.join("runs-on.pid");
    let exec = sh(&format!(
        "echo $$ > {}; echo '{credential}'; exec sleep 120",
        runs_on.display()
    ));
    let got = run(&exec, Duration::from_secs(5)).expect("the credential, the plugin running on");
    assert_eq!(got.token.as_deref(), Some("t"));
    // Killed, and reaped.
    // SAFETY: signal 0 only checks that the process exists.
    assert_ne!(
        unsafe { libc::kill(pid_in(&runs_on), 0) },
        0,
        "the plugin runs on"
    );

    let own_session = dir.join("setsid.pid");
    let exec = sh(&format!(
        "setsid sleep 120 & echo $! > {}; echo '{credential}'; exit 0",
        own_session.display()
    ));
    let got = run(&exec, Duration::from_secs(5));
    // SAFETY: a signal to the test's own plugin's process.
    unsafe { libc::kill(pid_in(&own_session), libc::SIGKILL) };
    assert_eq!(got.expect("the credential").token.as_deref(), Some("t"));
}
