//! Prefix cache on vs off: TTFT of requests that share a long system prompt
//! (a RAG template head, a policy) and differ in the question, one after
//! another and 4 at a time. Prints a Markdown table.
//!
//! Usage: `bench_prefix [--requests N] [--threads T]` (release build).

use std::time::Instant;

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests: usize = arg("--requests", "16").parse()?;
    let threads: usize = arg("--threads", "2").parse()?;
    let policy = "You are the support assistant of Brightwater. Rules: answer in one or two \
                  sentences; quote prices exactly; never promise refunds outside the 30-day \
                  window; name the product model when you answer; say when you do not know. "
        .repeat(8);
    let questions = [
        "How much does the Lumen Kettle Pro cost?",
        "Does the kettle have a warranty?",
        "How do I descale it?",
        "Can I return it after 20 days?",
        "What does error E3 mean?",
        "Does it work with Alexa?",
    ];
    let request = |i: usize| GenerateRequest {
        max_tokens: 16,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system(policy.clone()),
            ChatMessage::user(questions[i % questions.len()]),
        ])
    };
    println!(
        "| prefix cache | concurrent | prompt tokens | TTFT P50 ms | TTFT P99 ms | prompt tokens reused | wall s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for concurrent in [1usize, 4] {
        for cache in [false, true] {
            let options = LlmOptions {
                threads: Some(threads),
                n_ctx: 2048,
                max_num_seqs: 4,
                prefix_cache: cache,
                ..LlmOptions::new(glassbox_models::smollm2_path(&glassbox_models::models_dir()))
            };
            let h = LlmHandle::load(options)?;
            h.generate_blocking(request(0))?; // warm-up (and, with the cache, a primed slot)
            let started = Instant::now();
            let mut results = Vec::new();
            for chunk in (0..requests).collect::<Vec<_>>().chunks(concurrent) {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|&i| {
                        let (h, r) = (h.clone(), request(i + 1));
                        std::thread::spawn(move || h.generate_blocking(r))
                    })
                    .collect();
                for t in handles {
                    results.push(t.join().expect("request thread")?);
                }
            }
            let wall = started.elapsed().as_secs_f64();
            let mut ttft: Vec<f64> = results.iter().filter_map(|c| c.timing.ttft_ms).collect();
            ttft.sort_by(f64::total_cmp);
            let prompt: u32 = results.iter().map(|c| c.usage.prompt_tokens).sum();
            let reused: u32 = results.iter().map(|c| c.prompt_cached_tokens).sum();
            println!(
                "| {} | {concurrent} | {} | {:.0} | {:.0} | {:.0}% | {wall:.1} |",
                if cache { "on" } else { "off" },
                prompt / results.len() as u32,
                percentile(&ttft, 0.5),
                percentile(&ttft, 0.99),
                100.0 * f64::from(reused) / f64::from(prompt.max(1)),
            );
        }
    }
    Ok(())
}
