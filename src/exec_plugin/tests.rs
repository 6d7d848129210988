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
