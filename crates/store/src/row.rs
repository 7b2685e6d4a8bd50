//! Flat rows: how a [`RequestRecord`] and its [`SpanRecord`]s map onto the
//! `requests` and `spans` tables, and back.
//!
//! Both backends bind the same row structs, so a column means the same thing
//! in SQLite and PostgreSQL. Nested parts (path, labels, receipt,
//! explanation, tags) are JSON; what reports group or sort by (status, path
//! key, model key, cost, the most expensive node) gets its own column so
//! reports never parse JSON. The three large documents (path, receipt,
//! explanation: ~1.8 KB of a request's ~3.5 KB) are [`Packed`] with LZ4 to
//! half that: every byte is copied several times on its way into SQLite.

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use glassbox_trace::{
    ErrorRecord, Explanation, ModelUse, PathRecord, Receipt, RequestId, RequestRecord,
    RequestStatus, SpanRecord, SpanRole, SpanStatus, Usage, critical_path,
};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use crate::error::{Result, StoreError};
use crate::redact::Redactor;

/// One `requests` row.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    /// Stored as 16 bytes, big-endian (a BLOB in SQLite, a `uuid` in
    /// PostgreSQL), so ids sort by start time and index entries stay small.
    pub request_id: RequestId,
    pub topology_id: String,
    pub version: String,
    pub started_at_us: i64,
    pub ended_at_us: i64,
    pub duration_us: i64,
    pub status: String,
    pub degraded: bool,
    pub error_code: Option<String>,
    pub error: Option<String>,
    pub path_key: String,
    pub path: Packed,
    pub labels: String,
    pub models: String,
    pub model_key: String,
    pub input_summary: String,
    pub output_summary: String,
    pub input_chars: i64,
    pub cost: String,
    pub cost_f: f64,
    pub currency: String,
    pub top_node: Option<String>,
    pub timeouts: i64,
    pub receipt: Packed,
    pub explanation: Packed,
    pub worker: String,
    pub span_count: i64,
    /// Characters of the whole input (`input_chars` counts the summary's);
    /// NULL on rows written before schema 5.
    pub input_len: Option<i64>,
    pub input_tokens: Option<i64>,
}

/// One `spans` row. `model_key` and `req_started_at_us` are copied from the
/// request so per-node reports need no join.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRow {
    pub request_id: RequestId,
    pub seq: i64,
    pub topology_id: String,
    pub version: String,
    pub model_key: String,
    pub req_started_at_us: i64,
    pub node: String,
    pub kind: String,
    pub attempt: i64,
    pub role: String,
    pub role_ref: Option<String>,
    pub started_at_us: i64,
    pub start_us: i64,
    pub end_us: i64,
    pub duration_us: i64,
    pub status: String,
    pub error: Option<String>,
    pub tags: String,
    pub wall_us: i64,
    pub cpu_us: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost: String,
    pub cost_f: f64,
    pub worker: String,
    pub input_summary: String,
    pub output_summary: String,
    /// On the attempt that ended its node's time on the critical path: the
    /// time the node added to the latency (see `glassbox_trace::critical`).
    pub critical_us: Option<i64>,
    /// The request's `input_len`, copied.
    pub req_input_len: Option<i64>,
}

/// A JSON document as stored: LZ4-packed when that is smaller, else the JSON
/// text itself. A packed document is the byte `0x04`, its unpacked length
/// (u32, little-endian) and one LZ4 block. JSON never starts with `0x04`, so
/// readers tell the two apart by the first byte, and rows written before
/// packing (schema < 4) read back unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed(Vec<u8>);

/// The first byte of a packed document.
const PACKED_TAG: u8 = 0x04;

/// Shorter documents stay text: below this LZ4 gains too little.
const PACK_MIN_LEN: usize = 128;

/// Largest length a packed document may claim (a damaged one cannot ask
/// for more memory than this).
const UNPACK_MAX_LEN: usize = 64 << 20;

impl Packed {
    /// Packs a JSON document. LZ4 rather than zstd: these documents are
    /// 0.3–1 KB, where zstd level 1 took 5 µs each against LZ4's 1 µs for
    /// 41% against 53% of the size, and the writer's threads share the
    /// machine with the engine.
    pub fn pack(json: String) -> Packed {
        if json.len() < PACK_MIN_LEN {
            return Packed(json.into_bytes());
        }
        let Ok(len) = u32::try_from(json.len()) else {
            return Packed(json.into_bytes());
        };
        // Tag, length, block, written in place: no second buffer to copy.
        let mut out = vec![0; 5 + lz4_flex::block::get_maximum_output_size(json.len())];
        out[0] = PACKED_TAG;
        out[1..5].copy_from_slice(&len.to_le_bytes());
        match lz4_flex::block::compress_into(json.as_bytes(), &mut out[5..]) {
            Ok(n) if 5 + n < json.len() => {
                out.truncate(5 + n);
                Packed(out)
            }
            _ => Packed(json.into_bytes()),
        }
    }

    /// Wraps bytes read from a column.
    pub fn from_stored(bytes: Vec<u8>) -> Packed {
        Packed(bytes)
    }

    /// The bytes a column stores.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The JSON text: unpacked when packed, as stored otherwise.
    pub fn json(&self, field: &'static str) -> Result<Cow<'_, [u8]>> {
        let Some((&PACKED_TAG, block)) = self.0.split_first() else {
            return Ok(Cow::Borrowed(&self.0));
        };
        let claimed = block
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(|b| u32::from_le_bytes(b) as usize);
        if claimed.is_none_or(|n| n > UNPACK_MAX_LEN) {
            return Err(StoreError::decode(
                field,
                "a damaged packed document (bad length)",
            ));
        }
        let json = lz4_flex::block::decompress_size_prepended(block)
            .map_err(|e| StoreError::decode(field, format!("a damaged packed document ({e})")))?;
        if Some(json.len()) != claimed {
            return Err(StoreError::decode(
                field,
                "a damaged packed document (length does not match)",
            ));
        }
        Ok(Cow::Owned(json))
    }
}

pub(crate) fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    // Serialising plain data with string keys cannot fail; keep a visible
    // marker rather than panicking if it ever does.
    serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"unserialisable\":\"{e}\"}}"))
}

/// `route>embed>retrieve>prompt>llm>validate`: the nodes that ran, in path order.
pub fn path_key(path: &PathRecord) -> String {
    path.taken_nodes().collect::<Vec<_>>().join(">")
}

/// `llm=chat-7b@3.2.1,...`: the models used, for grouping by model version.
pub fn model_key(models: &[ModelUse]) -> String {
    models
        .iter()
        .map(|m| match &m.version {
            Some(v) => format!("{}={}@{v}", m.node, m.model),
            None => format!("{}={}", m.node, m.model),
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub fn status_str(s: SpanStatus) -> &'static str {
    match s {
        SpanStatus::Ok => "ok",
        SpanStatus::Error => "error",
        SpanStatus::Timeout => "timeout",
        SpanStatus::Cancelled => "cancelled",
    }
}

/// The node that cost the most in a receipt (ties: the first listed).
fn top_node(receipt: &Receipt) -> Option<String> {
    let mut totals: Vec<(&str, Decimal)> = Vec::new();
    for line in &receipt.lines {
        match totals.iter_mut().find(|(n, _)| *n == &*line.node) {
            Some((_, t)) => *t = t.saturating_add(line.amount),
            None => totals.push((&line.node, line.amount)),
        }
    }
    let mut best: Option<(&str, Decimal)> = None;
    for (n, t) in totals {
        if best.is_none_or(|(_, b)| t > b) {
            best = Some((n, t));
        }
    }
    best.filter(|(_, t)| *t > Decimal::ZERO)
        .map(|(n, _)| n.to_string())
}

/// Encodes a finished request and its spans: every free-text field through
/// the one redaction pass (summaries also truncated; errors with their
/// upstream detail, tags, labels, path and explanation redacted string by
/// string).
pub fn encode<S: Borrow<SpanRecord>>(
    record: &RequestRecord,
    spans: &[S],
    redactor: &Redactor,
) -> (RequestRow, Vec<SpanRow>) {
    let model_key = model_key(&record.models);
    let timeouts = spans
        .iter()
        .filter(|s| Borrow::<SpanRecord>::borrow(*s).status == SpanStatus::Timeout)
        .count();
    let req = RequestRow {
        request_id: record.request_id,
        topology_id: record.topology_id.to_string(),
        version: record.version.to_string(),
        started_at_us: i(record.started_at_us),
        ended_at_us: i(record.ended_at_us),
        duration_us: i(record.duration_us),
        status: record.status.as_str().to_string(),
        degraded: record.degraded,
        error_code: record.error.as_ref().map(|e| e.code.clone()),
        error: record.error.as_ref().map(|e| redactor.json(e)),
        path_key: path_key(&record.path),
        path: Packed::pack(redactor.json(&record.path)),
        labels: redactor.json(&record.labels),
        models: json(&record.models),
        model_key: model_key.clone(),
        input_summary: redactor.apply(&record.input_summary),
        output_summary: redactor.apply(&record.output_summary),
        input_chars: i(record.input_summary.chars().count() as u64),
        cost: record.receipt.total.to_string(),
        cost_f: record.receipt.total.to_f64().unwrap_or(0.0),
        currency: record.receipt.currency.to_string(),
        top_node: top_node(&record.receipt),
        timeouts: i(timeouts as u64),
        receipt: Packed::pack(json(&record.receipt)),
        explanation: Packed::pack(redactor.json(&record.explanation)),
        worker: record.worker.to_string(),
        span_count: i64::from(record.span_count),
        input_len: record.input_chars.map(i),
        input_tokens: record.input_tokens.map(i),
    };
    let marks = critical_path(&record.path, spans).span_marks(spans);
    let rows = spans
        .iter()
        .enumerate()
        .map(|(seq, s)| {
            let mut row = encode_span(
                Borrow::<SpanRecord>::borrow(s),
                i(seq as u64),
                Some(&req),
                redactor,
            );
            row.critical_us = marks.get(seq).copied().flatten().map(i);
            row
        })
        .collect();
    (req, rows)
}

/// Encodes one span. `req` supplies the request-level columns; a span whose
/// request never arrived has none (see the writer) and gets empty ones.
pub fn encode_span(
    s: &SpanRecord,
    seq: i64,
    req: Option<&RequestRow>,
    redactor: &Redactor,
) -> SpanRow {
    let (role, role_ref) = match &s.role {
        SpanRole::Primary => ("primary", None),
        SpanRole::Fallback { replaces } => ("fallback", Some(replaces.to_string())),
        SpanRole::Rerun { by } => ("rerun", Some(by.to_string())),
        SpanRole::Step { of } => ("step", Some(of.to_string())),
    };
    SpanRow {
        request_id: s.request_id,
        seq,
        topology_id: req.map(|r| r.topology_id.clone()).unwrap_or_default(),
        version: req.map(|r| r.version.clone()).unwrap_or_default(),
        model_key: req.map(|r| r.model_key.clone()).unwrap_or_default(),
        req_started_at_us: req.map_or(i(s.started_at_us), |r| r.started_at_us),
        node: s.node.to_string(),
        kind: s.kind.to_string(),
        attempt: i64::from(s.attempt),
        role: role.to_string(),
        role_ref,
        started_at_us: i(s.started_at_us),
        start_us: i(s.start_us),
        end_us: i(s.end_us),
        duration_us: i(s.duration_us()),
        status: status_str(s.status).to_string(),
        error: s.error.as_ref().map(|e| redactor.json(e)),
        tags: redactor.json(&s.tags),
        wall_us: i(s.usage.wall_us),
        cpu_us: s.usage.cpu_us.map(i),
        input_tokens: s.usage.input_tokens.map(i),
        output_tokens: s.usage.output_tokens.map(i),
        cost: s.cost.to_string(),
        cost_f: s.cost.to_f64().unwrap_or(0.0),
        worker: s.worker.to_string(),
        input_summary: redactor.apply(&s.input_summary),
        output_summary: redactor.apply(&s.output_summary),
        critical_us: None,
        req_input_len: req.and_then(|r| r.input_len),
    }
}

fn parse<T: serde::de::DeserializeOwned>(field: &'static str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| StoreError::decode(field, e))
}

fn unpack<T: serde::de::DeserializeOwned>(field: &'static str, packed: &Packed) -> Result<T> {
    serde_json::from_slice(&packed.json(field)?).map_err(|e| StoreError::decode(field, e))
}

fn decimal(field: &'static str, text: &str) -> Result<Decimal> {
    Decimal::from_str(text).map_err(|e| StoreError::decode(field, e))
}

/// Rebuilds the record from its row.
pub fn decode_request(row: &RequestRow) -> Result<RequestRecord> {
    let status = match row.status.as_str() {
        "ok" => RequestStatus::Ok,
        "failed" => RequestStatus::Failed,
        "cancelled" => RequestStatus::Cancelled,
        other => return Err(StoreError::decode("requests.status", other)),
    };
    let labels: BTreeMap<Arc<str>, String> = parse("requests.labels", &row.labels)?;
    Ok(RequestRecord {
        request_id: row.request_id,
        topology_id: row.topology_id.as_str().into(),
        version: row.version.as_str().into(),
        started_at_us: u(row.started_at_us),
        ended_at_us: u(row.ended_at_us),
        duration_us: u(row.duration_us),
        status,
        degraded: row.degraded,
        error: match &row.error {
            Some(e) => Some(parse::<ErrorRecord>("requests.error", e)?),
            None => None,
        },
        path: unpack("requests.path", &row.path)?,
        labels,
        models: parse("requests.models", &row.models)?,
        input_summary: row.input_summary.clone(),
        input_chars: row.input_len.map(u),
        input_tokens: row.input_tokens.map(u),
        output_summary: row.output_summary.clone(),
        receipt: unpack("requests.receipt", &row.receipt)?,
        explanation: unpack::<Explanation>("requests.explanation", &row.explanation)?,
        worker: row.worker.as_str().into(),
        span_count: u32::try_from(row.span_count).unwrap_or(0),
    })
}

/// Rebuilds a span from its row.
pub fn decode_span(row: &SpanRow) -> Result<SpanRecord> {
    let role = match (row.role.as_str(), &row.role_ref) {
        ("primary", _) => SpanRole::Primary,
        ("fallback", Some(r)) => SpanRole::Fallback {
            replaces: r.as_str().into(),
        },
        ("rerun", Some(r)) => SpanRole::Rerun {
            by: r.as_str().into(),
        },
        ("step", Some(r)) => SpanRole::Step {
            of: r.as_str().into(),
        },
        (other, _) => return Err(StoreError::decode("spans.role", other)),
    };
    let status = match row.status.as_str() {
        "ok" => SpanStatus::Ok,
        "error" => SpanStatus::Error,
        "timeout" => SpanStatus::Timeout,
        "cancelled" => SpanStatus::Cancelled,
        other => return Err(StoreError::decode("spans.status", other)),
    };
    Ok(SpanRecord {
        request_id: row.request_id,
        node: row.node.as_str().into(),
        kind: row.kind.as_str().into(),
        attempt: u32::try_from(row.attempt).unwrap_or(0),
        role,
        started_at_us: u(row.started_at_us),
        start_us: u(row.start_us),
        end_us: u(row.end_us),
        status,
        error: match &row.error {
            Some(e) => Some(parse::<ErrorRecord>("spans.error", e)?),
            None => None,
        },
        tags: parse("spans.tags", &row.tags)?,
        usage: Usage {
            wall_us: u(row.wall_us),
            cpu_us: row.cpu_us.map(u),
            input_tokens: row.input_tokens.map(u),
            output_tokens: row.output_tokens.map(u),
            // The split by price class is not a column: the receipt's
            // lines keep it.
            tokens: None,
        },
        cost: decimal("spans.cost", &row.cost)?,
        worker: row.worker.as_str().into(),
        input_summary: row.input_summary.as_str().into(),
        output_summary: row.output_summary.as_str().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_span_keeps_its_role_and_has_its_arguments_and_result_redacted() {
        use crate::redact::RedactOptions;
        let span = SpanRecord {
            request_id: RequestId::new(),
            node: "agent#2".into(),
            kind: "agent.tool".into(),
            attempt: 1,
            role: SpanRole::Step { of: "agent".into() },
            started_at_us: 1,
            start_us: 1,
            end_us: 5,
            status: SpanStatus::Ok,
            error: None,
            tags: [("iteration".into(), "1".to_string())]
                .into_iter()
                .collect(),
            usage: glassbox_trace::Usage::default(),
            cost: Decimal::ZERO,
            worker: "w".into(),
            input_summary: r#"{"email":"ann@example.com"}"#.into(),
            output_summary: "Order for ann@example.com: shipped".into(),
        };
        let red = Redactor::new(&RedactOptions::default()).unwrap();
        let row = encode_span(&span, 0, None, &red);
        assert_eq!(
            (row.role.as_str(), row.role_ref.as_deref()),
            ("step", Some("agent"))
        );
        assert!(
            !row.input_summary.contains("ann@example.com"),
            "{}",
            row.input_summary
        );
        assert!(
            !row.output_summary.contains("ann@example.com"),
            "{}",
            row.output_summary
        );
        let back = decode_span(&row).unwrap();
        assert_eq!(back.role, SpanRole::Step { of: "agent".into() });
        assert_eq!(back.tags["iteration"], "1");
    }

    fn doc(n: usize) -> String {
        let items: Vec<String> = (0..n)
            .map(|i| format!("{{\"node\":\"n{i}\",\"unit\":\"call\",\"amount\":\"0.0002\"}}"))
            .collect();
        format!("[{}]", items.join(","))
    }

    #[test]
    fn long_documents_are_packed_and_read_back() {
        let json = doc(20);
        let packed = Packed::pack(json.clone());
        assert_eq!(packed.as_bytes()[0], PACKED_TAG);
        assert!(
            packed.as_bytes().len() < json.len() / 2,
            "{}",
            packed.as_bytes().len()
        );
        assert_eq!(&*packed.json("t").unwrap(), json.as_bytes());
    }

    #[test]
    fn short_documents_and_old_rows_stay_text() {
        let json = doc(1);
        assert!(json.len() < PACK_MIN_LEN);
        let packed = Packed::pack(json.clone());
        assert_eq!(packed.as_bytes(), json.as_bytes());
        // A row written before packing: JSON text, read as it is.
        let old = Packed::from_stored(doc(20).into_bytes());
        assert_eq!(&*old.json("t").unwrap(), doc(20).as_bytes());
        assert_eq!(&*Packed::default().json("t").unwrap(), b"");
    }

    #[test]
    fn damaged_packed_documents_are_errors_not_panics() {
        let good = Packed::pack(doc(20)).as_bytes().to_vec();
        let cases = [
            vec![PACKED_TAG],
            vec![PACKED_TAG, 1, 2],
            // Claims 4 GiB.
            vec![PACKED_TAG, 0xff, 0xff, 0xff, 0xff, 0],
            good[..good.len() / 2].to_vec(),
            {
                let mut g = good.clone();
                g[1] = g[1].wrapping_add(7);
                g
            },
        ];
        for bytes in cases {
            let err = Packed::from_stored(bytes.clone())
                .json("requests.path")
                .expect_err(&format!("damaged: {bytes:?}"));
            assert!(err.to_string().contains("requests.path"), "{err}");
        }
    }
}
