//! Percentiles and the report of one simulated run.

use serde::Serialize;

/// Mean and nearest-rank percentiles of a sample, in its unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Of `values` (sorted in place); all zero when empty.
    pub fn of(values: &mut [f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        Self {
            count: values.len(),
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50: nearest_rank(values, 0.50),
            p95: nearest_rank(values, 0.95),
            p99: nearest_rank(values, 0.99),
        }
    }
}

/// The nearest-rank `q` quantile of an ascending, non-empty sample: the
/// smallest value with at least `q` of the sample at or below it.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[i - 1]
}

/// What one simulated run measured (the first `warmup` tasks left out).
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub profile: &'static str,
    pub replicas: u32,
    /// Offered task rate, per second.
    pub rate: f64,
    /// Tasks measured (after warm-up).
    pub tasks: usize,
    /// LLM calls of those tasks.
    pub calls: usize,
    /// Calls that could never fit in one replica's KV cache.
    pub rejected: usize,
    pub preemptions: u64,
    /// Time to first token of each call, ms.
    pub ttft_ms: Percentiles,
    /// Mean time per output token after the first, per call (calls with at
    /// least two output tokens), ms.
    pub tpot_ms: Percentiles,
    /// Arrival to last token of each task (all its calls), ms.
    pub e2e_ms: Percentiles,
    /// Sequences per engine step, on average.
    pub mean_batch: f64,
    /// Fraction of replica time spent in steps.
    pub utilisation: f64,
    /// Tasks finished per second over the measured window.
    pub throughput_per_s: f64,
    /// Tasks meeting every SLA target per second.
    pub goodput_per_s: f64,
    /// Fraction of measured tasks meeting every SLA target.
    pub sla_met: f64,
    /// Whether the P99s meet the targets and nothing was rejected.
    pub meets_sla: bool,
    /// Seconds of simulated arrivals measured.
    pub window_s: f64,
    /// Seconds from 0 to the last event (every call done): the benchmark's
    /// duration when all tasks are sent at once or by a closed loop.
    pub makespan_s: f64,
}
