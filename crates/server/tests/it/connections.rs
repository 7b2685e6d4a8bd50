//! Connection limits (issue 14, item 5): slow headers, slow bodies and idle
//! connections are closed; a client address gets at most
//! `max_per_client` connections; a long request is never cut by them.

use std::io::Write;
use std::time::{Duration, Instant};

use glassbox_server::Config;
use glassbox_server::config::sha256_hex;

use crate::support::{MODERATION, TestServer, Upstream, calls, closed_within, read_reply};

/// Short limits, so that the tests take seconds.
fn short(extra: &str) -> Config {
    Config::parse(&format!(
        "[connections]\nheader_timeout_ms = 500\nbody_timeout_ms = 500\nidle_timeout_ms = 800\n{extra}"
    ))
    .unwrap()
}

#[test]
fn slow_headers_are_cut_off_after_the_header_timeout() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], short(""));
    let mut conn = s.connect();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let start = Instant::now();
    // One header byte every 100 ms never completes the head.
    assert!(
        closed_within(&mut conn, Duration::from_secs(10), b"x"),
        "a connection sending its headers slowly was still open after 10 s"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    assert!(
        s.get("/metrics", None)
            .text
            .contains(r#"glassbox_rejections_total{topology="-",reason="header_timeout"} 1"#)
    );
}

#[test]
fn slow_bodies_get_408_and_the_connection_closes() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], short(""));
    let mut conn = s.connect();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let start = Instant::now();
    conn.write_all(
        b"POST /v1/topologies/moderation/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\
          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"question\": ",
    )
    .unwrap();
    let r = read_reply(&mut conn).expect("no answer to a body that never came");
    assert!(
        start.elapsed() < Duration::from_secs(9),
        "answered only after {:?}",
        start.elapsed()
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (408, "body_timeout"),
        "{}",
        r.text
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("500 ms")
    );
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], short(""));
    // A connection that never says anything...
    let mut silent = s.connect();
    assert!(
        closed_within(&mut silent, Duration::from_secs(10), b""),
        "a silent connection was still open after 10 s"
    );
    // ...and a keep-alive connection after its answer.
    let mut kept = s.connect();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    assert!(closed_within(&mut kept, Duration::from_secs(10), b""));
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_long_request_is_not_cut_by_the_connection_limits() {
    let upstream = Upstream::start();
    let s = TestServer::start(&[("slow.yaml", &calls("slow", &upstream.url))], short(""));
    let base = s.base.clone();
    let run = std::thread::spawn(move || {
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
    // Longer than every limit (0.5 s, 0.5 s, 0.8 s) while the run waits.
    std::thread::sleep(Duration::from_millis(2_000));
    upstream.release_one();
    let (status, text) = run.join().unwrap();
    assert_eq!(status, 200, "{text}");
}

#[test]
fn connections_over_the_per_client_cap_get_429() {
    let s = TestServer::start(
        &[("moderation.yaml", MODERATION)],
        Config::parse("[connections]\nmax_per_client = 2").unwrap(),
    );
    let first = s.connect();
    let _second = s.connect();
    let mut third = s.connect();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let r = read_reply(&mut third).expect("the connection over the cap got no answer");
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "too_many_connections"),
        "{}",
        r.text
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    // Closing one frees its slot.
    drop(first);
    let start = Instant::now();
    loop {
        let r = s.raw("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1", "");
        if r.status == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no slot came free"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An answer given before the request's body was read (here: no API key)
/// says `Connection: close`, so that a pooling client never sends its next
/// request down a socket the server is about to close; an answer to a
/// request whose body was read keeps the connection open.
#[test]
fn an_answer_given_before_the_body_was_read_closes_the_connection() {
    let keys = format!(
        "[[keys]]\nname = \"runner\"\nsha256 = \"{}\"\nscopes = [\"run\"]",
        sha256_hex("run-key")
    );
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], short(&keys));
    let head = "POST /v1/topologies/moderation/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                Content-Type: application/json\r\n";
    let body = r#"{"question": "Is this message safe to post?"}"#;

    // Without a key, only the first bytes of the body sent: 401, and close.
    let mut refused = s.connect();
    refused
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        refused,
        "{head}Content-Length: {}\r\n\r\n{}",
        body.len(),
        &body[..10]
    )
    .unwrap();
    let r = read_reply(&mut refused).expect("no answer to a request without a key");
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "unauthorized"),
        "{}",
        r.text
    );
    assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);

    // With a key and the whole body: answered, and the connection stays.
    let mut kept = s.connect();
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        kept,
        "{head}Authorization: Bearer run-key\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let r = read_reply(&mut kept).expect("no answer to a keyed request");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("connection"), None, "{:?}", r.headers);
}
