//! The `agent` config, read once: the model (as `llm_inference` reads it),
//! the tools (each a JSON Schema for its arguments and what runs it: a
//! sub-topology, in its own file or written inline in this one, or an
//! `http` call), the budgets that bound the loop and what a repeated tool
//! call does (`on_repeat`). `max_iterations` is required: an agent loop is
//! never unbounded.

use std::time::Duration;

use glassbox_topology::{Code, Cx, Diagnostic, Expr, Obj, Value};

use super::budget::Budget;
use super::repeat::{ON_REPEAT, OnRepeat};
use crate::check::{self, Backend};
use crate::http::config::HttpConfig;
use crate::llm::tools::{Ask, RawAsk};

pub const FIELDS: &[&str] = &[
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "allow_hosts",
    "system",
    "max_tokens",
    "temperature",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "context_size",
    "batch_invariant",
    "tools",
    "max_iterations",
    "budget",
    "on_repeat",
    "tool_retrieval",
    "tool_first",
];

const TOOL_FIELDS: &[&str] = &[
    "name",
    "description",
    "parameters",
    "inject",
    "topology",
    "http",
];
const BUDGET_FIELDS: &[&str] = &["max_tokens", "max_cost", "max_time_ms"];
const RETRIEVAL_FIELDS: &[&str] = &["top_k", "model"];

/// What runs a tool.
#[derive(Debug, Clone)]
pub enum Runs {
    /// A topology file (relative to this one), run with the arguments as
    /// its input; its output is the observation.
    Topology(String),
    /// A topology written inline, in this file, under the tool's
    /// `topology` key; run like a file's. `value` is that map as written
    /// (its spans point into this file).
    Inline(Box<Value>),
    /// An `http` call (the `http` kind's config; the arguments are the
    /// body of a POST, or ignored by a GET).
    Http(HttpConfig),
}

/// `tool_retrieval` as written ([`super::pick`] uses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrievalConfig {
    /// How many tools each run is offered.
    pub top_k: usize,
    /// The local embedding model (a name under the models directory or a
    /// path beside the topology).
    pub model: Option<String>,
}

/// One tool, checked.
#[derive(Debug, Clone)]
pub struct ToolConfig {
    pub name: String,
    pub description: String,
    /// The arguments' schema as the model is shown it (without the
    /// injected ones).
    pub parameters: serde_json::Value,
    /// Arguments the runtime fills, not the model: each a string
    /// parameter and the CEL expression over the agent's `input`,
    /// `outputs` and `labels` that gives it.
    pub inject: Vec<(String, Expr)>,
    pub runs: Runs,
}

/// A checked `agent` config.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    pub backend: Backend,
    pub system: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub seed: Option<u64>,
    pub penalties: check::Penalties,
    pub context_size: Option<u64>,
    /// Local backend: greedy text independent of batching and prefix reuse
    /// at any context length (ADR 0006), as the `llm_inference` key.
    pub batch_invariant: bool,
    pub tools: Vec<ToolConfig>,
    /// The tools as the model is offered them (`tool_choice: auto`).
    pub ask: Option<Ask>,
    pub budget: Budget,
    /// What a tool call the model already made in this run does.
    pub on_repeat: OnRepeat,
    /// Offer each run only the tools closest to its question.
    pub tool_retrieval: Option<RetrievalConfig>,
    /// The first model call must call a tool (answers come after a tool
    /// result): a small model otherwise answers from what it believes.
    pub tool_first: bool,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> AgentConfig {
    let obj = check::config(config, cx);
    check::require(
        obj.as_ref(),
        cx,
        "max_iterations",
        "bound the loop, e.g. `max_iterations: 4` (model calls at most)",
    );
    check::require(
        obj.as_ref(),
        cx,
        "tools",
        "give the agent at least one tool (a `topology` file or an `http` call)",
    );
    let Some(obj) = obj else {
        return AgentConfig::default();
    };
    obj.deny_unknown(cx, FIELDS);
    let mut backend = check::backend(&obj, cx);
    backend.model = obj.str(cx, "model").map(|m| m.value);
    backend.allow_hosts = check::strings(obj.str_list(cx, "allow_hosts"));
    let mut budget = Budget {
        max_iterations: obj
            .uint(cx, "max_iterations", 1, 64)
            .map_or(4, |n| n.value as u32),
        ..Budget::default()
    };
    if let Some(b) = obj.obj(cx, "budget") {
        let mut bcx = cx.field("budget");
        b.deny_unknown(&mut bcx, BUDGET_FIELDS);
        budget.max_tokens = b
            .uint(&mut bcx, "max_tokens", 1, 10_000_000)
            .map(|n| n.value);
        budget.max_cost = b.number(&mut bcx, "max_cost", 0.0, 1e9).map(|n| n.value);
        budget.max_time = b
            .uint(&mut bcx, "max_time_ms", 1, 86_400_000)
            .map(|n| Duration::from_millis(n.value));
    }
    let mut on_repeat = OnRepeat::default();
    if let Some(on) = obj.str(cx, "on_repeat") {
        let names: Vec<&str> = ON_REPEAT.iter().map(|(name, _)| *name).collect();
        check::one_of(&on, &names, cx, "on_repeat");
        if let Some((_, mode)) = ON_REPEAT.iter().find(|(name, _)| *name == on.value) {
            on_repeat = *mode;
        }
    }
    let tools = tools(&obj, cx);
    let ask = read_ask(&obj, cx, &tools);
    let tool_retrieval = retrieval(&obj, cx, tools.len());
    AgentConfig {
        backend,
        system: obj.str(cx, "system").map(|s| s.value),
        max_tokens: obj.uint(cx, "max_tokens", 1, 131_072).map(|n| n.value),
        temperature: obj.number(cx, "temperature", 0.0, 2.0).map(|n| n.value),
        seed: obj.uint(cx, "seed", 0, u32::MAX as u64).map(|n| n.value),
        penalties: check::Penalties::read(&obj, cx),
        context_size: obj.uint(cx, "context_size", 64, 1_048_576).map(|n| n.value),
        batch_invariant: obj.bool(cx, "batch_invariant").is_some_and(|b| b.value),
        tools,
        ask,
        budget,
        on_repeat,
        tool_retrieval,
        tool_first: obj.bool(cx, "tool_first").is_some_and(|b| b.value),
    }
}

/// `tool_retrieval: {top_k, model}`: `top_k` is required and below the
/// number of tools (offering them all retrieves nothing).
fn retrieval(obj: &Obj<'_>, cx: &mut Cx<'_>, tools: usize) -> Option<RetrievalConfig> {
    let r = obj.obj(cx, "tool_retrieval")?;
    let mut rcx = cx.field("tool_retrieval");
    r.deny_unknown(&mut rcx, RETRIEVAL_FIELDS);
    if !check::require(
        Some(&r),
        &mut rcx,
        "top_k",
        "say how many tools each run is offered, e.g. `top_k: 1`",
    ) {
        return None;
    }
    let top_k = r.uint(&mut rcx, "top_k", 1, 64)?;
    if tools > 0 && top_k.value as usize >= tools {
        rcx.report(
            Diagnostic::error(
                Code::BadConfig,
                top_k.span,
                format!(
                    "`top_k` {} offers every one of the agent's {tools} tools: there is \
                     nothing to retrieve",
                    top_k.value
                ),
            )
            .hint(format!(
                "use a `top_k` below {tools}, or remove `tool_retrieval`"
            )),
        );
        return None;
    }
    Some(RetrievalConfig {
        top_k: top_k.value as usize,
        model: r.str(&mut rcx, "model").map(|m| m.value),
    })
}

fn tools(obj: &Obj<'_>, cx: &mut Cx<'_>) -> Vec<ToolConfig> {
    let mut out = Vec::new();
    let Some(list) = obj.seq(cx, "tools") else {
        return out;
    };
    for (i, item) in list.iter().enumerate() {
        let mut tcx = cx.field(&format!("tools[{i}]"));
        let Some(t) = Obj::expect(item, &mut tcx, "a tool") else {
            continue;
        };
        t.deny_unknown(&mut tcx, TOOL_FIELDS);
        let name = t.req_str(
            &mut tcx,
            "name",
            "name the tool the model calls, e.g. `search_kb`",
        );
        let description = t.str(&mut tcx, "description").map(|d| d.value);
        let mut parameters = t.get("parameters").map(Value::to_json);
        let inject = match (t.obj(&mut tcx, "inject"), parameters.as_mut()) {
            (Some(i), Some(schema)) => injected(&i, schema, &mut tcx.field("inject")),
            (Some(i), None) => {
                tcx.report(
                    Diagnostic::error(
                        Code::BadConfig,
                        i.span,
                        "`inject` fills parameters, but the tool has no `parameters`",
                    )
                    .hint(
                        "declare the injected arguments under `parameters.properties` as strings",
                    ),
                );
                Vec::new()
            }
            (None, _) => Vec::new(),
        };
        let written = t.get("topology").is_some();
        let topology = match t.get("topology") {
            None => None,
            Some(v) if v.as_map().is_some() => Some(Runs::Inline(Box::new(v.clone()))),
            Some(v) => match v.as_str() {
                Some(file) => Some(Runs::Topology(file.to_string())),
                None => {
                    tcx.field("topology").report(
                        Diagnostic::error(
                            Code::BadConfig,
                            v.span,
                            format!(
                                "a tool's `topology` is a file name or a topology written \
                                 inline, not {}",
                                v.type_name()
                            ),
                        )
                        .hint(
                            "e.g. `topology: kb_search.yaml`, or `topology: {topology_id: \
                             lookup, version: 1.0.0, nodes: [...], edges: []}`",
                        ),
                    );
                    None
                }
            },
        };
        let http = t
            .get("http")
            .map(|h| crate::http::config::check(Some(h), &mut tcx.field("http")));
        let runs = match (topology, http) {
            (Some(runs), None) => Some(runs),
            (None, Some(h)) => Some(Runs::Http(h)),
            // A `topology` of the wrong type was reported above.
            (None, None) if written => None,
            (a, b) => {
                let message = if a.is_some() && b.is_some() {
                    "a tool runs either a `topology` or an `http` call, not both"
                } else {
                    "a tool needs what runs it: `topology: FILE`, a topology written inline \
                     under `topology`, or `http: {url: ...}`"
                };
                tcx.report(
                    Diagnostic::error(Code::BadConfig, item.span, message)
                        .hint("e.g. `topology: kb_search.yaml` (relative to this file)"),
                );
                None
            }
        };
        if let (Some(name), Some(runs)) = (name, runs) {
            out.push(ToolConfig {
                name: name.value,
                description: description.unwrap_or_default(),
                parameters: parameters
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
                inject,
                runs,
            });
        }
    }
    out
}

/// A tool's `inject: {PARAM: EXPR}`: each PARAM a string property of
/// `schema`, which loses it (the model neither sees nor writes it).
fn injected(i: &Obj<'_>, schema: &mut serde_json::Value, cx: &mut Cx<'_>) -> Vec<(String, Expr)> {
    let mut out = Vec::new();
    for (key, value) in i.map.iter() {
        let name = key.name.as_str();
        let is_string = schema
            .pointer(&format!("/properties/{name}/type"))
            .and_then(serde_json::Value::as_str)
            == Some("string");
        if !is_string {
            cx.report(
                Diagnostic::error(
                    Code::BadConfig,
                    key.span,
                    format!("`inject` names `{name}`, which is not a string parameter of the tool"),
                )
                .at(cx.path_of(name))
                .hint(format!(
                    "declare it in `parameters.properties` as `{name}: {{ type: string }}`, or \
                     remove it from `inject`"
                )),
            );
            continue;
        }
        let Some(text) = value.as_str() else {
            cx.report(
                Diagnostic::error(
                    Code::WrongType,
                    value.span,
                    format!(
                        "`inject.{name}` must be a CEL expression, found {}",
                        value.type_name()
                    ),
                )
                .hint("e.g. `query: input.question`"),
            );
            continue;
        };
        let text = glassbox_topology::Spanned::new(text.to_string(), value.span);
        let path = cx.path_of(name);
        if let Some(expr) = check::expr(&text, cx, &path) {
            out.push((name.to_string(), expr));
        }
        if let Some(props) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            props.remove(name);
        }
        if let Some(required) = schema
            .get_mut("required")
            .and_then(serde_json::Value::as_array_mut)
        {
            required.retain(|r| r.as_str() != Some(name));
        }
    }
    // Every argument injected: the model writes `{}` (an open object would
    // let it write anything there).
    let none_left = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .is_none_or(serde_json::Map::is_empty);
    if !out.is_empty() && none_left {
        schema["additionalProperties"] = serde_json::Value::Bool(false);
    }
    out
}

/// The tools as OpenAI function tools, checked like `llm_inference`'s
/// (names, duplicates, schemas within the constrained-decoding subset).
fn read_ask(obj: &Obj<'_>, cx: &mut Cx<'_>, tools: &[ToolConfig]) -> Option<Ask> {
    let raw: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| {
            serde_json::json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
        })
        .collect();
    if raw.is_empty() {
        return None;
    }
    match Ask::read(RawAsk {
        tools: Some(serde_json::Value::Array(raw)),
        tool_choice: Some(serde_json::json!("auto")),
        response_format: None,
    }) {
        Ok(ask) => ask,
        Err(message) => {
            let span = obj.get("tools").map_or(obj.span, |v| v.span);
            cx.error(
                Code::BadConfig,
                span,
                message,
                "tool parameters are JSON Schemas in the subset docs/agents.md lists",
            );
            None
        }
    }
}
