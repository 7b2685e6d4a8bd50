//! The accept loop and each connection's time limits.
//!
//! `axum::serve` sets no timeouts: a client that sends its headers one byte
//! at a time, trickles a body, or opens a connection and says nothing holds
//! that connection (and a file descriptor) for as long as it likes. This
//! module drives hyper's HTTP/1 connections itself so that every connection
//! is bounded ([`Connections`] in the config):
//!
//! - **headers**: from the first byte of a request to the end of its
//!   headers (`header_timeout_ms`); over it the connection is closed;
//! - **body**: from the end of the headers to the body's last byte
//!   (`body_timeout_ms`), counted as a total, so a body trickled one byte at
//!   a time cannot reset it; over it the request is answered 408
//!   `body_timeout` and the connection closed;
//! - **idle**: a keep-alive connection waiting for its next request
//!   (`idle_timeout_ms`); over it the connection is closed;
//! - **per client**: at most `max_per_client` open connections per client
//!   (an IPv4 address, or an IPv6 /64); more are answered 429
//!   `too_many_connections` and closed.
//!
//! A request being handled (a model generating, a stream open) is never cut
//! by these: only the time a *client* takes to send is bounded.
//!
//! How: each connection has a [`Clock`] that knows its phase (idle, reading
//! a head, busy with requests). The socket wrapper ([`ActivityIo`]) moves it
//! from idle to head on the first byte; the service wrapper moves it to busy
//! when hyper hands over a request and back to idle when the response body is
//! done. A watchdog per connection sleeps until the phase's deadline.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt as _;

use crate::config::Connections;
use crate::metrics::Metrics;

/// What a connection is doing, and since when.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for the first byte of a request.
    Idle { since: Instant },
    /// Reading a request's head (its first byte came at `since`).
    Head { since: Instant },
    /// Requests handed to the router whose responses are not done.
    Busy { requests: usize },
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    Header,
    Idle,
}

/// One connection's phase and deadlines.
#[derive(Debug)]
pub struct Clock {
    phase: Mutex<Phase>,
    changed: Notify,
    header: Duration,
    idle: Duration,
}

impl Clock {
    fn new(limits: &Connections) -> Clock {
        Clock {
            phase: Mutex::new(Phase::Idle {
                since: Instant::now(),
            }),
            changed: Notify::new(),
            header: limits.header_timeout(),
            idle: limits.idle_timeout(),
        }
    }

    fn update(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        *phase = f(*phase);
        drop(phase);
        self.changed.notify_one();
    }

    /// Bytes arrived: an idle connection starts reading a head.
    fn on_bytes(&self) {
        let idle = matches!(
            *self.phase.lock().unwrap_or_else(PoisonError::into_inner),
            Phase::Idle { .. }
        );
        if idle {
            self.update(|p| match p {
                Phase::Idle { .. } => Phase::Head {
                    since: Instant::now(),
                },
                other => other,
            });
        }
    }

    fn request_started(self: &Arc<Self>) -> Busy {
        self.update(|p| match p {
            Phase::Busy { requests } => Phase::Busy {
                requests: requests + 1,
            },
            _ => Phase::Busy { requests: 1 },
        });
        Busy(self.clone())
    }

    fn request_finished(&self) {
        self.update(|p| match p {
            Phase::Busy { requests } if requests > 1 => Phase::Busy {
                requests: requests - 1,
            },
            _ => Phase::Idle {
                since: Instant::now(),
            },
        });
    }

    fn deadline(&self) -> Option<(Instant, Expired)> {
        match *self.phase.lock().unwrap_or_else(PoisonError::into_inner) {
            Phase::Idle { since } => Some((since + self.idle, Expired::Idle)),
            Phase::Head { since } => Some((since + self.header, Expired::Header)),
            Phase::Busy { .. } => None,
        }
    }

    /// Resolves when the current phase outlives its limit.
    pub async fn expired(&self) -> Expired {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.deadline() {
                None => changed.await,
                Some((at, why)) if at <= Instant::now() => return why,
                Some((at, _)) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = changed => {}
                    }
                }
            }
        }
    }
}

/// Marks a request as in progress until dropped (with its response body).
#[derive(Debug)]
struct Busy(Arc<Clock>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// The socket, telling the clock when bytes arrive.
struct ActivityIo {
    inner: TcpStream,
    clock: Arc<Clock>,
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

/// A request body that fails once `deadline` has passed.
struct DeadlineBody {
    inner: Incoming,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
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
struct ConnService {
    router: Router,
    clock: Arc<Clock>,
    body_timeout: Duration,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = self.clock.request_started();
        let limit = self.body_timeout;
        let req: Request = req.map(|inner| {
            Body::new(DeadlineBody {
                inner,
                sleep: Box::pin(tokio::time::sleep(limit)),
                limit,
            })
        });
        let router = self.router.clone();
        Box::pin(async move {
            let response = match router.oneshot(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok(response.map(|inner| Body::new(BusyBody { inner, _busy: busy })))
        })
    }
}

/// Open connections per client address.
#[derive(Debug, Default)]
pub struct ClientSlots {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One open connection, counted until dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<ClientSlots>,
    ip: IpAddr,
}

/// The key a client's connections are counted under: its IPv4 address
/// (IPv4-mapped IPv6 included), or the /64 of its IPv6 address. One IPv6
/// host is normally given a whole /64 and may pick any address in it, so
/// counting exact addresses would leave it uncapped.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::from(u64::MAX)))),
        v4 => v4,
    }
}

impl ClientSlots {
    /// A slot for `ip`'s client (see [`client_key`]), unless it already
    /// has `max` connections open.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<Slot> {
        let ip = client_key(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self.clone(),
            ip,
        })
    }

    /// Open connections from `ip`.
    pub fn count(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&client_key(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting and waits for open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Connections,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let slots = Arc::new(ClientSlots::default());
    // Connections watch `stop` for the shutdown; each holds a `done` receiver
    // and the loop waits until all are dropped.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(v) => v,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(slot) = slots.acquire(remote.ip(), limits.max_per_client) else {
            metrics.rejected("-", "too_many_connections");
            tokio::spawn(refuse(stream, remote, limits.max_per_client));
            continue;
        };
        tokio::spawn(connection(
            stream,
            router.clone(),
            limits,
            metrics.clone(),
            stop_rx.clone(),
            (slot, done_rx.clone()),
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    drop(done_rx);
    done_tx.closed().await;
}

/// One connection, until it ends, times out or the server stops.
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: Connections,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
    held: (Slot, watch::Receiver<()>),
) {
    let clock = Arc::new(Clock::new(&limits));
    let io = TokioIo::new(ActivityIo {
        inner: stream,
        clock: clock.clone(),
    });
    let service = ConnService {
        router,
        clock: clock.clone(),
        body_timeout: limits.body_timeout(),
    };
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            changed = stop.changed(), if !stopping => {
                // A closed channel means the server is gone: stop as well.
                stopping = changed.is_err() || *stop.borrow();
                if stopping {
                    conn.as_mut().graceful_shutdown();
                }
            }
            why = clock.expired() => {
                if why == Expired::Header {
                    metrics.rejected("-", "header_timeout");
                }
                // Dropping the connection closes the socket.
                break;
            }
        }
    }
    drop(held);
}

/// Over the per-client cap: a short 429 and close, never a hang.
async fn refuse(mut stream: TcpStream, remote: SocketAddr, max: usize) {
    let body = crate::error::ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "too_many_connections",
        format!(
            "{} already has {max} connections open to this server{}",
            remote.ip().to_canonical(),
            if remote.ip().to_canonical().is_ipv6() {
                format!(" (counted per /64: {}/64)", client_key(remote.ip()))
            } else {
                String::new()
            }
        ),
    )
    .hint("reuse connections (keep-alive) or close idle ones; the cap is `connections.max_per_client` in the server config")
    .body();
    let body = serde_json::to_string(&body).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Like hyper 0.14's server: per-connection errors are the client's; others
/// (out of file descriptors) are logged and retried after a pause.
async fn accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    eprintln!("glassbox serve: accept failed: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_address_and_freed_on_drop() {
        let slots = Arc::new(ClientSlots::default());
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = slots.acquire(a, 2).unwrap();
        let _second = slots.acquire(mapped, 2).unwrap();
        assert!(
            slots.acquire(a, 2).is_none(),
            "v4-mapped v6 is the same client"
        );
        assert!(
            slots.acquire(b, 2).is_some(),
            "other clients are not affected"
        );
        drop(first);
        assert_eq!(slots.count(a), 1);
        assert!(slots.acquire(a, 2).is_some());
    }

    /// Issue 33 (F8): one /64 is one IPv6 client (a host gets a whole /64
    /// and can use any address in it), so it shares one cap.
    #[test]
    fn ipv6_clients_are_capped_per_64() {
        let slots = Arc::new(ClientSlots::default());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let _a = slots.acquire(ip("2001:db8:1:2::1"), 2).unwrap();
        let _b = slots.acquire(ip("2001:db8:1:2:ffff::9"), 2).unwrap();
        assert!(
            slots.acquire(ip("2001:db8:1:2:dead:beef:0:1"), 2).is_none(),
            "a third address in the same /64 is over the cap"
        );
        assert_eq!(slots.count(ip("2001:db8:1:2::77")), 2);
        assert!(
            slots.acquire(ip("2001:db8:1:3::1"), 2).is_some(),
            "the next /64 is another client"
        );
        // IPv4 stays per address.
        let _c = slots.acquire(ip("192.0.2.1"), 1).unwrap();
        assert!(slots.acquire(ip("192.0.2.2"), 1).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_bounds_idle_and_head_but_not_busy() {
        let limits = Connections {
            header_timeout_ms: 1_000,
            idle_timeout_ms: 5_000,
            ..Connections::default()
        };
        let clock = Arc::new(Clock::new(&limits));
        let start = Instant::now();
        assert_eq!(clock.expired().await, Expired::Idle);
        assert_eq!(start.elapsed(), Duration::from_secs(5));

        let clock = Arc::new(Clock::new(&limits));
        clock.on_bytes();
        let start = Instant::now();
        assert_eq!(clock.expired().await, Expired::Header);
        assert_eq!(start.elapsed(), Duration::from_secs(1));

        let clock = Arc::new(Clock::new(&limits));
        let busy = clock.request_started();
        let watch = tokio::spawn({
            let clock = clock.clone();
            async move { clock.expired().await }
        });
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        assert!(!watch.is_finished(), "a busy connection has no deadline");
        drop(busy);
        let start = Instant::now();
        assert_eq!(watch.await.unwrap(), Expired::Idle);
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }
}
