//! `chunk_prewarm` on the real models: an index's chunks are in the chunk
//! cache before any question retrieves them.

use std::path::Path;

use glassbox_engine::RunOptions;
use glassbox_models::{Embedder, EmbedderOptions, build_index, minilm_dir, models_dir};
use serde_json::json;

use crate::support::build;

/// A retrieval topology over `index` (two notes a question) whose `llm`
/// node reuses chunks, with
/// `prewarm` added to its config (and its own cache size, so each
/// topology gets an engine of its own).
fn rag(index: &Path, cache_mib: u32, prewarm: &str) -> String {
    let index = index.display();
    format!(
        r#"
topology_id: prewarm
version: "1"
nodes:
  - id: embed
    type: embedding
    config: {{ backend: local, model: all-minilm-l6-v2, text: input.question }}
  - id: retrieve
    type: vector_search
    config: {{ index: "{index}", top_k: 2 }}
  - id: prompt
    type: template
    config:
      template: |-
        Answer using this note.
        {{% for hit in outputs.retrieve.hits %}}
        Note: {{{{ hit.text }}}}
        {{% endfor %}}
        Question: {{{{ input.question }}}}
  - id: llm
    type: llm_inference
    resource: {{ type: gpu, model: smollm2-135m }}
    config:
      backend: local
      model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      system: Answer in one short sentence.
      prompt: '{{{{ outputs.prompt.text }}}}'
      max_tokens: 4
      temperature: 0
      kv_reuse: chunks
      chunk_cache_mib: {cache_mib}
{prewarm}
edges:
  - {{ from: embed, to: retrieve }}
  - {{ from: retrieve, to: prompt }}
  - {{ from: prompt, to: llm }}
"#
    )
}

/// Prompt tokens the `llm` span says were placed from the chunk cache, and
/// its `chunk_prewarm` tag (set when a prewarmed node placed none).
async fn placed_and_tag(p: &glassbox_engine::Pipeline, question: &str) -> (u64, Option<String>) {
    let out = p
        .run(json!({ "question": question }), RunOptions::default())
        .await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    let span = out.trace.spans.iter().find(|s| &*s.node == "llm").unwrap();
    let placed = span
        .tags
        .get("prompt_placed_tokens")
        .map_or(0, |n| n.parse().unwrap());
    (
        placed,
        span.tags.get("chunk_prewarm").map(|t| t.to_string()),
    )
}

async fn placed(p: &glassbox_engine::Pipeline, question: &str) -> u64 {
    placed_and_tag(p, question).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prewarmed_chunk_is_placed_the_first_time_a_question_retrieves_it() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rag-chat/kb");
    for name in ["02-pricing.md", "08-warranty.md"] {
        std::fs::copy(kb.join(name), docs.join(name)).unwrap();
    }
    let embedder = Embedder::load(&minilm_dir(&models_dir()), EmbedderOptions::default()).unwrap();
    let index = dir.path().join("kb.index");
    build_index(&docs, &embedder, &index, &mut |_| {}).unwrap();

    let question = "How long is the warranty?";
    let cold = build("cold.yaml", &rag(&index, 65, ""));
    assert_eq!(placed(&cold, question).await, 0, "nothing cached yet");

    let frame = "Answer using this note.\n\nNote: {{ chunk.text }}\n\nQuestion: ";
    let prewarm = format!(
        "      chunk_prewarm: {{ index: \"{}\", prompt: {} }}",
        index.display(),
        json!(frame)
    );
    let warm = build("warm.yaml", &rag(&index, 66, &prewarm));
    // The first note may come from a slot's prefix (a prewarm request left
    // it there); the second follows another note, as no prewarm prompt
    // had it, so only the chunk cache can hold its KV.
    let (n, tag) = placed_and_tag(&warm, question).await;
    assert!(n >= 16, "the second note was placed: {n} tokens");
    assert_eq!(tag, None, "nothing amiss");

    // A frame that changes the chunk's text saves KV no prompt looks up:
    // nothing is placed, and the trace says why.
    let upper = prewarm.replace("chunk.text", "chunk.text | upper");
    let wrong = build("wrong.yaml", &rag(&index, 67, &upper));
    let (n, tag) = placed_and_tag(&wrong, question).await;
    assert_eq!(n, 0);
    let tag = tag.expect("a prewarmed node that placed nothing is tagged");
    assert!(
        tag.contains("chunk_prewarm.prompt") && tag.contains("chunk_cache_mib"),
        "{tag}"
    );
}
