//! The RAG example end to end with the real local models: a product question
//! takes the retrieval path and is answered from the retrieved documents
//! (the explanation lists their titles); small talk takes the direct path.

use crate::support::{assert_exit, glassbox, models_turn, root, stdout};

fn run(topology: &str, question: &str) -> serde_json::Value {
    let out = glassbox(
        &["run", topology, "--question", question, "--format", "json"],
        None,
    );
    assert_exit(&out, 0);
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn node_status<'a>(v: &'a serde_json::Value, id: &str) -> &'a str {
    v["path"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .and_then(|n| n["status"].as_str())
        .unwrap_or("absent")
}

#[test]
fn rag_example_routes_retrieves_and_answers() {
    let _turn = models_turn();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let topology = dir.join("topology.yaml");
    std::fs::copy(root().join("examples/rag-chat/topology.yaml"), &topology).unwrap();
    let kb = root().join("examples/rag-chat/kb");
    let index = dir.join("kb.index");
    let built = glassbox(
        &[
            "index",
            "build",
            kb.to_str().unwrap(),
            "--out",
            index.to_str().unwrap(),
        ],
        None,
    );
    assert_exit(&built, 0);
    let topology = topology.to_str().unwrap();

    let product = run(
        topology,
        "How much does the Lumen Kettle Pro cost in the United States?",
    );
    assert_eq!(product["status"], "ok");
    assert_eq!(product["labels"]["route"], "need_retrieval", "{product}");
    for id in ["embed", "retrieve", "prompt", "llm", "validate"] {
        assert_eq!(node_status(&product, id), "succeeded", "{id}: {product}");
    }
    let retrieve = product["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["node"] == "retrieve")
        .unwrap();
    assert_eq!(
        retrieve["tags"]["search"], "exact",
        "the example's 69 chunks are all compared: {retrieve}"
    );
    let explanation = product["explanation"].as_str().unwrap();
    assert!(
        explanation.contains("Lumen Kettle Pro pricing and bundles"),
        "{explanation}"
    );
    assert!(explanation.contains("mentions_product"), "{explanation}");
    assert!(!product["answer"].as_str().unwrap().trim().is_empty());
    let total: f64 = product["receipt"]["total"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(total > 0.0);
    let llm_line = product["receipt"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["node"] == "llm" && l["unit"].as_str().is_some_and(|u| u.contains("output")));
    assert!(
        llm_line.is_some(),
        "tokens are billed: {}",
        product["receipt"]
    );

    let chat = run(topology, "hello, how are you?");
    assert_eq!(chat["labels"]["route"], "direct_answer", "{chat}");
    assert_eq!(node_status(&chat, "embed"), "skipped");
    assert_eq!(node_status(&chat, "retrieve"), "skipped");
    assert_eq!(node_status(&chat, "llm"), "succeeded");
}

/// A local LLM node that times out fails the run with exit code 1: the
/// process waits for the abandoned model step instead of crashing in
/// llama.cpp's teardown (it used to end with SIGSEGV).
#[test]
fn an_llm_timeout_is_a_failed_run_not_a_crash() {
    let _turn = models_turn();
    let tmp = tempfile::tempdir().unwrap();
    let topology = tmp.path().join("slow.yaml");
    let model = root().join("examples/rag-chat/topology.yaml");
    let model_line = std::fs::read_to_string(&model)
        .unwrap()
        .lines()
        .find(|l| l.contains("model: smollm2/"))
        .expect("the example names the local model")
        .trim()
        .to_owned();
    std::fs::write(
        &topology,
        format!(
            "topology_id: slow\nversion: 1.0.0\nnodes:\n  - id: llm\n    type: llm_inference\n    timeout_ms: 300\n    config:\n      backend: local\n      {model_line}\n      prompt: 'Write a very long story about {{{{ input.question }}}}.'\n      max_tokens: 2000\n      temperature: 0\n"
        ),
    )
    .unwrap();
    let out = glassbox(
        &[
            "run",
            topology.to_str().unwrap(),
            "--question",
            "kettles",
            "--format",
            "json",
        ],
        None,
    );
    assert_exit(&out, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(node_status(&v, "llm"), "failed", "{v}");
    assert_eq!(v["spans"][0]["status"], "timeout", "{v}");
}
