//! Constrained decoding on the local model: invalid JSON per 1,000
//! generations with and without the grammar, and what constraining costs.
//!
//! Usage: `bench_constrained [--n N] [--seqs S] [--max-tokens M]
//! [--speed-n K] [--arm-s A] [--speed-s B] [--threads T]`. Part of
//! `scripts/bench-constrained.sh`, which prints the table.
//!
//! Time-bounded: an arm starts no new generation after A seconds (the
//! speed arms after B), lets the ones in flight finish, and reports how
//! many it ran; so on a slow or shared machine the counts come with their
//! real N (every generation started is counted, none is dropped).
//!
//! Two tasks on the support agent's domain (`examples/agent/`): a tool call
//! among six tools (the example's `lookup_order` and `search_kb`, and four
//! more, two with nested arguments), and a `response_format: json_schema`
//! answer with a nested object and a list. Each runs N times per arm
//! (unguided, guided), S sequences at once through the engine's batch, on
//! short questions, each generation with its own seed and a temperature of
//! 0.6, 0.8 or 1.0. Both arms get the same prompt (tools or schema
//! described in the system prompt, as `llm_inference` writes it); only the
//! grammar differs.
//!
//! Each generation is exactly one of: valid (parses and follows the
//! schema), off schema (parses, does not follow it), not JSON, or cut off
//! (stopped at `max_tokens` before it parsed). An unguided generation is
//! stopped as soon as its text can no longer become JSON (prose or a code
//! fence at the start, a syntax error before the end, text after a
//! complete value): it is not JSON whatever follows, and generating the
//! rest would only take time.
//!
//! The speed cost is measured apart, on K generations per arm run to their
//! end (no early stop), same prompts and seeds: time per output token
//! (P50/P95/P99) and output tokens per second over the arm.

use std::time::Instant;

use glassbox_models::{
    ChatMessage, Completion, FinishReason, GenerateRequest, LlmHandle, LlmOptions,
};
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
    "Has order 77 shipped yet?",
    "How do I descale the Lumen Kettle Pro?",
    "Order 310, where is it?",
    "Is the kettle's warranty two years?",
    "Cancel order 1043 please.",
    "The lid of my kettle is stuck, what now?",
    "Will it rain in Lisbon on Friday?",
    "I want to open a ticket: my kettle leaks.",
    "What is the status of order 5?",
    "Can I boil milk in the kettle?",
    "Track my order 1042 and tell me the carrier.",
];

/// Temperatures cycled over the generations (all above 0: sampled).
const TEMPERATURES: &[f32] = &[0.6, 0.8, 1.0];

fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {
        "name": name, "description": description, "parameters": parameters}})
}

/// The many-tool task: the agent example's two tools and four more.
fn tools_task() -> (RawAsk, Value) {
    let tools = json!([
        // As in examples/agent/topology.yaml.
        tool(
            "lookup_order",
            "Looks up an order by its number and tells its status.",
            json!({"type": "object", "properties": {"order_id": {"type": "integer"}},
                   "required": ["order_id"]})
        ),
        tool(
            "search_kb",
            "Searches the Lumen Kettle Pro knowledge base.",
            json!({"type": "object", "properties": {"query": {"type": "string", "maxLength": 80}},
                   "required": ["query"]})
        ),
        tool(
            "cancel_order",
            "Cancels an order that has not shipped.",
            json!({"type": "object", "properties": {
                "order_id": {"type": "integer"},
                "reason": {"enum": ["changed_mind", "late", "duplicate", "other"]}
            }, "required": ["order_id", "reason"]})
        ),
        tool(
            "open_ticket",
            "Opens a support ticket about a product.",
            json!({"type": "object", "properties": {
                "product": {"type": "object", "properties": {
                    "model": {"enum": ["Lumen Kettle Pro", "Lumen Kettle Mini"]},
                    "serial": {"type": "string", "maxLength": 20}
                }, "required": ["model"]},
                "problem": {"type": "string", "maxLength": 120},
                "urgent": {"type": "boolean"}
            }, "required": ["product", "problem"]})
        ),
        tool(
            "weather",
            "The forecast for a place and day.",
            json!({"type": "object", "properties": {
                "place": {"type": "object", "properties": {
                    "city": {"type": "string", "maxLength": 40},
                    "country": {"type": "string", "maxLength": 40}
                }, "required": ["city"]},
                "day": {"type": "string", "maxLength": 20}
            }, "required": ["place", "day"]})
        ),
        tool(
            "list_orders",
            "Lists a customer's recent orders.",
            json!({"type": "object", "properties": {
                "email": {"type": "string", "maxLength": 60},
                "limit": {"type": "integer"}
            }, "required": ["email"]})
        )
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

/// The nested-schema task: a triage of the question, with the order and
/// a list of its items. Free text is bounded (`maxLength`), as
/// docs/agents.md advises, so a guided answer can finish.
fn nested_task() -> (RawAsk, Value) {
    let schema = json!({"type": "object", "properties": {
        "intent": {"enum": ["order_status", "product_help", "complaint", "other"]},
        "order": {"type": "object", "properties": {
            "id": {"type": ["integer", "null"]},
            "items": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 40}, "quantity": {"type": "integer"}
            }, "required": ["name", "quantity"]}}
        }, "required": ["id", "items"]},
        "reply": {"type": "string", "maxLength": 120}
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

/// Validity under `anyOf` alternatives.
fn follows(schema: &Value, v: &Value) -> bool {
    match schema.get("anyOf").and_then(Value::as_array) {
        Some(alts) => alts.iter().any(|s| follows(s, v)),
        None => schema_subset::validate(schema, v, "$").is_ok(),
    }
}

/// Whether no continuation of `text` can parse as JSON (after trimming).
fn hopeless(text: &str) -> bool {
    let t = text.trim_start();
    let Some(first) = t.chars().next() else {
        return false;
    };
    if !matches!(first, '{' | '[' | '"' | '-' | '0'..='9' | 't' | 'f' | 'n') {
        return true;
    }
    match serde_json::from_str::<Value>(t) {
        Ok(_) => false,
        Err(e) if e.is_eof() => false,
        Err(e) => {
            // A syntax error well before the end stays one whatever comes
            // next (the parser reads left to right); text after a complete
            // value is "trailing characters".
            let offset: usize = t
                .split_inclusive('\n')
                .take(e.line().saturating_sub(1))
                .map(str::len)
                .sum::<usize>()
                + e.column();
            offset + 4 < t.len()
        }
    }
}

#[derive(Default)]
struct Arm {
    n: usize,
    valid: usize,
    off_schema: usize,
    not_json: usize,
    cut_off: usize,
    stopped_early: usize,
    errors: usize,
    tokens: u64,
    prompt_tokens: u64,
    cached_tokens: u64,
    tpot_ms: Vec<f64>,
    wall_s: f64,
}

enum Outcome {
    Done(Completion),
    Hopeless(u64),
    Failed,
}

struct Setup<'a> {
    llm: &'a LlmHandle,
    plan: &'a LocalPlan,
    seqs: usize,
    max_tokens: u32,
}

/// How long an arm may keep starting generations.
struct Deadline(Instant);

impl Deadline {
    fn open(&self) -> bool {
        Instant::now() < self.0
    }
}

impl Setup<'_> {
    fn request(&self, i: usize, constrained: bool) -> GenerateRequest {
        GenerateRequest {
            max_tokens: self.max_tokens,
            temperature: TEMPERATURES[i % TEMPERATURES.len()],
            top_p: 0.95,
            seed: Some(1000 + i as u32),
            grammar: constrained.then(|| self.plan.grammar.clone()),
            ..GenerateRequest::chat(vec![
                ChatMessage::system(format!(
                    "You are a support assistant.\n\n{}",
                    self.plan.instructions
                )),
                ChatMessage::user(QUESTIONS[i % QUESTIONS.len()]),
            ])
        }
    }

    /// One generation; unguided ones with `early` stop once hopeless.
    fn one(&self, i: usize, constrained: bool, early: bool) -> Outcome {
        let request = self.request(i, constrained);
        if !early || constrained {
            return match self.llm.generate_blocking(request) {
                Ok(c) => Outcome::Done(c),
                Err(_) => Outcome::Failed,
            };
        }
        let Ok(mut stream) = self.llm.stream(request) else {
            return Outcome::Failed;
        };
        let mut text = String::new();
        let mut pieces = 0u64;
        while let Some(piece) = stream.next_blocking() {
            text.push_str(&piece);
            pieces += 1;
            if hopeless(&text) {
                // Dropping the stream cancels the generation.
                return Outcome::Hopeless(pieces);
            }
        }
        match stream.finish_blocking() {
            Ok(c) => Outcome::Done(c),
            Err(_) => Outcome::Failed,
        }
    }

    fn arm(&self, schema: &Value, constrained: bool, n: usize, early: bool, seconds: f64) -> Arm {
        let start = Instant::now();
        let deadline = &Deadline(start + std::time::Duration::from_secs_f64(seconds));
        let outcomes: Vec<Outcome> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.seqs)
                .map(|w| {
                    s.spawn(move || {
                        (w..n)
                            .step_by(self.seqs)
                            .take_while(|_| deadline.open())
                            .map(|i| self.one(i, constrained, early))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let mut arm = Arm {
            wall_s: start.elapsed().as_secs_f64(),
            ..Arm::default()
        };
        for o in outcomes {
            arm.n += 1;
            let c = match o {
                Outcome::Done(c) => c,
                Outcome::Hopeless(pieces) => {
                    arm.tokens += pieces;
                    arm.not_json += 1;
                    arm.stopped_early += 1;
                    continue;
                }
                Outcome::Failed => {
                    arm.errors += 1;
                    continue;
                }
            };
            arm.tokens += u64::from(c.usage.completion_tokens);
            arm.prompt_tokens += u64::from(c.usage.prompt_tokens);
            arm.cached_tokens += u64::from(c.prompt_cached_tokens);
            if let Some(t) = c.timing.tpot_ms {
                arm.tpot_ms.push(t);
            }
            match serde_json::from_str::<Value>(c.text.trim()) {
                Ok(v) if follows(schema, &v) => arm.valid += 1,
                Ok(_) => {
                    arm.off_schema += 1;
                    // Kept so that a guided miss can be traced to its cause.
                    if arm.off_schema <= 5 {
                        eprintln!("  off schema: {}", c.text.trim());
                    }
                }
                Err(_) if c.finish_reason == FinishReason::Length => arm.cut_off += 1,
                Err(_) => arm.not_json += 1,
            }
        }
        arm
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = arg("--n", "1000").parse()?;
    let threads: usize = arg("--threads", "2").parse()?;
    let seqs: usize = arg("--seqs", "16").parse()?;
    let max_tokens: u32 = arg("--max-tokens", "256").parse()?;
    let speed_n: usize = arg("--speed-n", "32").parse()?;
    let arm_s: f64 = arg("--arm-s", "3600").parse()?;
    let speed_s: f64 = arg("--speed-s", "3600").parse()?;
    // `tool`, `nested` or both; `no`, `yes` or both (the grammar arms).
    let only_tasks = arg("--tasks", "tool,nested");
    let only_arms = arg("--grammar", "no,yes");
    let models = glassbox_models::models_dir();
    let llm = LlmHandle::load(LlmOptions {
        threads: Some(threads),
        // Per sequence: the longest prompt (six tools described) and the answer.
        n_ctx: 1536,
        max_num_seqs: seqs as u32,
        host_cache_bytes: 0,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models))
    })?;
    let mut rows = Vec::new();
    let tasks = [
        ("tool call (6 tools)", tools_task()),
        ("json_schema (nested)", nested_task()),
    ];
    let tasks = tasks.into_iter().zip(["tool", "nested"]);
    for ((task, (raw, schema)), key) in tasks {
        if !only_tasks.split(',').any(|t| t == key) {
            continue;
        }
        let ask = Ask::read(raw)?.ok_or("the task asks for nothing")?;
        let plan = ask.local_plan()?;
        let setup = Setup {
            llm: &llm,
            plan: &plan,
            seqs,
            max_tokens,
        };
        for constrained in [false, true] {
            let arm = if constrained { "yes" } else { "no" };
            if !only_arms.split(',').any(|a| a == arm) {
                continue;
            }
            eprintln!("{task}, grammar {constrained}: {n} generations ...");
            let arm = setup.arm(&schema, constrained, n, true, arm_s);
            eprintln!(
                "  {:.0} s; valid {}, not JSON {} ({} stopped early), off schema {}, cut off {}",
                arm.wall_s, arm.valid, arm.not_json, arm.stopped_early, arm.off_schema, arm.cut_off
            );
            eprintln!("{task}, grammar {constrained}: speed, {speed_n} generations ...");
            let speed = setup.arm(&schema, constrained, speed_n, false, speed_s);
            eprintln!(
                "  {:.0} s; {:.1} output tokens per generation, prompt {:.0} tokens ({:.0} from the prefix cache)",
                speed.wall_s,
                speed.tokens as f64 / speed.n.max(1) as f64,
                speed.prompt_tokens as f64 / speed.n.max(1) as f64,
                speed.cached_tokens as f64 / speed.n.max(1) as f64,
            );
            rows.push(json!({
                "task": task,
                "grammar": constrained,
                "n": arm.n,
                "n_asked": n,
                "valid": arm.valid,
                "off_schema": arm.off_schema,
                "not_json": arm.not_json,
                "cut_off": arm.cut_off,
                "stopped_early": arm.stopped_early,
                "errors": arm.errors,
                "wall_s": arm.wall_s,
                "mean_tokens": arm.tokens as f64 / arm.n.max(1) as f64,
                "speed_n": speed.n,
                "speed_mean_tokens": speed.tokens as f64 / speed.n.max(1) as f64,
                "tpot_p50_ms": pct(&speed.tpot_ms, 0.5),
                "tpot_p95_ms": pct(&speed.tpot_ms, 0.95),
                "tpot_p99_ms": pct(&speed.tpot_ms, 0.99),
                "tokens_per_s": speed.tokens as f64 / speed.wall_s,
            }));
        }
    }
    println!("{}", serde_json::to_string(&rows)?);
    Ok(())
}
