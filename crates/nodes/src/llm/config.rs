//! The `llm_inference` config, read once.

use glassbox_topology::{Code, Cx, Value};

use super::tools::{Ask, RawAsk};
use crate::check::{self, Backend};

pub const FIELDS: &[&str] = &[
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "allow_hosts",
    "system",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "threads",
    "context_size",
    "max_num_seqs",
    "prefix_cache",
    "host_cache_mib",
    "prompt_lookup",
    "batch_invariant",
    "kv_cache_cells",
    "prefill_chunk",
    "kv_reuse",
    "chunk_recompute",
    "chunk_cache_mib",
    "chunk_prewarm",
    "tools",
    "tool_choice",
    "response_format",
];

/// A checked `llm_inference` config (defaults are applied when built).
#[derive(Debug, Clone, Default)]
pub struct LlmConfig {
    pub backend: Backend,
    pub system: Option<String>,
    /// A Jinja template over `input`, `outputs` and `labels`.
    pub prompt: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
    pub penalties: check::Penalties,
    pub stop: Vec<String>,
    pub threads: Option<u64>,
    pub context_size: Option<u64>,
    pub max_num_seqs: Option<u64>,
    /// Whether slots keep their last prompt's KV for the next request.
    pub prefix_cache: Option<bool>,
    /// MiB of host memory for prompts' KV that slots gave up (0: off).
    pub host_cache_mib: Option<u64>,
    /// Draft tokens per step of speculative decoding by prompt lookup (0:
    /// off; absent: the default, 2; greedy requests only).
    pub prompt_lookup: Option<u64>,
    /// Greedy text independent of batching, speculation and prefix reuse at
    /// any context length (costs speed; ADR 0006).
    pub batch_invariant: Option<bool>,
    /// KV cells shared by all running requests (a pool: admission by
    /// prompt, preemption when it runs out); absent: a full context each.
    pub kv_cache_cells: Option<u64>,
    /// Prompt tokens evaluated per step while other requests generate
    /// (chunked prefill); absent: the node's default.
    pub prefill_chunk: Option<u64>,
    /// Per-chunk KV reuse of retrieved chunks (`kv_reuse: chunks`,
    /// approximate, opt-in; ADR 0013): off (`exact`) unless set.
    pub kv_chunks: bool,
    /// Tokens at the start of each placed chunk evaluated anew.
    pub chunk_recompute: Option<u64>,
    /// MiB of host memory for saved chunk KV.
    pub chunk_cache_mib: Option<u64>,
    /// Chunks of an index whose KV is computed when the node is built.
    pub chunk_prewarm: Option<super::prewarm::ChunkPrewarm>,
    /// Tools the model may call and the shape of its answer (the OpenAI
    /// API's `tools`, `tool_choice`, `response_format`); absent: the
    /// caller's, if the request brings any.
    pub ask: Option<Ask>,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> LlmConfig {
    let Some(obj) = check::config(config, cx) else {
        return LlmConfig::default();
    };
    obj.deny_unknown(cx, FIELDS);
    let mut backend = check::backend(&obj, cx);
    backend.model = obj.str(cx, "model").map(|m| m.value);
    backend.allow_hosts = check::strings(obj.str_list(cx, "allow_hosts"));
    let raw = RawAsk {
        tools: obj.get("tools").map(Value::to_json),
        tool_choice: obj.get("tool_choice").map(Value::to_json),
        response_format: obj.get("response_format").map(Value::to_json),
    };
    let ask = match Ask::read(raw) {
        Ok(ask) => ask,
        Err(message) => {
            let span = ["tools", "tool_choice", "response_format"]
                .iter()
                .find_map(|k| obj.get(k))
                .map_or(obj.span, |v| v.span);
            cx.error(
                Code::BadConfig,
                span,
                message,
                "tools and answer formats take the OpenAI API's shapes; see docs/agents.md",
            );
            None
        }
    };
    let kv_chunks = match obj.str(cx, "kv_reuse") {
        None => false,
        Some(v) if v.value == "exact" => false,
        Some(v) if v.value == "chunks" => true,
        Some(v) => {
            cx.error(
                Code::BadConfig,
                v.span,
                format!("`kv_reuse` is `{}`", v.value),
                "use `exact` (the default: prefix reuse, outputs unchanged) or `chunks` (approximate per-chunk reuse, see docs/adr/0013)",
            );
            false
        }
    };
    let local = matches!(backend.kind, crate::check::BackendKind::Local);
    let chunk_prewarm = super::prewarm::check(&obj, cx, kv_chunks, local);
    LlmConfig {
        ask,
        kv_chunks,
        chunk_prewarm,
        chunk_recompute: obj.uint(cx, "chunk_recompute", 0, 4096).map(|n| n.value),
        chunk_cache_mib: obj.uint(cx, "chunk_cache_mib", 1, 1 << 20).map(|n| n.value),
        backend,
        system: obj.str(cx, "system").map(|s| s.value),
        prompt: obj.str(cx, "prompt").map(|s| s.value),
        max_tokens: obj.uint(cx, "max_tokens", 1, 131_072).map(|n| n.value),
        temperature: obj.number(cx, "temperature", 0.0, 2.0).map(|n| n.value),
        top_p: obj.number(cx, "top_p", 0.0, 1.0).map(|n| n.value),
        seed: obj.uint(cx, "seed", 0, u32::MAX as u64).map(|n| n.value),
        penalties: check::Penalties::read(&obj, cx),
        stop: check::strings(obj.str_list(cx, "stop")),
        threads: obj.uint(cx, "threads", 1, 1024).map(|n| n.value),
        context_size: obj.uint(cx, "context_size", 64, 1_048_576).map(|n| n.value),
        max_num_seqs: obj.uint(cx, "max_num_seqs", 1, 256).map(|n| n.value),
        prefix_cache: obj.bool(cx, "prefix_cache").map(|b| b.value),
        host_cache_mib: obj.uint(cx, "host_cache_mib", 0, 1 << 20).map(|n| n.value),
        prompt_lookup: obj.uint(cx, "prompt_lookup", 0, 16).map(|n| n.value),
        batch_invariant: obj.bool(cx, "batch_invariant").map(|b| b.value),
        kv_cache_cells: obj
            .uint(cx, "kv_cache_cells", 64, u64::from(u32::MAX))
            .map(|n| n.value),
        prefill_chunk: obj.uint(cx, "prefill_chunk", 2, 65_536).map(|n| n.value),
    }
}

#[cfg(test)]
mod tests {
    use glassbox_topology::Cx;

    use super::*;

    /// The config and the diagnostics of `yaml`.
    fn checked(yaml: &str) -> (LlmConfig, Vec<glassbox_topology::Diagnostic>) {
        let source = glassbox_topology::Source::new("config.yaml", yaml);
        let value = glassbox_topology::parse::parse(&source).unwrap_or_else(|d| panic!("{d:?}"));
        let mut diagnostics = Vec::new();
        let config = check(Some(&value), &mut Cx::new(&mut diagnostics));
        (config, diagnostics)
    }

    #[test]
    fn per_chunk_kv_reuse_is_off_unless_set_and_a_bad_value_is_named() {
        let (c, d) = checked("backend: local");
        assert!(d.is_empty() && !c.kv_chunks, "exact by default");
        let (c, _) = checked("kv_reuse: exact");
        assert!(!c.kv_chunks);
        let (c, d) = checked("kv_reuse: chunks\nchunk_recompute: 8\nchunk_cache_mib: 64");
        assert!(d.is_empty(), "{d:?}");
        assert!(c.kv_chunks);
        assert_eq!((c.chunk_recompute, c.chunk_cache_mib), (Some(8), Some(64)));
        let (c, d) = checked("kv_reuse: approximate");
        assert!(!c.kv_chunks);
        let message = format!("{d:?}");
        assert!(message.contains("`kv_reuse` is `approximate`"), "{message}");
    }
}
