//! The model-backed kinds with the real local models (fetched by
//! `scripts/fetch-models.sh`, as the test command does): example routing by
//! MiniLM similarity, SmolLM2 token streaming, and their error paths.

use glassbox_engine::trace::{RequestStatus, SpanStatus};
use glassbox_engine::{RunOptions, TokenChunk};
use serde_json::json;

use crate::support::{build, try_build};

const ROUTER: &str = r#"
topology_id: intent
version: "1"
nodes:
  - id: route
    type: router
    config:
      rules:
        - { name: says_refund, when: 'input.question.contains("refund")', label: returns }
      examples:
        pricing: ["How much does it cost?", "What is the price of the Pro plan?"]
        small_talk: ["hello there", "how are you today?", "tell me a joke"]
      default: unknown
      min_similarity: 0.35
  - { id: pricing, type: template, config: { template: "pricing" } }
  - { id: small_talk, type: template, config: { template: "chat" } }
  - { id: returns, type: template, config: { template: "returns" } }
  - { id: unknown, type: template, config: { template: "unknown" } }
edges:
  - { from: route, to: pricing, condition: pricing }
  - { from: route, to: small_talk, condition: small_talk }
  - { from: route, to: returns, condition: returns }
  - { from: route, to: unknown, condition: unknown }
"#;

async fn label_of(p: &glassbox_engine::Pipeline, question: &str) -> (String, String) {
    let out = p
        .run(json!({ "question": question }), RunOptions::default())
        .await;
    let r = &out.trace.record;
    assert_eq!(r.status, RequestStatus::Ok, "{:?}", out.result);
    let label = r.labels.get("route").cloned().unwrap_or_default();
    let why = out.trace.spans[0]
        .tags
        .get("similarity")
        .cloned()
        .unwrap_or_default();
    (label, why)
}

#[tokio::test]
async fn routers_fall_back_to_the_nearest_labelled_example() {
    let p = build("intent.yaml", ROUTER);
    // A rule still wins over the examples.
    assert_eq!(label_of(&p, "I want a refund").await.0, "returns");
    let (label, sim) = label_of(&p, "what's the cost of the pro plan").await;
    assert_eq!(label, "pricing");
    assert!(sim.parse::<f32>().unwrap() >= 0.35, "{sim}");
    assert_eq!(label_of(&p, "hi, how are you doing?").await.0, "small_talk");
    // Nothing like any example: the default, with the similarity recorded.
    let (label, sim) = label_of(&p, "Quantum chromodynamics lattice gauge theory").await;
    assert_eq!(label, "unknown", "similarity {sim}");
}

#[tokio::test]
async fn the_explanation_says_which_example_was_nearest() {
    let p = build("intent.yaml", ROUTER);
    let out = p
        .run(
            json!({ "question": "what's the price?" }),
            RunOptions::default(),
        )
        .await;
    let text = &out.trace.record.explanation.text;
    assert!(text.contains("nearest example “"), "{text}");
    assert!(text.contains("similarity 0."), "{text}");
}

const LLM: &str = r#"
topology_id: chat
version: "1"
nodes:
  - id: llm
    type: llm_inference
    resource: { type: gpu, model: smollm2-135m }
    config: { backend: local, model: smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, max_tokens: 12, temperature: 0, seed: 7 }
edges: []
"#;

#[tokio::test]
async fn llm_nodes_stream_tokens_that_add_up_to_the_answer() {
    let p = build("chat.yaml", LLM);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<TokenChunk>();
    let out = p
        .run(
            json!({ "question": "Name a colour." }),
            RunOptions {
                tokens: Some(tx),
                ..RunOptions::default()
            },
        )
        .await;
    let answer = out.result.unwrap()["text"].as_str().unwrap().to_string();
    let mut streamed = String::new();
    let mut chunks = 0;
    while let Ok(c) = rx.try_recv() {
        assert_eq!((&*c.node, c.attempt), ("llm", 1));
        streamed.push_str(&c.text);
        chunks += 1;
    }
    assert!(chunks > 1, "{chunks} chunk(s)");
    assert_eq!(streamed, answer);
    let span = &out.trace.spans[0];
    let generated = span.usage.output_tokens.unwrap();
    assert!((1..=12).contains(&generated), "{generated} tokens");
    assert!(
        span.tags["model_version"].contains("SmolLM2"),
        "{:?}",
        span.tags
    );

    // Same seed, same text, streamed or not.
    let again = p
        .run(
            json!({ "question": "Name a colour." }),
            RunOptions::default(),
        )
        .await;
    assert_eq!(again.result.unwrap()["text"], json!(answer));

    // A caller that shows only other nodes' text gets none of this one's,
    // and the answer is the same: the engine read it back whole.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<TokenChunk>();
    let quiet = p
        .run(
            json!({ "question": "Name a colour." }),
            RunOptions {
                tokens: Some(tx),
                live_nodes: Some(vec!["guard".into()]),
                ..RunOptions::default()
            },
        )
        .await;
    assert_eq!(quiet.result.unwrap()["text"], json!(answer));
    assert!(rx.try_recv().is_err(), "a node not shown live streamed");
}

#[test]
fn a_missing_model_file_names_the_path_and_the_fix() {
    let err = try_build(
        "chat.yaml",
        &LLM.replace("SmolLM2-135M-Instruct.Q4_1.gguf", "nope.gguf"),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("nope.gguf"), "{text}");
    // One hint: the model's own error carries it; the node adds none.
    assert_eq!(text.matches("glassbox models fetch").count(), 1, "{text}");
}

/// The build error of a topology at `name` with the one node `node` (a
/// YAML flow map).
fn one_node_error(name: &str, node: &str) -> String {
    let text = format!("topology_id: t\nversion: \"1\"\nnodes:\n  - {node}\nedges: []\n");
    try_build(name, &text)
        .expect_err("the node cannot be built")
        .to_string()
}

#[test]
fn a_missing_embedding_model_gives_one_hint() {
    let text = one_node_error(
        "embed.yaml",
        "{ id: embed, type: embedding, config: { model: no-such-embedder } }",
    );
    assert!(text.contains("no-such-embedder"), "{text}");
    assert_eq!(text.matches("glassbox models fetch").count(), 1, "{text}");
    assert_eq!(text.matches("hint:").count(), 1, "{text}");
}

#[test]
fn a_missing_index_names_the_build_command() {
    let text = one_node_error(
        "search.yaml",
        "{ id: search, type: vector_search, config: { index: does-not-exist.index, top_k: 3 } }",
    );
    assert!(text.contains("does-not-exist.index"), "{text}");
    // One hint, naming the folder the topology asked for (not a second,
    // generic one after it).
    assert_eq!(text.matches("glassbox index build").count(), 1, "{text}");
    assert!(
        text.contains(
            "does-not-exist.index`; hint: build one with `glassbox index build DOCS --out "
        ),
        "{text}"
    );
}

#[test]
fn an_unreadable_index_says_so_and_how_to_rebuild_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("broken.index");
    std::fs::create_dir(&index).unwrap();
    std::fs::write(index.join("manifest.json"), "{ not json").unwrap();
    let text = one_node_error(
        &dir.path().join("search.yaml").display().to_string(),
        "{ id: search, type: vector_search, config: { index: broken.index, top_k: 3 } }",
    );
    assert!(text.contains("cannot open index"), "{text}");
    assert!(
        text.contains("hint: rebuild it with `glassbox index build DOCS --out "),
        "{text}"
    );
    assert!(text.contains("broken.index`"), "{text}");
}

#[tokio::test]
async fn an_unreachable_openai_server_fails_the_node_with_a_complete_trace() {
    // Port 9 (discard) on loopback: nothing listens, the connection is refused.
    let p = build(
        "remote.yaml",
        r#"
topology_id: remote
version: "1"
nodes:
  - id: embed
    type: embedding
    config: { backend: openai, base_url: "http://127.0.0.1:9/v1", model: text-embedding-3-small, allow_hosts: ["127.0.0.1"] }
  - id: llm
    type: llm_inference
    timeout_ms: 2000
    config: { backend: openai, base_url: "http://127.0.0.1:9/v1", model: gpt-4o-mini, allow_hosts: ["127.0.0.1"] }
edges:
  - { from: embed, to: llm }
"#,
    );
    let out = p
        .run(json!({ "question": "hi" }), RunOptions::default())
        .await;
    let err = out.result.unwrap_err();
    assert!(err.to_string().contains("embed"), "{err}");
    assert!(err.to_string().contains("127.0.0.1:9"), "{err}");
    let r = &out.trace.record;
    assert_eq!(r.status, RequestStatus::Failed);
    assert_eq!(out.trace.spans[0].status, SpanStatus::Error);
    let llm = r.path.nodes.iter().find(|n| &*n.id == "llm").unwrap();
    assert_eq!(llm.status.as_str(), "not_run", "{r:?}");
}

/// A response cache matching by the topology's own MiniLM embedding node:
/// a paraphrase is served from the cache, an unrelated question is not.
#[tokio::test]
async fn a_similarity_cache_uses_the_topologys_embedding_model() {
    let p = build(
        "cached.yaml",
        r#"
topology_id: cached
version: "1"
nodes:
  - { id: embed, type: embedding, config: { backend: local } }
  - id: answer
    type: template
    config: { template: "answer to {{ input.question }}" }
    cache: { similarity: { embedding: embed, threshold: 0.9 } }
edges:
  - { from: embed, to: answer }
"#,
    );
    let ask = |q: &'static str| {
        let p = p.clone();
        async move {
            let out = p.run(json!({ "question": q }), RunOptions::default()).await;
            assert!(out.result.is_ok(), "{:?}", out.result);
            let span = out
                .trace
                .spans
                .iter()
                .find(|s| &*s.node == "answer")
                .unwrap();
            let tags = span.tags.clone();
            (
                out.result.unwrap()["text"].as_str().unwrap().to_owned(),
                tags,
            )
        }
    };
    let (first, tags) = ask("What is the price of the Pro plan?").await;
    assert_eq!(tags.get("cache").map(String::as_str), Some("miss"));
    let (text, tags) = ask("what is the price of the pro plan").await;
    assert_eq!(
        tags.get("cache").map(String::as_str),
        Some("hit"),
        "{tags:?}"
    );
    assert_eq!(tags.get("cache_match").map(String::as_str), Some("similar"));
    assert_eq!(text, first, "the cached answer is served");
    let similarity: f64 = tags["cache_similarity"].parse().unwrap();
    assert!(similarity >= 0.9, "{similarity}");
    let (text, tags) = ask("Tell me a joke about penguins").await;
    assert_eq!(
        tags.get("cache").map(String::as_str),
        Some("miss"),
        "{tags:?}"
    );
    assert_eq!(text, "answer to Tell me a joke about penguins");
}

/// The render runs on a thread of its own, so that a prompt that never
/// ends fails this test at the timeout instead of hanging it.
#[test]
fn an_llm_prompt_that_loops_spends_its_cpu_budget_and_fails() {
    let looping = LLM.replace(
        "max_tokens: 12,",
        "max_tokens: 12, prompt: '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}',",
    );
    assert_ne!(looping, LLM, "the prompt was added");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let p = build("loop.yaml", &looping);
        let out = runtime.block_on(p.run(
            json!({ "question": "Name a colour." }),
            RunOptions::default(),
        ));
        let _ = tx.send(out.result.map_err(|e| e.to_string()));
    });
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the render stopped at its budget instead of running on");
    let err = result.unwrap_err();
    assert!(err.contains("fuel"), "{err}");
}
