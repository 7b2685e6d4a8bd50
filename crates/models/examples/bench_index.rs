//! Vector search: queries per second against recall@10, HNSW and exact.
//!
//! Usage: `bench_index [--n N] [--queries Q] [--threads T] [--out DIR]`.
//! Generates vectors shaped like sentence embeddings (clusters with a few
//! directions of variation each, not uniform noise), writes them for the
//! Python peer (`base.f32`, `queries.f32`, `gt.u32`, `index-meta.json`),
//! builds the index, and sweeps the search expansion `ef`. Queries run one at a
//! time: HNSW on one thread, exact search on `--threads` (as numpy's BLAS does
//! for the peer). Each figure goes out with its physical ceiling: the measured
//! read bandwidth over the least bytes a query reads (every vector for exact
//! search; the `ef` candidates' `f32` vectors, rescored, for HNSW). Part of
//! `scripts/bench-models.sh`.

use std::path::PathBuf;
use std::time::Instant;

use glassbox_models::cpu::bound;
use glassbox_models::index::{Chunk, IndexOptions, VectorIndex};

const DIM: usize = 384;
const K: usize = 10;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

/// xorshift64* with Box–Muller normals: deterministic, no `rand`.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        let u1 = self.uniform().max(1e-7);
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * self.uniform()).cos()
    }
}

/// Topics (cluster centres), each with a few directions its sentences vary
/// along, plus a little isotropic noise; unit length like MiniLM's output.
struct Generator {
    centres: Vec<Vec<f32>>,
    directions: Vec<Vec<Vec<f32>>>,
}

impl Generator {
    fn new(rng: &mut Rng, clusters: usize, rank: usize) -> Self {
        let centres = (0..clusters)
            .map(|_| (0..DIM).map(|_| rng.normal()).collect())
            .collect();
        let directions = (0..clusters)
            .map(|_| {
                (0..rank)
                    .map(|_| (0..DIM).map(|_| rng.normal()).collect())
                    .collect()
            })
            .collect();
        Self {
            centres,
            directions,
        }
    }

    fn sample(&self, rng: &mut Rng) -> Vec<f32> {
        let c = (rng.next_u64() % self.centres.len() as u64) as usize;
        let mut v = self.centres[c].clone();
        for d in &self.directions[c] {
            let w = 0.5 * rng.normal();
            v.iter_mut().zip(d).for_each(|(x, y)| *x += w * y);
        }
        v.iter_mut().for_each(|x| *x += 0.15 * rng.normal());
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }
}

fn write_f32(path: &PathBuf, vectors: &[Vec<f32>]) -> std::io::Result<()> {
    let bytes: Vec<u8> = vectors
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(path, bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = arg("--n", "100000").parse()?;
    let nq: usize = arg("--queries", "1000").parse()?;
    let threads: usize = arg("--threads", "2").parse()?;
    let out = PathBuf::from(arg("--out", "target-models/bench"));
    std::fs::create_dir_all(&out)?;

    let mut rng = Rng(0x005e_ed0f_91a5_5b0c);
    let generator = Generator::new(&mut rng, 1000, 8);
    let base: Vec<Vec<f32>> = (0..n).map(|_| generator.sample(&mut rng)).collect();
    let queries: Vec<Vec<f32>> = (0..nq).map(|_| generator.sample(&mut rng)).collect();
    write_f32(&out.join("base.f32"), &base)?;
    write_f32(&out.join("queries.f32"), &queries)?;

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
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 64,
        threads: Some(threads),
    };
    let started = Instant::now();
    let mut index = VectorIndex::build(chunks, &base, &options)?;
    let build_s = started.elapsed().as_secs_f64();

    // Exact search (brute force over the f32 vectors, on `threads`):
    // ground truth and its own speed.
    let started = Instant::now();
    let mut truth = Vec::with_capacity(nq);
    for q in &queries {
        truth.push(index.search_keys(q, K, true)?.0);
    }
    let exact_qps = nq as f64 / started.elapsed().as_secs_f64();
    let gt: Vec<u8> = truth
        .iter()
        .flatten()
        .flat_map(|&k| (k as u32).to_le_bytes())
        .collect();
    std::fs::write(out.join("gt.u32"), gt)?;
    std::fs::write(
        out.join("index-meta.json"),
        serde_json::to_vec(&serde_json::json!({"n": n, "queries": nq, "dim": DIM, "k": K}))?,
    )?;

    // Ceilings: one query reads at least these bytes, at most this fast.
    let vector_bytes = (DIM * 4) as f64;
    let base_bytes = n * DIM * 4;
    let exact_bound_qps = bound::read_ceiling(base_bytes, threads) / (vector_bytes * n as f64);
    let one_thread = bound::read_ceiling(base_bytes, 1);
    let mut sweep = Vec::new();
    for ef in [10, 16, 24, 32, 48, 64, 96, 128, 192, 256] {
        index.set_expansion_search(ef);
        let started = Instant::now();
        let mut found = 0;
        for (q, t) in queries.iter().zip(&truth) {
            let (keys, _) = index.search_keys(q, K, false)?;
            found += keys.iter().filter(|k| t.contains(k)).count();
        }
        let qps = nq as f64 / started.elapsed().as_secs_f64();
        let recall = found as f64 / (nq * K) as f64;
        eprintln!("usearch ef={ef:<4} recall@10={recall:.4} qps={qps:.0}");
        let bound_qps = one_thread / (vector_bytes * ef.max(K) as f64);
        sweep.push(
            serde_json::json!({"ef": ef, "recall": recall, "qps": qps, "bound_qps": bound_qps}),
        );
    }
    let result = serde_json::json!({
        "engine": "glassbox (usearch)",
        "n": n,
        "build_s": build_s,
        "exact_qps": exact_qps,
        "exact_threads": threads,
        "exact_bound_qps": exact_bound_qps,
        "sweep": sweep,
    });
    println!("{result}");
    std::fs::write(
        out.join("index-rust.json"),
        serde_json::to_vec_pretty(&result)?,
    )?;
    Ok(())
}
