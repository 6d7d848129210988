//! List-then-watch of Nodes and of sibling pods, each in its own task that sends
//! small summaries to the agent loop. A broken watch resumes from the last
//! resourceVersion; a 410 Gone re-lists; 403 is reported once and retried rarely.

use std::fmt::Debug;
use std::time::Duration;

use http_body_util::BodyExt;
use kube::Client;
use kube::core::params::{ListParams, WatchParams};
use kube::core::{Request, WatchEvent};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::api::ApiError;
use crate::backoff::{Backoff, draw};
use crate::list_items::ItemSplitter;
use crate::model::{MetaLite, NodeLite, PodLite};

/// Objects per list page (kube-apiserver's own default for clients that page is 500).
pub const PAGE_SIZE: u32 = 500;
/// How long a watch request may stay open (the server closes it then).
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// A watch that ends sooner than this was cut, not timed out: back off before the next.
pub const MIN_WATCH_LIFE: Duration = Duration::from_secs(5);
/// A watch with no event (bookmarks included) for this long is considered stalled.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(600);

/// What a watcher tells the agent, with the objects summarised.
#[derive(Debug)]
pub enum Update<T> {
    /// The full current set (after a list).
    Reset(Vec<T>),
    /// An object was added or changed.
    Upsert(T),
    /// An object was deleted.
    Remove(String),
    /// The service account may not read these objects (the message says what is missing).
    Forbidden(String),
}

/// Objects the watcher can track.
pub trait Watched: Clone + DeserializeOwned + Debug + Send + 'static {
    /// Their metadata.
    fn meta(&self) -> &MetaLite;
}

impl Watched for NodeLite {
    fn meta(&self) -> &MetaLite {
        &self.metadata
    }
}

impl Watched for PodLite {
    fn meta(&self) -> &MetaLite {
        &self.metadata
    }
}

#[derive(Deserialize)]
struct ListMetaLite {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// A list response without its items (they are read one by one, see [`ItemSplitter`]).
#[derive(Deserialize)]
struct ListHead {
    #[serde(default)]
    kind: String,
    metadata: ListMetaLite,
}

/// What to watch: a collection path (`/api/v1/nodes`) and a label selector.
#[derive(Clone, Debug)]
pub struct Target {
    /// Collection URL path.
    pub path: String,
    /// Label selector (empty: all).
    pub selector: String,
    /// Human name for logs ("nodes", "sibling pods").
    pub what: &'static str,
}

enum Stop {
    Relist,
    Resume,
    Denied(String),
    Failed(String),
}

/// Lists all objects, page by page, summarising each item as it arrives: the
/// response is never held whole. Returns the summaries and the resourceVersion.
async fn list<T: Watched, S>(
    client: &Client,
    t: &Target,
    summarize: &impl Fn(T) -> S,
) -> Result<(Vec<S>, String), ApiError> {
    let (mut items, mut token) = (Vec::new(), None::<String>);
    loop {
        let mut lp = ListParams::default().limit(PAGE_SIZE);
        if !t.selector.is_empty() {
            lp = lp.labels(&t.selector);
        }
        if let Some(c) = &token {
            lp = lp.continue_token(c);
        }
        let req = Request::new(&t.path)
            .list(&lp)
            .map_err(|e| ApiError::Transport(e.to_string()))?
            .map(kube::client::Body::from);
        let page = tokio::time::timeout(
            crate::api::REQUEST_TIMEOUT,
            read_page(client, req, summarize, &mut items),
        )
        .await
        .map_err(|_| ApiError::Timeout(crate::api::REQUEST_TIMEOUT))??;
        // Any object with metadata would parse as an empty list: insist on a list.
        if !page.kind.ends_with("List") {
            return Err(ApiError::Decode(format!(
                "expected a list of {}, got kind {:?}",
                t.what, page.kind
            )));
        }
        match page.metadata.continue_token.filter(|c| !c.is_empty()) {
            Some(c) => token = Some(c),
            None => return Ok((items, page.metadata.resource_version.unwrap_or_default())),
        }
    }
}

/// Reads one page of a list, pushing the summary of each item onto `items`.
async fn read_page<T: Watched, S>(
    client: &Client,
    req: http::Request<kube::client::Body>,
    summarize: &impl Fn(T) -> S,
    items: &mut Vec<S>,
) -> Result<ListHead, ApiError> {
    let mut body = crate::api::open(client, req).await?.into_body();
    let mut splitter = ItemSplitter::new();
    let mut bad = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(crate::api::transport)?;
        if let Some(data) = frame.data_ref() {
            splitter.feed(data, |item| match serde_json::from_slice::<T>(item) {
                Ok(obj) => items.push(summarize(obj)),
                Err(e) => bad = bad.take().or(Some(e.to_string())),
            });
        }
        if let Some(e) = bad.take() {
            return Err(ApiError::Decode(e));
        }
    }
    let head = splitter.finish().map_err(ApiError::Decode)?;
    serde_json::from_slice(&head).map_err(|e| ApiError::Decode(e.to_string()))
}

fn denied(e: &ApiError) -> Option<String> {
    match e {
        ApiError::Status {
            code: 401 | 403,
            message,
            ..
        } => Some(message.clone()),
        _ => None,
    }
}

/// A watch event longer than this is refused (a Node is about 11 KiB).
const MAX_EVENT: usize = 16 << 20;

/// The events of a watch response, one JSON object per line, read as they arrive.
struct Events {
    body: kube::client::Body,
    buf: Vec<u8>,
    /// `buf[..scanned]` holds no newline.
    scanned: usize,
    ended: bool,
}

impl Events {
    fn new(body: kube::client::Body) -> Self {
        Events {
            body,
            buf: Vec::new(),
            scanned: 0,
            ended: false,
        }
    }

    /// The next event; `None` when the response ends.
    async fn next<T: DeserializeOwned>(&mut self) -> Option<Result<WatchEvent<T>, String>> {
        loop {
            let newline = self.buf[self.scanned..].iter().position(|&b| b == b'\n');
            let end = match newline {
                Some(i) => self.scanned + i,
                None if self.ended => self.buf.len(),
                None => {
                    self.scanned = self.buf.len();
                    match self.body.frame().await {
                        None => self.ended = true,
                        Some(Err(e)) => return Some(Err(crate::api::transport(e).to_string())),
                        Some(Ok(frame)) => {
                            if let Ok(data) = frame.into_data() {
                                if self.buf.len() + data.len() > MAX_EVENT {
                                    return Some(Err("a watch event over 16 MiB".into()));
                                }
                                self.buf.extend_from_slice(&data);
                            }
                        }
                    }
                    continue;
                }
            };
            let line = &self.buf[..end];
            let event = (!line.iter().all(u8::is_ascii_whitespace)).then(|| {
                serde_json::from_slice(line).map_err(|e| format!("unreadable watch event: {e}"))
            });
            self.buf.drain(..(end + 1).min(self.buf.len()));
            self.scanned = 0;
            match event {
                Some(event) => return Some(event),
                None if self.ended && self.buf.is_empty() => return None,
                None => {}
            }
        }
    }
}

async fn watch_from<T: Watched, S>(
    client: &Client,
    t: &Target,
    rv: &mut String,
    tx: &mpsc::Sender<Update<S>>,
    summarize: &impl Fn(T) -> S,
) -> Stop {
    let jitter = draw() * 0.5;
    let timeout = WATCH_TIMEOUT.mul_f64(1.0 - jitter);
    let mut wp = WatchParams::default().timeout(u32::try_from(timeout.as_secs()).unwrap_or(1800));
    if !t.selector.is_empty() {
        wp = wp.labels(&t.selector);
    }
    let req = match Request::new(&t.path).watch(&wp, rv) {
        Ok(r) => r.map(kube::client::Body::from),
        Err(e) => return Stop::Failed(e.to_string()),
    };
    let mut events = match crate::api::open(client, req).await {
        Ok(res) => Events::new(res.into_body()),
        // A too-old resourceVersion can also be refused before the stream
        // starts (HTTP 410 rather than an ERROR event): list again.
        Err(ApiError::Status { code: 410, .. }) => return Stop::Relist,
        Err(e) => {
            return match denied(&e) {
                Some(m) => Stop::Denied(m),
                None => Stop::Failed(e.to_string()),
            };
        }
    };
    let opened = std::time::Instant::now();
    loop {
        let next = match tokio::time::timeout(STALL_TIMEOUT, events.next::<T>()).await {
            Err(_) => {
                tracing::debug!(what = t.what, "watch stalled, reconnecting");
                return Stop::Resume;
            }
            // A watch that ends at once (an empty or cut answer) must not be
            // re-opened in a tight loop: count it as a failure, which backs off.
            Ok(None) if opened.elapsed() < MIN_WATCH_LIFE => {
                return Stop::Failed(format!(
                    "watch ended after {} ms",
                    opened.elapsed().as_millis()
                ));
            }
            Ok(None) => return Stop::Resume,
            Ok(Some(Err(e))) => return Stop::Failed(e),
            Ok(Some(Ok(ev))) => ev,
        };
        let update = match next {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                if let Some(v) = &o.meta().resource_version {
                    rv.clone_from(v);
                }
                Update::Upsert(summarize(o))
            }
            WatchEvent::Deleted(o) => {
                if let Some(v) = &o.meta().resource_version {
                    rv.clone_from(v);
                }
                Update::Remove(o.meta().name.clone())
            }
            WatchEvent::Bookmark(b) => {
                rv.clone_from(&b.metadata.resource_version);
                continue;
            }
            WatchEvent::Error(s) if s.code == 410 => return Stop::Relist,
            WatchEvent::Error(s) if s.code == 403 || s.code == 401 => {
                return Stop::Denied(s.message);
            }
            WatchEvent::Error(s) => {
                return Stop::Failed(format!("watch error {}: {}", s.code, s.message));
            }
        };
        if tx.send(update).await.is_err() {
            return Stop::Failed("agent gone".into());
        }
    }
}

/// Runs list+watch forever, sending the `summarize`d objects to `tx`. Ends only
/// when `tx` closes. `start_delay` spreads the first list of a fleet that starts
/// together.
pub async fn run<T: Watched, S: Send + 'static>(
    client: Client,
    target: Target,
    tx: mpsc::Sender<Update<S>>,
    start_delay: Duration,
    summarize: impl Fn(T) -> S + Send + 'static,
) {
    tokio::time::sleep(start_delay).await;
    let mut failures = 0u32;
    let mut told_denied = false;
    loop {
        let (items, mut rv) = match list::<T, S>(&client, &target, &summarize).await {
            Ok(x) => x,
            Err(e) => {
                let wait = if let Some(msg) = denied(&e) {
                    if !told_denied {
                        told_denied = true;
                        if tx.send(Update::Forbidden(msg)).await.is_err() {
                            return;
                        }
                    }
                    Backoff::DENIED.delay(failures, draw())
                } else {
                    tracing::warn!(what = target.what, error = %e, "list failed, retrying");
                    Backoff::TRANSIENT.delay(failures, draw())
                };
                failures = failures.saturating_add(1);
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        failures = 0;
        told_denied = false;
        if tx.send(Update::Reset(items)).await.is_err() {
            return;
        }
        loop {
            match watch_from(&client, &target, &mut rv, &tx, &summarize).await {
                Stop::Resume => {
                    failures = 0;
                    continue;
                }
                Stop::Relist => {
                    tracing::info!(
                        what = target.what,
                        "watch expired (410 Gone), listing again"
                    );
                }
                Stop::Denied(msg) => {
                    let _ = tx.send(Update::Forbidden(msg)).await;
                    told_denied = true;
                    tokio::time::sleep(Backoff::DENIED.delay(failures, draw())).await;
                }
                Stop::Failed(msg) => {
                    if tx.is_closed() {
                        return;
                    }
                    tracing::warn!(what = target.what, error = %msg, "watch failed, retrying");
                    tokio::time::sleep(Backoff::TRANSIENT.delay(failures, draw())).await;
                    failures = failures.saturating_add(1);
                    // Resume from the last resourceVersion; a 410 on that sends us to list.
                    continue;
                }
            }
            break;
        }
        failures = failures.saturating_add(1);
        tokio::time::sleep(Backoff::TRANSIENT.delay(failures.min(3), draw())).await;
    }
}
