//! One ingested trace → one Glassbox request: a [`RequestRecord`] of a
//! *discovered topology* and a [`SpanRecord`] per OTLP span.
//!
//! - The topology is named after the service and the root span
//!   (`{service.name}/{root span name}`) and versioned by
//!   `service.version`; its nodes are the span names seen, so one step
//!   that ran several times (an agent's model calls) is one node with
//!   several spans.
//! - The path's edges are what was observed: each span's parent → the span
//!   (`why: "parent span"`), and between siblings, the one that ended
//!   before the next began → the next (`why: "ran after"`).
//! - Model calls are billed from the price table, one receipt line per
//!   token class; a model the table lacks is named in the explanation.
//! - The explanation is composed from the facts the attributes record,
//!   with a plain note per node of what the instrumentation did not record.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use glassbox_trace::{
    ENCLOSES, ErrorRecord, Explanation, Fact, Lang, ModelUse, NodeFacts, NodeStatus, PathEdge,
    PathNode, PathRecord, PriceTable, Receipt, RequestId, RequestRecord, RequestStatus, SpanRecord,
    SpanRole, SpanStatus, Tags, Usage, explain,
};
use rust_decimal::Decimal;

use crate::classify::{Step, classify};
use crate::proto::Span;

/// The resource a span came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub service: Arc<str>,
    /// `service.version`, when set.
    pub version: Option<Arc<str>>,
}

/// A span and where it came from.
#[derive(Debug, Clone)]
pub struct Received {
    pub span: Span,
    pub origin: Arc<Origin>,
}

/// One trace, ready for the store.
#[derive(Debug, Clone)]
pub struct Built {
    pub record: RequestRecord,
    pub spans: Vec<SpanRecord>,
}

/// The version given to traces whose resource has no `service.version`.
pub const UNVERSIONED: &str = "unversioned";

/// A node id from a span name: path keys join node ids with `>`, so that
/// and control characters are replaced.
pub fn node_id(name: &str) -> String {
    let id: String = name
        .trim()
        .chars()
        .map(|c| if c == '>' || c.is_control() { '_' } else { c })
        .collect();
    if id.is_empty() { "unnamed".into() } else { id }
}

fn span_key(id: &[u8]) -> u64 {
    id.iter()
        .take(8)
        .fold(0u64, |acc, b| acc << 8 | u64::from(*b))
}

fn micros(ns: u64) -> u64 {
    ns / 1000
}

/// Builds the request for trace `trace_id` from its spans.
pub fn build(trace_id: u128, mut spans: Vec<Received>, prices: &PriceTable) -> Built {
    // By start; of spans starting together, the longer (the parent) first.
    spans.sort_by_key(|r| {
        (
            r.span.start_time_unix_nano,
            std::cmp::Reverse(r.span.end_time_unix_nano),
        )
    });
    let ids: HashMap<u64, usize> = spans
        .iter()
        .enumerate()
        .map(|(i, r)| (span_key(&r.span.span_id), i))
        .collect();
    let parent_of = |r: &Received| -> Option<usize> {
        if r.span.parent_span_id.is_empty() {
            return None;
        }
        ids.get(&span_key(&r.span.parent_span_id)).copied()
    };
    let parents: Vec<Option<usize>> = spans.iter().map(parent_of).collect();
    let root = (0..spans.len())
        .find(|&i| spans[i].span.parent_span_id.is_empty())
        .or_else(|| (0..spans.len()).find(|&i| parents[i].is_none()))
        .unwrap_or(0);
    let origin = spans[root].origin.clone();
    let root_name = node_id(&spans[root].span.name);
    let topology_id: Arc<str> = format!("{}/{root_name}", origin.service).into();
    let version = origin.version.clone().unwrap_or_else(|| UNVERSIONED.into());
    let base_us = spans
        .iter()
        .map(|r| micros(r.span.start_time_unix_nano))
        .min()
        .unwrap_or(0);
    let end_us = spans
        .iter()
        .map(|r| micros(r.span.end_time_unix_nano))
        .max()
        .unwrap_or(base_us)
        .max(base_us);

    let currency: Arc<str> = prices.currency.as_str().into();
    let mut receipt = Receipt::new(currency);
    let mut node_ids: Vec<Arc<str>> = Vec::new();
    let mut node_index: HashMap<String, usize> = HashMap::new();
    let mut steps: Vec<Step> = Vec::with_capacity(spans.len());
    let mut of_span: Vec<usize> = Vec::with_capacity(spans.len());
    let mut records: Vec<SpanRecord> = Vec::with_capacity(spans.len());
    let mut attempts: Vec<u32> = Vec::new();
    let mut models: Vec<ModelUse> = Vec::new();
    let mut unpriced: Vec<Vec<String>> = Vec::new();
    let request_id = RequestId(trace_id);
    for r in &spans {
        let step = classify(&r.span);
        let id = node_id(&r.span.name);
        let n = match node_index.get(&id) {
            Some(&n) => n,
            None => {
                node_ids.push(id.as_str().into());
                attempts.push(0);
                unpriced.push(Vec::new());
                node_index.insert(id, node_ids.len() - 1);
                node_ids.len() - 1
            }
        };
        attempts[n] += 1;
        let node = node_ids[n].clone();
        let mut cost = Decimal::ZERO;
        if let (Some(model), Some(usage)) = (&step.model, &step.usage) {
            match prices.bill(&mut receipt, &node, model, usage) {
                Some(amount) => cost = amount,
                None if !unpriced[n].contains(model) => unpriced[n].push(model.clone()),
                None => {}
            }
            if !models.iter().any(|m| m.node == node && &m.model == model) {
                models.push(ModelUse {
                    node: node.clone(),
                    model: model.clone(),
                    version: None,
                });
            }
        }
        records.push(span_record(SpanParts {
            request_id,
            node,
            kind: step.kind.into(),
            attempt: attempts[n],
            received: r,
            base_us,
            step: &step,
            cost,
        }));
        of_span.push(n);
        steps.push(step);
    }

    let path = path(&spans, &parents, &of_span, &node_ids, &steps, base_us);
    let facts = facts(&node_ids, &of_span, &steps, &unpriced);
    let root_step = &steps[root];
    let error = root_step.failed.then(|| ErrorRecord {
        code: "span_error".into(),
        message: spans[root]
            .span
            .status
            .as_ref()
            .map(|s| s.message.clone())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| format!("span `{}` ended with status ERROR", spans[root].span.name)),
        node: Some(node_ids[of_span[root]].clone()),
        attempt: None,
        detail: None,
    });
    let text = explain::compose(&facts, &path, error.as_ref(), Lang::En);
    let input_summary = root_step
        .input
        .clone()
        .or_else(|| steps.iter().find_map(|s| s.input.clone()))
        .unwrap_or_default();
    let output_summary = root_step
        .output
        .clone()
        .or_else(|| steps.iter().rev().find_map(|s| s.output.clone()))
        .unwrap_or_default();
    let input_tokens = steps.iter().find_map(|s| s.usage.map(|u| u.prompt_total()));
    let record = RequestRecord {
        request_id,
        topology_id,
        version,
        started_at_us: base_us,
        ended_at_us: end_us,
        duration_us: end_us - base_us,
        status: if error.is_some() {
            RequestStatus::Failed
        } else {
            RequestStatus::Ok
        },
        degraded: false,
        error,
        path,
        labels: BTreeMap::new(),
        models,
        // The whole input's length (the summary is cut short): the store
        // records the critical path of requests that carry it, so reports
        // show it for ingested requests as for native ones. 0 when the
        // instrumentation recorded no input.
        input_chars: Some(input_chars(&spans[root].span)),
        input_tokens,
        input_summary,
        output_summary,
        receipt,
        explanation: Explanation {
            lang: Lang::En,
            text,
            facts,
        },
        worker: origin.service.clone(),
        span_count: u32::try_from(records.len()).unwrap_or(u32::MAX),
    };
    Built {
        record,
        spans: records,
    }
}

fn input_chars(span: &Span) -> u64 {
    crate::attrs::Attrs(&span.attributes)
        .first_str(&["input.value", "gen_ai.prompt"])
        .map_or(0, |s| s.chars().count() as u64)
}

struct SpanParts<'a> {
    request_id: RequestId,
    node: Arc<str>,
    kind: Arc<str>,
    attempt: u32,
    received: &'a Received,
    base_us: u64,
    step: &'a Step,
    cost: Decimal,
}

fn span_record(p: SpanParts<'_>) -> SpanRecord {
    let s = &p.received.span;
    let start = micros(s.start_time_unix_nano);
    let end = micros(s.end_time_unix_nano).max(start);
    let mut tags = Tags::new();
    tags.insert(Cow::Borrowed("otel.span_id"), hex(&s.span_id));
    if let Some(m) = &p.step.model {
        tags.insert(Cow::Borrowed("model"), m.clone());
    }
    if let Some(pv) = &p.step.provider {
        tags.insert(Cow::Borrowed("provider"), pv.clone());
    }
    if let Some(e) = &p.step.usage_error {
        tags.insert(Cow::Borrowed("usage_error"), e.clone());
    }
    let error = p.step.failed.then(|| ErrorRecord {
        code: "span_error".into(),
        message: s
            .status
            .as_ref()
            .map(|st| st.message.clone())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "ended with status ERROR".into()),
        node: None,
        attempt: None,
        detail: None,
    });
    SpanRecord {
        request_id: p.request_id,
        node: p.node,
        kind: p.kind,
        attempt: p.attempt,
        role: SpanRole::Primary,
        started_at_us: start,
        start_us: start - p.base_us.min(start),
        end_us: end - p.base_us.min(start),
        status: if p.step.failed {
            SpanStatus::Error
        } else {
            SpanStatus::Ok
        },
        error,
        tags,
        usage: Usage {
            wall_us: end - start,
            cpu_us: None,
            input_tokens: p.step.usage.map(|u| u.prompt_total()),
            output_tokens: p.step.usage.map(|u| u.completion_total()),
            tokens: p.step.usage.filter(|u| !u.is_plain()),
        },
        cost: p.cost,
        worker: p.received.origin.service.clone(),
        input_summary: p.step.input.as_deref().unwrap_or_default().into(),
        output_summary: p.step.output.as_deref().unwrap_or_default().into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(16), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn path(
    spans: &[Received],
    parents: &[Option<usize>],
    of_span: &[usize],
    node_ids: &[Arc<str>],
    steps: &[Step],
    base_us: u64,
) -> PathRecord {
    let mut nodes: Vec<PathNode> = Vec::with_capacity(node_ids.len());
    for (n, id) in node_ids.iter().enumerate() {
        let mine = || (0..spans.len()).filter(move |&i| of_span[i] == n);
        let start = mine()
            .map(|i| micros(spans[i].span.start_time_unix_nano))
            .min()
            .unwrap_or(base_us);
        let end = mine()
            .map(|i| micros(spans[i].span.end_time_unix_nano))
            .max()
            .unwrap_or(start)
            .max(start);
        let last_failed = mine().next_back().is_some_and(|i| steps[i].failed);
        let first = mine().next().unwrap_or(0);
        nodes.push(PathNode {
            id: id.clone(),
            kind: steps[first].kind.into(),
            status: if last_failed {
                NodeStatus::Failed
            } else {
                NodeStatus::Succeeded
            },
            start_us: Some(start - base_us),
            end_us: Some(end - base_us),
            duration_us: Some(end - start),
            attempts: u32::try_from(mine().count()).unwrap_or(u32::MAX),
            label: None,
            fallback: None,
            replaces: None,
        });
    }
    let mut edges: Vec<PathEdge> = Vec::new();
    let mut add = |from: usize, to: usize, why: &'static str| {
        if from == to {
            return;
        }
        let (f, t) = (&node_ids[from], &node_ids[to]);
        if !edges.iter().any(|e| &e.from == f && &e.to == t) {
            edges.push(PathEdge {
                from: f.clone(),
                to: t.clone(),
                condition: None,
                taken: true,
                why: Cow::Borrowed(why),
            });
        }
    };
    // Children by parent, in start order (spans are sorted by start).
    let mut last_child: HashMap<Option<usize>, usize> = HashMap::new();
    for (i, parent) in parents.iter().enumerate() {
        if let Some(p) = parent {
            add(of_span[*p], of_span[i], ENCLOSES);
        }
        if let Some(&prev) = last_child.get(parent)
            && spans[prev].span.end_time_unix_nano <= spans[i].span.start_time_unix_nano
        {
            add(of_span[prev], of_span[i], "ran after");
        }
        last_child.insert(*parent, i);
    }
    PathRecord {
        nodes,
        edges,
        loops: Vec::new(),
    }
}

fn facts(
    node_ids: &[Arc<str>],
    of_span: &[usize],
    steps: &[Step],
    unpriced: &[Vec<String>],
) -> Vec<NodeFacts> {
    let mut out: Vec<NodeFacts> = Vec::new();
    for (n, id) in node_ids.iter().enumerate() {
        let mut facts: Vec<Fact> = Vec::new();
        let mut missing_en: Vec<&str> = Vec::new();
        let mut missing_zh: Vec<&str> = Vec::new();
        let mut kind = "span";
        for (_, step) in steps.iter().enumerate().filter(|(i, _)| of_span[*i] == n) {
            kind = step.kind;
            for f in &step.facts {
                if !facts.contains(f) {
                    facts.push(f.clone());
                }
            }
            for (en, zh) in &step.missing {
                if !missing_en.contains(en) {
                    missing_en.push(en);
                    missing_zh.push(zh);
                }
            }
            if let Some(e) = &step.usage_error
                && !facts
                    .iter()
                    .any(|f| matches!(f, Fact::Note { en, .. } if en.contains(e.as_str())))
            {
                facts.push(Fact::Note {
                    en: format!("its token counts do not add up, so it was not billed: {e}"),
                    zh: format!("其 token 计数不一致，因此未计费：{e}"),
                });
            }
        }
        if !missing_en.is_empty() {
            facts.push(Fact::Note {
                en: format!(
                    "for `{id}` the instrumentation did not record {}",
                    missing_en.join(", ")
                ),
                zh: format!("`{id}` 的插桩未记录{}", missing_zh.join("、")),
            });
        }
        for model in &unpriced[n] {
            facts.push(Fact::Note {
                en: format!(
                    "`{model}` has no price in `[ingest.prices]`, so its tokens were counted but not billed"
                ),
                zh: format!("`{model}` 在 `[ingest.prices]` 中没有价格，其 token 已计数但未计费"),
            });
        }
        if !facts.is_empty() {
            out.push(NodeFacts {
                node: id.clone(),
                kind: kind.into(),
                facts,
            });
        }
    }
    out
}
