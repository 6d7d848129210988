//! A bearer token read from a file (a kubeconfig's `tokenFile`, the in-cluster
//! `token`), trimmed of surrounding white space as client-go does (kube 5.0 sends the
//! text as it is: a trailing newline fails every request), and read again once 50 s
//! old, as kube does, and at the next request after a 401, for every caller.

use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::HeaderValue;
use kube::config::AuthInfo;

/// How old the token held may get before the file is read again (kube's: its
/// 60 s period less its 10 s margin).
const RELOAD: Duration = Duration::from_secs(50);

/// A token file is a few KiB at most; more is not read.
const MAX_BYTES: u64 = 64 << 10;

/// The token's `Authorization` header, or `None` if the file cannot be read
/// or holds no token usable in a header.
fn read_header(path: &Path) -> Option<HeaderValue> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let token = text.trim();
    if token.is_empty() {
        return None;
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

struct TokenFile {
    path: PathBuf,
    /// The header last read, and when (`None`: read again at the next request).
    current: Mutex<(HeaderValue, Option<Instant>)>,
}

impl TokenFile {
    /// The header, re-read from the file when [`RELOAD`] has passed or the
    /// server refused it. A file that cannot be read keeps the last token (as
    /// kube and client-go do).
    fn header(&self) -> HeaderValue {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.1.is_none_or(|read| read.elapsed() >= RELOAD) {
            if let Some(header) = read_header(&self.path) {
                current.0 = header;
            }
            current.1 = Some(Instant::now());
        }
        current.0.clone()
    }

    /// The server refused the token (401): the file is read at the next request.
    fn refused(&self) {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).1 = None;
    }
}

/// Sets every request's `Authorization` header from the token file, if any.
#[derive(Clone, Default)]
pub(crate) struct TokenFileLayer(Option<Arc<TokenFile>>);

impl TokenFileLayer {
    /// Takes the token file out of `auth` when kube would use it (no auth
    /// provider, no user and password, no inline token: kube's precedence),
    /// and it can be read now. Otherwise `auth` stays as it is and kube reports
    /// what is wrong with it.
    pub(crate) fn take_from(auth: &mut AuthInfo) -> Self {
        let used = auth.auth_provider.is_none()
            && !(auth.username.is_some() && auth.password.is_some())
            && auth.token.is_none();
        let Some(path) = auth.token_file.as_ref().filter(|_| used) else {
            return TokenFileLayer(None);
        };
        let path = PathBuf::from(path);
        let Some(header) = read_header(&path) else {
            return TokenFileLayer(None);
        };
        auth.token_file = None;
        // kube would use the token file before an exec plugin: so do we.
        auth.exec = None;
        TokenFileLayer(Some(Arc::new(TokenFile {
            path,
            current: Mutex::new((header, Some(Instant::now()))),
        })))
    }
}

impl<S> tower::Layer<S> for TokenFileLayer {
    type Service = TokenFileService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TokenFileService {
            inner,
            token: self.0.clone(),
        }
    }
}

/// See [`TokenFileLayer`].
#[derive(Clone)]
pub(crate) struct TokenFileService<S> {
    inner: S,
    token: Option<Arc<TokenFile>>,
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
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let token = self.token.clone();
        if let Some(token) = &token {
            req.headers_mut()
                .insert(http::header::AUTHORIZATION, token.header());
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
        assert_eq!(read_header(&path), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_refused_token_is_read_again_at_the_next_request_only() {
        let dir = std::env::temp_dir().join(format!("token-refused-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("token");
        std::fs::write(&path, "old").expect("write");
        let token = TokenFile {
            current: Mutex::new((read_header(&path).expect("a token"), Some(Instant::now()))),
            path: path.clone(),
        };
        std::fs::write(&path, "new").expect("write");
        assert_eq!(token.header(), "Bearer old", "held for 50 s");
        token.refused();
        assert_eq!(token.header(), "Bearer new", "read again after a 401");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
