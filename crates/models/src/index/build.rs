//! `build_index`: a directory of documents in, a saved index out.

use std::path::{Path, PathBuf};

use super::chunk::{ChunkOptions, chunk_document};
use super::store::{IndexOptions, VectorIndex};
use super::{Chunk, IndexError};
use crate::embed::Embedder;

/// Chunks embedded per call, between progress reports.
const EMBED_STEP: usize = 64;

/// What [`build_index`] is doing, for a progress bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildProgress {
    /// Documents read and split.
    Chunked { documents: usize, chunks: usize },
    /// `done` of `total` chunks embedded.
    Embedded { done: usize, total: usize },
    /// The HNSW graph is being built.
    Indexing,
    /// The index is written.
    Saved { path: PathBuf },
}

/// What [`build_index`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSummary {
    pub documents: usize,
    pub chunks: usize,
    pub dimensions: usize,
    pub embedder: String,
    pub path: PathBuf,
}

/// Reads every `.md`, `.markdown` and `.txt` file under `docs` (recursively,
/// hidden entries skipped, in path order), chunks them, embeds each chunk
/// (title and text together) and saves the index into directory `out`.
pub fn build_index(
    docs: &Path,
    embedder: &Embedder,
    out: &Path,
    progress: &mut dyn FnMut(BuildProgress),
) -> Result<IndexSummary, IndexError> {
    let files = collect_documents(docs)?;
    if files.is_empty() {
        return Err(IndexError::NoDocuments {
            dir: docs.to_path_buf(),
        });
    }
    let options = ChunkOptions::default();
    let mut chunks: Vec<Chunk> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|source| IndexError::Io {
            action: "reading",
            path: file.clone(),
            source,
        })?;
        let (doc_id, stem) = doc_id(docs, file);
        chunks.extend(chunk_document(&doc_id, &stem, &text, &options));
    }
    if chunks.is_empty() {
        return Err(IndexError::Empty {
            what: format!(
                "the {} documents under `{}` have no text",
                files.len(),
                docs.display()
            ),
        });
    }
    progress(BuildProgress::Chunked {
        documents: files.len(),
        chunks: chunks.len(),
    });

    // The title goes into the embedded text: "Refunds" matters to a question
    // about refunds even when the chunk never says the word.
    let inputs: Vec<String> = chunks
        .iter()
        .map(|c| format!("{}\n{}", c.title, c.text))
        .collect();
    let mut vectors = Vec::with_capacity(inputs.len());
    for step in inputs.chunks(EMBED_STEP) {
        vectors.extend(embedder.embed(step).map_err(IndexError::Embed)?);
        progress(BuildProgress::Embedded {
            done: vectors.len(),
            total: inputs.len(),
        });
    }

    progress(BuildProgress::Indexing);
    let n_chunks = chunks.len();
    let index = VectorIndex::build(chunks, &vectors, &IndexOptions::default())?
        .with_embedder(embedder.version());
    index.save(out)?;
    progress(BuildProgress::Saved {
        path: out.to_path_buf(),
    });
    Ok(IndexSummary {
        documents: files.len(),
        chunks: n_chunks,
        dimensions: index.dim(),
        embedder: embedder.version().to_owned(),
        path: out.to_path_buf(),
    })
}

/// The document files under `dir`, sorted.
fn collect_documents(dir: &Path) -> Result<Vec<PathBuf>, IndexError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IndexError::Io {
            action: "reading directory",
            path,
            source,
        }
    };
    if !dir.is_dir() {
        return Err(IndexError::Io {
            action: "reading directory",
            path: dir.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).map_err(io(&current))? {
            let entry = entry.map_err(io(&current))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_dir() {
                pending.push(path);
            } else if is_document(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn is_document(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["md", "markdown", "txt"].contains(&e.to_ascii_lowercase().as_str()))
}

/// The document id (relative path without extension, `/`-separated) and the
/// file stem.
fn doc_id(root: &Path, file: &Path) -> (String, String) {
    let rel = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let id = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    let stem = file
        .file_stem()
        .map_or_else(|| id.clone(), |s| s.to_string_lossy().into_owned());
    (id, stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_documents_recursively_in_order_and_skips_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/.git")).unwrap();
        std::fs::write(root.join("z.md"), "x").unwrap();
        std::fs::write(root.join("b/a.txt"), "x").unwrap();
        std::fs::write(root.join("b/.git/c.md"), "x").unwrap();
        std::fs::write(root.join("b/img.png"), "x").unwrap();
        let files = collect_documents(root).unwrap();
        let ids: Vec<_> = files.iter().map(|f| doc_id(root, f).0).collect();
        assert_eq!(ids, ["b/a", "z"]);
        assert_eq!(doc_id(root, &root.join("b/a.txt")).1, "a");
    }
}
