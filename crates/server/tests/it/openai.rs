//! The OpenAI-compatible endpoints, from Rust and from the official
//! `openai` Python client.

use std::path::Path;
use std::process::Command;

use glassbox_server::Config;
use glassbox_server::config::sha256_hex;
use serde_json::{Value, json};

use crate::support::{MODERATION, TestServer};

/// SmolLM2-135M through llama.cpp, a few tokens.
const CHAT: &str = r#"topology_id: chat
version: 1.0.0
defaults: { timeout_ms: 300000, deadline_ms: 600000 }
nodes:
  - id: llm
    type: llm_inference
    resource: { type: cpu, cost_per_call: 0.0001 }
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      system: Answer in one short sentence.
      prompt: '{{ input.question }}'
      max_tokens: 12
      temperature: 0
      seed: 42
"#;

/// The same LLM with an output guard after it: must not stream live.
const GUARDED: &str = r#"topology_id: guarded-chat
version: 1.0.0
defaults: { timeout_ms: 300000, deadline_ms: 600000 }
nodes:
  - id: llm
    type: llm_inference
    resource: { type: cpu, cost_per_call: 0.0001 }
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      prompt: '{{ input.question }}'
      max_tokens: 12
      temperature: 0
      seed: 42
  - id: check
    type: output_guard
    resource: { type: cpu, cost_per_call: 0.0001 }
    config: { blocklist: [password], max_length: 2000, on_violation: replace, replacement: "Sorry." }
edges:
  - { from: llm, to: check }
"#;

/// SmolLM2 with room for a tool call: the caller brings the tools.
const TOOLS: &str = r#"topology_id: tools-chat
version: 1.0.0
defaults: { timeout_ms: 300000, deadline_ms: 600000 }
nodes:
  - id: llm
    type: llm_inference
    resource: { type: cpu, cost_per_call: 0.0001 }
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      system: You are a helpful assistant.
      prompt: '{{ input.question }}'
      max_tokens: 96
      temperature: 0
      seed: 42
"#;

/// MiniLM embeddings.
const EMBED: &str = r#"topology_id: embed
version: 1.0.0
nodes:
  - id: embed
    type: embedding
    resource: { type: cpu, cost_per_call: 0.00001 }
    config: { backend: local, model: all-minilm-l6-v2 }
"#;

/// `data:` payloads of an SSE body, in order.
fn events(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:").map(str::trim_start))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

fn contents(events: &[String]) -> Vec<String> {
    events
        .iter()
        .filter(|e| *e != "[DONE]")
        .filter_map(|e| {
            let v: Value = serde_json::from_str(e).unwrap();
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn chat_completions_run_the_topology_and_record_a_trace() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], Config::default());
    let models = s.get("/v1/models", None).json();
    assert_eq!(models["data"][0]["id"], "moderation", "{models}");
    let r = s.post(
        "/v1/chat/completions",
        None,
        &json!({"model": "moderation", "messages": [
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "What is the price of Pro?"}
        ]})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["object"], "chat.completion");
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.starts_with("Plans start at $9"), "{text}");
    assert_eq!(body["usage"]["total_tokens"], 0, "no LLM, no tokens");
    let id = r.header("x-request-id").unwrap();
    assert_eq!(s.get(&format!("/v1/traces/{id}"), None).status, 200);

    let r = s.post(
        "/v1/chat/completions",
        None,
        &json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]}).to_string(),
    );
    assert_eq!((r.status, r.code().as_str()), (404, "model_not_found"));
    let r = s.post(
        "/v1/chat/completions",
        None,
        &json!({"model": "moderation", "messages": [{"role": "system", "content": "x"}]})
            .to_string(),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "bad_input"));
}

#[test]
fn streams_of_guarded_topologies_send_only_the_guarded_output() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], Config::default());
    let r = s.post(
        "/v1/chat/completions",
        None,
        &json!({
            "model": "moderation",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "write to me at bob@example.com"}]
        })
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(r.header("x-request-id").is_some());
    let ev = events(&r.text);
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"), "{ev:?}");
    assert_eq!(contents(&ev), ["Sorry, I can't repeat that."], "{ev:?}");
    assert!(
        !r.text.contains("bob@example.com"),
        "unguarded text leaked: {}",
        r.text
    );
    let usage: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 0);
    let finish: Value = serde_json::from_str(&ev[ev.len() - 3]).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
}

#[test]
fn an_llm_followed_by_a_guard_streams_buffered_and_one_without_streams_live() {
    let s = TestServer::start(
        &[("chat.yaml", CHAT), ("guarded.yaml", GUARDED)],
        Config::default(),
    );
    assert_eq!(
        s.get("/v1/topologies/chat", None).json()["streaming"],
        "live"
    );
    assert_eq!(
        s.get("/v1/topologies/guarded-chat", None).json()["streaming"],
        "buffered"
    );
    let ask = |model: &str| {
        s.post(
            "/v1/chat/completions",
            None,
            &json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "What is a kettle?"}]})
                .to_string(),
        )
    };
    let guarded = ask("guarded-chat");
    assert_eq!(guarded.status, 200, "{}", guarded.text);
    let pieces = contents(&events(&guarded.text));
    assert_eq!(
        pieces.len(),
        1,
        "guarded text must arrive in one piece: {pieces:?}"
    );
    let live = ask("chat");
    assert_eq!(live.status, 200, "{}", live.text);
    let pieces = contents(&events(&live.text));
    assert!(
        pieces.len() > 1,
        "live streaming sends tokens as generated: {pieces:?}"
    );
    let id = live.header("x-request-id").unwrap();
    let trace = s.get(&format!("/v1/traces/{id}"), None).json();
    assert_eq!(trace["request"]["status"], "ok");
    let recorded: Value =
        serde_json::from_str(trace["request"]["output_summary"].as_str().unwrap()).unwrap();
    assert_eq!(
        recorded["text"].as_str().unwrap(),
        pieces.concat(),
        "the stream carries the recorded output"
    );
    // The engine's load, named like vLLM's gauges (other tests in this binary
    // share the model, so only the form of the value is checked).
    let metrics = s.get("/metrics", None).text;
    for series in [
        "glassbox_llm_num_requests_running{model=\"SmolLM2-135M-Instruct.Q4_1.gguf@",
        "glassbox_llm_num_requests_waiting{model=\"SmolLM2-135M-Instruct.Q4_1.gguf@",
        "glassbox_llm_kv_cache_usage_perc{model=\"SmolLM2-135M-Instruct.Q4_1.gguf@",
        "glassbox_llm_prefix_cache_queries{model=\"SmolLM2-135M-Instruct.Q4_1.gguf@",
        "glassbox_llm_prefix_cache_hits{model=\"SmolLM2-135M-Instruct.Q4_1.gguf@",
    ] {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(series))
            .unwrap_or_else(|| panic!("missing `{series}` in\n{metrics}"));
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(value >= 0.0, "{line}");
    }
}

/// Regression: a streamed chat was charged its estimate (the question's
/// tokens) and never settled, so its real tokens (the chat template, the
/// system prompt, the answer) never counted against the key's
/// `tokens_per_minute`. Now the service settles every request when it
/// ends, streamed or not.
#[test]
fn a_streamed_chat_settles_its_real_tokens_against_the_key() {
    const PER_MINUTE: u64 = 60;
    let config = Config::parse(&format!(
        r#"
        [[keys]]
        name = "app"
        sha256 = "{}"
        scopes = ["run", "read"]
        rate_limit = {{ requests_per_minute = 100, tokens_per_minute = {PER_MINUTE} }}
        "#,
        sha256_hex("app-key")
    ))
    .unwrap();
    let s = TestServer::start(&[("chat.yaml", CHAT)], config);
    let auth = [("Authorization", "Bearer app-key")];
    let r = s.send(
        "POST",
        "/v1/chat/completions",
        &auth,
        &json!({
            "model": "chat",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "Hi"}]
        })
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let ev = events(&r.text);
    let usage: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    let total = usage["usage"]["total_tokens"].as_u64().unwrap();
    // The estimate is the question's few tokens; the real count adds the
    // template, the system prompt and the answer.
    assert!(total > 20, "{usage}");
    let left: u64 = s
        .get_with("/v1/models", &auth)
        .header("x-ratelimit-remaining-tokens")
        .unwrap()
        .parse()
        .unwrap();
    // A minute's bucket refills one token a second: ten seconds of slack.
    assert!(
        left + total <= PER_MINUTE + 10,
        "{left} tokens left after a chat of {total}: its tokens were not settled"
    );
}

#[test]
fn embeddings_come_from_embedding_topologies() {
    let s = TestServer::start(
        &[("embed.yaml", EMBED), ("moderation.yaml", MODERATION)],
        Config::default(),
    );
    let r = s.post(
        "/v1/embeddings",
        None,
        &json!({"model": "embed", "input": ["hello", "kettle"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(body["data"][1]["index"], 1);
    assert_eq!(body["data"][0]["embedding"].as_array().unwrap().len(), 384);
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(r.header("x-request-id").unwrap().split(',').count(), 2);
    let r = s.post(
        "/v1/embeddings",
        None,
        &json!({"model": "moderation", "input": "x"}).to_string(),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "not_an_embedding_model")
    );
    let r = s.post(
        "/v1/embeddings",
        None,
        &json!({"model": "embed", "input": [1, 2]}).to_string(),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "bad_input"));
}

/// Issue 14, item 7: one call with 500 inputs took one rate token and ran
/// 500 embeddings. Now each input counts, and a request has a cap.
#[test]
fn embedding_inputs_count_against_the_rate_limit_and_are_capped() {
    let config = Config::parse(
        "max_embedding_inputs = 10\n[rate_limit]\nrequests_per_second = 0.001\nburst = 8",
    )
    .unwrap();
    let s = TestServer::start(&[("embed.yaml", EMBED)], config);
    let body = |n: usize| {
        let input: Vec<String> = (0..n).map(|i| format!("text {i}")).collect();
        json!({"model": "embed", "input": input}).to_string()
    };
    // Every request takes one unit when it arrives (8 → 7).
    let r = s.post("/v1/embeddings", None, &body(11));
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "too_many_inputs"),
        "{}",
        r.text
    );
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("at most 10"), "{message}");
    // 7 → 6; nine inputs never fit a burst of eight.
    let r = s.post("/v1/embeddings", None, &body(9));
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "request_too_large_for_rate_limit"),
        "{}",
        r.text
    );
    // 6 → 3: three inputs, three units.
    let r = s.post("/v1/embeddings", None, &body(3));
    assert_eq!(r.status, 200, "{}", r.text);
    // 3 → 2, and four inputs do not fit in what is left: nothing runs.
    let r = s.post("/v1/embeddings", None, &body(4));
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "rate_limited"),
        "{}",
        r.text
    );
    assert!(r.header("retry-after").is_some());
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("counts 4"),
        "{}",
        r.text
    );
    // 2 → 1: one input still fits.
    assert_eq!(s.post("/v1/embeddings", None, &body(1)).status, 200);
}

/// The official `openai` client (installed by `scripts/install-test-python.sh`)
/// completes a chat, a streamed chat and an embedding request.
#[test]
fn the_official_openai_python_client_works() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv-test/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `scripts/install-test-python.sh` (it installs the `openai` client)",
        python.display()
    );
    let mut config = Config::default();
    config.add_env_key("py-test-key");
    let s = TestServer::start(
        &[
            ("chat.yaml", CHAT),
            ("embed.yaml", EMBED),
            ("moderation.yaml", MODERATION),
            ("tools.yaml", TOOLS),
        ],
        config,
    );
    let out = Command::new(&python)
        .arg(root.join("tests/python/openai_client.py"))
        .env("GLASSBOX_BASE_URL", format!("{}/v1", s.base))
        .env("GLASSBOX_API_KEY", "py-test-key")
        .env("CHAT_MODEL", "chat")
        .env("GUARDED_MODEL", "moderation")
        .env("EMBED_MODEL", "embed")
        .env("TOOLS_MODEL", "tools-chat")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "openai client failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("all openai client checks passed"),
        "{stdout}\n{stderr}"
    );
}
