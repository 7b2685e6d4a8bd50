//! OpenTelemetry export: stored traces as OTLP/HTTP JSON, following the
//! GenAI semantic conventions.
//!
//! One request becomes one OTel trace whose id *is* the request id: a root
//! `invoke_workflow {topology}` span (`gen_ai.operation.name =
//! invoke_workflow`) and one child span per node attempt. Attempts of nodes
//! that used a model are GenAI client spans (`chat {model}` /
//! `embeddings {model}`) with `gen_ai.request.model`, `gen_ai.usage.*`
//! tokens and the temperature; every span carries its cost as the extra
//! attributes `glassbox.cost` and `glassbox.cost.currency`.
//!
//! Hand-built OTLP over `ureq` instead of the tonic/prost stack: the JSON
//! form is built once and sent as JSON or encoded to protobuf (the OTLP/HTTP
//! default) by a small wire encoder; no code generation, and nothing on the
//! request path (export reads from the store).

use glassbox_trace::{Fact, SpanStatus};
use rust_decimal::prelude::ToPrimitive;
use serde_json::{Value, json};

use crate::error::{Result, StoreError};
use crate::query::StoredTrace;

const SPAN_KIND_INTERNAL: u8 = 1;
const SPAN_KIND_CLIENT: u8 = 3;
const STATUS_OK: u8 = 1;
const STATUS_ERROR: u8 = 2;

fn attr(key: &str, value: Value) -> Value {
    let v = match value {
        Value::String(s) => json!({ "stringValue": s }),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({ "intValue": n.to_string() }),
        Value::Number(n) => json!({ "doubleValue": n }),
        other => json!({ "stringValue": other.to_string() }),
    };
    json!({ "key": key, "value": v })
}

/// A stable 64-bit span id from the request id and a salt (splitmix64).
fn span_id(request: u128, salt: u64) -> String {
    let mut z =
        (request as u64) ^ ((request >> 64) as u64) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    format!("{:016x}", z.max(1))
}

fn nanos(us: u64) -> String {
    (u128::from(us) * 1000).to_string()
}

/// One request as OTLP `ResourceSpans` (JSON encoding).
pub fn resource_spans(trace: &StoredTrace, service: &str) -> Value {
    let r = &trace.record;
    let trace_id = format!("{:032x}", r.request_id.0);
    let root_id = span_id(r.request_id.0, u64::MAX);
    let currency = r.receipt.currency.to_string();
    let mut root_attrs = vec![
        attr("gen_ai.operation.name", json!("invoke_workflow")),
        attr("gen_ai.workflow.name", json!(&*r.topology_id)),
        attr("glassbox.topology.id", json!(&*r.topology_id)),
        attr("glassbox.topology.version", json!(&*r.version)),
        attr("glassbox.request.id", json!(r.request_id.to_string())),
        attr("glassbox.status", json!(r.status.as_str())),
        attr("glassbox.degraded", json!(r.degraded)),
        attr("glassbox.path", json!(crate::row::path_key(&r.path))),
        attr(
            "glassbox.cost",
            json!(r.receipt.total.to_f64().unwrap_or(0.0)),
        ),
        attr("glassbox.cost.currency", json!(currency)),
        attr("glassbox.explanation", json!(r.explanation.text)),
    ];
    let mut input_tokens = 0u64;
    let mut output_tokens = 0u64;
    let mut spans = Vec::with_capacity(trace.spans.len() + 1);
    for (seq, s) in trace.spans.iter().enumerate() {
        let model = r.models.iter().find(|m| m.node == s.node);
        let temperature = r
            .explanation
            .facts
            .iter()
            .filter(|f| f.node == s.node)
            .find_map(|f| {
                f.facts.iter().find_map(|fact| match fact {
                    Fact::Generated { temperature, .. } => *temperature,
                    _ => None,
                })
            });
        let mut attrs = vec![
            attr("glassbox.node.id", json!(&*s.node)),
            attr("glassbox.node.type", json!(&*s.kind)),
            attr("glassbox.attempt", json!(s.attempt)),
            attr("glassbox.worker", json!(&*s.worker)),
            attr("glassbox.cost", json!(s.cost.to_f64().unwrap_or(0.0))),
            attr(
                "glassbox.cost.currency",
                json!(r.receipt.currency.to_string()),
            ),
        ];
        for (k, v) in &s.tags {
            attrs.push(attr(&format!("glassbox.tag.{k}"), json!(v)));
        }
        if let Some(cpu) = s.usage.cpu_us {
            attrs.push(attr("glassbox.cpu_us", json!(cpu)));
        }
        let (name, kind) = match model {
            Some(m) => {
                let op = if &*s.kind == "embedding" {
                    "embeddings"
                } else {
                    "chat"
                };
                attrs.push(attr("gen_ai.operation.name", json!(op)));
                attrs.push(attr("gen_ai.provider.name", json!("glassbox")));
                attrs.push(attr("gen_ai.request.model", json!(m.model)));
                let response = match &m.version {
                    Some(v) => format!("{}@{v}", m.model),
                    None => m.model.clone(),
                };
                attrs.push(attr("gen_ai.response.model", json!(response)));
                if let Some(t) = temperature {
                    attrs.push(attr("gen_ai.request.temperature", json!(t)));
                }
                if let Some(t) = s.usage.input_tokens {
                    input_tokens += t;
                    attrs.push(attr("gen_ai.usage.input_tokens", json!(t)));
                }
                if let Some(t) = s.usage.output_tokens {
                    output_tokens += t;
                    attrs.push(attr("gen_ai.usage.output_tokens", json!(t)));
                }
                (format!("{op} {}", m.model), SPAN_KIND_CLIENT)
            }
            None => (format!("{} {}", s.kind, s.node), SPAN_KIND_INTERNAL),
        };
        let status = match (&s.status, &s.error) {
            (SpanStatus::Ok, _) => json!({ "code": STATUS_OK }),
            (st, err) => {
                let code = err.as_ref().map_or_else(
                    || crate::row::status_str(*st).to_string(),
                    |e| e.code.clone(),
                );
                attrs.push(attr("error.type", json!(code)));
                json!({
                    "code": STATUS_ERROR,
                    "message": err.as_ref().map(|e| e.message.clone()).unwrap_or_default(),
                })
            }
        };
        let start = s.started_at_us;
        spans.push(json!({
            "traceId": trace_id,
            "spanId": span_id(r.request_id.0, seq as u64),
            "parentSpanId": root_id,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": nanos(start),
            "endTimeUnixNano": nanos(start + s.duration_us()),
            "attributes": attrs,
            "status": status,
        }));
    }
    if input_tokens > 0 {
        root_attrs.push(attr("gen_ai.usage.input_tokens", json!(input_tokens)));
    }
    if output_tokens > 0 {
        root_attrs.push(attr("gen_ai.usage.output_tokens", json!(output_tokens)));
    }
    let root_status = match &r.error {
        None => json!({ "code": STATUS_OK }),
        Some(e) => {
            root_attrs.push(attr("error.type", json!(e.code)));
            json!({ "code": STATUS_ERROR, "message": e.message })
        }
    };
    spans.insert(
        0,
        json!({
            "traceId": trace_id,
            "spanId": root_id,
            "name": format!("invoke_workflow {}", r.topology_id),
            "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": nanos(r.started_at_us),
            "endTimeUnixNano": nanos(r.started_at_us + r.duration_us),
            "attributes": root_attrs,
            "status": root_status,
        }),
    );
    json!({
        "resource": { "attributes": [
            attr("service.name", json!(service)),
            attr("telemetry.sdk.name", json!("glassbox")),
            attr("telemetry.sdk.language", json!("rust")),
        ]},
        "scopeSpans": [{
            "scope": { "name": "glassbox", "version": env!("CARGO_PKG_VERSION") },
            "spans": spans,
        }],
    })
}

/// An `ExportTraceServiceRequest` for several requests.
pub fn export_request(traces: &[StoredTrace], service: &str) -> Value {
    json!({
        "resourceSpans": traces.iter().map(|t| resource_spans(t, service)).collect::<Vec<_>>()
    })
}

/// Protobuf wire encoding of the JSON built above (the OTLP/HTTP default
/// encoding). Only the fields Glassbox emits are encoded; field numbers are
/// those of `opentelemetry/proto/{collector/trace/v1,trace/v1,common/v1,
/// resource/v1}`.
mod pb {
    use serde_json::Value;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
        varint(out, u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
        tag(out, field, 2);
        varint(out, data.len() as u64);
        out.extend_from_slice(data);
    }

    fn string(out: &mut Vec<u8>, field: u32, v: &Value) {
        if let Some(s) = v.as_str()
            && !s.is_empty()
        {
            bytes(out, field, s.as_bytes());
        }
    }

    fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
        tag(out, field, 1);
        out.extend_from_slice(&v.to_le_bytes());
    }

    fn uint(out: &mut Vec<u8>, field: u32, v: &Value) {
        if let Some(n) = v.as_u64() {
            tag(out, field, 0);
            varint(out, n);
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
            .collect()
    }

    fn items(v: &Value) -> &[Value] {
        v.as_array().map_or(&[], Vec::as_slice)
    }

    fn any_value(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(s) = v.get("stringValue").and_then(Value::as_str) {
            bytes(&mut out, 1, s.as_bytes());
        } else if let Some(b) = v.get("boolValue").and_then(Value::as_bool) {
            tag(&mut out, 2, 0);
            varint(&mut out, u64::from(b));
        } else if let Some(i) = v.get("intValue").and_then(Value::as_str) {
            tag(&mut out, 3, 0);
            varint(&mut out, i.parse::<i64>().unwrap_or(0) as u64);
        } else if let Some(d) = v.get("doubleValue").and_then(Value::as_f64) {
            fixed64(&mut out, 4, d.to_bits());
        }
        out
    }

    fn attributes(out: &mut Vec<u8>, field: u32, attrs: &Value) {
        for kv in items(attrs) {
            let mut m = Vec::new();
            string(&mut m, 1, &kv["key"]);
            bytes(&mut m, 2, &any_value(&kv["value"]));
            bytes(out, field, &m);
        }
    }

    fn span(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        bytes(&mut out, 1, &hex(v["traceId"].as_str().unwrap_or_default()));
        bytes(&mut out, 2, &hex(v["spanId"].as_str().unwrap_or_default()));
        if let Some(p) = v["parentSpanId"].as_str() {
            bytes(&mut out, 4, &hex(p));
        }
        string(&mut out, 5, &v["name"]);
        uint(&mut out, 6, &v["kind"]);
        let nanos = |k: &str| {
            v[k].as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0)
        };
        fixed64(&mut out, 7, nanos("startTimeUnixNano"));
        fixed64(&mut out, 8, nanos("endTimeUnixNano"));
        attributes(&mut out, 9, &v["attributes"]);
        let mut status = Vec::new();
        string(&mut status, 2, &v["status"]["message"]);
        uint(&mut status, 3, &v["status"]["code"]);
        bytes(&mut out, 15, &status);
        out
    }

    /// An `ExportTraceServiceRequest` from its JSON form.
    pub fn export_request(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        for rs in items(&v["resourceSpans"]) {
            let mut m = Vec::new();
            let mut resource = Vec::new();
            attributes(&mut resource, 1, &rs["resource"]["attributes"]);
            bytes(&mut m, 1, &resource);
            for ss in items(&rs["scopeSpans"]) {
                let mut sm = Vec::new();
                let mut scope = Vec::new();
                string(&mut scope, 1, &ss["scope"]["name"]);
                string(&mut scope, 2, &ss["scope"]["version"]);
                bytes(&mut sm, 1, &scope);
                for sp in items(&ss["spans"]) {
                    bytes(&mut sm, 2, &span(sp));
                }
                bytes(&mut m, 2, &sm);
            }
            bytes(&mut out, 1, &m);
        }
        out
    }
}

/// OTLP/HTTP body encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `application/x-protobuf`, the OTLP/HTTP default every receiver accepts.
    #[default]
    HttpProtobuf,
    /// `application/json`.
    HttpJson,
}

/// Encodes an export request body for `protocol`: (content type, bytes).
pub fn encode(
    traces: &[StoredTrace],
    service: &str,
    protocol: Protocol,
) -> (&'static str, Vec<u8>) {
    let v = export_request(traces, service);
    match protocol {
        Protocol::HttpProtobuf => ("application/x-protobuf", pb::export_request(&v)),
        Protocol::HttpJson => ("application/json", v.to_string().into_bytes()),
    }
}

/// Sends traces to an OTLP/HTTP endpoint (`http://host:4318`; `/v1/traces`
/// is appended unless the URL already ends with it).
#[derive(Debug, Clone)]
pub struct OtlpExporter {
    url: String,
    service: String,
    protocol: Protocol,
}

impl OtlpExporter {
    pub fn new(endpoint: &str, service: &str, protocol: Protocol) -> OtlpExporter {
        let base = endpoint.trim_end_matches('/');
        let url = if base.ends_with("/v1/traces") {
            base.to_string()
        } else {
            format!("{base}/v1/traces")
        };
        OtlpExporter {
            url,
            service: service.to_string(),
            protocol,
        }
    }

    /// Posts one export request with all `traces`.
    pub fn export(&self, traces: &[StoredTrace]) -> Result<()> {
        if traces.is_empty() {
            return Ok(());
        }
        let (content_type, body) = encode(traces, &self.service, self.protocol);
        let fail = |message: String| StoreError::Export {
            endpoint: self.url.clone(),
            message,
        };
        let response = ureq::post(&self.url)
            .header("Content-Type", content_type)
            .send(&body[..])
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(fail(format!("HTTP {status}")))
        }
    }
}
