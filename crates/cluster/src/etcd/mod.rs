//! Membership in etcd: a worker's [`Registration`] (its record and load
//! under a lease it keeps alive) and a coordinator's [`watch`] (a [`Pool`]
//! kept in step with what etcd holds).
//!
//! Why etcd and nothing home-made (docs/adr/0007-etcd-membership.md): a
//! lease with a TTL is the heartbeat (a worker that stops refreshing it
//! vanishes with its keys), and a watch from a revision gives every
//! coordinator the same ordered view, across a multi-member etcd cluster.
//!
//! Both run on a thread of their own with a small single-threaded tokio
//! runtime, so callers need no runtime, and a busy server runtime never
//! delays a keep-alive. Dropping the handle stops them (a registration
//! revokes its lease on the way out, so the worker leaves at once).
//!
//! [`Pool`]: crate::Pool

mod register;
mod watch;

use std::time::Duration;

pub use register::{Registration, RegistrationEvent, RegistrationOptions};
pub use watch::{Watch, WatchEvent, watch};

use crate::member::DEFAULT_PREFIX;

/// Where etcd is and where Glassbox's keys live in it.
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdOptions {
    /// Client URLs of the etcd members (`http://10.0.0.5:2379`); requests
    /// are balanced over them, so one member down is survived.
    pub endpoints: Vec<String>,
    /// Key prefix, [`DEFAULT_PREFIX`] unless told otherwise.
    pub prefix: String,
    /// How long one request to etcd may take before it counts as failed.
    pub timeout: Duration,
}

impl EtcdOptions {
    pub fn new(endpoints: Vec<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: Duration::from_secs(3),
        }
    }

    /// Comma-separated endpoints (`--etcd`, `--cluster`), each checked:
    /// `http://HOST:PORT`, or `HOST:PORT` (taken as `http://`).
    pub fn parse_endpoints(list: &str) -> Result<Vec<String>, EtcdError> {
        let mut out = Vec::new();
        for raw in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            out.push(check_endpoint(raw)?);
        }
        if out.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        Ok(out)
    }

    /// The endpoints as one string, for messages.
    pub fn endpoints_text(&self) -> String {
        self.endpoints.join(",")
    }

    /// The prefix without a trailing `/`, so keys join as `{prefix}/workers/…`.
    pub(crate) fn clean_prefix(&self) -> String {
        let p = self.prefix.trim_end_matches('/');
        if p.starts_with('/') || p.is_empty() {
            p.to_owned()
        } else {
            format!("/{p}")
        }
    }
}

fn check_endpoint(raw: &str) -> Result<String, EtcdError> {
    let bad = |reason: &str| EtcdError::BadEndpoint {
        endpoint: raw.to_owned(),
        reason: reason.to_owned(),
    };
    if raw.starts_with("https://") {
        return Err(bad(
            "TLS to etcd is not built in; reach etcd over `http://` on a private network",
        ));
    }
    let rest = match raw.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => return Err(bad(&format!("scheme `{scheme}` is not `http`"))),
        None => raw,
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        return Err(bad("an endpoint has no path"));
    }
    let port = authority
        .rsplit_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty());
    match port {
        None => Err(bad("no port (etcd's client port is usually 2379)")),
        Some(p) if p.parse::<u16>().is_err() => Err(bad(&format!("`{p}` is not a port"))),
        Some(_) => Ok(format!("http://{authority}")),
    }
}

/// What went wrong talking to etcd.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EtcdError {
    #[error(
        "no etcd endpoint given (give one or more client URLs, comma-separated: `http://127.0.0.1:2379`)"
    )]
    NoEndpoints,
    #[error("etcd endpoint `{endpoint}` is not usable: {reason} (write it as `http://HOST:PORT`)")]
    BadEndpoint { endpoint: String, reason: String },
    #[error(
        "etcd at {endpoints} did not answer `{op}`: {reason} (is etcd running and reachable there? `curl ENDPOINT/health` should say true; scripts/install-etcd.sh installs it)"
    )]
    Unavailable {
        endpoints: String,
        op: &'static str,
        reason: String,
    },
    #[error("could not start the etcd client thread: {reason}")]
    Thread { reason: String },
}

impl EtcdError {
    /// A stable machine code, for logs and API errors.
    pub fn code(&self) -> &'static str {
        match self {
            EtcdError::NoEndpoints => "etcd_no_endpoints",
            EtcdError::BadEndpoint { .. } => "etcd_bad_endpoint",
            EtcdError::Unavailable { .. } => "etcd_unavailable",
            EtcdError::Thread { .. } => "etcd_thread",
        }
    }

    /// Whether the cause was the command line (not the network).
    pub fn is_usage(&self) -> bool {
        matches!(self, EtcdError::NoEndpoints | EtcdError::BadEndpoint { .. })
    }
}

/// Runs `call` with the options' timeout, naming the endpoints and the
/// operation on failure.
pub(crate) async fn timed<T, F>(
    options: &EtcdOptions,
    op: &'static str,
    call: F,
) -> Result<T, EtcdError>
where
    F: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let unavailable = |reason: String| EtcdError::Unavailable {
        endpoints: options.endpoints_text(),
        op,
        reason,
    };
    match tokio::time::timeout(options.timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(unavailable(e.to_string())),
        Err(_) => Err(unavailable(format!(
            "no answer within {} ms",
            options.timeout.as_millis()
        ))),
    }
}

/// A client balanced over the endpoints that answer now.
///
/// Each endpoint is asked for its status first (all at once, within the
/// options' timeout), and only those that answer go into the client: a
/// balanced client over a dead member keeps sending some requests to it,
/// and those fail with "connection refused". Callers reconnect after an
/// error, so a member that dies later is dropped on the next failure.
pub(crate) async fn connect(options: &EtcdOptions) -> Result<etcd_client::Client, EtcdError> {
    if options.endpoints.is_empty() {
        return Err(EtcdError::NoEndpoints);
    }
    let mut probes = tokio::task::JoinSet::new();
    for (i, endpoint) in options.endpoints.iter().enumerate() {
        let options = options.clone();
        let endpoint = endpoint.clone();
        probes.spawn(async move {
            let answered = async {
                let mut client = client_for(&options, std::slice::from_ref(&endpoint)).await?;
                let status = timed(&options, "status", client.status()).await?;
                if status.leader() == 0 {
                    // Cut off from the quorum: it would refuse every write.
                    return Err(EtcdError::Unavailable {
                        endpoints: endpoint.clone(),
                        op: "status",
                        reason: "this member knows no leader".into(),
                    });
                }
                Ok(())
            };
            (i, answered.await)
        });
    }
    let mut live = Vec::new();
    let mut last_error = None;
    while let Some(joined) = probes.join_next().await {
        match joined {
            Ok((i, Ok(_))) => live.push(i),
            Ok((_, Err(e))) => last_error = Some(e),
            Err(e) => {
                last_error = Some(EtcdError::Thread {
                    reason: e.to_string(),
                })
            }
        }
    }
    if live.is_empty() {
        return Err(last_error.unwrap_or(EtcdError::NoEndpoints));
    }
    live.sort_unstable();
    let endpoints: Vec<String> = live
        .into_iter()
        .map(|i| options.endpoints[i].clone())
        .collect();
    client_for(options, &endpoints).await
}

/// A client over exactly `endpoints` (connecting is lazy).
async fn client_for(
    options: &EtcdOptions,
    endpoints: &[String],
) -> Result<etcd_client::Client, EtcdError> {
    let connect = etcd_client::ConnectOptions::new()
        .with_connect_timeout(options.timeout)
        // HTTP/2 pings find a member that vanished without closing its
        // connections (a partition), so streams on it fail over.
        .with_keep_alive(Duration::from_secs(2), options.timeout)
        .with_keep_alive_while_idle(true)
        // A member cut off from the quorum refuses rather than answers stale.
        .with_require_leader(true);
    timed(
        options,
        "connect",
        etcd_client::Client::connect(endpoints, Some(connect)),
    )
    .await
}

/// A small single-threaded runtime for one background thread.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, EtcdError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EtcdError::Thread {
            reason: e.to_string(),
        })
}

/// Waits between reconnection attempts: 100 ms, doubling to 2 s.
#[derive(Debug)]
pub(crate) struct Backoff(Duration);

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff(Duration::from_millis(100))
    }

    pub(crate) fn reset(&mut self) {
        self.0 = Duration::from_millis(100);
    }

    pub(crate) fn next(&mut self) -> Duration {
        let now = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(2));
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked_and_normalised() {
        assert_eq!(
            EtcdOptions::parse_endpoints("http://127.0.0.1:2379, 10.0.0.5:2379,").unwrap(),
            vec!["http://127.0.0.1:2379", "http://10.0.0.5:2379"]
        );
        assert_eq!(
            EtcdOptions::parse_endpoints(" , ").unwrap_err(),
            EtcdError::NoEndpoints
        );
        for (bad, why) in [
            ("https://e:2379", "TLS"),
            ("grpc://e:2379", "scheme `grpc`"),
            ("http://e", "no port"),
            ("e:twenty", "`twenty` is not a port"),
            ("http://e:2379/v3", "no path"),
        ] {
            let err = EtcdOptions::parse_endpoints(bad).unwrap_err();
            assert_eq!(err.code(), "etcd_bad_endpoint");
            assert!(err.to_string().contains(why), "{bad}: {err}");
            assert!(err.to_string().contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn prefixes_join_without_double_slashes() {
        let mut o = EtcdOptions::new(vec![]);
        assert_eq!(o.clean_prefix(), "/glassbox");
        o.prefix = "team-a/".into();
        assert_eq!(o.clean_prefix(), "/team-a");
    }

    #[test]
    fn backoff_doubles_up_to_two_seconds() {
        let mut b = Backoff::new();
        let waits: Vec<u128> = (0..7).map(|_| b.next().as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 400, 800, 1600, 2000, 2000]);
        b.reset();
        assert_eq!(b.next().as_millis(), 100);
    }
}
