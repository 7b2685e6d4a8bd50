//! The [`Client`]: one ureq agent per node, with the [`Policy`] checked on
//! every hop and headers kept to their origin.

use std::sync::Arc;
use std::time::Duration;

use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::DefaultConnector;
use url::Url;

use super::policy::{ClientOptions, Policy, PolicyResolver, ServerAllow};
use super::{OutboundError, display_url};

/// One request to send.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// Sent to the request's origin only, never to a redirect elsewhere.
    pub headers: &'a [(String, String)],
    /// A JSON body (`content-type: application/json`).
    pub body: Option<&'a [u8]>,
}

/// An answer, after any redirects.
#[derive(Debug)]
pub struct Answer {
    pub response: ureq::http::Response<ureq::Body>,
    /// The host that answered (the last hop).
    pub host: String,
    /// Every host visited, first to last, when there were redirects.
    pub hops: Vec<String>,
}

/// How long a call to a cluster worker may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerTimeouts {
    /// The longest silence: to connect, to the first byte, between two
    /// reads. A worker silent this long is taken as hung.
    pub silence: Duration,
    /// The whole call.
    pub total: Duration,
}

impl Default for WorkerTimeouts {
    fn default() -> Self {
        WorkerTimeouts {
            silence: Duration::from_secs(10),
            total: Duration::from_secs(600),
        }
    }
}

/// An HTTP client that obeys the [`Policy`].
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    policy: Arc<Policy>,
}

impl Client {
    /// A client for a node, under the operator's allowances (`server`;
    /// none: no ranges, default secrets).
    pub fn new(options: ClientOptions, server: Option<&ServerAllow>) -> Client {
        let server = server.cloned().unwrap_or_default();
        let policy = Arc::new(Policy {
            allow_hosts: options
                .allow_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            restrict_hosts: options.restrict_hosts,
            server,
            max_redirects: options.max_redirects,
            pool_member: false,
        });
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(options.timeout))
            .http_status_as_error(false)
            // Redirects are followed here, hop by hop, never inside ureq.
            .max_redirects(0)
            .proxy(None)
            .build();
        Client::with_policy(config, policy)
    }

    /// A client for one worker of the cluster pool: it reaches `host` (the
    /// host of the worker's registered address), whatever address that
    /// resolves to, and nothing else; no redirects, no proxy. The pool is
    /// the allowlist: workers are the operator's own members, so their
    /// private addresses are allowed one by one, not by opening a range.
    pub fn for_worker(host: &str, timeouts: WorkerTimeouts) -> Client {
        let policy = Arc::new(Policy {
            allow_hosts: vec![
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_ascii_lowercase(),
            ],
            restrict_hosts: true,
            server: ServerAllow::default(),
            max_redirects: 0,
            pool_member: true,
        });
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeouts.total))
            .timeout_connect(Some(timeouts.silence))
            .timeout_per_read(Some(timeouts.silence))
            .timeout_per_write(Some(timeouts.silence))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .build();
        Client::with_policy(config, policy)
    }

    /// An agent with `config` whose every connection resolves through `policy`.
    fn with_policy(config: ureq::config::Config, policy: Arc<Policy>) -> Client {
        let agent = ureq::Agent::with_parts(
            config,
            DefaultConnector::default(),
            PolicyResolver {
                policy: policy.clone(),
                inner: DefaultResolver::default(),
            },
        );
        Client { agent, policy }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Sends `request`, following redirects only as the policy allows.
    pub fn send(&self, request: Request<'_>) -> Result<Answer, OutboundError> {
        let first = Url::parse(request.url).map_err(|_| OutboundError::BadUrl {
            url: display_url(request.url),
        })?;
        let mut url = first.clone();
        let mut method = request.method.to_ascii_uppercase();
        let mut body = request.body;
        let mut hops = Vec::new();
        loop {
            let host = host_of(&url).ok_or_else(|| OutboundError::BadUrl {
                url: display_url(url.as_str()),
            })?;
            self.policy.check_host(&host)?;
            hops.push(host.clone());
            let same_origin = url.origin() == first.origin();
            // Messages name the authority without userinfo (`host:port`).
            let authority = match url.port() {
                Some(port) if host.contains(':') => format!("[{host}]:{port}"),
                Some(port) => format!("{host}:{port}"),
                None => host.clone(),
            };
            let response = self.once(
                &method,
                &url,
                same_origin,
                request.headers,
                body,
                &authority,
            )?;
            let status = response.status().as_u16();
            let redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
            if !redirect || self.policy.max_redirects == 0 {
                return Ok(Answer {
                    response,
                    host,
                    hops: if hops.len() > 1 { hops } else { Vec::new() },
                });
            }
            if hops.len() > self.policy.max_redirects as usize {
                return Err(OutboundError::TooManyRedirects {
                    host,
                    max: self.policy.max_redirects,
                });
            }
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| OutboundError::BadRedirect { host: host.clone() })?;
            let mut next = url
                .join(location)
                .map_err(|_| OutboundError::BadRedirect { host: host.clone() })?;
            if !matches!(next.scheme(), "http" | "https") {
                return Err(OutboundError::BadRedirect { host });
            }
            // Userinfo in a `Location` is never used; the original's only
            // goes back to its own origin.
            let _ = next.set_username("");
            let _ = next.set_password(None);
            if next.origin() == first.origin() {
                let _ = next.set_username(first.username());
                let _ = next.set_password(first.password());
            }
            if status == 303 || (matches!(status, 301 | 302) && method == "POST") {
                method = "GET".into();
                body = None;
            }
            url = next;
        }
    }

    fn once(
        &self,
        method: &str,
        url: &Url,
        same_origin: bool,
        headers: &[(String, String)],
        body: Option<&[u8]>,
        host: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, OutboundError> {
        let transport = |e: ureq::Error| transport_error(host, e);
        let mut builder = ureq::http::Request::builder()
            .method(method)
            .uri(url.as_str());
        if same_origin {
            for (k, v) in headers {
                builder = builder.header(k.as_str(), v.as_str());
            }
        }
        let result = match body {
            Some(bytes) => {
                let req = builder
                    .header("content-type", "application/json")
                    .body(bytes.to_vec())
                    .map_err(|e| OutboundError::Transport {
                        host: host.to_string(),
                        reason: format!("the request cannot be built: {e}"),
                    })?;
                self.agent.run(req)
            }
            None => {
                let req = builder.body(()).map_err(|e| OutboundError::Transport {
                    host: host.to_string(),
                    reason: format!("the request cannot be built: {e}"),
                })?;
                self.agent.run(req)
            }
        };
        result.map_err(transport)
    }
}

fn transport_error(host: &str, e: ureq::Error) -> OutboundError {
    if let ureq::Error::Io(io) = &e
        && let Some(policy) = io.get_ref().and_then(|i| i.downcast_ref::<OutboundError>())
    {
        return match policy {
            OutboundError::AddressDenied { host, addr, range } => OutboundError::AddressDenied {
                host: host.clone(),
                addr: *addr,
                range,
            },
            other => OutboundError::Transport {
                host: host.to_string(),
                reason: other.to_string(),
            },
        };
    }
    OutboundError::Transport {
        host: host.to_string(),
        reason: glassbox_topology::secret::mask_text(&e.to_string()).into_owned(),
    }
}

/// The host of `url` (IPv6 without brackets), lowercased.
fn host_of(url: &Url) -> Option<String> {
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    Some(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}
