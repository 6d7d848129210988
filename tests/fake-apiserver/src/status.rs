//! `metav1.Status` exactly as kube-apiserver writes it, with constructors for the
//! errors the fake returns (message formats copied from the real server).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One `details.causes` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// Machine-readable cause (`DisruptionBudget`, `FieldValueInvalid`...).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// Human-readable text.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// Field path the cause is about.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub field: Option<String>,
}

/// `status.details`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDetails {
    /// Object name.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub name: Option<String>,
    /// API group.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub group: Option<String>,
    /// Kind or resource.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kind: Option<String>,
    /// Object uid.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub uid: Option<String>,
    /// Causes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub causes: Option<Vec<StatusCause>>,
    /// Retry-After hint.
    #[serde(
        rename = "retryAfterSeconds",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub retry_after_seconds: Option<i32>,
}

/// A `metav1.Status` (`kind: Status`, `apiVersion: v1`, `metadata: {}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Always `{}`.
    pub metadata: serde_json::Map<String, Value>,
    /// `Success` or `Failure`.
    pub status: String,
    /// Human-readable message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// Machine-readable reason (`NotFound`, `Conflict`...).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// Details.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<StatusDetails>,
    /// HTTP status code.
    pub code: u16,
}

impl Status {
    /// `{"status":"Success","code":code}` (the eviction success body).
    pub fn success(code: u16) -> Self {
        Self {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: serde_json::Map::new(),
            status: "Success".into(),
            message: None,
            reason: None,
            details: None,
            code,
        }
    }

    /// A `Failure` status with a reason and message and no details.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: "Failure".into(),
            message: Some(message.into()),
            reason: Some(reason.into()),
            ..Self::success(code)
        }
    }

    /// Sets `details.name` / `details.kind` (either may be empty to leave it out).
    pub fn with_details(mut self, name: &str, kind: &str) -> Self {
        let details = self.details.get_or_insert_with(StatusDetails::default);
        details.name = (!name.is_empty()).then(|| name.to_string());
        details.kind = (!kind.is_empty()).then(|| kind.to_string());
        self
    }

    /// Sets `details.group`.
    pub fn with_group(mut self, group: &str) -> Self {
        if !group.is_empty() {
            self.details
                .get_or_insert_with(StatusDetails::default)
                .group = Some(group.to_string());
        }
        self
    }

    /// Appends a cause.
    pub fn with_cause(mut self, reason: Option<&str>, message: &str) -> Self {
        self.details
            .get_or_insert_with(StatusDetails::default)
            .causes
            .get_or_insert_with(Vec::new)
            .push(StatusCause {
                reason: reason.map(str::to_string),
                message: Some(message.to_string()),
                field: None,
            });
        self
    }

    /// The JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// `pods "nope" not found`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        Self::failure(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(resource, group)),
        )
        .with_details(name, resource)
        .with_group(group)
    }

    /// 404 for an unknown path.
    pub fn path_not_found() -> Self {
        let mut s = Self::failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        s.details = Some(StatusDetails::default());
        s
    }

    /// 405 for a known path with a method it does not serve.
    pub fn method_not_allowed() -> Self {
        let mut s = Self::failure(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
        s.details = Some(StatusDetails::default());
        s
    }

    /// 401 for a missing or unknown bearer token.
    pub fn unauthorized() -> Self {
        Self::failure(401, "Unauthorized", "Unauthorized")
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, "BadRequest", message)
    }

    /// 403 from the RBAC authorizer, in the exact kube-apiserver format.
    pub fn forbidden_rbac(
        user: &str,
        verb: &str,
        resource: &str,
        subresource: &str,
        group: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        let full_resource = if subresource.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        let mut reason = format!(
            "User \"{user}\" cannot {verb} resource \"{full_resource}\" in API group \"{group}\""
        );
        if namespace.is_empty() {
            reason.push_str(" at the cluster scope");
        } else {
            reason.push_str(&format!(" in the namespace \"{namespace}\""));
        }
        let q = qualified(resource, group);
        let message = if name.is_empty() {
            format!("{q} is forbidden: {reason}")
        } else {
            format!("{q} \"{name}\" is forbidden: {reason}")
        };
        Self::failure(403, "Forbidden", message)
            .with_details(name, resource)
            .with_group(group)
    }

    /// 409 for a uid precondition that does not match (DELETE and eviction).
    pub fn conflict_uid(name: &str, precondition: &str, actual: &str) -> Self {
        Self::failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on Pod \"{name}\": the UID in the precondition ({precondition}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
            ),
        )
        .with_details(name, "Pod")
    }

    /// 409 for a resourceVersion precondition that does not match.
    pub fn conflict_resource_version(name: &str, precondition: &str, actual: &str) -> Self {
        Self::failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on Pod \"{name}\": the ResourceVersion in the precondition ({precondition}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
            ),
        )
        .with_details(name, "Pod")
    }

    /// 409 for an update with a stale resourceVersion.
    pub fn conflict_modified(resource: &str, name: &str) -> Self {
        Self::failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(name, resource)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::failure(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(name, resource)
    }

    /// 422 from the own-pod-only ValidatingAdmissionPolicy.
    pub fn admission_denied(name: &str) -> Self {
        let denial = "ValidatingAdmissionPolicy 'placeholder-own-pod-only' with binding 'placeholder-own-pod-only' denied request: a placeholder may only delete or evict its own pod";
        Self::failure(
            422,
            "Invalid",
            format!("pods \"{name}\" is forbidden: {denial}"),
        )
        .with_details(name, "pods")
        .with_cause(None, denial)
    }

    /// 422 Invalid for an object that fails validation.
    pub fn invalid(kind: &str, name: &str, field: &str, detail: &str) -> Self {
        let mut s = Self::failure(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {detail}"),
        )
        .with_details(name, kind);
        if let Some(d) = s.details.as_mut() {
            d.causes = Some(vec![StatusCause {
                reason: Some("FieldValueRequired".into()),
                message: Some(detail.to_string()),
                field: Some(field.to_string()),
            }]);
        }
        s
    }

    /// 422 for a JSON patch whose `test` operation failed (kube-apiserver's
    /// `NewGenericServerResponse(422, ...)`).
    pub fn patch_failed(detail: &str) -> Self {
        let mut s = Self::failure(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        );
        s.details = Some(StatusDetails::default());
        s.with_cause(Some("UnexpectedServerResponse"), detail)
    }

    /// 429 from the eviction subresource when a PDB allows no disruption.
    pub fn pdb_violation(pdb: &str, desired: i32, current: i32) -> Self {
        let mut s = Self::failure(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        );
        s.details = Some(StatusDetails::default());
        s.with_cause(
            Some("DisruptionBudget"),
            &format!("The disruption budget {pdb} needs {desired} healthy pods and has {current} currently"),
        )
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
        let mut s = Self::failure(
            500,
            "InternalError",
            format!("Internal error occurred: {detail}"),
        );
        s.details = Some(StatusDetails::default());
        s.with_cause(None, detail)
    }

    /// 500 from the eviction subresource when two or more PodDisruptionBudgets
    /// select the pod: no reason and no details, as the real server writes it
    /// (`eviction-500-two-pdbs.json`).
    pub fn multiple_pdbs() -> Self {
        Self {
            status: "Failure".into(),
            message: Some(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                    .into(),
            ),
            ..Self::success(500)
        }
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable(message: &str) -> Self {
        Self::failure(503, "ServiceUnavailable", message)
    }

    /// 429 TooManyRequests from API priority and fairness.
    pub fn too_many_requests(retry_after: i32) -> Self {
        let mut s = Self::failure(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        s.details = Some(StatusDetails {
            retry_after_seconds: Some(retry_after),
            ..StatusDetails::default()
        });
        s
    }
}

/// `pods`, or `poddisruptionbudgets.policy` for a non-core group.
fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
