//! HTTP/1.1: accept loop (with outages), request recording, fault injection,
//! authentication, RBAC, admission, routing and the resource handlers.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::events::v1::Event as NewEvent;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::Shared;
use crate::controllers::DeleteOpts;
use crate::faults::{FaultBody, FaultResponse, OutageMode, RequestInfo};
use crate::objects::time_of;
use crate::patch::{PatchError, json_patch, merge_patch};
use crate::rbac::Subject;
use crate::selector::{FieldSelector, Selector};
use crate::status::Status;
use crate::store::{Key, Kind, RecordedRequest, State};
use crate::watch::{self, Filter, ResBody, WatchParams};

const MAX_BODY: usize = 3 * 1024 * 1024;

/// Decodes a query string (`+` is a space, `%XX` escapes) into pairs.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                    match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        Some(b) => {
                            out.push(b);
                            i += 2;
                        }
                        None => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// A request after the body was read.
pub(crate) struct Ctx {
    method: String,
    path: String,
    params: Vec<(String, String)>,
    body: Bytes,
    content_type: Option<String>,
    token: Option<String>,
    /// `Accept` asks for `PartialObjectMetadata` (or its list).
    metadata_only: bool,
    /// Bytes of the answer sent (a watch counts as it streams).
    sent: Arc<AtomicU64>,
}

impl Ctx {
    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.param(key), Some("true" | "1" | "True"))
    }
}

/// A response before it is sent.
pub(crate) struct Reply {
    code: u16,
    body: ResBody,
    content_type: &'static str,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn json(code: u16, value: &Value) -> Self {
        Self {
            code,
            body: ResBody::full(value.to_string()),
            content_type: "application/json",
            headers: Vec::new(),
        }
    }

    fn status(status: Status) -> Self {
        Self::json(status.code, &status.to_value())
    }

    fn text(code: u16, text: &str) -> Self {
        Self {
            code,
            body: ResBody::full(text.to_string()),
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
        }
    }
}

impl From<Status> for Reply {
    fn from(s: Status) -> Self {
        Self::status(s)
    }
}

impl From<Box<Status>> for Reply {
    fn from(s: Box<Status>) -> Self {
        Self::status(*s)
    }
}

type HResult = Result<Reply, Reply>;

async fn accept_opt(
    listener: &Option<TcpListener>,
) -> io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// Accepts connections until shutdown; closes and re-opens the listener (same
/// port) around outages.
pub(crate) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, addr: SocketAddr) {
    let mut listener = Some(listener);
    let mut outage_rx = shared.outage_tx.subscribe();
    let mut shutdown_rx = shared.shutdown_tx.subscribe();
    loop {
        let outage = *outage_rx.borrow_and_update();
        if outage == Some(OutageMode::Refuse) {
            listener = None;
        } else if listener.is_none() {
            // Back from an outage: bind the same port again.
            for _ in 0..500 {
                match TcpListener::bind(addr).await {
                    Ok(l) => {
                        listener = Some(l);
                        break;
                    }
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                }
            }
        }
        shared.applied_outage_tx.send_replace(outage);
        tokio::select! {
            r = outage_rx.changed() => if r.is_err() { return },
            _ = shutdown_rx.changed() => return,
            accepted = accept_opt(&listener) => {
                let Ok((stream, _)) = accepted else { continue };
                if outage_rx.borrow().is_some() {
                    drop(stream);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                tokio::spawn(async move {
                    let mut kill = shared.kill_tx.subscribe();
                    let svc_shared = shared.clone();
                    let service = service_fn(move |req| handle(svc_shared.clone(), req));
                    let conn = http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = kill.changed() => {}
                    }
                });
            }
        }
    }
}

fn bearer<B>(req: &Request<B>) -> Option<String> {
    let v = req
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// The service function: one request in, one response out.
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
) -> Result<Response<ResBody>, io::Error>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let clock = shared.lock().clock;
    let (at, time) = (clock.instant(), clock.wall());
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let token = bearer(&req);
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_string());
    // kube's metadata_watcher asks for `application/json;as=PartialObjectMetadataList;
    // g=meta.k8s.io;v=v1` (lists) and `...;as=PartialObjectMetadata;...` (watches).
    let metadata_only = req
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("as=PartialObjectMetadata"));
    let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(e.to_string()),
    };
    let params = query_pairs(&query);
    let watch = params
        .iter()
        .any(|(k, v)| k == "watch" && matches!(v.as_str(), "true" | "1" | "True"));
    let body_bytes = body.clone().unwrap_or_default();
    let body_json = if body_bytes.is_empty() {
        None
    } else {
        serde_json::from_slice::<Value>(&body_bytes).ok()
    };

    let (latency, fault, user) = {
        let mut st = shared.lock();
        let info = RequestInfo {
            method: &method,
            path: &path,
            query: &query,
            watch,
            token: token.as_deref(),
        };
        let idx = st
            .faults
            .iter()
            .position(|f| f.remaining > 0 && f.matcher.matches(&info));
        let fault = idx.map(|i| {
            let f = &mut st.faults[i];
            f.remaining -= 1;
            let resp = f.response.clone();
            if f.remaining == 0 {
                st.faults.remove(i);
            }
            resp
        });
        let user = token
            .as_deref()
            .and_then(|t| st.tokens.get(t))
            .map(|s| s.user.clone());
        (st.latency, fault, user)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }

    let sent = Arc::new(AtomicU64::new(0));
    let faulted = fault.is_some();
    let never = matches!(fault, Some(FaultResponse::NeverAnswer));
    let reply = match fault {
        Some(FaultResponse::CloseConnection | FaultResponse::NeverAnswer) => None,
        Some(FaultResponse::Respond {
            code,
            body,
            headers,
        }) => {
            let (bytes, ct) = match body {
                FaultBody::Status(s) => (Bytes::from(s.to_value().to_string()), "application/json"),
                FaultBody::Json(v) => (Bytes::from(v.to_string()), "application/json"),
                FaultBody::Raw(b) => (Bytes::from(b), "application/json"),
            };
            Some(Reply {
                code,
                body: ResBody::full(bytes),
                content_type: ct,
                headers,
            })
        }
        None => {
            let ctx = Ctx {
                method: method.clone(),
                path: path.clone(),
                params,
                body: body_bytes,
                content_type: content_type.clone(),
                token: token.clone(),
                metadata_only,
                sent: sent.clone(),
            };
            Some(match body {
                Err(e) => Reply::status(Status::failure(
                    413,
                    "RequestEntityTooLarge",
                    format!("Request entity too large: {e}"),
                )),
                Ok(_) => route(&shared, &ctx).unwrap_or_else(|e| e),
            })
        }
    };

    let code = reply.as_ref().map_or(0, |r| r.code);
    if let Some(Reply {
        body: ResBody::Full(Some(b)),
        ..
    }) = &reply
    {
        sent.fetch_add(b.len() as u64, Ordering::Relaxed);
    }
    {
        let mut st = shared.lock();
        st.counters.requests += 1;
        if faulted {
            st.counters.faults_injected += 1;
        }
        if st.cfg.log_requests {
            let q = if query.is_empty() {
                String::new()
            } else {
                format!("?{query}")
            };
            eprintln!("{method} {path}{q} {code}");
        }
        st.requests.push(RecordedRequest {
            method,
            path,
            query,
            body: body_json,
            content_type,
            token,
            user,
            status: code,
            bytes_sent: sent,
            metadata_only,
            watch,
            at,
            time,
        });
    }
    if never {
        // Ends when the client drops the request (its connection closes, or
        // the in-process caller's future is dropped) or the server stops.
        std::future::pending::<()>().await;
    }
    let Some(reply) = reply else {
        return Err(io::Error::other("connection closed by fault injection"));
    };
    let mut builder = Response::builder()
        .status(reply.code)
        .header(hyper::header::CONTENT_TYPE, reply.content_type)
        .header(hyper::header::CACHE_CONTROL, "no-cache, private")
        .header("Audit-Id", shared.lock().rng.uuid());
    for (k, v) in &reply.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder.body(reply.body).map_err(io::Error::other)
}

// ---- routing ----

enum Res {
    Pods,
    Pod(String),
    PodEviction(String),
    Events,
    Event(String),
    /// events.k8s.io/v1: the same Events as another version.
    NewEvents,
    NewEvent(String),
    Nodes,
    Node(String),
    Pdbs,
    Pdb(String),
}

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": "v1.36.2",
        "gitCommit": "5f3c1a2b9e7d4c6a8b0e1f2d3c4b5a6978877665",
        "gitTreeState": "clean",
        "buildDate": "2026-10-14T09:12:45Z",
        "goVersion": "go1.25.3",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

fn authenticate(st: &State, ctx: &Ctx, anonymous_ok: bool) -> Result<Option<Subject>, Reply> {
    match &ctx.token {
        Some(t) => match st.tokens.get(t) {
            Some(s) => Ok(Some(s.clone())),
            None => Err(Status::unauthorized().into()),
        },
        None if anonymous_ok => Ok(None),
        None => Err(Status::unauthorized().into()),
    }
}

fn route(shared: &Arc<Shared>, ctx: &Ctx) -> HResult {
    let segs: Vec<&str> = ctx.path.split('/').filter(|s| !s.is_empty()).collect();
    let m = ctx.method.as_str();
    // Non-resource endpoints.
    match segs.as_slice() {
        ["version"] => {
            authenticate(&shared.lock(), ctx, true)?;
            return if m == "GET" {
                Ok(Reply::json(200, &version_info()))
            } else {
                Err(Status::method_not_allowed().into())
            };
        }
        ["healthz" | "livez" | "readyz"] => return Ok(Reply::text(200, "ok")),
        ["api"] => {
            authenticate(&shared.lock(), ctx, true)?;
            return Ok(Reply::json(
                200,
                &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}),
            ));
        }
        _ => {}
    }
    let (group, ns, res): (&str, &str, Res) = match segs.as_slice() {
        ["api", "v1", "pods"] => ("", "", Res::Pods),
        ["api", "v1", "namespaces", ns, "pods"] => ("", ns, Res::Pods),
        ["api", "v1", "namespaces", ns, "pods", name]
        | ["api", "v1", "namespaces", ns, "pods", name, "status"] => {
            ("", ns, Res::Pod(name.to_string()))
        }
        ["api", "v1", "namespaces", ns, "pods", name, "eviction"] => {
            ("", ns, Res::PodEviction(name.to_string()))
        }
        ["api", "v1", "events"] => ("", "", Res::Events),
        ["api", "v1", "namespaces", ns, "events"] => ("", ns, Res::Events),
        ["api", "v1", "namespaces", ns, "events", name] => ("", ns, Res::Event(name.to_string())),
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events"] => {
            ("events.k8s.io", ns, Res::NewEvents)
        }
        [
            "apis",
            "events.k8s.io",
            "v1",
            "namespaces",
            ns,
            "events",
            name,
        ] => ("events.k8s.io", ns, Res::NewEvent(name.to_string())),
        ["api", "v1", "nodes"] => ("", "", Res::Nodes),
        ["api", "v1", "nodes", name] | ["api", "v1", "nodes", name, "status"] => {
            ("", "", Res::Node(name.to_string()))
        }
        ["apis", "policy", "v1", "poddisruptionbudgets"] => ("policy", "", Res::Pdbs),
        [
            "apis",
            "policy",
            "v1",
            "namespaces",
            ns,
            "poddisruptionbudgets",
        ] => ("policy", ns, Res::Pdbs),
        [
            "apis",
            "policy",
            "v1",
            "namespaces",
            ns,
            "poddisruptionbudgets",
            name,
        ] => ("policy", ns, Res::Pdb(name.to_string())),
        _ => {
            authenticate(&shared.lock(), ctx, false)?;
            return Err(Status::path_not_found().into());
        }
    };
    let watch = ctx.flag("watch");
    let (resource, sub, name, verb) = match (&res, m) {
        (Res::Pods, "GET") => ("pods", "", "", if watch { "watch" } else { "list" }),
        (Res::Pods, "POST") => ("pods", "", "", "create"),
        (Res::Pod(n), _) => ("pods", "", n.as_str(), verb_of(m)?),
        (Res::PodEviction(n), "POST") => ("pods", "eviction", n.as_str(), "create"),
        (Res::Events, "GET") => ("events", "", "", if watch { "watch" } else { "list" }),
        (Res::Events, "POST") => ("events", "", "", "create"),
        (Res::Event(n), "GET") => ("events", "", n.as_str(), "get"),
        (Res::NewEvents, "POST") => ("events", "", "", "create"),
        (Res::NewEvent(n), "GET" | "PATCH") => ("events", "", n.as_str(), verb_of(m)?),
        (Res::Nodes, "GET") => ("nodes", "", "", if watch { "watch" } else { "list" }),
        (Res::Node(n), _) => ("nodes", "", n.as_str(), verb_of(m)?),
        (Res::Pdbs, "GET") => ("poddisruptionbudgets", "", "", "list"),
        (Res::Pdb(n), "GET") => ("poddisruptionbudgets", "", n.as_str(), "get"),
        _ => {
            authenticate(&shared.lock(), ctx, false)?;
            return Err(Status::method_not_allowed().into());
        }
    };
    let subject = {
        let st = shared.lock();
        authenticate(&st, ctx, false)?.unwrap_or_else(|| Subject::new("system:anonymous"))
    };
    let full = if sub.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{sub}")
    };
    if !subject.allows(verb, &full, ns, name) {
        return Err(
            Status::forbidden_rbac(&subject.user, verb, resource, sub, group, ns, name).into(),
        );
    }
    let ns = ns.to_string();
    match (res, m) {
        (Res::Pods, "GET") => list_or_watch(shared, ctx, Kind::Pod, &ns),
        (Res::Pods, _) => create_pod(shared, ctx, &ns),
        (Res::Pod(name), "GET") => get_object(shared, Kind::Pod, &(ns, name)),
        (Res::Pod(name), "DELETE") => delete_pod(shared, ctx, &subject, &(ns, name)),
        (Res::Pod(name), _) => update_pod(shared, ctx, &(ns, name)),
        (Res::PodEviction(name), _) => evict(shared, ctx, &subject, &(ns, name)),
        (Res::Events, "GET") => list_events(shared, &ns),
        (Res::Events, _) => create_event(shared, ctx, &ns),
        (Res::Event(name), _) => {
            let st = shared.lock();
            match st.events.get(&(ns, name.clone())) {
                Some(e) => Ok(Reply::json(200, &to_json(e))),
                None => Err(Status::not_found("events", "", &name).into()),
            }
        }
        (Res::NewEvents, _) => create_new_event(shared, ctx, &ns),
        (Res::NewEvent(name), "GET") => {
            let st = shared.lock();
            match st.events.get(&(ns, name.clone())) {
                Some(e) => Ok(Reply::json(200, &to_json(&to_new_event(e)))),
                None => Err(Status::not_found("events", "events.k8s.io", &name).into()),
            }
        }
        (Res::NewEvent(name), _) => patch_new_event(shared, ctx, &(ns, name)),
        (Res::Nodes, _) => list_or_watch(shared, ctx, Kind::Node, ""),
        (Res::Node(name), "GET") => get_object(shared, Kind::Node, &(String::new(), name)),
        (Res::Node(name), "DELETE") => shared.mutate(|st, now| match st.remove_node(&name, now) {
            Some(n) => Ok(Reply::json(200, &to_json(&n))),
            None => Err(Status::not_found("nodes", "", &name).into()),
        }),
        (Res::Node(name), _) => update_node(shared, ctx, &name),
        (Res::Pdbs, _) => {
            let st = shared.lock();
            let now = st.clock.instant();
            let items: Vec<Value> = st
                .pdbs
                .keys()
                .filter(|k| ns.is_empty() || k.0 == ns)
                .filter_map(|k| st.pdb_object(k, now))
                .map(|p| strip_type(to_json(&p)))
                .collect();
            Ok(Reply::json(
                200,
                &json!({"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {"resourceVersion": st.rv.to_string()}, "items": items}),
            ))
        }
        (Res::Pdb(name), _) => {
            let st = shared.lock();
            match st.pdb_object(&(ns, name.clone()), st.clock.instant()) {
                Some(p) => Ok(Reply::json(200, &to_json(&p))),
                None => Err(Status::not_found("poddisruptionbudgets", "policy", &name).into()),
            }
        }
    }
}

fn verb_of(method: &str) -> Result<&'static str, Reply> {
    Ok(match method {
        "GET" => "get",
        "DELETE" => "delete",
        "PATCH" => "patch",
        "PUT" => "update",
        _ => return Err(Status::method_not_allowed().into()),
    })
}

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// List items carry no kind/apiVersion, as in real list responses.
fn strip_type(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("kind");
        m.remove("apiVersion");
    }
    v
}

fn parse_body<T: DeserializeOwned>(ctx: &Ctx) -> Result<T, Reply> {
    serde_json::from_slice(&ctx.body).map_err(|e| {
        Status::bad_request(format!("couldn't get version/kind; json parse error: {e}")).into()
    })
}

fn filter_of(ctx: &Ctx, kind: Kind, ns: &str) -> Result<Filter, Reply> {
    let labels = Selector::parse(ctx.param("labelSelector").unwrap_or(""))
        .map_err(|e| Reply::from(Status::bad_request(e)))?;
    let supported: &[&str] = match kind {
        Kind::Pod => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Kind::Node => &["metadata.name", "spec.unschedulable"],
    };
    let fields = FieldSelector::parse(ctx.param("fieldSelector").unwrap_or(""), supported)
        .map_err(|e| Reply::from(Status::bad_request(e)))?;
    Ok(Filter {
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        labels,
        fields,
    })
}

fn list_or_watch(shared: &Arc<Shared>, ctx: &Ctx, kind: Kind, ns: &str) -> HResult {
    let filter = filter_of(ctx, kind, ns)?;
    if ctx.flag("watch") {
        let resource_version = match ctx.param("resourceVersion").unwrap_or("") {
            "" | "0" => None,
            rv => Some(rv.parse::<u64>().map_err(|_| {
                Reply::from(Status::bad_request(format!(
                    "invalid resource version: {rv:?}"
                )))
            })?),
        };
        let timeout = match ctx.param("timeoutSeconds") {
            Some(t) => std::time::Duration::from_secs(t.parse::<u64>().map_err(|_| {
                Reply::from(Status::bad_request(format!(
                    "invalid timeoutSeconds: {t:?}"
                )))
            })?),
            None => shared.lock().cfg.default_watch_timeout,
        };
        let params = WatchParams {
            resource_version,
            bookmarks: ctx.flag("allowWatchBookmarks"),
            timeout,
            send_initial_events: ctx.flag("sendInitialEvents"),
            metadata_only: ctx.metadata_only,
            sent: ctx.sent.clone(),
        };
        shared.lock().counters.watches_started += 1;
        let body = watch::start(shared, kind, filter, params);
        return Ok(Reply {
            code: 200,
            body,
            content_type: "application/json",
            headers: Vec::new(),
        });
    }
    // Paging as kube-apiserver does it (`nodes-list-paged-1.json`, `-2.json`):
    // at most `limit` items, then `metadata.continue` (an opaque token: here the
    // list's resourceVersion and the last key) and `remainingItemCount`; the
    // pages of one list carry the resourceVersion of its first page.
    let limit = match ctx.param("limit").unwrap_or("") {
        "" | "0" => None,
        l => Some(
            l.parse::<usize>()
                .map_err(|_| Reply::from(Status::bad_request(format!("invalid limit: {l:?}"))))?,
        ),
    };
    let after = match ctx.param("continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => Some(parse_continue(token).ok_or_else(|| {
            Reply::from(Status::bad_request(
                "continue key is not valid: illegal base64 data at input byte 0",
            ))
        })?),
    };
    let st = shared.lock();
    let rv = after.as_ref().map_or(st.rv, |(rv, _)| *rv);
    let hist = st.history(kind);
    let mut objs: Vec<(&Key, &Arc<Value>)> = hist.current.iter().collect();
    objs.sort_by(|a, b| a.0.cmp(b.0));
    let matching: Vec<(&Key, &Arc<Value>)> = objs
        .into_iter()
        .filter(|(k, _)| after.as_ref().is_none_or(|(_, last)| *k > last))
        .filter(|(_, v)| filter.matches(v))
        .collect();
    let take = limit.unwrap_or(matching.len()).min(matching.len());
    let rest = matching.len() - take;
    let items: Vec<Value> = matching[..take]
        .iter()
        .map(|(_, v)| {
            if ctx.metadata_only {
                watch::partial_metadata(v)
            } else {
                strip_type((***v).clone())
            }
        })
        .collect();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some((last, _)) = matching[..take].last().filter(|_| rest > 0) {
        metadata["continue"] = json!(format!("{rv}:{}/{}", last.0, last.1));
        metadata["remainingItemCount"] = json!(rest);
    }
    // As `nodes-list-metadata-200.json`: a PartialObjectMetadataList whose
    // items keep their kind and apiVersion.
    let (list_kind, api_version) = if ctx.metadata_only {
        ("PartialObjectMetadataList".to_string(), "meta.k8s.io/v1")
    } else {
        (format!("{}List", kind.name()), "v1")
    };
    Ok(Reply::json(
        200,
        &json!({"kind": list_kind, "apiVersion": api_version, "metadata": metadata, "items": items}),
    ))
}

/// A continue token of [`list_or_watch`]: `RV:NAMESPACE/NAME`.
fn parse_continue(token: &str) -> Option<(u64, Key)> {
    let (rv, key) = token.split_once(':')?;
    let (ns, name) = key.split_once('/')?;
    Some((rv.parse().ok()?, (ns.to_string(), name.to_string())))
}

fn get_object(shared: &Arc<Shared>, kind: Kind, key: &Key) -> HResult {
    let st = shared.lock();
    match st.history(kind).current.get(key) {
        Some(v) => Ok(Reply::json(200, v)),
        None => {
            let resource = if kind == Kind::Pod { "pods" } else { "nodes" };
            Err(Status::not_found(resource, "", &key.1).into())
        }
    }
}

/// The own-pod-only ValidatingAdmissionPolicy (service accounts only).
fn admit_own_pod(st: &State, subject: &Subject, pod: &str) -> Result<(), Reply> {
    if !st.own_pod_only
        || !subject.is_service_account()
        || subject.bound_pod.as_deref() == Some(pod)
    {
        return Ok(());
    }
    Err(Status::admission_denied(pod).into())
}

fn delete_opts(ctx: &Ctx, body: Option<&DeleteOptions>) -> Result<DeleteOpts, Reply> {
    let mut opts = DeleteOpts::default();
    if let Some(b) = body {
        if let Some(p) = &b.preconditions {
            opts.uid = p.uid.clone();
            opts.resource_version = p.resource_version.clone();
        }
        opts.grace = b.grace_period_seconds;
        opts.dry_run = b.dry_run.iter().flatten().any(|d| d == "All");
    }
    if let Some(g) = ctx.param("gracePeriodSeconds") {
        opts.grace = Some(g.parse().map_err(|_| {
            Reply::from(Status::bad_request(format!(
                "invalid gracePeriodSeconds: {g:?}"
            )))
        })?);
    }
    if ctx.param("dryRun") == Some("All") {
        opts.dry_run = true;
    }
    if let Some(g) = opts.grace
        && g < 0
    {
        opts.grace = Some(1);
    }
    Ok(opts)
}

fn delete_pod(shared: &Arc<Shared>, ctx: &Ctx, subject: &Subject, key: &Key) -> HResult {
    let body: Option<DeleteOptions> = if ctx.body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(parse_body(ctx)?)
    };
    let opts = delete_opts(ctx, body.as_ref())?;
    shared.mutate(|st, now| {
        if !st.pods.contains_key(key) {
            return Err(Status::not_found("pods", "", &key.1).into());
        }
        admit_own_pod(st, subject, &key.1)?;
        let pod = st.delete_pod(key, &opts, now)?;
        Ok(Reply::json(200, &to_json(&pod)))
    })
}

fn evict(shared: &Arc<Shared>, ctx: &Ctx, subject: &Subject, key: &Key) -> HResult {
    let eviction: Eviction = parse_body(ctx)?;
    if let Some(n) = eviction.metadata.name.as_deref()
        && !n.is_empty()
        && n != key.1
    {
        return Err(
            Status::bad_request("name in URL does not match name in Eviction object").into(),
        );
    }
    let opts = delete_opts(ctx, eviction.delete_options.as_ref())?;
    shared.mutate(|st, now| {
        admit_own_pod(st, subject, &key.1)?;
        st.evict_pod(key, &opts, now)?;
        Ok(Reply::status(Status::success(201)))
    })
}

fn create_pod(shared: &Arc<Shared>, ctx: &Ctx, ns: &str) -> HResult {
    let mut pod: Pod = parse_body(ctx)?;
    check_namespace(&mut pod.metadata, ns)?;
    shared.mutate(|st, now| {
        let name = assign_name(st, &mut pod.metadata, "Pod")?;
        if st.pods.contains_key(&(ns.to_string(), name.clone())) {
            return Err(Status::already_exists("pods", &name).into());
        }
        pod.metadata.uid = None;
        pod.metadata.resource_version = None;
        pod.metadata.creation_timestamp = None;
        let pod = st.add_pod(pod, now);
        Ok(Reply::json(201, &to_json(&pod)))
    })
}

fn check_namespace(meta: &mut ObjectMeta, ns: &str) -> Result<(), Reply> {
    match meta.namespace.as_deref() {
        Some(n) if !n.is_empty() && n != ns => Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )
        .into()),
        _ => {
            meta.namespace = Some(ns.to_string());
            Ok(())
        }
    }
}

fn assign_name(st: &mut State, meta: &mut ObjectMeta, kind: &str) -> Result<String, Reply> {
    match (meta.name.as_deref(), meta.generate_name.as_deref()) {
        (Some(n), _) if !n.is_empty() => Ok(n.to_string()),
        (_, Some(g)) if !g.is_empty() => {
            let n = format!("{g}{}", st.rng.suffix(5));
            meta.name = Some(n.clone());
            Ok(n)
        }
        _ => Err(Status::invalid(
            kind,
            "",
            "metadata.name",
            "Required value: name or generateName is required",
        )
        .into()),
    }
}

/// Names a new Event (either API: both are stored in one map) and stamps its
/// metadata (uid, creation time, resourceVersion), or refuses a name in use.
fn admit_event(st: &mut State, ns: &str, meta: &mut ObjectMeta) -> Result<Key, Reply> {
    let name = assign_name(st, meta, "Event")?;
    let key = (ns.to_string(), name.clone());
    if st.events.contains_key(&key) {
        return Err(Status::already_exists("events", &name).into());
    }
    meta.uid = Some(st.rng.uuid());
    meta.creation_timestamp = Some(time_of(st.clock.wall()));
    meta.resource_version = Some(st.next_rv().to_string());
    Ok(key)
}

fn create_event(shared: &Arc<Shared>, ctx: &Ctx, ns: &str) -> HResult {
    let mut event: Event = parse_body(ctx)?;
    check_namespace(&mut event.metadata, ns)?;
    shared.mutate(|st, _| {
        let key = admit_event(st, ns, &mut event.metadata)?;
        if event.reporting_component.is_none() {
            event.reporting_component = Some(String::new());
        }
        if event.reporting_instance.is_none() {
            event.reporting_instance = Some(String::new());
        }
        st.counters.events_created += 1;
        st.events.insert(key, event.clone());
        Ok(Reply::json(201, &to_json(&event)))
    })
}

/// Whether `name` is a DNS-1123 subdomain, as object names must be.
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.starts_with(alnum)
                && label.ends_with(alnum)
                && label.chars().all(|c| alnum(c) || c == '-')
        })
}

/// The core/v1 view of an events.k8s.io/v1 Event (as the API server keeps one
/// object for both versions).
fn from_new_event(e: NewEvent) -> Event {
    Event {
        metadata: e.metadata,
        action: e.action,
        count: e.deprecated_count,
        event_time: e.event_time,
        first_timestamp: e.deprecated_first_timestamp,
        involved_object: e.regarding.unwrap_or_default(),
        last_timestamp: e.deprecated_last_timestamp,
        message: e.note,
        reason: e.reason,
        related: e.related,
        reporting_component: e.reporting_controller,
        reporting_instance: e.reporting_instance,
        series: e.series.map(|s| k8s_openapi::api::core::v1::EventSeries {
            count: Some(s.count),
            last_observed_time: Some(s.last_observed_time),
        }),
        source: e.deprecated_source,
        type_: e.type_,
    }
}

/// The events.k8s.io/v1 view of a stored Event.
fn to_new_event(e: &Event) -> NewEvent {
    let e = e.clone();
    NewEvent {
        metadata: e.metadata,
        action: e.action,
        deprecated_count: e.count,
        deprecated_first_timestamp: e.first_timestamp,
        deprecated_last_timestamp: e.last_timestamp,
        deprecated_source: e.source,
        event_time: e.event_time,
        note: e.message,
        reason: e.reason,
        regarding: Some(e.involved_object),
        related: e.related,
        reporting_controller: e.reporting_component,
        reporting_instance: e.reporting_instance,
        series: e.series.and_then(|s| {
            Some(k8s_openapi::api::events::v1::EventSeries {
                count: s.count?,
                last_observed_time: s.last_observed_time?,
            })
        }),
        type_: e.type_,
    }
}

/// POST an events.k8s.io/v1 Event. Like the real server, names (and
/// `generateName` prefixes) must be DNS-1123 subdomains: `placeholder-0.` is
/// refused with 422 (`events-k8s-io-create-201.json`), and `eventTime`,
/// `reportingController`, `reportingInstance` and `action` are required.
fn create_new_event(shared: &Arc<Shared>, ctx: &Ctx, ns: &str) -> HResult {
    let mut event: NewEvent = parse_body(ctx)?;
    check_namespace(&mut event.metadata, ns)?;
    let shown = event.metadata.name.clone().unwrap_or_default();
    if let Some(n) = event.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        if !is_dns_subdomain(n) {
            return Err(Status::invalid("Event", n, "metadata.name", "Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character").into());
        }
    } else if let Some(g) = event
        .metadata
        .generate_name
        .as_deref()
        .filter(|g| !g.is_empty())
    {
        // The server checks the prefix with a trailing '-' masked.
        let masked = match g.strip_suffix('-') {
            Some(p) => format!("{p}a"),
            None => g.to_string(),
        };
        if !is_dns_subdomain(&masked) {
            return Err(Status::invalid("Event", "", "metadata.generateName", "Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character").into());
        }
    }
    for (missing, field) in [
        (event.event_time.is_none(), "eventTime"),
        (
            event
                .reporting_controller
                .as_deref()
                .is_none_or(str::is_empty),
            "reportingController",
        ),
        (
            event
                .reporting_instance
                .as_deref()
                .is_none_or(str::is_empty),
            "reportingInstance",
        ),
        (event.action.as_deref().is_none_or(str::is_empty), "action"),
    ] {
        if missing {
            return Err(Status::invalid("Event", &shown, field, "Required value").into());
        }
    }
    shared.mutate(|st, _| {
        let key = admit_event(st, ns, &mut event.metadata)?;
        let stored = from_new_event(event);
        st.counters.events_created += 1;
        st.events.insert(key, stored.clone());
        Ok(Reply::json(201, &to_json(&to_new_event(&stored))))
    })
}

/// PATCH an events.k8s.io/v1 Event (kube's Recorder updates a series this way).
fn patch_new_event(shared: &Arc<Shared>, ctx: &Ctx, key: &Key) -> HResult {
    shared.mutate(|st, _| {
        let current = st
            .events
            .get(key)
            .map(to_new_event)
            .ok_or_else(|| Reply::from(Status::not_found("events", "events.k8s.io", &key.1)))?;
        let event = match updated_object(ctx, &current, "events", &key.1)? {
            Some(mut e) => {
                let rv = st.next_rv();
                e.metadata.resource_version = Some(rv.to_string());
                let stored = from_new_event(e);
                st.events.insert(key.clone(), stored.clone());
                to_new_event(&stored)
            }
            None => current,
        };
        Ok(Reply::json(200, &to_json(&event)))
    })
}

fn list_events(shared: &Arc<Shared>, ns: &str) -> HResult {
    let st = shared.lock();
    let items: Vec<Value> = st
        .events
        .iter()
        .filter(|(k, _)| ns.is_empty() || k.0 == ns)
        .map(|(_, e)| strip_type(to_json(e)))
        .collect();
    Ok(Reply::json(
        200,
        &json!({"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": st.rv.to_string()}, "items": items}),
    ))
}

/// PATCH (json-patch, merge-patch, strategic-merge-patch treated as merge) or
/// PUT of an object; `None` when nothing changed.
fn updated_object<T>(ctx: &Ctx, current: &T, resource: &str, name: &str) -> Result<Option<T>, Reply>
where
    T: Serialize + DeserializeOwned + Clone + PartialEq + Metadata<Ty = ObjectMeta>,
{
    let current_rv = current
        .metadata()
        .resource_version
        .clone()
        .unwrap_or_default();
    let mut doc = to_json(current);
    let patch: Value = serde_json::from_slice(&ctx.body)
        .map_err(|e| Reply::from(Status::bad_request(format!("error decoding patch: {e}"))))?;
    if ctx.method == "PUT" {
        doc = patch;
    } else {
        match ctx.content_type.as_deref().unwrap_or("") {
            "application/json-patch+json" => json_patch(&mut doc, &patch).map_err(|e| {
                Reply::from(match e {
                    PatchError::BadRequest(m) => Status::bad_request(m),
                    PatchError::Failed(m) => Status::patch_failed(&m),
                })
            })?,
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                merge_patch(&mut doc, &patch)
            }
            other => {
                return Err(Status::failure(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"),
                )
                .into());
            }
        }
    }
    let mut updated: T = serde_json::from_value(doc).map_err(|e| {
        Reply::from(Status::bad_request(format!(
            "the object provided is unrecognized: {e}"
        )))
    })?;
    let meta = updated.metadata_mut();
    if meta.name.as_deref().is_some_and(|n| n != name) {
        return Err(Status::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta.name.as_deref().unwrap_or("")
        ))
        .into());
    }
    match meta.resource_version.as_deref() {
        Some(rv) if !rv.is_empty() && rv != current_rv => {
            return Err(Status::conflict_modified(resource, name).into());
        }
        None if ctx.method == "PUT" => {
            return Err(Status::invalid(
                if resource == "nodes" { "Node" } else { "Pod" },
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )
            .into());
        }
        _ => {}
    }
    let cur = current.metadata();
    meta.name = cur.name.clone();
    meta.namespace = cur.namespace.clone();
    meta.uid = cur.uid.clone();
    meta.creation_timestamp = cur.creation_timestamp.clone();
    meta.resource_version = cur.resource_version.clone();
    Ok((updated != *current).then_some(updated))
}

fn update_node(shared: &Arc<Shared>, ctx: &Ctx, name: &str) -> HResult {
    shared.mutate(|st, _| {
        let current = st
            .nodes
            .get(name)
            .cloned()
            .ok_or_else(|| Reply::from(Status::not_found("nodes", "", name)))?;
        let node: Node = match updated_object(ctx, &current, "nodes", name)? {
            Some(n) => st.replace_node(name, n),
            None => current,
        };
        Ok(Reply::json(200, &to_json(&node)))
    })
}

fn update_pod(shared: &Arc<Shared>, ctx: &Ctx, key: &Key) -> HResult {
    shared.mutate(|st, _| {
        let current = st
            .pods
            .get(key)
            .cloned()
            .ok_or_else(|| Reply::from(Status::not_found("pods", "", &key.1)))?;
        let pod: Pod = match updated_object(ctx, &current, "pods", &key.1)? {
            Some(p) => st.replace_pod(key, p),
            None => current,
        };
        Ok(Reply::json(200, &to_json(&pod)))
    })
}

#[cfg(test)]
mod tests {
    use super::query_pairs;

    #[test]
    fn decodes_queries() {
        let q = query_pairs("labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&watch=true&x");
        assert_eq!(
            q[0],
            ("labelSelector".into(), "app=web,tier in (a,b)".into())
        );
        assert_eq!(q[1], ("watch".into(), "true".into()));
        assert_eq!(q[2], ("x".into(), String::new()));
        assert_eq!(query_pairs("a=%zz%4"), vec![("a".into(), "%zz%4".into())]);
    }
}
