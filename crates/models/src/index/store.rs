//! The vector index: usearch's HNSW graph plus the chunks it points to.
//!
//! The graph holds 8-bit copies of the unit vectors and finds candidates;
//! every candidate is then scored exactly against the full-precision vector.
//! Search is bound by memory reads (each comparison touches a vector at a
//! random address), so a quarter of the bytes per comparison makes the walk
//! about twice as fast as over `f32` vectors; the exact rescoring keeps the
//! scores (which `min_score` compares against) exact and lifts recall past
//! what 8-bit distances alone reach. See docs/BENCHMARKS.md, "Local models".
//!
//! On disk an index is a directory: `index.usearch` (the graph),
//! `vectors.f32` (the unit vectors, little-endian `f32`, key `i` at
//! `i * dimensions`), `chunks.json` (key `i` is `chunks[i]`) and
//! `manifest.json` (format version, dimensions, counts, parameters, the
//! embedder that made the vectors). Files are written as `.part` and renamed,
//! the manifest last, so a reader never sees a half-written index under a
//! valid manifest.

use std::path::{Path, PathBuf};

use usearch::{Index, MetricKind, ScalarKind};

use super::exact::{dot, score_all};
use super::{Chunk, Hit, IndexError, engine};

const FORMAT: u32 = 2;
const GRAPH_FILE: &str = "index.usearch";
const VECTORS_FILE: &str = "vectors.f32";
const CHUNKS_FILE: &str = "chunks.json";
const MANIFEST_FILE: &str = "manifest.json";
/// The most vector components an index may hold for [`VectorIndex::search`]
/// to scan them all instead of walking the graph.
pub const FULL_SCAN_FLOATS: usize = 2048 * 384;

/// HNSW parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexOptions {
    /// Graph degree (HNSW `M`).
    pub connectivity: usize,
    /// Candidate list size while building (`ef_construction`).
    pub expansion_add: usize,
    /// Candidate list size while searching (`ef`); more is slower and more exact.
    pub expansion_search: usize,
    /// Threads used to build and to score an exact search; `None` = all cores.
    #[serde(skip)]
    pub threads: Option<usize>,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            connectivity: 16,
            expansion_add: 128,
            expansion_search: 128,
            threads: None,
        }
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Manifest {
    format: u32,
    dimensions: usize,
    count: usize,
    metric: String,
    options: IndexOptions,
    embedder: Option<String>,
}

/// An approximate nearest-neighbour index over chunks. `Send + Sync`: searches
/// may run concurrently.
pub struct VectorIndex {
    index: Index,
    /// The unit vectors, `dim` floats each, in key order.
    vectors: Vec<f32>,
    chunks: Vec<Chunk>,
    dim: usize,
    options: IndexOptions,
    embedder: Option<String>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("len", &self.chunks.len())
            .field("dim", &self.dim)
            .field("options", &self.options)
            .field("embedder", &self.embedder)
            .finish_non_exhaustive()
    }
}

fn new_index(dim: usize, options: &IndexOptions) -> Result<Index, IndexError> {
    let native = usearch::IndexOptions {
        dimensions: dim,
        metric: MetricKind::IP,
        quantization: ScalarKind::I8,
        connectivity: options.connectivity,
        expansion_add: options.expansion_add,
        expansion_search: options.expansion_search,
        multi: false,
    };
    Index::new(&native).map_err(engine)
}

/// `v` scaled to unit length, or `None` if it is not finite or all zeros.
fn normalised(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm.is_finite() && norm > 0.0).then(|| v.iter().map(|x| x / norm).collect())
}

/// Best first; equal scores in key order, so results are deterministic.
fn by_score(a: &(usize, f32), b: &(usize, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The `k` best of `scored` (in [`by_score`] order), in one pass: each
/// candidate is compared with the worst kept one, and only a better one is
/// inserted, so a long list costs about one comparison per entry.
fn best(scored: impl Iterator<Item = (usize, f32)>, k: usize) -> Vec<(usize, f32)> {
    let mut kept: Vec<(usize, f32)> = Vec::with_capacity(k + 1);
    for candidate in scored {
        if kept.len() == k
            && kept
                .last()
                .is_none_or(|worst| by_score(&candidate, worst).is_ge())
        {
            continue;
        }
        let at = kept.partition_point(|kept| by_score(kept, &candidate).is_lt());
        kept.insert(at, candidate);
        kept.truncate(k);
    }
    kept
}

fn threads(options: &IndexOptions) -> usize {
    options
        .threads
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

impl VectorIndex {
    /// Whether `dir` holds a saved index (its graph file is there). Tools that
    /// walk a folder for topologies skip such folders: they are data.
    pub fn is_index_dir(dir: &Path) -> bool {
        dir.join(GRAPH_FILE).is_file()
    }

    /// Builds an index: `vectors[i]` is the embedding of `chunks[i]`. Vectors
    /// are normalised; all must have the same length.
    pub fn build(
        chunks: Vec<Chunk>,
        vectors: &[Vec<f32>],
        options: &IndexOptions,
    ) -> Result<Self, IndexError> {
        if chunks.len() != vectors.len() {
            return Err(IndexError::CountMismatch {
                chunks: chunks.len(),
                vectors: vectors.len(),
            });
        }
        let Some(dim) = vectors.first().map(Vec::len).filter(|&d| d > 0) else {
            return Err(IndexError::Empty {
                what: "no vectors given".to_owned(),
            });
        };
        let mut unit = Vec::with_capacity(vectors.len());
        for (at, v) in vectors.iter().enumerate() {
            if v.len() != dim {
                return Err(IndexError::Dimension {
                    expected: dim,
                    got: v.len(),
                    at,
                });
            }
            unit.push(normalised(v).ok_or(IndexError::BadVector { at })?);
        }
        let index = new_index(dim, options)?;
        let n_threads = threads(options).min(unit.len()).max(1);
        index
            .reserve_capacity_and_threads(unit.len(), n_threads)
            .map_err(engine)?;
        // usearch supports concurrent inserts; split the keys across threads.
        let results: Vec<Result<(), IndexError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n_threads)
                .map(|t| {
                    let index = &index;
                    let unit = &unit;
                    scope.spawn(move || {
                        for key in (t..unit.len()).step_by(n_threads) {
                            index.add(key as u64, &unit[key]).map_err(engine)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(engine("an insert thread panicked")))
                })
                .collect()
        });
        results.into_iter().collect::<Result<(), _>>()?;
        Ok(Self {
            index,
            vectors: unit.concat(),
            chunks,
            dim,
            options: options.clone(),
            embedder: None,
        })
    }

    /// Records which embedder made the vectors (saved in the manifest).
    pub fn with_embedder(mut self, version: impl Into<String>) -> Self {
        self.embedder = Some(version.into());
        self
    }

    /// The embedder that made the vectors, if recorded.
    pub fn embedder(&self) -> Option<&str> {
        self.embedder.as_deref()
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    pub fn options(&self) -> &IndexOptions {
        &self.options
    }

    /// Changes the search candidate list size (`ef`) for later searches.
    pub fn set_expansion_search(&mut self, ef: usize) {
        self.index.change_expansion_search(ef);
        self.options.expansion_search = ef;
    }

    /// The `top_k` nearest chunks with score >= `min_score`, best first:
    /// approximate (the graph), or exact on an index small enough that
    /// comparing the query with every vector costs no more than a walk of
    /// the graph ([`full_scan`](Self::full_scan)).
    pub fn search(
        &self,
        query: &[f32],
        top_k: usize,
        min_score: f32,
    ) -> Result<Vec<Hit>, IndexError> {
        let (keys, scores) = self.search_keys(query, top_k, self.full_scan())?;
        Ok(self.hits(&keys, &scores, min_score))
    }

    /// Whether [`search`](Self::search) compares the query with every
    /// vector: at most [`FULL_SCAN_FLOATS`] numbers in all (2,048 vectors of
    /// MiniLM's 384), where one scan is as fast as the graph's walk at its
    /// default `ef` (`bench_index --n 2000`: 11.5k against 12.8k queries a
    /// second on 2 cores), finds every true neighbour instead of ~98%, and
    /// does not depend on the graph, whose shape varies with the order in
    /// which the build's threads inserted the vectors. Qdrant's
    /// `full_scan_threshold` is the same idea.
    pub fn full_scan(&self) -> bool {
        self.chunks.len().saturating_mul(self.dim) <= FULL_SCAN_FLOATS
    }

    /// Like [`search`](Self::search) but exact: compares the query with every
    /// vector (NumKong's dot products, split over [`IndexOptions::threads`]).
    /// The reference for recall; slower on large indexes.
    pub fn search_exact(
        &self,
        query: &[f32],
        top_k: usize,
        min_score: f32,
    ) -> Result<Vec<Hit>, IndexError> {
        let (keys, scores) = self.search_keys(query, top_k, true)?;
        Ok(self.hits(&keys, &scores, min_score))
    }

    /// Positions (into [`chunks`](Self::chunks)) and scores of the nearest
    /// vectors, best first, approximate or exact. Scores are exact cosine
    /// similarities either way: the graph's candidates (its whole search
    /// list, `max(top_k, expansion_search)` of them) are rescored against the
    /// full-precision vectors.
    pub fn search_keys(
        &self,
        query: &[f32],
        top_k: usize,
        exact: bool,
    ) -> Result<(Vec<usize>, Vec<f32>), IndexError> {
        if query.len() != self.dim {
            return Err(IndexError::InvalidQuery(format!(
                "the query has {} dimensions, the index {}",
                query.len(),
                self.dim
            )));
        }
        let query = normalised(query).ok_or_else(|| {
            IndexError::InvalidQuery("the query is not finite or all zeros".to_owned())
        })?;
        if top_k == 0 || self.chunks.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut scored: Vec<(usize, f32)> = if exact {
            let scores = score_all(&query, &self.vectors, self.dim, threads(&self.options));
            best(scores.into_iter().enumerate(), top_k)
        } else {
            let wanted = top_k.max(self.options.expansion_search);
            let matches = self.index.search(&query, wanted).map_err(engine)?;
            matches
                .keys
                .iter()
                .filter_map(|&key| {
                    let key = usize::try_from(key).ok()?;
                    let v = self.vectors.get(key * self.dim..(key + 1) * self.dim)?;
                    Some((key, dot(&query, v)))
                })
                .collect()
        };
        if scored.len() > top_k {
            scored.select_nth_unstable_by(top_k - 1, by_score);
            scored.truncate(top_k);
        }
        scored.sort_unstable_by(by_score);
        Ok(scored.into_iter().unzip())
    }

    fn hits(&self, keys: &[usize], scores: &[f32], min_score: f32) -> Vec<Hit> {
        keys.iter()
            .zip(scores)
            .filter(|&(_, &score)| score >= min_score)
            .filter_map(|(&key, &score)| {
                let chunk = self.chunks.get(key)?;
                Some(Hit {
                    doc_id: chunk.doc_id.clone(),
                    title: chunk.title.clone(),
                    chunk_id: chunk.id.clone(),
                    score,
                    text: chunk.text.clone(),
                })
            })
            .collect()
    }

    /// Saves the index into directory `dir` (created if missing; an index
    /// already there is replaced).
    pub fn save(&self, dir: &Path) -> Result<(), IndexError> {
        std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
        let graph = dir.join(GRAPH_FILE);
        let graph_part = part(&graph);
        self.index.save(utf8(&graph_part)?).map_err(engine)?;
        let vectors: Vec<u8> = self.vectors.iter().flat_map(|x| x.to_le_bytes()).collect();
        write_part(&dir.join(VECTORS_FILE), &vectors)?;
        let chunks = serde_json::to_vec(&self.chunks).map_err(|e| engine(e.to_string()))?;
        write_part(&dir.join(CHUNKS_FILE), &chunks)?;
        let manifest = Manifest {
            format: FORMAT,
            dimensions: self.dim,
            count: self.chunks.len(),
            metric: "cosine".to_owned(),
            options: self.options.clone(),
            embedder: self.embedder.clone(),
        };
        let manifest = serde_json::to_vec_pretty(&manifest).map_err(|e| engine(e.to_string()))?;
        rename(&graph_part, &graph)?;
        rename(&part(&dir.join(VECTORS_FILE)), &dir.join(VECTORS_FILE))?;
        rename(&part(&dir.join(CHUNKS_FILE)), &dir.join(CHUNKS_FILE))?;
        write_part(&dir.join(MANIFEST_FILE), &manifest)?;
        rename(&part(&dir.join(MANIFEST_FILE)), &dir.join(MANIFEST_FILE))
    }

    /// Loads an index saved with [`save`](Self::save).
    pub fn load(dir: &Path) -> Result<Self, IndexError> {
        let manifest_path = dir.join(MANIFEST_FILE);
        if !manifest_path.is_file() {
            return Err(IndexError::NotFound {
                path: dir.to_path_buf(),
            });
        }
        let corrupt = |detail: String| IndexError::Corrupt {
            path: dir.to_path_buf(),
            detail,
        };
        let text = std::fs::read(&manifest_path).map_err(io("reading", &manifest_path))?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| corrupt(format!("`{MANIFEST_FILE}`: {e}")))?;
        if manifest.format != FORMAT {
            return Err(corrupt(format!(
                "format {} is not supported (this build reads format {FORMAT}); rebuild the index",
                manifest.format
            )));
        }
        let chunks_path = dir.join(CHUNKS_FILE);
        let text = std::fs::read(&chunks_path).map_err(io("reading", &chunks_path))?;
        let chunks: Vec<Chunk> =
            serde_json::from_slice(&text).map_err(|e| corrupt(format!("`{CHUNKS_FILE}`: {e}")))?;
        let index = new_index(manifest.dimensions, &manifest.options)?;
        let graph = dir.join(GRAPH_FILE);
        index
            .load(utf8(&graph)?)
            .map_err(|e| corrupt(format!("`{GRAPH_FILE}`: {e}")))?;
        if index.dimensions() != manifest.dimensions {
            return Err(corrupt(format!(
                "`{GRAPH_FILE}` has {} dimensions, the manifest {}",
                index.dimensions(),
                manifest.dimensions
            )));
        }
        if index.size() != chunks.len() || chunks.len() != manifest.count {
            return Err(corrupt(format!(
                "{} vectors, {} chunks, manifest says {}",
                index.size(),
                chunks.len(),
                manifest.count
            )));
        }
        let vectors_path = dir.join(VECTORS_FILE);
        let bytes = std::fs::read(&vectors_path).map_err(io("reading", &vectors_path))?;
        // Checked: a damaged manifest must not overflow.
        let needed = manifest
            .count
            .checked_mul(manifest.dimensions)
            .and_then(|n| n.checked_mul(4));
        if needed != Some(bytes.len()) {
            return Err(corrupt(format!(
                "`{VECTORS_FILE}` has {} bytes; {} vectors of {} dimensions need {}",
                bytes.len(),
                manifest.count,
                manifest.dimensions,
                needed.map_or_else(|| "more than fits in memory".to_owned(), |n| n.to_string())
            )));
        }
        let vectors = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        index.change_expansion_search(manifest.options.expansion_search);
        Ok(Self {
            index,
            vectors,
            chunks,
            dim: manifest.dimensions,
            options: manifest.options,
            embedder: manifest.embedder,
        })
    }
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> IndexError + 'a {
    move |source| IndexError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn utf8(path: &Path) -> Result<&str, IndexError> {
    path.to_str()
        .ok_or_else(|| engine(format!("path `{}` is not valid UTF-8", path.display())))
}

fn part(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    path.with_file_name(name)
}

fn write_part(path: &Path, bytes: &[u8]) -> Result<(), IndexError> {
    let part = part(path);
    std::fs::write(&part, bytes).map_err(io("writing", &part))
}

fn rename(from: &Path, to: &Path) -> Result<(), IndexError> {
    std::fs::rename(from, to).map_err(io("moving into place", to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(i: usize) -> Chunk {
        Chunk {
            id: format!("d{i}#0"),
            doc_id: format!("d{i}"),
            title: format!("Doc {i}"),
            ordinal: 0,
            text: format!("text {i}"),
        }
    }

    fn small() -> VectorIndex {
        let vectors = vec![
            vec![1.0, 0.0, 0.0],
            vec![0.0, 1.0, 0.0],
            vec![0.7, 0.7, 0.0],
        ];
        VectorIndex::build(
            (0..3).map(chunk).collect(),
            &vectors,
            &IndexOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn best_keeps_the_top_k_in_score_then_key_order() {
        let scores = [0.5, 0.9, 0.1, 0.9, 0.7, 0.5, -1.0];
        let all = || scores.iter().copied().enumerate();
        assert_eq!(best(all(), 3), [(1, 0.9), (3, 0.9), (4, 0.7)]);
        assert_eq!(best(all(), 5).last(), Some(&(5, 0.5)));
        assert_eq!(best(all(), 10).len(), scores.len());
        assert!(best(all(), 0).is_empty());
        let mut sorted: Vec<(usize, f32)> = all().collect();
        sorted.sort_by(by_score);
        assert_eq!(best(all(), 7), sorted);
    }

    #[test]
    fn search_ranks_by_cosine_and_filters_by_score() {
        let index = small();
        let hits = index.search(&[2.0, 0.0, 0.0], 3, -1.0).unwrap();
        let ids: Vec<_> = hits.iter().map(|h| h.doc_id.as_str()).collect();
        assert_eq!(ids, ["d0", "d2", "d1"]);
        assert!((hits[0].score - 1.0).abs() < 1e-5);
        assert_eq!(hits[0].title, "Doc 0");
        assert_eq!(hits[0].chunk_id, "d0#0");
        let hits = index.search(&[1.0, 0.0, 0.0], 3, 0.5).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(index.search_exact(&[1.0, 0.0, 0.0], 3, 0.5).unwrap(), hits);
    }

    #[test]
    fn bad_inputs_are_named() {
        let opts = IndexOptions::default();
        let err = VectorIndex::build(vec![chunk(0)], &[], &opts).unwrap_err();
        assert_eq!(err.code(), "index_count_mismatch");
        let err = VectorIndex::build(vec![], &[], &opts).unwrap_err();
        assert_eq!(err.code(), "index_empty");
        let err = VectorIndex::build(
            vec![chunk(0), chunk(1)],
            &[vec![1.0, 0.0], vec![1.0]],
            &opts,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "vector 1 has 1 dimensions, expected 2");
        let err = VectorIndex::build(vec![chunk(0)], &[vec![0.0, 0.0]], &opts).unwrap_err();
        assert_eq!(err.code(), "index_bad_vector");
        let err = small().search(&[1.0, 0.0], 3, 0.0).unwrap_err();
        assert_eq!(err.code(), "index_invalid_query");
        let err = small().search(&[0.0, 0.0, 0.0], 3, 0.0).unwrap_err();
        assert_eq!(err.code(), "index_invalid_query");
    }

    #[test]
    fn missing_index_has_a_hint() {
        let err = VectorIndex::load(Path::new("/nonexistent/idx")).unwrap_err();
        assert_eq!(err.code(), "index_not_found");
        assert!(err.to_string().contains("glassbox index build"));
    }
}
