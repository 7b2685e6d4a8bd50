//! Embedding throughput: sentences per second at a fixed batch size.
//!
//! Usage: `bench_embed --sentences FILE [--batch B] [--threads T] [--out DIR]`. Reads one
//! sentence per line; writes `DIR/embed-rust.json` (results) and
//! `DIR/embed-rust.f32` (vectors of the first 64 sentences, little-endian, to
//! compare with sentence-transformers). Part of `scripts/bench-models.sh`.
//!
//! The figure goes out with its physical ceiling: the CPU's peak arithmetic
//! (`cpu::bound`) over the least work a sentence needs, two operations per
//! encoder weight per token of the sentence (padding and attention only add).

use std::path::PathBuf;
use std::time::Instant;

use glassbox_models::cpu::bound::{self, Clock};
use glassbox_models::{CpuInfo, Embedder, EmbedderOptions};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sentences_path = PathBuf::from(arg("--sentences", "target-models/bench/sentences.txt"));
    let batch: usize = arg("--batch", "32").parse()?;
    let runs: usize = arg("--runs", "3").parse()?;
    let threads: usize = arg("--threads", "0").parse()?;
    let out = PathBuf::from(arg("--out", "target-models/bench"));
    let text = std::fs::read_to_string(&sentences_path)?;
    let sentences: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();

    let dir = glassbox_models::minilm_dir(&glassbox_models::models_dir());
    let embedder = Embedder::load(
        &dir,
        EmbedderOptions {
            batch_size: batch,
            threads,
            ..Default::default()
        },
    )?;
    let first = embedder.embed(&sentences[..64.min(sentences.len())])?; // warm-up + reference
    let bytes: Vec<u8> = first
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(out.join("embed-rust.f32"), bytes)?;

    let mut rates = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let vectors = embedder.embed(&sentences)?;
        let secs = started.elapsed().as_secs_f64();
        assert_eq!(vectors.len(), sentences.len());
        rates.push(sentences.len() as f64 / secs);
    }
    rates.sort_by(f64::total_cmp);

    // Encoder weights per layer: Q, K, V and output projections, then the
    // feed-forward pair (BERT's `config.json`).
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
    let size = |key: &str| {
        config[key]
            .as_f64()
            .ok_or(format!("`{key}` in config.json"))
    };
    let (hidden, ffn) = (size("hidden_size")?, size("intermediate_size")?);
    let weights = size("num_hidden_layers")? * (4.0 * hidden * hidden + 2.0 * hidden * ffn);
    let mut tokens = 0usize;
    for s in &sentences {
        tokens += embedder.tokenize(s)?.len();
    }
    let ops_per_sentence = 2.0 * weights * tokens as f64 / sentences.len() as f64;
    let cpu = CpuInfo::detect();
    let cores = if threads == 0 { cpu.cores } else { threads };
    let bound_per_sec = bound::peak_ops_per_s(&cpu, cores, &Clock::detect()) / ops_per_sentence;
    let result = serde_json::json!({
        "engine": "glassbox (onnx runtime 1.31)",
        "sentences": sentences.len(),
        "batch": batch,
        "threads": threads,
        "per_sec": rates[rates.len() / 2],
        "bound_per_sec": bound_per_sec,
    });
    println!("{result}");
    std::fs::write(
        out.join("embed-rust.json"),
        serde_json::to_vec_pretty(&result)?,
    )?;
    Ok(())
}
