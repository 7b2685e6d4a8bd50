//! What moves a connection's clock: the socket (bytes arrived), the
//! request body (its deadline), the response body (the request is done)
//! and the per-connection service that wraps the router.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tower::ServiceExt as _;

use super::clock::{Busy, Clock};

/// The socket, telling the clock when bytes arrive.
pub(super) struct ActivityIo {
    pub(super) inner: TcpStream,
    pub(super) clock: Arc<Clock>,
}

impl AsyncRead for ActivityIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.on_bytes();
        }
        polled
    }
}

impl AsyncWrite for ActivityIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The error a request body yields once its time is up; the JSON body
/// extractor turns it into 408 `body_timeout`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .0.as_millis())]
pub struct BodyTimeout(pub Duration);

/// A request body that fails once `deadline` has passed, and records
/// whether it was read to its end.
struct DeadlineBody {
    inner: Incoming,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
    read_to_end: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            if frame.is_none() || self.inner.is_end_stream() {
                self.read_to_end.store(true, Ordering::Relaxed);
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let e: axum::BoxError = Box::new(BodyTimeout(self.limit));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps its request marked busy until it is done.
struct BusyBody {
    inner: Body,
    _busy: Busy,
}

impl HttpBody for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The router for one connection, wrapped with the clock and body deadline.
#[derive(Clone)]
pub(super) struct ConnService {
    pub(super) router: Router,
    pub(super) clock: Arc<Clock>,
    pub(super) body_timeout: Duration,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = self.clock.request_started();
        let limit = self.body_timeout;
        let read_to_end = Arc::new(AtomicBool::new(req.body().is_end_stream()));
        let req: Request = req.map(|inner| {
            Body::new(DeadlineBody {
                inner,
                sleep: Box::pin(tokio::time::sleep(limit)),
                limit,
                read_to_end: read_to_end.clone(),
            })
        });
        let router = self.router.clone();
        Box::pin(async move {
            let mut response = match router.oneshot(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if !read_to_end.load(Ordering::Relaxed) {
                close_after(&mut response);
            }
            Ok(response.map(|inner| Body::new(BusyBody { inner, _busy: busy })))
        })
    }
}

/// Answered before its body was read (a missing key, an unknown route, a
/// rate limit): the rest of the body may still be on its way, so the
/// connection cannot carry another request. Saying so in `Connection: close`
/// keeps a pooling client from sending its next request down a socket the
/// server is about to close.
fn close_after(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}
