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
//!   operator allows ([`ServerAllow`], `[outbound] allow_ranges`). A
//!   cluster worker's client ([`Client::for_worker`]) reaches exactly its
//!   worker's host, private or not: the pool is the allowlist.
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

//!
//! [`policy`] holds who may be reached, [`client`] how requests are sent.

use std::net::IpAddr;

use glassbox_engine::NodeError;

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

/// The host part of an http(s) URL (`None` for any other scheme): what a
/// node's URL is checked against the outbound policy by.
pub fn url_host(url: &str) -> Option<&str> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return None;
    }
    glassbox_topology::secret_access::url_host(url)
}

pub mod client;
pub mod policy;

pub use client::{Answer, Client, Request, WorkerTimeouts};
pub use policy::{ClientOptions, IpRange, Policy, PolicyResolver, ServerAllow, denied_range};

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
mod tests;
