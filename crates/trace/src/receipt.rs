//! Receipts: what one request cost, line by line, node by node.
//!
//! Every amount is `quantity × unit_price` in exact decimal arithmetic and the
//! total is the sum of the lines, so a receipt always adds up; the only way to
//! add a line is [`Receipt::push`], which keeps that invariant.

use std::fmt;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// What a receipt line counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Unit {
    /// One call (one attempt) of a node, priced by `cost_per_call`.
    #[serde(rename = "call")]
    Call,
    /// Thread CPU milliseconds, priced by `cost_per_cpu_ms`.
    #[serde(rename = "cpu_ms")]
    CpuMs,
    /// Thousands of input (prompt) tokens.
    #[serde(rename = "1k_input_tokens")]
    InputTokens1k,
    /// Thousands of output (generated) tokens.
    #[serde(rename = "1k_output_tokens")]
    OutputTokens1k,
    /// Requests a node's response cache answered (the node was not called);
    /// priced at zero.
    #[serde(rename = "cache_hit")]
    CacheHit,
    /// Thousands of prompt tokens served from a provider's prompt cache.
    #[serde(rename = "1k_cached_input_tokens")]
    CachedInputTokens1k,
    /// Thousands of prompt tokens written into a provider's prompt cache.
    #[serde(rename = "1k_cache_creation_tokens")]
    CacheCreationTokens1k,
    /// Thousands of reasoning ("thinking") tokens.
    #[serde(rename = "1k_reasoning_tokens")]
    ReasoningTokens1k,
    /// Thousands of audio prompt tokens.
    #[serde(rename = "1k_audio_input_tokens")]
    AudioInputTokens1k,
    /// Thousands of audio generated tokens.
    #[serde(rename = "1k_audio_output_tokens")]
    AudioOutputTokens1k,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Call => "call",
            Unit::CpuMs => "cpu_ms",
            Unit::InputTokens1k => "1k_input_tokens",
            Unit::OutputTokens1k => "1k_output_tokens",
            Unit::CacheHit => "cache_hit",
            Unit::CachedInputTokens1k => "1k_cached_input_tokens",
            Unit::CacheCreationTokens1k => "1k_cache_creation_tokens",
            Unit::ReasoningTokens1k => "1k_reasoning_tokens",
            Unit::AudioInputTokens1k => "1k_audio_input_tokens",
            Unit::AudioOutputTokens1k => "1k_audio_output_tokens",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line: `quantity` of `unit` at `unit_price` for `node`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptLine {
    pub node: Arc<str>,
    pub unit: Unit,
    pub quantity: Decimal,
    pub unit_price: Decimal,
    pub amount: Decimal,
    /// The step of `node` this line bills (an agent's model call or tool
    /// call: the step span's node, `agent#2`), when the node's cost is
    /// itemised per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Arc<str>>,
    /// The loop iteration (from 1) this line bills, when `node` is in a
    /// loop's body: the body is billed iteration by iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
}

impl ReceiptLine {
    /// What the line bills, for people: the node, and its step and loop
    /// iteration when it has them (`agent (agent#2, iteration 3)`).
    pub fn what(&self) -> String {
        match (&self.step, self.iteration) {
            (None, None) => self.node.to_string(),
            (Some(step), None) => format!("{} ({step})", self.node),
            (None, Some(k)) => format!("{} (iteration {k})", self.node),
            (Some(step), Some(k)) => format!("{} ({step}, iteration {k})", self.node),
        }
    }
}

/// The per-request cost breakdown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub lines: Vec<ReceiptLine>,
    pub total: Decimal,
    pub currency: Arc<str>,
}

impl Receipt {
    pub fn new(currency: Arc<str>) -> Receipt {
        Receipt {
            lines: Vec::new(),
            total: Decimal::ZERO,
            currency,
        }
    }

    /// Adds a line and returns its amount. Amounts saturate rather than
    /// overflow (only reachable with absurd prices), so a receipt never panics.
    pub fn push(
        &mut self,
        node: Arc<str>,
        unit: Unit,
        quantity: Decimal,
        unit_price: Decimal,
    ) -> Decimal {
        self.push_line(node, None, unit, quantity, unit_price)
    }

    /// Adds a line for one step of `node` (see [`ReceiptLine::step`]) and
    /// returns its amount.
    pub fn push_step(
        &mut self,
        node: Arc<str>,
        step: Arc<str>,
        unit: Unit,
        quantity: Decimal,
        unit_price: Decimal,
    ) -> Decimal {
        self.push_line(node, Some(step), unit, quantity, unit_price)
    }

    fn push_line(
        &mut self,
        node: Arc<str>,
        step: Option<Arc<str>>,
        unit: Unit,
        quantity: Decimal,
        unit_price: Decimal,
    ) -> Decimal {
        let amount = quantity.saturating_mul(unit_price).normalize();
        self.total = self.total.saturating_add(amount);
        self.lines.push(ReceiptLine {
            node,
            unit,
            quantity: quantity.normalize(),
            unit_price: unit_price.normalize(),
            amount,
            step,
            iteration: None,
        });
        amount
    }

    /// Marks the lines from position `from` on as billing loop iteration
    /// `iteration` (amounts and the total are unchanged).
    pub fn mark_iteration(&mut self, from: usize, iteration: u32) {
        for line in self.lines.iter_mut().skip(from) {
            line.iteration = Some(iteration);
        }
    }

    /// The total charged to one node in one loop iteration.
    pub fn iteration_total(&self, node: &str, iteration: u32) -> Decimal {
        self.lines
            .iter()
            .filter(|l| &*l.node == node && l.iteration == Some(iteration))
            .fold(Decimal::ZERO, |acc, l| acc.saturating_add(l.amount))
    }

    /// The sum of the lines' amounts (equal to `total` for every receipt
    /// built through [`Receipt::push`]).
    pub fn sum_of_lines(&self) -> Decimal {
        self.lines
            .iter()
            .fold(Decimal::ZERO, |acc, l| acc.saturating_add(l.amount))
    }

    /// The total charged to one node.
    pub fn node_total(&self, node: &str) -> Decimal {
        self.lines
            .iter()
            .filter(|l| &*l.node == node)
            .fold(Decimal::ZERO, |acc, l| acc.saturating_add(l.amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn lines_add_up_exactly() {
        let mut r = Receipt::new("USD".into());
        // Ten lines of 0.1 add up to exactly 1 (a float sum would not).
        for _ in 0..10 {
            r.push("route".into(), Unit::Call, Decimal::ONE, d("0.1"));
        }
        assert_eq!(r.total, Decimal::ONE);
        assert_eq!(r.sum_of_lines(), r.total);
        let amount = r.push("llm".into(), Unit::OutputTokens1k, d("0.256"), d("0.004"));
        assert_eq!(amount, d("0.001024"));
        assert_eq!(r.total, d("1.001024"));
        assert_eq!(r.node_total("llm"), d("0.001024"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["lines"][10]["unit"], "1k_output_tokens");
        assert_eq!(json["total"], "1.001024");
    }
}
