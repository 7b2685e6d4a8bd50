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

/// An IP range, `addr/prefix`: one type for the outbound policy and the
/// cluster's worker allow-list.
pub use glassbox_cluster::IpRange;

/// What the server operator allows nodes: ranges outbound calls may reach
/// although the deny list covers them (`[outbound] allow_ranges`), and the
/// secrets references may read and where they may be sent (`[secrets]`).
/// Given to a build as `Resources::outbound`; absent: no ranges, default
/// secrets.
#[derive(Debug, Clone, Default)]
pub struct ServerAllow {
    pub ranges: Vec<IpRange>,
    pub secrets: glassbox_topology::secret_access::SecretAccess,
}

/// Which denied range `ip` is in, if any.
pub fn denied_range(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => denied_v4(v4),
        IpAddr::V6(v6) => denied_v6(v6),
    }
}

/// The IPv4 special-purpose ranges of the IANA registry (RFC 6890 and its
/// updates) that are neither loopback, link-local nor private: none of
/// them is a public service a topology has a reason to call, and several
/// route to internal infrastructure in practice (benchmarking nets on lab
/// networks, 192.0.0.0/24 for DS-Lite and NAT64 discovery).
const SPECIAL_V4: &[(u32, u8, &str)] = &[
    (0xc000_0000, 24, "IETF protocol assignment"), // 192.0.0.0/24
    (0xc000_0200, 24, "documentation"),            // 192.0.2.0/24 TEST-NET-1
    (0xc058_6300, 24, "6to4 relay (deprecated)"),  // 192.88.99.0/24
    (0xc612_0000, 15, "benchmarking"),             // 198.18.0.0/15
    (0xc633_6400, 24, "documentation"),            // 198.51.100.0/24 TEST-NET-2
    (0xcb00_7100, 24, "documentation"),            // 203.0.113.0/24 TEST-NET-3
];

/// The same for IPv6 (documentation, benchmarking, ORCHID, Teredo and the
/// rest of 2001::/23, discard-only, local-use NAT64, SRv6 SIDs).
const SPECIAL_V6: &[(u128, u8, &str)] = &[
    (0x0100_0000_0000_0000 << 64, 64, "discard-only"), // 100::/64
    (0x2001_0000 << 96, 23, "IETF protocol assignment"), // 2001::/23
    (0x2001_0db8 << 96, 32, "documentation"),          // 2001:db8::/32
    (0x3fff_0000 << 96, 20, "documentation"),          // 3fff::/20
    (0x0064_ff9b_0001 << 80, 48, "local-use NAT64"),   // 64:ff9b:1::/48
    (0x5f00 << 112, 16, "SRv6 SID"),                   // 5f00::/16
];

fn in_range(ip: u128, net: u128, prefix: u8, bits: u32) -> bool {
    let mask =
        u128::MAX.checked_shl(bits - u32::from(prefix)).unwrap_or(0) & (u128::MAX >> (128 - bits));
    ip & mask == net & mask
}

fn denied_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let n = u128::from(u32::from(ip));
    if let Some((_, _, what)) = SPECIAL_V4
        .iter()
        .find(|(net, prefix, _)| in_range(n, u128::from(*net), *prefix, 32))
    {
        return Some(*what);
    }
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
    let n = u128::from(ip);
    let embedded = |hi: u16, lo: u16| {
        Ipv4Addr::new(
            (hi >> 8) as u8,
            (hi & 0xff) as u8,
            (lo >> 8) as u8,
            (lo & 0xff) as u8,
        )
    };
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
        return denied_v4(embedded(s[6], s[7]));
    } else if s[0] == 0x2002 {
        // 6to4: a relay delivers to the IPv4 address in bits 16..48.
        return denied_v4(embedded(s[1], s[2]));
    } else if s[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated, ::a.b.c.d); some stacks still map it.
        return denied_v4(embedded(s[6], s[7])).or(Some("reserved (IPv4-compatible)"));
    } else if let Some((_, _, what)) = SPECIAL_V6
        .iter()
        .find(|(net, prefix, _)| in_range(n, *net, *prefix, 128))
    {
        *what
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
        let addr = ip;
        // `0.0.0.0` and `::` connect to this machine: they are loopback, and
        // naming them in `allow_hosts` opens nothing that naming loopback
        // would not (issue 33).
        let (ip, range) = match ip {
            IpAddr::V4(v4) if v4.is_unspecified() => (
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                "unspecified (reaches loopback)",
            ),
            IpAddr::V6(v6) if v6.is_unspecified() => (
                IpAddr::V6(Ipv6Addr::LOCALHOST),
                "unspecified (reaches loopback)",
            ),
            _ => (ip, range),
        };
        let named_ip = self.allow_hosts.iter().any(|a| {
            a.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|a| !a.is_unspecified() && a.to_canonical() == ip)
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
            addr,
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
