//! Exact search (`gemm`'s matrix-vector product, kernels chosen at run time;
//! ADR 0012): right on this CPU, and on emulated older ones.

use std::process::{Command, Stdio};

use glassbox_models::index::{Chunk, IndexOptions, VectorIndex};

use crate::common::clustered;

/// Enough vectors that two threads each score a share (4,096 or more each).
const SPLIT: usize = 9000;
/// Few enough that an emulated CPU builds the index in seconds.
const SMALL: usize = 1500;

fn index(n: usize, threads: usize) -> (Vec<Vec<f32>>, VectorIndex) {
    let vectors = clustered(n, 384, 30, 6, 11);
    let chunks = (0..n)
        .map(|i| Chunk {
            id: format!("v{i}#0"),
            doc_id: format!("v{i}"),
            title: String::new(),
            ordinal: 0,
            text: String::new(),
        })
        .collect();
    let options = IndexOptions {
        threads: Some(threads),
        ..IndexOptions::default()
    };
    let index = VectorIndex::build(chunks, &vectors, &options).expect("the index builds");
    (vectors, index)
}

/// Cosine similarities in `f64`, best first.
fn cosines(vectors: &[Vec<f32>], query: &[f32]) -> Vec<(usize, f64)> {
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let mut scored: Vec<(usize, f64)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let dot: f64 = v
                .iter()
                .zip(query)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            (i, dot / (norm(v) * norm(query)))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored
}

/// Checks `index`'s exact top 10 against `f64` cosines for a few queries.
fn assert_exact_top_10(vectors: &[Vec<f32>], index: &VectorIndex) {
    for q in &clustered(10, 384, 30, 6, 12) {
        let truth = cosines(vectors, q);
        let (keys, scores) = index.search_keys(q, 10, true).expect("exact search");
        assert_eq!(keys.len(), 10);
        for (rank, (key, score)) in keys.iter().zip(&scores).enumerate() {
            // The same vector, or one whose cosine ties it within f32 error.
            let (want, best) = truth[rank];
            assert!(
                (f64::from(*score) - best).abs() < 1e-5,
                "rank {rank}: key {key} scored {score}, truth {want} at {best}"
            );
            assert!(
                (truth.iter().find(|t| t.0 == *key).expect("a stored key").1 - best).abs() < 1e-5
            );
        }
    }
}

/// Run by itself on emulated CPUs by the tests below.
#[test]
fn exact_search_gives_the_cosine_ranking() {
    let (vectors, index) = index(SMALL, 1);
    assert_exact_top_10(&vectors, &index);
}

#[test]
fn exact_search_gives_the_same_answer_on_any_thread_count() {
    let (vectors, one) = index(SPLIT, 1);
    let (_, two) = index(SPLIT, 2);
    assert_exact_top_10(&vectors, &two);
    for q in &clustered(10, 384, 30, 6, 13) {
        assert_eq!(
            one.search_keys(q, 10, true).unwrap(),
            two.search_keys(q, 10, true).unwrap()
        );
    }
}

/// The same test under `qemu-x86_64 -cpu MODEL`: gemm must take a kernel
/// the emulated CPU has (SIGILL otherwise) and give the same ranking.
fn passes_on(cpu: &str) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("qemu-x86_64")
        .args(["-cpu", cpu])
        .arg(&exe)
        .args([
            "--exact",
            "exact_search::exact_search_gives_the_cosine_ranking",
            "--test-threads",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("running qemu-x86_64: {e} (hint: install Debian's `qemu-user`; scripts/install-deps.sh does)")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "on {cpu}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn exact_search_runs_on_a_cpu_without_avx512() {
    passes_on("Haswell");
}

#[test]
fn exact_search_runs_on_a_cpu_without_avx() {
    passes_on("Nehalem");
}
