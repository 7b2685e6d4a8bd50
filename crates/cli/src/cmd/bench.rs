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

mod args;
pub mod chat;
mod client;
mod inputs;
pub mod llm;
mod load;
mod report;
mod sim_check;
mod stats;

use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

pub use self::args::{Args, Sub};
use self::client::{Client, verify_traces};
use self::inputs::{input, parse_inputs};
use self::load::{OpenLoop, Progress, Record, Run, Stop, closed_loop, open_loop};
use self::report::{Report, table};
use self::stats::{Buckets, Sample, summarize};
use super::common::OutputFormat;
use crate::exit::{self, Coded};

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Llm(a)) => return llm::run(*a),
        Some(Sub::Chat(a)) => return chat::run(*a),
        None => {}
    }
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
        topology: args.topology.clone().unwrap_or_default(),
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
