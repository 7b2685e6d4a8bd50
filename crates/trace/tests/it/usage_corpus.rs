//! The usage corpus: real provider usage payloads (OpenAI Chat Completions
//! and Responses, Anthropic Messages, Gemini) priced from one table, each
//! bill compared line by line with one worked out by hand
//! (`tests/fixtures/usage_corpus.json`), exact to the last decimal.

use std::str::FromStr;
use std::sync::Arc;

use glassbox_trace::{PriceTable, Receipt, TokenUsage};
use rust_decimal::Decimal;
use serde_json::Value;

fn d(v: &Value) -> Decimal {
    Decimal::from_str(v.as_str().unwrap()).unwrap()
}

#[test]
fn every_bill_in_the_corpus_is_exact() {
    let corpus: Value =
        serde_json::from_str(include_str!("../fixtures/usage_corpus.json")).unwrap();
    let prices: PriceTable = serde_json::from_value(corpus["prices"].clone()).unwrap();
    let cases = corpus["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let (_, usage) = TokenUsage::from_any(&case["usage"]).unwrap();
        let mut receipt = Receipt::new(prices.currency.as_str().into());
        let node: Arc<str> = "llm".into();
        let model = case["model"].as_str().unwrap();
        let billed = prices.bill(&mut receipt, &node, model, &usage).unwrap();
        let want = case["lines"].as_array().unwrap();
        let got: Vec<(String, Decimal, Decimal, Decimal)> = receipt
            .lines
            .iter()
            .map(|l| (l.unit.to_string(), l.quantity, l.unit_price, l.amount))
            .collect();
        let want: Vec<(String, Decimal, Decimal, Decimal)> = want
            .iter()
            .map(|l| {
                (
                    l[0].as_str().unwrap().to_string(),
                    d(&l[1]),
                    d(&l[2]),
                    d(&l[3]),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(billed, d(&case["total"]), "{name}");
        assert_eq!(receipt.total, d(&case["total"]), "{name}");
        assert_eq!(receipt.sum_of_lines(), receipt.total, "{name}");
        // The total as stored and returned is the hand figure, digit for digit.
        let json = serde_json::to_value(&receipt).unwrap();
        assert_eq!(json["total"], case["total"], "{name}");
    }
}

#[test]
fn a_model_missing_from_the_table_is_not_billed() {
    let prices = PriceTable::default();
    let mut receipt = Receipt::new("USD".into());
    let usage = TokenUsage {
        input: 10,
        ..TokenUsage::default()
    };
    assert!(
        prices
            .bill(&mut receipt, &"llm".into(), "gpt-4o", &usage)
            .is_none()
    );
    assert!(receipt.lines.is_empty());
}
