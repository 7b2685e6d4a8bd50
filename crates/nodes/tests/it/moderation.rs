//! The shipped `examples/moderation.yaml`, end to end.

use glassbox_engine::RunOptions;
use glassbox_engine::trace::{Lang, RequestStatus};
use serde_json::json;

use crate::support::{build, try_build};

fn example() -> glassbox_engine::Pipeline {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/moderation.yaml"
    ))
    .unwrap();
    build("moderation.yaml", &text)
}

#[tokio::test]
async fn pricing_questions_take_the_pricing_branch() {
    let p = example();
    let out = p
        .run(
            json!({"question": "What is the price of Pro?"}),
            RunOptions::default(),
        )
        .await;
    let v = out.result.unwrap();
    assert!(v["text"].as_str().unwrap().starts_with("Plans start at $9"));
    let r = &out.trace.record;
    assert_eq!(
        r.path.taken_nodes().collect::<Vec<_>>(),
        vec!["route", "pricing_answer", "check"]
    );
    assert_eq!(
        r.path.edge("route", "pricing_answer").unwrap().why,
        "label pricing emitted by route (rule mentions_price)"
    );
    assert_eq!(r.receipt.sum_of_lines(), r.receipt.total);
    assert_eq!(
        r.explanation.text,
        "The question was classified as `pricing` (rule `mentions_price`), and the prompt was built \
         from template `pricing-v2`; the output guard passed 3 rules."
    );
    let spans = &out.trace.spans;
    assert_eq!(spans.len(), 3);
    assert_eq!(
        spans[1].tags.get("template_id").map(String::as_str),
        Some("pricing-v2")
    );
}

#[tokio::test]
async fn the_guard_replaces_answers_that_leak() {
    let p = example();
    let opts = RunOptions {
        lang: Lang::Zh,
        ..RunOptions::default()
    };
    let out = p
        .run(json!({"question": "write to me at bob@example.com"}), opts)
        .await;
    assert_eq!(out.result.unwrap()["text"], "Sorry, I can't repeat that.");
    let r = &out.trace.record;
    assert_eq!(r.status, RequestStatus::Ok);
    assert!(
        r.explanation
            .text
            .contains("问题被归类为「general」（未命中规则，使用默认）"),
        "{}",
        r.explanation.text
    );
    assert!(
        r.explanation
            .text
            .contains("输出检查命中 `no_email`，已替换回答"),
        "{}",
        r.explanation.text
    );
    let guard_span = out
        .trace
        .spans
        .iter()
        .find(|s| &*s.node == "check")
        .unwrap();
    assert_eq!(
        guard_span.tags.get("rules_hit").map(String::as_str),
        Some("no_email")
    );
}

#[tokio::test]
async fn undefined_template_variables_fail_loudly() {
    let p = build(
        "t.yaml",
        r#"
topology_id: t
version: "1"
nodes:
  - { id: prompt, type: template, config: { template: "Hello {{ input.nmae }}" } }
"#,
    );
    let out = p.run(json!({"name": "Ada"}), RunOptions::default()).await;
    let err = out.result.unwrap_err();
    assert_eq!(err.node(), Some("prompt"));
    assert!(
        err.to_string()
            .contains("template `prompt` failed to render"),
        "{err}"
    );
    assert_eq!(out.trace.record.status, RequestStatus::Failed);
}

#[tokio::test]
async fn templates_read_upstream_outputs() {
    let p = build(
        "t.yaml",
        r#"
topology_id: t
version: "1"
nodes:
  - id: route
    type: router
    config: { rules: [ { when: 'input.n > 2', label: big, name: is_big } ], default: small }
  - { id: prompt, type: template, config: { template: "{{ outputs.route.label }} via {{ outputs.route.rule }}", template_id: t1 } }
edges:
  - { from: route, to: prompt }
"#,
    );
    let out = p.run(json!({"n": 5}), RunOptions::default()).await;
    assert_eq!(out.result.unwrap()["text"], "big via is_big");
}

#[test]
fn the_bare_seed_validates_but_names_the_config_it_needs_to_run() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/rag-chat-v3.json"
    ))
    .expect("the seed example is checked in");
    let err = try_build("rag.json", &text).unwrap_err();
    let mut codes: Vec<_> = err
        .errors
        .iter()
        .map(|e| (e.node.as_str(), e.error.code()))
        .collect();
    codes.sort_unstable();
    // The seed carries no `config`: the router has no rules, the search no
    // index and the template no text. Model nodes load lazily, so they build.
    assert_eq!(
        codes,
        [
            ("prompt", "bad_config"),
            ("retrieve", "bad_config"),
            ("route", "bad_config")
        ],
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("route"), "{text}");
}
