//! What one ingested span was: its node kind, the model it used and how
//! many tokens of each class, and the facts its attributes record for the
//! explanation (and the ones they leave out).
//!
//! Two conventions are read: OpenInference (`openinference.span.kind`,
//! `llm.*`, `embedding.*`, `retrieval.documents.*`, `tool.*`,
//! `input.value` / `output.value`) and the OpenTelemetry GenAI semantic
//! conventions (`gen_ai.*`). Spans in neither are kept as generic `span`
//! nodes. Kinds that mean what a built-in node kind means take its name
//! (`llm_inference`, `embedding`, `template`, `output_guard`), so reports
//! by kind put ingested and native nodes together.

use glassbox_trace::{Fact, TokenUsage};
use serde_json::Value as Json;

use crate::attrs::Attrs;
use crate::proto::{STATUS_ERROR, Span, Value};

/// Longest summary kept from `input.value` / `output.value`.
pub const SUMMARY_CHARS: usize = 200;

/// What a span says about its step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The node kind.
    pub kind: &'static str,
    /// The model, for model calls.
    pub model: Option<String>,
    pub provider: Option<String>,
    pub usage: Option<TokenUsage>,
    /// Why recorded token counts could not be used.
    pub usage_error: Option<String>,
    pub facts: Vec<Fact>,
    /// What the instrumentation did not record, as (English, Chinese).
    pub missing: Vec<(&'static str, &'static str)>,
    pub input: Option<String>,
    pub output: Option<String>,
    pub failed: bool,
}

fn openinference_kind(kind: &str) -> Option<&'static str> {
    Some(match kind.to_ascii_uppercase().as_str() {
        "LLM" => "llm_inference",
        "EMBEDDING" => "embedding",
        "RETRIEVER" => "retriever",
        "RERANKER" => "reranker",
        "TOOL" => "tool",
        "CHAIN" => "chain",
        "AGENT" => "agent",
        "GUARDRAIL" => "output_guard",
        "EVALUATOR" => "evaluator",
        "PROMPT" => "template",
        _ => return None,
    })
}

fn genai_kind(a: Attrs<'_>) -> Option<&'static str> {
    match a.str("gen_ai.operation.name") {
        Some("chat" | "text_completion" | "generate_content") => Some("llm_inference"),
        Some("embeddings") => Some("embedding"),
        Some("execute_tool") => Some("tool"),
        Some("create_agent" | "invoke_agent") => Some("agent"),
        Some("invoke_workflow") => Some("chain"),
        Some(_) => Some("span"),
        None if a.str("gen_ai.request.model").is_some() || a.str("gen_ai.system").is_some() => {
            Some("llm_inference")
        }
        None => None,
    }
}

/// Reads one span.
pub fn classify(span: &Span) -> Step {
    let a = Attrs(&span.attributes);
    let kind = a
        .str("openinference.span.kind")
        .and_then(openinference_kind)
        .or_else(|| genai_kind(a))
        .unwrap_or("span");
    let mut step = Step {
        kind,
        failed: span.status.as_ref().is_some_and(|s| s.code == STATUS_ERROR),
        input: a
            .first_str(&["input.value", "gen_ai.prompt"])
            .map(|s| glassbox_trace::truncate(s, SUMMARY_CHARS)),
        output: a
            .first_str(&["output.value", "gen_ai.completion"])
            .map(|s| glassbox_trace::truncate(s, SUMMARY_CHARS)),
        ..Step::default()
    };
    match kind {
        "llm_inference" => llm(a, &mut step),
        "embedding" => embedding(a, &mut step),
        "retriever" | "reranker" => retrieval(a, &mut step),
        "tool" => tool(a, span, &mut step),
        "output_guard" => guard(a, span, &mut step),
        _ => {}
    }
    step
}

fn llm(a: Attrs<'_>, step: &mut Step) {
    step.model = a
        .first_str(&[
            "llm.model_name",
            "gen_ai.response.model",
            "gen_ai.request.model",
        ])
        .map(str::to_string);
    step.provider = a
        .first_str(&[
            "llm.provider",
            "gen_ai.provider.name",
            "llm.system",
            "gen_ai.system",
        ])
        .map(str::to_string);
    let temperature = a.float("gen_ai.request.temperature").or_else(|| {
        let params: Json = serde_json::from_str(a.str("llm.invocation_parameters")?).ok()?;
        params.get("temperature")?.as_f64()
    });
    match usage(a) {
        Ok(Some(u)) => step.usage = Some(u),
        Ok(None) => step.missing.push(("token usage", "token 用量")),
        Err(e) => step.usage_error = Some(e),
    }
    match &step.model {
        Some(model) => step.facts.push(Fact::Generated {
            model: model.clone(),
            version: None,
            temperature,
            output_tokens: step.usage.map(|u| u.completion_total()),
        }),
        None => step.missing.push(("the model", "模型")),
    }
    if temperature.is_none() {
        step.missing.push(("the temperature", "温度"));
    }
    // Tool calls the model asked for (OpenInference output messages).
    let mut calls: Vec<String> = a
        .indexed("llm.output_messages")
        .into_iter()
        .filter(|(_, f, _)| f.contains("tool_call.function.name"))
        .filter_map(|(_, _, v)| match v {
            Value::String(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    calls.dedup();
    if !calls.is_empty() {
        let list = calls
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ");
        step.facts.push(Fact::Note {
            en: format!("the model asked for the tool call {list}"),
            zh: format!("模型请求调用工具 {list}"),
        });
    }
}

/// Token usage of a model call: the provider's own usage object when the
/// span carries the raw response (exact for every token class), else the
/// OpenInference counts, else the GenAI ones. `Ok(None)`: none recorded.
fn usage(a: Attrs<'_>) -> Result<Option<TokenUsage>, String> {
    if let Some(out) = a.str("output.value")
        && out.trim_start().starts_with('{')
        && let Ok(v) = serde_json::from_str::<Json>(out)
        && (v.get("usage").is_some_and(|u| u.is_object()) || v.get("usageMetadata").is_some())
    {
        return TokenUsage::from_any(&v)
            .map(|(_, u)| Some(u))
            .map_err(|e| format!("`output.value` usage: {e}"));
    }
    let oi = |k: &str| a.count(&format!("llm.token_count.{k}"));
    if oi("prompt").is_some() || oi("completion").is_some() {
        let prompt = oi("prompt").unwrap_or(0);
        let completion = oi("completion").unwrap_or(0);
        let cache_read = oi("prompt_details.cache_read").unwrap_or(0);
        let cache_write = oi("prompt_details.cache_write").unwrap_or(0);
        let audio_in = oi("prompt_details.audio").unwrap_or(0);
        let reasoning = oi("completion_details.reasoning").unwrap_or(0);
        let audio_out = oi("completion_details.audio").unwrap_or(0);
        let input = prompt
            .checked_sub(cache_read + cache_write + audio_in)
            .ok_or_else(|| {
                format!(
                    "`llm.token_count.prompt` ({prompt}) is less than its details ({})",
                    cache_read + cache_write + audio_in
                )
            })?;
        let output = completion
            .checked_sub(reasoning + audio_out)
            .ok_or_else(|| {
                format!(
                    "`llm.token_count.completion` ({completion}) is less than its details ({})",
                    reasoning + audio_out
                )
            })?;
        return Ok(Some(TokenUsage {
            input,
            cached_input: cache_read,
            cache_creation: cache_write,
            output,
            reasoning,
            audio_input: audio_in,
            audio_output: audio_out,
        }));
    }
    let g = |k: &str| a.count(&format!("gen_ai.usage.{k}"));
    let input = g("input_tokens").or_else(|| g("prompt_tokens"));
    let output = g("output_tokens").or_else(|| g("completion_tokens"));
    if input.is_none() && output.is_none() {
        return Ok(None);
    }
    // GenAI semconv: input_tokens include the cached ones; the reasoning
    // tokens are part of the output tokens.
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    let cache_read = g("cache_read.input_tokens").unwrap_or(0);
    let cache_write = g("cache_creation.input_tokens").unwrap_or(0);
    let reasoning = g("reasoning.output_tokens").unwrap_or(0);
    Ok(Some(TokenUsage {
        input: input.checked_sub(cache_read + cache_write).ok_or_else(|| {
            format!("`gen_ai.usage.input_tokens` ({input}) is less than the cached tokens ({})", cache_read + cache_write)
        })?,
        cached_input: cache_read,
        cache_creation: cache_write,
        output: output.checked_sub(reasoning).ok_or_else(|| {
            format!("`gen_ai.usage.output_tokens` ({output}) is less than the reasoning tokens ({reasoning})")
        })?,
        reasoning,
        ..TokenUsage::default()
    }))
}

fn embedding(a: Attrs<'_>, step: &mut Step) {
    step.model = a
        .first_str(&["embedding.model_name", "gen_ai.request.model"])
        .map(str::to_string);
    let mut texts: Vec<usize> = a
        .indexed("embedding.embeddings")
        .into_iter()
        .map(|(i, _, _)| i)
        .collect();
    texts.dedup();
    match &step.model {
        Some(model) => step.facts.push(Fact::Embedded {
            model: model.clone(),
            count: texts.len().max(1),
        }),
        None => step.missing.push(("the embedding model", "向量模型")),
    }
    if let Some(t) = a
        .count("gen_ai.usage.input_tokens")
        .or_else(|| a.count("llm.token_count.prompt"))
    {
        step.usage = Some(TokenUsage {
            input: t,
            ..TokenUsage::default()
        });
    }
}

/// A document's title: `metadata.title` (or `name`, `source`), else its id.
fn title_of(metadata: Option<&str>) -> Option<String> {
    let m: Json = serde_json::from_str(metadata?).ok()?;
    ["title", "name", "source", "file_name"]
        .iter()
        .find_map(|k| m.get(k).and_then(Json::as_str))
        .map(str::to_string)
}

fn retrieval(a: Attrs<'_>, step: &mut Step) {
    let prefix = if step.kind == "reranker" {
        "reranker.output_documents"
    } else {
        "retrieval.documents"
    };
    let entries = a.indexed(prefix);
    let mut count = 0usize;
    let mut titles: Vec<String> = Vec::new();
    let mut untitled = 0usize;
    let mut index = None;
    let mut flush =
        |meta: Option<&str>, id: Option<&str>, titles: &mut Vec<String>| match title_of(meta) {
            Some(t) => {
                if !titles.contains(&t) {
                    titles.push(t);
                }
            }
            None => {
                untitled += 1;
                if let Some(id) = id
                    && !titles.iter().any(|t| t == id)
                {
                    titles.push(id.to_string());
                }
            }
        };
    let (mut meta, mut id): (Option<&str>, Option<&str>) = (None, None);
    for (i, field, v) in &entries {
        if index != Some(*i) {
            if index.is_some() {
                flush(meta, id, &mut titles);
            }
            index = Some(*i);
            count += 1;
            (meta, id) = (None, None);
        }
        if let Value::String(s) = v {
            match *field {
                "document.metadata" => meta = Some(s),
                "document.id" => id = Some(s),
                _ => {}
            }
        }
    }
    if index.is_some() {
        flush(meta, id, &mut titles);
    }
    if count == 0 {
        step.missing
            .push(("the documents retrieved", "检索到的文档"));
        return;
    }
    if untitled > 0 {
        step.missing.push((
            "document titles (ids are shown)",
            "文档标题（显示为文档 id）",
        ));
    }
    step.facts.push(Fact::Retrieved { count, titles });
}

fn tool(a: Attrs<'_>, span: &Span, step: &mut Step) {
    let name = a
        .first_str(&["tool.name", "gen_ai.tool.name"])
        .unwrap_or(span.name.as_str());
    let args = a
        .first_str(&[
            "gen_ai.tool.call.arguments",
            "tool.parameters",
            "input.value",
        ])
        .map(|s| glassbox_trace::truncate(s, 120));
    let result = a
        .first_str(&["gen_ai.tool.call.result", "output.value"])
        .map(|s| glassbox_trace::truncate(s, 120));
    let (en, zh) = match (&args, &result) {
        (Some(x), Some(r)) => (
            format!("tool `{name}` was called with {x} and returned {r}"),
            format!("调用了工具 `{name}`，参数为 {x}，返回 {r}"),
        ),
        (Some(x), None) => (
            format!("tool `{name}` was called with {x}"),
            format!("调用了工具 `{name}`，参数为 {x}"),
        ),
        (None, Some(r)) => (
            format!("tool `{name}` was called and returned {r}"),
            format!("调用了工具 `{name}`，返回 {r}"),
        ),
        (None, None) => (
            format!("tool `{name}` was called"),
            format!("调用了工具 `{name}`"),
        ),
    };
    if args.is_none() {
        step.missing.push(("the tool's arguments", "工具参数"));
    }
    if result.is_none() && !step.failed {
        step.missing.push(("the tool's result", "工具返回结果"));
    }
    step.facts.push(Fact::Note { en, zh });
}

fn guard(a: Attrs<'_>, span: &Span, step: &mut Step) {
    let name = span.name.as_str();
    let why = span
        .status
        .as_ref()
        .map(|s| s.message.as_str())
        .filter(|m| !m.is_empty())
        .or_else(|| a.str("output.value"));
    let (en, zh) = if step.failed {
        match why {
            Some(w) => (
                format!("guardrail `{name}` flagged the output ({w})"),
                format!("护栏 `{name}` 拦截了输出（{w}）"),
            ),
            None => (
                format!("guardrail `{name}` flagged the output"),
                format!("护栏 `{name}` 拦截了输出"),
            ),
        }
    } else {
        (
            format!("guardrail `{name}` passed"),
            format!("护栏 `{name}` 检查通过"),
        )
    };
    step.missing
        .push(("which rules the guardrail checked", "护栏检查了哪些规则"));
    step.facts.push(Fact::Note { en, zh });
}
