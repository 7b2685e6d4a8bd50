//! `glassbox bench`: a load generator for `glassbox serve`.
//!
//! Two ways to load a server, because they answer different questions:
//!
//! - **Closed loop** (`--concurrency C`): C clients, each sending its next
//!   request when the previous one is answered. The throughput it reaches is
//!   the server's *capacity* at that concurrency; latency is what one waiting
//!   client sees.
//! - **Open loop** (`--rate R`): requests arrive at R per second (Poisson or
//!   evenly spaced) whatever the server does, as real users do. A dispatcher
//!   thread owns the arrival clock and hands each due request to a pool of
//!   sender threads; when every sender is busy the request is counted as *not
//!   sent* (a client error) instead of being delayed, so a slow server never
//!   slows the arrivals down. Latency is measured from when the request was
//!   *due*, not from when a sender picked it up, so time spent waiting on the
//!   client side is not hidden ("coordinated omission").
//!
//! The client is blocking `ureq` on plain threads: the workspace already has
//! it, and at the rates one machine can drive, a thread per in-flight request
//! costs less than an async runtime's complexity.
//!
//! With `--verify-traces`, every request id the server answered with (every
//! admitted request, failed runs included) is looked up with
//! `GET /v1/traces/{id}` afterwards: the acceptance test of `glassbox serve`
//! under overload is that every request it admitted left a trace.

mod client;
mod report;
mod stats;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use self::client::{Answer, Client, verify_traces};
use self::report::{Report, table};
use self::stats::{Buckets, Outcome, Sample, summarize};
use super::common::OutputFormat;
use crate::exit::{self, Coded};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 `--verify-traces` found admitted requests \
                        without a trace, 2 usage, 69 the server cannot be reached, 78 bad \
                        inputs file or options."
)]
pub struct Args {
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Topology id to run (`POST /v1/topologies/{id}/runs`).
    #[arg(long)]
    pub topology: String,
    /// API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Request inputs, one per line, used in turn: a JSON object, or a plain
    /// question sent as `{"question": LINE}`. Blank lines are skipped.
    #[arg(long, value_name = "FILE", required_unless_present = "question")]
    pub inputs: Option<String>,
    /// A question to send (repeatable); instead of `--inputs`.
    #[arg(long, short = 'q', conflicts_with = "inputs")]
    pub question: Vec<String>,
    /// Open loop: requests arrive at this many per second, whatever the
    /// server does.
    #[arg(long, value_name = "REQ_PER_S", conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// How open-loop arrivals are spaced.
    #[arg(long, value_enum, default_value_t = Arrivals::Poisson)]
    pub arrivals: Arrivals,
    /// Closed loop: this many clients, each waiting for its answer before
    /// sending again [default: 1, when `--rate` is not given].
    #[arg(long, short = 'c')]
    pub concurrency: Option<usize>,
    /// How long to measure: `30`, `30s`, `500ms`, `2m` [default: 10s, when
    /// `--requests` is not given].
    #[arg(long, short = 'd', value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Measure this many requests instead of a duration.
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,
    /// Load sent before measuring starts, left out of the figures.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub warmup: Duration,
    /// Per-request timeout (counted as a `timeout` transport error).
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Open loop: sender threads, i.e. the most requests in flight at once
    /// [default: rate × timeout, between 16 and 512].
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,
    /// Input-length bucket boundaries in characters (of the `question`
    /// field, or of the whole input when it has none).
    #[arg(long, value_delimiter = ',', default_value = "64,256,1024")]
    pub buckets: Vec<usize>,
    /// After the run, check that every admitted request has a trace
    /// (`GET /v1/traces/{id}`).
    #[arg(long)]
    pub verify_traces: bool,
    /// Seed of the Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps: independent users.
    Poisson,
    /// Evenly spaced.
    Fixed,
}

/// `30`, `30s`, `1.5s`, `500ms`, `2m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err(format!(
            "`{text}` is not a duration (try `30s`, `500ms` or `2m`)"
        )),
    }
}

/// One request input and the length bucket it falls in.
#[derive(Debug, Clone)]
struct Input {
    body: Vec<u8>,
    bucket: usize,
}

/// Reads the inputs file: a JSON object or a plain question per line.
fn parse_inputs(name: &str, text: &str, buckets: &Buckets) -> anyhow::Result<Vec<Input>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value = if line.starts_with('{') {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                Coded::invalid(format!(
                    "`{name}`:{}: not a JSON object: {e} (write plain questions without a leading `{{`)",
                    i + 1
                ))
            })?;
            if !v.is_object() {
                return Err(Coded::invalid(format!(
                    "`{name}`:{}: not a JSON object",
                    i + 1
                )));
            }
            v
        } else {
            json!({ "question": line })
        };
        out.push(input(&value, buckets)?);
    }
    if out.is_empty() {
        return Err(Coded::invalid(format!("`{name}` has no inputs")));
    }
    Ok(out)
}

fn input(value: &Value, buckets: &Buckets) -> anyhow::Result<Input> {
    let body = serde_json::to_vec(value)?;
    let chars = match value.get("question").and_then(Value::as_str) {
        Some(q) => q.chars().count(),
        None => String::from_utf8_lossy(&body).chars().count(),
    };
    Ok(Input {
        body,
        bucket: buckets.index(chars),
    })
}

/// When the load stops.
#[derive(Debug, Clone, Copy)]
enum Stop {
    After(Duration),
    Count(u64),
}

/// Shared state of one run: what to send, when measuring starts, results.
struct Run {
    client: Client,
    inputs: Vec<Input>,
    start: Instant,
    warmup: Duration,
    stop: Stop,
    results: Sender<Record>,
}

/// One finished request.
struct Record {
    sample: Sample,
    warmup: bool,
    request_id: Option<String>,
}

impl Run {
    fn measure_start(&self) -> Instant {
        self.start + self.warmup
    }

    /// Sends input `seq` (cycling), due at `due`, and records the answer.
    fn send(&self, seq: u64, due: Instant, warmup: bool, tx: &Sender<Record>) {
        let input = &self.inputs[(seq % self.inputs.len() as u64) as usize];
        let answer = self.client.run(&input.body);
        self.record(input.bucket, due, warmup, answer, tx);
    }

    fn record(
        &self,
        bucket: usize,
        due: Instant,
        warmup: bool,
        answer: Answer,
        tx: &Sender<Record>,
    ) {
        let now = Instant::now();
        let sample = Sample {
            bucket,
            latency_us: micros(now.saturating_duration_since(due)),
            done_us: micros(now.saturating_duration_since(self.measure_start())),
            outcome: answer.outcome,
        };
        // The receiver lives until every sender thread is joined.
        let _ = tx.send(Record {
            sample,
            warmup,
            request_id: answer.request_id,
        });
    }

    fn sender(&self) -> Sender<Record> {
        self.results.clone()
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Closed loop: `c` threads, each sending as soon as its last answer came.
fn closed_loop(run: &Run, c: usize, progress: &AtomicU64) {
    let next = AtomicU64::new(0);
    let measured = AtomicU64::new(0);
    thread::scope(|s| {
        for _ in 0..c {
            let tx = run.sender();
            let (next, measured) = (&next, &measured);
            s.spawn(move || {
                loop {
                    let now = Instant::now();
                    let warmup = now < run.measure_start();
                    if !warmup {
                        match run.stop {
                            Stop::After(d) if now >= run.measure_start() + d => break,
                            Stop::Count(n) if measured.fetch_add(1, Ordering::Relaxed) >= n => {
                                break;
                            }
                            _ => {}
                        }
                    }
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    run.send(seq, now, warmup, &tx);
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
}

/// Open-loop settings.
struct OpenLoop {
    rate: f64,
    arrivals: Arrivals,
    senders: usize,
    seed: u64,
}

/// A job for an open-loop sender thread.
struct Job {
    seq: u64,
    due: Instant,
    warmup: bool,
}

/// Open loop: arrivals on their own clock; requests no sender can take at
/// once are recorded as not sent.
fn open_loop(run: &Run, open: &OpenLoop, progress: &AtomicU64) {
    let OpenLoop {
        rate,
        arrivals,
        senders,
        seed,
    } = *open;
    // A short queue absorbs scheduling jitter between the dispatcher and the
    // senders; anything beyond it means the client is saturated.
    let (jobs, queue): (SyncSender<Job>, Receiver<Job>) = mpsc::sync_channel((senders / 4).max(4));
    let queue = Mutex::new(queue);
    let tx = run.sender();
    thread::scope(|s| {
        for _ in 0..senders {
            let queue = &queue;
            let tx = run.sender();
            s.spawn(move || {
                loop {
                    let job = match queue.lock() {
                        Ok(q) => q.recv(),
                        Err(_) => break,
                    };
                    let Ok(job) = job else { break };
                    run.send(job.seq, job.due, job.warmup, &tx);
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut due = run.start;
        let mut measured = 0u64;
        let mut seq = 0u64;
        loop {
            let gap = match arrivals {
                Arrivals::Fixed => 1.0 / rate,
                // Inverse transform: -ln(U)/rate with U in (0, 1].
                Arrivals::Poisson => -(1.0 - rng.f64()).ln() / rate,
            };
            due += Duration::from_secs_f64(gap);
            let warmup = due < run.measure_start();
            if !warmup {
                let over = match run.stop {
                    Stop::After(d) => due >= run.measure_start() + d,
                    Stop::Count(n) => measured >= n,
                };
                if over {
                    break;
                }
                measured += 1;
            }
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            match jobs.try_send(Job { seq, due, warmup }) {
                Ok(()) => {}
                Err(TrySendError::Full(job)) => {
                    let input = &run.inputs[(job.seq % run.inputs.len() as u64) as usize];
                    let answer = Answer {
                        outcome: Outcome::NotSent,
                        request_id: None,
                    };
                    run.record(input.bucket, job.due, job.warmup, answer, &tx);
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
            seq += 1;
        }
        drop(jobs);
    });
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let buckets = Buckets::new(args.buckets.clone()).map_err(Coded::invalid)?;
    let inputs = match &args.inputs {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Coded::invalid(format!("cannot read `{path}`: {e}")))?;
            parse_inputs(path, &text, &buckets)?
        }
        None => args
            .question
            .iter()
            .map(|q| input(&json!({ "question": q }), &buckets))
            .collect::<anyhow::Result<_>>()?,
    };
    if let Some(rate) = args.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(usage(format!("`--rate` must be above 0, got {rate}")));
    }
    if args.concurrency == Some(0) || args.max_in_flight == Some(0) || args.requests == Some(0) {
        return Err(usage(
            "`--concurrency`, `--max-in-flight` and `--requests` must be at least 1".into(),
        ));
    }
    let stop = match (args.requests, args.duration) {
        (Some(n), _) => Stop::Count(n),
        (None, Some(d)) => Stop::After(d),
        (None, None) => Stop::After(Duration::from_secs(10)),
    };
    if matches!(stop, Stop::After(d) if d.is_zero()) {
        return Err(usage("`--duration` must be above 0".into()));
    }
    let senders = args.rate.map(|rate| {
        args.max_in_flight
            .unwrap_or_else(|| ((rate * args.timeout.as_secs_f64()).ceil() as usize).clamp(16, 512))
    });
    let concurrency = match args.rate {
        Some(_) => None,
        None => Some(args.concurrency.unwrap_or(1)),
    };
    let client = Client::new(&args, senders.or(concurrency).unwrap_or(1));
    preflight(&client)?;

    let (tx, rx) = mpsc::channel();
    let run = Run {
        client,
        inputs,
        start: Instant::now(),
        warmup: args.warmup,
        stop,
        results: tx,
    };
    let progress = Progress::start(&run, args.format == OutputFormat::Table);
    match (args.rate, senders) {
        (Some(rate), Some(senders)) => {
            let open = OpenLoop {
                rate,
                arrivals: args.arrivals,
                senders,
                seed: args.seed,
            };
            open_loop(&run, &open, &progress.done)
        }
        _ => closed_loop(&run, concurrency.unwrap_or(1), &progress.done),
    }
    progress.finish();
    let Run {
        client, results, ..
    } = run;
    drop(results);
    let records: Vec<Record> = rx.into_iter().collect();
    let mut samples = Vec::with_capacity(records.len());
    let mut ids = Vec::new();
    let (mut warmup_requests, mut without_id) = (0, 0);
    for r in records {
        // A failed run answers 4xx/5xx but was admitted and ran: its
        // request id is looked up too. A 2xx without one is a defect.
        match r.request_id {
            Some(id) => ids.push(id),
            None if r.sample.outcome.admitted() => without_id += 1,
            None => {}
        }
        if r.warmup {
            warmup_requests += 1;
        } else {
            samples.push(r.sample);
        }
    }
    let window_s = match stop {
        Stop::After(d) => d.as_secs_f64(),
        // Open loop offered its count over the time its arrivals spanned;
        // closed loop over the run (`summarize` falls back to it on 0).
        Stop::Count(_) if args.rate.is_some() => arrival_span(&samples),
        Stop::Count(_) => 0.0,
    };
    let summary = summarize(&samples, &buckets, window_s);
    let traces = args
        .verify_traces
        .then(|| verify_traces(&client, ids, without_id));
    let report = Report {
        url: args.url.clone(),
        topology: args.topology.clone(),
        mode: if args.rate.is_some() {
            "open"
        } else {
            "closed"
        },
        rate: args.rate,
        arrivals: args.rate.map(|_| args.arrivals),
        concurrency,
        max_in_flight: senders,
        warmup_s: args.warmup.as_secs_f64(),
        warmup_requests,
        summary,
        traces,
    };
    match args.format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        OutputFormat::Table => print!("{}", table(&report, &buckets)),
    }
    let sent_any = report.summary.counts.sent > 0;
    let answered =
        report.summary.counts.sent > report.summary.counts.transport_errors.values().sum::<u64>();
    if sent_any && !answered {
        return Ok(ExitCode::from(exit::UNAVAILABLE));
    }
    match &report.traces {
        Some(t) if t.missing > 0 || t.without_id > 0 || !t.lookup_errors.is_empty() => {
            Ok(ExitCode::from(exit::FAILED))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Seconds from the start of the window to the last request due.
fn arrival_span(samples: &[Sample]) -> f64 {
    let last_due = samples
        .iter()
        .map(|s| s.done_us.saturating_sub(s.latency_us))
        .max()
        .unwrap_or(0);
    last_due as f64 / 1e6
}

fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message,
    })
}

/// Fails fast (exit 69) when nothing listens at `--url`.
fn preflight(client: &Client) -> anyhow::Result<()> {
    match client.get("/healthz") {
        Ok(_) => Ok(()),
        Err(e) => Err(anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message: format!(
                "cannot reach the server at `{}`: {e} (is `glassbox serve` running?)",
                client.base
            ),
        })),
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
struct Progress {
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Progress {
    fn start(run: &Run, show: bool) -> Self {
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = show.then(|| {
            let (done, stop) = (done.clone(), stop.clone());
            let start = run.start;
            let (len, by_time) = match run.stop {
                Stop::After(d) => (micros(d + run.warmup) / 1000, true),
                Stop::Count(n) => (n, false),
            };
            thread::spawn(move || {
                let bar = indicatif::ProgressBar::new(len);
                let style = indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {msg}",
                );
                if let Ok(style) = style {
                    bar.set_style(style);
                }
                while !stop.load(Ordering::Relaxed) {
                    let n = done.load(Ordering::Relaxed);
                    bar.set_position(if by_time {
                        micros(start.elapsed()) / 1000
                    } else {
                        n
                    });
                    bar.set_message(format!("{n} requests"));
                    thread::sleep(Duration::from_millis(200));
                }
                bar.finish_and_clear();
            })
        });
        Progress { done, stop, handle }
    }

    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn inputs_are_questions_or_json_objects_bucketed_by_length() {
        let b = Buckets::new(vec![10, 100]).unwrap();
        let text = "short?\n\n{\"question\": \"a question of some length\"}\n{\"doc\": 1}\n";
        let inputs = parse_inputs("q.txt", text, &b).unwrap();
        assert_eq!(inputs.len(), 3);
        assert_eq!(inputs[0].body, br#"{"question":"short?"}"#);
        assert_eq!(inputs[0].bucket, 0);
        assert_eq!(inputs[1].bucket, 1);
        // No question: the length of the whole input (`{"doc":1}`, 9 chars).
        assert_eq!(inputs[2].bucket, 0);
    }

    #[test]
    fn bad_inputs_name_the_line() {
        let b = Buckets::new(vec![64]).unwrap();
        let err = parse_inputs("q.txt", "ok\n{not json\n", &b).unwrap_err();
        assert!(err.to_string().contains("`q.txt`:2"), "{err}");
        assert_eq!(exit::code_for(&err), exit::INVALID);
        let err = parse_inputs("q.txt", "{\"a\": 1}\n[1]\n", &b);
        assert!(err.is_ok(), "a line not starting with `{{` is a question");
        assert!(parse_inputs("empty.txt", "\n\n", &b).is_err());
    }
}
