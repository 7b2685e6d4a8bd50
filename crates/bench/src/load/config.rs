//! A load run's resolved, validated settings: where, what, how the load is
//! offered and when it stops.

use std::time::Duration;

use serde::Serialize;

use super::inputs::Input;
use crate::stats::Buckets;

/// How open-loop arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps: independent users.
    Poisson,
    /// Evenly spaced.
    Fixed,
}

/// Open-loop settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenLoop {
    /// Requests due per second (above 0).
    pub rate: f64,
    pub arrivals: Arrivals,
    /// Sender threads: the most requests in flight at once.
    pub senders: usize,
    /// Seed of the Poisson arrivals.
    pub seed: u64,
}

/// How the load is offered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    Open(OpenLoop),
    /// This many clients, each waiting for its answer before sending again.
    Closed {
        clients: usize,
    },
}

/// When the load stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this long of measuring.
    After(Duration),
    /// After this many measured requests.
    Count(u64),
}

/// A resolved, validated load run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Base URL of the server.
    pub url: String,
    /// Topology id to run.
    pub topology: String,
    /// Sent as `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// The request inputs, used in turn (at least one).
    pub inputs: Vec<Input>,
    pub buckets: Buckets,
    pub load: Load,
    pub stop: Stop,
    /// Load sent before measuring starts, left out of the figures.
    pub warmup: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Look every admitted request's trace up afterwards.
    pub verify_traces: bool,
}
