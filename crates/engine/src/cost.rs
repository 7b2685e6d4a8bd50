//! Pricing: from usage and a node's resolved prices to receipt lines.
//!
//! One function prices one attempt (for the span's `cost`); the receipt
//! prices each node's summed usage with the same rules. Both are exact
//! decimal products, so the spans' costs add up to the receipt's total.

use std::sync::Arc;

use glassbox_topology::{Prices, ResourceKind};
use glassbox_trace::{ClassPrices, Receipt, TokenUsage, Unit, Usage};
use rust_decimal::Decimal;

/// Usage summed over attempts, in receipt units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quantities {
    pub calls: u64,
    pub cpu_us: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The tokens by price class: an attempt's reported split, or its
    /// input and output tokens as plain input and output.
    pub tokens: TokenUsage,
    /// Requests the node's response cache answered (never billed as calls).
    pub cache_hits: u64,
}

impl Quantities {
    pub fn add(&mut self, usage: &Usage) {
        self.calls += 1;
        self.cpu_us += usage.cpu_us.unwrap_or(0);
        self.input_tokens += usage.input_tokens.unwrap_or(0);
        self.output_tokens += usage.output_tokens.unwrap_or(0);
        let split = usage.tokens.unwrap_or(TokenUsage {
            input: usage.input_tokens.unwrap_or(0),
            output: usage.output_tokens.unwrap_or(0),
            ..TokenUsage::default()
        });
        self.tokens = self.tokens.plus(&split);
    }

    /// Counts an attempt the response cache answered: no call, no usage.
    pub fn add_cache_hit(&mut self) {
        self.cache_hits += 1;
    }

    pub fn of(usage: &Usage) -> Quantities {
        let mut q = Quantities::default();
        q.add(usage);
        q
    }
}

/// A node's token prices by class (per thousand tokens).
pub fn class_prices(prices: &Prices) -> ClassPrices {
    ClassPrices {
        input: prices.cost_per_1k_input_tokens,
        cached_input: prices.cost_per_1k_cached_input_tokens,
        cache_creation: prices.cost_per_1k_cache_creation_tokens,
        output: prices.cost_per_1k_output_tokens,
        reasoning: prices.cost_per_1k_reasoning_tokens,
        audio_input: prices.cost_per_1k_audio_input_tokens,
        audio_output: prices.cost_per_1k_audio_output_tokens,
    }
}

/// The priced lines for some quantities: `(unit, quantity, unit_price)`.
/// CPU milliseconds are billed only for CPU nodes (a GPU node's host thread
/// mostly waits on the device); tokens wherever a price is set, one line
/// per token class (cached, reasoning and audio tokens at their own prices
/// when set, else at the input or output price: `glassbox_trace::price`,
/// the same rules as ingested model calls). Cache hits are a zero-priced
/// line, so the receipt shows the node answered for free.
pub fn lines(prices: &Prices, kind: ResourceKind, q: &Quantities) -> Vec<(Unit, Decimal, Decimal)> {
    let mut out = Vec::new();
    if q.cache_hits > 0 {
        out.push((Unit::CacheHit, Decimal::from(q.cache_hits), Decimal::ZERO));
    }
    if q.calls == 0 && q.cache_hits > 0 {
        return out;
    }
    if let Some(p) = prices.cost_per_call {
        out.push((Unit::Call, Decimal::from(q.calls), p));
    }
    if let (Some(p), ResourceKind::Cpu) = (prices.cost_per_cpu_ms, kind) {
        out.push((
            Unit::CpuMs,
            Decimal::new(i64::try_from(q.cpu_us).unwrap_or(i64::MAX), 3),
            p,
        ));
    }
    out.extend(class_prices(prices).lines(&q.tokens));
    out
}

/// What one attempt cost.
pub fn attempt_cost(prices: &Prices, kind: ResourceKind, usage: &Usage) -> Decimal {
    lines(prices, kind, &Quantities::of(usage))
        .into_iter()
        .fold(Decimal::ZERO, |acc, (_, q, p)| {
            acc.saturating_add(q.saturating_mul(p))
        })
}

/// Adds one node's lines to a receipt; returns the node's total.
pub fn bill(
    receipt: &mut Receipt,
    node: &Arc<str>,
    prices: &Prices,
    kind: ResourceKind,
    q: &Quantities,
) -> Decimal {
    lines(prices, kind, q)
        .into_iter()
        .fold(Decimal::ZERO, |acc, (unit, quantity, price)| {
            acc.saturating_add(receipt.push(node.clone(), unit, quantity, price))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn attempts_and_receipt_agree() {
        let prices = Prices {
            cost_per_call: Some(d("0.0002")),
            cost_per_cpu_ms: Some(d("0.00001")),
            cost_per_1k_input_tokens: Some(d("0.001")),
            cost_per_1k_output_tokens: Some(d("0.004")),
            ..Prices::default()
        };
        let usages = [
            Usage {
                wall_us: 10,
                cpu_us: Some(1234),
                input_tokens: Some(512),
                output_tokens: Some(256),
                tokens: None,
            },
            Usage {
                wall_us: 10,
                cpu_us: Some(77),
                input_tokens: Some(3),
                output_tokens: None,
                tokens: None,
            },
        ];
        let mut q = Quantities::default();
        let mut per_attempt = Decimal::ZERO;
        for u in &usages {
            q.add(u);
            per_attempt += attempt_cost(&prices, ResourceKind::Cpu, u);
        }
        let mut r = Receipt::new("USD".into());
        let node: Arc<str> = "llm".into();
        let total = bill(&mut r, &node, &prices, ResourceKind::Cpu, &q);
        assert_eq!(total, per_attempt);
        assert_eq!(r.total, r.sum_of_lines());
        assert_eq!(r.lines.len(), 4);
        // GPU nodes are not billed CPU time.
        let gpu = lines(&prices, ResourceKind::Gpu, &q);
        assert!(gpu.iter().all(|(u, _, _)| *u != Unit::CpuMs));
    }

    #[test]
    fn a_cache_hit_is_one_zero_line() {
        let prices = Prices {
            cost_per_call: Some(d("0.02")),
            cost_per_cpu_ms: Some(d("0.00001")),
            ..Prices::default()
        };
        let mut q = Quantities::default();
        q.add_cache_hit();
        let mut r = Receipt::new("USD".into());
        let node: Arc<str> = "llm".into();
        let total = bill(&mut r, &node, &prices, ResourceKind::Cpu, &q);
        assert_eq!(total, Decimal::ZERO);
        assert_eq!(r.lines.len(), 1, "{:?}", r.lines);
        assert_eq!(r.lines[0].unit, Unit::CacheHit);
        assert_eq!(r.lines[0].quantity, Decimal::ONE);
        // A re-run after the hit is a real call and is billed as one.
        q.add(&Usage::default());
        let lines = lines(&prices, ResourceKind::Cpu, &q);
        assert!(
            lines
                .iter()
                .any(|(u, n, _)| *u == Unit::Call && *n == Decimal::ONE)
        );
    }

    #[test]
    fn reported_token_classes_are_billed_at_their_own_prices() {
        let prices = Prices {
            cost_per_1k_input_tokens: Some(d("0.0025")),
            cost_per_1k_output_tokens: Some(d("0.01")),
            cost_per_1k_cached_input_tokens: Some(d("0.00125")),
            ..Prices::default()
        };
        // OpenAI: 2006 prompt tokens of which 1920 cached; 300 completion
        // tokens of which 100 reasoning (no reasoning price: the output one).
        let usage = Usage {
            wall_us: 1,
            cpu_us: None,
            input_tokens: Some(2006),
            output_tokens: Some(300),
            tokens: Some(TokenUsage {
                input: 86,
                cached_input: 1920,
                output: 200,
                reasoning: 100,
                ..TokenUsage::default()
            }),
        };
        let mut r = Receipt::new("USD".into());
        let node: Arc<str> = "llm".into();
        let total = bill(
            &mut r,
            &node,
            &prices,
            ResourceKind::Gpu,
            &Quantities::of(&usage),
        );
        // 0.086 × 0.0025 + 1.92 × 0.00125 + 0.2 × 0.01 + 0.1 × 0.01
        assert_eq!(total, d("0.005615"));
        assert_eq!(attempt_cost(&prices, ResourceKind::Gpu, &usage), total);
        let units: Vec<Unit> = r.lines.iter().map(|l| l.unit).collect();
        assert_eq!(
            units,
            [
                Unit::InputTokens1k,
                Unit::CachedInputTokens1k,
                Unit::OutputTokens1k,
                Unit::ReasoningTokens1k
            ]
        );
    }
}
