//! The fake served in-process: a `tower::Service` over HTTP requests, no socket.
//! Used with `kube::Client::new`, everything runs as tasks of the caller's
//! runtime, so with `tokio::time::pause` the fake and its client share virtual
//! time (no real I/O ever keeps the runtime busy, so idle time auto-advances).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::{Request, Response};

use crate::Shared;
use crate::server;
use crate::watch::ResBody;

/// A `tower::Service` answering like the fake's HTTP server, with a bearer
/// token added to every request. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    pub(crate) shared: Arc<Shared>,
    pub(crate) token: Option<String>,
}

/// The response body of [`Service`]: a buffer, or a watch stream that ends with
/// an error when the fake closes its connections (outage, fault, drop).
pub struct ServiceBody {
    inner: ResBody,
    /// Resolves when every open connection is to be closed.
    killed: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Body for ServiceBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        if matches!(this.inner, ResBody::Stream(_)) && this.killed.as_mut().poll(cx).is_ready() {
            this.inner = ResBody::Full(None);
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "connection closed by the fake API server",
            ))));
        }
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> tower_service::Service<Request<B>> for Service
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<ServiceBody>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Response<ServiceBody>>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        if let Some(token) = &self.token
            && let Ok(v) = format!("Bearer {token}").parse()
        {
            req.headers_mut().insert(hyper::header::AUTHORIZATION, v);
        }
        Box::pin(async move {
            // An outage: the connection is refused or closed before any answer.
            if *shared.outage_tx.borrow() {
                let refused = "connection refused (fake API server outage)";
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, refused));
            }
            let mut kill = shared.kill_tx.subscribe();
            kill.mark_unchanged();
            let response = server::handle(shared, req).await?;
            let killed = Box::pin(async move {
                let _ = kill.changed().await;
            });
            Ok(response.map(|inner| ServiceBody { inner, killed }))
        })
    }
}
