//! A local GGUF chat model over llama.cpp.
//!
//! One model and one context live on a dedicated worker thread
//! ([`LlmHandle`]). Requests wait in a bounded queue and run with continuous
//! batching: up to `max_num_seqs` of them share the context's KV cache, join
//! and leave at token granularity, and advance together, one `llama_decode`
//! per step (decode is memory-bound, so a step over eight sequences costs
//! little more than over one). Long prompts are evaluated in chunks between
//! steps. llama.cpp contexts are not thread-safe, so the FFI surface stays on
//! that one thread. The prompt is rendered with the chat template stored in the GGUF
//! metadata, and usage counts are the exact token counts the model saw.

mod batch;
mod chunks;
mod constrain;
mod dims;
mod host_cache;
mod load;
mod lookup;
mod pace;
mod pool;
mod schedule;
mod sequence;
pub(crate) mod session;
mod shape;
mod state_shift;
mod stats;
mod stop;
mod stream;
mod throttle;
mod worker;

use std::path::PathBuf;

pub use chunks::{ChunkReuse, KvReuse, PromptChunk};
pub use dims::ModelDims;
pub use lookup::PromptLookup;
pub use stats::EngineLoad;
pub use stats::{HistogramSnapshot, LatencyStats};
pub use stream::CompletionStream;
pub use throttle::{set_test_slowdown, test_slowdown};
pub use worker::{LlmHandle, ModelInfo};

use crate::paths::FETCH_HINT;

/// llama.cpp's limit on a context's sequences (`LLAMA_MAX_SEQ`).
const MAX_SEQUENCES: u32 = 256;

/// Who said a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The role name chat templates expect.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// A chat completion request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct GenerateRequest {
    pub messages: Vec<ChatMessage>,
    /// The most tokens to generate (at least 1). Generation also ends at the
    /// end of the context window.
    pub max_tokens: u32,
    /// 0 picks the most likely token every time (greedy, deterministic).
    pub temperature: f32,
    /// Nucleus sampling: keep the smallest set of tokens whose probabilities
    /// add up to `top_p` (0 < top_p <= 1). Ignored at temperature 0.
    pub top_p: f32,
    /// Seed of the sampler; the same seed, request and model give the same
    /// text. `None` picks one (reported in [`Completion::seed`]).
    pub seed: Option<u32>,
    /// OpenAI's `frequency_penalty` (-2..=2, 0 off): each token's logit is
    /// lowered by this much per time it already occurs among the last 64
    /// tokens generated, so a small model stops repeating a word (at
    /// temperature 0 too). Applied before the grammar, per sequence.
    pub frequency_penalty: f32,
    /// OpenAI's `presence_penalty` (-2..=2, 0 off): lowered once for any
    /// token that occurs among the last 64 tokens generated.
    pub presence_penalty: f32,
    /// Generation stops before the first occurrence of any of these; the stop
    /// sequence itself is not part of the text.
    pub stop: Vec<String>,
    /// Scheduling priority, vLLM's convention: lower runs earlier (0, the
    /// default; Glassbox's bands are -1 interactive, 0 online, 1 offline).
    /// Waiting requests are admitted in priority order, then by arrival,
    /// and when a KV pool runs out the running request with the highest
    /// value is preempted first (then the newest). A waiting request
    /// passed over by several admissions of more urgent ones goes next, so
    /// none waits forever.
    pub priority: i32,
    /// A GBNF grammar (root rule `root`) the generated text must follow:
    /// each token is picked among those that keep the text a prefix of
    /// the grammar's language, and generation can end only where the
    /// grammar is complete (or at `max_tokens`). Built from a JSON Schema
    /// by [`crate::grammar::json_schema_to_gbnf`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// The retrieved chunks the messages quote (a RAG prompt's notes), for
    /// per-chunk KV reuse; used only by an engine loaded with
    /// [`KvReuse::Chunks`], ignored (the prompt is evaluated as usual)
    /// otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<PromptChunk>,
}

impl Default for GenerateRequest {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            max_tokens: 256,
            temperature: 0.7,
            top_p: 0.95,
            seed: None,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            stop: Vec::new(),
            priority: 0,
            grammar: None,
            chunks: Vec::new(),
        }
    }
}

impl GenerateRequest {
    /// A request with these messages and default parameters.
    pub fn chat(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model emitted an end-of-generation token, or a stop sequence matched.
    Stop,
    /// `max_tokens` or the end of the context window was reached.
    Length,
    /// The caller dropped the stream or the reply before the end.
    Cancelled,
}

impl FinishReason {
    /// The OpenAI-style name (`stop`, `length`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Exact token counts of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Tokens of the rendered prompt, special tokens included.
    pub prompt_tokens: u32,
    /// Tokens sampled, including a final end-of-generation token (it took a
    /// decode step though it has no text; vLLM and llama-server count it too)
    /// and the tokens of a matched stop sequence.
    pub completion_tokens: u32,
}

impl Usage {
    pub fn total_tokens(&self) -> u32 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// The result of one request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Completion {
    pub text: String,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    /// The model's version tag: file name and the first 12 hex digits of its SHA-256.
    pub model: String,
    /// The sampler seed used (0 for greedy decoding).
    pub seed: u32,
    /// Time spent reading the prompt (prefill).
    pub prompt_ms: f64,
    /// Time spent generating, from the first sampled token to the last.
    pub generate_ms: f64,
    /// Queue time, time to first token and time per output token.
    #[serde(default)]
    pub timing: Timing,
    /// Prompt tokens whose KV was reused from the prefix cache.
    #[serde(default)]
    pub prompt_cached_tokens: u32,
    /// Prompt tokens whose KV was placed from the chunk cache (approximate
    /// reuse, [`KvReuse::Chunks`]); 0 in exact mode.
    #[serde(default)]
    pub prompt_placed_tokens: u32,
    /// Speculative decoding: draft tokens proposed, and of those accepted.
    #[serde(default)]
    pub draft_tokens: u32,
    #[serde(default)]
    pub accepted_tokens: u32,
    /// Times the request was preempted (its KV freed when the shared pool
    /// ran out, and recomputed when it resumed).
    #[serde(default)]
    pub preemptions: u32,
    /// Engine steps its prompt was evaluated in: 1 unless chunked prefill
    /// (`LlmOptions::prefill_chunk`, while a streamed request generates) or
    /// `batch_invariant`'s short chunks split it; 0 when the whole prompt
    /// came from the caches.
    #[serde(default)]
    pub prompt_steps: u32,
}

/// Where one request's time went, in milliseconds, measured like vLLM's
/// request metrics: from the moment it was submitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    /// Submitted until admitted to the running batch.
    pub queue_ms: f64,
    /// Submitted until the first output token (`None`: none was produced).
    pub ttft_ms: Option<f64>,
    /// Mean time between output tokens after the first (`None`: fewer
    /// than two).
    pub tpot_ms: Option<f64>,
    /// Submitted until finished.
    pub e2e_ms: f64,
}

/// How to load a local model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LlmOptions {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// CPU threads for decoding and prompt processing; `None` = one per
    /// physical core ([`crate::cpu::topology::compute_threads`]).
    pub threads: Option<usize>,
    /// Context window in tokens (prompt + completion).
    pub n_ctx: u32,
    /// The most prompt tokens evaluated in one batch.
    pub n_batch: u32,
    /// Chunked prefill: the most prompt tokens evaluated in a step while
    /// a request that streams its tokens ([`LlmHandle::stream`]) is
    /// generating (vLLM's `max_num_batched_tokens`, Sarathi's chunk), so a
    /// long prompt entering the batch delays its next token by one chunk's
    /// evaluation instead of the whole prompt's. While every generating
    /// request is read back whole ([`LlmHandle::generate`]) nobody sees
    /// the gaps, and a step takes up to `n_batch` (fewer steps, more
    /// requests a second).
    /// Smaller chunks keep running streams' time per output token low and
    /// cost the new prompt a decode step per chunk on its time to first
    /// token. A step with nobody generating evaluates up to `n_batch`.
    /// `None` (default): sized for the CPU, the prompt tokens the engine's
    /// own prefill steps evaluate in about half a second (at least 64, at
    /// most `n_batch`; `pace`). `Some(n_batch)` turns chunking off. See
    /// docs/BENCHMARKS.md ("Chunked prefill with the CPU to itself") and
    /// `examples/bench_prefill.rs`.
    pub prefill_chunk: Option<u32>,
    /// Requests that may wait in the queue; more are refused with
    /// [`LlmError::QueueFull`].
    pub queue_capacity: usize,
    /// The most requests generating at once (continuous batching): each step
    /// evaluates one token of every running request in one batch. Each
    /// request has a KV stream of its own (`n_ctx` cells), so its attention
    /// runs over the same cells in the same order alone or in a batch and a
    /// greedy answer does not depend on what else is running. Default 1.
    pub max_num_seqs: u32,
    /// Whether each slot keeps its last prompt's KV so a request sharing a
    /// prefix with it evaluates only the rest (default on).
    pub prefix_cache: bool,
    /// Host memory, in bytes, for the prefix cache's second tier: the KV of
    /// a prompt whose slot is taken by another request is kept there and
    /// restored for a later request that shares more of it than any slot
    /// does (as llama-server's `--cache-ram`). Used only as it fills,
    /// least recently used out first; 0 turns the tier off. Default 1 GiB.
    pub host_cache_bytes: usize,
    /// Speculative decoding by prompt lookup for greedy requests (default
    /// off). The text is the same as without it.
    pub prompt_lookup: Option<PromptLookup>,
    /// Shape every step so that greedy text is the same alone, in any
    /// batch, with speculation and with a reused prefix, whatever the
    /// context length (ADR 0006). Costs a padding row when a long-context
    /// request decodes alone and short prompt chunks (default off: then
    /// that holds for contexts under 192 tokens and prompts under 64).
    pub batch_invariant: bool,
    /// KV-cache cells shared by all running requests. `None` (default): one
    /// full context per sequence (`n_ctx × max_num_seqs`), reserved for the
    /// whole request at admission, so nothing is ever preempted. Fewer cells
    /// make the cache one pool, as vLLM's paged KV: a request is admitted
    /// when its prompt fits, and when the pool runs out mid-generation the
    /// running request of the lowest priority (then the newest) is preempted (its KV freed and recomputed when
    /// cells free up). More requests then run at once on the same memory,
    /// at the price of batch invariance (ADR 0006) and of recomputation
    /// under pressure.
    pub kv_cache_cells: Option<u32>,
    /// Attention through llama.cpp's fused flash-attention kernel where the
    /// backend has it (llama.cpp's default, and the kernels ADR 0006's
    /// batch-invariant shapes are built around); `false` computes it as
    /// matrix products, as llama-cpp-python does by default. Measured both
    /// ways in docs/BENCHMARKS.md ("Like with like", issue #41). Default on.
    pub flash_attention: bool,
    /// How prompt KV is reused across requests: by prefix only (exact,
    /// the default) or also per retrieved chunk (approximate, opt-in; see
    /// [`KvReuse`] and ADR 0013).
    pub kv_reuse: KvReuse,
}

impl LlmOptions {
    /// Default options for the model at `model_path`.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            threads: None,
            n_ctx: 4096,
            n_batch: 512,
            prefill_chunk: None,
            queue_capacity: 64,
            max_num_seqs: 1,
            prefix_cache: true,
            host_cache_bytes: 1 << 30,
            prompt_lookup: None,
            batch_invariant: false,
            kv_cache_cells: None,
            flash_attention: true,
            kv_reuse: KvReuse::Exact,
        }
    }

    pub(crate) fn seqs(&self) -> u32 {
        self.max_num_seqs.max(1)
    }

    /// KV-cache cells in all: one full context per sequence unless a
    /// smaller pool is set.
    pub(crate) fn kv_cells(&self) -> u32 {
        let full = self.n_ctx.saturating_mul(self.seqs());
        self.kv_cache_cells.map_or(full, |c| c.clamp(1, full))
    }

    /// Whether the KV cache is one pool smaller than a full context per
    /// sequence (admission by prompt, preemption when it runs out).
    pub(crate) fn pooled(&self) -> bool {
        self.kv_cells() < self.n_ctx.saturating_mul(self.seqs())
    }

    /// The context's KV layout: whether it is one stream, and its
    /// sequences. Chunk reuse takes one stream, a scratch sequence past
    /// the slots and, as llama.cpp's sequence limit allows, one staging
    /// sequence per slot (`session/reuse.rs`); exact mode keeps the
    /// engine's own.
    pub(crate) fn kv_layout(&self) -> (bool, u32) {
        if !matches!(self.kv_reuse, KvReuse::Chunks(_)) {
            return (self.pooled(), self.seqs());
        }
        let with_stages = self.seqs().saturating_mul(2).saturating_add(1);
        let most = (self.seqs() + 1).max(MAX_SEQUENCES);
        (true, with_stages.min(most))
    }

    pub(crate) fn thread_count(&self) -> usize {
        self.threads
            .filter(|&n| n > 0)
            .unwrap_or_else(crate::cpu::topology::compute_threads)
    }
}

/// Errors of the local LLM. `code()` is stable for APIs and metrics.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("model file `{}` not found; hint: {FETCH_HINT}", path.display())]
    ModelMissing { path: PathBuf },
    #[error("`{}` is not a GGUF model file ({detail})", path.display())]
    NotGguf { path: PathBuf, detail: String },
    #[error("llama.cpp could not load `{}` (a corrupted or unsupported GGUF file?)", path.display())]
    ModelLoad { path: PathBuf },
    #[error("reading `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("llama.cpp backend: {0}")]
    Backend(String),
    #[error("creating the llama.cpp context (n_ctx {n_ctx}): {detail}")]
    Context { n_ctx: u32, detail: String },
    #[error("the request has no messages")]
    EmptyInput,
    #[error("invalid `{field}`: {message}")]
    InvalidRequest {
        field: &'static str,
        message: String,
    },
    #[error("the prompt has {prompt_tokens} tokens, the context window {n_ctx}")]
    PromptTooLong { prompt_tokens: u32, n_ctx: u32 },
    #[error("applying the chat template: {0}")]
    Template(String),
    #[error("llama.cpp decode failed: {0}")]
    Decode(String),
    #[error("the model queue is full ({capacity} requests waiting); retry later")]
    QueueFull { capacity: usize },
    #[error("the model worker stopped")]
    WorkerGone,
}

impl LlmError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ModelMissing { .. } => "llm_model_missing",
            Self::NotGguf { .. } => "llm_not_gguf",
            Self::ModelLoad { .. } => "llm_model_load",
            Self::Io { .. } => "llm_io",
            Self::Backend(_) => "llm_backend",
            Self::Context { .. } => "llm_context",
            Self::EmptyInput => "llm_empty_input",
            Self::InvalidRequest { .. } => "llm_invalid_request",
            Self::PromptTooLong { .. } => "llm_prompt_too_long",
            Self::Template(_) => "llm_template",
            Self::Decode(_) => "llm_decode",
            Self::QueueFull { .. } => "llm_queue_full",
            Self::WorkerGone => "llm_worker_gone",
        }
    }

    /// Whether the request itself was at fault (so retrying it is pointless).
    pub fn is_invalid_request(&self) -> bool {
        matches!(
            self,
            Self::EmptyInput | Self::InvalidRequest { .. } | Self::PromptTooLong { .. }
        )
    }
}

/// Checks the parameters of a request, before it waits in the queue.
pub(crate) fn validate(request: &GenerateRequest) -> Result<(), LlmError> {
    if request.messages.is_empty() {
        return Err(LlmError::EmptyInput);
    }
    let invalid = |field, message: String| Err(LlmError::InvalidRequest { field, message });
    if request.max_tokens == 0 {
        return invalid("max_tokens", "must be at least 1, got 0".to_owned());
    }
    if !(request.temperature.is_finite() && request.temperature >= 0.0) {
        return invalid(
            "temperature",
            format!("must be >= 0, got {}", request.temperature),
        );
    }
    if !(request.top_p > 0.0 && request.top_p <= 1.0) {
        return invalid("top_p", format!("must be in (0, 1], got {}", request.top_p));
    }
    if let Some(i) = request.stop.iter().position(String::is_empty) {
        return invalid("stop", format!("stop sequence {i} is empty"));
    }
    if let Some(i) = request
        .messages
        .iter()
        .position(|m| m.content.contains('\0'))
    {
        return invalid("messages", format!("message {i} contains a NUL character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let ok = GenerateRequest::chat(vec![ChatMessage::user("hi")]);
        assert!(validate(&ok).is_ok());
        let err = validate(&GenerateRequest::default()).unwrap_err();
        assert_eq!(err.code(), "llm_empty_input");
        let err = validate(&GenerateRequest {
            top_p: 0.0,
            ..ok.clone()
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "invalid `top_p`: must be in (0, 1], got 0");
        let err = validate(&GenerateRequest {
            temperature: -1.0,
            ..ok.clone()
        })
        .unwrap_err();
        assert!(err.is_invalid_request());
        let err = validate(&GenerateRequest {
            stop: vec![String::new()],
            ..ok
        })
        .unwrap_err();
        assert!(err.to_string().contains("stop sequence 0 is empty"));
    }

    #[test]
    fn missing_model_error_has_a_hint() {
        let err = LlmError::ModelMissing {
            path: "/m/x.gguf".into(),
        };
        assert_eq!(
            err.to_string(),
            "model file `/m/x.gguf` not found; hint: run `glassbox models fetch` to download the local models"
        );
    }
}
