//! `agent` at run time: model call → tool call → observation, until the
//! model answers or a budget runs out.
//!
//! Each model call offers the tools (`tool_choice: auto`); a local model
//! is constrained by the tools' grammar, so every reply is a tool call or
//! an answer that parses. A tool's result goes back to the model as a user
//! turn naming the tool. Before each model call the budgets are checked;
//! the first one reached ends the loop with status `budget_exhausted` and
//! an explanation naming the budget and what the agent was doing. Every
//! step (model call or tool call, with its iteration, arguments, result,
//! tokens, cost and time) is itemised in the output's `steps`, which is
//! stored and redacted like any output; each step is also told to the
//! engine as it finishes, so an attempt cut short by its timeout or the
//! request's deadline keeps the steps it did in the trace and receipt.
//!
//! A tool call identical to one the model already made in the run (same
//! tool, same arguments) is handled as `on_repeat` says: by default the
//! tool is not run again, the step is recorded as a `repeat` of the
//! earlier one with its observation, and the next model call may only
//! answer (an answer-only grammar locally, `tool_choice: none` on an
//! OpenAI-compatible server), so a small model that keeps repeating its
//! call still ends with an answer built on what the tool found.

use std::sync::Arc;
use std::time::Instant;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput, Step as StepSpan};
use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};
use serde_json::{Value, json};

use super::budget::{Budget, Doing, Spent, Stop, explain};
use super::config::AgentConfig;
use super::offer::{May, Offer, Offers, Retrieved};
use super::pick::ToolIndex;
use super::repeat::{Calls, Made, OnRepeat};
use super::tool::{self, Tool};
use crate::check::BackendKind;
use crate::llm::tools::{Ask, LocalPlan, Reply};
use crate::model_cache::locate;
use crate::openai::Endpoint;
use crate::resources::BuildContext;

enum Model {
    Local(Arc<LlmHandle>),
    OpenAi(Endpoint),
}

struct Inner {
    model: Model,
    model_name: String,
    system: String,
    max_tokens: u32,
    temperature: f32,
    seed: Option<u32>,
    penalties: crate::check::Penalties,
    /// The tools each run is offered.
    offers: Offers,
    /// The plan of a model call that may only answer (after a repeat).
    answer_plan: LocalPlan,
    tools: Vec<Tool>,
    budget: Budget,
    on_repeat: OnRepeat,
    /// The first model call must call a tool.
    tool_first: bool,
    /// Price per 1k input and output tokens.
    prices: (f64, f64),
}

pub struct AgentNode {
    inner: Arc<Inner>,
}

/// A decimal price as a float (budgets compare floats).
fn price(d: Option<impl ToString>) -> f64 {
    d.map_or(0.0, |d| d.to_string().parse().unwrap_or(0.0))
}

pub(super) fn build(
    c: &AgentConfig,
    node: &glassbox_topology::Node,
    cx: &BuildContext,
) -> Result<Arc<dyn Node>, BuildError> {
    let ask = c
        .ask
        .clone()
        .ok_or_else(|| BuildError::config("the agent has no usable tools"))?;
    let answer_plan = Ask::answer_plan().map_err(BuildError::config)?;
    let model = match c.backend.kind {
        BackendKind::OpenAi => Model::OpenAi(Endpoint::for_node(
            &c.backend,
            node.timeout,
            cx.resources.outbound(),
        )?),
        BackendKind::Local => {
            let name = c
                .backend
                .model
                .as_deref()
                .unwrap_or(crate::llm::run::DEFAULT_MODEL);
            let mut options = LlmOptions::new(locate(cx, name));
            options.n_ctx = c.context_size.map_or(4096, |n| n as u32);
            options.batch_invariant = c.batch_invariant;
            Model::Local(cx.resources.models().llm(options)?)
        }
    };
    let tools = c
        .tools
        .iter()
        .map(|t| tool::build(t, node.timeout, cx))
        .collect::<Result<Vec<_>, _>>()?;
    let retrieval = match &c.tool_retrieval {
        None => None,
        Some(r) => {
            let name = r
                .model
                .as_deref()
                .unwrap_or(crate::embedding::run::DEFAULT_MODEL);
            let embedder = cx.resources.models().embedder(&locate(cx, name))?;
            Some(ToolIndex::new(embedder, &c.tools, r.top_k).map_err(|e| {
                BuildError::config(format!("`tool_retrieval`: cannot embed the tools: {e}"))
            })?)
        }
    };
    let model_name = node.resource.model.clone().unwrap_or_else(|| match &model {
        Model::Local(h) => h.version().to_string(),
        Model::OpenAi(e) => e.model.clone(),
    });
    let p = &node.resource.prices;
    Ok(Arc::new(AgentNode {
        inner: Arc::new(Inner {
            model,
            model_name,
            system: c
                .system
                .clone()
                .unwrap_or_else(|| "You are a helpful assistant.".into()),
            max_tokens: c.max_tokens.map_or(160, |n| n as u32),
            temperature: c.temperature.unwrap_or(0.0) as f32,
            seed: c.seed.map(|s| s as u32),
            penalties: c.penalties,
            offers: Offers::new(
                Offer::new(ask).map_err(BuildError::config)?,
                retrieval,
                c.tools.iter().map(|t| t.name.clone()).collect(),
            ),
            answer_plan,
            tools,
            budget: c.budget.clone(),
            on_repeat: c.on_repeat,
            tool_first: c.tool_first,
            prices: (
                price(p.cost_per_1k_input_tokens),
                price(p.cost_per_1k_output_tokens),
            ),
        }),
    }))
}

/// One model call's result.
struct Step {
    reply: Reply,
    raw: String,
    tokens_in: u64,
    tokens_out: u64,
}

impl Inner {
    /// One model call; `may`: what its reply may be.
    fn model_call(
        &self,
        cx: &NodeCx,
        offer: &Offer,
        turns: &[ChatMessage],
        seq: &str,
        may: May,
    ) -> Result<Step, NodeError> {
        match &self.model {
            Model::Local(handle) => {
                let plan = match may {
                    May::Answer => &self.answer_plan,
                    May::CallTool => &offer.tool_plan,
                    May::Either => &offer.plan,
                };
                let c = handle
                    .generate_blocking(GenerateRequest {
                        max_tokens: self.max_tokens,
                        temperature: self.temperature,
                        seed: self.seed,
                        frequency_penalty: self.penalties.frequency,
                        presence_penalty: self.penalties.presence,
                        priority: cx.priority().rank(),
                        grammar: Some(plan.grammar.clone()),
                        ..GenerateRequest::chat(turns.to_vec())
                    })
                    .map_err(|e| NodeError::failed(e.to_string()))?;
                Ok(Step {
                    reply: offer.ask.reply(plan, &c.text, seq),
                    raw: c.text,
                    tokens_in: u64::from(c.usage.prompt_tokens),
                    tokens_out: u64::from(c.usage.completion_tokens),
                })
            }
            Model::OpenAi(endpoint) => {
                let msgs: Vec<Value> = turns
                    .iter()
                    .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
                    .collect();
                let mut params =
                    json!({"max_tokens": self.max_tokens, "temperature": self.temperature});
                self.penalties.add_to(&mut params);
                if let Some(tools) = &offer.ask.raw.tools {
                    params["tools"] = tools.clone();
                    params["tool_choice"] = json!(match may {
                        May::Answer => "none",
                        May::CallTool => "required",
                        May::Either => "auto",
                    });
                }
                let r = endpoint.chat_reply(Value::Array(msgs), &params)?;
                let reply = match &r.tool_calls {
                    Some(calls) => Reply::ToolCalls(calls.clone()),
                    None => Reply::Text(r.text.clone()),
                };
                Ok(Step {
                    raw: r
                        .tool_calls
                        .as_ref()
                        .map_or(r.text.clone(), |c| Value::Array(c.clone()).to_string()),
                    reply,
                    tokens_in: r.prompt_tokens,
                    tokens_out: r.completion_tokens,
                })
            }
        }
    }

    /// The turns of a model call that may only answer: the question and
    /// what the tools found, in one short conversation (a small model
    /// loses the question in a long one of JSON calls).
    fn answer_turns(&self, question: &str, made: &Calls) -> Vec<ChatMessage> {
        let found: Vec<String> = made
            .all()
            .iter()
            .map(|m| format!("- {}({}): {}", m.tool, m.arguments, m.observation))
            .collect();
        vec![
            ChatMessage::system(format!(
                "{}\n\n{}",
                self.system, self.answer_plan.instructions
            )),
            ChatMessage::user(format!(
                "{question}\n\nWhat the tools found:\n{}\n\nAnswer my question from this, in \
                 one short sentence.",
                found.join("\n")
            )),
        ]
    }

    fn run(&self, cx: &NodeCx, question: String) -> Result<NodeOutput, NodeError> {
        let start = Instant::now();
        let (offer, retrieved) = self.offers.for_question(&question)?;
        let rid: String = cx
            .request_id()
            .to_string()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(12)
            .collect();
        let mut turns = vec![
            ChatMessage::system(format!("{}\n\n{}", self.system, offer.plan.instructions)),
            ChatMessage::user(question.clone()),
        ];
        let mut spent = Spent::default();
        let (mut tokens_in, mut tokens_out) = (0u64, 0u64);
        let mut steps: Vec<Value> = Vec::new();
        let mut used: Vec<String> = Vec::new();
        // The calls that ran, and the tools of those the model repeated.
        let mut made = Calls::default();
        let mut repeated: Vec<String> = Vec::new();
        let mut answer_only = false;
        let mut doing = Doing::Starting;
        let mut answer = String::new();
        // Each model and tool call, for its own span and receipt lines.
        let mut spans: Vec<StepSpan> = Vec::new();
        if let Some(r) = &retrieved {
            let mut step = r.step.clone();
            step["step"] = json!(1);
            step["iteration"] = json!(1);
            steps.push(step);
            spans.push(r.span.clone());
            cx.step_done(r.span.clone());
        }
        let stop = loop {
            spent.elapsed = start.elapsed();
            if let Some(bound) = self.budget.over(&spent) {
                break Stop::Budget { bound, doing };
            }
            if cx.attempt_over() {
                return Err(NodeError::failed(
                    "the agent's attempt ended (timeout or cancel)",
                ));
            }
            let t0 = Instant::now();
            let seq = format!("{rid}{}", spent.iterations);
            let asked = if std::mem::take(&mut answer_only) {
                Some(self.answer_turns(&question, &made))
            } else {
                None
            };
            let sent = asked.as_deref().unwrap_or(&turns);
            let may = if asked.is_some() {
                May::Answer
            } else if self.tool_first && spent.iterations == 0 {
                May::CallTool
            } else {
                May::Either
            };
            let step = self.model_call(cx, &offer, sent, &seq, may)?;
            spent.iterations += 1;
            spans.push(StepSpan {
                kind: "model",
                name: self.model_name.clone(),
                iteration: spent.iterations,
                started: t0,
                ended: Instant::now(),
                // What the model was asked this time: the last turn.
                input: json!(sent.last().map(|t| t.content.clone())),
                output: json!(step.raw),
                error: None,
                tokens: Some((step.tokens_in, step.tokens_out)),
                cost: None,
            });
            // Told as it finishes: kept in the trace if the attempt then
            // times out or is cancelled.
            if let Some(done) = spans.last() {
                cx.step_done(done.clone());
            }
            let cost = (step.tokens_in as f64 * self.prices.0
                + step.tokens_out as f64 * self.prices.1)
                / 1000.0;
            spent.tokens += step.tokens_in + step.tokens_out;
            spent.cost += cost;
            tokens_in += step.tokens_in;
            tokens_out += step.tokens_out;
            steps.push(json!({
                "step": steps.len() + 1, "iteration": spent.iterations, "kind": "model",
                "tokens_in": step.tokens_in, "tokens_out": step.tokens_out, "cost": cost,
                "ms": t0.elapsed().as_secs_f64() * 1e3, "reply": step.raw,
            }));
            let calls = match step.reply {
                Reply::Text(text) => {
                    answer = text;
                    break Stop::Answered;
                }
                Reply::ToolCalls(calls) => calls,
            };
            // One call per turn: the model sees each result before the next.
            let Some(call) = calls.first() else { continue };
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut args: Value = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or_else(|| json!({}));
            // Arguments the topology fills (`inject`), not the model.
            let called = self.tools.iter().find(|t| t.name == name);
            if let Some(t) = called {
                t.inject(&mut args, cx.input(), &cx.outputs_json(), &cx.labels_json())
                    .map_err(NodeError::BadInput)?;
            }
            if self.on_repeat != OnRepeat::Run
                && let Some(earlier) = made.earlier(&name, &args).cloned()
            {
                let t1 = Instant::now();
                spans.push(StepSpan {
                    kind: "repeat",
                    name: name.clone(),
                    iteration: spent.iterations,
                    started: t1,
                    ended: Instant::now(),
                    input: args.clone(),
                    output: json!(earlier.observation),
                    error: None,
                    tokens: None,
                    cost: None,
                });
                if let Some(done) = spans.last() {
                    cx.step_done(done.clone());
                }
                steps.push(json!({
                    "step": steps.len() + 1, "iteration": spent.iterations, "kind": "repeat",
                    "tool": name, "arguments": args, "repeat_of": earlier.step,
                    "observation": earlier.observation, "ok": earlier.ok, "cost": 0.0,
                    "ms": t1.elapsed().as_secs_f64() * 1e3,
                }));
                repeated.push(name.clone());
                if self.on_repeat == OnRepeat::Stop {
                    break Stop::Repeated { tool: name };
                }
                // The next call may only answer, from what the tools found
                // ([`Inner::answer_turns`]); should the loop go on after it
                // (a server that calls a tool all the same), the history
                // says the call was a repeat.
                turns.push(ChatMessage::assistant(
                    json!({"name": name, "parameters": args}).to_string(),
                ));
                turns.push(ChatMessage::user(format!(
                    "You already called `{name}` with these arguments; its result was: {}",
                    earlier.observation
                )));
                doing = Doing::Answering(name);
                answer_only = true;
                continue;
            }
            doing = Doing::Using(name.clone());
            let t1 = Instant::now();
            let obs = match called {
                Some(t) => t.call(&args),
                None => tool::Observation {
                    text: format!("error: there is no tool named `{name}`"),
                    cost: 0.0,
                    receipt: rust_decimal::Decimal::ZERO,
                    ok: false,
                },
            };
            spent.cost += obs.cost;
            spans.push(StepSpan {
                kind: "tool",
                name: name.clone(),
                iteration: spent.iterations,
                started: t1,
                ended: Instant::now(),
                input: args.clone(),
                output: json!(obs.text),
                error: (!obs.ok).then(|| obs.text.clone()),
                tokens: None,
                cost: (!obs.receipt.is_zero()).then_some(obs.receipt),
            });
            if let Some(done) = spans.last() {
                cx.step_done(done.clone());
            }
            steps.push(json!({
                "step": steps.len() + 1, "iteration": spent.iterations, "kind": "tool",
                "tool": name, "arguments": args, "observation": obs.text, "ok": obs.ok,
                "cost": obs.cost, "ms": t1.elapsed().as_secs_f64() * 1e3,
            }));
            made.record(Made {
                tool: name.clone(),
                arguments: args.clone(),
                step: steps.len(),
                observation: obs.text.clone(),
                ok: obs.ok,
            });
            turns.push(ChatMessage::assistant(
                json!({"name": name, "parameters": args}).to_string(),
            ));
            // A small model tends to repeat a call; the result turn says
            // what to do with it.
            turns.push(ChatMessage::user(format!(
                "Result of `{name}`: {}\nIf this answers my question, reply with {{\"answer\": ...}}.",
                obs.text
            )));
            used.push(name);
        };
        spent.elapsed = start.elapsed();
        let (mut en, mut zh) = explain(&stop, &self.budget, &spent, &used, &repeated);
        if let Some(Retrieved {
            note: (pick_en, pick_zh),
            ..
        }) = &retrieved
        {
            en = format!("{en} {pick_en}.");
            zh = format!("{zh}{pick_zh}。");
        }
        let stopped_by = match &stop {
            Stop::Budget { bound, .. } => json!(bound.field()),
            Stop::Repeated { .. } => json!("on_repeat"),
            Stop::Answered => Value::Null,
        };
        let text = if stop == Stop::Answered {
            answer
        } else {
            en.clone()
        };
        let status = stop.status();
        let mut out = NodeOutput::new(json!({
            "text": text,
            "status": status,
            "stopped_by": stopped_by,
            "iterations": spent.iterations,
            "tool_calls": used.len(),
            "repeated_calls": repeated.len(),
            "cost": spent.cost,
            "explanation": en,
            "steps": steps,
        }))
        .label(status)
        .tokens(tokens_in, tokens_out)
        .tag("status", status)
        .tag("iterations", spent.iterations.to_string())
        .tag("tools", used.join(","))
        .tag("model_version", self.model_name.clone())
        // The explanation joins clauses and ends each sentence itself.
        .fact(Fact::Note {
            en: en.trim_end_matches('.').to_string(),
            zh: zh.trim_end_matches('。').to_string(),
        });
        out.steps = spans.into();
        Ok(out)
    }
}

/// The question: `input.question`, or the input when it is a string.
fn question(input: &Value) -> Result<String, NodeError> {
    match input {
        Value::String(s) => Ok(s.clone()),
        v => v
            .get("question")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| NodeError::BadInput("an agent needs `question` in its input".into())),
    }
}

impl Node for AgentNode {
    fn call(&self, cx: NodeCx) -> Call {
        let question = match question(cx.input()) {
            Ok(q) => q,
            Err(e) => return Call::Ready(Err(e)),
        };
        let inner = self.inner.clone();
        Call::blocking(move || inner.run(&cx, question))
    }
}
