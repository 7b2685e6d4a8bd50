//! Constrained decoding on the local model: invalid JSON per 1,000
//! generations with and without the grammar, and what constraining costs.
//!
//! Usage: `bench_constrained [--n N] [--threads T] [--seqs S] [--max-tokens M]`.
//! Part of `scripts/bench-constrained.sh`, which prints the table.
//!
//! Every string in the schemas has a `maxLength` and every list a
//! `maxItems` (as docs/agents.md advises), so a constrained answer has a
//! bounded length and `max_tokens` (512) is above it: a guided answer is
//! cut off only if the model writes long numbers. Cut-offs are counted
//! apart from answers that finished invalid.
//!
//! Two tasks, each run N times per arm on SmolLM2-135M (varied questions,
//! temperature 0.7, a different seed each run): a tool call among three
//! tools with nested arguments, and a structured answer (an order with a
//! list of items). Both arms get the same prompt (the tools, or the
//! schema, described in the system prompt, as `llm_inference` writes
//! it); one also gets the grammar. Counted per arm: answers that are not
//! JSON, JSON that does not follow the schema, and answers cut off at
//! `max_tokens`. Cost: time per output token (P50/P95/P99 over the runs)
//! and output tokens per second over the whole arm, at S sequences at once.

use std::time::Instant;

use glassbox_models::{ChatMessage, Completion, GenerateRequest, LlmHandle, LlmOptions};
use glassbox_nodes::llm::tools::{Ask, LocalPlan, RawAsk};
use glassbox_nodes::schema_subset;
use serde_json::{Value, json};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

const QUESTIONS: &[&str] = &[
    "Where is my order 1042?",
    "What is the weather in Lisbon tomorrow?",
    "Find the manual for the kettle K2.",
    "Has order 77 shipped yet?",
    "Will it rain in Osaka on Friday?",
    "How do I descale the coffee machine?",
    "Track order 5 please.",
    "Is it warm in Cairo this week?",
    "Search the help pages for warranty terms.",
    "I ordered a lamp, order 310, where is it?",
];

/// The tool-call task: three tools, nested arguments.
fn tools_task() -> (RawAsk, Value) {
    let tools = json!([
        {"type": "function", "function": {"name": "lookup_order", "description": "Finds an order by its number.",
            "parameters": {"type": "object", "properties": {
                "order_id": {"type": "integer"},
                "fields": {"type": "array", "items": {"enum": ["status", "items", "address"]}, "maxItems": 3}
            }, "required": ["order_id"]}}},
        {"type": "function", "function": {"name": "weather", "description": "The forecast for a place and day.",
            "parameters": {"type": "object", "properties": {
                "place": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}, "country": {"type": "string", "maxLength": 40}}, "required": ["city"]},
                "day": {"type": "string", "maxLength": 20}
            }, "required": ["place", "day"]}}},
        {"type": "function", "function": {"name": "search_docs", "description": "Searches the help pages.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "maxLength": 80}, "top_k": {"type": "integer"}
            }, "required": ["query"]}}}
    ]);
    // What a valid reply is: one of the calls, with its arguments.
    let alts: Vec<Value> = tools
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            json!({"type": "object", "properties": {
                "name": {"const": t["function"]["name"]},
                "parameters": t["function"]["parameters"]
            }, "required": ["name", "parameters"]})
        })
        .collect();
    let raw = RawAsk {
        tools: Some(tools),
        tool_choice: Some(json!("required")),
        response_format: None,
    };
    (raw, json!({ "anyOf": alts }))
}

/// The structured-answer task: an order summary with a list of items.
fn format_task() -> (RawAsk, Value) {
    let schema = json!({"type": "object", "properties": {
        "intent": {"enum": ["order_status", "weather", "how_to", "other"]},
        "order": {"type": "object", "properties": {
            "id": {"type": ["integer", "null"]},
            "items": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 40}, "quantity": {"type": "integer"}
            }, "required": ["name", "quantity"]}}
        }, "required": ["id", "items"]},
        // Free text bounded, as docs/agents.md advises: an unbounded string
        // lets a small model write until `max_tokens` cuts the object off.
        "reply": {"type": "string", "maxLength": 200}
    }, "required": ["intent", "order", "reply"]});
    let raw = RawAsk {
        tools: None,
        tool_choice: None,
        response_format: Some(
            json!({"type": "json_schema", "json_schema": {"name": "triage", "schema": schema}}),
        ),
    };
    (raw, schema)
}

/// Validity under `any_of` alternatives (the subset validator has no `anyOf`).
fn follows(schema: &Value, v: &Value) -> bool {
    match schema.get("anyOf").and_then(Value::as_array) {
        Some(alts) => alts.iter().any(|s| follows(s, v)),
        None => schema_subset::validate(schema, v, "$").is_ok(),
    }
}

struct Arm {
    not_json: usize,
    off_schema: usize,
    cut_off: usize,
    tpot_ms: Vec<f64>,
    /// Invalid answers among those not cut off at `max_tokens`.
    invalid_finished: usize,
    tokens: u64,
    wall_s: f64,
    n: usize,
}

fn run_arm(
    llm: &LlmHandle,
    plan: &LocalPlan,
    schema: &Value,
    constrained: bool,
    n: usize,
    seqs: usize,
    max_tokens: u32,
) -> Arm {
    let request = |i: usize| GenerateRequest {
        max_tokens,
        temperature: 0.7,
        top_p: 0.95,
        seed: Some(1000 + i as u32),
        grammar: constrained.then(|| plan.grammar.clone()),
        ..GenerateRequest::chat(vec![
            ChatMessage::system(format!(
                "You are a support assistant.\n\n{}",
                plan.instructions
            )),
            ChatMessage::user(QUESTIONS[i % QUESTIONS.len()]),
        ])
    };
    let start = Instant::now();
    let done: Vec<Completion> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..seqs)
            .map(|w| {
                s.spawn(move || {
                    (w..n)
                        .step_by(seqs)
                        .filter_map(|i| llm.generate_blocking(request(i)).ok())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let wall_s = start.elapsed().as_secs_f64();
    let mut arm = Arm {
        not_json: 0,
        off_schema: 0,
        cut_off: 0,
        invalid_finished: 0,
        tpot_ms: Vec::new(),
        tokens: 0,
        wall_s,
        n: done.len(),
    };
    for c in &done {
        arm.tokens += u64::from(c.usage.completion_tokens);
        if let Some(t) = c.timing.tpot_ms {
            arm.tpot_ms.push(t);
        }
        let cut = c.finish_reason == glassbox_models::FinishReason::Length;
        arm.cut_off += usize::from(cut);
        let valid = match serde_json::from_str::<Value>(c.text.trim()) {
            Err(_) => {
                arm.not_json += 1;
                false
            }
            Ok(v) if !follows(schema, &v) => {
                arm.off_schema += 1;
                false
            }
            Ok(_) => true,
        };
        arm.invalid_finished += usize::from(!valid && !cut);
    }
    arm
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = arg("--n", "250").parse()?;
    let threads: usize = arg("--threads", "2").parse()?;
    let seqs: usize = arg("--seqs", "8").parse()?;
    let max_tokens: u32 = arg("--max-tokens", "512").parse()?;
    let models = glassbox_models::models_dir();
    let llm = LlmHandle::load(LlmOptions {
        threads: Some(threads),
        n_ctx: 8192,
        max_num_seqs: seqs as u32,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models))
    })?;
    let mut rows = Vec::new();
    for (task, (raw, schema)) in [("tool call", tools_task()), ("json_schema", format_task())] {
        let ask = Ask::read(raw)?.ok_or("the task asks for nothing")?;
        let plan = ask.local_plan()?;
        for constrained in [false, true] {
            let arm = run_arm(&llm, &plan, &schema, constrained, n, seqs, max_tokens);
            let per_k = |x: usize| x as f64 * 1000.0 / arm.n.max(1) as f64;
            rows.push(json!({
                "task": task,
                "grammar": constrained,
                "n": arm.n,
                "not_json": arm.not_json,
                "off_schema": arm.off_schema,
                "cut_off": arm.cut_off,
                "invalid_per_1000": per_k(arm.not_json + arm.off_schema),
                "invalid_finished": arm.invalid_finished,
                "finished": arm.n - arm.cut_off,
                "not_json_per_1000": per_k(arm.not_json),
                "tpot_p50_ms": pct(&arm.tpot_ms, 0.5),
                "tpot_p95_ms": pct(&arm.tpot_ms, 0.95),
                "tpot_p99_ms": pct(&arm.tpot_ms, 0.99),
                "tokens_per_s": arm.tokens as f64 / arm.wall_s,
                "mean_tokens": arm.tokens as f64 / arm.n.max(1) as f64,
            }));
        }
    }
    println!("{}", serde_json::to_string(&rows)?);
    Ok(())
}
