//! HTTP/1.1: accept loop (with outages), request recording, fault injection, bearer
//! tokens, routing and the resource handlers.

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
use serde::Serialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::Shared;
use crate::faults::{FaultBody, FaultResponse, RequestInfo};
use crate::objects::time_of;
use crate::status::Status;
use crate::store::{Key, Kind, RecordedRequest};
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
    headers: Vec<(String, String)>,
}

impl Reply {
    fn json(code: u16, value: &Value) -> Self {
        Self {
            code,
            body: ResBody::full(value.to_string()),
            headers: Vec::new(),
        }
    }

    fn status(status: Status) -> Self {
        Self::json(status.code, &status.to_value())
    }
}

impl From<Status> for Reply {
    fn from(s: Status) -> Self {
        Self::status(s)
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
        if outage {
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
                if *outage_rx.borrow() {
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
    let body_json = serde_json::from_slice::<Value>(&body_bytes).ok();

    let (latency, fault, known) = {
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
        let known = token.as_deref().is_some_and(|t| st.tokens.contains(t));
        (st.latency, fault, known)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }

    let sent = Arc::new(AtomicU64::new(0));
    let faulted = fault.is_some();
    let never = matches!(fault, Some(FaultResponse::NeverAnswer));
    let reply = match fault {
        Some(FaultResponse::NeverAnswer) => None,
        Some(FaultResponse::Respond {
            code,
            body,
            headers,
        }) => {
            let bytes = match body {
                FaultBody::Status(s) => Bytes::from(s.to_value().to_string()),
                FaultBody::Json(v) => Bytes::from(v.to_string()),
                FaultBody::Raw(b) => Bytes::from(b),
            };
            Some(Reply {
                code,
                body: ResBody::full(bytes),
                headers,
            })
        }
        None => {
            let ctx = Ctx {
                method: method.clone(),
                path: path.clone(),
                params,
                body: body_bytes,
                metadata_only,
                sent: sent.clone(),
            };
            Some(match body {
                Err(e) => Reply::status(Status::failure(
                    413,
                    "RequestEntityTooLarge",
                    format!("Request entity too large: {e}"),
                )),
                // The version answers anyone; the rest needs a token it knows.
                Ok(_)
                    if !known
                        && !matches!(
                            path.as_str(),
                            "/version" | "/healthz" | "/livez" | "/readyz"
                        ) =>
                {
                    Reply::status(Status::unauthorized())
                }
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
        .header(hyper::header::CONTENT_TYPE, "application/json")
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
    Nodes,
    Node(String),
    Pdbs,
}

fn route(shared: &Arc<Shared>, ctx: &Ctx) -> HResult {
    let segs: Vec<&str> = ctx.path.split('/').filter(|s| !s.is_empty()).collect();
    let (ns, res) = match segs.as_slice() {
        ["version"] => {
            return Ok(Reply::json(
                200,
                &json!({"major": "1", "minor": "36", "gitVersion": "v1.36.2", "platform": "linux/amd64"}),
            ));
        }
        ["api", "v1", "pods"] => ("", Res::Pods),
        ["api", "v1", "namespaces", ns, "pods"] => (*ns, Res::Pods),
        ["api", "v1", "namespaces", ns, "pods", name] => (*ns, Res::Pod(name.to_string())),
        ["api", "v1", "namespaces", ns, "pods", name, "eviction"] => {
            (*ns, Res::PodEviction(name.to_string()))
        }
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events"] => (*ns, Res::Events),
        [
            "apis",
            "events.k8s.io",
            "v1",
            "namespaces",
            ns,
            "events",
            name,
        ] => (*ns, Res::Event(name.to_string())),
        ["api", "v1", "nodes"] => ("", Res::Nodes),
        ["api", "v1", "nodes", name] => ("", Res::Node(name.to_string())),
        [
            "apis",
            "policy",
            "v1",
            "namespaces",
            ns,
            "poddisruptionbudgets",
        ] => (*ns, Res::Pdbs),
        _ => return Err(Status::path_not_found().into()),
    };
    let ns = ns.to_string();
    match (res, ctx.method.as_str()) {
        (Res::Pods, "GET") => list_or_watch(shared, ctx, Kind::Pod, &ns),
        (Res::Nodes, "GET") => list_or_watch(shared, ctx, Kind::Node, ""),
        (Res::Pod(name), "GET") => get_object(shared, Kind::Pod, &(ns, name)),
        (Res::Node(name), "GET" | "PATCH" | "PUT") => get_object(shared, Kind::Node, &(ns, name)),
        (Res::Pod(name), "DELETE") => {
            let body = parse_body(ctx).unwrap_or_default();
            delete_pod(shared, &body, &(ns, name)).map(|p| Reply::json(200, &p))
        }
        (Res::PodEviction(name), "POST") => {
            let eviction = parse_body(ctx)?;
            delete_pod(shared, &eviction["deleteOptions"], &(ns, name))?;
            Ok(Reply::status(Status::success(201)))
        }
        (Res::Events, "POST") => create_event(shared, ctx, &ns),
        (Res::Event(name), "GET" | "PATCH") => {
            let st = shared.lock();
            match st.events.get(&(ns, name.clone())) {
                Some(e) => Ok(Reply::json(200, e)),
                None => Err(Status::not_found("events", "events.k8s.io", &name).into()),
            }
        }
        (Res::Pdbs, "GET") => {
            let st = shared.lock();
            let items = st.pdbs.iter().filter(|(k, _)| k.0 == ns);
            let items: Vec<Value> = items.map(|(_, p)| strip_type(to_json(p))).collect();
            Ok(Reply::json(
                200,
                &json!({"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {"resourceVersion": st.rv.to_string()}, "items": items}),
            ))
        }
        _ => Err(Status::method_not_allowed().into()),
    }
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

fn parse_body(ctx: &Ctx) -> Result<Value, Reply> {
    serde_json::from_slice(&ctx.body).map_err(|e| {
        Status::bad_request(format!("couldn't get version/kind; json parse error: {e}")).into()
    })
}

/// A `labelSelector` (the decision crate's parser: the same grammar) and a
/// `fieldSelector` of `path=value` / `path!=value` terms.
fn filter_of(ctx: &Ctx, ns: &str) -> Result<Filter, Reply> {
    let bad = |e: String| Reply::from(Status::bad_request(e));
    let labels =
        selfdestruct_decision::selector::Selector::parse(ctx.param("labelSelector").unwrap_or(""));
    let mut fields = Vec::new();
    for term in ctx
        .param("fieldSelector")
        .unwrap_or("")
        .split(',')
        .filter(|t| !t.is_empty())
    {
        let (path, negated, value) = match term.split_once("!=") {
            Some((p, v)) => (p, true, v),
            None => {
                let (p, v) = term
                    .split_once('=')
                    .ok_or_else(|| bad(format!("invalid selector: '{term}'")))?;
                (p.trim_end_matches('='), false, v)
            }
        };
        fields.push((
            format!("/{}", path.trim().replace('.', "/")),
            negated,
            value.trim().to_string(),
        ));
    }
    Ok(Filter {
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        labels: labels.map_err(bad)?,
        fields,
    })
}

fn list_or_watch(shared: &Arc<Shared>, ctx: &Ctx, kind: Kind, ns: &str) -> HResult {
    let filter = filter_of(ctx, ns)?;
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
            metadata_only: ctx.metadata_only,
            sent: ctx.sent.clone(),
        };
        let body = watch::start(shared, kind, filter, params);
        return Ok(Reply {
            code: 200,
            body,
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

/// Removes a pod at once, as a deletion that completed: with `options`' uid
/// precondition checked (409, as kube-apiserver words it); the pod as it was.
fn delete_pod(shared: &Arc<Shared>, options: &Value, key: &Key) -> Result<Value, Reply> {
    shared.mutate(|st| {
        let pod = st
            .pods
            .get(key)
            .ok_or_else(|| Reply::from(Status::not_found("pods", "", &key.1)))?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if let Some(want) = options["preconditions"]["uid"].as_str()
            && want != uid
        {
            return Err(Status::conflict_uid(&key.1, want, &uid).into());
        }
        let mut pod = to_json(&st.remove_pod(key));
        // The answer to a graceful deletion, which here completes at once.
        pod["metadata"]["deletionTimestamp"] = to_json(&time_of(st.clock.wall()));
        pod["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        Ok(pod)
    })
}

/// POST an events.k8s.io/v1 Event: stored as sent, named (`generateName`) and
/// stamped (uid, creation time, resourceVersion).
fn create_event(shared: &Arc<Shared>, ctx: &Ctx, ns: &str) -> HResult {
    let mut event = parse_body(ctx)?;
    shared.mutate(|st| {
        let meta = &mut event["metadata"];
        let name = match (meta["name"].as_str(), meta["generateName"].as_str()) {
            (Some(n), _) if !n.is_empty() => n.to_string(),
            (_, Some(g)) => format!("{g}{}", st.rng.suffix(5)),
            _ => return Err(Status::bad_request("name or generateName is required").into()),
        };
        meta["name"] = json!(name);
        meta["namespace"] = json!(ns);
        meta["uid"] = json!(st.rng.uuid());
        meta["creationTimestamp"] = to_json(&time_of(st.clock.wall()));
        meta["resourceVersion"] = json!(st.next_rv().to_string());
        st.events.insert((ns.to_string(), name), event.clone());
        Ok(Reply::json(201, &event))
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
