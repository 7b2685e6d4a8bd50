//! One model + one context, driven on the worker thread; many sequences share
//! the context's KV cache and advance together, one `llama_decode` per step.
//!
//! This is the only file that talks to llama.cpp. A [`Session`] borrows the
//! model it runs, which is why it lives on the worker thread's stack rather
//! than in a struct the caller can hold.

use std::num::NonZeroU32;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::stop::TextAssembler;
use super::{ChatMessage, Completion, FinishReason, GenerateRequest, LlmError, LlmOptions, Usage};

/// llama.cpp's process-wide backend: initialised once, never freed.
pub(crate) fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs every tensor at load; keep stderr for our own errors.
            llama_cpp_2::send_logs_to_tracing(
                llama_cpp_2::LogOptions::default().with_logs_enabled(false),
            );
            // The CPU kernels for this CPU, before the backend enumerates devices.
            crate::cpu::load_kernels().map_err(|e| e.to_string())?;
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Backend(e.clone()))
}

/// Checks the file before llama.cpp sees it, for errors that name the problem.
pub(super) fn check_model_file(path: &Path) -> Result<(), LlmError> {
    use std::io::Read;
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LlmError::ModelMissing {
                path: path.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(LlmError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut magic = [0u8; 4];
    match file.read_exact(&mut magic) {
        Ok(()) if &magic == b"GGUF" => Ok(()),
        Ok(()) => Err(LlmError::NotGguf {
            path: path.to_path_buf(),
            detail: format!("starts with {magic:02x?}, not `GGUF`"),
        }),
        Err(_) => Err(LlmError::NotGguf {
            path: path.to_path_buf(),
            detail: "shorter than 4 bytes".to_owned(),
        }),
    }
}

/// Loads the model (memory-mapped).
pub(super) fn load_model(options: &LlmOptions) -> Result<LlamaModel, LlmError> {
    check_model_file(&options.model_path)?;
    let backend = backend()?;
    let params = LlamaModelParams::default().with_use_mmap(true);
    LlamaModel::load_from_file(backend, &options.model_path, &params).map_err(|_| {
        LlmError::ModelLoad {
            path: options.model_path.clone(),
        }
    })
}

/// A model with its context, template and batch, ready to serve requests.
pub(super) struct Session<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    template: LlamaChatTemplate,
    batch: LlamaBatch<'static>,
    n_batch: usize,
    /// The context window of one sequence (the KV cache holds several).
    n_ctx: u32,
    /// Per slot, the prompt tokens whose KV is still in its stream: the
    /// prefix cache. A new request reuses the longest common prefix.
    cached: Vec<Vec<LlamaToken>>,
    version: String,
}

impl<'m> Session<'m> {
    pub(super) fn new(
        model: &'m LlamaModel,
        options: &LlmOptions,
        version: String,
    ) -> Result<Self, LlmError> {
        let backend = backend()?;
        let threads = i32::try_from(options.thread_count()).unwrap_or(i32::MAX);
        let n_batch = options.n_batch.max(1);
        let context_err = |detail: String| LlmError::Context {
            n_ctx: options.n_ctx,
            detail,
        };
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(options.kv_cells()))
            .with_n_seq_max(options.seqs())
            .with_kv_unified(false)
            .with_n_batch(n_batch)
            .with_n_ubatch(n_batch)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| context_err(e.to_string()))?;
        // The template stored in the GGUF; ChatML (what most small chat models
        // use) when a file has none.
        let template = match model.chat_template(None) {
            Ok(t) => t,
            Err(_) => {
                LlamaChatTemplate::new("chatml").map_err(|e| LlmError::Template(e.to_string()))?
            }
        };
        let batch = LlamaBatch::new(n_batch as usize, 1);
        Ok(Self {
            model,
            ctx,
            template,
            batch,
            n_batch: n_batch as usize,
            n_ctx: options.n_ctx,
            cached: vec![Vec::new(); options.seqs() as usize],
            version,
        })
    }

    /// The chat template (the Jinja source, or a built-in template's name).
    pub(super) fn template_source(&self) -> Option<String> {
        self.template.to_string().ok()
    }

    pub(super) fn n_ctx(&self) -> u32 {
        self.n_ctx
    }

    /// Cells of the KV cache, shared by every running sequence.
    pub(super) fn kv_cells(&self) -> u32 {
        self.ctx.n_ctx()
    }

    /// Renders messages with the model's chat template, ending with the
    /// assistant's turn opened.
    pub(super) fn render(&self, messages: &[ChatMessage]) -> Result<String, LlmError> {
        let chat = messages
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.as_str().to_owned(), m.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LlmError::Template(e.to_string()))?;
        self.model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| LlmError::Template(e.to_string()))
    }

    /// Tokens of `text`, special tokens (`<|im_start|>`) parsed as such.
    pub(super) fn tokenize(&self, text: &str, add_special: bool) -> Vec<u32> {
        self.tokens(text, add_special)
            .into_iter()
            .map(|t| t.0 as u32)
            .collect()
    }

    fn tokens(&self, text: &str, add_special: bool) -> Vec<LlamaToken> {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), add_special, true)
    }

    /// The text of `tokens`, special tokens rendered as text.
    pub(super) fn detokenize(&self, tokens: &[u32]) -> String {
        let tokens: Vec<LlamaToken> = tokens.iter().map(|&t| LlamaToken(t as i32)).collect();
        let bytes = self.model.vocab().detokenize(&tokens, false, true);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Prepares `request`: renders and tokenizes the prompt and sets up its
    /// sampler. Nothing is evaluated until it is [`attach`](Self::attach)ed
    /// to a slot.
    pub(super) fn start(&self, request: &GenerateRequest) -> Result<Sequence, LlmError> {
        let prompt = self.render(&request.messages)?;
        let tokens = self.tokens(&prompt, true);
        let n_ctx = self.n_ctx;
        let prompt_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
        if prompt_tokens == 0 || prompt_tokens >= n_ctx {
            return Err(LlmError::PromptTooLong {
                prompt_tokens,
                n_ctx,
            });
        }
        let (sampler, seed) = sampler(request);
        let budget = (request.max_tokens as usize).min(n_ctx as usize - tokens.len());
        Ok(Sequence {
            id: -1,
            prompt: tokens,
            fed: 0,
            next: None,
            logits_at: None,
            sampler,
            seed,
            text: TextAssembler::new(request.stop.clone()),
            budget,
            completion_tokens: 0,
            finish: (budget == 0).then_some(FinishReason::Length),
            started: Instant::now(),
            prompt_ms: 0.0,
            decode_started: None,
        })
    }

    /// One `llama_decode` over every running sequence: the next token of each
    /// sequence that is generating, then prompt chunks of those still in
    /// prefill (oldest first) up to `n_batch` tokens, so a long prompt never
    /// stalls the others for more than one step. Then each sequence whose
    /// logits were computed samples its next token; `on_text(i, piece)`
    /// receives new text of `seqs[i]` and may break to cancel it.
    pub(super) fn step(
        &mut self,
        seqs: &mut [&mut Sequence],
        on_text: &mut dyn FnMut(usize, &str) -> ControlFlow<()>,
    ) -> Result<(), LlmError> {
        let decode_err = |e: &dyn std::fmt::Display| LlmError::Decode(e.to_string());
        self.batch.clear();
        for seq in seqs.iter_mut() {
            seq.logits_at = None;
            if seq.finish.is_some() {
                continue;
            }
            if let Some(token) = seq.next.take() {
                let pos = seq.prompt.len() + seq.completion_tokens as usize - 1;
                seq.logits_at = Some(self.batch.n_tokens());
                self.batch
                    .add(token, pos as i32, &[seq.id], true)
                    .map_err(|e| decode_err(&e))?;
            }
        }
        for seq in seqs.iter_mut() {
            let room = self.n_batch.saturating_sub(self.batch.n_tokens() as usize);
            if room == 0 {
                break;
            }
            if seq.finish.is_some() || seq.fed >= seq.prompt.len() {
                continue;
            }
            let end = (seq.fed + room).min(seq.prompt.len());
            for pos in seq.fed..end {
                let last = pos + 1 == seq.prompt.len();
                if last {
                    seq.logits_at = Some(self.batch.n_tokens());
                }
                self.batch
                    .add(seq.prompt[pos], pos as i32, &[seq.id], last)
                    .map_err(|e| decode_err(&e))?;
            }
            seq.fed = end;
        }
        if self.batch.n_tokens() == 0 {
            return Ok(());
        }
        self.ctx
            .decode(&mut self.batch)
            .map_err(|e| decode_err(&e))?;
        for (i, seq) in seqs.iter_mut().enumerate() {
            let Some(at) = seq.logits_at else { continue };
            if seq.decode_started.is_none() {
                seq.prompt_ms = seq.started.elapsed().as_secs_f64() * 1e3;
                seq.decode_started = Some(Instant::now());
            }
            let token = seq.sampler.sample(&self.ctx, at);
            if self.model.vocab().is_eog(token) {
                seq.finish = Some(FinishReason::Stop);
                continue;
            }
            seq.completion_tokens += 1;
            let piece = self.model.vocab().token_to_piece(token, false, None);
            let (out, stopped) = seq.text.push(&piece);
            if !out.is_empty() && on_text(i, out).is_break() {
                seq.finish = Some(FinishReason::Cancelled);
            } else if stopped {
                seq.finish = Some(FinishReason::Stop);
            } else if seq.completion_tokens as usize >= seq.budget {
                seq.finish = Some(FinishReason::Length);
            } else {
                seq.next = Some(token);
            }
        }
        Ok(())
    }

    /// Ends a sequence and assembles its completion. The KV of its prompt
    /// stays in the slot for the next request that shares a prefix; the rest
    /// is freed. `on_text` receives text held back while it might have begun
    /// a stop sequence.
    pub(super) fn finish(
        &mut self,
        mut seq: Sequence,
        on_text: &mut dyn FnMut(&str),
    ) -> Completion {
        self.keep_prefix(seq.id, &seq.prompt[..seq.fed]);
        let finish = seq.finish.unwrap_or(FinishReason::Cancelled);
        let (rest, full) =
            std::mem::replace(&mut seq.text, TextAssembler::new(Vec::new())).finish();
        if !rest.is_empty() && finish != FinishReason::Cancelled {
            on_text(&rest);
        }
        Completion {
            text: full,
            finish_reason: finish,
            usage: Usage {
                prompt_tokens: u32::try_from(seq.prompt.len()).unwrap_or(u32::MAX),
                completion_tokens: seq.completion_tokens,
            },
            model: self.version.clone(),
            seed: seq.seed,
            prompt_ms: seq.prompt_ms,
            generate_ms: seq
                .decode_started
                .map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3),
        }
    }

    /// Keeps `prefix` (the first tokens evaluated in slot `id`) and frees
    /// the slot's cells after it.
    fn keep_prefix(&mut self, id: i32, prefix: &[LlamaToken]) {
        let Some(slot) = usize::try_from(id).ok().filter(|&i| i < self.cached.len()) else {
            return;
        };
        let kept = self
            .ctx
            .clear_kv_cache_seq(
                u32::try_from(id).ok(),
                u32::try_from(prefix.len()).ok(),
                None,
            )
            .unwrap_or(false);
        self.cached[slot] = if kept { prefix.to_vec() } else { Vec::new() };
        if !kept {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
        }
    }

    /// Of the free slots `ids`, the one whose cached prefix shares the most
    /// tokens with `prompt`: (position in `ids`, tokens shared).
    pub(super) fn best_slot(&self, ids: &[i32], prompt: &[LlamaToken]) -> (usize, usize) {
        ids.iter()
            .enumerate()
            .map(|(at, &id)| {
                let cached = usize::try_from(id)
                    .ok()
                    .and_then(|i| self.cached.get(i))
                    .map_or(&[][..], Vec::as_slice);
                let common = cached
                    .iter()
                    .zip(prompt)
                    .take_while(|(a, b)| a == b)
                    .count();
                (at, common)
            })
            .max_by_key(|&(at, common)| (common, at))
            .unwrap_or((0, 0))
    }

    /// Puts `seq` in slot `id`, reusing the first `common` prompt tokens
    /// already in its KV (at least the last prompt token is evaluated again,
    /// for its logits). Returns the tokens reused.
    pub(super) fn attach(&mut self, seq: &mut Sequence, id: i32, common: usize) -> usize {
        let reuse = common.min(seq.prompt.len().saturating_sub(1));
        let kept = reuse > 0
            && self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), u32::try_from(reuse).ok(), None)
                .unwrap_or(false);
        let reuse = if kept {
            reuse
        } else {
            let _ = self
                .ctx
                .clear_kv_cache_seq(u32::try_from(id).ok(), None, None);
            0
        };
        if let Some(slot) = usize::try_from(id)
            .ok()
            .and_then(|i| self.cached.get_mut(i))
        {
            slot.clear();
        }
        seq.id = id;
        seq.fed = reuse;
        reuse
    }

    /// Frees every KV cell and forgets the cached prefixes (after a failed step).
    pub(super) fn release_all(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.iter_mut().for_each(Vec::clear);
    }
}

/// One request running in the batch.
pub(super) struct Sequence {
    /// The llama.cpp sequence id (its slot).
    pub(super) id: i32,
    prompt: Vec<LlamaToken>,
    /// Prompt tokens evaluated so far.
    fed: usize,
    /// The sampled token to evaluate in the next step.
    next: Option<LlamaToken>,
    /// Where this sequence's logits are in the last batch.
    logits_at: Option<i32>,
    sampler: LlamaSampler,
    seed: u32,
    text: TextAssembler,
    budget: usize,
    completion_tokens: u32,
    finish: Option<FinishReason>,
    started: Instant,
    prompt_ms: f64,
    decode_started: Option<Instant>,
}

impl Sequence {
    /// The prompt's tokens.
    pub(super) fn prompt(&self) -> &[LlamaToken] {
        &self.prompt
    }

    /// KV cells this sequence may fill: its prompt and its token budget.
    pub(super) fn reserve(&self) -> usize {
        self.prompt.len() + self.budget
    }

    pub(super) fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Stops the sequence at the next step (its caller went away).
    pub(super) fn cancel(&mut self) {
        self.finish.get_or_insert(FinishReason::Cancelled);
    }
}

/// The sampler chain for a request, and the seed it uses.
fn sampler(request: &GenerateRequest) -> (LlamaSampler, u32) {
    if request.temperature <= 0.0 {
        return (LlamaSampler::greedy(), 0);
    }
    let seed = request.seed.unwrap_or_else(random_seed);
    let chain = LlamaSampler::chain_simple([
        LlamaSampler::top_p(request.top_p, 1),
        LlamaSampler::temp(request.temperature),
        LlamaSampler::dist(seed),
    ]);
    (chain, seed)
}

/// A seed from the clock and a counter: unpredictable enough for sampling,
/// and reported back so a surprising answer can be reproduced.
fn random_seed() -> u32 {
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (state.hash_one(nanos) & u64::from(u32::MAX)) as u32
}
