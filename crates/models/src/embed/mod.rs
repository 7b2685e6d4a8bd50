//! Sentence embeddings from a local BERT-family model (all-MiniLM-L6-v2).
//!
//! llama.cpp runs the encoder, with the same run-time-chosen CPU kernels as
//! the chat model ([`crate::cpu`]); the sentence-transformers weights are
//! converted to GGUF once, beside them ([`gguf`]). `tokenizers` reads the
//! model's own `tokenizer.json`, so token ids are exactly sentence-
//! transformers'. Inputs are truncated at the model's 256 tokens and never
//! padded: each text is its own sequence in the batch, mean-pooled over its
//! tokens and L2-normalised, as sentence-transformers does.

mod embedder;
pub mod gguf;

use std::path::PathBuf;

pub use embedder::Embedder;

use crate::paths::FETCH_HINT;

/// How to run the embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// The most texts in one forward pass (1 to 256).
    pub batch_size: usize,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub max_tokens: usize,
    /// The most tokens in one forward pass (raised to `max_tokens` if lower).
    /// Attention is computed over the whole pass with other texts masked out,
    /// so a smaller pass wastes less; a larger one has less per-pass overhead.
    pub tokens_per_pass: usize,
    /// CPU threads; `None` = all cores.
    pub threads: Option<usize>,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        Self {
            batch_size: 32,
            max_tokens: 256,
            tokens_per_pass: 512,
            threads: None,
        }
    }
}

impl EmbedderOptions {
    pub(crate) fn thread_count(&self) -> usize {
        self.threads
            .filter(|&n| n > 0)
            .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
            .unwrap_or(1)
    }
}

/// Errors of the embedder. `code()` is stable for APIs and metrics.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model file `{}` not found; hint: {FETCH_HINT}", path.display())]
    ModelMissing { path: PathBuf },
    #[error("reading `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid model config `{}`: {detail}", path.display())]
    Config { path: PathBuf, detail: String },
    #[error("tokenizer: {detail}")]
    Tokenizer { detail: String },
    #[error("loading weights from `{}`: {detail}", path.display())]
    Weights { path: PathBuf, detail: String },
    #[error("invalid embedder option `{field}`: {message}")]
    InvalidOption {
        field: &'static str,
        message: String,
    },
    #[error("running the model: {0}")]
    Inference(String),
}

impl EmbedError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ModelMissing { .. } => "embed_model_missing",
            Self::Io { .. } => "embed_io",
            Self::Config { .. } => "embed_config",
            Self::Tokenizer { .. } => "embed_tokenizer",
            Self::Weights { .. } => "embed_weights",
            Self::InvalidOption { .. } => "embed_invalid_option",
            Self::Inference(_) => "embed_inference",
        }
    }
}

/// Cosine similarity of two vectors (a dot product for normalised ones).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}
