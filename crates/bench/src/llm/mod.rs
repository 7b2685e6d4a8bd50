//! The calibration benchmark of one language model (`glassbox bench llm`),
//! and the open-loop check of the serving simulator.
//!
//! Two fixed runs, each repeated `--runs` times alone on the model (the
//! median kept): seed 001's 200-token generation from a short prompt and
//! seed 000's 512 prompt tokens in, 256 out. The local engine
//! ([`Target::Local`], llama.cpp) reports its prefill time and TTFT/TPOT
//! itself; an OpenAI-compatible endpoint is timed from the stream (first content
//! chunk, then the gaps). The results are written as a measurements CSV
//! (`glassbox_planner::calibrate::bench_csv`) that `glassbox plan calibrate`
//! fits, so the planner's factors follow the machine that was measured.
//!
//! With rates (or loads) to check, the local engine is then loaded open loop (Poisson
//! arrivals, each request due on its own clock) at each rate, and the same
//! arrival times and token counts are replayed in the simulator
//! (`glassbox_planner::sim`) with the factors just fitted: measured against
//! simulated P50/P99 TTFT and E2E is the simulator's validation.

mod sim_check;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};
use glassbox_planner::calibrate::{self, BenchRun, BenchTarget};
use serde_json::{Value, json};

use self::sim_check::{Check, N_BATCH, N_CTX, median, validate};
pub use self::sim_check::{RateCheck, Validation};
use crate::BenchError;

/// What is measured.
#[derive(Debug, Clone)]
pub enum Target {
    /// The local engine (llama.cpp) on this GGUF file.
    Local {
        model_file: PathBuf,
        /// CPU threads (one per physical core when not given).
        threads: Option<usize>,
    },
    /// An OpenAI-compatible server at this base URL.
    Endpoint {
        url: String,
        /// The `model` sent with each request.
        model: String,
        /// Sent as `Authorization: Bearer KEY`.
        api_key: Option<String>,
    },
}

/// A resolved, validated calibration benchmark.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub target: Target,
    /// The model's id in the planner catalogue.
    pub planner_model: String,
    /// The device's id in the planner catalogue.
    pub gpu: String,
    /// Weight format, for the planner.
    pub quant: String,
    /// Engine, for the planner.
    pub engine: String,
    /// Repetitions of each run (at least 1; the median is kept).
    pub runs: usize,
    /// Where the measurements CSV is written.
    pub output: PathBuf,
    /// Local: open-loop rates (requests/s, each above 0) to check the
    /// simulator at.
    pub rates: Vec<f64>,
    /// Local: like `rates`, as fractions of the profiled capacity.
    pub loads: Vec<f64>,
    /// Open loop: requests per rate (at least 10).
    pub requests: usize,
    /// Open loop: prompt tokens per request.
    pub prompt_tokens: u64,
    /// Open loop: the most tokens generated per request.
    pub gen_tokens: u32,
    /// Open loop: sequences the local engine runs at once.
    pub max_num_seqs: u32,
    /// Seed of the open-loop arrivals.
    pub seed: u64,
    /// Today, `YYYY-MM-DD`, for the measurements' source line.
    pub date: String,
}

/// What the benchmark measured and wrote.
#[derive(Debug)]
pub struct LlmReport {
    pub target: BenchTarget,
    /// The model's version (local) or `MODEL at URL` (endpoint).
    pub version: String,
    pub runs: Vec<BenchRun>,
    /// Where the measurements CSV was written.
    pub output: PathBuf,
    pub validation: Option<Validation>,
}

impl LlmReport {
    /// The `--format json` document.
    pub fn to_json(&self) -> Value {
        json!({
            "target": self.target, "runs": self.runs, "output": self.output,
            "validation": self.validation,
        })
    }
}

/// The two runs: (name, prompt tokens (approximate), tokens out).
const SHAPES: [(&str, u64, u32); 2] = [("seed001-200", 32, 200), ("seed000-512x256", 512, 256)];

fn invalid(message: String) -> BenchError {
    BenchError::Invalid(message)
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
fn local_prompt(llm: &LlmHandle, tokens: u64) -> Result<Vec<ChatMessage>, BenchError> {
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

/// Runs the benchmark, writes the measurements CSV, and (local, with rates
/// or loads) checks the simulator.
pub fn run(a: &LlmConfig) -> Result<LlmReport, BenchError> {
    let local = matches!(a.target, Target::Local { .. });
    let (runs, version, llm) = match &a.target {
        Target::Local {
            model_file,
            threads,
        } => {
            let llm = LlmHandle::load(LlmOptions {
                threads: *threads,
                n_ctx: N_CTX,
                n_batch: N_BATCH,
                max_num_seqs: a.max_num_seqs.max(1),
                queue_capacity: a.requests.max(64),
                prefix_cache: false,
                ..LlmOptions::new(model_file.clone())
            })
            .map_err(|e| invalid(format!("loading the local model: {e}")))?;
            let runs = local_runs(&llm, a.runs)?;
            (runs, llm.version().to_string(), Some(llm))
        }
        Target::Endpoint {
            url,
            model,
            api_key,
            ..
        } => (
            endpoint_runs(a, url, model, api_key.as_deref())?,
            format!("{model} at {url}"),
            None,
        ),
    };
    let target = BenchTarget {
        gpu: a.gpu.clone(),
        engine: a.engine.clone(),
        model: a.planner_model.clone(),
        quant: a.quant.clone(),
        kv_dtype: "f16".into(),
        source: format!(
            "glassbox bench llm {} on {}; model {version}",
            if local { "--local" } else { "--endpoint" },
            a.date
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
    Ok(LlmReport {
        target,
        version,
        runs,
        output: a.output.clone(),
        validation,
    })
}

fn local_runs(llm: &LlmHandle, repeats: usize) -> Result<Vec<BenchRun>, BenchError> {
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
/// The endpoint's address and credentials.
struct Endpoint<'a> {
    url: &'a str,
    model: &'a str,
    api_key: Option<&'a str>,
}

fn endpoint_once(
    agent: &ureq::Agent,
    e: &Endpoint<'_>,
    msgs: &[ChatMessage],
    max_tokens: u32,
) -> Result<BenchRun, BenchError> {
    let url = e.url;
    let body = json!({
        "model": e.model,
        "messages": msgs,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let mut req = agent
        .post(format!("{}/v1/chat/completions", url.trim_end_matches('/')))
        .header("content-type", "application/json");
    if let Some(k) = e.api_key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let start = Instant::now();
    let mut response = req.send(body.to_string().as_bytes()).map_err(|e| {
        BenchError::Unavailable(format!(
            "cannot reach `{url}`: {e} (is the server running?)"
        ))
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

fn endpoint_runs(
    a: &LlmConfig,
    url: &str,
    model: &str,
    api_key: Option<&str>,
) -> Result<Vec<BenchRun>, BenchError> {
    let endpoint = Endpoint {
        url,
        model,
        api_key,
    };
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
            samples.push(endpoint_once(&agent, &endpoint, &msgs, max_tokens)?);
        }
        out.extend(median_run(name, &samples));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, gen_tokens: u64, ttft_ms: f64, tpot_ms: Option<f64>) -> BenchRun {
        BenchRun {
            name: name.into(),
            prompt_tokens: 512,
            gen_tokens,
            ttft_ms,
            prefill_ms: None,
            tpot_ms,
        }
    }

    #[test]
    fn the_median_run_takes_each_figure_s_median() {
        let samples = [
            run("", 256, 30.0, Some(9.0)),
            run("", 250, 10.0, Some(7.0)),
            run("", 256, 20.0, None),
        ];
        let m = median_run("seed000-512x256", &samples).unwrap();
        assert_eq!(m.name, "seed000-512x256");
        assert_eq!((m.prompt_tokens, m.gen_tokens), (512, 256));
        assert_eq!(m.ttft_ms, 20.0);
        // Of the two runs that timed their tokens, the upper median.
        assert_eq!(m.tpot_ms, Some(9.0));
        assert_eq!(m.prefill_ms, None);
        assert!(median_run("none", &[]).is_none());
    }

    #[test]
    fn the_filler_has_at_least_the_words_asked_for() {
        for words in [1, 40, 300] {
            assert!(filler(words).split_whitespace().count() >= words);
        }
        let m = messages("body");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn an_endpoint_that_is_not_there_is_unavailable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let a = LlmConfig {
            target: Target::Endpoint {
                url: format!("http://127.0.0.1:{port}"),
                model: "default".into(),
                api_key: None,
            },
            planner_model: "smollm2-135m".into(),
            gpu: "cpu-generic".into(),
            quant: "q4_1".into(),
            engine: "vllm".into(),
            runs: 1,
            output: std::env::temp_dir().join("glassbox-bench-never-written.csv"),
            rates: Vec::new(),
            loads: Vec::new(),
            requests: 10,
            prompt_tokens: 16,
            gen_tokens: 4,
            max_num_seqs: 1,
            seed: 1,
            date: "2026-12-04".into(),
        };
        let err = super::run(&a).unwrap_err();
        assert!(matches!(err, BenchError::Unavailable(_)), "{err}");
        assert!(
            !a.output.exists(),
            "nothing is written when nothing was measured"
        );
    }
}
