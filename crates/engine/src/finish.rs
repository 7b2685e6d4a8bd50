//! Turning a finished (or abandoned) request into its trace: the path with
//! every node's status and every edge's reason, the receipt, the explanation
//! and the output.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use glassbox_topology::NodeId;
use glassbox_trace::{
    ErrorRecord, Explanation, Fact, Lang, ModelUse, NodeFacts, NodeStatus, PathEdge, PathNode,
    PathRecord, Receipt, RequestRecord, RequestStatus, SpanRecord, SpanStatus, explain,
};
use serde_json::{Map, Value};

use crate::cost::{self, Quantities};
use crate::error::ExecError;
use crate::executor::{EState, NState, Outcome, St, Trace};
use crate::pipeline::Inner;
use crate::request::{RequestShared, summarize};

pub(crate) struct Assembly<'a> {
    pub inner: &'a Inner,
    pub req: &'a Arc<RequestShared>,
    pub nodes: &'a [NState],
    pub edges: &'a mut [EState],
    pub spans: Vec<Arc<SpanRecord>>,
    pub failure: Option<ExecError>,
    pub lang: Lang,
}

#[derive(Default, Clone, Copy)]
struct Agg {
    attempts: u32,
    start_us: Option<u64>,
    end_us: Option<u64>,
    last_ok: bool,
    q: Quantities,
}

pub(crate) fn assemble(a: Assembly<'_>) -> Outcome {
    let topology = &a.inner.topology;
    let ids = &a.inner.ids;
    let n = topology.nodes.len();

    let mut aggs = vec![Agg::default(); n];
    for span in &a.spans {
        let Some(id) = topology.node_id(&span.node) else {
            continue;
        };
        let agg = &mut aggs[id.0];
        agg.attempts += 1;
        agg.start_us = Some(agg.start_us.map_or(span.start_us, |s| s.min(span.start_us)));
        agg.end_us = Some(agg.end_us.map_or(span.end_us, |e| e.max(span.end_us)));
        agg.last_ok = span.status == SpanStatus::Ok;
        agg.q.add(&span.usage);
    }

    let failure = a.failure.map(|f| name_deadline(f, &a.spans));
    let status = match &failure {
        None => RequestStatus::Ok,
        Some(ExecError::Cancelled) => RequestStatus::Cancelled,
        Some(_) => RequestStatus::Failed,
    };

    // Which node each used fallback replaced.
    let mut replaces: Vec<Option<NodeId>> = vec![None; n];
    for (i, s) in a.nodes.iter().enumerate() {
        if let Some(f) = s.fallback {
            replaces[f.0] = Some(NodeId(i));
        }
    }

    let mut path = PathRecord {
        nodes: Vec::with_capacity(n),
        edges: Vec::with_capacity(a.edges.len()),
    };
    let mut receipt = Receipt::new(Arc::from(topology.currency.as_str()));
    let mut labels = BTreeMap::new();
    let mut facts = Vec::new();
    let mut models = Vec::new();
    let mut degraded = false;
    for &id in topology.topological_order() {
        let node = topology.node(id);
        let state = &a.nodes[id.0];
        let agg = aggs[id.0];
        let slot = a.req.slot(id);
        let status = if node.is_fallback {
            match (agg.attempts, agg.last_ok) {
                (0, _) => NodeStatus::NotRun,
                (_, true) => NodeStatus::Succeeded,
                (_, false) if status == RequestStatus::Cancelled => NodeStatus::Cancelled,
                (_, false) => NodeStatus::Failed,
            }
        } else {
            match state.st {
                St::Waiting => NodeStatus::NotRun,
                St::Running => NodeStatus::Cancelled,
                St::Succeeded => NodeStatus::Succeeded,
                St::FellBack => NodeStatus::FellBack,
                St::Skipped => NodeStatus::Skipped,
                St::Failed => NodeStatus::Failed,
            }
        };
        degraded |= status == NodeStatus::FellBack;
        let ran_ok = matches!(status, NodeStatus::Succeeded | NodeStatus::FellBack);
        let label = slot
            .as_ref()
            .filter(|_| ran_ok)
            .and_then(|s| s.output.label.clone());
        if let Some(l) = &label {
            labels.insert(ids[id.0].clone(), l.clone());
        }
        path.nodes.push(PathNode {
            id: ids[id.0].clone(),
            kind: a.inner.kinds[id.0].clone(),
            status,
            start_us: agg.start_us,
            end_us: agg.end_us,
            duration_us: agg
                .start_us
                .zip(agg.end_us)
                .map(|(s, e)| e.saturating_sub(s)),
            attempts: agg.attempts,
            label,
            fallback: state.fallback.map(|f| ids[f.0].clone()),
            replaces: replaces[id.0].map(|r| ids[r.0].clone()),
        });
        if agg.attempts > 0 {
            cost::bill(
                &mut receipt,
                &ids[id.0],
                &node.resource.prices,
                node.resource.kind,
                &agg.q,
            );
        }
        if node.is_fallback {
            continue;
        }
        let mut node_facts = state.facts.clone();
        if let Some(s) = slot.as_ref().filter(|_| ran_ok) {
            node_facts.extend(s.output.facts.iter().cloned());
        }
        for f in &node_facts {
            if let Fact::Generated { model, version, .. } = f {
                models.push(ModelUse {
                    node: ids[id.0].clone(),
                    model: model.clone(),
                    version: version.clone(),
                });
            }
        }
        if !node_facts.is_empty() {
            facts.push(NodeFacts {
                node: ids[id.0].clone(),
                kind: a.inner.kinds[id.0].clone(),
                facts: node_facts,
            });
        }
    }

    for (i, edge) in topology.edges.iter().enumerate() {
        let e = &mut a.edges[i];
        if !e.resolved {
            e.why = Cow::Borrowed(match a.nodes[edge.from.0].st {
                St::Running => "not reached: the request ended while the source ran",
                St::Failed => "source failed",
                _ => "not reached: the request ended first",
            });
        }
        path.edges.push(PathEdge {
            from: ids[edge.from.0].clone(),
            to: ids[edge.to.0].clone(),
            condition: a.inner.cond_text[i].clone(),
            taken: e.taken,
            why: std::mem::take(&mut e.why),
        });
    }

    let output = output_of(a.inner, a.req, a.nodes);
    let error = failure.as_ref().map(|f| ErrorRecord {
        code: f.code().to_string(),
        message: glassbox_topology::secret::mask_text(&f.to_string()).into_owned(),
        node: f.node().map(Arc::from),
        attempt: f.attempt(),
        detail: None,
    });
    let text = explain::compose(&facts, &path, error.as_ref(), a.lang);
    let duration_us = a.req.offset_us();
    let record = RequestRecord {
        request_id: a.req.request_id,
        topology_id: Arc::from(topology.id.as_str()),
        version: Arc::from(topology.version.as_str()),
        started_at_us: a.req.started_at_us,
        ended_at_us: a.req.started_at_us.saturating_add(duration_us),
        duration_us,
        status,
        degraded,
        error,
        path,
        labels,
        models,
        input_summary: a.req.input_summary.to_string(),
        output_summary: summarize(&output, a.req.summary_chars),
        receipt,
        explanation: Explanation {
            lang: a.lang,
            text,
            facts,
        },
        worker: a.req.worker.clone(),
        span_count: u32::try_from(a.spans.len()).unwrap_or(u32::MAX),
    };
    let result = match failure {
        None => Ok(output),
        Some(err) => Err(err),
    };
    Outcome {
        trace: Trace {
            record: Arc::new(record),
            spans: a.spans,
        },
        result,
    }
}

/// Names the node and attempt a deadline cut short (known only once the
/// in-flight attempts have recorded their spans).
fn name_deadline(f: ExecError, spans: &[Arc<SpanRecord>]) -> ExecError {
    match f {
        ExecError::DeadlineExceeded {
            deadline,
            node: None,
            attempt: None,
        } => {
            let hit = spans.iter().find(|s| {
                s.status == SpanStatus::Timeout
                    && s.error
                        .as_ref()
                        .is_some_and(|e| e.code == "deadline_exceeded")
            });
            ExecError::DeadlineExceeded {
                deadline,
                node: hit.map(|s| s.node.to_string()),
                attempt: hit.map(|s| s.attempt),
            }
        }
        other => other,
    }
}

/// The request's output: the value of the exit node that ran, or an object
/// of them by id when several did.
fn output_of(inner: &Inner, req: &RequestShared, nodes: &[NState]) -> Value {
    let mut exits: Vec<(NodeId, Value)> = inner
        .topology
        .exits()
        .filter(|id| matches!(nodes[id.0].st, St::Succeeded | St::FellBack))
        .filter_map(|id| req.output(id).map(|o| (id, o.value.clone())))
        .collect();
    match exits.len() {
        0 => Value::Null,
        1 => exits.pop().map(|(_, v)| v).unwrap_or(Value::Null),
        _ => Value::Object(
            exits
                .into_iter()
                .map(|(id, v)| (inner.ids[id.0].to_string(), v))
                .collect::<Map<_, _>>(),
        ),
    }
}
