//! Who an outbound request may reach: the deny list of internal address
//! ranges, the ranges a server operator allows, the per-node [`Policy`]
//! and the resolver that checks every address it returns.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use super::OutboundError;

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
    pub(super) allow_hosts: Vec<String>,
    /// Only `allow_hosts` may be reached (`http`); otherwise any host that
    /// passes the deny list (model backends, whose one host is fixed).
    pub(super) restrict_hosts: bool,
    pub(super) server: ServerAllow,
    pub(super) max_redirects: u32,
    /// The one allowed host is a worker of the cluster pool (the
    /// operator's own membership, registered in etcd): whatever address it
    /// resolves to may be reached, private and loopback ones included.
    /// Only [`Client::for_worker`](super::Client::for_worker) sets it, for
    /// exactly that member's host; every other host stays refused.
    pub(super) pool_member: bool,
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
        if self.pool_member && self.names(host) {
            return Ok(());
        }
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
    pub(super) policy: Arc<Policy>,
    pub(super) inner: DefaultResolver,
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
