//! API access discovery: a [`kube::Config`] from a kubeconfig (local runs) or the in-cluster
//! service account, in the order of `kube::Config::infer()`, except that:
//!
//! - a kubeconfig the user named (`KUBECONFIG`, `--kubeconfig`) that cannot be used is an
//!   error ([`AccessError::Named`]), never a fall-through to the in-cluster account;
//! - the service-account folder may be another one (tests, unusual mounts): it is described
//!   to kube as a kubeconfig naming its `ca.crt` and `token`;
//! - nothing here holds the thread that serves the signals: kubeconfig files (at most
//!   [`KUBECONFIG_MAX_BYTES`]) are read, the token read and the client built, on
//!   blocking threads within [`CREDENTIALS_TIMEOUT`];
//! - the token is ours, not kube's (`token_file.rs`): a token file is read up to a
//!   cap, re-read off the signals' thread and trimmed as client-go does; an `exec`
//!   plugin runs non-interactively in a process group of its own, its output capped,
//!   killed when it has not answered in time (`exec_plugin.rs`), its stderr captured
//!   into the error.
//!
//! Everything else (YAML, exec plugins, client certificates, `tls-server-name`,
//! `proxy-url`, TLS) is kube's.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The largest kubeconfig file read (a kubeconfig with a few clusters'
/// certificates is some KiB): a larger one, or an endless one such as
/// `/dev/zero`, is refused without holding more than this in memory.
pub(crate) const KUBECONFIG_MAX_BYTES: u64 = 4 << 20;

/// How long reading the kubeconfig files, or building a client (reading the token
/// file, running an `exec` plugin), may take; a plugin still running then is killed
/// with its process group, and the build retried with backoff
/// (`client::client_retrying`), which waits again for a token file's read still
/// going rather than start another.
pub(crate) const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a kubeconfig file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// It cannot be opened or read.
    #[error("cannot read {}", .0.display())]
    Read(PathBuf, #[source] std::io::Error),
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

/// The access found, or why there is none (then a mode is a plain pause).
pub type Discovered = Result<Access, AccessError>;

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
    #[error("kubeconfig {}", .0.display())]
    Home(PathBuf, #[source] KubeconfigError),
    /// In a cluster, with a token, but without the cluster's CA.
    #[error("in a cluster, but no cluster CA at {}", .0.display())]
    NoCa(PathBuf),
    /// The in-cluster service account cannot be used.
    #[error("in-cluster service account")]
    InCluster(#[source] KubeconfigError),
}

impl AccessError {
    /// Nothing to use at all (no kubeconfig, no token): a plain pause, not a fault.
    pub(crate) fn is_missing(&self) -> bool {
        matches!(self, AccessError::Missing | AccessError::NoToken(_))
    }

    /// A kubeconfig the user named cannot be used: a configuration error.
    pub(crate) fn is_named(&self) -> bool {
        matches!(self, AccessError::Named { .. })
    }
}

/// API access: the kube configuration and where it came from.
pub struct Access {
    pub(crate) config: kube::Config,
    /// The kubeconfig context's namespace, if any (local runs).
    pub namespace: Option<String>,
    /// Where this came from, for the log.
    pub(crate) source: String,
    /// It came from a kubeconfig the user named (`KUBECONFIG`, `--kubeconfig`): a
    /// client that cannot be built from it is a configuration error too.
    pub(crate) named: bool,
}

/// Reads one kubeconfig file, at most [`KUBECONFIG_MAX_BYTES`]. Blocking (a
/// FIFO's open waits for a writer): run it on a blocking thread.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let read = |e| KubeconfigError::Read(path.to_path_buf(), e);
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
pub(crate) async fn discover(
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
        let access = from_files(std::slice::from_ref(&path), false).await;
        return access.map_err(|e| AccessError::Home(path, e));
    }
    let host = env("KUBERNETES_SERVICE_HOST").and_then(|h| h.into_string().ok());
    let port = env("KUBERNETES_SERVICE_PORT").and_then(|p| p.into_string().ok());
    match host.filter(|h| !h.is_empty()) {
        Some(host) => in_cluster(&host, port.as_deref(), service_account_dir).await,
        None => Err(AccessError::Missing),
    }
}

/// The in-cluster service account, as client-go's `rest.InClusterConfig`.
pub(crate) async fn in_cluster(
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

#[cfg(test)]
mod tests;
