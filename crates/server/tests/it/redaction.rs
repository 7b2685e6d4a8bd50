//! One redaction pass over what the server shows and stores (issue #33, F3
//! and F4): topology specs to read-scope keys, and upstream error bodies in
//! traces.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use glassbox_server::Config;

use crate::support::TestServer;

/// Every secret an author might paste into a topology, at topology level,
/// node level and inside a node's config, in several case styles.
const PASTED: &str = r#"topology_id: pasted
version: 1.0.0
description: "syncs the bucket with AKIAQYLPMN5HFIQR7XYZ"
metadata: { api_key: topmeta-4f1c9a, owner: ann, cost_center: "42" }
nodes:
  - id: fetch
    type: http
    description: "also AKIAQYLPMN5HFIQR7XYZ here"
    metadata: { apiKey: nodemeta-77b2e0, team: search }
    config:
      url: "http://127.0.0.1:9/x?api_key=qk-111aaa&sig=sigvalue222&token=tokval333&page=2"
      method: POST
      allow_hosts: ["127.0.0.1"]
      body:
        accessToken: at-4f4f4f
        clientSecret: cs-5e5e5e
        privateKey: pk-6d6d6d
        pwd: pw-7c7c7c
        DB_DSN: "Server=db;Database=app;User Id=sa;Password=dsnpass888;"
        conn: "Server=db;Database=app;User Id=sa;Password=connpass999;"
        max_tokens: 64
        sort_key: created_at
"#;

const SECRETS: &[&str] = &[
    "AKIAQYLPMN5HFIQR7XYZ",
    "topmeta-4f1c9a",
    "nodemeta-77b2e0",
    "qk-111aaa",
    "sigvalue222",
    "tokval333",
    "at-4f4f4f",
    "cs-5e5e5e",
    "pk-6d6d6d",
    "pw-7c7c7c",
    "dsnpass888",
    "connpass999",
];

#[test]
fn get_topology_and_the_list_show_no_pasted_secret() {
    let server = TestServer::start(&[("pasted.yaml", PASTED)], Config::default());
    let one = server.get("/v1/topologies/pasted", None);
    assert_eq!(one.status, 200, "{}", one.text);
    let list = server.get("/v1/topologies", None);
    assert_eq!(list.status, 200, "{}", list.text);
    let leaked: Vec<&str> = SECRETS
        .iter()
        .copied()
        .filter(|s| one.text.contains(s) || list.text.contains(s))
        .collect();
    assert!(leaked.is_empty(), "leaked {leaked:?} in\n{}", one.text);

    // What is not a secret stays readable: counts, plain keys, ordinary
    // query parameters, the rest of a description.
    let spec = &one.json()["spec"];
    let body = &spec["nodes"][0]["config"]["body"];
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["sort_key"], "created_at");
    assert_eq!(body["accessToken"], "***");
    assert_eq!(spec["metadata"]["owner"], "ann");
    assert_eq!(spec["nodes"][0]["metadata"]["team"], "search");
    let url = spec["nodes"][0]["config"]["url"].as_str().unwrap();
    assert!(url.contains("page=2") && url.contains("api_key="), "{url}");
    let description = one.json()["description"].as_str().unwrap().to_string();
    assert!(
        description.starts_with("syncs the bucket with "),
        "{description}"
    );
}

/// An upstream that answers every request 500, echoing its body (as many
/// frameworks' debug error pages do).
fn echoing_500() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/echo", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let (mut line, mut length) = (String::new(), 0usize);
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let echoed = format!(
                "{{\"error\":\"bad request\",\"request\":{}}}",
                String::from_utf8_lossy(&body)
            );
            let _ = write!(
                conn,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{echoed}",
                echoed.len()
            );
        }
    });
    url
}

#[test]
fn upstream_error_bodies_are_redacted_before_they_are_stored() {
    let url = echoing_500();
    let topology = format!(
        r#"topology_id: echo500
version: 1.0.0
nodes:
  - id: fetch
    type: http
    resource: {{ type: cpu, cost_per_call: 0.001 }}
    config: {{ url: "{url}", method: POST, allow_hosts: ["127.0.0.1"] }}
"#
    );
    let server = TestServer::start(&[("echo500.yaml", &topology)], Config::default());
    // Several clients' questions, each with a different kind of secret.
    let questions = [
        "refund card 4111 1111 1111 1111 please",
        "my key is sk-proj-Q2x9VbN4mK7pL1rT8wYz and it fails",
        "write to ann.lee@example.com about the order",
        r#"{"user":"ann","password":"hunter2!"}"#,
    ];
    let secrets = [
        "4111 1111 1111 1111",
        "Q2x9VbN4mK7pL1rT8wYz",
        "ann.lee@example.com",
        "hunter2!",
    ];
    let mut ids = Vec::new();
    for q in questions {
        let body = serde_json::json!({ "question": q }).to_string();
        let r = server.post("/v1/topologies/echo500/runs", None, &body);
        assert!(r.status >= 400, "{}", r.text);
        for s in secrets {
            assert!(!r.text.contains(s), "answer leaks {s}: {}", r.text);
        }
        ids.push(r.json()["request_id"].as_str().unwrap().to_string());
    }
    for id in ids {
        let trace = server.wait_for(&format!("/v1/traces/{id}"), None, |t| t.status == 200);
        // The detail is kept (for admins), only its secrets are masked.
        assert!(trace.text.contains("HTTP 500"), "{}", trace.text);
        for s in secrets {
            assert!(!trace.text.contains(s), "trace leaks {s}: {}", trace.text);
        }
    }
}
