//! Watches: replay from the history, live events as newline-delimited JSON,
//! bookmarks, timeouts, 410 after compaction, and the stall/drop faults.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame, SizeHint};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::Shared;
use crate::status::Status;
use crate::store::{HistEntry, Kind};

/// A piece of a streamed body.
pub(crate) enum Chunk {
    Data(Bytes),
    /// Abort the connection (no terminating chunk).
    Abort,
}

/// Response body: a complete buffer or a stream of chunks.
pub(crate) enum ResBody {
    /// The whole body (taken once).
    Full(Option<Bytes>),
    /// A stream (watch).
    Stream(mpsc::Receiver<Chunk>),
}

impl ResBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        Self::Full(Some(bytes.into()))
    }
}

impl Body for ResBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match &mut *self {
            Self::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => match rx.poll_recv(cx) {
                Poll::Ready(Some(Chunk::Data(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
                Poll::Ready(Some(Chunk::Abort)) => Poll::Ready(Some(Err(std::io::Error::other(
                    "watch stream dropped by fault injection",
                )))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}

/// Which objects a list or watch sees.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: selfdestruct_decision::selector::Selector,
    /// `fieldSelector` terms: a JSON pointer, `!=`, the value (a missing field is "").
    pub fields: Vec<(String, bool, String)>,
}

impl Filter {
    pub fn matches(&self, obj: &Value) -> bool {
        let text = |pointer: &str| match obj.pointer(pointer) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ (Value::Bool(_) | Value::Number(_))) => v.to_string(),
            _ => String::new(),
        };
        let labels = obj["metadata"]["labels"].as_object().into_iter().flatten();
        let labels = labels.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())));
        self.namespace
            .as_ref()
            .is_none_or(|ns| text("/metadata/namespace") == *ns)
            && self.labels.matches(&labels.collect())
            && self
                .fields
                .iter()
                .all(|(p, negated, v)| (text(p) == *v) != *negated)
    }
}

/// Watch query parameters.
#[derive(Clone, Debug)]
pub(crate) struct WatchParams {
    /// `None` for "" / "0" (start with synthetic ADDED events).
    pub resource_version: Option<u64>,
    pub bookmarks: bool,
    pub timeout: Duration,
    /// Objects as `PartialObjectMetadata` (`nodes-watch-metadata.jsonl`).
    pub metadata_only: bool,
    /// Counts the bytes sent (the request's [`crate::RecordedRequest::bytes_sent`]).
    pub sent: Arc<AtomicU64>,
}

/// An object as `PartialObjectMetadata`: kind, apiVersion `meta.k8s.io/v1`
/// and its `metadata` only (`nodes-list-metadata-200.json`).
pub(crate) fn partial_metadata(obj: &Value) -> Value {
    let metadata = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
}

/// The JSON of `obj` as a watcher with `params` sees it.
fn object_json<'a>(params: &WatchParams, obj: &Value, json: &'a str) -> Cow<'a, str> {
    if params.metadata_only {
        Cow::Owned(partial_metadata(obj).to_string())
    } else {
        Cow::Borrowed(json)
    }
}

fn line(ty: &str, object_json: &str) -> Bytes {
    Bytes::from(format!("{{\"type\":\"{ty}\",\"object\":{object_json}}}\n"))
}

fn bookmark(kind: Kind, params: &WatchParams, rv: u64) -> Bytes {
    let (kind, api_version) = match params.metadata_only {
        true => ("PartialObjectMetadata", "meta.k8s.io/v1"),
        false => (kind.name(), "v1"),
    };
    let metadata = json!({"resourceVersion": rv.to_string()});
    let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
    line("BOOKMARK", &obj.to_string())
}

/// What a watcher with `filter` sees of a history entry.
fn transform(filter: &Filter, params: &WatchParams, e: &HistEntry) -> Option<Bytes> {
    let now = filter.matches(&e.obj);
    let ty = match e.ty {
        "MODIFIED" => {
            let before = e.prev.as_ref().is_some_and(|p| filter.matches(p));
            match (before, now) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                (true, false) => "DELETED",
                (false, false) => return None,
            }
        }
        other => {
            if !now {
                return None;
            }
            other
        }
    };
    Some(line(ty, &object_json(params, &e.obj, &e.json)))
}

/// Starts a watch; the returned body streams events until the timeout, a
/// fault, or the client going away.
pub(crate) fn start(
    shared: &Arc<Shared>,
    kind: Kind,
    filter: Filter,
    params: WatchParams,
) -> ResBody {
    let (tx, rx) = mpsc::channel(256);
    let mut initial = Vec::new();
    let (cursor, expired) = {
        let st = shared.lock();
        let hist = st.history(kind);
        match params.resource_version {
            None => {
                let mut objs: Vec<_> = hist.current.iter().collect();
                objs.sort_by(|a, b| a.0.cmp(b.0));
                for (_, obj) in objs {
                    if filter.matches(obj) {
                        let json = obj.to_string();
                        initial.push(line("ADDED", &object_json(&params, obj, &json)));
                    }
                }
                (st.rv, None)
            }
            Some(rv) if rv < hist.compacted => (rv, Some(hist.compacted)),
            Some(rv) => (rv, None),
        }
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        shared.open_watches.fetch_add(1, Ordering::SeqCst);
        run(&shared, kind, filter, params, cursor, initial, expired, tx).await;
        shared.open_watches.fetch_sub(1, Ordering::SeqCst);
    });
    ResBody::Stream(rx)
}

#[allow(clippy::too_many_arguments)]
async fn run(
    shared: &Arc<Shared>,
    kind: Kind,
    filter: Filter,
    params: WatchParams,
    mut cursor: u64,
    initial: Vec<Bytes>,
    expired: Option<u64>,
    tx: mpsc::Sender<Chunk>,
) {
    let mut rv_rx = shared.rv_tx.subscribe();
    let mut stall_rx = shared.stall_tx.subscribe();
    let mut drop_rx = shared.drop_tx.subscribe();
    let send = |b: Bytes| {
        let tx = tx.clone();
        params.sent.fetch_add(b.len() as u64, Ordering::Relaxed);
        async move { tx.send(Chunk::Data(b)).await.is_ok() }
    };
    if let Some(oldest) = expired {
        let status = Status::expired(cursor, oldest);
        let _ = send(line("ERROR", &status.to_value().to_string())).await;
        return;
    }
    for l in initial {
        if !send(l).await {
            return;
        }
    }
    let mut synced = cursor;
    let interval = shared
        .lock()
        .cfg
        .bookmark_interval
        .max(Duration::from_millis(10));
    let deadline = Instant::now() + params.timeout;
    let mut next_bookmark = Instant::now() + interval;
    loop {
        if *stall_rx.borrow_and_update() {
            tokio::select! {
                r = stall_rx.changed() => if r.is_err() { return },
                r = drop_rx.changed() => {
                    let mid_line = r.is_ok() && drop_rx.borrow().1;
                    abort(&tx, kind, mid_line).await;
                    return;
                }
                _ = tx.closed() => return,
            }
            continue;
        }
        let pending = {
            let st = shared.lock();
            let r = st.history(kind).since(cursor);
            (r, st.rv)
        };
        match pending {
            (Err(oldest), _) => {
                let status = Status::expired(cursor, oldest);
                let _ = send(line("ERROR", &status.to_value().to_string())).await;
                return;
            }
            (Ok(entries), rv) => {
                for e in entries {
                    cursor = e.rv;
                    if let Some(l) = transform(&filter, &params, &e)
                        && !send(l).await
                    {
                        return;
                    }
                }
                synced = synced.max(rv).max(cursor);
            }
        }
        tokio::select! {
            biased;
            r = drop_rx.changed() => {
                let mid_line = r.is_ok() && drop_rx.borrow().1;
                abort(&tx, kind, mid_line).await;
                return;
            }
            _ = tx.closed() => return,
            r = stall_rx.changed() => if r.is_err() { return },
            r = rv_rx.changed() => if r.is_err() { return },
            _ = tokio::time::sleep_until(next_bookmark), if params.bookmarks => {
                next_bookmark = Instant::now() + interval;
                if !send(bookmark(kind, &params, synced)).await {
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                if params.bookmarks {
                    let _ = send(bookmark(kind, &params, synced)).await;
                }
                return;
            }
        }
    }
}

async fn abort(tx: &mpsc::Sender<Chunk>, kind: Kind, mid_line: bool) {
    if mid_line {
        let partial = format!(
            "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"{}\",\"apiVers",
            kind.name()
        );
        let _ = tx.send(Chunk::Data(Bytes::from(partial))).await;
    }
    let _ = tx.send(Chunk::Abort).await;
}
