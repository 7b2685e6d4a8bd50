//! Dynamic batching of the embedder under concurrent callers: N threads
//! each embed one sentence per call, closed loop, as `embedding` nodes of
//! concurrent requests do. Compares no batching (each call its own forward
//! pass) with dynamic batching, with and without a wait window.
//!
//! Usage: `bench_embed_callers --sentences FILE [--calls N] [--callers 1,4,16]
//! [--threads T]`. Prints a table; part of `scripts/bench-models.sh`
//! (`BENCH_ONLY=callers`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use glassbox_models::{Embedder, EmbedderOptions};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let at = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at]
}

/// `calls` single-sentence calls from `callers` threads: (calls/s, P50 ms, P99 ms, mean batch).
fn run(
    embedder: &Embedder,
    sentences: &[&str],
    callers: usize,
    calls: usize,
) -> (f64, f64, f64, f64) {
    let next = AtomicUsize::new(0);
    let before = embedder.batch_stats();
    let started = Instant::now();
    let mut latencies: Vec<f64> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..callers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= calls {
                            return mine;
                        }
                        let t = Instant::now();
                        let v = embedder
                            .embed(&[sentences[i % sentences.len()]])
                            .expect("embedding");
                        assert_eq!(v.len(), 1);
                        mine.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a caller thread panicked"))
            .collect()
    });
    let secs = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let after = embedder.batch_stats();
    let passes = (after.passes - before.passes).max(1);
    // No pass through the queue: every call ran its own (batch of 1).
    let mean_batch = if after.passes == before.passes {
        1.0
    } else {
        (after.rows - before.rows) as f64 / passes as f64
    };
    (
        calls as f64 / secs,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        mean_batch,
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sentences_path = PathBuf::from(arg("--sentences", "target-models/bench/sentences.txt"));
    let calls: usize = arg("--calls", "480").parse()?;
    let threads: usize = arg("--threads", "0").parse()?;
    let callers: Vec<usize> = arg("--callers", "1,4,16")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let text = std::fs::read_to_string(&sentences_path)?;
    let sentences: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let dir = glassbox_models::minilm_dir(&glassbox_models::models_dir());
    let load = |batch_size: usize, window_ms: u64| {
        Embedder::load(
            &dir,
            EmbedderOptions {
                batch_size,
                threads,
                batch_window: Duration::from_millis(window_ms),
                ..Default::default()
            },
        )
    };
    // batch_size 1: every call runs its own pass (no dynamic batching).
    let modes = [
        ("off (one pass per call)", load(1, 0)?),
        ("on, no window", load(32, 0)?),
        ("on, 2 ms window", load(32, 2)?),
    ];
    for (_, e) in &modes {
        e.embed(&sentences[..8.min(sentences.len())])?; // warm-up
    }
    println!("| callers | batching | calls/s | P50 ms | P99 ms | mean batch | vs off |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &n in &callers {
        let mut off_rate = 0.0;
        for (name, embedder) in &modes {
            let (rate, p50, p99, batch) = run(embedder, &sentences, n, calls);
            if off_rate == 0.0 {
                off_rate = rate;
            }
            println!(
                "| {n} | {name} | {rate:.0} | {p50:.1} | {p99:.1} | {batch:.1} | {:.2}x |",
                rate / off_rate
            );
        }
    }
    Ok(())
}
