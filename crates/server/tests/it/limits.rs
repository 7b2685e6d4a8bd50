//! Body size limit, per-key rate limit, per-topology concurrency, and a
//! graceful shutdown that drains in-flight requests.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use glassbox_server::Config;
use glassbox_server::config::sha256_hex;
use serde_json::json;

use crate::support::{MODERATION, TestServer, Upstream, calls};

#[test]
fn bodies_over_the_limit_get_413() {
    let config = Config::parse("body_limit_bytes = 64").unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    let small = json!({"question": "hi"}).to_string();
    assert_eq!(
        s.post("/v1/topologies/moderation/runs", None, &small)
            .status,
        200
    );
    let big = json!({"question": "x".repeat(200)}).to_string();
    let r = s.post("/v1/topologies/moderation/runs", None, &big);
    assert_eq!(
        (r.status, r.code().as_str()),
        (413, "body_too_large"),
        "{}",
        r.text
    );
    let r = s.post("/v1/chat/completions", None, &big);
    assert_eq!(r.status, 413, "{}", r.text);
}

#[test]
fn keys_over_their_rate_get_429_with_retry_after() {
    let config = Config::parse(&format!(
        r#"
        [rate_limit]
        requests_per_second = 0.001
        burst = 2
        [[keys]]
        name = "a"
        sha256 = "{}"
        scopes = ["read"]
        [[keys]]
        name = "b"
        sha256 = "{}"
        scopes = ["read"]
        "#,
        sha256_hex("key-a"),
        sha256_hex("key-b")
    ))
    .unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    assert_eq!(s.get("/v1/topologies", Some("key-a")).status, 200);
    assert_eq!(s.get("/v1/topologies", Some("key-a")).status, 200);
    let r = s.get("/v1/topologies", Some("key-a"));
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "rate_limited"),
        "{}",
        r.text
    );
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(wait >= 1, "{wait}");
    assert_eq!(
        s.get("/v1/topologies", Some("key-b")).status,
        200,
        "buckets are per key"
    );
    assert!(
        s.get("/metrics", None)
            .text
            .contains(r#"glassbox_rejections_total{topology="-",reason="rate_limited"} 1"#)
    );
}

#[test]
fn beyond_its_concurrency_a_topology_answers_429_not_a_queue() {
    let upstream = Upstream::start();
    let config = Config::parse("[topologies.slow]\nmax_concurrency = 1").unwrap();
    let s = TestServer::start(
        &[
            ("slow.yaml", &calls("slow", &upstream.url)),
            ("moderation.yaml", MODERATION),
        ],
        config,
    );
    let base = s.base.clone();
    let first = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .post(format!("{base}/v1/topologies/slow/runs"))
            .content_type("application/json")
            .send("{}")
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    });
    upstream.wait_arrival();
    let r = s.post("/v1/topologies/slow/runs", None, "{}");
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "overloaded"),
        "{}",
        r.text
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        s.get("/metrics", None)
            .text
            .contains(r#"glassbox_in_flight_requests{topology="slow"} 1"#)
    );
    // Other topologies are not affected.
    assert_eq!(
        s.post(
            "/v1/topologies/moderation/runs",
            None,
            r#"{"question":"hi"}"#
        )
        .status,
        200
    );
    upstream.release_one();
    let (status, text) = first.join().unwrap();
    assert_eq!(status, 200, "{text}");
    // The slot is free again.
    let again = std::thread::spawn({
        let base = s.base.clone();
        move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            agent
                .post(format!("{base}/v1/topologies/slow/runs"))
                .content_type("application/json")
                .send("{}")
                .unwrap()
                .status()
                .as_u16()
        }
    });
    upstream.wait_arrival();
    upstream.release_one();
    assert_eq!(again.join().unwrap(), 200);
}

#[test]
fn shutdown_waits_for_in_flight_requests_and_flushes_their_traces() {
    let upstream = Upstream::start();
    let s = TestServer::start(
        &[("slow.yaml", &calls("slow", &upstream.url))],
        Config::default(),
    );
    let base = s.base.clone();
    let addr = base.trim_start_matches("http://").to_string();
    let first = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .post(format!("{base}/v1/topologies/slow/runs"))
            .content_type("application/json")
            .send("{}")
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    });
    upstream.wait_arrival();
    let stopping = std::thread::spawn(move || s.stop());
    // Once shutdown has begun the server stops accepting connections.
    let start = Instant::now();
    while TcpStream::connect(&addr).is_ok() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the server kept accepting"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    upstream.release_one();
    let (status, text) = first.join().unwrap();
    assert_eq!(status, 200, "the in-flight request was cut off: {text}");
    let (stats, _keep) = stopping.join().unwrap();
    assert_eq!(stats.requests_written, 1);
}
