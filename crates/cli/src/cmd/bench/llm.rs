//! `glassbox bench llm`: the calibration benchmark of one language model,
//! and the open-loop check of the serving simulator.
//!
//! Two fixed runs, each repeated `--runs` times alone on the model (the
//! median kept): seed 001's 200-token generation from a short prompt and
//! seed 000's 512 prompt tokens in, 256 out. The local engine
//! (`--local`, llama.cpp) reports its prefill time and TTFT/TPOT itself;
//! an OpenAI-compatible `--endpoint` is timed from the stream (first content
//! chunk, then the gaps). The results are written as a measurements CSV
//! (`glassbox_planner::calibrate::bench_csv`) that `glassbox plan calibrate`
//! fits, so the planner's factors follow the machine that was measured.
//!
//! With `--rates`, the local engine is then loaded open loop (Poisson
//! arrivals, each request due on its own clock) at each rate, and the same
//! arrival times and token counts are replayed in the simulator
//! (`glassbox_planner::sim`) with the factors just fitted: measured against
//! simulated P50/P99 TTFT and E2E is the simulator's validation.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};
use glassbox_planner::calibrate::{self, BenchRun, BenchTarget};
use serde_json::{Value, json};

use super::sim_check::{Check, N_BATCH, N_CTX, median, print_validation, validate};
use crate::cmd::common::OutputFormat;
use crate::exit::{self, Coded};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes a measurements CSV for `glassbox plan calibrate FILE`. \
                  Method: docs/planner.md (Calibration from real runs, Validation of the simulator)."
)]
pub struct LlmArgs {
    /// Benchmark the local engine (llama.cpp, the model in --model-file).
    #[arg(
        long,
        required_unless_present = "endpoint",
        conflicts_with = "endpoint"
    )]
    pub local: bool,
    /// Benchmark an OpenAI-compatible server at this base URL (`/v1/chat/completions`).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Local: the GGUF file [default: the fetched SmolLM2-135M].
    #[arg(long)]
    pub model_file: Option<PathBuf>,
    /// Endpoint: the `model` sent with each request.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// Endpoint: API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The model's id in the planner catalogue (`glassbox plan list-models`).
    #[arg(long, default_value = "smollm2-135m")]
    pub planner_model: String,
    /// The device's id in the planner catalogue (or in --hardware-file).
    #[arg(long, default_value = "cpu-generic")]
    pub gpu: String,
    /// Weight format, for the planner.
    #[arg(long, default_value = "q4_1")]
    pub quant: String,
    /// Engine, for the planner [default: llama.cpp with --local, else vllm].
    #[arg(long)]
    pub engine: Option<String>,
    /// Repetitions of each run (the median is kept).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Where to write the measurements CSV.
    #[arg(long, short, default_value = "glassbox-bench-llm.csv")]
    pub output: PathBuf,
    /// Local: CPU threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Local: after the runs, load the engine open loop at these rates
    /// (requests/s, comma-separated) and compare measured with simulated P99.
    #[arg(long, value_delimiter = ',', value_name = "REQ_PER_S")]
    pub rates: Vec<f64>,
    /// Local: like `--rates`, as fractions of the engine's capacity (what
    /// the step profile says it sustains at --max-num-seqs), e.g. `0.3,0.6,0.85`.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "FRACTION",
        conflicts_with = "rates"
    )]
    pub loads: Vec<f64>,
    /// Open loop: requests per rate.
    #[arg(long, default_value_t = 40)]
    pub requests: usize,
    /// Open loop: prompt tokens per request.
    #[arg(long, default_value_t = 256)]
    pub prompt_tokens: u64,
    /// Open loop: the most tokens generated per request.
    #[arg(long, default_value_t = 64)]
    pub gen_tokens: u32,
    /// Open loop: sequences the local engine runs at once.
    #[arg(long, default_value_t = 4)]
    pub max_num_seqs: u32,
    /// Seed of the open-loop arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

/// The two runs: (name, prompt tokens (approximate), tokens out).
const SHAPES: [(&str, u64, u32); 2] = [("seed001-200", 32, 200), ("seed000-512x256", 512, 256)];

fn invalid(message: String) -> anyhow::Error {
    Coded::invalid(message)
}

fn filler(words: usize) -> String {
    const TEXT: &str = "A topology routes each request through nodes: a router, an embedding, a \
        vector search, a template and a language model, and every step leaves a trace with its \
        cost and latency. ";
    let mut s = String::new();
    while s.split_whitespace().count() < words {
        s.push_str(TEXT);
    }
    s
}

fn messages(body: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a helpful assistant."),
        ChatMessage::user(format!(
            "{body}\n\nWrite a long, detailed essay about the text above."
        )),
    ]
}

/// Messages whose rendered prompt has about `tokens` tokens (local engine).
fn local_prompt(llm: &LlmHandle, tokens: u64) -> anyhow::Result<Vec<ChatMessage>> {
    let mut words = 4usize;
    loop {
        let m = messages(&filler(words));
        let prompt = llm.render_prompt_blocking(m.clone())?;
        let n = llm.tokenize_blocking(&prompt, true)?.len() as u64;
        if n >= tokens || words > 4096 {
            return Ok(m);
        }
        words = (words as f64 * (tokens as f64 / n.max(1) as f64).max(1.1)).ceil() as usize;
    }
}

fn median_run(name: &str, samples: &[BenchRun]) -> Option<BenchRun> {
    let pick =
        |f: &dyn Fn(&BenchRun) -> Option<f64>| median(samples.iter().filter_map(f).collect());
    Some(BenchRun {
        name: name.to_string(),
        prompt_tokens: samples.first()?.prompt_tokens,
        gen_tokens: pick(&|r| Some(r.gen_tokens as f64))? as u64,
        ttft_ms: pick(&|r| Some(r.ttft_ms))?,
        prefill_ms: pick(&|r| r.prefill_ms),
        tpot_ms: pick(&|r| r.tpot_ms),
    })
}

pub fn run(a: LlmArgs) -> anyhow::Result<ExitCode> {
    if a.runs == 0 || a.requests < 10 {
        return Err(invalid(
            "`--runs` must be at least 1 and `--requests` at least 10".into(),
        ));
    }
    if let Some(r) = a.rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(invalid(format!("`--rates` must be above 0, got {r}")));
    }
    if let Some(r) = a.loads.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(invalid(format!(
            "`--loads` are fractions of capacity above 0 (e.g. 0.5), got {r}"
        )));
    }
    if (!a.rates.is_empty() || !a.loads.is_empty()) && !a.local {
        return Err(invalid(
            "`--rates`/`--loads` check the simulator against the local engine: use them with `--local`"
                .into(),
        ));
    }
    let engine = a
        .engine
        .clone()
        .unwrap_or_else(|| if a.local { "llama.cpp" } else { "vllm" }.into());
    let date = crate::cmd::calibrate::today();
    let (runs, version, llm) = if a.local {
        let path = a
            .model_file
            .clone()
            .unwrap_or_else(|| glassbox_models::smollm2_path(&glassbox_models::models_dir()));
        let llm = LlmHandle::load(LlmOptions {
            threads: a.threads,
            n_ctx: N_CTX,
            n_batch: N_BATCH,
            max_num_seqs: a.max_num_seqs.max(1),
            queue_capacity: a.requests.max(64),
            prefix_cache: false,
            ..LlmOptions::new(path)
        })
        .map_err(|e| invalid(format!("loading the local model: {e}")))?;
        let runs = local_runs(&llm, a.runs)?;
        (runs, llm.version().to_string(), Some(llm))
    } else {
        let url = a.endpoint.clone().unwrap_or_default();
        (
            endpoint_runs(&a, &url)?,
            format!("{} at {url}", a.model),
            None,
        )
    };
    let target = BenchTarget {
        gpu: a.gpu.clone(),
        engine,
        model: a.planner_model.clone(),
        quant: a.quant.clone(),
        kv_dtype: "f16".into(),
        source: format!(
            "glassbox bench llm {} on {date}; model {version}",
            if a.local { "--local" } else { "--endpoint" }
        ),
    };
    let csv = calibrate::bench_csv(&target, &runs);
    std::fs::write(&a.output, &csv)
        .map_err(|e| invalid(format!("cannot write `{}`: {e}", a.output.display())))?;
    let validation = match (&llm, a.rates.is_empty() && a.loads.is_empty()) {
        (Some(llm), false) => {
            let check = Check {
                prompt_tokens: a.prompt_tokens,
                gen_tokens: a.gen_tokens,
                max_num_seqs: a.max_num_seqs,
                rates: &a.rates,
                loads: &a.loads,
                requests: a.requests,
                seed: a.seed,
            };
            let msgs = local_prompt(llm, a.prompt_tokens)?;
            Some(validate(&check, llm, &msgs, &runs)?)
        }
        _ => None,
    };
    match a.format {
        OutputFormat::Json => {
            let doc = json!({
                "target": target, "runs": runs, "output": a.output,
                "validation": validation,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputFormat::Table => {
            println!(
                "{} ({version}) on {}, engine {}",
                target.model, target.gpu, target.engine
            );
            println!("run                 prompt  out  TTFT ms  prefill ms  TPOT ms");
            for r in &runs {
                println!(
                    "{:<18} {:>7} {:>4} {:>8.1} {:>11} {:>8}",
                    r.name,
                    r.prompt_tokens,
                    r.gen_tokens,
                    r.ttft_ms,
                    r.prefill_ms.map_or("-".into(), |v| format!("{v:.1}")),
                    r.tpot_ms.map_or("-".into(), |v| format!("{v:.2}")),
                );
            }
            println!(
                "\nmeasurements: {} (fit with `glassbox plan calibrate {} -o factors.toml`)",
                a.output.display(),
                a.output.display()
            );
            if let Some(v) = &validation {
                print_validation(v);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn local_runs(llm: &LlmHandle, repeats: usize) -> anyhow::Result<Vec<BenchRun>> {
    let mut out = Vec::new();
    for (name, prompt_tokens, max_tokens) in SHAPES {
        let msgs = local_prompt(llm, prompt_tokens)?;
        let mut samples = Vec::new();
        for _ in 0..repeats {
            let c = llm.generate_blocking(GenerateRequest {
                max_tokens,
                temperature: 0.0,
                ..GenerateRequest::chat(msgs.clone())
            })?;
            samples.push(BenchRun {
                name: name.into(),
                prompt_tokens: u64::from(c.usage.prompt_tokens),
                gen_tokens: u64::from(c.usage.completion_tokens),
                ttft_ms: c.timing.ttft_ms.unwrap_or(c.prompt_ms),
                prefill_ms: Some(c.prompt_ms),
                tpot_ms: c.timing.tpot_ms,
            });
        }
        out.extend(median_run(name, &samples));
    }
    Ok(out)
}

/// One streamed chat completion against an OpenAI-compatible server.
fn endpoint_once(
    agent: &ureq::Agent,
    a: &LlmArgs,
    url: &str,
    msgs: &[ChatMessage],
    max_tokens: u32,
) -> anyhow::Result<BenchRun> {
    let body = json!({
        "model": a.model,
        "messages": msgs,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let mut req = agent
        .post(format!("{}/v1/chat/completions", url.trim_end_matches('/')))
        .header("content-type", "application/json");
    if let Some(k) = &a.api_key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let start = Instant::now();
    let mut response = req.send(body.to_string().as_bytes()).map_err(|e| {
        anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message: format!("cannot reach `{url}`: {e} (is the server running?)"),
        })
    })?;
    let status = response.status().as_u16();
    if status >= 400 {
        let text = response.body_mut().read_to_string().unwrap_or_default();
        return Err(invalid(format!("`{url}` answered {status}: {text}")));
    }
    let (mut first, mut last, mut chunks) = (None::<Instant>, None::<Instant>, 0u64);
    let mut usage: Option<(u64, u64)> = None;
    for line in BufReader::new(response.body_mut().as_reader()).lines() {
        let line = line?;
        let Some(data) = line.strip_prefix("data:").map(str::trim) else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let text = v["choices"][0]["delta"]["content"].as_str().unwrap_or("");
        if !text.is_empty() {
            let now = Instant::now();
            first.get_or_insert(now);
            last = Some(now);
            chunks += 1;
        }
        if let (Some(p), Some(c)) = (
            v["usage"]["prompt_tokens"].as_u64(),
            v["usage"]["completion_tokens"].as_u64(),
        ) {
            usage = Some((p, c));
        }
    }
    let Some(first) = first else {
        return Err(invalid(format!("`{url}` streamed no tokens")));
    };
    let (prompt, out) = usage.unwrap_or((0, chunks));
    let span_ms = last.map_or(0.0, |l| (l - first).as_secs_f64() * 1e3);
    Ok(BenchRun {
        name: String::new(),
        prompt_tokens: prompt,
        gen_tokens: out,
        ttft_ms: (first - start).as_secs_f64() * 1e3,
        prefill_ms: None,
        tpot_ms: (out > 1).then(|| span_ms / (out - 1) as f64),
    })
}

fn endpoint_runs(a: &LlmArgs, url: &str) -> anyhow::Result<Vec<BenchRun>> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(300)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut out = Vec::new();
    for (name, prompt_tokens, max_tokens) in SHAPES {
        // About 0.75 words per token; the server reports the real count.
        let msgs = messages(&filler((prompt_tokens as f64 * 0.7) as usize));
        let mut samples = Vec::new();
        for _ in 0..a.runs {
            samples.push(endpoint_once(&agent, a, url, &msgs, max_tokens)?);
        }
        out.extend(median_run(name, &samples));
    }
    Ok(out)
}
