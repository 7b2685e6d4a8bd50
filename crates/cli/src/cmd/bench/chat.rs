//! `glassbox bench chat`: streamed chat completions against any
//! OpenAI-compatible server (`glassbox serve`, a cluster coordinator,
//! a `glassbox worker`, vLLM, llama-server), open loop or closed loop,
//! with time to first token, end-to-end latency and goodput under an SLO.
//!
//! - **Open loop** (`--rate R`): Poisson arrivals from a fixed `--seed`, so
//!   two runs at the same rate offer the very same arrival times (the
//!   cluster benchmark compares placement policies on them). Each request
//!   gets its own thread when it is due; latency counts from the due time.
//! - **Closed loop** (`--concurrency C`): C clients back to back; the
//!   completed requests per second are the server's capacity at C.
//!
//! TTFT is the time to the first chunk that carries content: the role
//! chunk an OpenAI stream opens with leaves before any token and says
//! nothing of generation. E2E is the time to `data: [DONE]`. Goodput is
//! the requests that completed within an `--slo-ms` (end to end; several
//! SLOs may be given, each gets its goodput) per second
//! of the nominal arrival window (`requests / rate`): the offered rate
//! times the share that met the SLO, so runs at one rate compare directly
//! and goodput never exceeds what was offered.

use std::io::{BufRead, BufReader};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use super::inputs::parse_duration;
use super::stats::Latency;
use crate::cmd::common::OutputFormat;
use crate::exit::{self, Coded};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Method: docs/BENCHMARKS.md (\"Cluster placement\"). Exit codes: 0 ok, \
                  2 usage, 69 the server cannot be reached or answered nothing."
)]
pub struct ChatArgs {
    /// Base URL of the server (without `/v1`).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The `model` sent (for `glassbox serve`: a topology id).
    #[arg(long)]
    pub model: String,
    /// API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Open loop: Poisson arrivals at this many requests per second.
    #[arg(long, value_name = "REQ_PER_S", conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// Closed loop: this many clients back to back [default: 1].
    #[arg(long, short = 'c')]
    pub concurrency: Option<usize>,
    /// Requests to measure.
    #[arg(long, short = 'n', default_value_t = 32)]
    pub requests: usize,
    /// Seed of the Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A question to ask (repeatable; used in turn) [default: a built-in few].
    #[arg(long, short = 'q')]
    pub question: Vec<String>,
    /// A file of questions, one per line; instead of `--question`.
    #[arg(long, value_name = "FILE", conflicts_with = "question")]
    pub questions: Option<String>,
    /// `max_tokens` sent with each request (a `glassbox serve` topology
    /// decides its own).
    #[arg(long, default_value_t = 16)]
    pub max_tokens: u64,
    /// End-to-end latency objectives in milliseconds, for goodput
    /// (comma-separated or repeated: each gets its own).
    #[arg(long, value_name = "MS", value_delimiter = ',')]
    pub slo_ms: Vec<f64>,
    /// Per-request timeout.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    pub timeout: Duration,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

const DEFAULT_QUESTIONS: [&str; 4] = [
    "What is the capital of France?",
    "Name three colours of the rainbow.",
    "How many legs does a spider have?",
    "Give me a word that rhymes with light.",
];

/// One request's fate.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    /// Due (open loop) or sent (closed loop), from the run's start.
    due_us: u64,
    ttft_us: Option<u64>,
    /// `Ok(e2e)`, or the error's kind.
    result: Result<u64, String>,
}

/// Requests that met one SLO.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Goodput {
    pub slo_ms: f64,
    /// Completed within the SLO, per second of the window.
    pub rps: f64,
    /// Share of all requests that completed within the SLO.
    pub attainment: f64,
}

/// What `glassbox bench chat` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ChatReport {
    pub url: String,
    pub model: String,
    pub mode: &'static str,
    pub rate: Option<f64>,
    pub concurrency: Option<usize>,
    pub seed: u64,
    pub requests: usize,
    pub completed: usize,
    /// Failed requests by kind (`http 429`, `timeout`, `stream`, ...).
    pub errors: std::collections::BTreeMap<String, usize>,
    /// Seconds the requests were offered over: `requests / rate` (open
    /// loop), from the start to the last completion (closed loop).
    pub window_s: f64,
    /// Completed requests per second of the window.
    pub throughput_rps: f64,
    /// Goodput per `--slo-ms`, in their order.
    pub goodput: Vec<Goodput>,
    pub ttft_ms: Latency,
    pub e2e_ms: Latency,
}

pub fn run(a: ChatArgs) -> anyhow::Result<ExitCode> {
    if let Some(rate) = a.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(usage(format!("`--rate` must be above 0, got {rate}")));
    }
    if a.requests == 0 || a.concurrency == Some(0) {
        return Err(usage(
            "`--requests` and `--concurrency` must be at least 1".into(),
        ));
    }
    if a.slo_ms.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(usage("`--slo-ms` must be above 0".into()));
    }
    let questions = questions(&a)?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(a.timeout))
        .http_status_as_error(false)
        .max_idle_connections(256)
        .max_idle_connections_per_host(256)
        .build()
        .into();
    let send = |i: usize| request(&agent, &a, &questions[i % questions.len()]);
    let start = Instant::now();
    let outcomes = match a.rate {
        Some(rate) => open_loop(&arrivals(rate, a.requests, a.seed), start, &send),
        None => closed_loop(a.concurrency.unwrap_or(1), a.requests, start, &send),
    };
    let report = summarize(&a, &outcomes);
    if report.completed == 0 && report.errors.keys().all(|k| k.starts_with("connect")) {
        return Err(anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message: format!(
                "no request reached `{}` ({:?}); is the server running?",
                a.url, report.errors
            ),
        }));
    }
    match a.format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        OutputFormat::Table => print!("{}", table(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message,
    })
}

fn questions(a: &ChatArgs) -> anyhow::Result<Vec<String>> {
    let listed: Vec<String> = match &a.questions {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Coded::invalid(format!("cannot read `{path}`: {e}")))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        None => a.question.clone(),
    };
    if listed.is_empty() && a.questions.is_some() {
        return Err(Coded::invalid("the questions file has no question"));
    }
    Ok(if listed.is_empty() {
        DEFAULT_QUESTIONS.map(str::to_string).to_vec()
    } else {
        listed
    })
}

/// Poisson arrival times in seconds from the start, fixed by `seed`.
fn arrivals(rate: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            // Inverse transform: -ln(U)/rate with U in (0, 1].
            t += -(1.0 - rng.f64()).ln() / rate;
            t
        })
        .collect()
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Each request on its own thread when due; latency from the due time.
fn open_loop(
    times: &[f64],
    start: Instant,
    send: &(dyn Fn(usize) -> (Option<Instant>, Result<Instant, String>) + Sync),
) -> Vec<Outcome> {
    let out = Mutex::new(Vec::with_capacity(times.len()));
    std::thread::scope(|s| {
        for (i, &at) in times.iter().enumerate() {
            let due = start + Duration::from_secs_f64(at);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let out = &out;
            s.spawn(move || {
                let (first, done) = send(i);
                let o = Outcome {
                    due_us: micros(due - start),
                    ttft_us: first.map(|f| micros(f.saturating_duration_since(due))),
                    result: done.map(|d| micros(d.saturating_duration_since(due))),
                };
                out.lock().unwrap_or_else(|e| e.into_inner()).push(o);
            });
        }
    });
    out.into_inner().unwrap_or_else(|e| e.into_inner())
}

fn closed_loop(
    clients: usize,
    n: usize,
    start: Instant,
    send: &(dyn Fn(usize) -> (Option<Instant>, Result<Instant, String>) + Sync),
) -> Vec<Outcome> {
    let next = AtomicU64::new(0);
    let out = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|s| {
        for _ in 0..clients {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= n {
                        break;
                    }
                    let sent = Instant::now();
                    let (first, done) = send(i);
                    let o = Outcome {
                        due_us: micros(sent - start),
                        ttft_us: first.map(|f| micros(f.saturating_duration_since(sent))),
                        result: done.map(|d| micros(d.saturating_duration_since(sent))),
                    };
                    out.lock().unwrap_or_else(|e| e.into_inner()).push(o);
                }
            });
        }
    });
    out.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// One streamed chat: when the first content arrived, and when `[DONE]`
/// did (or what went wrong).
fn request(
    agent: &ureq::Agent,
    a: &ChatArgs,
    question: &str,
) -> (Option<Instant>, Result<Instant, String>) {
    let body = json!({
        "model": a.model,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": a.max_tokens,
        "temperature": 0,
        "stream": true,
    });
    let mut req = agent
        .post(format!(
            "{}/v1/chat/completions",
            a.url.trim_end_matches('/')
        ))
        .header("content-type", "application/json");
    if let Some(k) = &a.api_key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let mut response = match req.send(body.to_string().as_bytes()) {
        Ok(r) => r,
        Err(e) => return (None, Err(transport(&e))),
    };
    let status = response.status().as_u16();
    if status >= 400 {
        return (None, Err(format!("http {status}")));
    }
    let mut first = None;
    for line in BufReader::new(response.body_mut().as_reader()).lines() {
        let Ok(line) = line else {
            return (first, Err("stream cut".into()));
        };
        let Some(data) = line.strip_prefix("data:").map(str::trim) else {
            continue;
        };
        if data == "[DONE]" {
            return (first, Ok(Instant::now()));
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        if v.get("error").is_some() {
            return (first, Err("stream error".into()));
        }
        let content = v["choices"][0]["delta"]["content"].as_str();
        if content.is_some_and(|t| !t.is_empty()) {
            first.get_or_insert_with(Instant::now);
        }
    }
    (first, Err("stream ended without [DONE]".into()))
}

fn transport(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timeout".into(),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connect refused".into()
        }
        ureq::Error::Io(_) => "io".into(),
        _ => "transport".into(),
    }
}

fn summarize(a: &ChatArgs, outcomes: &[Outcome]) -> ChatReport {
    let mut errors = std::collections::BTreeMap::new();
    let (mut ttft, mut e2e) = (Vec::new(), Vec::new());
    for o in outcomes {
        match &o.result {
            Ok(us) => {
                e2e.push(*us);
                ttft.extend(o.ttft_us);
            }
            Err(kind) => *errors.entry(kind.clone()).or_insert(0) += 1,
        }
    }
    let last_done = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok().map(|e| o.due_us + e))
        .max()
        .unwrap_or(0);
    let window_s = match a.rate {
        Some(rate) => outcomes.len() as f64 / rate,
        None => last_done as f64 / 1e6,
    }
    .max(1e-6);
    let goodput = a
        .slo_ms
        .iter()
        .map(|&slo_ms| {
            let good = e2e.iter().filter(|&&us| us as f64 / 1e3 <= slo_ms).count();
            Goodput {
                slo_ms,
                rps: good as f64 / window_s,
                attainment: good as f64 / outcomes.len().max(1) as f64,
            }
        })
        .collect();
    ChatReport {
        url: a.url.clone(),
        model: a.model.clone(),
        mode: if a.rate.is_some() { "open" } else { "closed" },
        rate: a.rate,
        concurrency: a.rate.is_none().then(|| a.concurrency.unwrap_or(1)),
        seed: a.seed,
        requests: outcomes.len(),
        completed: e2e.len(),
        errors,
        window_s,
        throughput_rps: e2e.len() as f64 / window_s,
        goodput,
        ttft_ms: Latency::of(ttft),
        e2e_ms: Latency::of(e2e),
    }
}

fn table(r: &ChatReport) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let load = match (r.rate, r.concurrency) {
        (Some(rate), _) => format!("open loop, {rate:.2} req/s (seed {})", r.seed),
        (None, c) => format!("closed loop, {} clients", c.unwrap_or(1)),
    };
    let mut s = format!(
        "{} model `{}`: {load}\n{} requests, {} completed, errors {:?}, {:.2} req/s over {:.1} s\n",
        r.url, r.model, r.requests, r.completed, r.errors, r.throughput_rps, r.window_s
    );
    for g in &r.goodput {
        s.push_str(&format!(
            "goodput {:.2} req/s within E2E <= {:.0} ms ({:.0} % of requests)\n",
            g.rps,
            g.slo_ms,
            g.attainment * 100.0
        ));
    }
    s.push_str(&format!(
        "TTFT ms P50 {} P99 {}; E2E ms P50 {} P99 {} max {}\n",
        ms(r.ttft_ms.p50),
        ms(r.ttft_ms.p99),
        ms(r.e2e_ms.p50),
        ms(r.e2e_ms.p99),
        ms(r.e2e_ms.max)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ChatArgs,
    }

    fn args(extra: &[&str]) -> ChatArgs {
        let mut argv = vec!["chat", "--model", "chat"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn arrivals_are_poisson_and_fixed_by_the_seed() {
        let a = arrivals(10.0, 2000, 7);
        assert_eq!(a, arrivals(10.0, 2000, 7), "same seed, same arrivals");
        assert_ne!(a, arrivals(10.0, 2000, 8));
        assert!(a.windows(2).all(|w| w[1] > w[0]));
        // 2000 arrivals at 10/s span about 200 s.
        let span = a[a.len() - 1];
        assert!((180.0..220.0).contains(&span), "{span}");
    }

    #[test]
    fn goodput_counts_completions_within_the_slo_over_the_arrival_window() {
        let a = args(&["--rate", "2", "--slo-ms", "500,1000"]);
        let o = |due_ms: u64, e2e_ms: Option<u64>| Outcome {
            due_us: due_ms * 1000,
            ttft_us: e2e_ms.map(|e| e * 500),
            result: e2e_ms
                .map(|e| e * 1000)
                .ok_or_else(|| "http 429".to_string()),
        };
        let r = summarize(
            &a,
            &[
                o(0, Some(100)),
                o(1000, Some(900)),
                o(2000, Some(400)),
                o(4000, None),
            ],
        );
        assert_eq!((r.requests, r.completed), (4, 3));
        assert_eq!(r.errors.get("http 429"), Some(&1));
        assert_eq!(r.window_s, 2.0, "open loop: 4 requests offered at 2/s");
        let g = &r.goodput[0];
        assert_eq!(
            (g.rps, g.attainment),
            (1.0, 0.5),
            "2 within 500 ms, over 2 s"
        );
        let g = &r.goodput[1];
        assert_eq!((g.slo_ms, g.rps, g.attainment), (1000.0, 1.5, 0.75));
        assert_eq!(r.throughput_rps, 1.5);
        assert_eq!(r.e2e_ms.p50, Some(400.0));
        assert_eq!(r.ttft_ms.p99, Some(450.0));
        let text = table(&r);
        assert!(
            text.contains("goodput 1.00 req/s within E2E <= 500 ms"),
            "{text}"
        );
    }

    #[test]
    fn bad_options_are_usage_errors() {
        for bad in [
            &["--rate", "0"][..],
            &["--requests", "0"],
            &["--slo-ms=-1"],
            &["--concurrency", "0"],
        ] {
            let err = run(args(bad)).unwrap_err();
            assert_eq!(exit::code_for(&err), exit::USAGE, "{bad:?}: {err}");
        }
    }
}
