//! Chunked prefill: RAG-shaped requests (three knowledge-base notes and a
//! question, ~550 prompt tokens, short answers) from C closed-loop clients,
//! for several `prefill_chunk` settings. A long prompt entering the batch
//! holds back the answers already streaming; the smaller the chunk, the
//! shorter that stall and the more decode steps the new prompt waits
//! through. Per setting: req/s, TTFT P50/P99, the time between two tokens
//! of a streaming answer (every gap, P50/P99/max) and E2E P50/P99.
//! Prints a Markdown table.
//!
//! Usage (release build):
//! `bench_prefill [--clients 4] [--requests 16] [--chunks auto,512,256,128,64,32] [--threads 2] [--kb examples/rag-chat/kb]`
//! (`--requests` per setting; each setting gets a fresh model, prefix cache
//! off so every prompt is evaluated in full).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let at = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
    values[at]
}

/// The `i`th request: three notes (the first 600 characters of three
/// knowledge-base documents, a different three each time) and a question.
fn request(docs: &[String], i: usize) -> GenerateRequest {
    let n = docs.len();
    let mut user = String::from("Answer the question using only these notes.\n");
    for d in [i * 7 + 1, i * 11 + 4, i * 5 + 9] {
        let doc = &docs[d % n];
        let cut = doc
            .char_indices()
            .map(|(at, _)| at)
            .find(|&at| at >= 600)
            .unwrap_or(doc.len());
        user.push_str("\nNote: ");
        user.push_str(&doc[..cut]);
        user.push('\n');
    }
    user.push_str("\nQuestion: What do these notes say? Answer in two sentences.");
    GenerateRequest {
        max_tokens: 80,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system(
                "You are a helpful assistant for Brightwater's Lumen Kettle Pro. \
                 Answer in one or two short sentences.",
            ),
            ChatMessage::user(user),
        ])
    }
}

#[derive(Default)]
struct Samples {
    ttft: Vec<f64>,
    gaps: Vec<f64>,
    e2e: Vec<f64>,
    tokens: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clients: usize = arg("--clients", "4").parse()?;
    let requests: usize = arg("--requests", "16").parse()?;
    let threads: usize = arg("--threads", "2").parse()?;
    let kb = arg("--kb", "examples/rag-chat/kb");
    // `auto`: the engine's default, sized from its measured prefill rate.
    let chunks: Vec<Option<u32>> = arg("--chunks", "auto,512,256,128,64,32")
        .split(',')
        .map(|c| {
            if c == "auto" {
                Ok(None)
            } else {
                c.parse().map(Some)
            }
        })
        .collect::<Result<_, _>>()?;
    let mut paths: Vec<_> = std::fs::read_dir(&kb)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    paths.sort();
    let docs: Arc<Vec<String>> = Arc::new(
        paths
            .iter()
            .map(std::fs::read_to_string)
            .collect::<Result<_, _>>()?,
    );
    println!(
        "| prefill_chunk | clients | req/s | TTFT P50 / P99 ms | inter-token P50 / P99 / max ms | E2E P50 / P99 ms | prompt tokens | tokens/request |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &chunk in &chunks {
        let label = chunk.map_or_else(|| "auto".to_string(), |c| c.to_string());
        let options = LlmOptions {
            threads: Some(threads),
            n_ctx: 2048,
            max_num_seqs: clients.max(1) as u32,
            prefix_cache: false,
            prefill_chunk: chunk,
            ..LlmOptions::new(glassbox_models::smollm2_path(&glassbox_models::models_dir()))
        };
        let h = LlmHandle::load(options)?;
        h.generate_blocking(request(&docs, 1000))?; // warm-up
        let next = Arc::new(AtomicUsize::new(0));
        let samples = Arc::new(Mutex::new(Samples::default()));
        let prompt_tokens = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let (h, docs, next) = (h.clone(), docs.clone(), next.clone());
                let (samples, prompt_tokens) = (samples.clone(), prompt_tokens.clone());
                std::thread::spawn(move || -> Result<(), String> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= requests {
                            return Ok(());
                        }
                        let sent = Instant::now();
                        let mut stream = h.stream(request(&docs, i)).map_err(|e| e.to_string())?;
                        let mut last: Option<Instant> = None;
                        let (mut ttft, mut gaps) = (None, Vec::new());
                        while stream.next_blocking().is_some() {
                            let now = Instant::now();
                            match last {
                                None => ttft = Some((now - sent).as_secs_f64() * 1e3),
                                Some(t) => gaps.push((now - t).as_secs_f64() * 1e3),
                            }
                            last = Some(now);
                        }
                        let c = stream.finish_blocking().map_err(|e| e.to_string())?;
                        prompt_tokens.fetch_add(c.usage.prompt_tokens as usize, Ordering::Relaxed);
                        let mut s = samples.lock().map_err(|e| e.to_string())?;
                        s.ttft.extend(ttft);
                        s.gaps.extend(gaps);
                        s.e2e.push(sent.elapsed().as_secs_f64() * 1e3);
                        s.tokens += u64::from(c.usage.completion_tokens);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| "client thread panicked")??;
        }
        let wall = started.elapsed().as_secs_f64();
        let mut s = samples.lock().map_err(|e| e.to_string())?;
        let max_gap = s.gaps.iter().copied().fold(0.0, f64::max);
        println!(
            "| {label} | {clients} | {:.3} | {:.0} / {:.0} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} | {} | {:.1} |",
            requests as f64 / wall,
            percentile(&mut s.ttft, 0.5),
            percentile(&mut s.ttft, 0.99),
            percentile(&mut s.gaps, 0.5),
            percentile(&mut s.gaps, 0.99),
            max_gap,
            percentile(&mut s.e2e, 0.5),
            percentile(&mut s.e2e, 0.99),
            prompt_tokens.load(Ordering::Relaxed) / requests.max(1),
            s.tokens as f64 / requests.max(1) as f64,
        );
    }
    Ok(())
}
