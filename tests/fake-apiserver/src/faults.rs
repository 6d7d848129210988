//! Fault injection: canned responses for matching requests.

use std::fmt;
use std::sync::Arc;

use crate::status::Status;

/// What a fault matcher sees of a request.
#[derive(Clone, Debug)]
pub struct RequestInfo<'a> {
    /// HTTP method (`GET`, `POST`...).
    pub method: &'a str,
    /// Path without the query.
    pub path: &'a str,
    /// Raw query string (may be empty).
    pub query: &'a str,
    /// Whether this is a watch (`?watch=true`).
    pub watch: bool,
    /// Bearer token, if any.
    pub token: Option<&'a str>,
}

type MatchFn = Arc<dyn Fn(&RequestInfo<'_>) -> bool + Send + Sync>;

/// Which requests a fault applies to.
#[derive(Clone)]
pub enum Matcher {
    /// Method (empty or `*` for any) and path prefix.
    Prefix {
        /// HTTP method, `*` or empty for any.
        method: String,
        /// Prefix of the path (no query).
        path_prefix: String,
    },
    /// Anything the closure accepts.
    Custom(MatchFn),
}

impl Matcher {
    /// Method + path prefix (`Matcher::new("POST", "/api/v1/namespaces/ns/pods/p/eviction")`).
    pub fn new(method: &str, path_prefix: &str) -> Self {
        Self::Prefix {
            method: method.to_string(),
            path_prefix: path_prefix.to_string(),
        }
    }

    /// Any request.
    pub fn any() -> Self {
        Self::new("*", "/")
    }

    /// Any request the closure accepts.
    pub fn custom(f: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static) -> Self {
        Self::Custom(Arc::new(f))
    }

    /// Whether the request matches.
    pub fn matches(&self, req: &RequestInfo<'_>) -> bool {
        match self {
            Self::Prefix {
                method,
                path_prefix,
            } => {
                (method.is_empty() || method == "*" || method.eq_ignore_ascii_case(req.method))
                    && req.path.starts_with(path_prefix.as_str())
            }
            Self::Custom(f) => f(req),
        }
    }
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Prefix {
                method,
                path_prefix,
            } => write!(f, "{method} {path_prefix}*"),
            Self::Custom(_) => f.write_str("<custom matcher>"),
        }
    }
}

/// The body of an injected response.
#[derive(Clone, Debug)]
pub enum FaultBody {
    /// A `Status` (also sets the code).
    Status(Box<Status>),
    /// Any JSON value (e.g. a wrong object).
    Json(serde_json::Value),
    /// Raw bytes (e.g. truncated JSON, HTML from a proxy).
    Raw(Vec<u8>),
}

/// What to do with a matching request.
#[derive(Clone, Debug)]
pub enum FaultResponse {
    /// Answer with this status code, body and extra headers.
    Respond {
        /// HTTP status code.
        code: u16,
        /// Body.
        body: FaultBody,
        /// Extra headers (`Retry-After`...).
        headers: Vec<(String, String)>,
    },
    /// Accept the request and never answer it (no headers, no close): a hung
    /// server or a proxy in front of one. Recorded with status 0 when it arrives;
    /// held until the client gives up or the server shuts down.
    NeverAnswer,
}

impl FaultResponse {
    /// A `Status` body with its code.
    pub fn status(status: Status) -> Self {
        Self::Respond {
            code: status.code,
            body: FaultBody::Status(Box::new(status)),
            headers: Vec::new(),
        }
    }

    /// The answer a real kube-apiserver gave, as captured in `fixtures/{name}` (its
    /// status and body: a PodDisruptionBudget's 429, an admission policy's 422, RBAC's 403).
    ///
    /// # Panics
    /// When there is no such capture.
    pub fn captured(name: &str) -> Self {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let capture: serde_json::Value = serde_json::from_str(&text).expect("a capture is JSON");
        let code = capture["status"]
            .as_u64()
            .expect("a capture has its status") as u16;
        Self::json(code, capture["body"].clone())
    }

    /// A `Failure` status with code, reason and message.
    pub fn failure(code: u16, reason: &str, message: &str) -> Self {
        Self::status(Status::failure(code, reason, message))
    }

    /// 500 InternalError.
    pub fn internal_error() -> Self {
        Self::status(Status::internal("etcdserver: request timed out"))
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable() -> Self {
        Self::status(Status::service_unavailable(
            "the server is currently unable to handle the request",
        ))
    }

    /// 429 from API priority and fairness, with a `Retry-After` header.
    pub fn throttled(retry_after_seconds: u32) -> Self {
        Self::status(Status::too_many_requests(retry_after_seconds as i32))
            .with_header("Retry-After", &retry_after_seconds.to_string())
    }

    /// Any JSON value with a code.
    pub fn json(code: u16, value: serde_json::Value) -> Self {
        Self::Respond {
            code,
            body: FaultBody::Json(value),
            headers: Vec::new(),
        }
    }

    /// Raw bytes with a code.
    pub fn raw(code: u16, bytes: impl Into<Vec<u8>>) -> Self {
        Self::Respond {
            code,
            body: FaultBody::Raw(bytes.into()),
            headers: Vec::new(),
        }
    }

    /// A 200 whose JSON body is cut off in the middle.
    pub fn truncated_json() -> Self {
        Self::raw(
            200,
            br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"plac"#.to_vec(),
        )
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Self::Respond { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// The status code this fault answers with (0 for no answer).
    pub fn code(&self) -> u16 {
        match self {
            Self::Respond { code, .. } => *code,
            Self::NeverAnswer => 0,
        }
    }
}

/// A fault waiting for `times` more matching requests.
#[derive(Clone, Debug)]
pub(crate) struct FaultRule {
    pub matcher: Matcher,
    pub response: FaultResponse,
    pub remaining: usize,
}
