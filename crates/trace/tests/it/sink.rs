use std::sync::Arc;

use glassbox_trace::{
    Explanation, MemorySink, PathRecord, Receipt, RequestId, RequestRecord, RequestStatus,
    SpanRecord, SpanRole, SpanStatus, TraceSink, Usage,
};
use rust_decimal::Decimal;

fn record(id: RequestId) -> RequestRecord {
    RequestRecord {
        request_id: id,
        topology_id: "t".into(),
        version: "1".into(),
        started_at_us: 0,
        ended_at_us: 1,
        duration_us: 1,
        status: RequestStatus::Ok,
        degraded: false,
        error: None,
        path: PathRecord::default(),
        labels: Default::default(),
        models: vec![],
        input_summary: String::new(),
        input_chars: None,
        input_tokens: None,
        output_summary: String::new(),
        receipt: Receipt::new("USD".into()),
        explanation: Explanation::default(),
        worker: "local".into(),
        span_count: 1,
    }
}

fn span(id: RequestId) -> SpanRecord {
    SpanRecord {
        request_id: id,
        node: "a".into(),
        kind: "echo".into(),
        attempt: 1,
        role: SpanRole::Primary,
        started_at_us: 0,
        start_us: 0,
        end_us: 5,
        status: SpanStatus::Ok,
        error: None,
        tags: Default::default(),
        usage: Usage::default(),
        cost: Decimal::ZERO,
        worker: "local".into(),
        input_summary: "".into(),
        output_summary: "".into(),
    }
}

#[test]
fn memory_sink_keeps_records_and_spans_by_request() {
    let sink = MemorySink::new();
    let a = RequestId::new();
    let b = RequestId(a.0 + 1);
    sink.span(Arc::new(span(a)));
    sink.span(Arc::new(span(b)));
    sink.request(Arc::new(record(a)));
    assert_eq!(sink.spans_of(a).len(), 1);
    assert_eq!(sink.record(a).map(|r| r.request_id), Some(a));
    assert!(sink.record(b).is_none());
}

#[test]
fn bounded_sink_keeps_the_most_recent() {
    let sink = MemorySink::bounded(2);
    let ids: Vec<RequestId> = (0..5).map(RequestId).collect();
    for id in &ids {
        sink.request(Arc::new(record(*id)));
    }
    assert_eq!(sink.request_count(), 2);
    assert!(sink.record(ids[4]).is_some());
    assert!(sink.record(ids[0]).is_none());
}

#[test]
fn records_serialise_with_the_documented_fields() {
    let json = serde_json::to_value(record(RequestId(1))).unwrap();
    for key in [
        "request_id",
        "topology_id",
        "version",
        "status",
        "path",
        "receipt",
        "explanation",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["status"], "ok");
    let s = serde_json::to_value(span(RequestId(1))).unwrap();
    assert_eq!(s["role"], "primary");
    assert_eq!(s["status"], "ok");
}
