//! `http` against a real local server.

use std::io::{Read, Write};
use std::net::TcpListener;

use glassbox_engine::RunOptions;
use serde_json::json;

use crate::support::build;

/// Serves `responses` (one per connection) on a local port.
fn serve(responses: Vec<&'static str>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for body in responses {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(body.as_bytes());
        }
    });
    port
}

#[tokio::test]
async fn calls_allowed_hosts_and_retries_server_errors() {
    let port = serve(vec![
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}",
    ]);
    let p = build(
        "h.yaml",
        &format!(
            r#"
topology_id: h
version: "1"
nodes:
  - id: lookup
    type: http
    retries: 1
    backoff_ms: 1
    config: {{ url: "http://127.0.0.1:{port}/lookup", allow_hosts: ["127.0.0.1"], timeout_ms: 2000 }}
"#
        ),
    );
    let out = p.run(json!({}), RunOptions::default()).await;
    assert_eq!(
        out.result.unwrap(),
        json!({"status": 200, "body": {"ok": true}})
    );
    let spans = &out.trace.spans;
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].error.as_ref().unwrap().code, "unavailable");
    assert!(
        out.trace
            .record
            .explanation
            .text
            .contains("127.0.0.1 answered HTTP 200")
    );
}
