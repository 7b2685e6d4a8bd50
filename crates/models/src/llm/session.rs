//! One model + one context, driven on the worker thread.
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
            .with_n_ctx(NonZeroU32::new(options.n_ctx))
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
            version,
        })
    }

    /// The chat template (the Jinja source, or a built-in template's name).
    pub(super) fn template_source(&self) -> Option<String> {
        self.template.to_string().ok()
    }

    pub(super) fn n_ctx(&self) -> u32 {
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

    /// Runs one request. `on_text` receives the completion as it is generated
    /// and may break to cancel.
    pub(super) fn generate(
        &mut self,
        request: &GenerateRequest,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Completion, LlmError> {
        let prompt = self.render(&request.messages)?;
        let tokens = self.tokens(&prompt, true);
        let n_ctx = self.ctx.n_ctx();
        let prompt_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
        if prompt_tokens == 0 || prompt_tokens >= n_ctx {
            return Err(LlmError::PromptTooLong {
                prompt_tokens,
                n_ctx,
            });
        }
        let decode_err = |e: &dyn std::fmt::Display| LlmError::Decode(e.to_string());

        // Prefill: the whole prompt, in batches, logits only for the last token.
        let started = Instant::now();
        self.ctx.clear_kv_cache();
        let last = tokens.len() - 1;
        for (chunk_no, chunk) in tokens.chunks(self.n_batch).enumerate() {
            self.batch.clear();
            for (i, &token) in chunk.iter().enumerate() {
                let pos = chunk_no * self.n_batch + i;
                self.batch
                    .add(token, pos as i32, &[0], pos == last)
                    .map_err(|e| decode_err(&e))?;
            }
            self.ctx
                .decode(&mut self.batch)
                .map_err(|e| decode_err(&e))?;
        }
        let prompt_ms = started.elapsed().as_secs_f64() * 1e3;

        let (mut sampler, seed) = sampler(request);
        let mut text = TextAssembler::new(request.stop.clone());
        let mut logits_at = self.batch.n_tokens() - 1;
        let budget = (request.max_tokens as usize).min(n_ctx as usize - tokens.len());
        let mut completion_tokens = 0u32;
        let mut finish = FinishReason::Length;
        let started = Instant::now();
        for (step, pos) in (0..budget).zip(tokens.len()..) {
            let token = sampler.sample(&self.ctx, logits_at);
            if self.model.vocab().is_eog(token) {
                finish = FinishReason::Stop;
                break;
            }
            completion_tokens += 1;
            let piece = self.model.vocab().token_to_piece(token, false, None);
            let (out, stopped) = text.push(&piece);
            if !out.is_empty() && on_text(out).is_break() {
                finish = FinishReason::Cancelled;
                break;
            }
            if stopped {
                finish = FinishReason::Stop;
                break;
            }
            if step + 1 == budget {
                break; // no need to evaluate a token nobody will sample from
            }
            self.batch.clear();
            self.batch
                .add(token, pos as i32, &[0], true)
                .map_err(|e| decode_err(&e))?;
            self.ctx
                .decode(&mut self.batch)
                .map_err(|e| decode_err(&e))?;
            logits_at = 0;
        }
        let generate_ms = started.elapsed().as_secs_f64() * 1e3;
        let (rest, full) = text.finish();
        if !rest.is_empty() && finish != FinishReason::Cancelled {
            // The stream is ending anyway; a break here changes nothing.
            let _ = on_text(&rest);
        }
        Ok(Completion {
            text: full,
            finish_reason: finish,
            usage: Usage {
                prompt_tokens,
                completion_tokens,
            },
            model: self.version.clone(),
            seed,
            prompt_ms,
            generate_ms,
        })
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
