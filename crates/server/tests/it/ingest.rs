//! `POST /v1/traces`, the OTLP/HTTP receiver: protobuf and JSON exports
//! stored before they are answered, behind the keys' scopes; and a real app
//! instrumented with OpenTelemetry and OpenInference from PyPI (the
//! `openai` client against this server's own endpoint, and LangChain),
//! whose traces come out with receipts, explanations and a drawn topology.

use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

use glassbox_ingest::proto::{
    AnyValue, ExportTraceServiceRequest, ExportTraceServiceResponse, KeyValue, Resource,
    ResourceSpans, ScopeSpans, Span, Value,
};
use glassbox_server::Config;
use glassbox_server::config::{ApiKey, Scope, sha256_hex};
use glassbox_trace::{Lang, RequestRecord, explain};
use prost::Message;
use rust_decimal::Decimal;

use crate::support::{Reply, TestServer};

const T0: u64 = 1_764_000_000_000_000_000;

fn key(name: &str, scopes: Vec<Scope>) -> ApiKey {
    ApiKey {
        name: name.into(),
        sha256: sha256_hex(name),
        scopes,
        rate_limit: None,
        max_priority: None,
        max_run_time: None,
    }
}

fn config(prices: &str) -> Config {
    let mut c = Config::default();
    c.keys.push(key("writer-key", vec![Scope::Run]));
    c.keys.push(key("reader-key", vec![Scope::Read]));
    c.ingest.prices = serde_json::from_str(prices).unwrap();
    c
}

fn attr(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

fn text(k: &str, v: &str) -> KeyValue {
    attr(k, Value::String(v.into()))
}

fn span(id: u8, parent: Option<u8>, name: &str, ms: (u64, u64), attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![0x5e; 16],
        span_id: vec![0, 0, 0, 0, 0, 0, 0, id],
        parent_span_id: parent.map_or_else(Vec::new, |p| vec![0, 0, 0, 0, 0, 0, 0, p]),
        name: name.into(),
        kind: 1,
        start_time_unix_nano: T0 + ms.0 * 1_000_000,
        end_time_unix_nano: T0 + ms.1 * 1_000_000,
        attributes,
        events: Vec::new(),
        status: None,
    }
}

fn rag_export() -> ExportTraceServiceRequest {
    let spans = vec![
        span(
            1,
            None,
            "rag",
            (0, 900),
            vec![text("openinference.span.kind", "CHAIN")],
        ),
        span(
            2,
            Some(1),
            "retrieve",
            (10, 110),
            vec![
                text("openinference.span.kind", "RETRIEVER"),
                text("retrieval.documents.0.document.id", "doc-7"),
                text(
                    "retrieval.documents.0.document.metadata",
                    r#"{"title":"Pricing"}"#,
                ),
            ],
        ),
        span(
            3,
            Some(1),
            "ChatCompletion",
            (120, 880),
            vec![
                text("openinference.span.kind", "LLM"),
                text("llm.model_name", "gpt-4o-mini"),
                text("llm.invocation_parameters", r#"{"temperature":0.2}"#),
                attr("llm.token_count.prompt", Value::Int(2006)),
                attr("llm.token_count.completion", Value::Int(300)),
                attr(
                    "llm.token_count.prompt_details.cache_read",
                    Value::Int(1920),
                ),
            ],
        ),
    ];
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![text("service.name", "shop-bot")],
            }),
            scope_spans: vec![ScopeSpans { scope: None, spans }],
        }],
    }
}

const PRICES: &str =
    r#"{"models": {"gpt-4o-mini": {"input": "0.15", "cached_input": "0.075", "output": "0.60"}}}"#;

fn post_otlp(
    s: &TestServer,
    content_type: &str,
    key: Option<&str>,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let mut req = agent
        .post(format!("{}/v1/traces", s.base))
        .header("Content-Type", content_type);
    if let Some(k) = key {
        req = req.header("Authorization", format!("Bearer {k}"));
    }
    let mut resp = req.send(body).unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = resp.body_mut().read_to_vec().unwrap();
    (status, ct, bytes)
}

#[test]
fn an_otlp_export_is_stored_before_it_is_answered() {
    let s = TestServer::start(&[], config(PRICES));
    let body = rag_export().encode_to_vec();
    let (status, ct, answer) = post_otlp(&s, "application/x-protobuf", Some("writer-key"), &body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(ct, "application/x-protobuf");
    let decoded = ExportTraceServiceResponse::decode(&answer[..]).unwrap();
    assert_eq!(decoded.partial_success, None);
    // Answered after commit: the trace is there at once, no waiting.
    let id = "5e".repeat(16);
    let r = s.get(&format!("/v1/traces/{id}"), Some("reader-key"));
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["request"]["topology_id"], "shop-bot/rag");
    // 86 × 0.15 + 1920 × 0.075 + 300 × 0.60, per million tokens.
    assert_eq!(v["receipt"]["total"], "0.0003369");
    let explanation = v["explanation"].as_str().unwrap();
    assert!(
        explanation.contains("“Pricing”") && explanation.contains("gpt-4o-mini"),
        "{explanation}"
    );
    let list = s
        .get("/v1/traces?topology=shop-bot/rag", Some("reader-key"))
        .json();
    assert_eq!(list["traces"].as_array().unwrap().len(), 1);
}

#[test]
fn exports_need_the_run_scope_and_a_known_encoding() {
    let s = TestServer::start(&[], config(PRICES));
    let body = rag_export().encode_to_vec();
    let code = |r: (u16, String, Vec<u8>)| {
        let v: serde_json::Value = serde_json::from_slice(&r.2).unwrap();
        (
            r.0,
            v["error"]["code"].as_str().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(
        code(post_otlp(&s, "application/x-protobuf", None, &body)).0,
        401
    );
    assert_eq!(
        code(post_otlp(
            &s,
            "application/x-protobuf",
            Some("reader-key"),
            &body
        ))
        .0,
        403
    );
    assert_eq!(
        code(post_otlp(&s, "text/plain", Some("writer-key"), &body)),
        (415, "unsupported_media_type".to_string())
    );
    assert_eq!(
        code(post_otlp(
            &s,
            "application/x-protobuf",
            Some("writer-key"),
            &[0x0a, 0xff, 0xff]
        )),
        (400, "bad_otlp".to_string())
    );
    // OTLP/JSON is answered in JSON; an empty export is a success.
    let (status, ct, answer) = post_otlp(
        &s,
        "application/json",
        Some("writer-key"),
        br#"{"resourceSpans":[]}"#,
    );
    assert_eq!(
        (status, ct.as_str(), &answer[..]),
        (200, "application/json", &b"{}"[..])
    );
    // Reading traces still works on the same path.
    let r: Reply = s.get("/v1/traces", Some("reader-key"));
    assert_eq!(r.status, 200);
}

/// Posts `body` with `Content-Encoding: encoding`: (status, error code).
fn post_encoded(s: &TestServer, encoding: &str, body: &[u8]) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .post(format!("{}/v1/traces", s.base))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", encoding)
        .header("Authorization", "Bearer writer-key")
        .send(body)
        .unwrap();
    let answer = resp.body_mut().read_to_vec().unwrap();
    let code = serde_json::from_slice::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_string))
        .unwrap_or_default();
    (resp.status().as_u16(), code)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzip_bodies_are_inflated_within_the_body_limit() {
    let mut cfg = config(PRICES);
    cfg.ingest.max_body_bytes = 256 << 10;
    let s = TestServer::start(&[], cfg);
    let body = rag_export().encode_to_vec();
    assert_eq!(post_encoded(&s, "gzip", &gzip(&body)), (200, String::new()));
    let r = s.get(
        &format!("/v1/traces/{}", "5e".repeat(16)),
        Some("reader-key"),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    // 8 KiB on the wire that inflates past the limit: refused, not inflated.
    let bomb = gzip(&vec![0u8; 1 << 20]);
    assert!(bomb.len() < 8 << 10, "{}", bomb.len());
    assert_eq!(
        post_encoded(&s, "gzip", &bomb),
        (413, "body_too_large".to_string())
    );
    assert_eq!(
        post_encoded(&s, "gzip", &body),
        (400, "bad_gzip".to_string())
    );
    assert_eq!(
        post_encoded(&s, "br", &body),
        (415, "unsupported_encoding".to_string())
    );
}

fn record(s: &TestServer, id: &str) -> (RequestRecord, serde_json::Value) {
    let r = s.wait_for(&format!("/v1/traces/{id}"), Some("py-key"), |r| {
        r.status == 200
    });
    let v = r.json();
    (serde_json::from_value(v["request"].clone()).unwrap(), v)
}

/// SmolLM2-135M through llama.cpp, served as the OpenAI model `chat`.
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
      prompt: '{{ input.question }}'
      max_tokens: 8
      temperature: 0
      seed: 42
"#;

/// A real app, instrumented from PyPI (`tests/python/otel_app.py`): its
/// traces arrive over OTLP/HTTP protobuf and become requests of the
/// discovered topology `shop-bot/answer`.
#[test]
fn a_real_instrumented_app_gets_receipts_explanations_and_a_graph() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv-test/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `scripts/install-test-python.sh`",
        python.display()
    );
    let mut c = config(r#"{"models": {"chat": {"input": "0.10", "output": "0.40"}}}"#);
    c.add_env_key("py-key");
    // The LangChain spans end (and are exported) while the model call runs,
    // and wait for their root; on a busy machine a debug build's model call
    // can take longer than the default 30 s hold.
    c.ingest.hold_secs = 600;
    let s = TestServer::start(&[("chat.yaml", CHAT)], c);
    let out = Command::new(&python)
        .arg(root.join("tests/python/otel_app.py"))
        .env("GLASSBOX_URL", &s.base)
        .env("GLASSBOX_API_KEY", "py-key")
        .env("CHAT_MODEL", "chat")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "app failed:\n{stdout}\n{stderr}");
    let ids: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("sent trace "))
        .collect();
    assert_eq!(ids.len(), 2, "{stdout}\n{stderr}");
    // The model calls the app made, as Glassbox ran them (native traces).
    let native = s.get("/v1/traces?topology=chat", Some("py-key")).json();
    let mut native_tokens = Vec::new();
    for t in native["traces"].as_array().unwrap() {
        let (_, detail) = record(&s, t["request_id"].as_str().unwrap());
        let usage = &detail["spans"][0]["usage"];
        native_tokens.push((
            usage["input_tokens"].as_u64(),
            usage["output_tokens"].as_u64(),
        ));
    }
    assert_eq!(native_tokens.len(), 2);

    let mut records = Vec::new();
    for id in &ids {
        let (r, detail) = record(&s, id);
        assert_eq!(&*r.topology_id, "shop-bot/answer");
        assert_eq!(&*r.version, "1.4.0");
        let kinds: Vec<&str> = r.path.nodes.iter().map(|n| &*n.kind).collect();
        for k in ["chain", "retriever", "llm_inference", "tool"] {
            assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
        }
        // The openai call is billed from its real usage, exactly.
        let call = detail["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["node"] == "ChatCompletion")
            .unwrap_or_else(|| panic!("no ChatCompletion span: {detail}"));
        let tin = call["usage"]["input_tokens"].as_u64().unwrap();
        let tout = call["usage"]["output_tokens"].as_u64().unwrap();
        assert!(tin > 0 && tout > 0, "{call}");
        // The counts the app's instrumentation recorded are Glassbox's own.
        assert!(
            native_tokens.contains(&(Some(tin), Some(tout))),
            "{native_tokens:?} vs {tin}/{tout}"
        );
        let want = Decimal::from(tin) * Decimal::from_str("0.0000001").unwrap()
            + Decimal::from(tout) * Decimal::from_str("0.0000004").unwrap();
        assert_eq!(r.receipt.total, want, "{:?}", r.receipt);
        assert_eq!(r.receipt.sum_of_lines(), r.receipt.total);
        // Explanations from what the instrumentation recorded, and what not.
        let en = &r.explanation.text;
        assert!(
            en.contains("“Pricing”") && en.contains("“Plans FAQ”"),
            "{en}"
        );
        assert!(en.contains("tool `plan_price`"), "{en}");
        assert!(en.contains("generated by chat"), "{en}");
        assert!(en.contains("did not record"), "{en}");
        let zh = explain::compose(&r.explanation.facts, &r.path, r.error.as_ref(), Lang::Zh);
        assert!(zh.contains("Pricing") && zh.contains("插桩未记录"), "{zh}");
        records.push(r);
    }
    // The discovered topology, drawn.
    let found = glassbox_ingest::discover::discover("shop-bot/answer", &records);
    assert_eq!(found.requests, 2);
    let graph = glassbox_ingest::discover::drawing(&found).mermaid();
    for node in ["n_answer", "n_ChatCompletion", "n_plan_price", "n_Handbook"] {
        assert!(graph.contains(node), "{node} missing:\n{graph}");
    }
    assert!(graph.contains("2 of 2 requests"), "{graph}");
}

/// OTLP/JSON spans of trace `t` of `shop-bot`, starting `ago_s` seconds
/// ago: with `retrieve` the RAG path, without it a direct answer.
fn traced(t: u32, ago_s: u64, retrieve: bool, llm_ms: u64) -> Vec<String> {
    let start_ns = u128::from(glassbox_trace::unix_micros_now() - ago_s * 1_000_000) * 1000;
    let span = |id: u8, parent: Option<u8>, name: &str, kind: &str, ms: (u64, u64), extra: &str| {
        let parent = parent.map_or(String::new(), |p| format!(r#""parentSpanId":"{p:016x}","#));
        format!(
            r#"{{"traceId":"{:032x}","spanId":"{id:016x}",{parent}"name":"{name}","startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{{"key":"openinference.span.kind","value":{{"stringValue":"{kind}"}}}}{extra}]}}"#,
            0xa1e7_0000_u128 + u128::from(t),
            start_ns + u128::from(ms.0) * 1_000_000,
            start_ns + u128::from(ms.1) * 1_000_000,
        )
    };
    let llm = r#",{"key":"llm.model_name","value":{"stringValue":"gpt-4o-mini"}},{"key":"llm.token_count.prompt","value":{"intValue":"1000"}},{"key":"llm.token_count.completion","value":{"intValue":"100"}}"#;
    let mut spans = vec![span(1, None, "answer", "CHAIN", (0, 40 + llm_ms), "")];
    let mut at = 0;
    if retrieve {
        spans.push(span(2, Some(1), "retrieve", "RETRIEVER", (2, 30), ""));
        at = 30;
    }
    spans.push(span(
        3,
        Some(1),
        "ChatCompletion",
        "LLM",
        (at + 2, at + 2 + llm_ms),
        llm,
    ));
    spans
}

fn json_export(spans: &[String]) -> Vec<u8> {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"shop-bot"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
    .into_bytes()
}

/// Item 2 of issue #35: path mix, reports, critical path, trace diff and
/// drift alerts work on a discovered topology as on a served one.
#[test]
fn a_discovered_topology_gets_path_mix_reports_critical_path_diffs_and_alerts() {
    let s = TestServer::start(&[], config(PRICES));
    // Yesterday's baseline: 60 requests, all retrieving. The last hour: 60
    // requests, none retrieving, and a slower model.
    let mut spans = Vec::new();
    for t in 0..60 {
        spans.extend(traced(t, 3 * 3600 + u64::from(t), true, 200));
    }
    for t in 60..120 {
        spans.extend(traced(t, 600 + u64::from(t), false, 900));
    }
    let (status, _, answer) = post_otlp(
        &s,
        "application/json",
        Some("writer-key"),
        &json_export(&spans),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let topo = "shop-bot/answer";

    // Path mix and critical path in the summary report.
    let r = s.get(
        &format!("/v1/reports/summary?topology={topo}&since=2d"),
        Some("reader-key"),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let g = &r.json()["groups"][0];
    assert_eq!(g["requests"], 120);
    let mut paths: Vec<(String, u64)> = g["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["key"].as_str().unwrap().to_string(),
                p["count"].as_u64().unwrap(),
            )
        })
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            ("answer>ChatCompletion".to_string(), 60),
            ("answer>retrieve>ChatCompletion".to_string(), 60)
        ]
    );
    let critical: Vec<&str> = g["critical_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["node"].as_str().unwrap())
        .collect();
    assert!(critical.contains(&"ChatCompletion"), "{critical:?}");
    // Costs add up per node: 1000 × 0.15 + 100 × 0.60 per million tokens.
    assert!(
        (g["cost_total"].as_f64().unwrap() - 120.0 * 0.00021).abs() < 1e-9,
        "{g}"
    );

    // One request's critical path.
    let a = format!("{:032x}", 0xa1e7_0000_u128);
    let b = format!("{:032x}", 0xa1e7_0000_u128 + 60);
    let detail = s.get(&format!("/v1/traces/{a}"), Some("reader-key")).json();
    let on_path: Vec<&str> = detail["critical_path"]["steps"]
        .as_array()
        .map(|steps| steps.iter().filter_map(|st| st["node"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        on_path.contains(&"ChatCompletion"),
        "{}",
        detail["critical_path"]
    );

    // Two requests side by side: where the paths parted.
    let d = s.get(&format!("/v1/traces/{a}/diff/{b}"), Some("reader-key"));
    assert_eq!(d.status, 200, "{}", d.text);
    let explanation = d.json()["explanation"].as_str().unwrap().to_string();
    assert!(explanation.contains("retrieve"), "{explanation}");

    // Drift alerts: the path mix moved, and the model got slower.
    let alerts = s.get("/v1/alerts?fresh=true", Some("reader-key")).json();
    let kinds: Vec<(String, String)> = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["topology"] == topo)
        .map(|a| {
            (
                a["kind"].as_str().unwrap().to_string(),
                a["node"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(kinds.iter().any(|(k, _)| k == "route_shift"), "{kinds:?}");
    assert!(
        kinds.contains(&("p99_regression".to_string(), "ChatCompletion".to_string())),
        "{kinds:?}"
    );
}
