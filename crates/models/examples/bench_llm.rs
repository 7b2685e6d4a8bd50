//! Local LLM throughput: prompt (prefill) and decode tokens per second.
//!
//! Usage: `bench_llm [--threads N] [--runs R] [--max-tokens M] [--out DIR]`.
//! Writes `DIR/llm-prompt.json` (the exact messages, for the Python peer) and
//! `DIR/llm-rust.json` (results). Part of `scripts/bench-models.sh`.

use std::path::PathBuf;

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: usize = arg("--threads", "2").parse()?;
    let runs: usize = arg("--runs", "3").parse()?;
    let max_tokens: u32 = arg("--max-tokens", "128").parse()?;
    let out = PathBuf::from(arg("--out", "target-models/bench"));
    std::fs::create_dir_all(&out)?;

    let models = glassbox_models::models_dir();
    let options = LlmOptions {
        threads: Some(threads),
        n_ctx: 2048,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models))
    };
    let llm = LlmHandle::load(options)?;

    // A ~512-token prompt, as in the calibration benchmark of DESIGN.md.
    let paragraph = "Glassbox runs AI request pipelines as declarative topologies, so that every \
        request's path, cost and reasoning can be seen. A router picks a path, an embedding node \
        turns the question into a vector, a vector search node retrieves documents, a template \
        node builds the prompt and a language model writes the answer. ";
    let mut context = String::new();
    let messages = loop {
        context.push_str(paragraph);
        let messages = vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user(format!(
                "{context}\n\nWrite a long, detailed essay about the text above."
            )),
        ];
        let prompt = llm.render_prompt_blocking(messages.clone())?;
        if llm.tokenize_blocking(&prompt, true)?.len() >= 500 {
            break messages;
        }
    };
    std::fs::write(
        out.join("llm-prompt.json"),
        serde_json::to_vec_pretty(&messages)?,
    )?;

    let request = GenerateRequest {
        max_tokens,
        temperature: 0.0,
        ..GenerateRequest::chat(messages)
    };
    llm.generate_blocking(GenerateRequest {
        max_tokens: 8,
        ..request.clone()
    })?; // warm-up
    let (mut prompt_tps, mut decode_tps) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        let c = llm.generate_blocking(request.clone())?;
        prompt_tps.push(f64::from(c.usage.prompt_tokens) / (c.prompt_ms / 1e3));
        decode_tps
            .push(f64::from(c.usage.completion_tokens.saturating_sub(1)) / (c.generate_ms / 1e3));
        last = Some(c);
    }
    let last = last.ok_or("no runs")?;
    let result = serde_json::json!({
        "engine": "glassbox (llama-cpp-2)",
        "threads": threads,
        "prompt_tokens": last.usage.prompt_tokens,
        "completion_tokens": last.usage.completion_tokens,
        "prompt_tps": median(prompt_tps),
        "decode_tps": median(decode_tps),
    });
    println!("{result}");
    std::fs::write(
        out.join("llm-rust.json"),
        serde_json::to_vec_pretty(&result)?,
    )?;
    Ok(())
}
