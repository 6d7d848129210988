//! API access: where the API server is and how to authenticate to it, from a
//! kubeconfig (local runs) or the in-cluster service account, and the
//! [`kube::Client`] over hyper + rustls built from that.
//!
//! `kube::Config` is not used: its kubeconfig support (YAML, exec and OIDC
//! plugins, JSONPath) is most of the binary's size, and a placeholder reads one
//! token file. The kubeconfig subset read here is what kubectl, kind, k3s and
//! `kubectl create token` setups write: server, CA, client certificate, token or
//! token file, namespace. Credential plugins (`exec`, `auth-provider`) and
//! basic auth are refused with a message saying so.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use base64::Engine;
use http::header::{AUTHORIZATION, HeaderValue};
use http::{Request, Response, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::MapErr;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::resolve::Resolver;
use crate::yaml::{self, Yaml};

/// A bound service-account token is rotated by the kubelet: read it again this often.
pub const TOKEN_REREAD: Duration = Duration::from_secs(60);
/// How long a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the API server is and how to talk to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Base URL (`https://10.0.0.1:443`, or with a path prefix behind a proxy).
    pub server: Uri,
    /// PEM of the CAs to trust; empty: the system's roots.
    pub ca_pem: Vec<u8>,
    /// Client certificate and key, PEM.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// Name to verify the server's certificate against, instead of the URL's host.
    pub tls_server_name: Option<String>,
    /// How requests authenticate.
    pub auth: Auth,
    /// The kubeconfig context's namespace.
    pub namespace: Option<String>,
    /// Where this came from, for the log.
    pub source: String,
}

/// How requests authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// No `Authorization` header (client certificate, or none).
    None,
    /// A fixed bearer token.
    Token(String),
    /// A bearer token read from this file, again every [`TOKEN_REREAD`].
    TokenFile(PathBuf),
}

/// Why there is no API access.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// Neither a kubeconfig nor an in-cluster service account: a plain pause.
    #[error("{0}")]
    Missing(String),
    /// One was found but cannot be used (the message says why).
    #[error("{0}")]
    Invalid(String),
}

/// Finds API access as kubectl does: the first existing file of `KUBECONFIG`
/// (`:`-separated) or `~/.kube/config`; else the in-cluster service account
/// (`KUBERNETES_SERVICE_HOST`/`_PORT`, token and CA in `service_account_dir`).
pub fn discover(
    env: impl Fn(&str) -> Option<OsString>,
    service_account_dir: &Path,
) -> Result<Access, AccessError> {
    let candidates: Vec<PathBuf> = match env("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(&list).collect(),
        None => env("HOME")
            .map(|h| PathBuf::from(h).join(".kube").join("config"))
            .into_iter()
            .collect(),
    };
    if let Some(path) = candidates.iter().find(|p| p.is_file()) {
        let text = std::fs::read_to_string(path).map_err(|e| {
            AccessError::Invalid(format!("cannot read kubeconfig {}: {e}", path.display()))
        })?;
        return from_kubeconfig(&text, path)
            .map_err(|e| AccessError::Invalid(format!("kubeconfig {}: {e}", path.display())));
    }
    let host = env("KUBERNETES_SERVICE_HOST").and_then(|h| h.into_string().ok());
    let port = env("KUBERNETES_SERVICE_PORT").and_then(|p| p.into_string().ok());
    match host.filter(|h| !h.is_empty()) {
        Some(host) => in_cluster(&host, port.as_deref(), service_account_dir),
        None => Err(AccessError::Missing(format!(
            "no kubeconfig and no in-cluster service account (KUBERNETES_SERVICE_HOST is not set; \
             kubeconfig looked for at {})",
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The in-cluster service account, as client-go's `rest.InClusterConfig`.
pub fn in_cluster(host: &str, port: Option<&str>, sa_dir: &Path) -> Result<Access, AccessError> {
    let token = sa_dir.join("token");
    if !token.is_file() {
        return Err(AccessError::Missing(format!(
            "in a cluster, but no service-account token at {} (the pod or its service account \
             sets automountServiceAccountToken: false): it can make no API request; set \
             automountServiceAccountToken: true and bind the Role of rbac/ (node-gate: the \
             ClusterRole of manifests/node-gate/) to the pod's service account",
            token.display()
        )));
    }
    let ca = sa_dir.join("ca.crt");
    let ca_pem = std::fs::read(&ca).map_err(|e| {
        AccessError::Invalid(format!(
            "in a cluster, but cannot read the cluster CA {}: {e}",
            ca.display()
        ))
    })?;
    let port = port.filter(|p| !p.is_empty()).unwrap_or("443");
    // An IPv6 service address needs brackets in a URL.
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let server: Uri = format!("https://{host}:{port}").parse().map_err(|e| {
        AccessError::Invalid(format!(
            "KUBERNETES_SERVICE_HOST/PORT do not form a URL ({host}:{port}): {e}"
        ))
    })?;
    Ok(Access {
        server,
        ca_pem,
        client_cert: None,
        tls_server_name: None,
        auth: Auth::TokenFile(token),
        namespace: None,
        source: "in-cluster service account".into(),
    })
}

fn field<'a>(y: &'a Yaml, key: &str) -> Option<&'a str> {
    y.get(key).and_then(Yaml::as_str).filter(|s| !s.is_empty())
}

/// The entry named `name` of a kubeconfig list (`clusters`, `users`, `contexts`),
/// its inner object (`cluster`, `user`, `context`).
fn named<'a>(doc: &'a Yaml, list: &str, inner: &str, name: &str) -> Result<&'a Yaml, String> {
    doc.get(list)
        .map(Yaml::items)
        .unwrap_or_default()
        .iter()
        .find(|e| field(e, "name") == Some(name))
        .and_then(|e| e.get(inner))
        .ok_or_else(|| format!("no entry named {name:?} in {list}"))
}

/// A file or inline (base64) credential: `<key>` is a path relative to the
/// kubeconfig's folder, `<key>-data` the content in base64.
fn file_or_data(y: &Yaml, key: &str, dir: &Path) -> Result<Option<Vec<u8>>, String> {
    if let Some(data) = field(y, &format!("{key}-data")) {
        let clean: String = data.split_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(clean)
            .map(Some)
            .map_err(|e| format!("{key}-data is not base64: {e}"));
    }
    match field(y, key) {
        Some(p) => {
            let path = dir.join(p);
            std::fs::read(&path)
                .map(Some)
                .map_err(|e| format!("cannot read {key} {}: {e}", path.display()))
        }
        None => Ok(None),
    }
}

/// Reads the current context of a kubeconfig (`path` resolves relative files).
pub fn from_kubeconfig(text: &str, path: &Path) -> Result<Access, String> {
    let doc = yaml::parse(text).map_err(|e| e.to_string())?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let current = field(&doc, "current-context")
        .ok_or("no current-context (set one with kubectl config use-context)")?;
    let context = named(&doc, "contexts", "context", current)?;
    let cluster_name = field(context, "cluster").ok_or("the current context names no cluster")?;
    let cluster = named(&doc, "clusters", "cluster", cluster_name)?;
    let server: Uri = field(cluster, "server")
        .ok_or_else(|| format!("cluster {cluster_name:?} has no server"))?
        .parse()
        .map_err(|e| format!("cluster {cluster_name:?}: server is not a URL: {e}"))?;
    if !matches!(server.scheme_str(), Some("https" | "http")) || server.host().is_none() {
        return Err(format!(
            "cluster {cluster_name:?}: server must be an http:// or https:// URL"
        ));
    }
    for unsupported in ["proxy-url", "insecure-skip-tls-verify"] {
        if field(cluster, unsupported).is_some_and(|v| v != "false") {
            return Err(format!(
                "cluster {cluster_name:?}: {unsupported} is not supported by selfdestruct"
            ));
        }
    }
    let ca_pem = file_or_data(cluster, "certificate-authority", dir)?.unwrap_or_default();
    let (auth, client_cert) = match field(context, "user") {
        None => (Auth::None, None),
        Some(user_name) => {
            let user = named(&doc, "users", "user", user_name)?;
            for plugin in ["exec", "auth-provider", "username", "password"] {
                if user.get(plugin).is_some_and(|v| *v != Yaml::Null) {
                    return Err(format!(
                        "user {user_name:?}: {plugin} is not supported by selfdestruct: use a \
                         token (kubectl create token SERVICE_ACCOUNT) or a client certificate"
                    ));
                }
            }
            let auth = match (field(user, "token"), field(user, "tokenFile")) {
                (Some(t), _) => Auth::Token(t.to_string()),
                (None, Some(f)) => Auth::TokenFile(dir.join(f)),
                (None, None) => Auth::None,
            };
            let cert = file_or_data(user, "client-certificate", dir)?;
            let key = file_or_data(user, "client-key", dir)?;
            let client_cert = match (cert, key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                _ => {
                    return Err(format!(
                        "user {user_name:?}: a client certificate needs both certificate and key"
                    ));
                }
            };
            (auth, client_cert)
        }
    };
    Ok(Access {
        server,
        ca_pem,
        client_cert,
        tls_server_name: field(cluster, "tls-server-name").map(str::to_string),
        auth,
        namespace: field(context, "namespace").map(str::to_string),
        source: format!("kubeconfig {} (context {current})", path.display()),
    })
}

fn tls_config(access: &Access) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    if access.ca_pem.is_empty() {
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
    } else {
        let certs = CertificateDer::pem_slice_iter(&access.ca_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the CA is not PEM: {e}"))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err("the CA holds no usable certificate".into());
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(crate::tls::provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    match &access.client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the client certificate is not PEM: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("the client key is not PEM: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("client certificate: {e}"))
        }
    }
}

/// The largest read buffer of a connection (see [`client`]).
const READ_BUFFER: usize = 64 * 1024;

/// Builds the client: hyper over rustls (plain HTTP for `http://` servers),
/// the base URL and the `Authorization` header set on every request.
pub fn client(access: &Access, default_namespace: &str) -> Result<kube::Client, String> {
    let mut http = HttpConnector::new_with_resolver(Resolver::default());
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    let tls = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls_config(access)?);
    let tls = tls.https_or_http();
    let tls = match &access.tls_server_name {
        Some(name) => {
            let name = ServerName::try_from(name.clone())
                .map_err(|e| format!("tls-server-name {name:?}: {e}"))?;
            tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => tls,
    };
    let connector = tls.enable_http1().wrap_connector(http);
    let service = ApiService {
        http: HttpClient::builder(TokioExecutor::new())
            // hyper grows a connection's read buffer up to about 400 KiB while a
            // large list streams in, and a pooled or watching connection keeps
            // it: reads of at most 64 KiB keep memory flat for a few more syscalls.
            .http1_max_buf_size(READ_BUFFER)
            .build(connector),
        base: Arc::new(access.server.clone()),
        token: Arc::new(Token::new(&access.auth)),
    };
    Ok(kube::Client::new(service, default_namespace))
}

/// `Bearer <token>`, kept out of debug output.
fn bearer(token: &str) -> Option<HeaderValue> {
    let mut h = HeaderValue::from_str(&format!("Bearer {}", token.trim())).ok()?;
    h.set_sensitive(true);
    Some(h)
}

/// The `Authorization` header, re-read from a token file when stale.
struct Token {
    file: Option<PathBuf>,
    current: Mutex<Option<(HeaderValue, Instant)>>,
}

impl Token {
    fn new(auth: &Auth) -> Self {
        let (file, current) = match auth {
            Auth::None => (None, None),
            Auth::Token(t) => (None, bearer(t).map(|h| (h, Instant::now()))),
            Auth::TokenFile(f) => (Some(f.clone()), None),
        };
        Token {
            file,
            current: Mutex::new(current),
        }
    }

    fn header(&self) -> Option<HeaderValue> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = &self.file {
            let stale = current
                .as_ref()
                .is_none_or(|(_, read)| read.elapsed() >= TOKEN_REREAD);
            if stale {
                // A failed read keeps the last good token: the next request tries again.
                match std::fs::read_to_string(file) {
                    Ok(t) => match bearer(&t) {
                        Some(h) => *current = Some((h, Instant::now())),
                        None => {
                            tracing::warn!(file = %file.display(), "the token file holds no valid token")
                        }
                    },
                    Err(e) => {
                        tracing::warn!(file = %file.display(), error = %e, "cannot read the token file")
                    }
                }
            }
        }
        current.as_ref().map(|(h, _)| h.clone())
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// kube's request body with its error type replaced. hyper boxes a body's
/// errors as `dyn Error`, and boxing `kube::Error` would link its `Display`
/// (every variant, kubeconfig YAML errors with their snippet renderer
/// included: about 0.15 MiB). The bodies sent here are whole buffers that
/// cannot fail.
type ReqBody = MapErr<kube::client::Body, fn(kube::Error) -> BodyError>;

#[derive(Debug)]
struct BodyError;

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body failed")
    }
}

impl std::error::Error for BodyError {}

fn body_error(_: kube::Error) -> BodyError {
    BodyError
}

#[derive(Clone)]
struct ApiService {
    http: HttpClient<hyper_rustls::HttpsConnector<HttpConnector<Resolver>>, ReqBody>,
    base: Arc<Uri>,
    token: Arc<Token>,
}

/// `base` joined with the request's path and query.
fn join(base: &Uri, req: &Uri) -> Result<Uri, http::Error> {
    let prefix = base.path().trim_end_matches('/');
    let pq = req.path_and_query().map_or("/", |p| p.as_str());
    let mut parts = base.clone().into_parts();
    parts.path_and_query = Some(format!("{prefix}{pq}").parse()?);
    Ok(Uri::from_parts(parts)?)
}

impl tower::Service<Request<kube::client::Body>> for ApiService {
    type Response = Response<hyper::body::Incoming>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let mut req = req.map(|b| b.map_err(body_error as fn(kube::Error) -> BodyError));
        let uri = join(&self.base, req.uri());
        let auth = self.token.header();
        let http = self.http.clone();
        Box::pin(async move {
            *req.uri_mut() = uri?;
            if let Some(h) = auth {
                req.headers_mut().insert(AUTHORIZATION, h);
            }
            Ok(http.request(req).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("selfdestruct-connect-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("tmp dir");
        d
    }

    const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: other
  cluster:
    server: https://other:6443
- name: c1
  cluster:
    server: https://10.0.0.1:6443/prefix/
    certificate-authority: ca.pem
    tls-server-name: kubernetes.default
contexts:
- name: ctx
  context:
    cluster: c1
    user: u1
    namespace: placeholders
users:
- name: u1
  user:
    tokenFile: token
current-context: ctx
";

    #[test]
    fn reads_the_current_context_with_relative_files() {
        let dir = tmpdir("kc");
        std::fs::write(dir.join("ca.pem"), "PEM").expect("write");
        let a = from_kubeconfig(KUBECONFIG, &dir.join("config")).expect("valid");
        assert_eq!(a.server, "https://10.0.0.1:6443/prefix/");
        assert_eq!(a.ca_pem, b"PEM");
        assert_eq!(a.tls_server_name.as_deref(), Some("kubernetes.default"));
        assert_eq!(a.auth, Auth::TokenFile(dir.join("token")));
        assert_eq!(a.namespace.as_deref(), Some("placeholders"));
        let inline = KUBECONFIG
            .replace(
                "certificate-authority: ca.pem",
                "certificate-authority-data: UEVN",
            )
            .replace("tokenFile: token", "token: abc");
        let b = from_kubeconfig(&inline, Path::new("/nowhere/config")).expect("valid");
        assert_eq!(b.ca_pem, b"PEM");
        assert_eq!(b.auth, Auth::Token("abc".into()));
    }

    #[test]
    fn refuses_what_it_does_not_support_naming_it() {
        let cases = [
            (
                KUBECONFIG.replace("tokenFile: token", "exec:\n      command: aws"),
                "exec is not supported",
            ),
            (
                KUBECONFIG.replace("current-context: ctx", "current-context: nope"),
                "no entry named \"nope\" in contexts",
            ),
            (
                KUBECONFIG.replace("current-context: ctx", ""),
                "no current-context",
            ),
            (
                KUBECONFIG.replace(
                    "certificate-authority: ca.pem",
                    "certificate-authority-data: !!",
                ),
                "tags and block scalars are not supported",
            ),
            (
                KUBECONFIG.replace(
                    "certificate-authority: ca.pem",
                    "insecure-skip-tls-verify: true",
                ),
                "insecure-skip-tls-verify is not supported",
            ),
            (
                KUBECONFIG.replace("https://10.0.0.1:6443/prefix/", "ftp://x"),
                "must be an http:// or https:// URL",
            ),
        ];
        let dir = tmpdir("refuse");
        std::fs::write(dir.join("ca.pem"), "PEM").expect("write");
        for (text, want) in cases {
            let e = from_kubeconfig(&text, &dir.join("config")).expect_err(want);
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
    }

    #[test]
    fn discovery_order_kubeconfig_then_in_cluster() {
        let dir = tmpdir("discover");
        let sa = dir.join("sa");
        std::fs::create_dir_all(&sa).expect("sa dir");
        std::fs::write(dir.join("ca.pem"), "PEM").expect("write");
        std::fs::write(dir.join("config"), KUBECONFIG).expect("write");
        let env = |vars: Vec<(&'static str, OsString)>| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        };
        let missing = dir.join("missing").into_os_string();
        let mut list = missing.clone();
        list.push(":");
        list.push(dir.join("config"));
        // The first existing file of KUBECONFIG wins over the in-cluster account.
        let a = discover(
            env(vec![
                ("KUBECONFIG", list),
                ("KUBERNETES_SERVICE_HOST", "10.0.0.1".into()),
            ]),
            &sa,
        )
        .expect("kubeconfig");
        assert!(a.source.starts_with("kubeconfig"), "{}", a.source);
        // No kubeconfig, no service host: no API.
        let e = discover(env(vec![("KUBECONFIG", missing.clone())]), &sa).expect_err("none");
        assert!(
            matches!(e, AccessError::Missing(ref m) if m.contains("no kubeconfig and no in-cluster service account"))
        );
        // In a cluster without a token (automountServiceAccountToken: false).
        let in_cluster_env = || {
            env(vec![
                ("KUBECONFIG", missing.clone()),
                ("KUBERNETES_SERVICE_HOST", "fd00::1".into()),
                ("KUBERNETES_SERVICE_PORT", "6443".into()),
            ])
        };
        let e = discover(in_cluster_env(), &sa).expect_err("no token");
        assert!(
            matches!(e, AccessError::Missing(ref m) if m.contains("automountServiceAccountToken"))
        );
        std::fs::write(sa.join("token"), "t").expect("write");
        let e = discover(in_cluster_env(), &sa).expect_err("no CA");
        assert!(matches!(e, AccessError::Invalid(ref m) if m.contains("ca.crt")));
        std::fs::write(sa.join("ca.crt"), "PEM").expect("write");
        let a = discover(in_cluster_env(), &sa).expect("in cluster");
        assert_eq!(a.server, "https://[fd00::1]:6443/");
        assert_eq!(a.auth, Auth::TokenFile(sa.join("token")));
        // A kubeconfig that is there but broken is an error, not a fall-through.
        std::fs::write(dir.join("config"), "a: [1\n").expect("write");
        let e = discover(
            env(vec![("KUBECONFIG", dir.join("config").into_os_string())]),
            &sa,
        )
        .expect_err("broken");
        assert!(matches!(e, AccessError::Invalid(ref m) if m.contains("line 1")));
    }

    #[test]
    fn joins_the_base_path_and_the_request() {
        let base: Uri = "https://h:6443/prefix/".parse().expect("uri");
        let req: Uri = "/api/v1/nodes?watch=true".parse().expect("uri");
        assert_eq!(
            join(&base, &req).expect("join"),
            "https://h:6443/prefix/api/v1/nodes?watch=true"
        );
        let bare: Uri = "http://127.0.0.1:1".parse().expect("uri");
        assert_eq!(
            join(&bare, &req).expect("join"),
            "http://127.0.0.1:1/api/v1/nodes?watch=true"
        );
    }

    fn make_stale(t: &Token) {
        if let Some((_, read)) = t.current.lock().expect("lock").as_mut() {
            *read = Instant::now()
                .checked_sub(TOKEN_REREAD)
                .expect("the clock runs past a minute");
        }
    }

    #[test]
    fn token_file_is_reread_and_a_failed_read_keeps_the_last_token() {
        let dir = tmpdir("token");
        let file = dir.join("token");
        std::fs::write(&file, "one\n").expect("write");
        let t = Token::new(&Auth::TokenFile(file.clone()));
        assert_eq!(t.header().expect("header"), "Bearer one");
        std::fs::write(&file, "two").expect("write");
        // Fresh: not re-read yet.
        assert_eq!(t.header().expect("header"), "Bearer one");
        // Stale: re-read.
        make_stale(&t);
        assert_eq!(t.header().expect("header"), "Bearer two");
        std::fs::remove_file(&file).expect("rm");
        make_stale(&t);
        assert_eq!(t.header().expect("header"), "Bearer two");
        assert!(Token::new(&Auth::None).header().is_none());
    }
}
