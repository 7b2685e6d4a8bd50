//! The `agent` kind on the real local model (SmolLM2-135M, constrained by
//! the tools' grammar) with a sub-topology tool: the example's order table.
//! The model decodes greedily with `batch_invariant` (ADR 0006), so each
//! question gets the same run every time, alone or beside other tests'
//! requests, on every CPU kernel set tried (sse42 to AMX): asked "What is the
//! status of order 1042?" it calls `lookup_order`, then repeats that call,
//! which `on_repeat` answers from the first call's result. (Without
//! `batch_invariant` the second call's 222-token context is past the default
//! mode's promise, and whether it repeats changed with the batch and the
//! kernels.)

use glassbox_engine::RunOptions;
use serde_json::{Value, json};

use crate::support::build;

/// An agent with the example's `lookup_order` tool; `budget` is spliced in.
fn agent(budget: &str) -> String {
    format!(
        r#"
topology_id: agent-test
version: "1"
defaults: {{ timeout_ms: 600000, deadline_ms: 900000 }}
nodes:
  - id: agent
    type: agent
    resource: {{ type: cpu, cost_per_1k_input_tokens: 0.001, cost_per_1k_output_tokens: 0.002 }}
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      system: You are a support assistant. Use lookup_order for order numbers.
      max_tokens: 96
      temperature: 0
      batch_invariant: true
      {budget}
      tools:
        - name: lookup_order
          description: Looks up an order by its number and tells its status.
          parameters: {{ type: object, properties: {{ order_id: {{ type: integer }} }}, required: [order_id] }}
          topology: order_lookup.yaml
"#
    )
}

/// Asks the agent `question` with the default run options.
async fn ask(p: &glassbox_engine::Pipeline, question: &str) -> glassbox_engine::Outcome {
    p.run(json!({"question": question}), RunOptions::default())
        .await
}

fn name() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agent");
    root.join("agent-test.yaml").display().to_string()
}

#[tokio::test]
async fn every_step_is_itemised_and_the_loop_ends_answered_or_on_its_budget() {
    let p = build(&name(), &agent("max_iterations: 3"));
    let out = ask(&p, "Where is my order 1042?").await;
    let v = out.result.expect("the agent runs");
    let steps = v["steps"].as_array().unwrap();
    let iterations = v["iterations"].as_u64().unwrap();
    assert!((1..=3).contains(&iterations), "{v}");
    let model_steps = steps.iter().filter(|s| s["kind"] == "model").count() as u64;
    assert_eq!(model_steps, iterations, "{v}");
    for s in steps.iter().filter(|s| s["kind"] != "model") {
        assert_eq!(s["tool"], "lookup_order", "{s}");
        // The grammar makes every call's arguments follow the schema.
        assert!(s["arguments"]["order_id"].is_i64(), "{s}");
    }
    match v["status"].as_str().unwrap() {
        "answered" => assert!(v["stopped_by"].is_null(), "{v}"),
        "budget_exhausted" => {
            assert_eq!(
                (iterations, v["stopped_by"].as_str()),
                (3, Some("max_iterations")),
                "{v}"
            );
            assert!(
                v["explanation"]
                    .as_str()
                    .unwrap()
                    .contains("`max_iterations` 3"),
                "{v}"
            );
        }
        other => panic!("status {other}: {v}"),
    }
    // The model's tokens are the span's usage, priced by the node's resource.
    let span = &out.trace.spans[0];
    assert!(span.tags.contains_key("iterations"), "{:?}", span.tags);
    let spent: f64 = steps
        .iter()
        .map(|s| s["cost"].as_f64().unwrap_or(0.0))
        .sum();
    assert!((spent - v["cost"].as_f64().unwrap()).abs() < 1e-9, "{v}");
    let explanation = &out.trace.record.explanation.text;
    assert!(explanation.contains("The agent "), "{explanation}");

    // Every model call and tool call is its own span, in order, with its
    // iteration, arguments and result.
    let step_spans: Vec<_> = out
        .trace
        .spans
        .iter()
        .filter(|s| s.role.step_of() == Some("agent"))
        .collect();
    assert_eq!(step_spans.len(), steps.len(), "{:?}", out.trace.spans);
    for (span, step) in step_spans.iter().zip(steps) {
        assert_eq!(&*span.node, format!("agent#{}", step["step"]));
        assert_eq!(
            &*span.kind,
            format!("agent.{}", step["kind"].as_str().unwrap())
        );
        assert_eq!(span.tags["iteration"], step["iteration"].to_string());
        if step["kind"] != "model" {
            assert_eq!(*span.input_summary, step["arguments"].to_string());
            assert_eq!(span.tags["tool"], "lookup_order");
            let head: String = span.output_summary.chars().take(20).collect();
            let observation = step["observation"].as_str().unwrap();
            assert!(
                !head.is_empty() && observation.starts_with(&head),
                "{span:?}"
            );
        } else {
            assert_eq!(span.usage.input_tokens, step["tokens_in"].as_u64());
            assert_eq!(span.usage.output_tokens, step["tokens_out"].as_u64());
        }
    }
    // The receipt itemises each step: model steps' tokens, and the tool
    // topology's own cost (its `cost_per_call`), on lines naming the step.
    let receipt = &out.trace.record.receipt;
    assert_eq!(receipt.sum_of_lines(), receipt.total);
    for span in &step_spans {
        let billed: rust_decimal::Decimal = receipt
            .lines
            .iter()
            .filter(|l| l.step.as_deref() == Some(&*span.node))
            .map(|l| l.amount)
            .sum();
        assert_eq!(billed, span.cost, "{span:?} {receipt:?}");
        // A repeat ran nothing and costs nothing; every call did.
        if &*span.kind == "agent.repeat" {
            assert_eq!(span.cost, rust_decimal::Decimal::ZERO, "{span:?}");
        } else {
            assert!(span.cost > rust_decimal::Decimal::ZERO, "{span:?}");
        }
    }
}

/// The steps' kinds, in order.
fn kinds(v: &Value) -> Vec<&str> {
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_repeated_call_is_not_run_again_and_the_model_answers_from_its_result() {
    let p = build(&name(), &agent("max_iterations: 3"));
    let out = ask(&p, "What is the status of order 1042?").await;
    let v = out.result.expect("the agent runs");
    // The run the model makes: a call, the same call again, an answer.
    assert_eq!(
        kinds(&v),
        ["model", "tool", "model", "repeat", "model"],
        "{v}"
    );
    assert_eq!(v["status"], "answered", "{v}");
    assert_eq!(out.trace.record.labels["agent"], "answered");
    assert_eq!(
        (v["tool_calls"].as_u64(), v["repeated_calls"].as_u64()),
        (Some(1), Some(1))
    );
    let (call, again) = (&v["steps"][1], &v["steps"][3]);
    assert_eq!(again["repeat_of"], 2, "{v}");
    assert_eq!(again["arguments"], call["arguments"], "{v}");
    assert_eq!(again["observation"], call["observation"], "{v}");
    assert_eq!(again["cost"], 0.0, "{v}");
    assert!(
        call["observation"]
            .as_str()
            .unwrap()
            .starts_with("Order 1042: Lumen Kettle Pro"),
        "{v}"
    );
    // The last call could only answer: its reply is the answer object, and
    // the answer uses what the tool found. A reply cut by `max_tokens` (96
    // in `agent`) is an answer object as far as it was written, and the
    // answer is its text so far.
    let last_step = &v["steps"][4];
    let last = last_step["reply"].as_str().unwrap();
    let text = v["text"].as_str().unwrap();
    let opened = last.trim_start().strip_prefix('{').map(str::trim_start);
    assert!(
        opened.is_some_and(|r| r.starts_with("\"answer\"")),
        "{last}"
    );
    match serde_json::from_str::<Value>(last) {
        Ok(reply) => {
            assert_eq!(reply.as_object().map(|o| o.len()), Some(1), "{last}");
            assert_eq!(reply["answer"], text, "{v}");
        }
        Err(_) => {
            assert_eq!(
                last_step["tokens_out"], 96,
                "cut short, yet not by max_tokens: {v}"
            );
            let head: String = text.chars().take(24).collect();
            assert!(!head.is_empty() && last.contains(&head), "{v}");
        }
    }
    assert!(
        ["shipped", "DHL", "Lumen"].iter().any(|w| text.contains(w)),
        "the answer does not use the observation: {text}"
    );
    // The repeat is a span of its own, after the call it repeats; the
    // explanation says what happened, in English and Chinese.
    let span = out
        .trace
        .spans
        .iter()
        .find(|s| &*s.node == "agent#4")
        .expect("the repeat's span");
    assert_eq!(&*span.kind, "agent.repeat");
    assert_eq!(span.tags["tool"], "lookup_order");
    let en = &out.trace.record.explanation.text;
    assert!(
        en.contains(
            "its model repeated a call it had already made (`lookup_order` with the same \
             arguments), so the tool was not run again and the model was asked to answer from \
             the earlier result"
        ),
        "{en}"
    );
    assert!(
        note_zh(&out.trace).contains("模型重复了已做过的调用（`lookup_order`，参数相同）"),
        "{en}"
    );
}

#[tokio::test]
async fn on_repeat_run_runs_the_repeated_call_again_until_the_budget() {
    let p = build(&name(), &agent("max_iterations: 2\n      on_repeat: run"));
    let out = ask(&p, "What is the status of order 1042?").await;
    let v = out.result.expect("the agent runs");
    assert_eq!(kinds(&v), ["model", "tool", "model", "tool"], "{v}");
    assert_eq!(
        v["steps"][3]["arguments"], v["steps"][1]["arguments"],
        "{v}"
    );
    assert_eq!(v["status"], "budget_exhausted", "{v}");
    assert_eq!(v["repeated_calls"], 0, "{v}");
    assert!(
        !out.trace.record.explanation.text.contains("repeated"),
        "{}",
        out.trace.record.explanation.text
    );
}

#[tokio::test]
async fn on_repeat_stop_ends_the_loop_at_the_repeat_with_its_own_status() {
    let p = build(&name(), &agent("max_iterations: 3\n      on_repeat: stop"));
    let out = ask(&p, "What is the status of order 1042?").await;
    let v = out.result.expect("the agent runs");
    assert_eq!(kinds(&v), ["model", "tool", "model", "repeat"], "{v}");
    assert_eq!(v["status"], "repeated_call", "{v}");
    assert_eq!(v["stopped_by"], "on_repeat", "{v}");
    assert_eq!(out.trace.record.labels["agent"], "repeated_call");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains(
            "its model repeated a call it had already made (`lookup_order` with the same \
             arguments), and `on_repeat: stop` ends the loop there"
        ),
        "{text}"
    );
    assert!(
        note_zh(&out.trace).contains("`on_repeat: stop` 在此结束循环"),
        "{v}"
    );
}

#[test]
fn on_repeat_must_be_one_of_its_modes_where_written() {
    let text = agent("max_iterations: 3\n      on_repeat: ansewr");
    let (r, shown) = invalid(&text);
    assert_eq!(r.error_count(), 1, "{shown}");
    assert!(shown.contains("`on_repeat` is `ansewr`"), "{shown}");
    assert!(shown.contains("did you mean `answer`"), "{shown}");
    assert!(shown.contains("allowed: answer, run, stop"), "{shown}");
    let line = text.lines().position(|l| l.contains("ansewr")).unwrap() + 1;
    assert!(
        shown.contains(&format!("a.yaml:{line}:")),
        "located: {shown}"
    );
}

/// The Chinese of the agent's note in the request's explanation.
fn note_zh(trace: &glassbox_engine::Trace) -> String {
    trace
        .record
        .explanation
        .facts
        .iter()
        .flat_map(|f| f.facts.iter())
        .find_map(|f| match f {
            glassbox_engine::trace::Fact::Note { zh, .. } => Some(zh.clone()),
            _ => None,
        })
        .expect("the agent's note")
}

/// Runs the agent until its first budget check after one model call.
async fn stopped_by(budget: &str, question: &str) -> Option<Value> {
    let p = build(&name(), &agent(budget));
    let out = ask(&p, question).await;
    let v: Value = out.result.expect("the agent runs");
    // The model may answer at once: one model call, no budget involved.
    if v["status"] == "answered" {
        assert_eq!(v["iterations"], 1, "{v}");
        return None;
    }
    assert_eq!(v["status"], "budget_exhausted", "{v}");
    assert_eq!(v["iterations"], 1, "{v}");
    assert_eq!(v["steps"][1]["kind"], "tool", "{v}");
    let zh = note_zh(&out.trace);
    assert!(zh.contains("当时正在处理 `lookup_order` 的结果"), "{zh}");
    Some(v)
}

#[tokio::test]
async fn a_cost_budget_stops_the_loop_naming_the_budget() {
    // The first model call costs more than 0.000001 at these prices.
    let Some(v) = stopped_by(
        "max_iterations: 5\n      budget: { max_cost: 0.000001 }",
        "Where is my order 1043?",
    )
    .await
    else {
        return;
    };
    assert_eq!(v["stopped_by"], "budget.max_cost", "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("its cost budget (`budget.max_cost` 0.000001) ran out while it was using the result of `lookup_order`"),
        "{text}"
    );
}

#[tokio::test]
async fn a_time_budget_stops_the_loop_naming_the_budget() {
    // One model call takes longer than a millisecond.
    let Some(v) = stopped_by(
        "max_iterations: 5\n      budget: { max_time_ms: 1 }",
        "Where is my order 310?",
    )
    .await
    else {
        return;
    };
    assert_eq!(v["stopped_by"], "budget.max_time_ms", "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("its time budget (`budget.max_time_ms` 1 ms) ran out while it was using the result of `lookup_order`"),
        "{text}"
    );
}

#[tokio::test]
async fn a_token_budget_stops_the_loop_naming_the_budget() {
    // One token is spent by the first model call, whatever it says.
    let p = build(
        &name(),
        &agent("max_iterations: 5\n      budget: { max_tokens: 1 }"),
    );
    let out = ask(&p, "Where is my order 77?").await;
    let v: Value = out.result.expect("the agent runs");
    if v["status"] == "answered" {
        // It answered at once: one model call, no budget involved.
        assert_eq!(v["iterations"], 1, "{v}");
        return;
    }
    assert_eq!(v["status"], "budget_exhausted", "{v}");
    assert_eq!(v["stopped_by"], "budget.max_tokens", "{v}");
    assert_eq!(v["iterations"], 1, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("token budget (`budget.max_tokens` 1) ran out while it was using the result of `lookup_order`"), "{text}");
    let step = &v["steps"][1];
    assert_eq!(step["kind"], "tool", "{v}");
    assert!(
        step["observation"]
            .as_str()
            .unwrap()
            .starts_with("Order 77: Replacement water filter"),
        "{v}"
    );
    let zh = &out.trace.record.explanation;
    assert!(!zh.text.is_empty());
}

/// Validates `text` as `a.yaml`, which must be invalid: the report and
/// its rendering.
pub(crate) fn invalid(text: &str) -> (glassbox_topology::Report, String) {
    let registry = glassbox_nodes::registry();
    let err = glassbox_topology::load_source(
        glassbox_topology::Source::new("a.yaml", text),
        &registry.kind_set(),
    )
    .unwrap_err();
    let glassbox_topology::TopologyError::Invalid(r) = err else {
        panic!("{err}")
    };
    let shown = r.render(false);
    (*r, shown)
}

#[test]
fn an_agent_without_a_bound_or_tools_is_invalid() {
    let text = "topology_id: a\nversion: \"1\"\nnodes:\n  - id: a\n    type: agent\n    config: { backend: local }\n";
    let (_, shown) = invalid(text);
    assert!(shown.contains("max_iterations"), "{shown}");
    assert!(shown.contains("tools"), "{shown}");
    assert!(shown.contains("a.yaml:6"), "located: {shown}");
}

/// An agent whose `lookup_order` tool is a topology written inline, in the
/// agent's own file; `tool` is spliced in under the tool's `topology` key.
fn inline_agent(tool: &str) -> String {
    agent("max_iterations: 1").replace(
        "topology: order_lookup.yaml\n",
        &format!("topology:\n{tool}"),
    )
}

/// Writes `text` as a topology file in a fresh folder and builds it from
/// there (an inline tool topology is read back from its holder's file).
fn build_file(text: &str) -> (tempfile::TempDir, Result<glassbox_engine::Pipeline, String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.yaml");
    std::fs::write(&path, text).unwrap();
    let built =
        crate::support::try_build(&path.display().to_string(), text).map_err(|e| e.to_string());
    (dir, built)
}

#[tokio::test]
async fn a_tool_topology_written_inline_runs_like_one_in_its_own_file() {
    let tool = r#"            topology_id: order-lookup
            version: 1.0.0
            nodes:
              - id: lookup
                type: template
                resource: { type: cpu, cost_per_call: 0.00001 }
                config:
                  template_id: inline-orders
                  template: "Order {{ input.order_id }}: Lumen Kettle Pro; status shipped."
"#;
    let (_dir, built) = build_file(&inline_agent(tool));
    let p = built.expect("the agent and its inline tool build");
    let out = ask(&p, "Where is my order 1042?").await;
    let v = out.result.expect("the agent runs");
    let calls: Vec<&Value> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool")
        .collect();
    assert!(!calls.is_empty(), "the model called no tool: {v}");
    for call in calls {
        let order = call["arguments"]["order_id"].as_i64().unwrap();
        assert_eq!(
            call["observation"].as_str().unwrap(),
            format!("Order {order}: Lumen Kettle Pro; status shipped."),
            "{call}"
        );
        // The inline topology's own receipt is the step's cost.
        assert!(
            (call["cost"].as_f64().unwrap() - 0.00001).abs() < 1e-12,
            "{call}"
        );
    }
}

#[test]
fn a_broken_inline_tool_topology_is_reported_at_its_line_in_the_agents_file() {
    // Line 26 of the file: the inline node's kind, misspelt.
    let tool = "            topology_id: order-lookup\n            version: 1.0.0\n            nodes:\n              - id: lookup\n                type: templat\n                config: { template_id: t, template: x }\n";
    let text = inline_agent(tool);
    assert_eq!(text.lines().nth(25).map(str::trim), Some("type: templat"));
    let (dir, built) = build_file(&text);
    let err = built.expect_err("an unknown kind in the inline topology");
    let file = dir.path().join("agent.yaml").display().to_string();
    assert!(err.contains("tool `lookup_order`"), "{err}");
    assert!(err.contains("written inline"), "{err}");
    assert!(
        err.contains(&format!("{file}:26:")),
        "located in the file: {err}"
    );
    assert!(err.contains("templat"), "{err}");
}

#[test]
fn a_tool_topology_that_is_neither_a_file_nor_a_map_is_invalid_where_written() {
    let text = inline_agent("").replace("topology:\n", "topology: 3\n");
    let (r, shown) = invalid(&text);
    assert!(
        shown.contains("file name or a topology written inline"),
        "{shown}"
    );
    assert!(shown.contains("a.yaml:21"), "located: {shown}");
    assert_eq!(
        r.error_count(),
        1,
        "one error, not a second one for the missing runner: {shown}"
    );
}
