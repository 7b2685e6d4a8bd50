//! The `backend: openai` node bills an answer's usage by token class, with
//! the rules ingested model calls use (`glassbox_trace::price`): cached
//! prompt tokens and reasoning tokens at their own prices, the rest at the
//! input and output prices; every receipt line exact.

use std::str::FromStr;

use glassbox_engine::RunOptions;
use glassbox_engine::trace::Unit;
use rust_decimal::Decimal;
use serde_json::json;

use crate::outbound::{ok, stub};
use crate::support::build;

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

#[tokio::test]
async fn an_openai_backend_bills_cached_and_reasoning_tokens_at_their_prices() {
    let answer = json!({
        "id": "c1", "object": "chat.completion", "model": "o3-mini-2025-01-31",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Twenty dollars."}}],
        "usage": {"prompt_tokens": 1500, "completion_tokens": 2200, "total_tokens": 3700,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 1856}}
    });
    let upstream = stub(vec![ok(&answer.to_string())]);
    let text = format!(
        r#"
topology_id: remote
version: "1"
nodes:
  - id: llm
    type: llm_inference
    resource:
      type: gpu
      model: o3-mini
      cost_per_1k_input_tokens: 0.0011
      cost_per_1k_cached_input_tokens: 0.00055
      cost_per_1k_output_tokens: 0.0044
    config: {{ backend: openai, base_url: "http://127.0.0.1:{}/v1", model: o3-mini, allow_hosts: ["127.0.0.1"], prompt: "{{{{ input.question }}}}" }}
"#,
        upstream.port
    );
    let p = build("remote.yaml", &text);
    let out = p
        .run(json!({"question": "price?"}), RunOptions::default())
        .await;
    out.result.unwrap();
    let receipt = &out.trace.record.receipt;
    let lines: Vec<(Unit, Decimal, Decimal)> = receipt
        .lines
        .iter()
        .map(|l| (l.unit, l.quantity, l.amount))
        .collect();
    // The same bill as the usage corpus's o3-mini case, worked by hand:
    // 476 input, 1024 cached, 344 output, 1856 reasoning (output price).
    assert_eq!(
        lines,
        [
            (Unit::InputTokens1k, d("0.476"), d("0.0005236")),
            (Unit::CachedInputTokens1k, d("1.024"), d("0.0005632")),
            (Unit::OutputTokens1k, d("0.344"), d("0.0015136")),
            (Unit::ReasoningTokens1k, d("1.856"), d("0.0081664")),
        ]
    );
    assert_eq!(receipt.total, d("0.0107668"));
    let span = &out.trace.spans[0];
    assert_eq!(span.cost, receipt.total);
    // The span keeps the totals the provider reported, and the split.
    assert_eq!(span.usage.input_tokens, Some(1500));
    assert_eq!(span.usage.output_tokens, Some(2200));
    assert_eq!(span.usage.tokens.unwrap().reasoning, 1856);
}
