//! `template`: retrieved chunks in the order they were ranked (the default,
//! today's prompts bit for bit) or in a canonical order (`chunk_order:
//! canonical`), so that prompts sharing chunks share their prefix.

use glassbox_engine::RunOptions;
use serde_json::{Value, json};

use crate::support::build;

/// A topology whose `retrieve` node stands in for a `vector_search` (the
/// same `hits` shape, no model) and whose `prompt` is rag-chat's template.
fn rag(hits: &str, chunk_order: Option<&str>) -> String {
    let order = chunk_order.map_or(String::new(), |o| format!("\n      chunk_order: {o}"));
    format!(
        r#"
topology_id: t
version: "1"
nodes:
  - id: retrieve
    type: template
    config: {{ output: json, template: '{{"hits": {hits}}}' }}
  - id: prompt
    type: template
    config:{order}
      template: |-
        {{% if outputs.retrieve is defined and outputs.retrieve.hits %}}Answer the question using only these notes.
        {{% for hit in outputs.retrieve.hits %}}
        Note: {{{{ hit.text }}}}
        {{% endfor %}}
        Question: {{{{ input.question }}}}{{% else %}}{{{{ input.question }}}}{{% endif %}}
edges:
  - {{ from: retrieve, to: prompt }}
"#
    )
}

const BA: &str = r##"[{"doc_id": "b", "chunk_id": "b#0", "text": "B0"}, {"doc_id": "a", "chunk_id": "a#10", "text": "A10"}, {"doc_id": "a", "chunk_id": "a#2", "text": "A2"}]"##;
const AB: &str = r##"[{"doc_id": "a", "chunk_id": "a#2", "text": "A2"}, {"doc_id": "b", "chunk_id": "b#0", "text": "B0"}, {"doc_id": "a", "chunk_id": "a#10", "text": "A10"}]"##;

/// The rendered prompt and the `prompt` span's tags.
async fn render(hits: &str, chunk_order: Option<&str>) -> (String, Value) {
    let p = build("t.yaml", &rag(hits, chunk_order));
    let out = p
        .run(json!({"question": "Q?"}), RunOptions::default())
        .await;
    let value = out.result.unwrap();
    let span = out
        .trace
        .spans
        .iter()
        .find(|s| &*s.node == "prompt")
        .unwrap();
    let tags = serde_json::to_value(&span.tags).unwrap();
    (value["text"].as_str().unwrap().to_owned(), tags)
}

#[tokio::test]
async fn by_default_chunks_stay_in_retrieved_order_and_the_prompt_is_unchanged() {
    for order in [None, Some("retrieved")] {
        let (text, tags) = render(BA, order).await;
        assert_eq!(
            text,
            "Answer the question using only these notes.\n\nNote: B0\n\nNote: A10\n\nNote: A2\n\nQuestion: Q?"
        );
        assert!(tags.get("chunks").is_none(), "{tags}");
        assert!(tags.get("chunk_order").is_none(), "{tags}");
    }
}

#[tokio::test]
async fn canonical_order_renders_the_same_chunks_the_same_way() {
    let (ba, tags) = render(BA, Some("canonical")).await;
    let (ab, _) = render(AB, Some("canonical")).await;
    assert_eq!(ba, ab, "the same chunks, ranked differently");
    assert_eq!(
        ba,
        "Answer the question using only these notes.\n\nNote: A2\n\nNote: A10\n\nNote: B0\n\nQuestion: Q?",
        "by document, then chunk number"
    );
    assert_eq!(tags["chunks"], "a#2,a#10,b#0");
    assert_eq!(tags["chunk_order"], "canonical");
}

#[test]
fn an_unknown_chunk_order_is_a_config_error_with_a_hint() {
    let registry = glassbox_nodes::registry();
    let text = rag(AB, Some("alphabetical"));
    let err = glassbox_topology::load_source(
        glassbox_topology::Source::new("t.yaml", &text),
        &registry.kind_set(),
    )
    .err()
    .unwrap();
    let glassbox_topology::TopologyError::Invalid(report) = err else {
        panic!("{err}");
    };
    let shown = report.render(false);
    assert!(shown.contains("`chunk_order` is `alphabetical`"), "{shown}");
    assert!(
        shown.contains("use `retrieved` (the default) or `canonical`"),
        "{shown}"
    );
}

/// The output lists the chunks the text quotes, in the order it quotes
/// them, for an LLM node's per-chunk KV reuse (`kv_reuse: chunks`).
#[tokio::test]
async fn the_output_names_the_quoted_chunks_in_prompt_order() {
    for (order, ids) in [
        (None, ["b#0", "a#10", "a#2"]),
        (Some("canonical"), ["a#2", "a#10", "b#0"]),
    ] {
        let p = build("t.yaml", &rag(BA, order));
        let out = p
            .run(json!({"question": "Q?"}), RunOptions::default())
            .await;
        let value = out.result.unwrap();
        let chunks = value["chunks"].as_array().expect("chunks listed");
        let got: Vec<&str> = chunks.iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert_eq!(got, ids, "{order:?}");
        let text = value["text"].as_str().unwrap();
        for c in chunks {
            assert!(text.contains(c["text"].as_str().unwrap()));
        }
    }
    // No hits, no list.
    let p = build("t.yaml", &rag("[]", None));
    let out = p
        .run(json!({"question": "Q?"}), RunOptions::default())
        .await;
    assert!(out.result.unwrap().get("chunks").is_none());
}
