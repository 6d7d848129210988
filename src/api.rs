//! The few API calls the agent makes, on its own pod only: read it, evict or
//! delete it with a uid precondition, and post an Event about it. Requests are
//! sent raw so the status code, `Status` body and `Retry-After` header are all seen.

use std::time::{Duration, SystemTime};

use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use kube::Client;
use serde::Deserialize;
use serde_json::json;

use crate::config::Mode;
use crate::decision::Outcome;
use crate::model::OwnPodLite;

/// Timeout of every non-watch request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A failed API call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The server answered with an error status.
    #[error("HTTP {code} {reason}: {message}")]
    Status {
        /// HTTP status code.
        code: u16,
        /// `Status.reason`.
        reason: String,
        /// `Status.message`, or the body.
        message: String,
        /// `Retry-After` header or `details.retryAfterSeconds`.
        retry_after: Option<Duration>,
    },
    /// The request did not get an answer.
    #[error("request failed: {0}")]
    Transport(String),
    /// No answer in time.
    #[error("no answer within {}s", .0.as_secs())]
    Timeout(Duration),
    /// A 2xx answer that is not what was asked for.
    #[error("unexpected answer: {0}")]
    Decode(String),
}

impl ApiError {
    /// The HTTP status code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// What an eviction or delete request's answer means for the agent.
pub fn outcome_of(result: &Result<(), ApiError>) -> Outcome {
    match result {
        Ok(()) => Outcome::Done,
        Err(ApiError::Status {
            code,
            retry_after,
            message,
            ..
        }) => match code {
            404 => Outcome::Gone,
            // Only a failed uid precondition means "replaced"; any other conflict (a
            // PodDisruptionBudget update race: "the object has been modified") leaves
            // the pod in place, so back off and try again.
            409 if is_uid_precondition_failure(message) => Outcome::Gone,
            429 => Outcome::Busy {
                retry_after: *retry_after,
            },
            401 | 403 | 422 => Outcome::Denied,
            _ => Outcome::Failed,
        },
        Err(_) => Outcome::Failed,
    }
}

/// Whether a 409 `Status` message is the uid-precondition failure (the name now
/// belongs to a successor), as kube-apiserver words it for DELETE and eviction:
/// "the UID in the precondition (...) does not match the UID in record (...)".
pub fn is_uid_precondition_failure(message: &str) -> bool {
    message.contains("UID in the precondition") || message.contains("Precondition failed: UID")
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StatusBody {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<StatusDetails>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StatusDetails {
    #[serde(default)]
    retry_after_seconds: Option<u64>,
}

/// The API calls on the own pod.
#[derive(Clone)]
pub struct PodApi {
    client: Client,
    namespace: String,
    name: String,
}

impl PodApi {
    /// Calls on pod `namespace/name`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        PodApi {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// The kube client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn pod_path(&self) -> String {
        format!("/api/v1/namespaces/{}/pods/{}", self.namespace, self.name)
    }

    async fn send(
        &self,
        method: Method,
        path: String,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, ApiError> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        request(&self.client, method, &path, body).await
    }

    /// Reads the own pod.
    pub async fn get(&self) -> Result<OwnPodLite, ApiError> {
        let body = self.send(Method::GET, self.pod_path(), None).await?;
        let pod: OwnPodLite =
            serde_json::from_slice(&body).map_err(|e| ApiError::Decode(e.to_string()))?;
        if pod.metadata.name != self.name {
            return Err(ApiError::Decode(format!(
                "asked for pod {:?}, got {:?}",
                self.name, pod.metadata.name
            )));
        }
        Ok(pod)
    }

    /// Evicts or deletes the own pod, only if its uid is still `uid`.
    pub async fn remove(
        &self,
        mode: Mode,
        uid: &str,
        grace: Option<Duration>,
    ) -> Result<(), ApiError> {
        let mut options = json!({ "preconditions": { "uid": uid } });
        if let Some(g) = grace {
            options["gracePeriodSeconds"] = json!(g.as_secs());
        }
        match mode {
            Mode::Evict => {
                let body = json!({
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": { "name": self.name, "namespace": self.namespace },
                    "deleteOptions": options,
                });
                self.send(
                    Method::POST,
                    format!("{}/eviction", self.pod_path()),
                    Some(body),
                )
                .await?;
            }
            Mode::Delete => {
                options["apiVersion"] = json!("v1");
                options["kind"] = json!("DeleteOptions");
                self.send(Method::DELETE, self.pod_path(), Some(options))
                    .await?;
            }
        }
        Ok(())
    }

    /// Posts a Normal Event about the own pod.
    pub async fn event(
        &self,
        uid: &str,
        node: Option<&str>,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        self.post_event("Normal", uid, node, reason, message).await
    }

    /// Posts a Warning Event about the own pod.
    pub async fn warning(
        &self,
        uid: &str,
        node: Option<&str>,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        self.post_event("Warning", uid, node, reason, message).await
    }

    async fn post_event(
        &self,
        type_: &str,
        uid: &str,
        node: Option<&str>,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
        let mut source = json!({ "component": "selfdestruct" });
        if let Some(n) = node {
            source["host"] = json!(n);
        }
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": { "generateName": format!("{}.", self.name), "namespace": self.namespace },
            "involvedObject": {
                "apiVersion": "v1", "kind": "Pod",
                "name": self.name, "namespace": self.namespace, "uid": uid,
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "selfdestruct",
            "reportingInstance": self.name,
        });
        self.send(
            Method::POST,
            format!("/api/v1/namespaces/{}/events", self.namespace),
            Some(body),
        )
        .await?;
        Ok(())
    }
}

/// Sends one request (with a `(content type, bytes)` body) and returns the body of
/// a 2xx answer, or the error with the server's `Status` and `Retry-After`.
pub async fn request(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<(&'static str, Vec<u8>)>,
) -> Result<Vec<u8>, ApiError> {
    let mut builder = Request::builder().method(method).uri(path);
    let bytes = match body {
        Some((content_type, bytes)) => {
            builder = builder.header(http::header::CONTENT_TYPE, content_type);
            bytes
        }
        None => Vec::new(),
    };
    let req = builder
        .body(kube::client::Body::from(bytes))
        .map_err(|e| ApiError::Transport(e.to_string()))?;
    let call = async {
        let body = open(client, req).await?.into_body();
        collect(body).await
    };
    tokio::time::timeout(REQUEST_TIMEOUT, call)
        .await
        .map_err(|_| ApiError::Timeout(REQUEST_TIMEOUT))?
}

/// A transport error of the kube client. Only the variants its `send` and body
/// produce are formatted: `kube::Error`'s own `Display` reaches every variant,
/// kubeconfig and exec-plugin errors included, and would keep all of that code
/// (a YAML parser among it) in the binary.
pub fn transport(e: kube::Error) -> ApiError {
    ApiError::Transport(match e {
        kube::Error::Service(e) => with_sources(&*e),
        kube::Error::HyperError(e) => with_sources(&e),
        kube::Error::HttpError(e) => with_sources(&e),
        kube::Error::ReadEvents(e) => with_sources(&e),
        _ => "request failed".to_string(),
    })
}

/// An error and its causes ("client error (Connect): invalid peer certificate: UnknownIssuer").
fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

async fn collect(body: kube::client::Body) -> Result<Vec<u8>, ApiError> {
    Ok(body.collect().await.map_err(transport)?.to_bytes().to_vec())
}

/// Sends a request (asking for JSON) and returns a 2xx response with its body
/// unread, or the error with the server's `Status` and `Retry-After`.
pub async fn open(
    client: &Client,
    mut req: Request<kube::client::Body>,
) -> Result<http::Response<kube::client::Body>, ApiError> {
    req.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    );
    let res = client.send(req).await.map_err(transport)?;
    let status = res.status();
    if status.is_success() {
        return Ok(res);
    }
    let retry_after = res
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = collect(res.into_body()).await?;
    Err(status_error(status, &body, retry_after))
}

fn status_error(status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> ApiError {
    let parsed: StatusBody = serde_json::from_slice(body).unwrap_or_default();
    let retry_after = retry_after.or_else(|| {
        parsed
            .details
            .as_ref()
            .and_then(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
    });
    let message = if parsed.kind == "Status" && !parsed.message.is_empty() {
        parsed.message
    } else {
        String::from_utf8_lossy(&body[..body.len().min(300)])
            .trim()
            .to_string()
    };
    ApiError::Status {
        code: status.as_u16(),
        reason: if parsed.reason.is_empty() {
            status.canonical_reason().unwrap_or("").to_string()
        } else {
            parsed.reason
        },
        message,
        retry_after,
    }
}

/// A log hint for a denied request.
pub fn rbac_hint(code: Option<u16>, verb: &str, resource: &str, namespace: &str) -> String {
    match code {
        Some(422) => format!(
            "an admission policy refused to {verb} {resource}: check the ValidatingAdmissionPolicy \
             (a token must be bound to the pod it removes)"
        ),
        Some(401) => "the API server does not accept the token: is the service-account token mounted and current?"
            .to_string(),
        _ => format!(
            "the service account may not {verb} {resource} in namespace {namespace}: \
             bind the Role from rbac/role.yaml to it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_status(name: &str) -> Option<(u16, Vec<u8>)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/k8s-fixtures")
            .join(name);
        let text = std::fs::read_to_string(path).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let code = u16::try_from(v["status"].as_u64()?).ok()?;
        Some((code, v["body"].to_string().into_bytes()))
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
        let mut seen = 0;
        for (file, want) in table {
            let Some((code, body)) = fixture_status(file) else {
                continue;
            };
            seen += 1;
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
        eprintln!("checked {seen} captured answers");
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
            (401, Outcome::Denied),
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
        assert_eq!(
            outcome_of(&Err(ApiError::Transport("refused".into()))),
            Outcome::Failed
        );
    }
}
