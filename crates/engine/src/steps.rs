//! Steps inside an attempt (an agent's model and tool calls, see
//! [`Step`]): each becomes a span of role `step`, and the receipt bills
//! the node's tokens and the steps' own costs step by step.
//!
//! A step span's node is `ID#N` (no node of the topology has a `#` in its
//! id), so everything that reads spans per node (path, critical path,
//! diff, totals) leaves step spans out; they itemise the attempt of `ID`,
//! whose span carries their tokens and costs.

use std::sync::Arc;

use glassbox_topology::{NodeId, Prices, ResourceKind};
use glassbox_trace::{
    ErrorRecord, Receipt, SpanRecord, SpanRole, SpanStatus, Tags, TokenUsage, Usage,
};
use rust_decimal::Decimal;

use crate::cost::{self, Quantities, class_prices};
use crate::output::Step;
use crate::request::{RequestShared, summarize};

/// The steps' own costs (beyond the node's prices), for the attempt's span.
pub(crate) fn extra_cost(steps: &[Step]) -> Decimal {
    steps
        .iter()
        .filter_map(|s| s.cost)
        .fold(Decimal::ZERO, Decimal::saturating_add)
}

/// What a step's tokens cost at the node's token prices.
fn token_cost(prices: &Prices, tokens: &TokenUsage) -> Decimal {
    class_prices(prices)
        .lines(tokens)
        .into_iter()
        .fold(Decimal::ZERO, |acc, (_, q, p)| {
            acc.saturating_add(q.saturating_mul(p))
        })
}

fn plain(input: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input,
        output,
        ..TokenUsage::default()
    }
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Records one span per step of attempt `attempt` of `node`.
pub(crate) fn record(
    req: &RequestShared,
    node: NodeId,
    attempt: u32,
    worker: &Arc<str>,
    steps: &[Step],
) {
    let id = &req.ids[node.0];
    let kind = &req.kinds[node.0];
    let prices = &req.topology.node(node).resource.prices;
    let start = req.start.into_std();
    for (i, step) in steps.iter().enumerate() {
        let start_us = micros(step.started.saturating_duration_since(start));
        let end_us = micros(step.ended.saturating_duration_since(start)).max(start_us);
        let tokens = step.tokens.map(|(i, o)| plain(i, o));
        let cost = tokens
            .map_or(Decimal::ZERO, |t| token_cost(prices, &t))
            .saturating_add(step.cost.unwrap_or(Decimal::ZERO));
        let mut tags = Tags::new();
        tags.insert("iteration".into(), step.iteration.to_string());
        if let Some(k) = req.iteration(node) {
            tags.insert(glassbox_trace::ITERATION_TAG.into(), k.to_string());
        }
        tags.insert(
            // A model call, or the embedding model that picked the tools.
            if matches!(step.kind, "model" | "pick") {
                "model"
            } else {
                "tool"
            }
            .into(),
            step.name.clone(),
        );
        req.record_span(SpanRecord {
            request_id: req.request_id,
            node: format!("{id}#{}", i + 1).into(),
            kind: format!("{kind}.{}", step.kind).into(),
            attempt,
            role: SpanRole::Step { of: id.clone() },
            started_at_us: req.started_at_us.saturating_add(start_us),
            start_us,
            end_us,
            status: if step.error.is_some() {
                SpanStatus::Error
            } else {
                SpanStatus::Ok
            },
            error: step.error.as_ref().map(|e| ErrorRecord {
                code: format!("{}_failed", step.kind),
                message: glassbox_topology::secret::mask_text(e).into_owned(),
                node: Some(id.clone()),
                attempt: Some(attempt),
                detail: None,
            }),
            tags,
            usage: Usage {
                wall_us: end_us - start_us,
                cpu_us: None,
                input_tokens: step.tokens.map(|t| t.0),
                output_tokens: step.tokens.map(|t| t.1),
                tokens: None,
            },
            cost,
            worker: worker.clone(),
            input_summary: summarize(&step.input, req.summary_chars).into(),
            output_summary: summarize(&step.output, req.summary_chars).into(),
        });
    }
}

/// Bills a node whose attempts had steps: its calls, CPU time and any
/// tokens no step accounts for on the node's own lines, then each step's
/// tokens and own cost on lines naming the step. The same total as
/// billing the node whole, plus the steps' own costs.
pub(crate) fn bill(
    receipt: &mut Receipt,
    node: &Arc<str>,
    prices: &Prices,
    kind: ResourceKind,
    q: &Quantities,
    steps: &[&SpanRecord],
) {
    let (mut step_in, mut step_out) = (0u64, 0u64);
    for s in steps {
        step_in += s.usage.input_tokens.unwrap_or(0);
        step_out += s.usage.output_tokens.unwrap_or(0);
    }
    let mut own = *q;
    own.tokens.input = own.tokens.input.saturating_sub(step_in);
    own.tokens.output = own.tokens.output.saturating_sub(step_out);
    cost::bill(receipt, node, prices, kind, &own);
    for s in steps {
        let tokens = plain(
            s.usage.input_tokens.unwrap_or(0),
            s.usage.output_tokens.unwrap_or(0),
        );
        for (unit, quantity, price) in class_prices(prices).lines(&tokens) {
            receipt.push_step(node.clone(), s.node.clone(), unit, quantity, price);
        }
        let beyond = s.cost.saturating_sub(token_cost(prices, &tokens));
        if beyond > Decimal::ZERO {
            receipt.push_step(
                node.clone(),
                s.node.clone(),
                glassbox_trace::Unit::Call,
                Decimal::ONE,
                beyond,
            );
        }
    }
}
