//! From OTLP bodies to stored-request records: decoding (protobuf and
//! JSON), assembly across exports, receipts, explanations, discovery.

use std::str::FromStr;

use glassbox_ingest::{Encoding, IngestSettings, Receiver, decode, discover::discover};
use glassbox_trace::{Lang, NodeStatus, RequestStatus, Unit, explain};
use prost::Message;
use rust_decimal::Decimal;

use crate::fixtures::{PRICES, T0, export, genai, rag, span};

fn receiver() -> Receiver {
    let settings = IngestSettings {
        hold_secs: 5,
        prices: serde_json::from_str(PRICES).unwrap(),
        ..IngestSettings::default()
    };
    Receiver::new(&settings)
}

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

const NOW: u64 = T0 / 1000;

#[test]
fn an_openinference_rag_trace_becomes_a_request_with_an_exact_receipt() {
    let body = export("shop-bot", Some("1.4.0"), rag(1)).encode_to_vec();
    let req = decode(Encoding::Protobuf, &body).unwrap();
    let out = receiver().accept(req, NOW).unwrap();
    assert_eq!((out.built.len(), out.held, out.rejected), (1, 0, 0));
    let b = &out.built[0];
    let r = &b.record;
    assert_eq!(&*r.topology_id, "shop-bot/rag");
    assert_eq!(&*r.version, "1.4.0");
    assert_eq!(r.status, RequestStatus::Ok);
    assert_eq!(r.duration_us, 900_000);
    assert_eq!(b.spans.len(), 3);
    let kinds: Vec<&str> = r.path.nodes.iter().map(|n| &*n.kind).collect();
    assert_eq!(kinds, ["chain", "retriever", "llm_inference"]);
    // Parent → child edges and the sibling order.
    let edges: Vec<(String, String, String)> = r
        .path
        .edges
        .iter()
        .map(|e| (e.from.to_string(), e.to.to_string(), e.why.to_string()))
        .collect();
    assert!(edges.contains(&("rag".into(), "retrieve".into(), "parent span".into())));
    assert!(edges.contains(&("rag".into(), "ChatCompletion".into(), "parent span".into())));
    assert!(edges.contains(&(
        "retrieve".into(),
        "ChatCompletion".into(),
        "ran after".into()
    )));
    // 86 input × 0.15 + 1920 cached × 0.075 + 200 output × 0.60 + 100
    // reasoning × 0.60 (no reasoning rate: the output rate), per million.
    let lines: Vec<(Unit, Decimal)> = r.receipt.lines.iter().map(|l| (l.unit, l.amount)).collect();
    assert_eq!(
        lines,
        [
            (Unit::InputTokens1k, d("0.0000129")),
            (Unit::CachedInputTokens1k, d("0.000144")),
            (Unit::OutputTokens1k, d("0.00012")),
            (Unit::ReasoningTokens1k, d("0.00006")),
        ]
    );
    assert_eq!(r.receipt.total, d("0.0003369"));
    let llm = b
        .spans
        .iter()
        .find(|s| &*s.node == "ChatCompletion")
        .unwrap();
    assert_eq!(llm.cost, d("0.0003369"));
    assert_eq!(llm.usage.input_tokens, Some(2006));
    assert_eq!(llm.usage.output_tokens, Some(300));
    // The explanation names the documents, the model and its temperature.
    let text = &r.explanation.text;
    assert!(
        text.contains("“Pricing”") && text.contains("“Plans FAQ”"),
        "{text}"
    );
    assert!(text.contains("gpt-4o-mini-2024-07-18"), "{text}");
    assert!(text.contains("0.2"), "{text}");
    let zh = explain::compose(&r.explanation.facts, &r.path, r.error.as_ref(), Lang::Zh);
    assert!(zh.contains("Pricing") && zh.contains("gpt-4o-mini"), "{zh}");
}

#[test]
fn a_genai_trace_in_json_says_what_was_not_recorded() {
    // The same export, written as OTLP/JSON by hand: hex ids, 64-bit
    // integers as strings, enums as integers.
    let json = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[
          {{"key":"service.name","value":{{"stringValue":"weather"}}}}]}},
          "scopeSpans":[{{"scope":{{"name":"opentelemetry.instrumentation.anthropic"}},"spans":[
          {{"traceId":"ababababababababababababababab02","spanId":"0000000000000201","name":"invoke_agent weather","kind":1,
            "startTimeUnixNano":"{t0}","endTimeUnixNano":"{t400}",
            "attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"invoke_agent"}}}}],"status":{{"code":1}}}},
          {{"traceId":"ababababababababababababababab02","spanId":"0000000000000202","parentSpanId":"0000000000000201",
            "name":"chat claude-sonnet-4","kind":3,"startTimeUnixNano":"{t0}","endTimeUnixNano":"{t290}",
            "attributes":[
              {{"key":"gen_ai.operation.name","value":{{"stringValue":"chat"}}}},
              {{"key":"gen_ai.request.model","value":{{"stringValue":"claude-sonnet-4-20250514"}}}},
              {{"key":"gen_ai.usage.input_tokens","value":{{"intValue":"1909"}}}},
              {{"key":"gen_ai.usage.cache_read.input_tokens","value":{{"intValue":1700}}}},
              {{"key":"gen_ai.usage.cache_creation.input_tokens","value":{{"intValue":"188"}}}},
              {{"key":"gen_ai.usage.output_tokens","value":{{"intValue":"393"}}}}]}},
          {{"traceId":"ababababababababababababababab02","spanId":"0000000000000203","parentSpanId":"0000000000000201",
            "name":"execute_tool get_weather","kind":1,"startTimeUnixNano":"{t300}","endTimeUnixNano":"{t320}",
            "attributes":[
              {{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}},
              {{"key":"gen_ai.tool.name","value":{{"stringValue":"get_weather"}}}},
              {{"key":"gen_ai.tool.call.arguments","value":{{"stringValue":"{{\"city\":\"Paris\"}}"}}}},
              {{"key":"gen_ai.tool.call.result","value":{{"stringValue":"18°C"}}}}]}}
          ]}}]}}]}}"#,
        t0 = T0,
        t290 = T0 + 290_000_000,
        t300 = T0 + 300_000_000,
        t320 = T0 + 320_000_000,
        t400 = T0 + 400_000_000,
    );
    let from_json = decode(Encoding::Json, json.as_bytes()).unwrap();
    // Not an object: refused, naming what was expected.
    for not_an_export in ["[]", "  [1]", "\"x\"", "null", ""] {
        let e = decode(Encoding::Json, not_an_export.as_bytes()).unwrap_err();
        assert!(
            e.to_string().contains("expected a JSON object"),
            "{not_an_export}: {e}"
        );
    }
    assert!(
        decode(Encoding::Json, b" {}").is_ok(),
        "an empty export is an export"
    );
    let from_pb = decode(
        Encoding::Protobuf,
        &export("weather", None, genai(2)).encode_to_vec(),
    )
    .unwrap();
    let a = receiver().accept(from_json, NOW).unwrap();
    let b = receiver().accept(from_pb, NOW).unwrap();
    assert_eq!(a.built.len(), 1);
    let (ra, rb) = (&a.built[0].record, &b.built[0].record);
    assert_eq!(ra.receipt, rb.receipt);
    assert_eq!(ra.path, rb.path);
    assert_eq!(ra.explanation, rb.explanation);
    assert_eq!(&*ra.topology_id, "weather/invoke_agent weather");
    assert_eq!(&*ra.version, "unversioned");
    // Anthropic through GenAI: input_tokens include the cache reads and writes.
    assert_eq!(ra.receipt.total, d("0.007173"));
    let text = &ra.explanation.text;
    assert!(
        text.contains("tool `get_weather` was called with {\"city\":\"Paris\"} and returned 18°C"),
        "{text}"
    );
    assert!(text.contains("did not record the temperature"), "{text}");
    let zh = explain::compose(&ra.explanation.facts, &ra.path, None, Lang::Zh);
    assert!(zh.contains("插桩未记录温度"), "{zh}");
}

#[test]
fn a_trace_in_pieces_waits_for_its_root_and_late_spans_are_refused() {
    let rx = receiver();
    let mut spans = rag(3);
    let root = spans.remove(0);
    let first = rx.accept(export("shop-bot", None, spans), NOW).unwrap();
    assert_eq!((first.built.len(), first.held), (0, 2));
    assert_eq!(rx.pending_spans(), 2);
    let second = rx
        .accept(export("shop-bot", None, vec![root]), NOW + 1000)
        .unwrap();
    assert_eq!(second.built.len(), 1);
    assert_eq!(second.built[0].spans.len(), 3);
    assert_eq!(rx.pending_spans(), 0);
    let late = span(3, 9, Some(1), "late", (950, 960), vec![]);
    let third = rx
        .accept(export("shop-bot", None, vec![late]), NOW + 2000)
        .unwrap();
    assert_eq!((third.built.len(), third.rejected), (0, 1));
    assert!(
        third.reasons[0].contains("arrived after its trace"),
        "{:?}",
        third.reasons
    );
    // The answer says so (OTLP partial success).
    let body = third.response(Encoding::Json);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["partialSuccess"]["rejectedSpans"], "1");
}

#[test]
fn a_rootless_trace_is_stored_partial_after_the_hold() {
    let rx = receiver();
    let mut spans = rag(4);
    spans.remove(0);
    assert_eq!(
        rx.accept(export("shop-bot", None, spans), NOW)
            .unwrap()
            .held,
        2
    );
    assert!(rx.expire(NOW + 4_000_000).is_empty());
    let built = rx.expire(NOW + 5_000_000);
    assert_eq!(built.len(), 1);
    // The earliest span stands in as root.
    assert_eq!(&*built[0].record.topology_id, "shop-bot/retrieve");
    assert_eq!(built[0].spans.len(), 2);
}

#[test]
fn bad_bodies_are_named() {
    let err = Encoding::from_content_type("text/plain").unwrap_err();
    assert_eq!(err.code(), "unsupported_media_type");
    assert!(err.to_string().contains("application/x-protobuf"));
    let err = decode(
        Encoding::Json,
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}"#,
    )
    .unwrap_err();
    assert_eq!(err.code(), "bad_otlp");
    assert!(err.to_string().contains("hex"), "{err}");
    let err = decode(Encoding::Protobuf, &[0x0a, 0xff, 0xff]).unwrap_err();
    assert_eq!(err.code(), "bad_otlp");
    // Spans with malformed ids are refused one by one, the rest kept.
    let mut spans = rag(5);
    spans[1].span_id = vec![1, 2, 3];
    let out = receiver().accept(export("x", None, spans), NOW).unwrap();
    assert_eq!(out.rejected, 1);
    assert!(out.reasons[0].contains("span id has 3 bytes"));
    assert_eq!(out.built[0].spans.len(), 2);
}

#[test]
fn failed_root_fails_the_request_and_discovery_merges_paths() {
    let rx = receiver();
    let mut a = rag(6);
    a[2].status = Some(glassbox_ingest::proto::Status {
        message: "rate limited".into(),
        code: 2,
    });
    let mut b = rag(7);
    b.remove(1); // no retrieval in this request
    b[0].status = Some(glassbox_ingest::proto::Status {
        message: "upstream failed".into(),
        code: 2,
    });
    let out = rx
        .accept(export("shop-bot", Some("2"), [a, b].concat()), NOW)
        .unwrap();
    assert_eq!(out.built.len(), 2);
    let ok = &out.built[0].record;
    assert_eq!(ok.status, RequestStatus::Ok);
    assert_eq!(
        ok.path.node("ChatCompletion").unwrap().status,
        NodeStatus::Failed
    );
    let failed = &out.built[1].record;
    assert_eq!(failed.status, RequestStatus::Failed);
    assert_eq!(failed.error.as_ref().unwrap().message, "upstream failed");
    let g = discover("shop-bot/rag", out.built.iter().map(|b| &b.record));
    assert_eq!(g.requests, 2);
    assert_eq!(g.versions, ["2"]);
    let seen: Vec<(&str, u64)> = g
        .nodes
        .iter()
        .map(|n| (n.id.as_str(), n.requests))
        .collect();
    assert_eq!(seen, [("rag", 2), ("retrieve", 1), ("ChatCompletion", 2)]);
    assert_eq!(g.nodes[2].models, ["gpt-4o-mini-2024-07-18"]);
    assert!(
        g.edges
            .iter()
            .any(|e| e.from == "rag" && e.to == "ChatCompletion" && e.requests == 2)
    );
}

fn logged(dir: &std::path::Path, stored: &[u128]) -> (Receiver, Vec<glassbox_ingest::Built>) {
    let settings = IngestSettings {
        hold_secs: 5,
        prices: serde_json::from_str(PRICES).unwrap(),
        ..IngestSettings::default()
    };
    Receiver::with_log(&settings, dir, &mut |id| stored.contains(&id)).unwrap()
}

/// Segment files of the held-span log in `dir`.
fn segments(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "held")
        })
        .count()
}

#[test]
fn held_spans_are_logged_before_the_answer_and_survive_a_new_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let (rx, replayed) = logged(dir.path(), &[]);
    assert!(replayed.is_empty());
    let mut spans = rag(5);
    let root = spans.remove(0);
    let trace = u128::from_be_bytes(root.trace_id.clone().try_into().unwrap());
    assert_eq!(
        rx.accept(export("shop-bot", Some("2"), spans), NOW)
            .unwrap()
            .held,
        2
    );
    assert_eq!(segments(dir.path()), 1);
    // One process at a time: a second receiver on the same log is refused
    // (the server then holds in memory only, with a note: not a crash).
    let settings = IngestSettings::default();
    let err = Receiver::with_log(&settings, dir.path(), &mut |_| false).unwrap_err();
    assert_eq!(err.code(), "held_log_failed");
    assert!(err.log_in_use());
    assert!(err.to_string().contains("own `[ingest] held_dir`"), "{err}");
    // The process is gone without a word (nothing drained, nothing
    // committed); a new receiver on the same log holds the spans again.
    drop(rx);
    let (rx, replayed) = logged(dir.path(), &[]);
    assert!(replayed.is_empty());
    assert_eq!(rx.pending_spans(), 2);
    let done = rx
        .accept(export("shop-bot", Some("2"), vec![root]), NOW + 1000)
        .unwrap();
    assert_eq!(done.built.len(), 1);
    assert_eq!(done.built[0].spans.len(), 3);
    assert_eq!(&*done.built[0].record.version, "2");
    // Committed: retired, the segment is gone.
    rx.committed(&[trace]).unwrap();
    assert_eq!(segments(dir.path()), 0);
}

#[test]
fn a_replayed_trace_already_in_the_store_is_not_held_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (rx, _) = logged(dir.path(), &[]);
    let mut spans = rag(6);
    let root = spans.remove(0);
    let trace = u128::from_be_bytes(root.trace_id.clone().try_into().unwrap());
    rx.accept(export("shop-bot", None, spans), NOW).unwrap();
    // Stored, but the process died before it retired the spans.
    drop(rx);
    let (rx, _) = logged(dir.path(), &[trace]);
    assert_eq!(rx.pending_spans(), 0);
    assert_eq!(segments(dir.path()), 0);
}

#[test]
fn spans_pushed_out_on_replay_come_back_built() {
    let dir = tempfile::tempdir().unwrap();
    let (rx, _) = logged(dir.path(), &[]);
    let mut spans = rag(7);
    spans.remove(0);
    rx.accept(export("shop-bot", None, spans), NOW).unwrap();
    drop(rx);
    let settings = IngestSettings {
        max_pending_spans: 1,
        ..IngestSettings::default()
    };
    let (rx, built) = Receiver::with_log(&settings, dir.path(), &mut |_| false).unwrap();
    assert_eq!(built.len(), 1);
    assert_eq!(built[0].spans.len(), 2);
    assert_eq!(rx.pending_spans(), 0);
}
