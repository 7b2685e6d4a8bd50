//! Local LLM throughput through the library: prompt (prefill) and decode
//! tokens per second, compared like with like against llama-cpp-python.
//!
//! Usage: `bench_llm [--threads N] [--runs R] [--max-tokens M] [--flash-attn on|off]
//! [--reuse on|off] [--out DIR]` (`--flash-attn`: `LlmOptions::flash_attention`,
//! default on as in the library; `--reuse off` skips the reuse-on figures).
//! Part of `scripts/bench-models.sh`. Writes `DIR/llm-prompts.json` (every
//! run's messages, for the Python peer) and `DIR/llm-rust.json`.
//!
//! The engine-against-engine figures run with every kind of reuse off: no
//! prefix cache (nor its host-memory tier) and no prompt lookup; and each
//! run's prompt differs from the others from its first words on, so no cache
//! could serve it even if one were on (issue #41: with the cache on and one
//! prompt, the "prompt" figure measured a cache hit). The same is measured
//! again with reuse on and reported apart, labelled.
//!
//! Each figure goes out with its physical ceiling (`cpu::bound`): the CPU's
//! peak arithmetic over the least work a prompt token needs, and the
//! measured read bandwidth over the least bytes a decoded token reads. The
//! report refuses a verdict above it.

use std::path::PathBuf;

use glassbox_models::cpu::bound::{self, Clock};
use glassbox_models::{
    ChatMessage, Completion, CpuInfo, GenerateRequest, LlmHandle, LlmOptions, PromptLookup,
};

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

fn prompt_tps(c: &Completion) -> f64 {
    f64::from(c.usage.prompt_tokens) / (c.prompt_ms / 1e3)
}

/// Decode steps after the first token, per second of generation.
fn decode_tps(c: &Completion) -> f64 {
    f64::from(c.usage.completion_tokens.saturating_sub(1)) / (c.generate_ms / 1e3)
}

/// CPU time every thread of this process has run so far, in seconds
/// (Linux: `/proc/self/task/*/schedstat`, nanoseconds on a CPU; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum::<f64>()
        / 1e9
}

/// Chats of at least ~512 prompt tokens (as in DESIGN.md's calibration
/// benchmark), one per run, each distinct from its first user words.
fn prompts(
    llm: &LlmHandle,
    count: usize,
) -> Result<Vec<Vec<ChatMessage>>, Box<dyn std::error::Error>> {
    let paragraph = "Glassbox runs AI request pipelines as declarative topologies, so that every \
        request's path, cost and reasoning can be seen. A router picks a path, an embedding node \
        turns the question into a vector, a vector search node retrieves documents, a template \
        node builds the prompt and a language model writes the answer. ";
    let chat = |run: usize, context: &str| {
        vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user(format!(
                "Run {run}. {context}\n\nWrite a long, detailed essay about the text above."
            )),
        ]
    };
    let mut context = String::new();
    loop {
        context.push_str(paragraph);
        let prompt = llm.render_prompt_blocking(chat(0, &context))?;
        if llm.tokenize_blocking(&prompt, true)?.len() >= 500 {
            break;
        }
    }
    Ok((0..count).map(|run| chat(run, &context)).collect())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: usize = arg("--threads", "2").parse()?;
    let runs: usize = arg("--runs", "3").parse::<usize>()?.max(1);
    let max_tokens: u32 = arg("--max-tokens", "128").parse()?;
    let flash_attention = arg("--flash-attn", "on") == "on";
    let with_reuse = arg("--reuse", "on") == "on";
    let out = PathBuf::from(arg("--out", "target-models/bench"));
    std::fs::create_dir_all(&out)?;

    let models = glassbox_models::models_dir();
    let base = LlmOptions {
        threads: Some(threads),
        n_ctx: 2048,
        flash_attention,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models))
    };
    // Like with like: no reuse of any kind.
    let cold = LlmHandle::load(LlmOptions {
        prefix_cache: false,
        host_cache_bytes: 0,
        prompt_lookup: None,
        ..base.clone()
    })?;
    let chats = prompts(&cold, runs + 1)?;
    std::fs::write(
        out.join("llm-prompts.json"),
        serde_json::to_vec_pretty(&chats)?,
    )?;
    let request = |messages: &Vec<ChatMessage>| GenerateRequest {
        max_tokens,
        temperature: 0.0,
        ..GenerateRequest::chat(messages.clone())
    };
    cold.generate_blocking(GenerateRequest {
        max_tokens: 8,
        ..request(&chats[0])
    })?; // warm-up, on a prompt no measured run uses
    // Each measured chat runs twice: for one token (the prompt alone), then
    // in full; the CPU time of the second less the first is the decode
    // steps' work, which a busy machine's other processes barely change
    // (unlike the wall-clock rate).
    let mut measured: Vec<Completion> = Vec::new();
    let mut decode_cpu_ms = Vec::new();
    for m in &chats[1..] {
        let c0 = cpu_seconds();
        cold.generate_blocking(GenerateRequest {
            max_tokens: 1,
            ..request(m)
        })?;
        let c1 = cpu_seconds();
        let full = cold.generate_blocking(request(m))?;
        let c2 = cpu_seconds();
        let steps = full.usage.completion_tokens.saturating_sub(1).max(1);
        decode_cpu_ms.push(((c2 - c1) - (c1 - c0)) * 1e3 / f64::from(steps));
        measured.push(full);
    }
    let dims = cold.info().dims;
    drop(cold);

    // Reuse on, reported apart: the prefix cache serves a repeated prompt,
    // and prompt lookup drafts tokens (the `llm_inference` node's defaults).
    let lookup = PromptLookup::default();
    let mut reused: Vec<Completion> = Vec::new();
    if with_reuse {
        let warm = LlmHandle::load(LlmOptions {
            prompt_lookup: Some(lookup),
            ..base
        })?;
        warm.generate_blocking(request(&chats[1]))?; // fills the cache
        reused = (0..runs)
            .map(|_| warm.generate_blocking(request(&chats[1])))
            .collect::<Result<_, _>>()?;
    }

    // The ceilings, for this CPU, these threads and this model.
    let cpu = CpuInfo::detect();
    let clock = Clock::detect();
    let peak = bound::peak_ops_per_s(&cpu, threads, &clock);
    let last = measured.last().ok_or("no runs")?;
    // Mean context over the generation.
    let context = last.usage.prompt_tokens as usize + last.usage.completion_tokens as usize / 2;
    let bytes_per_token = dims.min_decode_bytes_per_token(context);
    let bandwidth = bound::read_bandwidth(bytes_per_token as usize, threads);
    let prompt_bound = peak / dims.min_prompt_ops_per_token();
    let decode_bound = bandwidth * bound::READ_HEADROOM / bytes_per_token;
    let kernels =
        glassbox_models::load_kernels().map_or_else(|e| e.to_string(), |k| k.variant.clone());

    let sum = |f: fn(&Completion) -> u32| reused.iter().map(f).sum::<u32>();
    let reuse = (!reused.is_empty()).then(|| {
        serde_json::json!({
            "prompt_tps": median(reused.iter().map(prompt_tps).collect()),
            "prompt_cached_tokens": reused.iter().map(|c| c.prompt_cached_tokens).min(),
            "decode_tps": median(reused.iter().map(decode_tps).collect()),
            "draft_tokens": sum(|c| c.draft_tokens),
            "accepted_tokens": sum(|c| c.accepted_tokens),
            // Each pass over the weights may yield the token and every draft.
            "decode_bound_tps": decode_bound * (1 + lookup.num_tokens) as f64,
        })
    });
    let result = serde_json::json!({
        "engine": "glassbox (llama-cpp-2)",
        "threads": threads,
        "flash_attention": flash_attention,
        "cpu": {
            "model": cpu.model,
            "cores": cpu.cores,
            "kernels": kernels,
            "clock_ghz": clock.ghz,
            "clock_source": clock.source,
            "peak_ops_per_s": peak,
            "read_bytes_per_s": bandwidth,
            "read_headroom": bound::READ_HEADROOM,
            "read_working_set_bytes": bytes_per_token,
        },
        "model": dims,
        "prompt_tokens": last.usage.prompt_tokens,
        "completion_tokens": last.usage.completion_tokens,
        "prompt_tps": median(measured.iter().map(prompt_tps).collect()),
        "decode_tps": median(measured.iter().map(decode_tps).collect()),
        "decode_runs": measured.iter().map(decode_tps).collect::<Vec<_>>(),
        // CPU time per decode step, every thread of the engine together.
        "decode_cpu_ms": median(decode_cpu_ms),
        "prompt_bound_tps": prompt_bound,
        "decode_bound_tps": decode_bound,
        "reuse": reuse,
    });
    println!("{result}");
    std::fs::write(
        out.join("llm-rust.json"),
        serde_json::to_vec_pretty(&result)?,
    )?;
    Ok(())
}
