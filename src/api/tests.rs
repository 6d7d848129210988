//! Unit tests of `api` (a child module: they see its private items).

use super::*;
use http::StatusCode;
use std::time::Duration;

use crate::logging::quote;
use selfdestruct_decision::Outcome;

/// A captured answer (the in-repo copy of the captures, which the fake
/// API server's tests replay too): its status code and body.
fn fixture_status(name: &str) -> (u16, Vec<u8>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-apiserver/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).expect("a JSON capture");
    let code = v["status"].as_u64().and_then(|c| u16::try_from(c).ok());
    (
        code.expect("a status code"),
        v["body"].to_string().into_bytes(),
    )
}

#[test]
fn outcomes_of_real_server_answers() {
    let table = [
        ("eviction-429-pdb.json", Outcome::Busy { retry_after: None }),
        ("eviction-409-uid-precondition.json", Outcome::Gone),
        ("pod-delete-409-uid-precondition.json", Outcome::Gone),
        ("pod-get-404.json", Outcome::Gone),
        ("pod-delete-403-other-namespace.json", Outcome::Denied),
        ("eviction-422-admission-policy.json", Outcome::Denied),
    ];
    for (file, want) in table {
        let (code, body) = fixture_status(file);
        let status = StatusCode::from_u16(code).expect("valid code");
        let e = status_error(status, &body, None);
        assert_eq!(outcome_of(&Err(e.clone())), want, "{file}: {e}");
        if let ApiError::Status {
            message, reason, ..
        } = &e
        {
            assert!(!message.is_empty() && !reason.is_empty(), "{file}");
        }
    }
    assert_eq!(outcome_of(&Ok(())), Outcome::Done);
}

#[test]
fn retry_after_from_header_or_details() {
    let body = br#"{"kind":"Status","reason":"TooManyRequests","message":"slow down","details":{"retryAfterSeconds":3}}"#;
    let e = status_error(StatusCode::TOO_MANY_REQUESTS, body, None);
    assert_eq!(
        outcome_of(&Err(e)),
        Outcome::Busy {
            retry_after: Some(Duration::from_secs(3))
        }
    );
    let e = status_error(
        StatusCode::TOO_MANY_REQUESTS,
        b"",
        Some(Duration::from_secs(9)),
    );
    assert_eq!(
        outcome_of(&Err(e)),
        Outcome::Busy {
            retry_after: Some(Duration::from_secs(9))
        }
    );
}

#[test]
fn server_text_is_quoted_escaped_and_cut() {
    assert_eq!(quote("plain: ünïcode"), "plain: ünïcode");
    assert_eq!(
        quote("\x1b[31mred\r\nInjected: line\t."),
        "\\u{1b}[31mred\\r\\nInjected: line\\t."
    );
    let long = "é".repeat(60_000);
    let q = quote(&long);
    assert!(q.len() < crate::logging::QUOTE_LIMIT + 40, "{}", q.len());
    assert!(q.ends_with("... (120000 bytes in all)"), "{q}");
    let e = status_error(StatusCode::INTERNAL_SERVER_ERROR, long.as_bytes(), None);
    assert!(e.to_string().len() < crate::logging::QUOTE_LIMIT + 80);
}

#[test]
fn a_2xx_carrying_a_failure_status_is_its_code() {
    let failure = |code: u16| {
        format!(
            r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","message":"m","code":{code}}}"#
        )
    };
    let code = failure_carried(failure(429).as_bytes());
    assert_eq!(code, Some(StatusCode::TOO_MANY_REQUESTS));
    let e = status_error(code.expect("a code"), failure(429).as_bytes(), None);
    assert_eq!(outcome_of(&Err(e)), Outcome::Busy { retry_after: None });
    // No error code carried: a server error.
    assert_eq!(
        failure_carried(failure(0).as_bytes()),
        Some(StatusCode::INTERNAL_SERVER_ERROR)
    );
    assert_eq!(
        failure_carried(failure(200).as_bytes()),
        Some(StatusCode::INTERNAL_SERVER_ERROR)
    );
    // Success, a Pod (whose status is an object), garbage: no error.
    let success = br#"{"kind":"Status","apiVersion":"v1","status":"Success","code":201}"#;
    assert_eq!(failure_carried(success), None);
    let pod =
        br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"status":{"phase":"Running"}}"#;
    assert_eq!(failure_carried(pod), None);
    assert_eq!(failure_carried(b"<html>"), None);
}

#[test]
fn names_are_one_escaped_path_segment() {
    assert_eq!(segment("placeholder-0"), "placeholder-0");
    assert_eq!(segment("n?x=1"), "n%3Fx%3D1");
    assert_eq!(segment("../nodes/node-a"), "..%2Fnodes%2Fnode-a");
    assert_eq!(segment(".."), "%2E%2E");
    assert_eq!(segment("Place holder/0"), "Place%20holder%2F0");
    let req = pods("a/b")
        .get(&segment("p?q#r"), &kube::api::GetParams::default())
        .expect("request");
    assert_eq!(req.uri().path(), "/api/v1/namespaces/a%2Fb/pods/p%3Fq%23r");
    assert_eq!(req.uri().query(), None);
}

#[test]
fn only_a_uid_conflict_means_replaced() {
    let conflict = |message: &str| ApiError::Status {
        code: 409,
        reason: "Conflict".into(),
        message: message.into(),
        retry_after: None,
    };
    let pdb_race = conflict(
        "Operation cannot be fulfilled on poddisruptionbudgets.policy \"placeholder\": \
         the object has been modified; please apply your changes to the latest version and try again",
    );
    assert_eq!(outcome_of(&Err(pdb_race)), Outcome::Failed);
    assert_eq!(outcome_of(&Err(conflict(""))), Outcome::Failed);
    let replaced = conflict(
        "Operation cannot be fulfilled on Pod \"placeholder-0\": the UID in the precondition (a) \
         does not match the UID in record (b). The object might have been deleted and then recreated",
    );
    assert_eq!(outcome_of(&Err(replaced)), Outcome::Gone);
}

#[test]
fn garbage_bodies_still_classify() {
    for (code, want) in [
        (500, Outcome::Failed),
        (503, Outcome::Failed),
        (504, Outcome::Failed),
        (400, Outcome::Failed),
        (410, Outcome::Failed),
        (401, Outcome::Failed),
        (403, Outcome::Denied),
    ] {
        let e = status_error(
            StatusCode::from_u16(code).expect("code"),
            b"<html>oops",
            None,
        );
        assert!(e.to_string().contains("oops"));
        assert_eq!(outcome_of(&Err(e)), want, "{code}");
    }
    assert_eq!(
        outcome_of(&Err(ApiError::Timeout(REQUEST_TIMEOUT))),
        Outcome::Failed
    );
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert_eq!(
        outcome_of(&Err(ApiError::transport(refused))),
        Outcome::Failed
    );
    // The client layer's time limit comes back as itself, not as a transport error.
    let layer = kube::Error::Service(Box::new(ApiError::Timeout(REQUEST_TIMEOUT)));
    assert!(matches!(from_kube(layer), ApiError::Timeout(t) if t == REQUEST_TIMEOUT));
}

/// Error answers of any content (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use crate::testing::json_value;
    use crate::testing::props::proptest_config;
    use std::time::Duration;

    /// An error answer's body: anything, or a `Status` of any shape.
    fn error_body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..400),
            (any::<String>(), any::<String>(), prop::option::of(any::<i64>()), json_value()).prop_map(
                |(reason, message, retry, extra)| {
                    let mut v = json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": reason, "message": message, "code": 429,
                        "details": {"retryAfterSeconds": retry, "causes": extra}
                    });
                    if retry.is_none() {
                        v["details"] = Value::Null;
                    }
                    serde_json::to_vec(&v).unwrap_or_default()
                }
            ),
            json_value().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
            prop_oneof![
                Just("the UID in the precondition (a) does not match the UID in record (b)"),
                Just("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."),
                Just("ValidatingAdmissionPolicy 'own-pod-only' denied request"),
            ]
            .prop_map(|m| serde_json::to_vec(&json!({"kind": "Status", "message": m})).unwrap_or_default()),
        ]
    }

    proptest! {
        #![proptest_config(proptest_config(1000))]

        #[test]
        fn retry_after_headers_of_any_content(
            bytes in prop::collection::vec(any::<u8>(), 0..40),
            secs in any::<u64>(),
            pad in "[ \t]{0,2}",
        ) {
            let _ = crate::api::retry_after(&bytes);
            prop_assert_eq!(
                crate::api::retry_after(format!("{pad}{secs}{pad}").as_bytes()),
                Some(Duration::from_secs(secs))
            );
            // The HTTP-date form is not used by kube-apiserver: ignored, not misread.
            prop_assert_eq!(crate::api::retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT"), None);
        }

        #[test]
        fn error_answers_of_any_content_classify(
            code in 400u16..600,
            body in error_body(),
            header in prop::option::of(prop_oneof![
                prop::collection::vec(any::<u8>(), 0..20),
                (0u64..100_000).prop_map(|s| s.to_string().into_bytes()),
            ]),
        ) {
            use crate::api::{ApiError, outcome_of, retry_after, status_error};
            use selfdestruct_decision::Outcome;
            let status = http::StatusCode::from_u16(code).expect("a status code");
            let header_secs = header.as_deref().and_then(retry_after);
            let e = status_error(status, &body, header_secs);
            let text = e.to_string();
            let ApiError::Status { code: c, message, retry_after: ra, .. } = &e else {
                return Err(TestCaseError::fail(format!("not a Status error: {e:?}")));
            };
            prop_assert_eq!(*c, code);
            // The header wins over the body's details.
            if header_secs.is_some() {
                prop_assert_eq!(*ra, header_secs);
            }
            // Quoted: at most 1 KiB and a note of the length, no control character
            // (the body's raw bytes never reach a log line).
            prop_assert!(message.len() <= crate::logging::QUOTE_LIMIT + 40, "{message:?}");
            prop_assert!(!text.chars().any(char::is_control), "{text:?}");
            let outcome = outcome_of(&Err(e.clone()));
            match code {
                404 => prop_assert_eq!(outcome, Outcome::Gone),
                409 => prop_assert_eq!(
                    outcome == Outcome::Gone,
                    crate::api::is_uid_precondition_failure(message)
                ),
                429 => prop_assert_eq!(outcome, Outcome::Busy { retry_after: *ra }),
                403 | 422 => prop_assert_eq!(outcome, Outcome::Denied),
                _ => prop_assert_eq!(outcome, Outcome::Failed),
            }
            if crate::pdb::is_multiple_pdbs(e.code(), &text) {
                prop_assert_eq!(code, 500);
            }
            let conflict = crate::node_gate::is_conflict(&e);
            if code == 409 {
                prop_assert!(conflict);
            } else if code != 422 {
                prop_assert!(!conflict);
            }
            // The same Status through kube's client error.
            if let Ok(s) = serde_json::from_slice::<kube::core::Status>(&body) {
                let details = s.details.as_ref().map(|d| d.retry_after_seconds).filter(|s| *s > 0);
                let k = crate::api::from_kube(kube::Error::Api(Box::new(s)));
                prop_assert_eq!(
                    match k {
                        ApiError::Status { retry_after, .. } => retry_after,
                        _ => Some(Duration::MAX),
                    },
                    details.map(|d| Duration::from_secs(u64::from(d)))
                );
            }
        }
    }
}
