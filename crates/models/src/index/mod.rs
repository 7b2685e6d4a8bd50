//! Retrieval: documents → chunks → vectors → an on-disk HNSW index.
//!
//! - [`chunk_document`] splits Markdown or text into chunks that keep their
//!   document's title (its first `# Title` line, else the file stem) and id.
//! - [`VectorIndex`] is an approximate (HNSW, usearch) index over normalised
//!   vectors with the chunks beside it, saved as a directory; it also answers
//!   exact (brute-force) searches, the reference for recall.
//! - [`build_index`] runs the whole pipeline over a directory of documents.
//!
//! Scores are cosine similarities in [-1, 1]: vectors are L2-normalised on the
//! way in, and the index ranks by inner product.

mod build;
mod chunk;
mod exact;
mod store;

use std::path::PathBuf;

pub use build::{BuildProgress, IndexSummary, build_index};
pub use chunk::{ChunkOptions, chunk_document};
pub use store::{FULL_SCAN_FLOATS, IndexOptions, VectorIndex};

use crate::embed::EmbedError;

/// A piece of a document, the unit that is embedded and retrieved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chunk {
    /// `<doc_id>#<ordinal>`, unique within an index.
    pub id: String,
    /// The document's id: its path relative to the documents directory,
    /// without extension, `/`-separated (e.g. `billing/refunds`).
    pub doc_id: String,
    /// The document's title.
    pub title: String,
    /// Position of the chunk within its document, from 0.
    pub ordinal: u32,
    pub text: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hit {
    pub doc_id: String,
    pub title: String,
    pub chunk_id: String,
    /// Cosine similarity to the query.
    pub score: f32,
    pub text: String,
}

/// Errors of the chunker, the index and the index builder. `code()` is stable
/// for APIs and metrics.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("nothing to index: {what}")]
    Empty { what: String },
    #[error("no Markdown or text documents (.md, .markdown, .txt) under `{}`", dir.display())]
    NoDocuments { dir: PathBuf },
    #[error("vector {at} has {got} dimensions, expected {expected}")]
    Dimension {
        expected: usize,
        got: usize,
        at: usize,
    },
    #[error("{chunks} chunks but {vectors} vectors")]
    CountMismatch { chunks: usize, vectors: usize },
    #[error("vector {at} is not finite or is all zeros")]
    BadVector { at: usize },
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    #[error("no index at `{}`; hint: build one with `glassbox index build DOCS --out {}`", path.display(), path.display())]
    NotFound { path: PathBuf },
    #[error("index at `{}` is unreadable: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("{action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("vector index engine: {0}")]
    Engine(String),
    #[error("embedding the chunks")]
    Embed(#[source] EmbedError),
}

impl IndexError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty { .. } => "index_empty",
            Self::NoDocuments { .. } => "index_no_documents",
            Self::Dimension { .. } => "index_dimension",
            Self::CountMismatch { .. } => "index_count_mismatch",
            Self::BadVector { .. } => "index_bad_vector",
            Self::InvalidQuery(_) => "index_invalid_query",
            Self::NotFound { .. } => "index_not_found",
            Self::Corrupt { .. } => "index_corrupt",
            Self::Io { .. } => "index_io",
            Self::Engine(_) => "index_engine",
            Self::Embed(_) => "index_embed",
        }
    }
}

/// usearch reports failures as C++ exceptions; keep their message.
pub(crate) fn engine(e: impl std::fmt::Display) -> IndexError {
    IndexError::Engine(e.to_string())
}
