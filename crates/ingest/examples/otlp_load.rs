//! Load for `scripts/bench-otlp.sh`: OTLP/HTTP protobuf trace exports sent
//! to a running `glassbox serve`, as fast as it acknowledges them.
//!
//! ```text
//! otlp_load URL SPANS [SPANS_PER_EXPORT] [CLIENTS]
//! otlp_load --stages SPANS [SPANS_PER_EXPORT]
//! ```
//!
//! `--stages` measures, in this process and on one thread, what the server
//! does with the same bodies before the trace writer: protobuf decoding,
//! then gathering and building the records (conventions, receipts,
//! explanations). It prints the time per span of each, to see where an
//! export's CPU goes.
//!
//! Each trace is an OpenInference RAG request of 6 spans (chain, embedding,
//! retriever with 3 titled documents, prompt, LLM with token counts and
//! invocation parameters, guardrail), with input and output values on the
//! spans. Every body is encoded before the clock starts, so the load costs
//! the server's machine only its sends. Prints one JSON line: spans/s,
//! exports/s, the P50/P95/P99/max latency of an export (send to
//! acknowledgement, which with `durability = "commit"` means committed) and
//! the CPU seconds the sending took in this process.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use glassbox_ingest::proto::{
    AnyValue, ExportTraceServiceRequest, KeyValue, Resource, ResourceSpans, ScopeSpans, Span, Value,
};
use prost::Message;

const SPANS_PER_TRACE: usize = 6;

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

fn s(k: &str, v: &str) -> KeyValue {
    kv(k, Value::String(v.into()))
}

/// A fixed scramble of `x` (splitmix64's finaliser), never zero.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

fn trace(n: u64, t0: u64) -> Vec<Span> {
    let mut tid = [0u8; 16];
    tid[..8].copy_from_slice(&(t0 / 1_000_000).to_be_bytes());
    tid[8..].copy_from_slice(&(n + 1).to_be_bytes());
    // Random-looking span ids, as an SDK makes them (the id generator
    // draws 64 random bits): counters would read as long digit runs.
    let sid = |i: u8| splitmix64(n << 8 | u64::from(i)).to_be_bytes().to_vec();
    let at = |ms: u64| t0 + n * 1_000 + ms * 1_000_000;
    let mk = |i: u8, parent: Option<u8>, name: &str, (a, b): (u64, u64), attributes| Span {
        trace_id: tid.to_vec(),
        span_id: sid(i),
        parent_span_id: parent.map_or_else(Vec::new, sid),
        name: name.into(),
        kind: 1,
        start_time_unix_nano: at(a),
        end_time_unix_nano: at(b),
        attributes,
        events: Vec::new(),
        status: None,
    };
    let q = format!("What does plan {} cost per seat per month?", n % 97);
    vec![
        mk(
            1,
            None,
            "rag",
            (0, 950),
            vec![
                s("openinference.span.kind", "CHAIN"),
                s("input.value", &q),
                s(
                    "output.value",
                    "The plan costs 20 dollars per seat per month, billed yearly.",
                ),
            ],
        ),
        mk(
            2,
            Some(1),
            "embed",
            (1, 9),
            vec![
                s("openinference.span.kind", "EMBEDDING"),
                s("embedding.model_name", "all-minilm-l6-v2"),
                s("embedding.embeddings.0.embedding.text", &q),
            ],
        ),
        mk(
            3,
            Some(1),
            "retrieve",
            (10, 40),
            vec![
                s("openinference.span.kind", "RETRIEVER"),
                s("input.value", &q),
                s("retrieval.documents.0.document.id", "kb-17"),
                s(
                    "retrieval.documents.0.document.metadata",
                    r#"{"title":"Pricing"}"#,
                ),
                kv("retrieval.documents.0.document.score", Value::Double(0.82)),
                s("retrieval.documents.1.document.id", "kb-3"),
                s(
                    "retrieval.documents.1.document.metadata",
                    r#"{"title":"Plans FAQ"}"#,
                ),
                kv("retrieval.documents.1.document.score", Value::Double(0.77)),
                s("retrieval.documents.2.document.id", "kb-9"),
                s(
                    "retrieval.documents.2.document.metadata",
                    r#"{"title":"Billing"}"#,
                ),
                kv("retrieval.documents.2.document.score", Value::Double(0.61)),
            ],
        ),
        mk(
            4,
            Some(1),
            "prompt",
            (41, 42),
            vec![
                s("openinference.span.kind", "PROMPT"),
                s(
                    "llm.prompt_template.template",
                    "Answer from the context: {context}\n{question}",
                ),
            ],
        ),
        mk(
            5,
            Some(1),
            "ChatCompletion",
            (43, 900),
            vec![
                s("openinference.span.kind", "LLM"),
                s("llm.model_name", "gpt-4o-mini-2024-07-18"),
                s("llm.provider", "openai"),
                s(
                    "llm.invocation_parameters",
                    r#"{"temperature": 0.2, "max_tokens": 256}"#,
                ),
                kv(
                    "llm.token_count.prompt",
                    Value::Int(1200 + (n % 300) as i64),
                ),
                kv(
                    "llm.token_count.completion",
                    Value::Int(80 + (n % 50) as i64),
                ),
                kv(
                    "llm.token_count.prompt_details.cache_read",
                    Value::Int(1024),
                ),
                s(
                    "output.value",
                    "The plan costs 20 dollars per seat per month, billed yearly.",
                ),
            ],
        ),
        mk(
            6,
            Some(1),
            "moderation",
            (901, 940),
            vec![
                s("openinference.span.kind", "GUARDRAIL"),
                s("output.value", "passed"),
            ],
        ),
    ]
}

fn body(first: u64, traces: u64, t0: u64) -> Vec<u8> {
    let spans: Vec<Span> = (first..first + traces).flat_map(|n| trace(n, t0)).collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    s("service.name", "shop-bot"),
                    s("service.version", "1.4.0"),
                    s("telemetry.sdk.language", "python"),
                ],
            }),
            scope_spans: vec![ScopeSpans { scope: None, spans }],
        }],
    }
    .encode_to_vec()
}

/// CPU seconds (user + system) this process has used so far; NaN where
/// the kernel will not say.
fn cpu_secs() -> f64 {
    glassbox_engine::cpu::process_cpu_time().map_or(f64::NAN, |t| t.as_secs_f64())
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `--stages`: decode, then accept and build, timed apart.
fn stages(spans: u64, per_export: u64) {
    let traces_per = (per_export / SPANS_PER_TRACE as u64).max(1);
    let exports = (spans / SPANS_PER_TRACE as u64).div_ceil(traces_per);
    let t0 = glassbox_trace::unix_micros_now() * 1000;
    let bodies: Vec<Vec<u8>> = (0..exports)
        .map(|e| body(e * traces_per, traces_per, t0))
        .collect();
    let sent = (exports * traces_per) as f64 * SPANS_PER_TRACE as f64;
    let t = Instant::now();
    let decoded: Vec<ExportTraceServiceRequest> = bodies
        .iter()
        .map(|b| glassbox_ingest::decode(glassbox_ingest::Encoding::Protobuf, b).unwrap())
        .collect();
    let decode = t.elapsed().as_secs_f64();
    let rx = glassbox_ingest::Receiver::new(&glassbox_ingest::IngestSettings::default());
    let t = Instant::now();
    let mut built = 0usize;
    for d in decoded {
        built += rx.accept(d, t0 / 1000).unwrap().spans();
    }
    let build = t.elapsed().as_secs_f64();
    assert_eq!(built as f64, sent);
    println!(
        "{{\"spans\":{sent},\"decode_ns_per_span\":{:.0},\"build_ns_per_span\":{:.0},\"decode_and_build_spans_per_s_one_core\":{:.0}}}",
        decode / sent * 1e9,
        build / sent * 1e9,
        sent / (decode + build),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--stages") {
        let spans: u64 = args.get(2).map_or(120_000, |a| a.parse().unwrap());
        let per_export: u64 = args.get(3).map_or(1020, |a| a.parse().unwrap());
        stages(spans, per_export);
        return;
    }
    let url = format!(
        "{}/v1/traces",
        args.get(1).expect("URL").trim_end_matches('/')
    );
    let spans: u64 = args.get(2).map_or(300_000, |a| a.parse().unwrap());
    let per_export: u64 = args.get(3).map_or(1020, |a| a.parse().unwrap());
    let clients: usize = args.get(4).map_or(4, |a| a.parse().unwrap());
    let traces_per = (per_export / SPANS_PER_TRACE as u64).max(1);
    let exports = (spans / SPANS_PER_TRACE as u64).div_ceil(traces_per);
    let t0 = glassbox_trace::unix_micros_now() * 1000;
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..exports)
            .map(|e| body(e * traces_per, traces_per, t0))
            .collect(),
    );
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_start = cpu_secs();
    let start = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (bodies, next, url) = (bodies.clone(), next.clone(), url.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(Duration::from_secs(120)))
                    .build()
                    .into();
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(b) = bodies.get(i) else { break };
                    let t = Instant::now();
                    let resp = agent
                        .post(&url)
                        .header("Content-Type", "application/x-protobuf")
                        .send(&b[..])
                        .unwrap_or_else(|e| panic!("export {i}: {e}"));
                    assert_eq!(resp.status().as_u16(), 200);
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<f64> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu_start;
    lat.sort_by(f64::total_cmp);
    let sent = exports * traces_per * SPANS_PER_TRACE as u64;
    println!(
        "{{\"spans\":{sent},\"exports\":{exports},\"spans_per_export\":{},\"clients\":{clients},\"bytes_per_span\":{:.0},\"secs\":{secs:.3},\"spans_per_s\":{:.0},\"exports_per_s\":{:.1},\"p50_ms\":{:.1},\"p95_ms\":{:.1},\"p99_ms\":{:.1},\"max_ms\":{:.1},\"cpu_s\":{cpu:.3}}}",
        traces_per * SPANS_PER_TRACE as u64,
        bytes as f64 / sent as f64,
        sent as f64 / secs,
        exports as f64 / secs,
        pct(&lat, 0.50),
        pct(&lat, 0.95),
        pct(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0),
    );
}
