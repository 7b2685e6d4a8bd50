//! The response cache through whole requests: hits skip the node, cost
//! nothing (a zero `cache_hit` receipt line), are tagged on the span and
//! said in the explanation; TTL, size bound, similarity and re-runs.

use std::time::Duration;

use glassbox_engine::trace::{Lang, SpanRecord, Unit};
use glassbox_engine::{Outcome, Pipeline, RunOptions};
use rust_decimal::Decimal;
use serde_json::json;

use crate::support::{letters, pipeline};

const EXACT: &str = r#"
topology_id: cached
version: "1"
nodes:
  - { id: route, type: test }
  - id: llm
    type: test
    resource: { type: gpu, model: chat-7b, cost_per_call: 0.02, cost_per_1k_output_tokens: 0.004 }
    config: { count: true, tokens: [100, 50] }
    cache: { ttl_s: 60, max_entries: 2 }
edges:
  - { from: route, to: llm }
"#;

async fn ask(p: &Pipeline, question: &str) -> Outcome {
    let out = p
        .run(json!({ "question": question }), RunOptions::default())
        .await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    out
}

/// How many times the `llm` node had been called when it made this answer.
fn calls(out: &Outcome) -> u64 {
    out.result.as_ref().unwrap()["n"].as_u64().unwrap()
}

fn span<'a>(out: &'a Outcome, node: &str) -> &'a SpanRecord {
    out.trace
        .spans
        .iter()
        .rev()
        .find(|s| &*s.node == node)
        .unwrap()
}

fn tag<'a>(out: &'a Outcome, node: &str, key: &str) -> Option<&'a str> {
    span(out, node).tags.get(key).map(String::as_str)
}

#[tokio::test(start_paused = true)]
async fn a_repeated_request_is_answered_from_the_cache_for_free() {
    let (p, _sink) = pipeline(EXACT);
    let first = ask(&p, "What is the price of Pro?").await;
    assert_eq!(calls(&first), 1);
    assert_eq!(tag(&first, "llm", "cache"), Some("miss"));
    let paid = first.trace.record.receipt.node_total("llm");
    assert_eq!(paid, Decimal::new(202, 4), "0.02 per call + 0.05k x 0.004");

    let again = ask(&p, "What is the price of Pro?").await;
    assert_eq!(calls(&again), 1, "the node was not called again");
    assert_eq!(tag(&again, "llm", "cache"), Some("hit"));
    assert_eq!(tag(&again, "llm", "cache_match"), Some("exact"));
    assert_eq!(
        tag(&again, "llm", "cache_key"),
        tag(&first, "llm", "cache_key")
    );
    assert_eq!(span(&again, "llm").cost, Decimal::ZERO);
    let receipt = &again.trace.record.receipt;
    let lines: Vec<_> = receipt.lines.iter().filter(|l| &*l.node == "llm").collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].unit, Unit::CacheHit);
    assert_eq!(lines[0].quantity, Decimal::ONE);
    assert_eq!(lines[0].amount, Decimal::ZERO);
    assert_eq!(receipt.total, receipt.sum_of_lines());
    assert_eq!(receipt.node_total("llm"), Decimal::ZERO);
    let text = &again.trace.record.explanation.text;
    assert!(
        text.contains("`llm` was answered from the response cache (the same request"),
        "{text}"
    );

    let other = ask(&p, "What is the price of Plus?").await;
    assert_eq!(calls(&other), 2, "another question is another key");
    assert_eq!(tag(&other, "llm", "cache"), Some("miss"));
}

#[tokio::test(start_paused = true)]
async fn the_explanation_says_it_in_chinese_too() {
    let (p, _sink) = pipeline(EXACT);
    ask(&p, "hi").await;
    let options = RunOptions {
        lang: Lang::Zh,
        ..RunOptions::default()
    };
    let out = p.run(json!({ "question": "hi" }), options).await;
    let text = &out.trace.record.explanation.text;
    assert!(text.contains("`llm` 直接由响应缓存作答"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn an_answer_is_served_until_its_ttl_passes() {
    let (p, _sink) = pipeline(EXACT);
    ask(&p, "hi").await;
    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(calls(&ask(&p, "hi").await), 1, "59 s old: still served");
    tokio::time::advance(Duration::from_secs(1)).await;
    let late = ask(&p, "hi").await;
    assert_eq!(calls(&late), 2, "60 s old: expired, the node runs again");
    assert_eq!(tag(&late, "llm", "cache"), Some("miss"));
}

#[tokio::test(start_paused = true)]
async fn the_cache_keeps_at_most_max_entries() {
    let (p, _sink) = pipeline(EXACT);
    for q in ["a", "b", "c"] {
        ask(&p, q).await;
    }
    // `a` was the least recently used of three answers in a cache of two.
    assert_eq!(calls(&ask(&p, "c").await), 3, "`c` is cached");
    let a = ask(&p, "a").await;
    assert_eq!(calls(&a), 4, "`a` was evicted");
    assert_eq!(tag(&a, "llm", "cache"), Some("miss"));
}

const SIMILAR: &str = r#"
topology_id: similar
version: "1"
nodes:
  - { id: embed, type: test_embed }
  - id: llm
    type: test
    resource: { type: cpu, cost_per_call: 0.01 }
    config: { count: true }
    cache: { similarity: { embedding: embed, threshold: 0.99 } }
edges:
  - { from: embed, to: llm }
"#;

fn cosine(a: &str, b: &str) -> f64 {
    let (a, b) = (letters(a), letters(b));
    let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    f64::from(dot / (norm(&a) * norm(&b)))
}

#[tokio::test]
async fn a_similar_request_hits_at_or_above_the_threshold() {
    let (p, _sink) = pipeline(SIMILAR);
    let first = ask(&p, "What is the price of Pro?").await;
    assert_eq!(tag(&first, "llm", "cache"), Some("miss"));

    // Same letters, other punctuation and case: similarity 1.
    let near = ask(&p, "what is the price of pro").await;
    assert_eq!(calls(&near), 1, "served from the cache");
    assert_eq!(tag(&near, "llm", "cache"), Some("hit"));
    assert_eq!(tag(&near, "llm", "cache_match"), Some("similar"));
    assert_eq!(tag(&near, "llm", "cache_similarity"), Some("1.000"));
    assert_eq!(near.trace.record.receipt.node_total("llm"), Decimal::ZERO);
    let text = &near.trace.record.explanation.text;
    assert!(text.contains("(a request 100% similar"), "{text}");

    // Close, but under the threshold: the node runs.
    let q = "What is the price of Plus?";
    let s = cosine("What is the price of Pro?", q);
    assert!(s > 0.8 && s < 0.99, "the test needs a near miss, got {s}");
    let below = ask(&p, q).await;
    assert_eq!(calls(&below), 2);
    assert_eq!(tag(&below, "llm", "cache"), Some("miss"));
}

#[tokio::test(start_paused = true)]
async fn a_rerun_refreshes_the_cached_answer() {
    let (p, _sink) = pipeline(
        r#"
topology_id: refresh
version: "1"
nodes:
  - id: llm
    type: test
    config: { count: true }
    cache: {}
  - { id: guard, type: test, config: { rerun: { upstream: llm, until: 2 } } }
edges:
  - { from: llm, to: guard }
"#,
    );
    let first = p
        .run(json!({"question": "hi"}), RunOptions::default())
        .await;
    assert!(first.result.is_ok());
    // The guard rejected answer 1 and had `llm` re-run: answer 2 replaced it.
    assert_eq!(tag(&first, "llm", "cache"), Some("refresh"));
    let again = p
        .run(json!({"question": "hi"}), RunOptions::default())
        .await;
    assert!(again.result.is_ok());
    let llm = again
        .trace
        .spans
        .iter()
        .find(|s| &*s.node == "llm")
        .unwrap();
    assert_eq!(llm.tags.get("cache").map(String::as_str), Some("hit"));
    assert_eq!(
        again.trace.spans.len(),
        2,
        "no re-run: the cached answer passes"
    );
}
