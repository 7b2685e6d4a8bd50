//! The listening socket ([`listen`]), the accept loop and each
//! connection's time limits.
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
//! A request answered before its body was read (no key, an unknown route, a
//! rate limit) leaves the rest of the body on the socket; hyper then closes
//! the connection, and the answer says `Connection: close` so that a pooling
//! client does not send its next request down it.
//!
//! How: each connection has a [`Clock`] that knows its phase (idle, reading
//! a head, busy with requests). The socket wrapper ([`ActivityIo`]) moves it
//! from idle to head on the first byte; the service wrapper moves it to busy
//! when hyper hands over a request and back to idle when the response body is
//! done. A watchdog per connection sleeps until the phase's deadline.

//!
//! Parts: `clock` (a connection's phase and deadline), `activity` (the socket,
//! request and response body and service wrappers that move the clock),
//! `slots` (open connections per client address).

mod activity;
mod clock;
mod slots;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub use activity::BodyTimeout;
pub use clock::{Clock, Expired};
pub use slots::{ClientSlots, Slot, client_key};

use crate::config::Connections;
use crate::metrics::Metrics;
use activity::{ActivityIo, ConnService};

/// Binds the socket of a server or worker: the host asked for (else the
/// config's), but loopback only while no API key is configured (with a
/// note why); the port asked for, else the config's.
pub async fn listen(
    config: &crate::Config,
    host: Option<String>,
    port: Option<u16>,
    notes: &mut Vec<String>,
) -> Result<TcpListener, crate::ServerError> {
    let requested = host.or_else(|| config.host.clone());
    let host = if config.auth_required() {
        requested.unwrap_or_else(|| "0.0.0.0".into())
    } else {
        let loopback = "127.0.0.1".to_string();
        match requested {
            Some(h) if h != loopback && h != "localhost" => notes.push(format!(
                "no API key is configured, so listening on 127.0.0.1 only (not {h}); \
                 set GLASSBOX_API_KEY or add keys to the config file to listen elsewhere"
            )),
            _ => notes.push(
                "no API key is configured: listening on 127.0.0.1 only, every caller has every scope"
                    .into(),
            ),
        }
        loopback
    };
    let port = port.unwrap_or(config.port);
    let addr = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    TcpListener::bind(&addr)
        .await
        .map_err(|source| crate::ServerError::Bind { addr, source })
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
    glassbox_app::console::serve_line(format_args!("accept failed: {e}"));
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use tokio::time::Instant;

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
