//! One model + one context, driven on the worker thread; many sequences share
//! the context's KV cache and advance together, one `llama_decode` per step.
//!
//! With `load.rs`, the only file that talks to llama.cpp. A [`Session`] borrows the
//! model it runs, which is why it lives on the worker thread's stack rather
//! than in a struct the caller can hold.

use std::num::NonZeroU32;
use std::ops::ControlFlow;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::session::SeqState;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

mod reuse;
mod share;
mod slots;

use super::chunks::{ChunkCache, ChunkReuse};
use super::constrain::Grammar;
use super::host_cache::HostCache;
use super::load::backend;
use super::lookup::PromptLookup;
use super::pace::PrefillPace;
use super::sequence::{Sequence, emit, sampler};
use super::shape;
use super::state_shift::RopeShift;
use super::stop::TextAssembler;
use super::{
    ChatMessage, Completion, FinishReason, GenerateRequest, KvReuse, LlmError, LlmOptions, Usage,
};

/// A model with its context, template and batch, ready to serve requests.
pub(super) struct Session<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    template: LlamaChatTemplate,
    batch: LlamaBatch<'static>,
    n_batch: usize,
    /// Prompt tokens per step while a streamed request generates (chunked prefill):
    /// the node's `prefill_chunk`, or `None` to size it from the measured
    /// prefill rate ([`PrefillPace`]).
    prefill_chunk: Option<usize>,
    pace: PrefillPace,
    /// The context window of one sequence (the KV cache holds several).
    n_ctx: u32,
    /// Per slot, the prompt tokens whose KV is still in its stream: the
    /// prefix cache. A new request reuses the longest common prefix.
    cached: Vec<Vec<LlamaToken>>,
    /// Whether slots keep their prompt's KV for the next request.
    prefix_cache: bool,
    /// Prompts' KV that slots gave up, kept in host memory (the prefix
    /// cache's second tier).
    host: HostCache<LlamaToken, SeqState>,
    /// Prompt tokens restored from `host` so far.
    host_hits: u64,
    /// Speculative decoding by prompt lookup, for greedy requests.
    lookup: Option<PromptLookup>,
    /// Shape every step for batch invariance (see [`shape`]).
    batch_invariant: bool,
    /// One KV pool for every sequence rather than a stream per slot.
    pooled: bool,
    /// One KV stream for every sequence (a pool, or chunk reuse): running
    /// sequences share a common prefix's cells (see [`share`]).
    unified: bool,
    /// Prompt tokens taken from running sequences, not yet counted.
    shared_hits: u64,
    /// Per-chunk KV reuse (approximate, opt-in): its settings, the saved
    /// chunks, and the scratch sequence it works through (see [`reuse`]).
    chunk_reuse: Option<ChunkReuse>,
    chunk_cache: ChunkCache<LlamaToken, Vec<u8>>,
    /// How placed chunks' keys are moved on the host; `None` (not chunk
    /// reuse, `move_on_host` off, or a rotation it does not reproduce)
    /// leaves it to llama.cpp (see [`reuse`]).
    rope: Option<RopeShift>,
    scratch: i32,
    /// Sequences in the context: staging sequences past the scratch one
    /// exist where this allows (see [`reuse`]).
    n_seq_max: u32,
    chunk_placed: u64,
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
        // One pool when it is smaller than a context per sequence, or for
        // chunk reuse (which also takes a scratch sequence).
        let (unified, n_seq_max) = options.kv_layout();
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(options.kv_cells()))
            .with_n_seq_max(n_seq_max)
            .with_kv_unified(unified)
            .with_n_batch(n_batch)
            .with_n_ubatch(n_batch)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            .with_flash_attention_policy(if options.flash_attention {
                llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO
            } else {
                llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED
            });
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
            prefill_chunk: options
                .prefill_chunk
                .map(|c| c.clamp(shape::MIN_ROWS as u32, n_batch) as usize),
            pace: PrefillPace::default(),
            // A sequence never holds more than the whole pool.
            n_ctx: options.n_ctx.min(options.kv_cells()),
            cached: vec![Vec::new(); options.seqs() as usize],
            prefix_cache: options.prefix_cache,
            host: HostCache::new(if options.prefix_cache {
                options.host_cache_bytes
            } else {
                0
            }),
            host_hits: 0,
            lookup: options.prompt_lookup.filter(|l| l.num_tokens > 0),
            batch_invariant: options.batch_invariant,
            pooled: options.pooled(),
            unified,
            shared_hits: 0,
            chunk_reuse: match options.kv_reuse {
                KvReuse::Exact => None,
                KvReuse::Chunks(c) => Some(c),
            },
            chunk_cache: ChunkCache::new(match options.kv_reuse {
                KvReuse::Exact => 0,
                KvReuse::Chunks(c) => c.cache_bytes,
            }),
            rope: match options.kv_reuse {
                KvReuse::Chunks(c) if c.move_on_host => RopeShift::of(model),
                _ => None,
            },
            scratch: i32::try_from(options.seqs()).unwrap_or(i32::MAX),
            n_seq_max,
            chunk_placed: 0,
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
    /// `arrived` is when the request was submitted (for queue time and TTFT).
    pub(super) fn start(
        &self,
        request: &GenerateRequest,
        arrived: Instant,
    ) -> Result<Sequence, LlmError> {
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
        let grammar = match &request.grammar {
            Some(g) => Some(Grammar::new(self.model, g)?),
            None => None,
        };
        let budget = (request.max_tokens as usize).min(n_ctx as usize - tokens.len());
        // Drafts are checked against the greedy choice, so only greedy
        // requests speculate (their text is the same either way).
        let lookup = self.lookup.filter(|_| request.temperature <= 0.0);
        let spans = self.chunk_spans(request, &prompt, &tokens);
        let history = if lookup.is_some() {
            tokens.clone()
        } else {
            Vec::new()
        };
        Ok(Sequence {
            id: -1,
            history,
            lookup,
            draft: Vec::new(),
            drafted: 0,
            accepted: 0,
            output: Vec::new(),
            refeed: Vec::new(),
            preemptions: 0,
            spans,
            saved: 0,
            placed: 0,
            staged: Vec::new(),
            reused: 0,
            arrived,
            priority: request.priority,
            streamed: false,
            prompt_steps: 0,
            first_token: None,
            last_token: None,
            prompt: tokens,
            fed: 0,
            next: None,
            logits_at: None,
            rows: 0,
            sampler,
            grammar,
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

    /// One step of the batch: one `llama_decode` over prompt chunks of the
    /// sequences still in prefill (oldest first, `n_batch` tokens in all, so
    /// a long prompt never stalls the others for more than a chunk), then
    /// one over the next token (and draft tokens) of every sequence that was
    /// generating when the step began. Each sequence whose logits
    /// were computed then takes its next token(s); `on_text(i, piece)`
    /// receives new text of `seqs[i]` and may break to cancel it.
    ///
    /// The batches are shaped so that every row goes through the same
    /// llama.cpp kernels whatever else runs (see [`shape`]): a greedy
    /// answer is the same alone, in a full batch, with speculation and with
    /// a reused prefix.
    pub(super) fn step(
        &mut self,
        seqs: &mut [&mut Sequence],
        on_text: &mut dyn FnMut(usize, &str) -> ControlFlow<()>,
    ) -> Result<(), LlmError> {
        for seq in seqs.iter_mut() {
            seq.logits_at = None;
            seq.draft.clear();
            seq.rows = 0;
        }
        // Who generates this step is fixed before the prompt pass: a prompt
        // finished now gives its first token at once and decodes from the
        // next step, so the decode batch is what it would be either way.
        let generating: Vec<bool> = seqs
            .iter()
            .map(|seq| seq.finish.is_none() && seq.next.is_some() && !seq.in_prefill())
            .collect();
        let decoding = generating.iter().filter(|&&g| g).count();
        let watched = seqs.iter().zip(&generating).any(|(s, &g)| g && s.streamed);
        if self.chunk_reuse.is_some() {
            // Chunk reuse promises no batch invariance (one KV stream,
            // placed KV): prompts and generated tokens go in one call, one
            // pass over the weights rather than two. Room is kept for each
            // generating sequence's token and a draft.
            self.prefill_step(seqs, watched, decoding * shape::MIN_ROWS, false)?;
            let prompt_rows = usize::try_from(self.batch.n_tokens()).unwrap_or(0);
            self.decode_step(seqs, &generating, false)?;
            if self.batch.n_tokens() > 0 {
                let started = Instant::now();
                self.ctx
                    .decode(&mut self.batch)
                    .map_err(|e| LlmError::Decode(e.to_string()))?;
                if prompt_rows > 0 {
                    let rows = usize::try_from(self.batch.n_tokens()).unwrap_or(0);
                    self.pace.observe(rows, started.elapsed());
                }
                self.save_chunks(seqs);
            }
            return self.take_tokens(seqs, on_text);
        }
        // Prompts first: a new request's first token does not wait for the
        // running ones' decode call (the step costs the same in either order).
        // Logits live until the next decode: take each call's tokens first.
        self.prefill_step(seqs, watched, 0, true)?;
        self.take_tokens(seqs, on_text)?;
        self.decode_step(seqs, &generating, true)?;
        self.take_tokens(seqs, on_text)
    }

    /// The generating sequences' rows: each its next token, then its draft,
    /// then padding up to the row count of its run (see [`shape`]); in a
    /// batch of their own and evaluated when `own_batch`, else added to
    /// the prompt rows already in the batch.
    fn decode_step(
        &mut self,
        seqs: &mut [&mut Sequence],
        generating: &[bool],
        own_batch: bool,
    ) -> Result<(), LlmError> {
        let decode_err = |e: &dyn std::fmt::Display| LlmError::Decode(e.to_string());
        let mut order: Vec<usize> = (0..seqs.len())
            .filter(|&i| generating[i] && seqs[i].finish.is_none() && seqs[i].next.is_some())
            .collect();
        if order.is_empty() {
            return Ok(());
        }
        // llama.cpp batches only consecutive sequence ids, in order.
        order.sort_by_key(|&i| seqs[i].id);
        if own_batch {
            self.batch.clear();
        }
        // Runs pad to their longest draft: cap drafts so that every row of
        // the step fits the batch.
        let free = self
            .n_batch
            .saturating_sub(self.batch.n_tokens().max(0) as usize);
        let per_seq = (free / order.len()).saturating_sub(shape::MIN_ROWS);
        for &i in &order {
            let seq = &mut *seqs[i];
            let Some(lookup) = seq.lookup else { continue };
            // Every accepted draft and the token after them must fit the
            // budget, so at most `left - 1` drafts.
            let left = seq.budget.saturating_sub(seq.completion_tokens as usize);
            let most = left.saturating_sub(1).min(per_seq).min(shape::MAX_ROWS - 1);
            let proposal = lookup.draft(&seq.history, order.len(), most);
            seq.draft.extend_from_slice(proposal);
        }
        let ids: Vec<i32> = order.iter().map(|&i| seqs[i].id).collect();
        for run in shape::runs(&ids) {
            let members = &order[run.clone()];
            let rows = shape::decode_rows(
                members.iter().map(|&i| {
                    let seq = &*seqs[i];
                    (seq.draft.len(), seq.position() + 1)
                }),
                self.n_ctx as usize,
                self.batch_invariant,
            );
            for &i in members {
                let seq = &mut *seqs[i];
                let token = seq.next.take().expect("generating sequences have a token");
                let pos = seq.position();
                seq.logits_at = Some(self.batch.n_tokens());
                seq.rows = rows;
                self.batch
                    .add(token, pos as i32, &[seq.id], true)
                    .map_err(|e| decode_err(&e))?;
                for r in 1..rows {
                    let (t, logits) = match seq.draft.get(r - 1) {
                        Some(&d) => (d, true),
                        None => (token, false), // padding: its output and KV are dropped
                    };
                    self.batch
                        .add(t, (pos + r) as i32, &[seq.id], logits)
                        .map_err(|e| decode_err(&e))?;
                }
            }
        }
        if !own_batch {
            return Ok(());
        }
        self.ctx.decode(&mut self.batch).map_err(|e| decode_err(&e))
    }

    /// Prompt chunks of the sequences still in prefill, oldest first, up to
    /// `n_batch` tokens in all (`prefill_chunk` while a generating request
    /// is `watched`, streamed to its caller: chunked prefill, see `pace`)
    /// less `reserve`, in a fresh batch;
    /// evaluated in one `llama_decode` when `run` (with `batch_invariant`,
    /// one sequence's chunk at a time: see [`shape`]).
    fn prefill_step(
        &mut self,
        seqs: &mut [&mut Sequence],
        watched: bool,
        reserve: usize,
        run: bool,
    ) -> Result<(), LlmError> {
        let decode_err = |e: &dyn std::fmt::Display| LlmError::Decode(e.to_string());
        self.share_prefixes(seqs);
        self.stage_chunks(seqs);
        self.place_chunks(seqs);
        let waits = self.waiting(seqs);
        let mut chosen: Vec<(usize, usize)> = Vec::new(); // (index, chunk)
        let mut room = (self.pace.room(watched, self.prefill_chunk, self.n_batch))
            .min(self.n_batch.saturating_sub(reserve));
        self.batch.clear();
        for (i, seq) in seqs.iter().enumerate() {
            if seq.finish.is_some() || !seq.in_prefill() || waits[i] {
                continue;
            }
            if room < shape::MIN_ROWS || (self.batch_invariant && !chosen.is_empty()) {
                break;
            }
            let chunk = shape::prefill_chunk(self.until_placed(seq), room, self.batch_invariant);
            room -= chunk;
            chosen.push((i, chunk));
        }
        if chosen.is_empty() {
            return Ok(());
        }
        // llama.cpp batches only consecutive sequence ids, in order.
        chosen.sort_by_key(|&(i, _)| seqs[i].id);
        for (i, chunk) in chosen {
            let seq = &mut *seqs[i];
            let end = seq.fed + chunk;
            for pos in seq.fed..end {
                // The last prompt token's logits give the first output
                // token; a recomputed sequence already has its next token.
                let last = pos + 1 == seq.feed_len() && seq.next.is_none();
                if last {
                    seq.logits_at = Some(self.batch.n_tokens());
                    seq.rows = 1;
                }
                self.batch
                    .add(seq.feed_token(pos), pos as i32, &[seq.id], last)
                    .map_err(|e| decode_err(&e))?;
            }
            seq.fed = end;
            seq.prompt_steps += 1;
        }
        if !run {
            return Ok(());
        }
        let started = Instant::now();
        self.ctx
            .decode(&mut self.batch)
            .map_err(|e| decode_err(&e))?;
        let tokens = usize::try_from(self.batch.n_tokens()).unwrap_or(0);
        self.pace.observe(tokens, started.elapsed());
        self.save_chunks(seqs);
        Ok(())
    }

    /// Samples every sequence whose logits were computed this step: the
    /// token after the one fed, then, while it equals the next draft token,
    /// the token after that draft (its logits are in the same batch):
    /// greedy decoding, several tokens per step. Drops the KV of rejected
    /// drafts and padding.
    fn take_tokens(
        &mut self,
        seqs: &mut [&mut Sequence],
        on_text: &mut dyn FnMut(usize, &str) -> ControlFlow<()>,
    ) -> Result<(), LlmError> {
        let decode_err = |e: &dyn std::fmt::Display| LlmError::Decode(e.to_string());
        for (i, seq) in seqs.iter_mut().enumerate() {
            let Some(base) = seq.logits_at.take() else {
                continue;
            };
            if seq.decode_started.is_none() {
                seq.prompt_ms = seq.started.elapsed().as_secs_f64() * 1e3;
                seq.decode_started = Some(Instant::now());
            }
            let mut accepted = 0;
            loop {
                let at = base + accepted as i32;
                let token = match seq.grammar.as_mut() {
                    None => seq.sampler.sample(&self.ctx, at),
                    Some(g) => match g.sample(&self.ctx, at, &mut seq.sampler) {
                        Some(t) => t,
                        // Nothing can continue the grammar: stop here.
                        None => {
                            seq.finish = Some(FinishReason::Stop);
                            break;
                        }
                    },
                };
                if !emit(self.model, seq, token, &mut |piece| on_text(i, piece)) {
                    break;
                }
                if seq.draft.get(accepted) == Some(&token) {
                    accepted += 1;
                    continue;
                }
                seq.next = Some(token);
                break;
            }
            seq.drafted += seq.draft.len() as u32;
            seq.accepted += accepted as u32;
            if seq.finish.is_none() && seq.rows > accepted + 1 {
                // Keep the fed token and the accepted drafts; drop the rest,
                // from the position the next token goes to.
                self.ctx
                    .clear_kv_cache_seq(
                        u32::try_from(seq.id).ok(),
                        u32::try_from(seq.position()).ok(),
                        None,
                    )
                    .map_err(|e| decode_err(&e))?;
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
        let evaluated = seq.fed.min(seq.prompt.len());
        self.unstage(&mut seq);
        self.keep_prefix(seq.id, &seq.prompt[..evaluated]);
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
            timing: seq.timing(),
            prompt_cached_tokens: u32::try_from(seq.reused).unwrap_or(u32::MAX),
            prompt_placed_tokens: u32::try_from(seq.placed).unwrap_or(u32::MAX),
            draft_tokens: seq.drafted,
            accepted_tokens: seq.accepted,
            preemptions: seq.preemptions,
            prompt_steps: seq.prompt_steps,
        }
    }
}
