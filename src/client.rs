//! The API client of an [`Access`]: built off the signals' thread, with the token
//! read by us (`token_file.rs`, `exec_plugin.rs`), and the agent's own request layer
//! ([`PaceWatches`]): watches paced, lists and answers capped, every request bounded
//! by [`REQUEST_TIMEOUT`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, ready};
use std::time::Duration;

use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use tokio::time::Instant;

use selfdestruct_decision::backoff::Backoff;

use crate::access::{Access, AccessError, CREDENTIALS_TIMEOUT};
use crate::api::{ApiError, REQUEST_TIMEOUT};

/// Why no API client was built. Each error but `Access` first names where the
/// access came from ([`Access::source`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// There is no access (or no usable one) to build it from.
    #[error(transparent)]
    Access(#[from] AccessError),
    /// kube cannot build one (certificates, TLS).
    #[error("{0}: no API client can be built from it")]
    Build(String, #[source] kube::Error),
    /// Not built within [`CREDENTIALS_TIMEOUT`]: an `exec` credential plugin
    /// that does not answer, a token file not read (a FIFO, a hung mount); then
    /// what did not answer.
    #[error(
        "{0}: no API client was built within {secs}s ({1})",
        secs = CREDENTIALS_TIMEOUT.as_secs()
    )]
    TimedOut(String, &'static str),
    /// No token: the token file cannot be read or is too large, the exec plugin
    /// failed or answered too much.
    #[error("{0}: no credentials")]
    Credentials(String, #[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A client being built by [`start_build`].
type Building = tokio::task::JoinHandle<Result<kube::Client, ClientError>>;

/// Starts building the client for `access` on a blocking thread: the token read
/// (a file, or an exec plugin run within `limit`) and kube's build.
fn start_build(access: &Access, default_namespace: &str, limit: Duration) -> Building {
    let mut config = access.config.clone();
    default_namespace.clone_into(&mut config.default_namespace);
    // Every retry is the agent's own, with its backoff: kube's retry layer
    // would also repeat a 429 eviction (the PodDisruptionBudget's "not now")
    // out of sight of the agent's backoff and move cap.
    config.default_retry = false;
    // A plain http:// server has no certificate to check: without a CA kube
    // would look for the system's roots anyway and fail in a scratch image.
    if config.cluster_url.scheme_str() == Some("http") && config.root_cert.is_none() {
        config.root_cert = Some(Vec::new());
    }
    let from = access.source.clone();
    tokio::task::spawn_blocking(move || {
        let token = crate::token_file::TokenFileLayer::take_from(&mut config.auth_info, limit)
            .map_err(|e| match e {
                crate::token_file::TokenError::Plugin(p) if p.is_timeout() => {
                    ClientError::TimedOut(
                        from.clone(),
                        "its exec credential plugin has not answered",
                    )
                }
                e => ClientError::Credentials(from.clone(), Box::new(e)),
            })?;
        let builder = kube::client::ClientBuilder::try_from(config)
            .map_err(|e| ClientError::Build(from, e))?;
        // The blocking thread is in the runtime's context (the client's buffer task).
        Ok(builder
            .with_layer(&token)
            .with_layer(&tower::layer::layer_fn(PaceWatches::new))
            .build())
    })
}

/// Waits up to `limit` for a build started by [`start_build`]; a build not done
/// then is left in `pending` (to be waited for again, not started again).
async fn finish_build(
    build: &mut Building,
    from: &str,
    limit: Duration,
) -> Result<kube::Client, ClientError> {
    // A plugin stops itself at `limit` (killed, with its own error): a little
    // longer here, for a token file's read that does not return.
    match tokio::time::timeout(limit + Duration::from_secs(1), build).await {
        Ok(Ok(built)) => built,
        Ok(Err(_)) | Err(_) => Err(ClientError::TimedOut(
            from.to_string(),
            "its exec credential plugin has not answered, or its token file was not read",
        )),
    }
}

/// The kube client for `access`, with `default_namespace`, built on a blocking
/// thread within `limit` ([`CREDENTIALS_TIMEOUT`] but in tests). The token is
/// read here, not by kube: a token file up to [`crate::token_file::MAX_BYTES`], an
/// exec plugin within `limit` and up to [`crate::exec_plugin::MAX_OUTPUT`] bytes
/// of answer, its process group killed when it has not answered by then.
#[cfg(test)]
pub(crate) async fn client_within(
    access: &Access,
    default_namespace: &str,
    limit: Duration,
) -> Result<kube::Client, ClientError> {
    let mut build = start_build(access, default_namespace, limit);
    finish_build(&mut build, &access.source, limit).await
}

/// [`client_within`] [`CREDENTIALS_TIMEOUT`], retried with backoff while an `exec`
/// plugin does not answer in time (or the token file is not read: that read is
/// waited for again, never started twice); any other error is returned.
/// Cancel-safe: race it with the signals.
pub(crate) async fn client_retrying(
    access: &Access,
    default_namespace: &str,
) -> Result<kube::Client, ClientError> {
    let mut failures = 0u32;
    let mut pending = None;
    loop {
        let mut build = pending
            .take()
            .unwrap_or_else(|| start_build(access, default_namespace, CREDENTIALS_TIMEOUT));
        match finish_build(&mut build, &access.source, CREDENTIALS_TIMEOUT).await {
            Err(e @ ClientError::TimedOut { .. }) => {
                if !build.is_finished() {
                    pending = Some(build);
                }
                let wait = Backoff::TRANSIENT.delay(failures, crate::jitter::draw());
                failures = failures.saturating_add(1);
                tracing::warn!(
                    error = %crate::logging::Chain(&e),
                    retry_in = %selfdestruct_decision::duration::format(wait),
                    "cannot build an API client yet; retrying"
                );
                tokio::time::sleep(wait).await;
            }
            built => return built,
        }
    }
}

/// A kube client over `service` with the agent's own layer of `client` (the
/// watch pacing and the request time limit), for an in-process API server: the tests' virtual-time tier
/// serves the fake API server so.
pub fn client_over<S, B>(service: S, default_namespace: &str) -> kube::Client
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    kube::Client::new(PaceWatches::new(service), default_namespace)
}

/// A watch that ends sooner than this was cut, not timed out.
pub(crate) const MIN_WATCH_LIFE: Duration = Duration::from_secs(5);

/// The most pages one list may take (100,000 objects at 100 a page, more nodes than
/// any provider supports in one cluster: GKE 65,000): stops `continue` tokens that
/// never run out, with the bounds of `watch` (an object twice, the bytes held).
pub(crate) const MAX_LIST_PAGES: u32 = 1_000;

/// A list that asked for more than [`MAX_LIST_PAGES`] pages.
#[derive(Debug, thiserror::Error)]
#[error(
    "the list has more than {MAX_LIST_PAGES} pages: it never ends (a continue token that never runs out?)"
)]
pub(crate) struct EndlessList;

/// Paces the watch requests of one path: kube's watcher re-opens a watch at once,
/// so one that a server or proxy ends at once (which kube takes for a normal end)
/// would loop hot. A watch opened within [`MIN_WATCH_LIFE`] of the one before waits
/// first, with backoff. It also caps lists and answers and bounds every request by
/// [`REQUEST_TIMEOUT`] (see its `call`).
#[derive(Clone)]
struct PaceWatches<S> {
    inner: S,
    /// Per path: when the last watch was opened, and how many in a row were short.
    opened: Arc<Mutex<HashMap<String, (Instant, u32)>>>,
    /// Per path and field selector: the pages of the list being read (only
    /// lists of more than one page are kept).
    pages: Arc<Mutex<HashMap<String, u32>>>,
}

impl<S> PaceWatches<S> {
    fn new(inner: S) -> Self {
        PaceWatches {
            inner,
            opened: Arc::default(),
            pages: Arc::default(),
        }
    }

    /// How long a watch of `path` waits before it is opened.
    fn delay(&self, path: &str) -> Duration {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // A watch opened longer ago than MIN_WATCH_LIFE counts as none: the
        // map holds only recent ones (one per candidate node's watch too).
        opened.retain(|_, (last, _)| now < *last + MIN_WATCH_LIFE);
        let Some((last, short)) = opened.get_mut(path) else {
            opened.insert(path.to_string(), (now, 0));
            return Duration::ZERO;
        };
        // Still held: the watch before was opened (after its own wait) within
        // MIN_WATCH_LIFE, so it was cut short.
        *short = short.saturating_add(1);
        let wait = Backoff::TRANSIENT.delay(*short - 1, crate::jitter::draw());
        if *short == 1 {
            let what = if path.ends_with("/pods") {
                "sibling pods"
            } else {
                path
            };
            tracing::warn!(
                what,
                "watch failed: it ended within {}s of opening; retrying with backoff",
                MIN_WATCH_LIFE.as_secs()
            );
        }
        *last = now + wait;
        wait
    }

    /// Counts a list request (`uri`) as a page of its list: `false` if it is
    /// one more than [`MAX_LIST_PAGES`].
    fn page_allowed(&self, uri: &http::Uri) -> bool {
        let next_page = query(uri).any(|kv| kv.starts_with("continue=") && kv != "continue=");
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        let key = request_key(uri);
        if !next_page {
            pages.remove(&key);
            return true;
        }
        let n = pages.entry(key).or_insert(1);
        *n = n.saturating_add(1);
        *n <= MAX_LIST_PAGES
    }
}

/// The `key=value` pairs of `uri`'s query.
fn query(uri: &http::Uri) -> impl Iterator<Item = &str> {
    uri.query().into_iter().flat_map(|q| q.split('&'))
}

/// What [`PaceWatches`] paces and counts together: the watches (and list
/// pages) of one path and field selector (each candidate node's watch is
/// paced apart from the node watch).
fn request_key(uri: &http::Uri) -> String {
    match query(uri).find(|kv| kv.starts_with("fieldSelector=")) {
        Some(f) => format!("{}?{f}", uri.path()),
        None => uri.path().to_string(),
    }
}

/// The most bytes of a non-watch answer for one object (etcd stores objects of at
/// most 1.5 MiB): more is refused as [`ApiError::TooLarge`], never read into memory.
pub(crate) const MAX_OBJECT_ANSWER: usize = 4 << 20;

/// The most bytes of a list page (a request with `limit=`): 100 real Nodes are
/// about 1 MiB, 100 objects of 80 KiB each still fit; a larger page is asked for
/// again with fewer objects (`watch`). kube holds a page twice while it decodes it
/// (ours and its copy): 16 MiB at most.
pub(crate) const MAX_LIST_ANSWER: usize = 8 << 20;

/// The longest line of a watch stream (one event: `{"type":...,"object":{...}}`).
/// etcd keeps an object under 1.5 MiB (its request limit) and its JSON is at most
/// about twice that; kube's line reader has no limit, so an endless line (or a
/// 300 MB event) would be held whole. A longer line ends the watch as a transport
/// error ([`WatchLineTooLong`]): the watcher backs off and lists again.
pub(crate) const MAX_WATCH_LINE: usize = 4 << 20;

/// A watch stream sent a line longer than [`MAX_WATCH_LINE`].
#[derive(Debug, thiserror::Error)]
#[error("watch event refused: a line longer than {MAX_WATCH_LINE} bytes")]
pub(crate) struct WatchLineTooLong;

pin_project_lite::pin_project! {
    /// A watch's body, failing with [`WatchLineTooLong`] once a line grows past
    /// [`MAX_WATCH_LINE`] (only the length of the current line is counted).
    pub(crate) struct CapLines<B> {
        #[pin]
        inner: B,
        // Bytes since the last newline.
        line: usize,
    }
}

impl<B> http_body::Body for CapLines<B>
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, BoxError>>> {
        let this = self.project();
        if *this.line > MAX_WATCH_LINE {
            return Poll::Ready(None);
        }
        let Some(frame) = ready!(this.inner.poll_frame(cx)) else {
            return Poll::Ready(None);
        };
        let frame = frame.map_err(Into::into)?;
        if let Some(data) = frame.data_ref() {
            // The first piece goes on with the line before; each newline starts one.
            for (i, piece) in data.split(|&b| b == b'\n').enumerate() {
                if i > 0 {
                    *this.line = 0;
                }
                *this.line = this.line.saturating_add(piece.len());
                if *this.line > MAX_WATCH_LINE {
                    return Poll::Ready(Some(Err(Box::new(WatchLineTooLong))));
                }
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }
}

/// The service error of the client's stack.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A non-watch answer read in full within the time limit, or a watch's stream
/// with its lines capped.
type PacedBody<B> = Either<Full<bytes::Bytes>, CapLines<B>>;

impl<S, ReqB, B> tower::Service<http::Request<ReqB>> for PaceWatches<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    ReqB: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<PacedBody<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    /// Every request gets an answer within [`REQUEST_TIMEOUT`] or fails with
    /// [`ApiError::Timeout`]: a non-watch request (lists too) is read in full in
    /// that time, and up to [`MAX_OBJECT_ANSWER`] bytes ([`MAX_LIST_ANSWER`] for a
    /// list page; more is [`ApiError::TooLarge`]); a watch gets its response
    /// headers in that time (its stream is then kube's, ended by the watch's own
    /// timeout), and its lines are capped ([`MAX_WATCH_LINE`]). kube sets no read
    /// timeout, and a server that accepts a request and never answers, or a pooled
    /// connection to a dead peer, would otherwise hold the caller (the node or
    /// sibling watcher) silently for many minutes.
    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let watch = query(req.uri()).any(|kv| kv == "watch=true" || kv == "watch=1");
        if !watch && req.method() == http::Method::GET && !self.page_allowed(req.uri()) {
            return Box::pin(async { Err(Box::new(EndlessList) as BoxError) });
        }
        let limit = if query(req.uri()).any(|kv| kv.starts_with("limit=")) {
            MAX_LIST_ANSWER
        } else {
            MAX_OBJECT_ANSWER
        };
        let wait = if watch {
            self.delay(&request_key(req.uri()))
        } else {
            Duration::ZERO
        };
        // The request is sent when its future is first polled: after the wait.
        let call = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let answer = async {
                let res = call.await.map_err(Into::into)?;
                if watch {
                    return Ok(res.map(|b| Either::Right(CapLines { inner: b, line: 0 })));
                }
                let (parts, body) = res.into_parts();
                let body = Limited::new(body, limit).collect().await.map_err(|e| {
                    if e.is::<LengthLimitError>() {
                        Box::new(ApiError::TooLarge { limit }) as BoxError
                    } else {
                        e
                    }
                })?;
                let body = Either::Left(Full::new(body.to_bytes()));
                Ok(http::Response::from_parts(parts, body))
            };
            tokio::time::timeout(REQUEST_TIMEOUT, answer)
                .await
                .map_err(|_| -> BoxError { Box::new(ApiError::Timeout(REQUEST_TIMEOUT)) })?
        })
    }
}

#[cfg(test)]
mod tests;
