//! Streamed chat completions (`glassbox bench chat`) against any
//! OpenAI-compatible server (`glassbox serve`, a cluster coordinator,
//! a `glassbox worker`, vLLM, llama-server), open loop or closed loop,
//! with time to first token, end-to-end latency and goodput under an SLO.
//!
//! - **Open loop** (a rate R): Poisson arrivals from a fixed `--seed`, so
//!   two runs at the same rate offer the very same arrival times (the
//!   cluster benchmark compares placement policies on them). Each request
//!   gets its own thread when it is due; latency counts from the due time.
//! - **Closed loop** (C clients): C clients back to back; the
//!   completed requests per second are the server's capacity at C.
//!
//! TTFT is the time to the first chunk that carries content: the role
//! chunk an OpenAI stream opens with leaves before any token and says
//! nothing of generation. E2E is the time to `data: [DONE]`. Goodput is
//! the requests that completed within an SLO (end to end; several
//! SLOs may be given, each gets its goodput) per second
//! of the nominal arrival window (`requests / rate`): the offered rate
//! times the share that met the SLO, so runs at one rate compare directly
//! and goodput never exceeds what was offered.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::BenchError;
use crate::stats::Latency;

/// A resolved, validated chat benchmark.
#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// Base URL of the server (without `/v1`).
    pub url: String,
    /// The `model` sent.
    pub model: String,
    /// Sent as `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// Open loop at this rate (above 0), else closed loop.
    pub rate: Option<f64>,
    /// Closed loop: clients back to back (at least 1).
    pub concurrency: usize,
    /// Requests to measure (at least 1).
    pub requests: usize,
    /// Seed of the Poisson arrivals.
    pub seed: u64,
    /// Questions asked in turn (at least one).
    pub questions: Vec<String>,
    /// `max_tokens` sent with each request.
    pub max_tokens: u64,
    /// End-to-end objectives in milliseconds (each above 0), for goodput.
    pub slo_ms: Vec<f64>,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// The questions asked when none are given.
pub const DEFAULT_QUESTIONS: [&str; 4] = [
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

impl Outcome {
    /// A request due (or sent) at `due`, from what `send` returned: when its
    /// first content came and when it ended, both counted from `due`.
    fn of(start: Instant, due: Instant, sent: (Option<Instant>, Result<Instant, String>)) -> Self {
        let (first, done) = sent;
        Outcome {
            due_us: micros(due - start),
            ttft_us: first.map(|f| micros(f.saturating_duration_since(due))),
            result: done.map(|d| micros(d.saturating_duration_since(due))),
        }
    }
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
    pub errors: BTreeMap<String, usize>,
    /// Seconds the requests were offered over: `requests / rate` (open
    /// loop), from the start to the last completion (closed loop).
    pub window_s: f64,
    /// Completed requests per second of the window.
    pub throughput_rps: f64,
    /// Goodput per SLO, in their order.
    pub goodput: Vec<Goodput>,
    pub ttft_ms: Latency,
    pub e2e_ms: Latency,
}

/// Runs the benchmark: every request is sent, and each one's fate is in
/// the report (a server that answered nothing is
/// [`ChatReport::reached_nothing`]).
pub fn run(a: &ChatConfig) -> ChatReport {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(a.timeout))
        .http_status_as_error(false)
        .max_idle_connections(256)
        .max_idle_connections_per_host(256)
        .build()
        .into();
    let questions = if a.questions.is_empty() {
        DEFAULT_QUESTIONS.map(str::to_string).to_vec()
    } else {
        a.questions.clone()
    };
    let send = |i: usize| request(&agent, a, &questions[i % questions.len()]);
    let start = Instant::now();
    let outcomes = match a.rate {
        Some(rate) => open_loop(&arrivals(rate, a.requests, a.seed), start, &send),
        None => closed_loop(a.concurrency.max(1), a.requests, start, &send),
    };
    summarize(a, &outcomes)
}

impl ChatReport {
    /// Not one request completed and every failure was a refused
    /// connection: nothing listens at the URL.
    pub fn reached_nothing(&self) -> bool {
        self.completed == 0 && self.errors.keys().all(|k| k.starts_with("connect"))
    }
}

/// The questions of a questions file: one per non-blank line.
pub fn read_questions(text: &str) -> Result<Vec<String>, BenchError> {
    let listed: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if listed.is_empty() {
        return Err(BenchError::Invalid(
            "the questions file has no question".into(),
        ));
    }
    Ok(listed)
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
                let o = Outcome::of(start, due, send(i));
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
                    let o = Outcome::of(start, sent, send(i));
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
    a: &ChatConfig,
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

fn summarize(a: &ChatConfig, outcomes: &[Outcome]) -> ChatReport {
    let mut errors = BTreeMap::new();
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
        concurrency: a.rate.is_none().then_some(a.concurrency.max(1)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(rate: Option<f64>, slo_ms: &[f64]) -> ChatConfig {
        ChatConfig {
            url: "http://127.0.0.1:1".into(),
            model: "chat".into(),
            api_key: None,
            rate,
            concurrency: 1,
            requests: 4,
            seed: 1,
            questions: Vec::new(),
            max_tokens: 16,
            slo_ms: slo_ms.to_vec(),
            timeout: Duration::from_secs(1),
        }
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
        let a = config(Some(2.0), &[500.0, 1000.0]);
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
        assert!(!r.reached_nothing());
    }

    #[test]
    fn a_closed_loop_window_ends_at_the_last_completion() {
        let a = config(None, &[]);
        let o = |due_ms: u64, e2e_ms: u64| Outcome {
            due_us: due_ms * 1000,
            ttft_us: None,
            result: Ok(e2e_ms * 1000),
        };
        let r = summarize(&a, &[o(0, 500), o(500, 1500)]);
        assert_eq!(r.window_s, 2.0);
        assert_eq!(r.throughput_rps, 1.0);
        assert_eq!((r.mode, r.concurrency), ("closed", Some(1)));
        assert_eq!(r.ttft_ms.count, 0, "no content chunk, no TTFT");
    }

    #[test]
    fn nothing_listening_is_reached_nothing() {
        // A port that was just free: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut a = config(None, &[]);
        a.url = format!("http://127.0.0.1:{port}");
        a.requests = 2;
        let r = run(&a);
        assert_eq!((r.requests, r.completed), (2, 0));
        assert!(r.reached_nothing(), "{:?}", r.errors);
    }

    #[test]
    fn a_questions_file_needs_a_question() {
        assert_eq!(
            read_questions("a?\n\n  b? \n").unwrap(),
            ["a?".to_string(), "b?".to_string()]
        );
        assert!(matches!(
            read_questions("\n \n"),
            Err(BenchError::Invalid(_))
        ));
    }
}
