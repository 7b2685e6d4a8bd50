//! `tool_retrieval`, `inject` and `tool_first` on the real local models:
//! MiniLM ranks the agent's tools against the question and SmolLM2-135M is
//! offered only the closest, so an order question can only look an order
//! up and a product question can only read the guide; an injected argument
//! is filled by the topology, not written by the model; `tool_first` makes
//! the first model call a tool call. The tools are the example's order
//! table and a small inline guide.

use glassbox_engine::RunOptions;
use serde_json::{Value, json};

use crate::agent::invalid;
use crate::support::build;

/// Two tools, one for orders and one for product care; `extra` is spliced
/// into the config.
fn agent(extra: &str) -> String {
    format!(
        r#"
topology_id: agent-pick-test
version: "1"
defaults: {{ timeout_ms: 600000, deadline_ms: 900000 }}
nodes:
  - id: agent
    type: agent
    resource: {{ type: cpu, cost_per_1k_input_tokens: 0.001, cost_per_1k_output_tokens: 0.002 }}
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      system: You are the support assistant of a kettle maker.
      max_tokens: 64
      temperature: 0
      seed: 42
      max_iterations: 2
      {extra}
      tools:
        - name: lookup_order
          description: Looks up a customer's order by its order number and tells its delivery status.
          parameters: {{ type: object, properties: {{ order_id: {{ type: integer }} }}, required: [order_id] }}
          topology: order_lookup.yaml
        - name: care_guide
          description: How to clean, descale and look after the kettle.
          parameters: {{ type: object, properties: {{ topic: {{ type: string, maxLength: 40 }} }}, required: [topic] }}
          topology:
            topology_id: care-guide
            version: 1.0.0
            nodes:
              - id: guide
                type: template
                resource: {{ type: cpu, cost_per_call: 0.00001 }}
                config: {{ template_id: guide-v1, template: "Descale monthly: half water, half white vinegar, boil, rinse twice." }}
            edges: []
"#
    )
}

fn name() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agent");
    root.join("agent-pick-test.yaml").display().to_string()
}

/// The tools the run was offered (its `pick` step) and those it called.
fn offered_and_called(v: &Value) -> (Vec<String>, Vec<String>) {
    let steps = v["steps"].as_array().expect("steps");
    let pick = steps
        .iter()
        .find(|s| s["kind"] == "pick")
        .unwrap_or_else(|| panic!("a pick step: {v}"));
    let offered = pick["offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap().to_string())
        .collect();
    let called = steps
        .iter()
        .filter(|s| s["kind"] == "tool" || s["kind"] == "repeat")
        .map(|s| s["tool"].as_str().unwrap().to_string())
        .collect();
    (offered, called)
}

#[tokio::test]
async fn each_question_is_offered_the_tool_closest_to_it_and_can_call_no_other() {
    let p = build(&name(), &agent("tool_retrieval: { top_k: 1 }"));
    for (question, tool) in [
        ("Where is my order 1042?", "lookup_order"),
        ("How do I descale my kettle?", "care_guide"),
    ] {
        let out = p
            .run(json!({"question": question}), RunOptions::default())
            .await;
        let v = out.result.expect("the agent runs");
        let (offered, called) = offered_and_called(&v);
        assert_eq!(offered, [tool], "{question}: {v}");
        assert!(called.iter().all(|c| c == tool), "{question}: {v}");
        // The pick is step 1, its own span tagged with the embedding model,
        // and every tool is scored, the offered one highest.
        let steps = v["steps"].as_array().unwrap();
        assert_eq!(steps[0]["kind"], "pick", "{v}");
        let best = steps[0]["offered"][0]["similarity"].as_f64().unwrap();
        let other = steps[0]["left_out"][0]["similarity"].as_f64().unwrap();
        assert!(best > other, "{v}");
        let span = out
            .trace
            .spans
            .iter()
            .find(|s| &*s.kind == "agent.pick")
            .unwrap_or_else(|| panic!("an agent.pick span: {:?}", out.trace.spans));
        assert_eq!(&*span.node, "agent#1");
        assert!(span.tags["model"].contains("minilm"), "{:?}", span.tags);
        assert!(span.output_summary.contains(tool), "{span:?}");
        // The explanation says which tool was offered and why.
        let explanation = &out.trace.record.explanation.text;
        assert!(
            explanation
                .contains("Of its 2 tools the agent was offered the 1 closest to the question")
                && explanation.contains(tool),
            "{explanation}"
        );
    }
}

#[tokio::test]
async fn without_retrieval_every_tool_is_offered_and_no_pick_is_made() {
    let p = build(&name(), &agent(""));
    let out = p
        .run(
            json!({"question": "How do I descale my kettle?"}),
            RunOptions::default(),
        )
        .await;
    let v = out.result.expect("the agent runs");
    let steps = v["steps"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["kind"] != "pick"), "{v}");
    assert_eq!(steps[0]["kind"], "model", "{v}");
    assert!(
        !out.trace.spans.iter().any(|s| &*s.kind == "agent.pick"),
        "{:?}",
        out.trace.spans
    );
}

#[tokio::test]
async fn an_injected_argument_is_the_question_and_the_first_call_must_be_a_tool() {
    let text = agent("tool_retrieval: { top_k: 1 }\n      tool_first: true").replace(
        "required: [topic] }",
        "required: [topic] }\n          inject: { topic: input.question }",
    );
    let p = build(&name(), &text);
    let question = "How do I descale my kettle?";
    let out = p
        .run(json!({"question": question}), RunOptions::default())
        .await;
    let v = out.result.expect("the agent runs");
    let steps = v["steps"].as_array().unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s["kind"].as_str().unwrap()).collect();
    // pick, then a model call that could only call the (one) offered tool.
    assert_eq!(kinds[..3], ["pick", "model", "tool"], "{v}");
    assert_eq!(steps[2]["tool"], "care_guide", "{v}");
    // The model was not shown `topic` and wrote no arguments of its own:
    // the call's arguments are exactly the injected question.
    assert_eq!(steps[2]["arguments"], json!({"topic": question}), "{v}");
    let reply: Value = serde_json::from_str(steps[1]["reply"].as_str().unwrap()).unwrap();
    assert_eq!(reply["parameters"], json!({}), "{v}");
    assert!(
        steps[2]["observation"]
            .as_str()
            .unwrap()
            .contains("Descale monthly"),
        "{v}"
    );
}

#[test]
fn top_k_must_leave_a_tool_out_and_is_located() {
    let text = agent("tool_retrieval: { top_k: 2 }");
    let (r, shown) = invalid(&text);
    assert_eq!(r.error_count(), 1, "{shown}");
    assert!(
        shown.contains("`top_k` 2 offers every one of the agent's 2 tools"),
        "{shown}"
    );
    assert!(shown.contains("use a `top_k` below 2"), "{shown}");
    let line = text.lines().position(|l| l.contains("top_k")).unwrap() + 1;
    assert!(shown.contains(&format!("a.yaml:{line}:")), "{shown}");

    let (r, shown) = invalid(&agent("tool_retrieval: { model: all-minilm-l6-v2 }"));
    assert_eq!(r.error_count(), 1, "{shown}");
    assert!(shown.contains("top_k"), "{shown}");
}

#[test]
fn only_string_parameters_of_the_tool_can_be_injected() {
    let text = agent("").replace(
        "required: [order_id] }",
        "required: [order_id] }\n          inject: { order_id: input.question }",
    );
    let (r, shown) = invalid(&text);
    assert_eq!(r.error_count(), 1, "{shown}");
    assert!(
        shown.contains("`inject` names `order_id`, which is not a string parameter"),
        "{shown}"
    );
    let line = text.lines().position(|l| l.contains("inject:")).unwrap() + 1;
    assert!(shown.contains(&format!("a.yaml:{line}:")), "{shown}");
}
