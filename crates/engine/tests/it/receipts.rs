//! Usage and cost: receipts that add up exactly.

use std::str::FromStr;

use glassbox_engine::RunOptions;
use glassbox_engine::trace::{Receipt, Unit};
use rust_decimal::Decimal;
use serde_json::json;

use crate::support::{pipeline, run_once};

/// A receipt's lines as (step, unit, amount).
fn step_lines(receipt: &Receipt) -> Vec<(Option<&str>, Unit, Decimal)> {
    receipt
        .lines
        .iter()
        .map(|l| (l.step.as_deref(), l.unit, l.amount))
        .collect()
}

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

#[tokio::test(start_paused = true)]
async fn receipts_add_up_exactly() {
    let out = run_once(
        r#"
topology_id: priced
version: "1"
pricing: { currency: EUR }
nodes:
  - { id: route, type: test, resource: { type: cpu, cost_per_call: 0.0002, cost_per_cpu_ms: 0.00001 } }
  - id: llm
    type: test
    retries: 1
    backoff_ms: 1
    resource: { type: gpu, model: chat-7b, cost_per_call: 0.02, cost_per_1k_input_tokens: 0.001, cost_per_1k_output_tokens: 0.004 }
    config: { fail_times: 1, tokens: [512, 256] }
  - { id: guard, type: test, resource: { type: cpu, cost_per_call: 0.0003 } }
edges:
  - { from: route, to: llm }
  - { from: llm, to: guard }
"#,
    ).await;
    out.result.unwrap();
    let r = &out.trace.record;
    let receipt = &r.receipt;
    assert_eq!(&*receipt.currency, "EUR");
    assert_eq!(receipt.sum_of_lines(), receipt.total);
    // Every attempt pays its call price: the failed one too.
    let llm_calls = receipt
        .lines
        .iter()
        .find(|l| &*l.node == "llm" && l.unit == Unit::Call)
        .unwrap();
    assert_eq!(llm_calls.quantity, d("2"));
    assert_eq!(llm_calls.amount, d("0.04"));
    let out_tokens = receipt
        .lines
        .iter()
        .find(|l| l.unit == Unit::OutputTokens1k)
        .unwrap();
    assert_eq!(
        (out_tokens.quantity, out_tokens.amount),
        (d("0.256"), d("0.001024"))
    );
    let in_tokens = receipt
        .lines
        .iter()
        .find(|l| l.unit == Unit::InputTokens1k)
        .unwrap();
    assert_eq!(in_tokens.amount, d("0.000512"));
    // The CPU node is billed CPU time; the GPU node is not.
    assert!(
        receipt
            .lines
            .iter()
            .any(|l| &*l.node == "route" && l.unit == Unit::CpuMs)
    );
    assert!(
        !receipt
            .lines
            .iter()
            .any(|l| &*l.node == "llm" && l.unit == Unit::CpuMs)
    );
    // Span costs add up to the receipt.
    let spans_total: Decimal = out.trace.spans.iter().map(|s| s.cost).sum();
    assert_eq!(spans_total, receipt.total);
    for line in &receipt.lines {
        assert_eq!(line.amount, line.quantity * line.unit_price);
    }
    let fixed = d("0.0002") + d("0.04") + d("0.000512") + d("0.001024") + d("0.0003");
    let cpu: Decimal = receipt
        .lines
        .iter()
        .filter(|l| l.unit == Unit::CpuMs)
        .map(|l| l.amount)
        .sum();
    assert_eq!(receipt.total, fixed + cpu);
}

#[tokio::test(start_paused = true)]
async fn json_trace_has_the_documented_shape() {
    let (p, _sink) = pipeline(
        r#"
topology_id: shape
version: "2.0"
nodes:
  - { id: a, type: test, resource: { type: cpu, cost_per_call: 0.1 } }
"#,
    );
    let out = p
        .run(json!({"question": "hi"}), RunOptions::default())
        .await;
    let v = serde_json::to_value(&*out.trace.record).unwrap();
    assert_eq!(v["topology_id"], "shape");
    assert_eq!(v["version"], "2.0");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["path"]["nodes"][0]["type"], "test");
    assert_eq!(v["receipt"]["lines"][0]["unit"], "call");
    assert_eq!(v["receipt"]["total"], "0.1");
    assert_eq!(v["receipt"]["currency"], "USD");
    assert!(
        v["explanation"]["text"]
            .as_str()
            .unwrap()
            .contains("passed through a")
    );
}

#[tokio::test(start_paused = true)]
async fn calibrated_prices_replace_the_topologys() {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use glassbox_engine::{BuildContext, Pipeline, PipelineOptions};
    use glassbox_topology::{Prices, Source};

    let yaml = r#"
topology_id: calibrated
version: "1"
nodes:
  - { id: route, type: test, resource: { type: cpu, cost_per_call: 0.01 } }
  - id: llm
    type: test
    resource: { type: gpu, model: chat-7b, cost_per_call: 0.001, cost_per_1k_output_tokens: 0.004 }
    config: { tokens: [512, 256] }
edges:
  - { from: route, to: llm }
"#;
    let registry = crate::support::registry();
    let validated =
        glassbox_topology::load_source(Source::new("t.yaml", yaml), &registry.kind_set()).unwrap();
    let topology = Arc::new(validated.topology);
    let prices: BTreeMap<String, Prices> = [(
        "llm".to_string(),
        Prices {
            cost_per_call: Some(d("0.99")),
            ..Prices::default()
        },
    )]
    .into();
    let options = PipelineOptions {
        prices,
        ..PipelineOptions::default()
    };
    let cx = BuildContext::new(topology.clone());
    let p = Pipeline::build(topology, &registry, &cx, options).unwrap();
    let out = p.run(json!({}), RunOptions::default()).await;
    out.result.unwrap();
    let receipt = &out.trace.record.receipt;
    let llm: Vec<_> = receipt.lines.iter().filter(|l| &*l.node == "llm").collect();
    // Only the measured per-call price: no token line any more.
    assert_eq!(llm.len(), 1, "{llm:?}");
    assert_eq!((llm[0].unit, llm[0].amount), (Unit::Call, d("0.99")));
    // Nodes without a calibration keep the topology's prices.
    assert_eq!(receipt.total, d("1.00"));
}

/// Regression (issue 16, item 8): the record keeps the length of the whole
/// input, not of its 200-character summary, so reports can group by it.
#[tokio::test(start_paused = true)]
async fn the_record_keeps_the_real_input_length_not_the_summarys() {
    let (p, _sink) = pipeline(
        r#"
topology_id: long
version: "1"
nodes:
  - { id: a, type: test, resource: { type: cpu, cost_per_call: 0.1 } }
"#,
    );
    let question = "é".repeat(5_000);
    let out = p
        .run(json!({ "question": question }), RunOptions::default())
        .await;
    let r = &out.trace.record;
    // `{"question":"…"}`: 5,000 characters and 15 of JSON around them.
    assert_eq!(r.input_chars, Some(5_015));
    assert!(
        r.input_summary.chars().count() <= 201,
        "{}",
        r.input_summary
    );
    let v = serde_json::to_value(&**r).unwrap();
    assert_eq!(v["input_chars"], 5_015);
}

/// Parallel branches: the explanation names the branch that set the latency
/// (not the sum), and the input's tokens come from the entry node that
/// counted them.
#[tokio::test(start_paused = true)]
async fn parallel_branches_name_the_critical_path_and_entry_tokens_are_kept() {
    let (p, _sink) = pipeline(
        r#"
topology_id: fan
version: "1"
nodes:
  - { id: a, type: test, config: { tokens: [42, 0] } }
  - { id: fast, type: test, config: { sleep_ms: 10 } }
  - { id: slow, type: test, config: { sleep_ms: 200 } }
  - { id: join, type: test, config: { tokens: [7, 1] } }
edges:
  - { from: a, to: fast }
  - { from: a, to: slow }
  - { from: fast, to: join }
  - { from: slow, to: join }
"#,
    );
    let out = p
        .run(json!({"question": "hi"}), RunOptions::default())
        .await;
    let r = &out.trace.record;
    let cp = glassbox_engine::trace::critical_path(&r.path, &out.trace.spans);
    let chain: Vec<&str> = cp.steps.iter().map(|s| &*s.node).collect();
    assert_eq!(chain, ["a", "slow", "join"]);
    assert_eq!(cp.off_path.len(), 1);
    assert!(
        r.explanation.text.contains(
            "was set by `a` → `slow` → `join`, most of it in `slow` (200 ms); `fast` ran alongside"
        ),
        "{}",
        r.explanation.text
    );
    assert_eq!(r.input_tokens, Some(42));
}

#[tokio::test]
async fn steps_inside_an_attempt_are_spans_and_receipt_lines_of_their_own() {
    let out = run_once(
        r#"
topology_id: stepped
version: "1"
nodes:
  - id: agent
    type: test
    resource: { type: gpu, model: m, cost_per_call: 0.01, cost_per_1k_input_tokens: 0.001, cost_per_1k_output_tokens: 0.002 }
    config:
      tokens: [300, 30]
      steps:
        - { kind: model, name: m, iteration: 1, tokens: [100, 10], input: "where is 7?", output: "{\"name\":\"lookup\"}" }
        - { kind: tool, name: lookup, iteration: 1, cost: "0.005", input: { order_id: 7 }, output: "Order 7: shipped" }
        - { kind: tool, name: search, iteration: 1, error: "error: no index", input: { q: x }, output: "error: no index" }
        - { kind: model, name: m, iteration: 2, tokens: [200, 20], input: "Result of lookup", output: "{\"answer\":\"shipped\"}" }
"#,
    ).await;
    out.result.unwrap();
    let spans = &out.trace.spans;
    let steps: Vec<_> = spans
        .iter()
        .filter(|s| s.role.step_of() == Some("agent"))
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| &*s.node).collect();
    assert_eq!(names, ["agent#1", "agent#2", "agent#3", "agent#4"]);
    assert_eq!(&*steps[1].kind, "test.tool");
    assert_eq!(steps[1].tags["tool"], "lookup");
    assert_eq!(steps[3].tags["iteration"], "2");
    assert_eq!(&*steps[1].input_summary, r#"{"order_id":7}"#);
    assert_eq!(&*steps[1].output_summary, "Order 7: shipped");
    assert_eq!(steps[2].status, glassbox_engine::trace::SpanStatus::Error);
    assert_eq!(steps[0].usage.input_tokens, Some(100));
    assert_eq!(steps[0].cost, d("0.00012"));
    assert_eq!(steps[1].cost, d("0.005"));
    // The path knows only the node; its attempt counts once.
    assert_eq!(out.trace.record.path.nodes.len(), 1);
    assert_eq!(out.trace.record.path.nodes[0].attempts, 1);

    let receipt = &out.trace.record.receipt;
    assert_eq!(receipt.sum_of_lines(), receipt.total);
    // The call at node level, each step's tokens and the tool's own cost
    // on lines naming the step.
    assert_eq!(
        step_lines(receipt),
        [
            (None, Unit::Call, d("0.01")),
            (Some("agent#1"), Unit::InputTokens1k, d("0.0001")),
            (Some("agent#1"), Unit::OutputTokens1k, d("0.00002")),
            (Some("agent#2"), Unit::Call, d("0.005")),
            (Some("agent#4"), Unit::InputTokens1k, d("0.0002")),
            (Some("agent#4"), Unit::OutputTokens1k, d("0.00004")),
        ]
    );
    assert!(receipt.lines.iter().all(|l| &*l.node == "agent"));
    // The node's span carries its steps' tokens and costs: the spans that
    // are not steps add up to the receipt.
    let primary: Decimal = spans
        .iter()
        .filter(|s| s.role.step_of().is_none())
        .map(|s| s.cost)
        .sum();
    assert_eq!(primary, receipt.total);
    assert_eq!(receipt.total, d("0.01536"));
}

/// Regression (issue #34): an agent that hit its node timeout lost the
/// steps it had done; they stay in the trace and the receipt.
#[tokio::test(start_paused = true)]
async fn steps_done_before_a_timeout_stay_in_the_trace_and_receipt() {
    let out = run_once(
        r#"
topology_id: timed-out
version: "1"
nodes:
  - id: agent
    type: test
    timeout_ms: 50
    resource: { type: gpu, model: m, cost_per_1k_input_tokens: 0.001, cost_per_1k_output_tokens: 0.002 }
    config:
      hang: true
      tell_steps:
        - { kind: model, name: m, iteration: 1, tokens: [100, 10], input: "where is 7?", output: "{\"name\":\"lookup\"}" }
        - { kind: tool, name: lookup, iteration: 1, cost: "0.005", input: { order_id: 7 }, output: "Order 7: shipped" }
"#,
    ).await;
    assert!(out.result.is_err());
    let spans = &out.trace.spans;
    let attempt = spans.iter().find(|s| &*s.node == "agent").unwrap();
    assert_eq!(attempt.status, glassbox_engine::trace::SpanStatus::Timeout);
    // The attempt carries its steps' tokens and costs.
    assert_eq!(attempt.usage.input_tokens, Some(100));
    assert_eq!(attempt.usage.output_tokens, Some(10));
    assert_eq!(attempt.cost, d("0.00512"));
    let steps: Vec<&str> = spans
        .iter()
        .filter(|s| s.role.step_of() == Some("agent"))
        .map(|s| &*s.node)
        .collect();
    assert_eq!(steps, ["agent#1", "agent#2"]);
    let receipt = &out.trace.record.receipt;
    assert_eq!(
        step_lines(receipt),
        [
            (Some("agent#1"), Unit::InputTokens1k, d("0.0001")),
            (Some("agent#1"), Unit::OutputTokens1k, d("0.00002")),
            (Some("agent#2"), Unit::Call, d("0.005")),
        ]
    );
    assert_eq!(receipt.total, d("0.00512"));
}
