//! A price table for model calls: one rate per token class, per model.
//!
//! Rates are per **million** tokens, as providers publish them, so a table
//! is copied from a price page without conversion. Receipt lines count
//! thousands of tokens (as every other token line does) at the rate divided
//! by 1,000, which in decimal arithmetic is exact: the bill of a call is
//! the same number a hand calculation gives, to the last decimal.
//!
//! A class without its own rate is billed at the rate it is a kind of:
//! cached input and cache writes at `input`, audio input at `input`,
//! reasoning and audio output at `output`. Models are looked up by exact
//! name, then by the longest name that prefixes it at a `-`, `@`, `:` or
//! `/` boundary (`gpt-4o-mini-2024-07-18` finds `gpt-4o-mini`).
//!
//! ```toml
//! [ingest.prices]
//! currency = "USD"
//! [ingest.prices.models."gpt-4o-mini"]
//! input = "0.15"
//! cached_input = "0.075"
//! output = "0.60"
//! ```

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize};

use crate::receipt::{Receipt, Unit};
use crate::tokens::TokenUsage;

/// Rates of one model, per million tokens (and per call).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    #[serde(default, deserialize_with = "decimal")]
    pub input: Option<Decimal>,
    #[serde(default, deserialize_with = "decimal")]
    pub cached_input: Option<Decimal>,
    #[serde(default, deserialize_with = "decimal")]
    pub cache_creation: Option<Decimal>,
    #[serde(default, deserialize_with = "decimal")]
    pub output: Option<Decimal>,
    #[serde(default, deserialize_with = "decimal")]
    pub reasoning: Option<Decimal>,
    #[serde(default, deserialize_with = "decimal")]
    pub audio_input: Option<Decimal>,
    #[serde(default, deserialize_with = "decimal")]
    pub audio_output: Option<Decimal>,
    /// A fixed amount per call, on top of the tokens.
    #[serde(default, deserialize_with = "decimal")]
    pub per_call: Option<Decimal>,
}

/// Accepts `"0.15"` (exact) or `0.15` (read through its shortest decimal
/// form, which for a price is the literal written).
fn decimal<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Int(i64),
        Float(f64),
    }
    let text = match Raw::deserialize(d)? {
        Raw::Text(s) => s,
        Raw::Int(i) => i.to_string(),
        Raw::Float(f) => f.to_string(),
    };
    let value = Decimal::from_str(text.trim())
        .or_else(|_| Decimal::from_scientific(text.trim()))
        .map_err(|e| serde::de::Error::custom(format!("price `{text}`: {e}")))?;
    if value.is_sign_negative() {
        return Err(serde::de::Error::custom(format!(
            "price `{text}` is negative"
        )));
    }
    Ok(Some(value))
}

const THOUSAND: Decimal = Decimal::from_parts(1000, 0, 0, false, 0);

/// Prices per **thousand** tokens of each class, as receipt lines count
/// them; `None`: no price of its own. The one place the classes fall back
/// to their parent rates (cached input, cache writes and audio input to
/// `input`; reasoning and audio output to `output`), shared by the ingest
/// price table ([`ModelPrice`]) and the engine's per-node prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassPrices {
    pub input: Option<Decimal>,
    pub cached_input: Option<Decimal>,
    pub cache_creation: Option<Decimal>,
    pub output: Option<Decimal>,
    pub reasoning: Option<Decimal>,
    pub audio_input: Option<Decimal>,
    pub audio_output: Option<Decimal>,
}

impl ClassPrices {
    /// `(unit, tokens, price per thousand)` of every class, after fallbacks.
    fn classes(&self, t: &TokenUsage) -> [(Unit, u64, Option<Decimal>); 7] {
        let (input, output) = (self.input, self.output);
        [
            (Unit::InputTokens1k, t.input, input),
            (
                Unit::CachedInputTokens1k,
                t.cached_input,
                self.cached_input.or(input),
            ),
            (
                Unit::CacheCreationTokens1k,
                t.cache_creation,
                self.cache_creation.or(input),
            ),
            (Unit::OutputTokens1k, t.output, output),
            (
                Unit::ReasoningTokens1k,
                t.reasoning,
                self.reasoning.or(output),
            ),
            (
                Unit::AudioInputTokens1k,
                t.audio_input,
                self.audio_input.or(input),
            ),
            (
                Unit::AudioOutputTokens1k,
                t.audio_output,
                self.audio_output.or(output),
            ),
        ]
    }

    /// Receipt lines `(unit, thousands of tokens, price per thousand)` for
    /// the classes used that have a price, in class order.
    pub fn lines(&self, t: &TokenUsage) -> Vec<(Unit, Decimal, Decimal)> {
        self.classes(t)
            .into_iter()
            .filter_map(|(unit, n, price)| {
                let price = price.filter(|_| n > 0)?;
                let k = Decimal::new(i64::try_from(n).unwrap_or(i64::MAX), 3);
                Some((unit, k, price))
            })
            .collect()
    }

    /// Token classes used that have no price at all (neither their own
    /// nor the one they fall back to).
    pub fn unpriced(&self, t: &TokenUsage) -> Vec<Unit> {
        self.classes(t)
            .into_iter()
            .filter(|(_, n, price)| *n > 0 && price.is_none())
            .map(|(u, _, _)| u)
            .collect()
    }
}

impl ModelPrice {
    /// The per-thousand prices of this per-million table entry (exact:
    /// a decimal divided by 1,000).
    pub fn per_thousand(&self) -> ClassPrices {
        let k = |r: Option<Decimal>| r.map(|r| r / THOUSAND);
        ClassPrices {
            input: k(self.input),
            cached_input: k(self.cached_input),
            cache_creation: k(self.cache_creation),
            output: k(self.output),
            reasoning: k(self.reasoning),
            audio_input: k(self.audio_input),
            audio_output: k(self.audio_output),
        }
    }

    /// Receipt lines `(unit, quantity, unit price)` for one call's usage:
    /// quantities in thousands of tokens, prices per thousand.
    pub fn lines(&self, t: &TokenUsage) -> Vec<(Unit, Decimal, Decimal)> {
        let mut out = Vec::new();
        if let Some(p) = self.per_call {
            out.push((Unit::Call, Decimal::ONE, p));
        }
        out.extend(self.per_thousand().lines(t));
        out
    }
}

/// Model prices and the currency they are in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    #[serde(default = "usd")]
    pub currency: String,
    #[serde(default)]
    pub models: BTreeMap<String, ModelPrice>,
}

fn usd() -> String {
    "USD".to_string()
}

impl Default for PriceTable {
    fn default() -> Self {
        PriceTable {
            currency: usd(),
            models: BTreeMap::new(),
        }
    }
}

impl PriceTable {
    /// The entry for `model`: exact, else the longest prefix ending at a
    /// `-`, `@`, `:` or `/` boundary of the name.
    pub fn lookup(&self, model: &str) -> Option<(&str, &ModelPrice)> {
        if let Some((k, p)) = self.models.get_key_value(model) {
            return Some((k.as_str(), p));
        }
        self.models
            .iter()
            .filter(|(k, _)| {
                model.len() > k.len()
                    && model.starts_with(k.as_str())
                    && matches!(model.as_bytes()[k.len()], b'-' | b'@' | b':' | b'/')
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(k, p)| (k.as_str(), p))
    }

    /// Bills one call of `model` to `node` on `receipt`; returns the amount,
    /// or `None` when the table has no entry for the model.
    pub fn bill(
        &self,
        receipt: &mut Receipt,
        node: &Arc<str>,
        model: &str,
        usage: &TokenUsage,
    ) -> Option<Decimal> {
        let (_, price) = self.lookup(model)?;
        Some(
            price
                .lines(usage)
                .into_iter()
                .fold(Decimal::ZERO, |acc, (unit, q, p)| {
                    acc.saturating_add(receipt.push(node.clone(), unit, q, p))
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn table() -> PriceTable {
        toml_like(
            r#"{"currency":"USD","models":{
                "gpt-4o-mini":{"input":"0.15","cached_input":"0.075","output":"0.60"},
                "gpt-4o":{"input":2.5,"output":10}}}"#,
        )
    }

    fn toml_like(json: &str) -> PriceTable {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn lookup_prefers_exact_then_longest_prefix_at_a_boundary() {
        let t = table();
        assert_eq!(t.lookup("gpt-4o").unwrap().0, "gpt-4o");
        assert_eq!(t.lookup("gpt-4o-mini-2024-07-18").unwrap().0, "gpt-4o-mini");
        assert_eq!(t.lookup("gpt-4o-2024-08-06").unwrap().0, "gpt-4o");
        assert!(t.lookup("gpt-4omni").is_none());
        assert!(t.lookup("claude").is_none());
    }

    #[test]
    fn falls_back_to_the_parent_rate_and_bills_exactly() {
        let t = table();
        let usage = TokenUsage {
            input: 1,
            cached_input: 3,
            reasoning: 7,
            output: 1,
            ..TokenUsage::default()
        };
        let mut r = Receipt::new("USD".into());
        let node: Arc<str> = "llm".into();
        // 1×2.5 + 3×2.5 (no cached rate) + 1×10 + 7×10 (no reasoning rate), per million.
        let total = t.bill(&mut r, &node, "gpt-4o", &usage).unwrap();
        assert_eq!(total, d("0.00009"));
        assert_eq!(r.total, r.sum_of_lines());
        assert_eq!(r.lines.len(), 4);
        assert_eq!(r.lines[1].unit, Unit::CachedInputTokens1k);
        assert_eq!(r.lines[1].unit_price, d("0.0025"));
    }

    #[test]
    fn rejects_negative_and_unknown_fields() {
        let neg = serde_json::from_str::<PriceTable>(r#"{"models":{"m":{"input":"-1"}}}"#);
        assert!(neg.unwrap_err().to_string().contains("negative"));
        let typo = serde_json::from_str::<PriceTable>(r#"{"models":{"m":{"inptu":"1"}}}"#);
        assert!(typo.unwrap_err().to_string().contains("inptu"));
    }
}
