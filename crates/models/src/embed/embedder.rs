//! The BERT embedder itself: `tokenizers` in the caller's thread, llama.cpp
//! on the embedder's own thread.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use tokenizers::{Tokenizer, TruncationParams};

use super::{EmbedError, EmbedderOptions, gguf};
use crate::hash::file_sha256;

/// llama.cpp allows at most this many sequences in one batch (`LLAMA_MAX_SEQ`).
const MAX_SEQS: usize = 256;

/// A sentence embedder: text in, L2-normalised vectors out.
///
/// `Send + Sync`: share it behind an `Arc` and call [`embed`](Self::embed) from
/// several threads. Tokenizing runs in the caller's thread; the model runs on
/// the embedder's own thread, one forward pass at a time over all cores
/// (async callers use `spawn_blocking`). The thread stops when the embedder is
/// dropped.
pub struct Embedder {
    tokenizer: Tokenizer,
    jobs: mpsc::Sender<Job>,
    dim: usize,
    options: EmbedderOptions,
    version: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("version", &self.version)
            .field("dim", &self.dim)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Token ids of several texts, embedded in one forward pass.
struct Job {
    batch: Vec<Vec<u32>>,
    reply: mpsc::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

fn require(path: PathBuf) -> Result<PathBuf, EmbedError> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(EmbedError::ModelMissing { path })
    }
}

fn invalid(field: &'static str, message: String) -> EmbedError {
    EmbedError::InvalidOption { field, message }
}

impl Embedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`
    /// (e.g. [`minilm_dir`](crate::minilm_dir)`(&models_dir())`), converting
    /// the weights to `model.gguf` beside them the first time.
    pub fn load(dir: &Path, options: EmbedderOptions) -> Result<Self, EmbedError> {
        if options.batch_size == 0 || options.batch_size > MAX_SEQS {
            return Err(invalid(
                "batch_size",
                format!("must be 1 to {MAX_SEQS}, got {}", options.batch_size),
            ));
        }
        if options.max_tokens < 2 {
            return Err(invalid(
                "max_tokens",
                format!("must be at least 2, got {}", options.max_tokens),
            ));
        }
        let config_path = require(dir.join("config.json"))?;
        let tokenizer_path = require(dir.join("tokenizer.json"))?;
        let weights_path = require(dir.join("model.safetensors"))?;

        let config_text =
            std::fs::read_to_string(&config_path).map_err(|source| EmbedError::Io {
                path: config_path.clone(),
                source,
            })?;
        let raw: serde_json::Value =
            serde_json::from_str(&config_text).map_err(|e| EmbedError::Config {
                path: config_path.clone(),
                detail: e.to_string(),
            })?;
        let dim = raw
            .get("hidden_size")
            .and_then(serde_json::Value::as_u64)
            .and_then(|d| usize::try_from(d).ok())
            .ok_or_else(|| EmbedError::Config {
                path: config_path.clone(),
                detail: "no `hidden_size`".to_owned(),
            })?;
        let max_positions = raw
            .get("max_position_embeddings")
            .and_then(serde_json::Value::as_u64)
            .map_or(usize::MAX, |p| usize::try_from(p).unwrap_or(usize::MAX));
        let max_tokens = options.max_tokens.min(max_positions);
        let options = EmbedderOptions {
            max_tokens,
            tokens_per_pass: options.tokens_per_pass.max(max_tokens),
            ..options
        };

        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbedError::Tokenizer {
                detail: format!("{}: {e}", tokenizer_path.display()),
            })?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer {
                detail: e.to_string(),
            })?;

        let hash = file_sha256(&weights_path).map_err(|source| EmbedError::Io {
            path: weights_path.clone(),
            source,
        })?;
        let name = dir.file_name().map_or_else(
            || "embedder".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        );
        let version = format!("{name}@{}", &hash[..12]);

        let gguf = gguf::ensure_gguf(dir)?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread_options = options.clone();
        std::thread::Builder::new()
            .name("glassbox-embed".to_owned())
            .spawn(move || worker(&gguf, &thread_options, dim, &queue, &ready_tx))
            .map_err(|e| EmbedError::Inference(format!("spawning the embedder thread: {e}")))?;
        ready_rx
            .recv()
            .map_err(|_| EmbedError::Inference("the embedder thread stopped".to_owned()))??;
        Ok(Self {
            tokenizer,
            jobs,
            dim,
            options,
            version,
        })
    }

    /// The length of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The model's version tag: directory name and the first 12 hex digits of
    /// the weights' SHA-256.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn options(&self) -> &EmbedderOptions {
        &self.options
    }

    /// Token ids of `text` as the model sees it (`[CLS] ... [SEP]`, truncated).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer
            .encode_fast(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| EmbedError::Tokenizer {
                detail: e.to_string(),
            })
    }

    /// The text of token ids, special tokens skipped.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String, EmbedError> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| EmbedError::Tokenizer {
                detail: e.to_string(),
            })
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut out = self.embed(&[text])?;
        out.pop()
            .ok_or_else(|| EmbedError::Inference("no output".to_owned()))
    }

    /// Embeds `texts`; vector `i` belongs to `texts[i]`. An empty slice gives
    /// an empty result; an empty string embeds `[CLS] [SEP]`.
    ///
    /// Texts are packed into forward passes of at most `batch_size` texts and
    /// `tokens_per_pass` tokens. Nothing is padded: each text is its own
    /// sequence, and attention never crosses sequences.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encoded = Vec::with_capacity(texts.len());
        for text in texts {
            encoded.push(self.tokenize(text.as_ref())?);
        }
        let mut out = Vec::with_capacity(encoded.len());
        let mut batch: Vec<Vec<u32>> = Vec::new();
        let mut tokens = 0;
        for ids in encoded {
            if !batch.is_empty()
                && (batch.len() == self.options.batch_size
                    || tokens + ids.len() > self.options.tokens_per_pass)
            {
                out.extend(self.forward(std::mem::take(&mut batch))?);
                tokens = 0;
            }
            tokens += ids.len();
            batch.push(ids);
        }
        if !batch.is_empty() {
            out.extend(self.forward(batch)?);
        }
        Ok(out)
    }

    fn forward(&self, batch: Vec<Vec<u32>>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let gone = || EmbedError::Inference("the embedder thread stopped".to_owned());
        let (reply, answer) = mpsc::channel();
        self.jobs.send(Job { batch, reply }).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

/// The embedder's thread: loads the model, says so, then serves jobs until
/// every sender is gone.
fn worker(
    gguf: &Path,
    options: &EmbedderOptions,
    dim: usize,
    queue: &mpsc::Receiver<Job>,
    ready: &mpsc::Sender<Result<(), EmbedError>>,
) {
    let weights_err = |detail: String| EmbedError::Weights {
        path: gguf.to_path_buf(),
        detail,
    };
    let backend = match crate::llm::session::backend() {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(EmbedError::Inference(e.to_string())));
            return;
        }
    };
    let model = match LlamaModel::load_from_file(
        backend,
        gguf,
        &LlamaModelParams::default().with_use_mmap(true),
    ) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(weights_err(format!("llama.cpp refused it: {e}"))));
            return;
        }
    };
    if usize::try_from(model.n_embd()).ok() != Some(dim) {
        let _ = ready.send(Err(weights_err(format!(
            "{} dimensions, config.json says {dim}",
            model.n_embd()
        ))));
        return;
    }
    let threads = i32::try_from(options.thread_count()).unwrap_or(i32::MAX);
    let per_pass = u32::try_from(options.tokens_per_pass).unwrap_or(u32::MAX);
    let seqs = u32::try_from(options.batch_size).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(per_pass))
        .with_n_batch(per_pass)
        .with_n_ubatch(per_pass)
        .with_n_seq_max(seqs)
        .with_n_threads(threads)
        .with_n_threads_batch(threads)
        .with_embeddings(true)
        .with_pooling_type(LlamaPoolingType::Mean);
    let mut ctx = match model.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(EmbedError::Inference(format!(
                "creating the llama.cpp context: {e}"
            ))));
            return;
        }
    };
    let mut batch = LlamaBatch::new(options.tokens_per_pass, i32::try_from(seqs).unwrap_or(1));
    if ready.send(Ok(())).is_err() {
        return;
    }
    while let Ok(job) = queue.recv() {
        let result = run(&mut ctx, &mut batch, &job.batch, dim);
        let _ = job.reply.send(result);
    }
}

/// One forward pass: every text its own sequence, mean-pooled, normalised.
fn run(
    ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
    batch: &mut LlamaBatch<'_>,
    texts: &[Vec<u32>],
    dim: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| EmbedError::Inference(format!("{what}: {e}"));
    batch.clear();
    for (seq, ids) in texts.iter().enumerate() {
        let seq = i32::try_from(seq).map_err(|e| fail("sequence id", &e))?;
        for (pos, &id) in ids.iter().enumerate() {
            let token = LlamaToken(i32::try_from(id).map_err(|e| fail("token id", &e))?);
            let pos = i32::try_from(pos).map_err(|e| fail("position", &e))?;
            batch
                .add(token, pos, &[seq], true)
                .map_err(|e| fail("filling the batch", &e))?;
        }
    }
    ctx.encode(batch).map_err(|e| fail("llama_encode", &e))?;
    let mut out = Vec::with_capacity(texts.len());
    for seq in 0..texts.len() {
        let seq = i32::try_from(seq).map_err(|e| fail("sequence id", &e))?;
        let pooled = ctx
            .embeddings_seq_ith(seq)
            .map_err(|e| fail("reading the pooled vector", &e))?;
        let pooled = pooled.get(..dim).ok_or_else(|| {
            EmbedError::Inference(format!("{} values, expected {dim}", pooled.len()))
        })?;
        let norm = pooled.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        out.push(pooled.iter().map(|x| x / norm).collect());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directory_names_the_file_and_the_fix() {
        let err = Embedder::load(Path::new("/nonexistent/minilm"), EmbedderOptions::default())
            .unwrap_err();
        assert_eq!(err.code(), "embed_model_missing");
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/minilm/config.json"), "{msg}");
        assert!(msg.contains("glassbox models fetch"), "{msg}");
    }

    #[test]
    fn zero_or_too_large_batch_size_is_rejected() {
        for batch_size in [0, MAX_SEQS + 1] {
            let err = Embedder::load(
                Path::new("/nonexistent"),
                EmbedderOptions {
                    batch_size,
                    ..Default::default()
                },
            )
            .unwrap_err();
            assert_eq!(err.code(), "embed_invalid_option");
        }
    }
}
