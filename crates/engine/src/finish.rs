//! Turning a finished (or abandoned) request into its trace: the path with
//! every node's status and every edge's reason, the receipt, the facts and
//! explanation, and the output.
//!
//! [`assemble`] walks the nodes once in topological order, works out each
//! node's status from the run state and its spans, and feeds three builders:
//! [`PathBuilder`] (nodes, edges, labels), [`ReceiptBuilder`] (what each node
//! cost) and [`FactsBuilder`] (what the explanation says and which models
//! answered). One walk, so each node's output is looked up once.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use glassbox_topology::NodeId;
use glassbox_trace::{
    ErrorRecord, Explanation, Fact, Lang, ModelUse, NodeFacts, NodeStatus, PathEdge, PathNode,
    PathRecord, Receipt, RequestRecord, RequestStatus, SpanRecord, SpanStatus, explain,
};
use serde_json::{Map, Value};

use crate::built::BuiltPipeline;
use crate::cost::{self, Quantities};
use crate::error::ExecError;
use crate::outcome::{Outcome, Trace};
use crate::output::NodeOutput;
use crate::request::{RequestShared, summarize};
use crate::run_state::{NodeProgress, NodeState, RunState};

/// Everything a request left when it ended, for [`assemble`].
pub(crate) struct EndedRun<'a> {
    pub built: &'a BuiltPipeline,
    pub req: &'a Arc<RequestShared>,
    /// Taken from: edge reasons move into the path, engine facts into the
    /// explanation (the run is over).
    pub state: &'a mut RunState,
    pub spans: Vec<Arc<SpanRecord>>,
    pub failure: Option<ExecError>,
    pub lang: Lang,
    /// The caller's facts about the request (told before the nodes').
    pub facts: Vec<NodeFacts>,
}

/// One node's attempts, summed over its spans.
#[derive(Default, Clone, Copy)]
struct NodeSpanTotals {
    attempts: u32,
    first_start_us: Option<u64>,
    last_end_us: Option<u64>,
    /// Whether the last recorded attempt succeeded.
    last_ok: bool,
    usage: Quantities,
}

/// Builds the request's trace from how it ended.
pub(crate) fn assemble(run: EndedRun<'_>) -> Outcome {
    let EndedRun {
        built,
        req,
        state,
        spans,
        failure,
        lang,
        facts: request_facts,
    } = run;
    let topology = &built.topology;
    let totals = span_totals(built, &spans);
    let failure = failure.map(|f| name_deadline(f, built, req));
    let status = match &failure {
        None => RequestStatus::Ok,
        Some(ExecError::Cancelled) => RequestStatus::Cancelled,
        Some(_) => RequestStatus::Failed,
    };

    let mut path = PathBuilder::new(built, state);
    let mut receipt = ReceiptBuilder::new(built);
    let mut facts = FactsBuilder::new(built);
    for &id in topology.topological_order() {
        let node = &mut state.nodes[id.0];
        let node_status = node_status(topology.node(id).is_fallback, node, &totals[id.0], status);
        let ran_ok = matches!(node_status, NodeStatus::Succeeded | NodeStatus::FellBack);
        let output = if ran_ok { req.output(id) } else { None };
        path.node(id, node_status, &totals[id.0], node, output.as_deref());
        receipt.node(id, &totals[id.0], &spans);
        facts.node(id, node, output.as_deref());
    }
    let (mut path, labels, degraded) = path.finish(state);
    path.loops = topology
        .loops()
        .iter()
        .zip(&state.loops)
        .filter_map(|(l, ls)| crate::loops::record(topology, &built.node_ids, l, ls, &spans))
        .collect();
    let receipt = receipt.finish();
    let (node_facts, models) = facts.finish();
    let mut facts = request_facts;
    facts.extend(node_facts);

    let output = output_of(built, req, &state.nodes);
    let error = failure.as_ref().map(|f| ErrorRecord {
        code: f.code().to_string(),
        message: glassbox_topology::secret::mask_text(&f.to_string()).into_owned(),
        node: f.node().map(Arc::from),
        attempt: f.attempt(),
        detail: None,
    });
    let text = explain::compose(&facts, &path, error.as_ref(), lang);
    let duration_us = req.offset_us();
    let record = RequestRecord {
        request_id: req.request_id,
        topology_id: Arc::from(topology.id.as_str()),
        version: Arc::from(topology.version.as_str()),
        started_at_us: req.started_at_us,
        ended_at_us: req.started_at_us.saturating_add(duration_us),
        duration_us,
        status,
        degraded,
        error,
        path,
        labels,
        models,
        input_summary: req.input_summary.to_string(),
        input_chars: Some(req.input_chars),
        input_tokens: input_tokens(built, &spans),
        output_summary: summarize(&output, req.summary_chars),
        receipt,
        explanation: Explanation { lang, text, facts },
        worker: req.worker.clone(),
        span_count: u32::try_from(spans.len()).unwrap_or(u32::MAX),
    };
    let result = match failure {
        None => Ok(output),
        Some(err) => Err(err),
    };
    Outcome {
        trace: Trace {
            record: Arc::new(record),
            spans,
        },
        result,
    }
}

/// Tokens of the request's input, as counted by the first node that read it
/// directly (an entry node) and counted its input tokens: an embedding, a
/// semantic router, a model given the input itself.
fn input_tokens(built: &BuiltPipeline, spans: &[Arc<SpanRecord>]) -> Option<u64> {
    let topology = &built.topology;
    spans
        .iter()
        .filter(|s| s.usage.input_tokens.is_some())
        .filter(|s| {
            topology
                .node_id(&s.node)
                .is_some_and(|id| topology.forward_incoming(id).next().is_none())
        })
        .min_by_key(|s| s.start_us)
        .and_then(|s| s.usage.input_tokens)
}

/// Each node's attempts, summed from the spans (indexed by node).
fn span_totals(built: &BuiltPipeline, spans: &[Arc<SpanRecord>]) -> Vec<NodeSpanTotals> {
    let mut totals = vec![NodeSpanTotals::default(); built.topology.nodes.len()];
    for span in spans {
        let Some(id) = built.topology.node_id(&span.node) else {
            continue;
        };
        let t = &mut totals[id.0];
        t.attempts += 1;
        t.first_start_us = Some(
            t.first_start_us
                .map_or(span.start_us, |s| s.min(span.start_us)),
        );
        t.last_end_us = Some(t.last_end_us.map_or(span.end_us, |e| e.max(span.end_us)));
        t.last_ok = span.status == SpanStatus::Ok;
        if span.tags.get(crate::cache::TAG).map(String::as_str) == Some(crate::cache::HIT) {
            t.usage.add_cache_hit();
        } else {
            t.usage.add(&span.usage);
        }
    }
    totals
}

/// A node's status in the path. A fallback node has no run state of its
/// own (it runs inside the node it replaces), so its spans tell.
fn node_status(
    is_fallback: bool,
    state: &NodeState,
    totals: &NodeSpanTotals,
    request: RequestStatus,
) -> NodeStatus {
    if is_fallback {
        return match (totals.attempts, totals.last_ok) {
            (0, _) => NodeStatus::NotRun,
            (_, true) => NodeStatus::Succeeded,
            (_, false) if request == RequestStatus::Cancelled => NodeStatus::Cancelled,
            (_, false) => NodeStatus::Failed,
        };
    }
    match state.progress {
        NodeProgress::Waiting => NodeStatus::NotRun,
        NodeProgress::Running => NodeStatus::Cancelled,
        NodeProgress::Succeeded => NodeStatus::Succeeded,
        NodeProgress::FellBack => NodeStatus::FellBack,
        // Skipped in a loop's last iteration after running in an earlier one.
        NodeProgress::Skipped if totals.attempts > 0 && totals.last_ok => NodeStatus::Succeeded,
        NodeProgress::Skipped => NodeStatus::Skipped,
        NodeProgress::Failed => NodeStatus::Failed,
    }
}

/// The path record: one entry per node (in topological order) and per edge,
/// and the labels the nodes that ran emitted.
struct PathBuilder<'a> {
    built: &'a BuiltPipeline,
    path: PathRecord,
    labels: BTreeMap<Arc<str>, String>,
    degraded: bool,
    /// Which node each fallback that ran stood in for (indexed by node).
    replaces: Vec<Option<NodeId>>,
}

impl<'a> PathBuilder<'a> {
    fn new(built: &'a BuiltPipeline, state: &RunState) -> PathBuilder<'a> {
        let mut replaces = vec![None; built.topology.nodes.len()];
        for (i, s) in state.nodes.iter().enumerate() {
            if let Some(f) = s.fallback {
                replaces[f.0] = Some(NodeId(i));
            }
        }
        PathBuilder {
            built,
            path: PathRecord {
                nodes: Vec::with_capacity(built.topology.nodes.len()),
                edges: Vec::with_capacity(built.topology.edges.len()),
                loops: Vec::new(),
            },
            labels: BTreeMap::new(),
            degraded: false,
            replaces,
        }
    }

    /// Adds a node; `output` is its output when it ran successfully.
    fn node(
        &mut self,
        id: NodeId,
        status: NodeStatus,
        totals: &NodeSpanTotals,
        state: &NodeState,
        output: Option<&NodeOutput>,
    ) {
        let ids = &self.built.node_ids;
        self.degraded |= status == NodeStatus::FellBack;
        let label = output.and_then(|o| o.label.clone());
        if let Some(l) = &label {
            self.labels.insert(ids[id.0].clone(), l.clone());
        }
        self.path.nodes.push(PathNode {
            id: ids[id.0].clone(),
            kind: self.built.node_kinds[id.0].clone(),
            status,
            start_us: totals.first_start_us,
            end_us: totals.last_end_us,
            duration_us: totals
                .first_start_us
                .zip(totals.last_end_us)
                .map(|(s, e)| e.saturating_sub(s)),
            attempts: totals.attempts,
            label,
            fallback: state.fallback.map(|f| ids[f.0].clone()),
            replaces: self.replaces[id.0].map(|r| ids[r.0].clone()),
        });
    }

    /// Adds every edge with its reason (moved out of the run state; edges
    /// the request never resolved get one here) and returns the path, the
    /// labels and whether any fallback stood in.
    fn finish(mut self, state: &mut RunState) -> (PathRecord, BTreeMap<Arc<str>, String>, bool) {
        let ids = &self.built.node_ids;
        for (i, edge) in self.built.topology.edges.iter().enumerate() {
            let e = &mut state.edges[i];
            if !e.resolved {
                e.why = Cow::Borrowed(match state.nodes[edge.from.0].progress {
                    NodeProgress::Running => "not reached: the request ended while the source ran",
                    NodeProgress::Failed => "source failed",
                    _ => "not reached: the request ended first",
                });
            }
            self.path.edges.push(PathEdge {
                from: ids[edge.from.0].clone(),
                to: ids[edge.to.0].clone(),
                condition: self.built.condition_texts[i].clone(),
                taken: e.taken,
                why: std::mem::take(&mut e.why),
            });
        }
        (self.path, self.labels, self.degraded)
    }
}

/// The receipt: each node that made an attempt, billed for its summed usage.
struct ReceiptBuilder<'a> {
    built: &'a BuiltPipeline,
    receipt: Receipt,
}

impl<'a> ReceiptBuilder<'a> {
    fn new(built: &'a BuiltPipeline) -> ReceiptBuilder<'a> {
        ReceiptBuilder {
            built,
            receipt: Receipt::new(Arc::from(built.topology.currency.as_str())),
        }
    }

    fn node(&mut self, id: NodeId, totals: &NodeSpanTotals, spans: &[Arc<SpanRecord>]) {
        if totals.attempts == 0 {
            return;
        }
        let name = &self.built.node_ids[id.0];
        let mut rounds: Vec<u32> = spans
            .iter()
            .filter(|s| s.node == *name)
            .filter_map(|s| glassbox_trace::span_iteration(s))
            .collect();
        rounds.sort_unstable();
        rounds.dedup();
        if rounds.is_empty() {
            self.bill(id, &totals.usage, spans, None);
            return;
        }
        // A node in a loop's body: billed iteration by iteration.
        for k in rounds {
            let mut usage = Quantities::default();
            for s in spans
                .iter()
                .filter(|s| s.node == *name && glassbox_trace::span_iteration(s) == Some(k))
            {
                if s.tags.get(crate::cache::TAG).map(String::as_str) == Some(crate::cache::HIT) {
                    usage.add_cache_hit();
                } else {
                    usage.add(&s.usage);
                }
            }
            let from = self.receipt.lines.len();
            self.bill(id, &usage, spans, Some(k));
            self.receipt.mark_iteration(from, k);
        }
    }

    /// Bills `usage` of node `id` (in loop iteration `round`, if given).
    fn bill(
        &mut self,
        id: NodeId,
        usage: &Quantities,
        spans: &[Arc<SpanRecord>],
        round: Option<u32>,
    ) {
        let resource = &self.built.topology.node(id).resource;
        let name = &self.built.node_ids[id.0];
        let steps: Vec<&SpanRecord> = spans
            .iter()
            .filter(|s| s.role.step_of() == Some(&**name))
            .filter(|s| round.is_none() || glassbox_trace::span_iteration(s) == round)
            .map(|s| &**s)
            .collect();
        if !steps.is_empty() {
            crate::steps::bill(
                &mut self.receipt,
                name,
                &resource.prices,
                resource.kind,
                usage,
                &steps,
            );
            return;
        }
        cost::bill(
            &mut self.receipt,
            name,
            &resource.prices,
            resource.kind,
            usage,
        );
    }

    fn finish(self) -> Receipt {
        self.receipt
    }
}

/// The explanation's facts, per node in path order (the engine's own first,
/// then the node's), and the models that generated text.
struct FactsBuilder<'a> {
    built: &'a BuiltPipeline,
    facts: Vec<NodeFacts>,
    models: Vec<ModelUse>,
}

impl<'a> FactsBuilder<'a> {
    fn new(built: &'a BuiltPipeline) -> FactsBuilder<'a> {
        FactsBuilder {
            built,
            facts: Vec::new(),
            models: Vec::new(),
        }
    }

    /// Adds a node's facts; `output` is its output when it ran successfully.
    /// A fallback's facts are told by the node it replaced.
    fn node(&mut self, id: NodeId, state: &mut NodeState, output: Option<&NodeOutput>) {
        if self.built.topology.node(id).is_fallback {
            return;
        }
        let node = &self.built.node_ids[id.0];
        let mut facts = std::mem::take(&mut state.engine_facts);
        if let Some(o) = output {
            facts.extend(o.facts.iter().cloned());
        }
        for f in &facts {
            if let Fact::Generated { model, version, .. } = f {
                self.models.push(ModelUse {
                    node: node.clone(),
                    model: model.clone(),
                    version: version.clone(),
                });
            }
        }
        if !facts.is_empty() {
            self.facts.push(NodeFacts {
                node: node.clone(),
                kind: self.built.node_kinds[id.0].clone(),
                facts,
            });
        }
    }

    fn finish(self) -> (Vec<NodeFacts>, Vec<ModelUse>) {
        (self.facts, self.models)
    }
}

/// Names the node and attempt a deadline cut short (known only once the
/// in-flight attempts have been dropped: the first one marks itself).
fn name_deadline(f: ExecError, built: &BuiltPipeline, req: &RequestShared) -> ExecError {
    match f {
        ExecError::DeadlineExceeded {
            deadline,
            node: None,
            attempt: None,
        } => {
            let cut = req.deadline_cut();
            ExecError::DeadlineExceeded {
                deadline,
                node: cut.map(|c| built.node_ids[c.node.0].to_string()),
                attempt: cut.map(|c| c.attempt),
            }
        }
        other => other,
    }
}

/// The request's output: the value of the exit node that ran, or an object
/// of them by id when several did.
fn output_of(built: &BuiltPipeline, req: &RequestShared, nodes: &[NodeState]) -> Value {
    let mut exits: Vec<(NodeId, Value)> = built
        .topology
        .exits()
        .filter(|id| {
            matches!(
                nodes[id.0].progress,
                NodeProgress::Succeeded | NodeProgress::FellBack
            )
        })
        .filter_map(|id| req.output(id).map(|o| (id, o.value.clone())))
        .collect();
    match exits.len() {
        0 => Value::Null,
        1 => exits.pop().map(|(_, v)| v).unwrap_or(Value::Null),
        _ => Value::Object(
            exits
                .into_iter()
                .map(|(id, v)| (built.node_ids[id.0].to_string(), v))
                .collect::<Map<_, _>>(),
        ),
    }
}
