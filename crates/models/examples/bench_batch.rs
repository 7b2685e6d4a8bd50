//! Continuous batching: aggregate decode throughput of N concurrent requests
//! with one request at a time (`max_num_seqs = 1`) against all of them in one
//! batch (`max_num_seqs = N`). Same model, threads, prompts and token budget.
//!
//! Usage: `bench_batch [--threads T] [--max-tokens M] [--streams 1,4,8]`.
//! Prints a Markdown table (P50/P99 of per-request latency too).

use std::time::Instant;

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs `streams` requests at once; returns (completion tokens per second over
/// the wall time, per-request latencies in seconds, sorted).
fn run(llm: &LlmHandle, streams: usize, max_tokens: u32) -> (f64, Vec<f64>) {
    let started = Instant::now();
    let workers: Vec<_> = (0..streams)
        .map(|i| {
            let llm = llm.clone();
            std::thread::spawn(move || {
                let request = GenerateRequest {
                    max_tokens,
                    temperature: 0.0,
                    ..GenerateRequest::chat(vec![
                        ChatMessage::system("You are a helpful assistant."),
                        ChatMessage::user(format!(
                            "Write a long story about a kettle called number {i}."
                        )),
                    ])
                };
                let t = Instant::now();
                let c = llm.generate_blocking(request).expect("generation");
                (c.usage.completion_tokens, t.elapsed().as_secs_f64())
            })
        })
        .collect();
    let mut tokens = 0u64;
    let mut latencies = Vec::new();
    for w in workers {
        let (n, secs) = w.join().expect("worker");
        tokens += u64::from(n);
        latencies.push(secs);
    }
    latencies.sort_by(f64::total_cmp);
    (tokens as f64 / started.elapsed().as_secs_f64(), latencies)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: usize = arg("--threads", "2").parse()?;
    let max_tokens: u32 = arg("--max-tokens", "96").parse()?;
    let streams: Vec<usize> = arg("--streams", "1,4,8")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let path = glassbox_models::smollm2_path(&glassbox_models::models_dir());
    println!(
        "| streams | one at a time tok/s | batched tok/s | ratio | latency P50 / P99, one at a time | batched |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &n in &streams {
        let load = |seqs: usize| {
            LlmHandle::load(LlmOptions {
                threads: Some(threads),
                n_ctx: 1024,
                max_num_seqs: seqs as u32,
                queue_capacity: 64,
                ..LlmOptions::new(&path)
            })
        };
        let serial = load(1)?;
        let _ = run(&serial, 1, 8); // warm-up
        let (a, la) = run(&serial, n, max_tokens);
        drop(serial);
        let batched = load(n)?;
        let _ = run(&batched, 1, 8);
        let (b, lb) = run(&batched, n, max_tokens);
        println!(
            "| {n} | {a:.1} | {b:.1} | {:.2}x | {:.2} / {:.2} s | {:.2} / {:.2} s |",
            b / a,
            percentile(&la, 0.5),
            percentile(&la, 0.99),
            percentile(&lb, 0.5),
            percentile(&lb, 0.99),
        );
    }
    Ok(())
}
