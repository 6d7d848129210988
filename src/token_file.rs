//! The bearer token, read by the agent rather than by kube, with bounds kube does not
//! have: from a file (a kubeconfig's `tokenFile`, the in-cluster `token`; at most
//! [`MAX_BYTES`], trimmed of surrounding white space as client-go does: kube 5.0 sends
//! the text as it is, and a trailing newline fails every request), or from an `exec`
//! plugin (`exec_plugin.rs`: time and output limits). Read again once 50 s old (a
//! file, as kube does) or 60 s before it expires (a plugin's), and at the next request
//! after a 401, for every caller; always on a blocking thread, one read at a time, so
//! a FIFO or a hung mount holds neither the signals nor the requests for long.

use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use http::HeaderValue;
use kube::config::{AuthInfo, ExecConfig};
use tokio::task::JoinHandle;

use crate::exec_plugin::{self, PluginError};

/// How old the token held may get before the file is read again (kube's: its
/// 60 s period less its 10 s margin).
const RELOAD: Duration = Duration::from_secs(50);

/// How long before its expiry a plugin's token is asked for again (kube's margin).
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// A token file is a few KiB at most (a projected service-account token about 1 KiB);
/// a larger one (or an endless one, `/dev/zero`) is refused, read no further.
pub(crate) const MAX_BYTES: u64 = 64 << 10;

/// How long a request waits for a token being read again (a FIFO nobody writes, a
/// hung mount); then it goes with the token held, and the read goes on alone (only
/// one at a time).
const REREAD_WAIT: Duration = Duration::from_secs(5);

/// Why no token was read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("cannot read the token file {}", .0.display())]
    Read(PathBuf, #[source] std::io::Error),
    #[error("the token file {} is larger than {MAX_BYTES} bytes", .0.display())]
    TooLarge(PathBuf),
    /// It holds no token usable in a header (empty, or bytes a header cannot carry).
    #[error("the token file {} holds no usable token", .0.display())]
    Unusable(PathBuf),
    #[error("the exec credential plugin's token cannot be sent in a header")]
    UnusableToken,
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// The token's `Authorization` header (blocking: a FIFO's open waits for a writer).
fn read_header(path: &Path) -> Result<HeaderValue, TokenError> {
    let read = |e| TokenError::Read(path.to_path_buf(), e);
    let mut text = Vec::new();
    std::fs::File::open(path)
        .map_err(read)?
        .take(MAX_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(read)?;
    if text.len() as u64 > MAX_BYTES {
        return Err(TokenError::TooLarge(path.to_path_buf()));
    }
    let text = String::from_utf8_lossy(&text);
    bearer(text.trim()).ok_or_else(|| TokenError::Unusable(path.to_path_buf()))
}

/// `Bearer token` as a sensitive header, if the token can be one.
fn bearer(token: &str) -> Option<HeaderValue> {
    if token.is_empty() {
        return None;
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Where the token comes from.
#[derive(Clone)]
enum Source {
    /// A file, read again every [`RELOAD`].
    File(PathBuf),
    /// An exec plugin, run again [`EXPIRY_MARGIN`] before the token expires, within
    /// this time.
    Exec(Box<ExecConfig>, Duration),
}

/// A token read: its header, and when to read it again (`None`: only after a 401).
type Fresh = (HeaderValue, Option<Instant>);

impl Source {
    /// Reads the token (blocking).
    fn read(&self) -> Result<Fresh, TokenError> {
        match self {
            Source::File(path) => Ok((read_header(path)?, Some(Instant::now() + RELOAD))),
            Source::Exec(exec, limit) => from_plugin(&exec_plugin::run(exec, *limit)?),
        }
    }
}

/// A plugin's token as a header, asked for again [`EXPIRY_MARGIN`] before it expires.
fn from_plugin(credential: &exec_plugin::Credential) -> Result<Fresh, TokenError> {
    let token = credential.token.as_deref().and_then(bearer);
    let header = token.ok_or(TokenError::UnusableToken)?;
    let refresh_at = credential.expires()?.map(|t| {
        let left = t.duration_since(SystemTime::now()).unwrap_or_default();
        Instant::now() + left.saturating_sub(EXPIRY_MARGIN)
    });
    Ok((header, refresh_at))
}

struct TokenFile {
    source: Source,
    /// The header held, and the read going on, if any.
    current: tokio::sync::Mutex<Current>,
    /// The server refused it: read it again at the next request.
    refused: AtomicBool,
}

struct Current {
    header: HeaderValue,
    /// When to read it again (`None`: only after a 401).
    refresh_at: Option<Instant>,
    /// A read (or plugin run) not finished yet.
    reading: Option<JoinHandle<Result<Fresh, TokenError>>>,
}

impl TokenFile {
    fn new(source: Source, (header, refresh_at): Fresh) -> Self {
        TokenFile {
            source,
            current: Current {
                header,
                refresh_at,
                reading: None,
            }
            .into(),
            refused: AtomicBool::new(false),
        }
    }

    /// The header, read again (on a blocking thread) when [`RELOAD`] has passed or
    /// the server refused it. A token that cannot be read keeps the last one (as
    /// kube and client-go do); a read that hangs is waited for [`REREAD_WAIT`] once,
    /// and not started again while it runs.
    async fn header(&self) -> HeaderValue {
        let mut current = self.current.lock().await;
        let due = self.refused.swap(false, Ordering::Relaxed)
            || current.refresh_at.is_some_and(|t| Instant::now() >= t);
        let (mut reading, wait) = match current.reading.take() {
            // A read that hung before is not waited for again.
            Some(reading) => (reading, Duration::ZERO),
            None if due => {
                let source = self.source.clone();
                let read = tokio::task::spawn_blocking(move || source.read());
                (read, REREAD_WAIT)
            }
            None => return current.header.clone(),
        };
        match tokio::time::timeout(wait, &mut reading).await {
            Ok(Ok(Ok((header, refresh_at)))) => {
                (current.header, current.refresh_at) = (header, refresh_at);
            }
            Ok(Ok(Err(e))) => {
                tracing::warn!(
                    error = %crate::logging::Chain(&e),
                    "cannot read the token again: keeping the one held"
                );
                if let Some(t) = &mut current.refresh_at {
                    *t = Instant::now() + RELOAD;
                }
            }
            Ok(Err(_)) => {}
            Err(_) => current.reading = Some(reading),
        }
        current.header.clone()
    }

    /// The server refused the token (401): it is read again at the next request.
    fn refused(&self) {
        self.refused.store(true, Ordering::Relaxed);
    }
}

/// Sets every request's `Authorization` header from a token file or an exec plugin,
/// if any.
#[derive(Clone, Default)]
pub(crate) struct TokenFileLayer(Option<Arc<TokenFile>>);

impl TokenFileLayer {
    /// Takes the token file or the exec plugin out of `auth` when kube would use it
    /// (kube's precedence: no auth provider, no user and password, no inline token;
    /// then the token file, then the plugin), and reads the token now, within
    /// `limit` (blocking: run it on a blocking thread). kube is left neither: it
    /// would read a file without a limit and run a plugin without a time limit.
    /// A plugin that answers with a client certificate puts it into `auth`.
    pub(crate) fn take_from(auth: &mut AuthInfo, limit: Duration) -> Result<Self, TokenError> {
        let used = auth.auth_provider.is_none()
            && !(auth.username.is_some() && auth.password.is_some())
            && auth.token.is_none();
        if !used {
            return Ok(TokenFileLayer(None));
        }
        let (fresh, source) = match (auth.token_file.take(), auth.exec.take()) {
            (Some(path), _) => {
                let source = Source::File(PathBuf::from(path));
                (source.read()?, source)
            }
            (None, Some(exec)) => {
                let credential = exec_plugin::run(&exec, limit)?;
                if let (Some(cert), Some(key)) = (
                    &credential.client_certificate_data,
                    &credential.client_key_data,
                ) {
                    use base64::Engine as _;
                    let b64 = base64::engine::general_purpose::STANDARD;
                    auth.client_certificate_data = Some(b64.encode(cert));
                    auth.client_key_data = Some(b64.encode(key).into());
                    return Ok(TokenFileLayer(None));
                }
                (from_plugin(&credential)?, Source::Exec(exec.into(), limit))
            }
            (None, None) => return Ok(TokenFileLayer(None)),
        };
        let token = TokenFile::new(source, fresh);
        Ok(TokenFileLayer(Some(Arc::new(token))))
    }
}

impl<S> tower::Layer<S> for TokenFileLayer {
    type Service = TokenFileService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TokenFileService {
            inner,
            token: self.0.clone(),
            header: None,
            pending: None,
        }
    }
}

/// See [`TokenFileLayer`]. The header is found in `poll_ready` (a read again
/// waits there, off the thread's stack of blocking work), and set in `call`.
pub(crate) struct TokenFileService<S> {
    inner: S,
    token: Option<Arc<TokenFile>>,
    /// The header for the next call.
    header: Option<HeaderValue>,
    /// The header being found.
    pending: Option<Pin<Box<dyn Future<Output = HeaderValue> + Send>>>,
}

impl<S, B, ResB> tower::Service<http::Request<B>> for TokenFileService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<ResB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(token) = &self.token
            && self.header.is_none()
        {
            let pending = self.pending.get_or_insert_with(|| {
                let token = Arc::clone(token);
                Box::pin(async move { token.header().await })
            });
            let Poll::Ready(header) = pending.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            self.pending = None;
            self.header = Some(header);
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let token = self.token.clone();
        if let Some(header) = self.header.take() {
            req.headers_mut()
                .insert(http::header::AUTHORIZATION, header);
        }
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await;
            if let (Some(token), Ok(res)) = (&token, &answer)
                && res.status() == http::StatusCode::UNAUTHORIZED
            {
                token.refused();
            }
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_trimmed_of_surrounding_white_space() {
        let dir = std::env::temp_dir().join(format!("token-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("token");
        std::fs::write(&path, " abc.def\n\r\n").expect("write");
        let header = read_header(&path).expect("a token");
        assert_eq!(header.to_str().expect("ascii"), "Bearer abc.def");
        std::fs::write(&path, "\n").expect("write");
        assert!(matches!(read_header(&path), Err(TokenError::Unusable(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_endless_token_file_is_refused_after_the_cap() {
        // Issue 32, item 6: a token file linked to /dev/zero was read by kube to 1 GiB.
        let err = read_header(Path::new("/dev/zero")).expect_err("no token");
        assert!(matches!(err, TokenError::TooLarge(_)), "{err}");
    }

    #[tokio::test]
    async fn a_refused_token_is_read_again_at_the_next_request_only() {
        let dir = std::env::temp_dir().join(format!("token-refused-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("token");
        std::fs::write(&path, "old").expect("write");
        let source = Source::File(path.clone());
        let token = TokenFile::new(source.clone(), source.read().expect("a token"));
        std::fs::write(&path, "new").expect("write");
        assert_eq!(token.header().await, "Bearer old", "held for 50 s");
        token.refused();
        assert_eq!(token.header().await, "Bearer new", "read again after a 401");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
