//! The outbound-request policy against real local servers (issue #14,
//! items 1, 2 and 4): redirects, headers across hosts, model backends,
//! upstream bodies, secret references and URL userinfo.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use glassbox_engine::RunOptions;
use serde_json::json;

use crate::support::{build, http_topology, try_build};

/// A server on 127.0.0.1 that answers each connection with the next of
/// `responses` (`{port}` in them is replaced later by the caller) and
/// records every request it read.
pub(crate) struct Stub {
    pub(crate) port: u16,
    pub(crate) seen: Arc<Mutex<Vec<String>>>,
}

pub(crate) fn stub(responses: Vec<String>) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for body in responses {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut buf = [0u8; 8192];
            let n = stream.read(&mut buf).unwrap_or(0);
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            let _ = stream.write_all(body.as_bytes());
        }
    });
    Stub { port, seen }
}

pub(crate) fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn redirect(to: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

/// Issue #14 item 1: `allow_hosts: [localhost]` followed a 302 to another
/// port of 127.0.0.1 and returned that body.
#[tokio::test]
async fn ssrf_redirects_are_not_followed_by_default() {
    let internal = stub(vec![ok(r#"{"internal":true}"#)]);
    let front = stub(vec![redirect(&format!(
        "http://127.0.0.1:{}/admin",
        internal.port
    ))]);
    let p = build(
        "h.yaml",
        &http_topology(&format!(
            r#"{{ url: "http://localhost:{}/", allow_hosts: ["localhost"], timeout_ms: 5000 }}"#,
            front.port
        )),
    );
    let out = p.run(json!({}), RunOptions::default()).await;
    let v = out.result.unwrap();
    assert_eq!(v["status"], 302, "{v}");
    assert!(!v.to_string().contains("internal"), "{v}");
    assert!(internal.seen.lock().unwrap().is_empty());
    assert_eq!(out.trace.spans[0].tags["host"], "localhost");
}

#[tokio::test]
async fn ssrf_redirects_to_hosts_not_allowed_are_refused_on_every_hop() {
    let internal = stub(vec![ok(r#"{"internal":true}"#)]);
    let front = stub(vec![redirect(&format!(
        "http://127.0.0.1:{}/admin",
        internal.port
    ))]);
    let p = build(
        "h.yaml",
        &http_topology(&format!(
            r#"{{ url: "http://localhost:{}/", allow_hosts: ["localhost"], max_redirects: 3, timeout_ms: 5000 }}"#,
            front.port
        )),
    );
    let out = p.run(json!({}), RunOptions::default()).await;
    let err = out.result.unwrap_err().to_string();
    assert!(err.contains("`127.0.0.1` is not in `allow_hosts`"), "{err}");
    assert!(internal.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn ssrf_custom_headers_are_not_forwarded_across_hosts() {
    let second = stub(vec![ok(r#"{"second":true}"#)]);
    let first = stub(vec![redirect(&format!(
        "http://127.0.0.1:{}/next",
        second.port
    ))]);
    let p = build(
        "h.yaml",
        &http_topology(&format!(
            r#"{{ url: "http://localhost:{}/", allow_hosts: ["localhost", "127.0.0.1"], max_redirects: 2, headers: {{ X-Internal-Token: tok-abc123 }}, timeout_ms: 5000 }}"#,
            first.port
        )),
    );
    let out = p.run(json!({}), RunOptions::default()).await;
    let v = out.result.unwrap();
    assert_eq!(v["body"]["second"], true, "{v}");
    let sent_first = first.seen.lock().unwrap().join("");
    assert!(
        sent_first
            .to_ascii_lowercase()
            .contains("x-internal-token: tok-abc123"),
        "{sent_first}"
    );
    let sent_second = second.seen.lock().unwrap().join("");
    assert!(!sent_second.contains("tok-abc123"), "{sent_second}");
    // The trace names the host that answered, and the hops.
    let tags = &out.trace.spans[0].tags;
    assert_eq!(tags["host"], "127.0.0.1");
    assert_eq!(tags["redirects"], "localhost -> 127.0.0.1");
}

#[tokio::test]
async fn ssrf_too_many_redirects_fail() {
    let third = stub(vec![ok("{}")]);
    let second = stub(vec![redirect(&format!("http://localhost:{}/", third.port))]);
    let first = stub(vec![redirect(&format!(
        "http://localhost:{}/",
        second.port
    ))]);
    let p = build(
        "h.yaml",
        &http_topology(&format!(
            r#"{{ url: "http://localhost:{}/", allow_hosts: ["localhost"], max_redirects: 1, timeout_ms: 5000 }}"#,
            first.port
        )),
    );
    let err = p
        .run(json!({}), RunOptions::default())
        .await
        .result
        .unwrap_err()
        .to_string();
    assert!(err.contains("redirected more than 1 times"), "{err}");
}

/// A name resolved by DNS (here `/etc/hosts`) is checked at connect time:
/// only the resolver sees that `localhost` is loopback when the policy is
/// not restricted to named hosts (a model backend).
#[test]
fn ssrf_resolved_addresses_are_checked_before_connecting() {
    use glassbox_nodes::outbound::{Client, ClientOptions, Request};
    let client = Client::new(
        ClientOptions {
            allow_hosts: vec![],
            restrict_hosts: false,
            max_redirects: 0,
            timeout: std::time::Duration::from_secs(5),
        },
        None,
    );
    let err = client
        .send(Request {
            method: "GET",
            url: "http://localhost:9/",
            headers: &[],
            body: None,
        })
        .unwrap_err();
    assert_eq!(err.code(), "address_denied", "{err}");
    assert!(err.to_string().contains("loopback"), "{err}");
}

const OPENAI: &str = r#"
topology_id: remote
version: "1"
nodes:
  - id: llm
    type: llm_inference
    timeout_ms: 5000
    config: { backend: openai, base_url: "BASE", model: gpt-4o-mini ALLOW }
"#;

/// Issue #14 item 2: any `base_url` was reached, loopback included.
#[test]
fn ssrf_model_backends_refuse_internal_addresses_unless_allowed() {
    for base in [
        "http://127.0.0.1:9/v1",
        "http://localhost:9/v1",
        "http://169.254.169.254/latest",
        "http://[::1]:9/v1",
    ] {
        let text = OPENAI.replace("BASE", base).replace("ALLOW", "");
        let err = try_build("remote.yaml", &text).err().unwrap().to_string();
        assert!(
            err.contains("which outbound calls may not reach"),
            "{base}: {err}"
        );
    }
    let text = OPENAI
        .replace("BASE", "http://127.0.0.1:9/v1")
        .replace("ALLOW", r#", allow_hosts: ["127.0.0.1"]"#);
    assert!(try_build("remote.yaml", &text).is_ok());
}

/// Issue #14 item 2: the upstream's body was echoed in the 503 message.
#[tokio::test]
async fn ssrf_upstream_bodies_are_not_echoed_to_callers() {
    let body = "internal stack trace: db=postgres://admin:pw@10.0.0.5/prod";
    let upstream = stub(vec![format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )]);
    let text = OPENAI
        .replace("BASE", &format!("http://127.0.0.1:{}/v1", upstream.port))
        .replace("ALLOW", r#", allow_hosts: ["127.0.0.1"]"#);
    let p = build("remote.yaml", &text);
    let out = p
        .run(json!({"question": "hi"}), RunOptions::default())
        .await;
    let err = out.result.unwrap_err().to_string();
    assert!(err.contains("127.0.0.1 answered HTTP 503"), "{err}");
    assert!(!err.contains("stack trace"), "{err}");
    let record = serde_json::to_string(&out.trace.record).unwrap();
    assert!(!record.contains("stack trace"), "{record}");
    // The admin-only detail in the span keeps it (userinfo stripped).
    let span = out.trace.spans[0].error.as_ref().unwrap();
    assert_eq!(span.code, "unavailable");
    let detail = span.detail.as_deref().unwrap();
    assert!(detail.contains("internal stack trace"), "{detail}");
    assert!(!detail.contains("admin:pw"), "{detail}");
}

/// Issue #14 item 4: `${file:…}` resolved at build time, never stored.
#[tokio::test]
async fn secrets_references_resolve_at_build_time() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("token");
    std::fs::write(&secret, "tok-from-file\n").unwrap();
    let upstream = stub(vec![ok("{}")]);
    let text = http_topology(&format!(
        r#"{{ url: "http://127.0.0.1:{}/", allow_hosts: ["127.0.0.1"], headers: {{ X-Token: "${{file:{}}}" }}, timeout_ms: 5000 }}"#,
        upstream.port,
        secret.display()
    ));
    // Files are read only from directories the operator allows (issue 33).
    let refused = try_build("h.yaml", &text).err().unwrap().to_string();
    assert!(
        refused.contains("secret_file_not_allowed") || refused.contains("outside the directories"),
        "{refused}"
    );
    let allow = glassbox_nodes::outbound::ServerAllow {
        secrets: glassbox_topology::secret_access::SecretAccess {
            dirs: vec![dir.path().to_path_buf()],
            ..Default::default()
        },
        ..Default::default()
    };
    let p = crate::support::try_build_with("h.yaml", &text, allow).unwrap();
    let out = p.run(json!({}), RunOptions::default()).await;
    out.result.unwrap();
    let sent = upstream.seen.lock().unwrap().join("");
    assert!(
        sent.to_ascii_lowercase()
            .contains("x-token: tok-from-file\r\n"),
        "{sent}"
    );
    // The topology keeps the reference.
    let config = &p.topology().nodes[0].config;
    assert!(
        config["headers"]["X-Token"]
            .as_str()
            .unwrap()
            .starts_with("${file:")
    );

    let missing = http_topology(
        r#"{ url: "http://127.0.0.1:9/", allow_hosts: ["127.0.0.1"], headers: { X-Token: "${env:GLASSBOX_TEST_SURELY_UNSET}" } }"#,
    );
    let err = try_build("h.yaml", &missing).err().unwrap().to_string();
    assert!(err.contains("`GLASSBOX_TEST_SURELY_UNSET`"), "{err}");
    assert!(err.contains("config.headers.X-Token"), "{err}");
}

/// Issue #14 item 4: a password in the URL's userinfo was in the run's
/// error and three times in the trace.
#[tokio::test]
async fn secrets_url_userinfo_is_never_shown() {
    let text = http_topology(
        r#"{ url: "http://bob:hunter2@127.0.0.1:9/x", allow_hosts: ["127.0.0.1"], timeout_ms: 2000 }"#,
    );
    let p = build("h.yaml", &text);
    let out = p.run(json!({}), RunOptions::default()).await;
    let err = out.result.unwrap_err().to_string();
    assert!(!err.contains("hunter2"), "{err}");
    let spans = serde_json::to_string(&out.trace.spans).unwrap();
    let record = serde_json::to_string(&out.trace.record).unwrap();
    assert!(!spans.contains("hunter2"), "{spans}");
    assert!(!record.contains("hunter2"), "{record}");
}
