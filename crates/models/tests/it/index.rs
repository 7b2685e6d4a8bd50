//! The vector index: recall, persistence, and building from documents.

use glassbox_models::index::{
    BuildProgress, Chunk, FULL_SCAN_FLOATS, IndexOptions, VectorIndex, build_index,
};

use crate::common::{brute_force, clustered, embedder};

fn chunks(n: usize) -> Vec<Chunk> {
    (0..n)
        .map(|i| Chunk {
            id: format!("doc{i}#0"),
            doc_id: format!("doc{i}"),
            title: format!("Document {i}"),
            ordinal: 0,
            text: format!("chunk {i}"),
        })
        .collect()
}

#[test]
fn recall_at_10_against_exact_search() {
    let n = 4000;
    let vectors = clustered(n, 384, 40, 7, 1);
    let index = VectorIndex::build(chunks(n), &vectors, &IndexOptions::default()).unwrap();
    let queries = clustered(100, 384, 40, 7, 2);
    let (mut found, mut exact_found) = (0, 0);
    for q in &queries {
        let truth = brute_force(&vectors, q, 10);
        let (approx, _) = index.search_keys(q, 10, false).unwrap();
        let (exact, _) = index.search_keys(q, 10, true).unwrap();
        found += approx.iter().filter(|k| truth.contains(k)).count();
        exact_found += exact.iter().filter(|k| truth.contains(k)).count();
    }
    let recall = found as f64 / (queries.len() * 10) as f64;
    let exact_recall = exact_found as f64 / (queries.len() * 10) as f64;
    assert!(recall >= 0.95, "recall@10 {recall}");
    assert!(exact_recall >= 0.999, "exact recall@10 {exact_recall}");
}

#[test]
fn a_small_index_is_searched_exactly_whatever_its_graph() {
    let n = 1000;
    let vectors = clustered(n, 384, 40, 7, 3);
    let mut index = VectorIndex::build(chunks(n), &vectors, &IndexOptions::default()).unwrap();
    assert!(index.full_scan(), "{n} × 384 is under the full-scan limit");
    // A graph walk this short misses true neighbours; the search does not.
    index.set_expansion_search(10);
    let queries = clustered(50, 384, 40, 7, 4);
    let mut walk_missed = 0;
    for q in &queries {
        let truth = brute_force(&vectors, q, 10);
        let hits = index.search(q, 10, -1.0).unwrap();
        assert_eq!(hits.len(), 10);
        assert_eq!(hits, index.search_exact(q, 10, -1.0).unwrap());
        let (walked, _) = index.search_keys(q, 10, false).unwrap();
        walk_missed += walked.iter().filter(|k| !truth.contains(k)).count();
    }
    assert!(
        walk_missed > 0,
        "ef 10 should miss some: the test shows nothing"
    );

    let big = FULL_SCAN_FLOATS / 384 + 1;
    let vectors = clustered(big, 384, 40, 7, 5);
    let index = VectorIndex::build(chunks(big), &vectors, &IndexOptions::default()).unwrap();
    assert!(!index.full_scan(), "{big} vectors walk the graph");
}

#[test]
fn save_and_load_round_trip() {
    let n = 500;
    let vectors = clustered(n, 64, 10, 3, 1);
    let index = VectorIndex::build(chunks(n), &vectors, &IndexOptions::default())
        .unwrap()
        .with_embedder("test-embedder@000000000000");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    index.save(&path).unwrap();
    let loaded = VectorIndex::load(&path).unwrap();
    assert_eq!(loaded.len(), n);
    assert_eq!(loaded.dim(), 64);
    assert_eq!(loaded.embedder(), Some("test-embedder@000000000000"));
    assert_eq!(loaded.chunks(), index.chunks());
    for q in vectors.iter().step_by(50) {
        assert_eq!(
            loaded.search(q, 5, 0.0).unwrap(),
            index.search(q, 5, 0.0).unwrap()
        );
    }
    // Saving over an existing index replaces it.
    index.save(&path).unwrap();
    assert_eq!(VectorIndex::load(&path).unwrap().len(), n);
    let leftovers: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn damaged_index_is_reported() {
    let vectors = clustered(50, 16, 4, 1, 1);
    let index = VectorIndex::build(chunks(50), &vectors, &IndexOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    index.save(dir.path()).unwrap();
    std::fs::write(dir.path().join("chunks.json"), b"[{\"id\": 3").unwrap();
    let err = VectorIndex::load(dir.path()).unwrap_err();
    assert_eq!(err.code(), "index_corrupt", "{err}");

    index.save(dir.path()).unwrap();
    std::fs::write(dir.path().join("index.usearch"), b"garbage").unwrap();
    let err = VectorIndex::load(dir.path()).unwrap_err();
    assert_eq!(err.code(), "index_corrupt", "{err}");

    index.save(dir.path()).unwrap();
    let vectors_file = dir.path().join("vectors.f32");
    let bytes = std::fs::read(&vectors_file).unwrap();
    std::fs::write(&vectors_file, &bytes[..bytes.len() - 4]).unwrap();
    let err = VectorIndex::load(dir.path()).unwrap_err();
    assert_eq!(err.code(), "index_corrupt", "{err}");
    assert!(err.to_string().contains("vectors.f32"), "{err}");
}

#[test]
fn scores_are_exact_cosines_although_the_graph_is_8_bit() {
    let n = 1000;
    let vectors = clustered(n, 384, 20, 5, 3);
    let index = VectorIndex::build(chunks(n), &vectors, &IndexOptions::default()).unwrap();
    let unit = |v: &[f32]| {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect::<Vec<f32>>()
    };
    for q in clustered(20, 384, 20, 5, 4) {
        let (keys, scores) = index.search_keys(&q, 5, false).unwrap();
        assert_eq!(keys.len(), 5);
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        let q = unit(&q);
        for (&key, &score) in keys.iter().zip(&scores) {
            let v = unit(&vectors[key]);
            let cosine: f32 = q.iter().zip(&v).map(|(a, b)| a * b).sum();
            assert!((cosine - score).abs() < 1e-5, "{cosine} vs {score}");
        }
    }
}

#[test]
fn build_index_from_documents_and_search_it() {
    let docs = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = docs.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "billing/refunds.md",
        "# Refund policy\n\nYou can get your money back within 30 days of purchase. \
         Refunds go to the original payment method within five business days.\n",
    );
    write(
        "setup.md",
        "# Installing Glassbox\n\nDownload the binary and run `glassbox serve`.\n",
    );
    write(
        "notes.txt",
        "The office cat is called Pixel and likes the sunny window.\n",
    );
    write("empty.md", "# Empty\n");
    let out = tempfile::tempdir().unwrap();
    let out = out.path().join("kb");
    let mut events = Vec::new();
    let summary = build_index(docs.path(), embedder(), &out, &mut |e| events.push(e)).unwrap();
    assert_eq!(summary.documents, 4);
    assert_eq!(summary.chunks, 3);
    assert_eq!(summary.dimensions, 384);
    assert!(matches!(
        events.first(),
        Some(BuildProgress::Chunked {
            documents: 4,
            chunks: 3
        })
    ));
    assert!(events.contains(&BuildProgress::Embedded { done: 3, total: 3 }));

    let index = VectorIndex::load(&out).unwrap();
    assert_eq!(index.embedder(), Some(embedder().version()));
    let query = embedder().embed_one("how do I get my money back?").unwrap();
    let hits = index.search(&query, 3, 0.0).unwrap();
    assert_eq!(hits[0].title, "Refund policy");
    assert_eq!(hits[0].doc_id, "billing/refunds");
    assert_eq!(hits[0].chunk_id, "billing/refunds#0");
    assert!(hits[0].text.contains("30 days"));
    let cat = index.search(&query, 3, hits[0].score).unwrap();
    assert_eq!(cat.len(), 1, "min_score keeps only the best hit");
    let hits_notes = index
        .search(
            &embedder().embed_one("what is the cat's name").unwrap(),
            1,
            0.0,
        )
        .unwrap();
    assert_eq!(
        hits_notes[0].title, "notes",
        "a text file is titled by its stem"
    );
}

#[test]
fn empty_document_directory_is_an_error() {
    let docs = tempfile::tempdir().unwrap();
    let out = docs.path().join("out");
    let err = build_index(docs.path(), embedder(), &out, &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "index_no_documents");
    std::fs::write(docs.path().join("a.md"), "# Just a title\n").unwrap();
    let err = build_index(docs.path(), embedder(), &out, &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "index_empty");
}
