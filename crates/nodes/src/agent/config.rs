//! The `agent` config, read once: the model (as `llm_inference` reads it),
//! the tools (each a JSON Schema for its arguments and what runs it: a
//! sub-topology, in its own file or written inline in this one, or an
//! `http` call), the budgets that bound the loop and what a repeated tool
//! call does (`on_repeat`). `max_iterations` is required: an agent loop is
//! never unbounded.

use std::time::Duration;

use glassbox_topology::{Code, Cx, Diagnostic, Obj, Value};

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
    "context_size",
    "tools",
    "max_iterations",
    "budget",
    "on_repeat",
];

const TOOL_FIELDS: &[&str] = &["name", "description", "parameters", "topology", "http"];
const BUDGET_FIELDS: &[&str] = &["max_tokens", "max_cost", "max_time_ms"];

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

/// One tool, checked.
#[derive(Debug, Clone)]
pub struct ToolConfig {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
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
    pub context_size: Option<u64>,
    pub tools: Vec<ToolConfig>,
    /// The tools as the model is offered them (`tool_choice: auto`).
    pub ask: Option<Ask>,
    pub budget: Budget,
    /// What a tool call the model already made in this run does.
    pub on_repeat: OnRepeat,
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
    AgentConfig {
        backend,
        system: obj.str(cx, "system").map(|s| s.value),
        max_tokens: obj.uint(cx, "max_tokens", 1, 131_072).map(|n| n.value),
        temperature: obj.number(cx, "temperature", 0.0, 2.0).map(|n| n.value),
        seed: obj.uint(cx, "seed", 0, u32::MAX as u64).map(|n| n.value),
        context_size: obj.uint(cx, "context_size", 64, 1_048_576).map(|n| n.value),
        tools,
        ask,
        budget,
        on_repeat,
    }
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
        let parameters = t.get("parameters").map(Value::to_json);
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
                runs,
            });
        }
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
