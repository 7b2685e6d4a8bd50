//! Keyless mode (issue 14, item 8): only loopback `Host`s, and no
//! state-changing request from another origin (DNS rebinding, cross-site
//! `POST`). With keys, neither check applies.

use glassbox_server::Config;
use glassbox_server::config::sha256_hex;

use crate::support::{MODERATION, TestServer};

fn keyless() -> TestServer {
    TestServer::start(&[("moderation.yaml", MODERATION)], Config::default())
}

#[test]
fn keyless_servers_answer_only_loopback_hosts() {
    let s = keyless();
    let r = s.raw("GET /v1/topologies HTTP/1.1\r\nHost: evil.example", "");
    assert_eq!(
        (r.status, r.code().as_str()),
        (403, "host_not_allowed"),
        "{}",
        r.text
    );
    let hint = r.json()["error"]["hint"].as_str().unwrap().to_string();
    assert!(hint.contains("API key"), "{hint}");
    let port = s.addr().rsplit_once(':').unwrap().1.to_string();
    for host in [
        s.addr(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "localhost".into(),
    ] {
        let r = s.raw(&format!("GET /v1/topologies HTTP/1.1\r\nHost: {host}"), "");
        assert_eq!(r.status, 200, "Host: {host}: {}", r.text);
    }
    // The dashboard too: a rebound page must not load it either.
    let r = s.raw("GET / HTTP/1.1\r\nHost: evil.example:8080", "");
    assert_eq!(r.status, 403);
}

#[test]
fn keyless_servers_refuse_cross_origin_state_changes() {
    let s = keyless();
    let host = s.addr();
    // The request from the issue.
    let r = s.raw(
        "POST /v1/admin/reload HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example",
        "",
    );
    assert_eq!(r.status, 403, "{}", r.text);
    let r = s.raw(
        &format!("POST /v1/admin/reload HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example"),
        "",
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (403, "cross_origin_forbidden"),
        "{}",
        r.text
    );
    let e = r.json()["error"].clone();
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("http://evil.example"),
        "{e}"
    );
    assert!(e["hint"].as_str().unwrap().contains("cors_origins"), "{e}");
    let run = r#"{"question":"hi"}"#;
    let head = format!(
        "POST /v1/topologies/moderation/runs HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: text/plain\r\nOrigin: http://localhost:3000"
    );
    assert_eq!(s.raw(&head, run).status, 403, "another local origin");
    let head = format!(
        "POST /v1/topologies/moderation/runs HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: application/json\r\nSec-Fetch-Site: cross-site"
    );
    assert_eq!(
        s.raw(&head, run).status,
        403,
        "marked cross-site by the browser"
    );

    // The server's own origin, and clients that send no Origin, pass.
    let own = format!("POST /v1/admin/reload HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}");
    assert_eq!(s.raw(&own, "").status, 200);
    assert_eq!(s.post("/v1/admin/reload", None, "").status, 200);
    // Reads from another origin are left to CORS (the page cannot read them).
    let read =
        format!("GET /v1/topologies HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example");
    assert_eq!(s.raw(&read, "").status, 200);
}

#[test]
fn keyless_servers_accept_configured_origins() {
    let config = Config::parse(r#"cors_origins = ["http://tools.example"]"#).unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    let host = s.addr();
    let head =
        format!("POST /v1/admin/reload HTTP/1.1\r\nHost: {host}\r\nOrigin: http://tools.example");
    assert_eq!(s.raw(&head, "").status, 200);
}

#[test]
fn with_keys_host_and_origin_are_left_to_the_key() {
    let config = Config::parse(&format!(
        "[[keys]]\nname = \"ops\"\nsha256 = \"{}\"\nscopes = [\"admin\"]",
        sha256_hex("admin-key")
    ))
    .unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    let head = "POST /v1/admin/reload HTTP/1.1\r\nHost: glassbox.internal\r\n\
                Origin: https://app.example\r\nAuthorization: Bearer admin-key";
    assert_eq!(s.raw(head, "").status, 200);
    let head =
        "POST /v1/admin/reload HTTP/1.1\r\nHost: glassbox.internal\r\nOrigin: https://app.example";
    assert_eq!(s.raw(head, "").code(), "unauthorized");
}
