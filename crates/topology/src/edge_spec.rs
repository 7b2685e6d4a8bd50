//! Edges as written, including the bound that makes an edge a loop's back
//! edge. Part of the format's single definition ([`crate::spec`]): the
//! decoder reads exactly these fields and the JSON Schema derives from them.

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;

use crate::decode::{Cx, Obj, Spanned};
use crate::value::Value;

/// Most times a loop's body may run (also in the schema and `docs/topology.md`).
pub const MAX_LOOP_ITERATIONS: u64 = 1000;
/// Largest token budget a loop may set.
pub const MAX_LOOP_TOKENS: u64 = 1_000_000_000;
/// Longest time budget a loop may set (as a node's longest timeout).
pub const MAX_LOOP_TIME_MS: u64 = 3_600_000;

/// A directed edge.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EdgeSpec {
    /// Source node id.
    pub from: Spanned<String>,
    /// Target node id.
    pub to: Spanned<String>,
    /// When the edge is taken. A bare identifier is a label the source node
    /// emits (e.g. `need_retrieval`); anything else is a CEL expression over
    /// `input`, `outputs` and `labels`, e.g. `size(outputs.retrieve.hits) > 5`.
    /// No condition: taken whenever the source succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Spanned<String>>,
    /// What the edge means, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// Makes this edge a loop's back edge: it goes back to a node that leads
    /// to its source, and while its condition holds and the bound allows,
    /// the nodes between them (the loop's body) run again. Every cycle in a
    /// topology must go through an edge with a bound.
    #[serde(rename = "loop", skip_serializing_if = "Option::is_none")]
    pub bound: Option<LoopSpec>,
    /// Span of the whole edge entry.
    #[serde(skip)]
    #[schemars(skip)]
    pub span: crate::source::Span,
    /// Position in the `edges` list as written.
    #[serde(skip)]
    #[schemars(skip)]
    pub index: usize,
}

/// The bound of a loop: the body runs at most `max_iterations` times, and
/// no new iteration starts once a budget is spent. Budgets are checked
/// when the back edge is reached; an iteration already running finishes.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LoopSpec {
    /// Most times the body runs, the first time included (1..=1000). Required.
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Spanned<u64>,
    /// Tokens (input and output) the body's nodes may use over all
    /// iterations before no new one starts (1..=1000000000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000_000))]
    pub max_tokens: Option<Spanned<u64>>,
    /// What the body's nodes may cost over all iterations, in the
    /// topology's currency, before no new one starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub max_cost: Option<Spanned<Decimal>>,
    /// Wall time since the loop's first iteration began after which no new
    /// one starts, in milliseconds (1..=3600000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub max_time_ms: Option<Spanned<u64>>,
    /// Span of the whole `loop` entry.
    #[serde(skip)]
    #[schemars(skip)]
    pub span: crate::source::Span,
}

pub(crate) const EDGE_FIELDS: &[&str] = &["from", "to", "condition", "description", "loop"];
pub(crate) const LOOP_FIELDS: &[&str] =
    &["max_iterations", "max_tokens", "max_cost", "max_time_ms"];

impl EdgeSpec {
    pub(crate) fn decode(value: &Value, index: usize, cx: &mut Cx<'_>) -> Option<EdgeSpec> {
        let obj = Obj::expect(value, cx, "an edge")?;
        obj.deny_unknown(cx, EDGE_FIELDS);
        let from = obj.req_str(cx, "from", "name the source node id in `from`");
        let to = obj.req_str(cx, "to", "name the target node id in `to`");
        let condition = obj.str(cx, "condition");
        let description = obj.str(cx, "description");
        let bound = obj
            .obj(cx, "loop")
            .and_then(|o| LoopSpec::decode(o, &mut cx.field("loop")));
        Some(EdgeSpec {
            from: from?,
            to: to?,
            condition,
            description,
            bound,
            span: value.span,
            index,
        })
    }
}

impl LoopSpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> Option<LoopSpec> {
        obj.deny_unknown(cx, LOOP_FIELDS);
        let max_iterations = obj.uint(cx, "max_iterations", 1, MAX_LOOP_ITERATIONS);
        if obj.get("max_iterations").is_none() {
            obj.missing(
                cx,
                "max_iterations",
                "a loop must be bounded: say how many times its body may run at most, e.g. `loop: {max_iterations: 3}`",
            );
        }
        Some(LoopSpec {
            // A missing or bad bound was reported; the topology is not
            // built with errors, so this placeholder never runs.
            max_iterations: max_iterations.unwrap_or_else(|| Spanned::new(1, obj.span)),
            max_tokens: obj.uint(cx, "max_tokens", 1, MAX_LOOP_TOKENS),
            max_cost: obj.price(cx, "max_cost"),
            max_time_ms: obj.uint(cx, "max_time_ms", 1, MAX_LOOP_TIME_MS),
            span: obj.span,
        })
    }
}
