//! Every API goes through the one request service: a topology running its
//! `max_concurrency` requests answers 429 `overloaded` with `Retry-After`
//! to runs, chats (streamed or not) and embeddings alike, a request of each
//! kind holds its slot until it ends, and the slot is free again after; a
//! stream whose client goes away is cancelled.

use std::thread::JoinHandle;

use glassbox_server::Config;
use serde_json::json;

use crate::support::{Reply, TestServer, Upstream, calls};

/// What an OpenAI-compatible `/embeddings` answers: one vector, 3 tokens.
const EMBEDDED: &str = r#"{"data":[{"embedding":[0.0,1.0]}],"usage":{"prompt_tokens":3}}"#;

/// An embedding topology whose vectors come from `url` (a test upstream).
fn embeds_by(id: &str, url: &str) -> String {
    format!(
        r#"topology_id: {id}
version: 1.0.0
nodes:
  - id: embed
    type: embedding
    resource: {{ type: cpu, cost_per_call: 0.00001 }}
    config: {{ backend: openai, base_url: "{url}", model: m, allow_hosts: ["127.0.0.1"] }}
    timeout_ms: 120000
"#
    )
}

fn chat(model: &str, stream: bool) -> String {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
}

fn embed(model: &str, input: serde_json::Value) -> String {
    json!({"model": model, "input": input}).to_string()
}

/// A server serving `slow` (held by `upstream`) with one slot.
fn one_slot(file: &str, text: &str) -> TestServer {
    let config = Config::parse("[topologies.slow]\nmax_concurrency = 1").unwrap();
    TestServer::start(&[(file, text)], config)
}

/// `POST path` on another thread; joined, its status and body.
fn in_background(s: &TestServer, path: &str, body: String) -> JoinHandle<(u16, String)> {
    let url = format!("{}{path}", s.base);
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .post(url)
            .content_type("application/json")
            .send(body)
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    })
}

#[track_caller]
fn assert_overloaded(r: &Reply) {
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "overloaded"),
        "{}",
        r.text
    );
    assert_eq!(r.header("retry-after"), Some("1"));
}

/// The topology's in-flight gauge, from `/metrics`.
fn in_flight(s: &TestServer, topology: &str) -> String {
    let metrics = s.get("/metrics", None).text;
    let prefix = format!("glassbox_in_flight_requests{{topology=\"{topology}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no in-flight gauge for {topology} in {metrics}"))
        .to_string()
}

#[test]
fn a_chat_holds_its_slot_and_a_full_topology_refuses_chats_with_429() {
    let upstream = Upstream::start();
    let s = one_slot("slow.yaml", &calls("slow", &upstream.url));
    let first = in_background(&s, "/v1/chat/completions", chat("slow", false));
    upstream.wait_arrival();
    assert_overloaded(&s.post("/v1/chat/completions", None, &chat("slow", false)));
    assert_overloaded(&s.post("/v1/chat/completions", None, &chat("slow", true)));
    assert_overloaded(&s.post("/v1/topologies/slow/runs", None, "{}"));
    assert_eq!(in_flight(&s, "slow"), "1");
    upstream.release_one();
    let (status, text) = first.join().unwrap();
    assert_eq!(status, 200, "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["object"], "chat.completion", "{body}");
    assert_eq!(in_flight(&s, "slow"), "0", "the slot is free again");
}

#[test]
fn a_streamed_chat_holds_its_slot_until_the_stream_ends_and_full_topologies_refuse_streams_with_429()
 {
    let upstream = Upstream::start();
    let s = one_slot("slow.yaml", &calls("slow", &upstream.url));
    let first = in_background(&s, "/v1/chat/completions", chat("slow", true));
    upstream.wait_arrival();
    // Refused before any event: a JSON error, not a stream.
    assert_overloaded(&s.post("/v1/chat/completions", None, &chat("slow", true)));
    assert_overloaded(&s.post("/v1/chat/completions", None, &chat("slow", false)));
    assert_overloaded(&s.post("/v1/topologies/slow/runs", None, "{}"));
    assert_eq!(in_flight(&s, "slow"), "1");
    upstream.release_one();
    let (status, text) = first.join().unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""finish_reason":"stop""#), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert_eq!(in_flight(&s, "slow"), "0", "the slot is free again");
}

#[test]
fn an_embeddings_call_holds_its_slot_for_all_its_inputs_and_a_full_topology_refuses_embeddings_with_429()
 {
    let upstream = Upstream::answering(EMBEDDED);
    let s = one_slot("slow.yaml", &embeds_by("slow", &upstream.url));
    let first = in_background(&s, "/v1/embeddings", embed("slow", json!(["one", "two"])));
    upstream.wait_arrival();
    assert_overloaded(&s.post("/v1/embeddings", None, &embed("slow", json!("x"))));
    assert_overloaded(&s.post("/v1/chat/completions", None, &chat("slow", false)));
    upstream.release_one();
    // The second input runs under the same slot: still full.
    upstream.wait_arrival();
    assert_overloaded(&s.post("/v1/embeddings", None, &embed("slow", json!("x"))));
    assert_eq!(in_flight(&s, "slow"), "1");
    upstream.release_one();
    let (status, text) = first.join().unwrap();
    assert_eq!(status, 200, "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2, "{body}");
    assert_eq!(body["data"][1]["embedding"], json!([0.0, 1.0]), "{body}");
    // Usage is what the embedding spans carried: 3 tokens an input.
    assert_eq!(body["usage"]["prompt_tokens"], 6, "{body}");
    assert_eq!(in_flight(&s, "slow"), "0", "the slot is free again");
}

#[test]
fn a_streamed_chat_whose_client_goes_away_is_cancelled_and_frees_its_slot() {
    use std::io::{Read, Write};
    let upstream = Upstream::start();
    let s = one_slot("slow.yaml", &calls("slow", &upstream.url));
    let body = chat("slow", true);
    let mut conn = s.connect();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr(),
        body.len()
    )
    .unwrap();
    upstream.wait_arrival();
    // The stream has begun: the headers and the role chunk arrive.
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("data:") {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(in_flight(&s, "slow"), "1");
    drop(conn);
    // Without the upstream answering, the run ends (cancelled) and its slot
    // is free for the next request.
    let start = std::time::Instant::now();
    while in_flight(&s, "slow") != "0" {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "the stream's run was not cancelled"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Nobody waits for a cancelled stream's trace commit: it is written
    // right after the slot is freed, so look until it is there.
    let traces = loop {
        let traces = s.get("/v1/traces?topology=slow", None).json();
        if !traces["traces"][0].is_null() || start.elapsed() > std::time::Duration::from_secs(120) {
            break traces;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(traces["traces"][0]["status"], "cancelled", "{traces}");
    upstream.release_one();
}
