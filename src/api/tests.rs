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
