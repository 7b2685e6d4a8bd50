//! The outbound policy's unit tests: deny list, allowlist, ranges.

use std::net::IpAddr;

use super::*;

fn policy(allow: &[&str], ranges: &[&str]) -> Policy {
    Policy {
        allow_hosts: allow.iter().map(|s| s.to_string()).collect(),
        restrict_hosts: true,
        server: ServerAllow {
            ranges: ranges.iter().map(|r| IpRange::parse(r).unwrap()).collect(),
            ..ServerAllow::default()
        },
        max_redirects: 0,
        pool_member: false,
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

/// Issue 33 (F7): every special-purpose range of RFC 6890 (and its
/// successors' registry) is denied, not only private and loopback ones.
#[test]
fn ssrf_special_purpose_ranges_are_denied() {
    for addr in [
        "192.0.0.8",       // IETF protocol assignments 192.0.0.0/24
        "192.0.2.10",      // TEST-NET-1
        "198.18.0.1",      // benchmarking 198.18.0.0/15
        "198.19.255.254",  // benchmarking, second half
        "198.51.100.7",    // TEST-NET-2
        "203.0.113.9",     // TEST-NET-3
        "192.88.99.1",     // 6to4 relay anycast
        "240.0.0.1",       // reserved 240.0.0.0/4
        "255.255.255.255", // limited broadcast
        "100.64.0.1",      // shared address space
        "2001:db8::1",     // documentation
        "3fff::1",         // documentation (RFC 9637)
        "2001:2::1",       // benchmarking
        "2001::1",         // Teredo, IETF protocol assignments 2001::/23
        "100::1",          // discard-only
        "64:ff9b:1::1",    // local-use NAT64
        "5f00::1",         // SRv6 SIDs
        "::ffff:198.51.100.1",
        "2002:c000:0201::1", // 6to4 carrying 192.0.2.1
        "2002:7f00:0001::1", // 6to4 carrying 127.0.0.1
    ] {
        assert!(denied_range(ip(addr)).is_some(), "{addr} is not denied");
    }
    // Neighbours just outside stay reachable.
    for addr in [
        "192.0.3.1",
        "198.17.255.255",
        "198.20.0.1",
        "198.51.101.1",
        "203.0.114.1",
        "2001:db9::1",
        "2606:4700::1111",
    ] {
        assert_eq!(denied_range(ip(addr)), None, "{addr}");
    }
}

/// Issue 33 (F7): `0.0.0.0` and `::` reach this machine's loopback
/// services, so naming them opens nothing unless loopback is allowed.
#[test]
fn ssrf_unspecified_addresses_count_as_loopback() {
    let p = policy(&["0.0.0.0", "::", "[::]"], &[]);
    for (host, addr) in [("0.0.0.0", "0.0.0.0"), ("::", "::"), ("[::]", "::")] {
        let e = p.check_addr(host, ip(addr)).unwrap_err();
        assert_eq!(e.code(), "address_denied", "{host}");
        assert!(e.to_string().contains("loopback"), "{e}");
        assert!(p.check_static(host).is_err(), "{host}");
    }
    // With loopback allowed (named, or by the operator), it is loopback.
    let p = policy(&["0.0.0.0", "127.0.0.1"], &[]);
    assert!(p.check_addr("0.0.0.0", ip("0.0.0.0")).is_ok());
    let p = policy(&["0.0.0.0"], &["127.0.0.0/8"]);
    assert!(p.check_addr("0.0.0.0", ip("0.0.0.0")).is_ok());
    // A name resolving to 0.0.0.0 is loopback too.
    let p = policy(&["zero.example"], &[]);
    assert!(p.check_addr("zero.example", ip("0.0.0.0")).is_err());
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

#[test]
fn a_pool_member_is_an_explicit_allow_for_its_own_host_only() {
    let mut p = policy(&["worker-0.glassbox"], &[]);
    assert!(p.check_addr("worker-0.glassbox", ip("10.0.0.7")).is_err());
    p.pool_member = true;
    assert!(p.check_addr("worker-0.glassbox", ip("10.0.0.7")).is_ok());
    assert!(p.check_addr("worker-0.glassbox", ip("127.0.0.1")).is_ok());
    // Not a hole: another name, or the metadata address under another
    // name, stays refused.
    assert!(p.check_addr("evil.example", ip("169.254.169.254")).is_err());
    assert!(p.check_host("evil.example").is_err());
}

#[test]
fn a_worker_client_reaches_its_worker_and_nothing_else() {
    let c = Client::for_worker("127.0.0.1", WorkerTimeouts::default());
    assert!(c.policy().check_static("127.0.0.1").is_ok());
    assert!(c.policy().check_static("localhost").is_err());
    assert!(c.policy().check_static("10.0.0.1").is_err());
}
