//! The few API calls the agent makes, on its own pod only: read it, evict or delete
//! it with a uid precondition, and post an Event about it through kube's `Recorder`.
//! The eviction and delete go through `Client::send`, so the status code, `Status`
//! body and `Retry-After` header are all seen (kube's `Api::evict` keeps no headers).

use std::time::Duration;

use crate::summarize::PodObject;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::api::{Api, DeleteParams, GetParams, ListParams, PostParams};
use kube::core::Status;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::logging::quote;
use selfdestruct_decision::Outcome;

/// Time limit of every request (a watch: until its answer starts), applied by the
/// client's layer (`client.rs`).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How the own pod is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// POST pods/{name}/eviction: honours PodDisruptionBudgets.
    #[value(alias = "eviction")]
    Evict,
    /// DELETE pods/{name}.
    Delete,
}

/// The cause of a failed call, kept as the error it was (shared: an
/// [`ApiError`] is cloned into outcomes and logs).
pub(crate) type Cause = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// A failed API call: its causes are its `source()` chain, formatted where it is
/// logged ([`crate::logging::Chain`]); server text in it is [`quote`]d.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// The server answered with an error status (or a 2xx carrying a `Status`
    /// of `Failure`: its code).
    #[error("HTTP {code} {reason}: {message}")]
    Status {
        /// The HTTP status code.
        code: u16,
        /// `Status.reason`, or the HTTP reason phrase.
        reason: String,
        /// `Status.message`, or the body.
        message: String,
        /// `Retry-After` header or `details.retryAfterSeconds`.
        retry_after: Option<Duration>,
    },
    /// The request got no answer (connection, TLS, credentials).
    #[error("request failed")]
    Transport(#[source] Cause),
    /// No answer within this long.
    #[error("no answer within {}s", .0.as_secs())]
    Timeout(Duration),
    /// An answer longer than the client layer reads (`client.rs`): refused as a
    /// transport error.
    #[error("answer refused: longer than {limit} bytes")]
    TooLarge {
        /// The most bytes read of this answer.
        limit: usize,
    },
    /// A 2xx answer that is not what was asked for.
    #[error("unexpected answer")]
    Decode(#[source] Cause),
    /// A 2xx answer with another pod than the one asked for.
    #[error("unexpected answer: asked for pod {asked:?}, got {got:?}")]
    OtherPod {
        /// The pod asked for.
        asked: String,
        /// The pod in the answer.
        got: Option<String>,
    },
}

impl ApiError {
    /// The HTTP status code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// A request that got no answer, and why.
    pub fn transport(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ApiError::Transport(std::sync::Arc::new(e))
    }

    /// A 2xx answer that is not what was asked for, and why.
    pub fn decode(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ApiError::Decode(std::sync::Arc::new(e))
    }
}

/// What an eviction or delete request's answer means for the agent.
pub(crate) fn outcome_of(result: &Result<(), ApiError>) -> Outcome {
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
            // 401: the credentials expired or were rotated (a token file is
            // read again): retried like a server error.
            403 | 422 => Outcome::Denied,
            _ => Outcome::Failed,
        },
        Err(_) => Outcome::Failed,
    }
}

/// Whether a 409 `Status` message is the uid-precondition failure (the name now
/// belongs to a successor), as kube-apiserver words it for DELETE and eviction:
/// "the UID in the precondition (...) does not match the UID in record (...)".
pub(crate) fn is_uid_precondition_failure(message: &str) -> bool {
    message.contains("UID in the precondition") || message.contains("Precondition failed: UID")
}

/// What is escaped in a path segment: all but RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A name as one URL path segment: kube's request builder joins names into
/// paths as they are, so a `/` or `?` in one would change the request.
pub fn segment(name: &str) -> String {
    let escaped = utf8_percent_encode(name, SEGMENT).to_string();
    // "." and ".." would be resolved away by URL normalisation.
    match escaped.as_str() {
        "." => "%2E".to_string(),
        ".." => "%2E%2E".to_string(),
        _ => escaped,
    }
}

/// kube's request builder for the pods of `namespace` (escaped).
pub fn pods(namespace: &str) -> kube::core::Request {
    kube::core::Request::new(Pod::url_path(&(), Some(&segment(namespace))))
}

#[derive(Clone)]
pub(crate) struct PodApi {
    client: Client,
    namespace: String,
    name: String,
}

impl PodApi {
    pub(crate) fn new(client: Client, namespace: &str, name: &str) -> Self {
        PodApi {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) async fn get(&self) -> Result<PodObject, ApiError> {
        let req = pods(&self.namespace)
            .get(&segment(&self.name), &GetParams::default())
            .map_err(ApiError::transport)?;
        let body = request(&self.client, req).await?;
        let pod: PodObject = serde_json::from_slice(&body).map_err(ApiError::decode)?;
        if pod.metadata.name.as_deref() != Some(self.name.as_str()) {
            return Err(ApiError::OtherPod {
                asked: self.name.clone(),
                got: pod.metadata.name,
            });
        }
        Ok(pod)
    }

    /// Evicts or deletes the own pod, only if its uid is still `uid`.
    pub(crate) async fn remove(
        &self,
        mode: Mode,
        uid: &str,
        grace: Option<Duration>,
    ) -> Result<(), ApiError> {
        let options = DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            grace_period_seconds: grace.map(|g| i64::try_from(g.as_secs()).unwrap_or(i64::MAX)),
            ..DeleteOptions::default()
        };
        let (pods, name) = (pods(&self.namespace), segment(&self.name));
        let req = match mode {
            Mode::Evict => {
                let metadata = ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..ObjectMeta::default()
                };
                let delete_options = Some(options);
                let eviction = Eviction {
                    metadata,
                    delete_options,
                };
                let body = serde_json::to_vec(&eviction).map_err(ApiError::decode)?;
                pods.create_subresource("eviction", &name, &PostParams::default(), body)
            }
            Mode::Delete => {
                let body = serde_json::to_vec(&options).map_err(ApiError::decode)?;
                let req = pods.delete(&name, &DeleteParams::default());
                req.map(|r| r.map(|_| body))
            }
        }
        .map_err(ApiError::transport)?;
        request(&self.client, req).await?;
        Ok(())
    }

    /// The PodDisruptionBudgets of the own namespace (needs the optional `list` on
    /// `poddisruptionbudgets`; used only to name the budgets in a warning).
    pub(crate) async fn budgets(&self) -> Result<Vec<PodDisruptionBudget>, ApiError> {
        let api = Api::<PodDisruptionBudget>::namespaced(self.client.clone(), &self.namespace);
        let list = api.list(&ListParams::default()).await.map_err(from_kube)?;
        Ok(list.items)
    }

    /// Posts an Event about the own pod ([`post_event`]): `action` is `Evict` or
    /// `Delete`. A failure is logged and the caller goes on: whether it was posted.
    pub(crate) async fn event(
        &self,
        type_: EventType,
        uid: &str,
        action: &str,
        reason: &str,
        message: &str,
    ) -> bool {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            uid: Some(uid.to_string()),
            ..ObjectReference::default()
        };
        let reporter = Reporter {
            controller: "selfdestruct".into(),
            instance: Some(self.name.clone()),
        };
        let event = (type_, action, reason, message);
        let posted = post_event(&self.client, reporter, &regarding, event).await;
        if let Err(e) = &posted {
            tracing::warn!(error = %crate::logging::Chain(e), "could not post the Event (continuing)");
        }
        posted.is_ok()
    }
}

/// Posts an Event (events.k8s.io/v1, kube's `Recorder`) about `regarding`:
/// its type, action, reason and note. Each Event is new (its own note), so the
/// Role needs only `create`. events.k8s.io limits a note to 1 kB: it is cut there.
pub async fn post_event(
    client: &Client,
    reporter: Reporter,
    regarding: &ObjectReference,
    (type_, action, reason, note): (EventType, &str, &str, &str),
) -> Result<(), ApiError> {
    let mut cut = note.len().min(1000);
    while !note.is_char_boundary(cut) {
        cut -= 1;
    }
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note[..cut].to_string()),
        action: action.to_string(),
        secondary: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    recorder.publish(&event, regarding).await.map_err(from_kube)
}

/// Sends one request built by kube's request builder (asking for JSON) and
/// returns the body of a 2xx answer, or the error with the server's `Status`
/// and `Retry-After`.
pub async fn request(client: &Client, req: Request<Vec<u8>>) -> Result<Vec<u8>, ApiError> {
    let has_body = !req.body().is_empty();
    let mut req = req.map(kube::client::Body::from);
    let json = HeaderValue::from_static("application/json");
    req.headers_mut().insert(ACCEPT, json.clone());
    if has_body {
        req.headers_mut().entry(CONTENT_TYPE).or_insert(json);
    }
    // The client's layer (`connect`) bounds the request, body included, by
    // [`REQUEST_TIMEOUT`].
    let res = client.send(req).await.map_err(from_kube)?;
    let status = res.status();
    let retry_after = res
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| retry_after(v.as_bytes()));
    let body = res
        .into_body()
        .collect()
        .await
        .map_err(from_kube)?
        .to_bytes();
    if !status.is_success() {
        return Err(status_error(status, &body, retry_after));
    }
    match failure_carried(&body) {
        Some(code) => Err(status_error(code, &body, retry_after)),
        None => Ok(body.to_vec()),
    }
}

/// The code a 2xx answer's body carries when it is a `Status` of `Failure`
/// (client-go's `Result.Into` returns such a `Status` as the error it
/// describes; an aggregated API server or a proxy may answer so). A code that
/// is no error code (none, 2xx) counts as 500.
pub(crate) fn failure_carried(body: &[u8]) -> Option<StatusCode> {
    let status: Status = serde_json::from_slice(body).ok()?;
    if !status.is_failure() {
        return None;
    }
    let code = StatusCode::from_u16(status.code).ok();
    let error = code.filter(|c| c.is_client_error() || c.is_server_error());
    error.or(Some(StatusCode::INTERNAL_SERVER_ERROR))
}

/// An error of the kube client as an [`ApiError`]: the server's `Status`
/// with its code, the client layer's own error (its [`ApiError::Timeout`]), or a
/// transport error with its causes.
pub(crate) fn from_kube(e: kube::Error) -> ApiError {
    match e {
        kube::Error::Service(e) => match e.downcast::<ApiError>() {
            Ok(ours) => *ours,
            Err(e) => ApiError::transport(kube::Error::Service(e)),
        },
        kube::Error::Api(s) => ApiError::Status {
            code: s.code,
            retry_after: retry_after_of(&s),
            reason: quote(&s.reason),
            message: quote(&s.message),
        },
        e => ApiError::transport(e),
    }
}

/// A `Status`'s `details.retryAfterSeconds`, if set.
fn retry_after_of(status: &Status) -> Option<Duration> {
    let seconds = status.details.as_ref()?.retry_after_seconds;
    (seconds > 0).then(|| Duration::from_secs(seconds.into()))
}

/// A `Retry-After` header's value in seconds (the form kube-apiserver sends);
/// `None` for anything else, such as an HTTP date.
pub(crate) fn retry_after(value: &[u8]) -> Option<Duration> {
    let seconds = std::str::from_utf8(value).ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// The error for a non-2xx answer: the `Status` body's reason and message (else the
/// body), [`quote`]d, and the `Retry-After` header, else `details.retryAfterSeconds`.
pub(crate) fn status_error(
    status: StatusCode,
    body: &[u8],
    retry_after: Option<Duration>,
) -> ApiError {
    // Any JSON object reads as a Status of empty fields: then the body is the message.
    let parsed: Status = serde_json::from_slice(body).unwrap_or_default();
    let retry_after = retry_after.or_else(|| retry_after_of(&parsed));
    let message = if parsed.message.is_empty() {
        quote(String::from_utf8_lossy(body).trim())
    } else {
        quote(&parsed.message)
    };
    ApiError::Status {
        code: status.as_u16(),
        reason: if parsed.reason.is_empty() {
            status.canonical_reason().unwrap_or("").to_string()
        } else {
            quote(&parsed.reason)
        },
        message,
        retry_after,
    }
}

/// A log hint for a denied request.
pub(crate) fn rbac_hint(code: Option<u16>, verb: &str, resource: &str, namespace: &str) -> String {
    match code {
        Some(422) => format!(
            "an admission policy refused to {verb} {resource}: check the ValidatingAdmissionPolicy \
             (a token must be bound to the pod it removes)"
        ),
        Some(401) => "the API server does not accept the credentials (expired or rotated): \
             retrying with backoff, a token file read again; \
             is the service-account token mounted and current?"
            .to_string(),
        _ => format!(
            "the service account may not {verb} {resource} in namespace {namespace}: \
             bind the Role from rbac/role.yaml to it"
        ),
    }
}

#[cfg(test)]
mod tests;
