//! Constrained decoding on the real model: with a grammar from a JSON
//! Schema, SmolLM2-135M writes JSON of that shape at any seed; the
//! repetition penalties change greedy text and keep within the grammar.

use glassbox_models::grammar::json_schema_to_gbnf;
use glassbox_models::{ChatMessage, FinishReason, GenerateRequest, LlmError};
use serde_json::{Value, json};

use crate::common::llm;

fn ask(schema: &Value, question: &str, seed: u32) -> glassbox_models::Completion {
    llm()
        .generate_blocking(GenerateRequest {
            max_tokens: 120,
            temperature: 0.9,
            seed: Some(seed),
            grammar: Some(json_schema_to_gbnf(schema).expect("a supported schema")),
            ..GenerateRequest::chat(vec![
                ChatMessage::system("You are a helpful assistant."),
                ChatMessage::user(question),
            ])
        })
        .expect("the model generates")
}

#[test]
fn a_grammar_makes_the_answer_json_of_the_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 30},
            "days": {"type": "integer"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
        },
        "required": ["city", "days", "unit", "tags"]
    });
    for seed in 0..6 {
        let c = ask(&schema, "What is the weather like in Rome this week?", seed);
        assert_eq!(
            c.finish_reason,
            FinishReason::Stop,
            "seed {seed}: {}",
            c.text
        );
        let v: Value = serde_json::from_str(&c.text)
            .unwrap_or_else(|e| panic!("seed {seed}: not JSON ({e}): {}", c.text));
        assert!(
            v["city"].as_str().is_some_and(|s| s.chars().count() <= 30),
            "{v}"
        );
        assert!(v["days"].is_i64(), "{v}");
        assert!(
            ["celsius", "fahrenheit"].contains(&v["unit"].as_str().unwrap_or("")),
            "{v}"
        );
        let tags = v["tags"].as_array().unwrap();
        assert!(tags.len() <= 3 && tags.iter().all(Value::is_boolean), "{v}");
        assert_eq!(v.as_object().unwrap().len(), 4, "no other properties: {v}");
    }
}

#[test]
fn alternatives_pick_one_shape() {
    let schema = json!({"anyOf": [
        {"type": "object", "properties": {"name": {"const": "lookup_order"},
            "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]}},
         "required": ["name", "parameters"]},
        {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 80}}, "required": ["answer"]}
    ]});
    for seed in 0..4 {
        let c = ask(&schema, "Where is my order 1042?", seed);
        let v: Value = serde_json::from_str(&c.text).unwrap_or_else(|e| panic!("{e}: {}", c.text));
        let call = v["name"] == "lookup_order" && v["parameters"]["order_id"].is_i64();
        let answer = v["answer"].is_string() && v.as_object().unwrap().len() == 1;
        assert!(call || answer, "seed {seed}: {v}");
    }
}

#[test]
fn a_grammar_llama_cpp_cannot_parse_is_an_invalid_request() {
    let e = llm()
        .generate_blocking(GenerateRequest {
            grammar: Some("root ::= (".into()),
            ..GenerateRequest::chat(vec![ChatMessage::user("hi")])
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::InvalidRequest {
                field: "grammar",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.is_invalid_request());
}

/// How many 6-word runs of `text` already occurred earlier in it.
fn repeated_runs(text: &str) -> usize {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut seen = std::collections::HashSet::new();
    words
        .windows(6)
        .filter(|run| !seen.insert(run.to_vec()))
        .count()
}

#[test]
fn a_frequency_penalty_breaks_greedy_repetition_and_keeps_the_grammar() {
    let greedy = |penalty: f32, grammar: Option<String>| {
        llm()
            .generate_blocking(GenerateRequest {
                max_tokens: 96,
                temperature: 0.0,
                frequency_penalty: penalty,
                grammar,
                ..GenerateRequest::chat(vec![
                    ChatMessage::system(
                        "You are the support assistant of Brightwater, maker of the Lumen Kettle Pro.",
                    ),
                    ChatMessage::user("How much does the kettle cost?"),
                ])
            })
            .expect("the model generates")
            .text
    };
    // Greedy, the 135M model says a sentence twice (on this machine's
    // kernels); penalised, it says something else, and repeats no more.
    let plain = greedy(0.0, None);
    let penalised = greedy(1.5, None);
    assert_ne!(plain, penalised);
    assert!(
        repeated_runs(&penalised) <= repeated_runs(&plain),
        "without: {plain:?}\nwith: {penalised:?}"
    );
    // Under a grammar the penalty only reorders what the grammar allows.
    let schema = json!({
        "type": "object",
        "properties": {"words": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 6}},
        "required": ["words"]
    });
    let text = greedy(2.0, Some(json_schema_to_gbnf(&schema).expect("a schema")));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(v["words"].is_array(), "{text}");
}
