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
pub mod trust;
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
    /// TLS and user for the connection (none: plain `http://`, no user).
    pub auth: trust::EtcdAuth,
    /// Which worker records are accepted, and the key records are signed with.
    pub trust: trust::Trust,
}

impl EtcdOptions {
    pub fn new(endpoints: Vec<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: Duration::from_secs(3),
            auth: trust::EtcdAuth::default(),
            trust: trust::Trust::default(),
        }
    }

    /// These options with what the environment says about trust, as
    /// `glassbox serve --cluster` and `glassbox worker` read it: the pool
    /// key (`GLASSBOX_WORKER_KEY`), the worker-address allow-list
    /// (`GLASSBOX_WORKER_ALLOW`), and TLS and a user for etcd
    /// (`GLASSBOX_ETCD_TLS_DIR` with `ca.crt`, `tls.crt`, `tls.key`, or
    /// `GLASSBOX_ETCD_CA`, `GLASSBOX_ETCD_CERT`, `GLASSBOX_ETCD_KEY`,
    /// `GLASSBOX_ETCD_USER`, `GLASSBOX_ETCD_PASSWORD` or
    /// `GLASSBOX_ETCD_PASSWORD_FILE`). `https://` endpoints need the CA.
    pub fn with_env(mut self) -> Result<EtcdOptions, EtcdError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let bad = |variable: &str, reason: String| EtcdError::BadSetting {
            variable: variable.to_owned(),
            reason,
        };
        if let Some(key) = var(trust::WORKER_KEY_ENV) {
            self.trust.key = Some(trust::PoolKey::new(key.as_bytes()));
        }
        if let Some(list) = var(trust::WORKER_ALLOW_ENV) {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let rule = trust::AddressRule::parse(entry).ok_or_else(|| {
                    bad(
                        trust::WORKER_ALLOW_ENV,
                        format!(
                            "`{entry}` is not an address, a network (`10.0.0.0/8`) or a host name"
                        ),
                    )
                })?;
                self.trust.allow.push(rule);
            }
        }
        // A directory laid out like a Kubernetes TLS Secret (ca.crt,
        // tls.crt, tls.key), then single files, which take precedence.
        if let Some(dir) = var("GLASSBOX_ETCD_TLS_DIR") {
            let dir = std::path::PathBuf::from(dir);
            let ca = dir.join("ca.crt");
            if !ca.is_file() {
                return Err(bad(
                    "GLASSBOX_ETCD_TLS_DIR",
                    format!("`{}` has no `ca.crt`", dir.display()),
                ));
            }
            self.auth.ca = Some(ca);
            let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
            if cert.is_file() && key.is_file() {
                self.auth.cert = Some(cert);
                self.auth.key = Some(key);
            }
        }
        if let Some(ca) = var("GLASSBOX_ETCD_CA") {
            self.auth.ca = Some(ca.into());
        }
        if let Some(cert) = var("GLASSBOX_ETCD_CERT") {
            self.auth.cert = Some(cert.into());
        }
        if let Some(key) = var("GLASSBOX_ETCD_KEY") {
            self.auth.key = Some(key.into());
        }
        if self.auth.cert.is_some() != self.auth.key.is_some() {
            return Err(bad(
                "GLASSBOX_ETCD_CERT",
                "a client certificate needs its key and a key its certificate (set both GLASSBOX_ETCD_CERT and GLASSBOX_ETCD_KEY)".into(),
            ));
        }
        let password = match (
            var("GLASSBOX_ETCD_PASSWORD"),
            var("GLASSBOX_ETCD_PASSWORD_FILE"),
        ) {
            (Some(p), _) => Some(p),
            (None, Some(path)) => Some(
                std::fs::read_to_string(&path)
                    .map_err(|e| bad("GLASSBOX_ETCD_PASSWORD_FILE", format!("`{path}`: {e}")))?
                    .trim_end_matches(['\n', '\r'])
                    .to_owned(),
            ),
            (None, None) => None,
        };
        if let Some(user) = var("GLASSBOX_ETCD_USER") {
            let password = password.ok_or_else(|| {
                bad(
                    "GLASSBOX_ETCD_USER",
                    "a user needs GLASSBOX_ETCD_PASSWORD or GLASSBOX_ETCD_PASSWORD_FILE".into(),
                )
            })?;
            self.auth.user = Some((user, password));
        }
        let tls = self.auth.ca.is_some();
        for e in &mut self.endpoints {
            if tls && e.starts_with("http://") {
                *e = e.replacen("http://", "https://", 1);
            } else if !tls && e.starts_with("https://") {
                return Err(bad(
                    "GLASSBOX_ETCD_CA",
                    format!(
                        "endpoint `{e}` is `https://` but no CA is given to check etcd's certificate"
                    ),
                ));
            }
        }
        Ok(self)
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
    let (scheme, rest) = match raw.split_once("://") {
        Some((scheme @ ("http" | "https"), rest)) => (scheme, rest),
        Some((scheme, _)) => {
            return Err(bad(&format!("scheme `{scheme}` is not `http` or `https`")));
        }
        None => ("http", raw),
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
        Some(_) => Ok(format!("{scheme}://{authority}")),
    }
}

/// What went wrong talking to etcd.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EtcdError {
    #[error(
        "no etcd endpoint given (give one or more client URLs, comma-separated: `http://127.0.0.1:2379`)"
    )]
    NoEndpoints,
    #[error(
        "etcd endpoint `{endpoint}` is not usable: {reason} (write it as `http://HOST:PORT`, or `https://HOST:PORT` with GLASSBOX_ETCD_CA)"
    )]
    BadEndpoint { endpoint: String, reason: String },
    #[error("`{variable}`: {reason} (docs/cluster.md, \"Securing the cluster\")")]
    BadSetting { variable: String, reason: String },
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
            EtcdError::BadSetting { .. } => "etcd_bad_setting",
            EtcdError::Unavailable { .. } => "etcd_unavailable",
            EtcdError::Thread { .. } => "etcd_thread",
        }
    }

    /// Whether the cause was the command line (not the network).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            EtcdError::NoEndpoints | EtcdError::BadEndpoint { .. } | EtcdError::BadSetting { .. }
        )
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
    let connect = with_auth(connect, &options.auth)?;
    timed(
        options,
        "connect",
        etcd_client::Client::connect(endpoints, Some(connect)),
    )
    .await
}

/// The connection's TLS (CA, client identity) and etcd user.
fn with_auth(
    mut connect: etcd_client::ConnectOptions,
    auth: &trust::EtcdAuth,
) -> Result<etcd_client::ConnectOptions, EtcdError> {
    let read = |variable: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| EtcdError::BadSetting {
            variable: variable.to_owned(),
            reason: format!("cannot read `{}`: {e}", path.display()),
        })
    };
    if let Some(ca) = &auth.ca {
        let mut tls = etcd_client::TlsOptions::new().ca_certificate(
            etcd_client::Certificate::from_pem(read("GLASSBOX_ETCD_CA", ca)?),
        );
        if let (Some(cert), Some(key)) = (&auth.cert, &auth.key) {
            tls = tls.identity(etcd_client::Identity::from_pem(
                read("GLASSBOX_ETCD_CERT", cert)?,
                read("GLASSBOX_ETCD_KEY", key)?,
            ));
        }
        connect = connect.with_tls(tls);
    }
    if let Some((user, password)) = &auth.user {
        connect = connect.with_user(user.clone(), password.clone());
    }
    Ok(connect)
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
        assert_eq!(
            EtcdOptions::parse_endpoints("https://e:2379").unwrap(),
            vec!["https://e:2379"]
        );
        for (bad, why) in [
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
