//! The outbound-request policy: every connection a node or a model backend
//! opens goes through a [`Client`] built here, so the rules hold in one
//! place:
//!
//! - **Allowlist on every hop.** An `http` node may only reach the hosts in
//!   its `allow_hosts`; a model backend only the host of its `base_url`.
//!   Redirects are off by default (a 3xx is the answer); with
//!   `max_redirects: N` each `Location` is checked like the first URL.
//! - **Deny list.** Loopback, link-local (169.254.0.0/16 with cloud
//!   metadata, fe80::/10), private (10/8, 172.16/12, 192.168/16,
//!   100.64/10, fc00::/7), unspecified, multicast and reserved addresses
//!   are refused unless explicitly allowed: `allow_hosts` naming the
//!   address itself (`127.0.0.1`) or `localhost`, or a range the server
//!   operator allows ([`ServerAllow`], `[outbound] allow_ranges`).
//! - **Resolve once.** The name is resolved by ureq's resolver wrapped in
//!   [`PolicyResolver`], which checks every address and hands exactly those
//!   to the connector: there is no second lookup to rebind between the
//!   check and the connection. Proxies from the environment are not used.
//! - **No credentials across hosts.** Custom headers and URL userinfo go
//!   only to the origin they were written for; a redirect elsewhere gets
//!   neither.
//! - **No upstream bodies to callers.** [`upstream_error`] builds the
//!   caller-facing error from the host and status only; the body excerpt
//!   goes into the span's admin-only `detail`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use glassbox_engine::{BuildContext, NodeError};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};
use url::Url;

/// The most redirects a node may ask to follow.
pub const MAX_REDIRECTS_LIMIT: u64 = 10;

/// Why an outbound request was refused or failed before an answer.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("`{url}` is not an http(s) URL")]
    BadUrl { url: String },
    #[error(
        "host `{host}` is not in `allow_hosts` (outbound calls are denied by default; add it to `allow_hosts` if this call is intended)"
    )]
    HostNotAllowed { host: String },
    #[error(
        "host `{host}` resolves to {addr}, a {range} address, which outbound calls may not reach (name the address in `allow_hosts`, or allow the range with `[outbound] allow_ranges` in the server config)"
    )]
    AddressDenied {
        host: String,
        addr: IpAddr,
        range: &'static str,
    },
    #[error("`{host}` redirected more than {max} times")]
    TooManyRedirects { host: String, max: u32 },
    #[error("`{host}` answered a redirect without a usable `Location`")]
    BadRedirect { host: String },
    #[error("{host}: {reason}")]
    Transport { host: String, reason: String },
}

impl OutboundError {
    pub fn code(&self) -> &'static str {
        match self {
            OutboundError::BadUrl { .. } => "bad_url",
            OutboundError::HostNotAllowed { .. } => "host_not_allowed",
            OutboundError::AddressDenied { .. } => "address_denied",
            OutboundError::TooManyRedirects { .. } => "too_many_redirects",
            OutboundError::BadRedirect { .. } => "bad_redirect",
            OutboundError::Transport { .. } => "transport",
        }
    }

    /// Policy refusals are not worth retrying; transport failures are.
    pub fn into_node_error(self) -> NodeError {
        match self {
            OutboundError::Transport { .. } => NodeError::Unavailable(self.to_string()),
            OutboundError::TooManyRedirects { .. } | OutboundError::BadRedirect { .. } => {
                NodeError::Unavailable(self.to_string())
            }
            _ => NodeError::Rejected(self.to_string()),
        }
    }
}

/// An IP range, `addr/prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    addr: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// Parses `10.0.0.0/8`, `fd00::/8` or a single address.
    pub fn parse(s: &str) -> Option<IpRange> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (
                a.trim().parse::<IpAddr>().ok()?,
                Some(p.trim().parse().ok()?),
            ),
            None => (s.trim().parse::<IpAddr>().ok()?, None),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(IpRange { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Ranges the server operator allows outbound calls to reach although the
/// deny list covers them (`[outbound] allow_ranges`). Put into the
/// [`BuildContext`]; absent: none.
#[derive(Debug, Clone, Default)]
pub struct ServerAllow {
    pub ranges: Vec<IpRange>,
}

/// Which denied range `ip` is in, if any.
pub fn denied_range(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => denied_v4(v4),
        IpAddr::V6(v6) => denied_v6(v6),
    }
}

fn denied_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    Some(if ip.is_loopback() {
        "loopback"
    } else if ip.is_link_local() {
        "link-local (cloud metadata)"
    } else if ip.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
        "private"
    } else if o[0] == 0 {
        "unspecified"
    } else if ip.is_multicast() || ip.is_broadcast() || o[0] >= 240 {
        "multicast or reserved"
    } else {
        return None;
    })
}

fn denied_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(if ip.is_loopback() {
        "loopback"
    } else if ip.is_unspecified() {
        "unspecified"
    } else if (s[0] & 0xffc0) == 0xfe80 {
        "link-local"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "private"
    } else if ip.is_multicast() {
        "multicast or reserved"
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        // NAT64: the IPv4 address sits in the last 32 bits.
        let v4 = Ipv4Addr::new(
            (s[6] >> 8) as u8,
            (s[6] & 0xff) as u8,
            (s[7] >> 8) as u8,
            (s[7] & 0xff) as u8,
        );
        return denied_v4(v4);
    } else {
        return None;
    })
}

/// Who may be reached, for one node.
#[derive(Debug)]
pub struct Policy {
    /// Hosts named by the topology, lowercased.
    allow_hosts: Vec<String>,
    /// Only `allow_hosts` may be reached (`http`); otherwise any host that
    /// passes the deny list (model backends, whose one host is fixed).
    restrict_hosts: bool,
    server: ServerAllow,
    max_redirects: u32,
}

/// What a [`Client`] is built from.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub allow_hosts: Vec<String>,
    pub restrict_hosts: bool,
    pub max_redirects: u32,
    pub timeout: Duration,
}

impl Policy {
    /// Whether `host` may be named in a request at all.
    pub fn check_host(&self, host: &str) -> Result<(), OutboundError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if self.restrict_hosts && !self.names(host) {
            return Err(OutboundError::HostNotAllowed {
                host: host.to_string(),
            });
        }
        Ok(())
    }

    fn names(&self, host: &str) -> bool {
        self.allow_hosts
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host))
    }

    /// The checks that need no DNS, for build time: the allowlist, and the
    /// deny list for a host written as an address or as `localhost`.
    pub fn check_static(&self, host: &str) -> Result<(), OutboundError> {
        self.check_host(host)?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.check_addr(bare, ip);
        }
        let lower = bare.to_ascii_lowercase();
        if lower == "localhost" || lower.ends_with(".localhost") {
            return self.check_addr(bare, IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        Ok(())
    }

    /// Whether `ip`, which `host` resolved to, may be connected to.
    pub fn check_addr(&self, host: &str, ip: IpAddr) -> Result<(), OutboundError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let Some(range) = denied_range(ip) else {
            return Ok(());
        };
        let ip = ip.to_canonical();
        let named_ip = self.allow_hosts.iter().any(|a| {
            a.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|a| a.to_canonical() == ip)
        });
        let lower = host.to_ascii_lowercase();
        let named_localhost = ip.is_loopback()
            && (lower == "localhost" || lower.ends_with(".localhost"))
            && self.names(host);
        if named_ip || named_localhost || self.server.ranges.iter().any(|r| r.contains(ip)) {
            return Ok(());
        }
        Err(OutboundError::AddressDenied {
            host: host.to_string(),
            addr: ip,
            range,
        })
    }
}

/// ureq's resolver, with every address checked against the policy. The
/// addresses it returns are the ones the connector uses.
#[derive(Debug)]
pub struct PolicyResolver {
    policy: Arc<Policy>,
    inner: DefaultResolver,
}

impl Resolver for PolicyResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = self.inner.resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or_default();
        for a in addrs.iter() {
            if let Err(e) = self.policy.check_addr(host, a.ip()) {
                return Err(ureq::Error::Io(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    e,
                )));
            }
        }
        Ok(addrs)
    }
}

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

/// An HTTP client that obeys the [`Policy`].
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    policy: Arc<Policy>,
}

impl Client {
    pub fn new(options: ClientOptions, cx: Option<&BuildContext>) -> Client {
        let server = cx
            .and_then(|cx| cx.get::<ServerAllow>())
            .map(|s| (*s).clone())
            .unwrap_or_default();
        let policy = Arc::new(Policy {
            allow_hosts: options
                .allow_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            restrict_hosts: options.restrict_hosts,
            server,
            max_redirects: options.max_redirects,
        });
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(options.timeout))
            .http_status_as_error(false)
            // Redirects are followed here, hop by hop, never inside ureq.
            .max_redirects(0)
            .proxy(None)
            .build();
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

/// `url` as it may be shown: userinfo removed.
pub fn display_url(url: &str) -> String {
    glassbox_topology::secret::strip_userinfo(url).into_owned()
}

/// The caller-facing error for an upstream that answered `status`: a short
/// reason naming the host and status; `body` goes to the span's admin-only
/// detail (bounded).
pub fn upstream_error(host: &str, status: u16, body: &str) -> NodeError {
    let excerpt: String = body.chars().take(500).collect();
    NodeError::Upstream {
        message: format!("{host} answered HTTP {status}"),
        detail: format!("HTTP {status} from {host}: {excerpt}"),
        retryable: status >= 500 || status == 429,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], ranges: &[&str]) -> Policy {
        Policy {
            allow_hosts: allow.iter().map(|s| s.to_string()).collect(),
            restrict_hosts: true,
            server: ServerAllow {
                ranges: ranges.iter().map(|r| IpRange::parse(r).unwrap()).collect(),
            },
            max_redirects: 0,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_deny_list_covers_internal_ranges() {
        for (addr, range) in [
            ("127.0.0.1", "loopback"),
            ("169.254.169.254", "link-local (cloud metadata)"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "private"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast or reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fd00:ec2::254", "private"),
            ("::ffff:127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local (cloud metadata)"),
        ] {
            assert_eq!(denied_range(ip(addr)), Some(range), "{addr}");
        }
        for addr in ["93.184.216.34", "172.32.0.1", "2606:4700::1111", "8.8.8.8"] {
            assert_eq!(denied_range(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn denied_addresses_need_an_explicit_allow() {
        let p = policy(&["localhost", "api.example.com", "127.0.0.1"], &[]);
        // Named as an address, or `localhost` resolving to loopback.
        assert!(p.check_addr("127.0.0.1", ip("127.0.0.1")).is_ok());
        assert!(p.check_addr("localhost", ip("::1")).is_ok());
        // A public name that resolves inside is refused (DNS rebinding).
        let e = p.check_addr("api.example.com", ip("10.0.0.7")).unwrap_err();
        assert_eq!(e.code(), "address_denied");
        assert!(e.to_string().contains("allow_ranges"), "{e}");
        assert!(
            p.check_addr("api.example.com", ip("169.254.169.254"))
                .is_err()
        );
        assert!(p.check_addr("api.example.com", ip("93.184.216.34")).is_ok());
        // The operator's ranges.
        let p = policy(&["svc.internal"], &["10.0.0.0/8"]);
        assert!(p.check_addr("svc.internal", ip("10.9.8.7")).is_ok());
        assert!(p.check_addr("svc.internal", ip("192.168.0.1")).is_err());
    }

    #[test]
    fn literal_hosts_are_checked_without_dns() {
        let p = Policy {
            restrict_hosts: false,
            ..policy(&[], &[])
        };
        assert!(p.check_static("api.example.com").is_ok());
        assert!(p.check_static("169.254.169.254").is_err());
        assert!(p.check_static("localhost").is_err());
        assert!(p.check_static("[::1]").is_err());
        let p = Policy {
            restrict_hosts: false,
            ..policy(&["127.0.0.1"], &[])
        };
        assert!(p.check_static("127.0.0.1").is_ok());
    }

    #[test]
    fn hosts_must_be_named_when_restricted() {
        let p = policy(&["LocalHost"], &[]);
        assert!(p.check_host("localhost").is_ok());
        assert_eq!(
            p.check_host("127.0.0.1").unwrap_err().code(),
            "host_not_allowed"
        );
    }

    #[test]
    fn ranges_parse_and_match() {
        let r = IpRange::parse("172.16.0.0/12").unwrap();
        assert!(r.contains(ip("172.20.1.1")));
        assert!(!r.contains(ip("172.32.0.1")));
        assert!(IpRange::parse("::1").unwrap().contains(ip("::1")));
        assert!(IpRange::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert!(IpRange::parse("10.0.0.0/33").is_none());
        assert!(IpRange::parse("nope").is_none());
    }

    #[test]
    fn upstream_bodies_stay_out_of_the_message() {
        let e = upstream_error("llm.example.com", 503, "internal: secret-db-password");
        assert_eq!(
            e.to_string(),
            "unavailable: llm.example.com answered HTTP 503"
        );
        assert!(e.detail().unwrap().contains("secret-db-password"));
        assert!(e.retryable());
    }
}
