//! Load on a server's run API (`POST /v1/topologies/{id}/runs`).
//!
//! Two ways to load a server, because they answer different questions:
//!
//! - **Closed loop** ([`Load::Closed`]): C clients, each sending its next
//!   request when the previous one is answered. The throughput it reaches is
//!   the server's *capacity* at that concurrency; latency is what one waiting
//!   client sees.
//! - **Open loop** ([`Load::Open`]): requests arrive at R per second (Poisson
//!   or evenly spaced) whatever the server does, as real users do. A
//!   dispatcher thread owns the arrival clock and hands each due request to a
//!   pool of sender threads; when every sender is busy the request is counted
//!   as *not sent* (a client error) instead of being delayed, so a slow server
//!   never slows the arrivals down. Latency is measured from when the request
//!   was *due*, not from when a sender picked it up, so time spent waiting on
//!   the client side is not hidden ("coordinated omission").
//!
//! The client is blocking `ureq` on plain threads: at the rates one machine
//! can drive, a thread per in-flight request costs less than an async
//! runtime's complexity.
//!
//! With [`Config::verify_traces`], every request id the server answered with
//! (every admitted request, failed runs included) is looked up with
//! `GET /v1/traces/{id}` afterwards: the acceptance test of a server under
//! overload is that every request it admitted left a trace.
//!
//! The order of work is [`Bench::connect`] (fails fast when nothing listens),
//! then [`Bench::run`], which counts finished requests on a counter the
//! caller may show as progress.

mod client;
mod config;
mod inputs;
mod loops;

use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::time::Instant;

use serde::Serialize;

pub use self::client::TraceCheck;
use self::client::{Client, verify_traces};
pub use self::config::{Arrivals, Config, Load, OpenLoop, Stop};
pub use self::inputs::{Input, input, parse_inputs};
use self::loops::{Record, Run, closed_loop, open_loop};
use crate::BenchError;
use crate::stats::{Sample, Summary, summarize};

/// The report of one load run (the `--format json` document).
#[derive(Debug, Serialize)]
pub struct Report {
    pub url: String,
    pub topology: String,
    /// `open` or `closed`.
    pub mode: &'static str,
    pub rate: Option<f64>,
    pub arrivals: Option<Arrivals>,
    pub concurrency: Option<usize>,
    /// Open loop: sender threads.
    pub max_in_flight: Option<usize>,
    pub warmup_s: f64,
    /// Requests sent during warm-up (not in the figures).
    pub warmup_requests: u64,
    #[serde(flatten)]
    pub summary: Summary,
    pub traces: Option<TraceCheck>,
}

impl Report {
    /// Requests were sent and not one got an HTTP answer: the server is
    /// not there to measure.
    pub fn unanswered(&self) -> bool {
        let c = &self.summary.counts;
        c.sent > 0 && c.sent <= c.transport_errors.values().sum::<u64>()
    }

    /// The trace check ran and found admitted requests without a trace
    /// (missing, without an id, or not looked up).
    pub fn traces_incomplete(&self) -> bool {
        self.traces
            .as_ref()
            .is_some_and(|t| t.missing > 0 || t.without_id > 0 || !t.lookup_errors.is_empty())
    }
}

/// A load run whose server answered `GET /healthz`.
pub struct Bench {
    config: Config,
    client: Client,
}

impl Bench {
    /// Connects (one keep-alive pool for every sender) and fails fast when
    /// nothing listens at the URL.
    pub fn connect(config: Config) -> Result<Self, BenchError> {
        let connections = match config.load {
            Load::Open(open) => open.senders,
            Load::Closed { clients } => clients,
        };
        let client = Client::new(&config, connections);
        if let Err(e) = client.get("/healthz") {
            return Err(BenchError::Unavailable(format!(
                "cannot reach the server at `{}`: {e} (is `glassbox serve` running?)",
                client.base
            )));
        }
        Ok(Bench { config, client })
    }

    /// The configuration it runs.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs the load, then (if asked) the trace check. `progress` counts
    /// finished requests, warm-up included.
    pub fn run(self, progress: &AtomicU64) -> Report {
        let Bench { config, client } = self;
        let (tx, rx) = mpsc::channel();
        let run = Run {
            client,
            inputs: config.inputs.clone(),
            start: Instant::now(),
            warmup: config.warmup,
            stop: config.stop,
            results: tx,
        };
        match config.load {
            Load::Open(open) => open_loop(&run, &open, progress),
            Load::Closed { clients } => closed_loop(&run, clients, progress),
        }
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
        let open = matches!(config.load, Load::Open(_));
        let window_s = match config.stop {
            Stop::After(d) => d.as_secs_f64(),
            // Open loop offered its count over the time its arrivals spanned;
            // closed loop over the run (`summarize` falls back to it on 0).
            Stop::Count(_) if open => arrival_span(&samples),
            Stop::Count(_) => 0.0,
        };
        let summary = summarize(&samples, &config.buckets, window_s);
        let traces = config
            .verify_traces
            .then(|| verify_traces(&client, ids, without_id));
        let (rate, arrivals, concurrency, max_in_flight) = match config.load {
            Load::Open(o) => (Some(o.rate), Some(o.arrivals), None, Some(o.senders)),
            Load::Closed { clients } => (None, None, Some(clients), None),
        };
        Report {
            url: config.url,
            topology: config.topology,
            mode: if open { "open" } else { "closed" },
            rate,
            arrivals,
            concurrency,
            max_in_flight,
            warmup_s: config.warmup.as_secs_f64(),
            warmup_requests,
            summary,
            traces,
        }
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

#[cfg(test)]
mod tests;
