//! Sentence embeddings from a local BERT-family model (all-MiniLM-L6-v2).
//!
//! ONNX Runtime runs the encoder, from a graph written at load time from the
//! model's safetensors ([`onnx`]); `tokenizers` reads the model's
//! `tokenizer.json`.
//! The shipped tokenizer pads every input to 128 tokens, which wastes most of
//! the compute on short chunks, so padding is switched off and each batch is
//! padded to its longest input instead; inputs are truncated at the model's
//! 256 tokens. Like sentence-transformers, inputs are sorted by length before
//! batching (less padding) and results come back in input order.

mod batch;
mod embedder;
pub mod onnx;

use std::path::PathBuf;

pub use batch::BatchStats;
pub use embedder::Embedder;

use crate::paths::FETCH_HINT;

/// How to run the embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// Texts per forward pass.
    pub batch_size: usize,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub max_tokens: usize,
    /// Threads of the encoder's matrix products; 0 = ONNX Runtime's default
    /// (one per physical core).
    pub threads: usize,
    /// How self-attention is run. `$GLASSBOX_EMBED_ATTENTION=standard`
    /// overrides the default at load.
    pub attention: onnx::Attention,
    /// Dynamic batching: how long the caller that runs the next forward
    /// pass waits for others to join it (up to `batch_size` texts). Calls
    /// that arrive while a pass runs share the next one whatever this is;
    /// zero (the default) adds no wait to a caller alone.
    pub batch_window: std::time::Duration,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        Self {
            batch_size: 32,
            max_tokens: 256,
            threads: 0,
            attention: onnx::Attention::Fused,
            batch_window: std::time::Duration::ZERO,
        }
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
    #[error("ONNX Runtime library `{}` not found; hint: {hint}", path.display())]
    RuntimeMissing { path: PathBuf, hint: &'static str },
    #[error("loading ONNX Runtime from `{}`: {detail}", path.display())]
    Runtime { path: PathBuf, detail: String },
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
            Self::RuntimeMissing { .. } => "embed_runtime_missing",
            Self::Runtime { .. } => "embed_runtime",
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
