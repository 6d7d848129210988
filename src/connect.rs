//! API access: a [`kube::Config`] from a kubeconfig (local runs) or the in-cluster
//! service account, in the order of `kube::Config::infer()`, except that:
//!
//! - a kubeconfig the user named (`KUBECONFIG`, `--kubeconfig`) that cannot be used is an
//!   error ([`AccessError::Named`]), never a fall-through to the in-cluster account;
//! - the service-account folder may be another one (tests, unusual mounts): it is described
//!   to kube as a kubeconfig naming its `ca.crt` and `token`;
//! - nothing here holds the thread that serves the signals: kubeconfig files (at most
//!   [`KUBECONFIG_MAX_BYTES`]) are read, and the client (whose build runs an `exec` plugin,
//!   a blocking `Command::output()` in kube) is built, on blocking threads within
//!   [`CREDENTIALS_TIMEOUT`];
//! - a token file is re-read and trimmed as client-go does (`token_file.rs`), and an `exec`
//!   plugin runs non-interactively, its stderr captured into the error.
//!
//! Everything else (YAML, exec plugins, client certificates, `tls-server-name`,
//! `proxy-url`, TLS) is kube's.

use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use tokio::time::Instant;

use selfdestruct_decision::backoff::Backoff;

use kube::config::{ExecInteractiveMode, KubeConfigOptions, Kubeconfig};

/// The largest kubeconfig file read (a kubeconfig with a few clusters'
/// certificates is some KiB): a larger one, or an endless one such as
/// `/dev/zero`, is refused without holding more than this in memory.
pub(crate) const KUBECONFIG_MAX_BYTES: u64 = 4 << 20;

/// How long reading the kubeconfig files, or building a client (which runs an `exec`
/// plugin), may take; a plugin still running then is left on its blocking thread and
/// the build retried with backoff ([`client_retrying`]).
pub(crate) const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a kubeconfig file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// It cannot be opened or read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is larger than [`KUBECONFIG_MAX_BYTES`].
    #[error("{} is larger than {} bytes", .0.display(), KUBECONFIG_MAX_BYTES)]
    TooLarge(PathBuf),
    /// It was not read within [`CREDENTIALS_TIMEOUT`] (a FIFO nobody writes, a hung mount).
    #[error("{} was not read within {}s", .0.display(), CREDENTIALS_TIMEOUT.as_secs())]
    NotRead(PathBuf),
    /// kube refuses it (its YAML, the merge, the context, the cluster, a certificate).
    #[error(transparent)]
    Kube(#[from] kube::config::KubeconfigError),
    /// The current context's user is missing (kube would take it for no
    /// credentials; kubectl refuses it).
    #[error("the user {user:?} of context {context:?} is not in users")]
    UnknownUser {
        /// The user's name.
        user: String,
        /// The current context.
        context: String,
    },
    /// The in-cluster account cannot be described as a kubeconfig.
    #[error("cannot describe it as a kubeconfig")]
    Describe(#[source] serde_json::Error),
}

/// Why there is no API access.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// Neither a kubeconfig nor an in-cluster service account: a plain pause.
    #[error(
        "no kubeconfig and no in-cluster service account (KUBECONFIG and \
         KUBERNETES_SERVICE_HOST are not set, no ~/.kube/config)"
    )]
    Missing,
    /// In a cluster, but without a service-account token: a plain pause.
    #[error(
        "in a cluster, but no service-account token at {} (the pod or its service account \
         sets automountServiceAccountToken: false): it can make no API request; set \
         automountServiceAccountToken: true and bind the Role of rbac/ (node-gate: the \
         ClusterRole of manifests/node-gate/) to the pod's service account",
        .0.display()
    )]
    NoToken(PathBuf),
    /// A kubeconfig the user named (`KUBECONFIG`, `--kubeconfig`) cannot be used:
    /// a configuration error (exit 2).
    #[error("{what}={files}: the kubeconfig cannot be used")]
    Named {
        /// `KUBECONFIG` or `--kubeconfig`.
        what: &'static str,
        /// The files it names.
        files: String,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// `~/.kube/config` cannot be used.
    #[error("kubeconfig {}", .path.display())]
    Home {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// In a cluster, with a token, but without the cluster's CA.
    #[error("in a cluster, but no cluster CA at {}", .0.display())]
    NoCa(PathBuf),
    /// The in-cluster service account cannot be used.
    #[error("in-cluster service account")]
    InCluster(#[source] KubeconfigError),
}

impl AccessError {
    /// Nothing to use at all (no kubeconfig, no token): a plain pause, not a fault.
    pub fn is_missing(&self) -> bool {
        matches!(self, AccessError::Missing | AccessError::NoToken(_))
    }

    /// A kubeconfig the user named cannot be used: a configuration error.
    pub fn is_named(&self) -> bool {
        matches!(self, AccessError::Named { .. })
    }
}

/// Why no API client was built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// kube cannot build one (certificates, the `exec` plugin's failure or answer).
    #[error("{from}: no API client can be built from it")]
    Build {
        /// Where the access came from ([`Access::source`]).
        from: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// Not built within [`CREDENTIALS_TIMEOUT`]: an `exec` credential plugin
    /// that does not answer.
    #[error(
        "{from}: no API client was built within {}s (its exec credential plugin has not answered)",
        CREDENTIALS_TIMEOUT.as_secs()
    )]
    TimedOut {
        /// Where the access came from ([`Access::source`]).
        from: String,
    },
}

/// Exit code for invalid configuration.
pub const EXIT_CONFIG: i32 = 2;

/// A kubeconfig the user named cannot be used: a configuration error. Says so
/// on one line, with every cause.
pub fn bad_kubeconfig(e: &(dyn std::error::Error + 'static)) -> i32 {
    eprintln!("selfdestruct: {}", crate::logging::Chain(e));
    EXIT_CONFIG
}

/// API access: the kube configuration and where it came from.
pub struct Access {
    /// kube's client configuration.
    pub config: kube::Config,
    /// The kubeconfig context's namespace, if any (local runs).
    pub namespace: Option<String>,
    /// Where this came from, for the log.
    pub source: String,
    /// It came from a kubeconfig the user named (`KUBECONFIG`, `--kubeconfig`): a
    /// client that cannot be built from it is a configuration error too.
    pub named: bool,
}

use crate::api::{ApiError, REQUEST_TIMEOUT};

/// Reads one kubeconfig file, at most [`KUBECONFIG_MAX_BYTES`]. Blocking (a
/// FIFO's open waits for a writer): run it on a blocking thread.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let read = |source| KubeconfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    if meta.is_file() {
        if meta.len() > KUBECONFIG_MAX_BYTES {
            return Err(KubeconfigError::TooLarge(path.to_path_buf()));
        }
        // kube reads it and resolves its relative file names against its folder.
        return Ok(Kubeconfig::read_from(path)?);
    }
    // A pipe or a device: read no more than the cap.
    let mut text = String::new();
    file.take(KUBECONFIG_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read)?;
    if text.len() as u64 > KUBECONFIG_MAX_BYTES {
        return Err(KubeconfigError::TooLarge(path.to_path_buf()));
    }
    Ok(Kubeconfig::from_yaml(&text)?)
}

/// Reads and merges kubeconfig files as kubectl does, and builds kube's
/// configuration for its current context (`named`: see [`Access::named`]).
async fn from_files(paths: &[PathBuf], named: bool) -> Result<Access, KubeconfigError> {
    let mut merged = Kubeconfig::default();
    for p in paths {
        let path = p.clone();
        let read = tokio::task::spawn_blocking(move || read_kubeconfig(&path));
        let kc = match tokio::time::timeout(CREDENTIALS_TIMEOUT, read).await {
            Ok(Ok(kc)) => kc?,
            // The blocking thread panicked (not expected) or the file was not read in time.
            Ok(Err(_)) | Err(_) => return Err(KubeconfigError::NotRead(p.clone())),
        };
        merged = merged.merge(kc)?;
    }
    let current = merged.current_context.clone().unwrap_or_default();
    let context = merged.contexts.iter().find(|c| c.name == current);
    let context = context.and_then(|c| c.context.as_ref());
    // kube takes a user that is not there for no credentials; kubectl refuses it.
    let user = context.and_then(|c| c.user.as_deref()).unwrap_or_default();
    if !user.is_empty() && !merged.auth_infos.iter().any(|a| a.name == user) {
        return Err(KubeconfigError::UnknownUser {
            user: user.to_string(),
            context: current,
        });
    }
    let namespace = context.and_then(|c| c.namespace.clone());
    let config =
        kube::Config::from_custom_kubeconfig(merged, &KubeConfigOptions::default()).await?;
    let source = paths.iter().map(|p| p.display().to_string());
    let source = format!("kubeconfig {}", source.collect::<Vec<_>>().join(":"));
    Ok(Access {
        config,
        namespace,
        source,
        named,
    })
}

/// Finds API access: the kubeconfig named by `--kubeconfig` (`flag`) or
/// `KUBECONFIG` (every file must be usable: it was asked for); else
/// `~/.kube/config` if it exists; else the in-cluster service account
/// (`KUBERNETES_SERVICE_HOST`/`_PORT`, token and CA in `service_account_dir`).
/// Reads files on blocking threads, so the caller's thread stays free.
pub async fn discover(
    env: impl Fn(&str) -> Option<OsString>,
    flag: Option<&Path>,
    service_account_dir: &Path,
) -> Result<Access, AccessError> {
    let (what, named): (&str, Vec<PathBuf>) = match flag {
        Some(p) => ("--kubeconfig", vec![p.to_path_buf()]),
        None => {
            let list = env("KUBECONFIG").unwrap_or_default();
            let paths = std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty());
            ("KUBECONFIG", paths.collect())
        }
    };
    if !named.is_empty() {
        return from_files(&named, true)
            .await
            .map_err(|source| AccessError::Named {
                what,
                files: std::env::join_paths(&named)
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                source,
            });
    }
    let home = env("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"));
    if let Some(path) = home.filter(|p| p.is_file()) {
        let paths = [path];
        return from_files(&paths, false).await.map_err(|source| {
            let [path] = paths;
            AccessError::Home { path, source }
        });
    }
    let host = env("KUBERNETES_SERVICE_HOST").and_then(|h| h.into_string().ok());
    let port = env("KUBERNETES_SERVICE_PORT").and_then(|p| p.into_string().ok());
    match host.filter(|h| !h.is_empty()) {
        Some(host) => in_cluster(&host, port.as_deref(), service_account_dir).await,
        None => Err(AccessError::Missing),
    }
}

/// The in-cluster service account, as client-go's `rest.InClusterConfig`.
pub async fn in_cluster(
    host: &str,
    port: Option<&str>,
    sa_dir: &Path,
) -> Result<Access, AccessError> {
    let token = sa_dir.join("token");
    if !token.is_file() {
        return Err(AccessError::NoToken(token));
    }
    let ca = sa_dir.join("ca.crt");
    if !ca.is_file() {
        return Err(AccessError::NoCa(ca));
    }
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let server = format!("https://{host}:{}", port.unwrap_or("443"));
    let kc: Kubeconfig = serde_json::from_value(serde_json::json!({
        "clusters": [{"name": "in-cluster", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "in-cluster", "user": {"tokenFile": token}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "in-cluster"}}],
        "current-context": "in-cluster",
    }))
    .map_err(|e| AccessError::InCluster(KubeconfigError::Describe(e)))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| AccessError::InCluster(e.into()))?;
    // As kube's own in-cluster config: re-read the CA when it rotates.
    config.root_cert_file = Some(ca);
    Ok(Access {
        config,
        namespace: None,
        source: format!("in-cluster service account ({})", sa_dir.display()),
        named: false,
    })
}

/// The kube client for `access`, with `default_namespace`, built on a blocking
/// thread within `limit` ([`CREDENTIALS_TIMEOUT`] but in tests).
pub async fn client_within(
    access: &Access,
    default_namespace: &str,
    limit: Duration,
) -> Result<kube::Client, ClientError> {
    let (config, token_file) = client_config(access, default_namespace);
    let from = access.source.clone();
    // kube runs the exec plugin (if any) while it builds the client.
    let build = tokio::task::spawn_blocking(move || kube::client::ClientBuilder::try_from(config));
    let builder = match tokio::time::timeout(limit, build).await {
        Ok(Ok(built)) => built.map_err(|source| ClientError::Build { from, source })?,
        Ok(Err(_)) | Err(_) => return Err(ClientError::TimedOut { from }),
    };
    Ok(builder
        .with_layer(&token_file)
        .with_layer(&tower::layer::layer_fn(PaceWatches::new))
        .build())
}

/// kube's configuration for a client of `access`, and the token file's layer.
fn client_config(
    access: &Access,
    default_namespace: &str,
) -> (kube::Config, crate::token_file::TokenFileLayer) {
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
    // No terminal in a pod: the plugin's standard error is captured (and
    // quoted in kube's error), not written into the log stream.
    if let Some(exec) = &mut config.auth_info.exec {
        exec.interactive_mode = Some(ExecInteractiveMode::Never);
    }
    let token_file = crate::token_file::TokenFileLayer::take_from(&mut config.auth_info);
    (config, token_file)
}

/// [`client_within`] [`CREDENTIALS_TIMEOUT`], retried with backoff while an `exec`
/// plugin does not answer in time; any other error is returned. Cancel-safe: race it with the signals.
pub(crate) async fn client_retrying(
    access: &Access,
    default_namespace: &str,
) -> Result<kube::Client, ClientError> {
    let mut failures = 0u32;
    loop {
        match client_within(access, default_namespace, CREDENTIALS_TIMEOUT).await {
            Err(e @ ClientError::TimedOut { .. }) => {
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

/// The most pages one list may take (10,000 objects at 100 a page, twice the 5,000
/// Nodes Kubernetes supports): stops `continue` tokens that never run out.
pub(crate) const MAX_LIST_PAGES: u32 = 100;

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
        // `last`: when the watch before was opened (after its own wait).
        let cut_short = now < *last + MIN_WATCH_LIFE;
        *short = if cut_short {
            short.saturating_add(1)
        } else {
            0
        };
        let wait = match *short {
            0 => Duration::ZERO,
            n => Backoff::TRANSIENT.delay(n - 1, crate::jitter::draw()),
        };
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

fn is_watch(uri: &http::Uri) -> bool {
    query(uri).any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// The most bytes of a non-watch answer for one object (etcd stores objects of at
/// most 1.5 MiB): more is refused as [`ApiError::TooLarge`], never read into memory.
pub(crate) const MAX_OBJECT_ANSWER: usize = 4 << 20;

/// The most bytes of a list page (a request with `limit=`): 100 real Nodes
/// are about 1 MiB, 100 Nodes of 640 KiB each still fit.
pub(crate) const MAX_LIST_ANSWER: usize = 64 << 20;

/// How much of a non-watch answer to `uri` is read at most.
fn answer_limit(uri: &http::Uri) -> usize {
    if query(uri).any(|kv| kv.starts_with("limit=")) {
        MAX_LIST_ANSWER
    } else {
        MAX_OBJECT_ANSWER
    }
}

/// The service error of the client's stack.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A non-watch answer read in full within the time limit, or a watch's stream.
type PacedBody<B> = http_body_util::Either<http_body_util::Full<bytes::Bytes>, B>;

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
    /// [`ApiError::Timeout`]: a non-watch request (lists too) is read in full
    /// in that time, and up to [`answer_limit`] bytes ([`ApiError::TooLarge`]);
    /// a watch gets its response headers in that time (its stream is then
    /// kube's, ended by the watch's own timeout). kube sets no
    /// read timeout, and a server that accepts a request and never answers, or
    /// a pooled connection to a dead peer, would otherwise hold the caller
    /// (the node or sibling watcher) silently for many minutes.
    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let watch = is_watch(req.uri());
        if !watch && req.method() == http::Method::GET && !self.page_allowed(req.uri()) {
            return Box::pin(async { Err(Box::new(EndlessList) as BoxError) });
        }
        let limit = answer_limit(req.uri());
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
                    return Ok(res.map(http_body_util::Either::Right));
                }
                let (parts, body) = res.into_parts();
                let body = http_body_util::Limited::new(body, limit);
                let bytes = http_body_util::BodyExt::collect(body)
                    .await
                    .map_err(|e| -> BoxError {
                        if e.is::<http_body_util::LengthLimitError>() {
                            Box::new(ApiError::TooLarge { limit })
                        } else {
                            e
                        }
                    })?
                    .to_bytes();
                let body = http_body_util::Either::Left(http_body_util::Full::new(bytes));
                Ok(http::Response::from_parts(parts, body))
            };
            tokio::time::timeout(REQUEST_TIMEOUT, answer)
                .await
                .map_err(|_| -> BoxError { Box::new(ApiError::Timeout(REQUEST_TIMEOUT)) })?
        })
    }
}
