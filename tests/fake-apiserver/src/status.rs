//! `metav1.Status` as kube-apiserver writes it, for the errors the fake answers itself
//! (message formats copied from the real server; the captures in `fixtures/` for the rest).

use serde_json::{Value, json};

/// A `metav1.Status` (`kind: Status`, `apiVersion: v1`, `metadata: {}`) and its HTTP code.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// HTTP status code.
    pub code: u16,
    body: Value,
}

impl Status {
    /// `{"status":"Success","code":code}` (the eviction success body).
    pub fn success(code: u16) -> Self {
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code});
        Self { code, body }
    }

    /// A `Failure` status with a reason and message and no details.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        let mut s = Self::success(code);
        s.body["status"] = json!("Failure");
        (s.body["reason"], s.body["message"]) = (json!(reason), json!(message.into()));
        s
    }

    /// With `details`.
    fn details(mut self, details: Value) -> Self {
        self.body["details"] = details;
        self
    }

    /// The JSON value.
    pub fn to_value(&self) -> Value {
        self.body.clone()
    }

    /// `pods "nope" not found`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let what = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let mut details = json!({"name": name, "kind": resource});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        Self::failure(404, "NotFound", format!("{what} \"{name}\" not found")).details(details)
    }

    /// 404 for an unknown path.
    pub fn path_not_found() -> Self {
        Self::failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .details(json!({}))
    }

    /// 405 for a known path with a method it does not serve.
    pub fn method_not_allowed() -> Self {
        let message = "the server does not allow this method on the requested resource";
        Self::failure(405, "MethodNotAllowed", message).details(json!({}))
    }

    /// 401 for a missing or unknown bearer token.
    pub fn unauthorized() -> Self {
        Self::failure(401, "Unauthorized", "Unauthorized")
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, "BadRequest", message)
    }

    /// 409 for a uid precondition that does not match (DELETE and eviction).
    pub fn conflict_uid(name: &str, precondition: &str, actual: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on Pod \"{name}\": the UID in the precondition ({precondition}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
        );
        Self::failure(409, "Conflict", message).details(json!({"name": name, "kind": "Pod"}))
    }

    /// 410 Expired for a watch from a compacted resourceVersion.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::failure(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 500 InternalError.
    pub fn internal(detail: &str) -> Self {
        let message = format!("Internal error occurred: {detail}");
        Self::failure(500, "InternalError", message)
            .details(json!({"causes": [{"message": detail}]}))
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable(message: &str) -> Self {
        Self::failure(503, "ServiceUnavailable", message)
    }

    /// 429 TooManyRequests from API priority and fairness.
    pub fn too_many_requests(retry_after: i32) -> Self {
        let message = "Too many requests, please try again later.";
        Self::failure(429, "TooManyRequests", message)
            .details(json!({"retryAfterSeconds": retry_after}))
    }
}
