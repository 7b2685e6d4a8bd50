//! `output_guard`: fail, replace and re-run upstream.

use glassbox_engine::RunOptions;
use glassbox_engine::trace::SpanRole;
use serde_json::json;

use crate::support::build;

#[tokio::test]
async fn failing_guards_name_the_rules() {
    let p = build(
        "g.yaml",
        r#"
topology_id: g
version: "1"
nodes:
  - { id: prompt, type: template, config: { template: "my password is {{ input.p }}" } }
  - { id: check, type: output_guard, config: { blocklist: [password], on_violation: fail } }
edges:
  - { from: prompt, to: check }
"#,
    );
    let out = p.run(json!({"p": "x"}), RunOptions::default()).await;
    let err = out.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `check` failed on attempt 1: output of `prompt` violates blocklist (password)"
    );
}

#[tokio::test]
async fn rerun_gives_up_after_max_reruns() {
    let p = build(
        "g.yaml",
        r#"
topology_id: g
version: "1"
nodes:
  - { id: prompt, type: template, config: { template: "{\"answer\": 1}", output: text } }
  - id: check
    type: output_guard
    config:
      json_schema: { type: object, required: [answer], properties: { answer: { type: string } } }
      on_violation: rerun
      max_reruns: 2
edges:
  - { from: prompt, to: check }
"#,
    );
    let out = p.run(json!({}), RunOptions::default()).await;
    let err = out.result.unwrap_err();
    assert!(err.to_string().contains("still violates json_schema ($.answer: expected \"string\", found integer) after 2 re-run(s)"), "{err}");
    let reruns = out
        .trace
        .spans
        .iter()
        .filter(|s| matches!(s.role, SpanRole::Rerun { .. }))
        .count();
    assert_eq!(reruns, 2);
    assert_eq!(
        out.trace
            .spans
            .iter()
            .filter(|s| &*s.node == "check")
            .count(),
        3
    );
}
