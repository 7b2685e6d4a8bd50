//! Request latency histograms of the engine, bucketed like vLLM's (TTFT,
//! time per output token, queue time, end-to-end), so dashboards and
//! placement logic built for vLLM read Glassbox the same way.
//!
//! With them, the worker's load gauges ([`Load`], read as [`EngineLoad`]).
//!
//! Lock-free: the worker thread observes, any thread takes a snapshot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::Timing;

/// What the worker is doing, for metrics (vLLM's `num_requests_running` /
/// `num_requests_waiting`, KV usage).
#[derive(Debug, Default)]
pub(super) struct Load {
    pub(super) running: AtomicUsize,
    pub(super) waiting: AtomicUsize,
    pub(super) kv_reserved: AtomicUsize,
    pub(super) prefix_queries: AtomicU64,
    pub(super) prefix_hits: AtomicU64,
    pub(super) prefix_host_hits: AtomicU64,
    pub(super) host_cache_bytes: AtomicUsize,
    pub(super) chunk_placed_tokens: AtomicU64,
    pub(super) chunk_cache_bytes: AtomicUsize,
    pub(super) spec_drafts: AtomicU64,
    pub(super) spec_draft_tokens: AtomicU64,
    pub(super) spec_accepted_tokens: AtomicU64,
    pub(super) preemptions: AtomicU64,
    pub(super) generation_tokens: AtomicU64,
    pub(super) latencies: Latencies,
}

/// A snapshot of the engine's load.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineLoad {
    /// Requests in the running batch.
    pub running: usize,
    /// Requests admitted to the queue but not yet running.
    pub waiting: usize,
    /// KV cells reserved by the running requests.
    pub kv_reserved: usize,
    /// KV cells in all.
    pub kv_cells: usize,
    /// Prompt tokens of admitted requests, in total (vLLM's
    /// `prefix_cache_queries`).
    pub prefix_queries: u64,
    /// Of those, tokens whose KV was reused from an earlier request with the
    /// same prefix (vLLM's `prefix_cache_hits`).
    pub prefix_hits: u64,
    /// Of those, tokens restored from the host-memory tier (a prompt whose
    /// slot had been taken by another request).
    pub prefix_host_hits: u64,
    /// Bytes of prompt KV held in host memory now.
    pub host_cache_bytes: usize,
    /// Per-chunk KV reuse (`kv_reuse: chunks`): prompt tokens whose KV was
    /// placed from the chunk cache so far, and the bytes it holds now.
    pub chunk_placed_tokens: u64,
    pub chunk_cache_bytes: usize,
    /// Speculative decoding: finished requests that drafted, their draft
    /// tokens, and of those the accepted ones (vLLM's
    /// `spec_decode_num_draft_tokens` and `…_num_accepted_tokens`).
    pub spec_drafts: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted_tokens: u64,
    /// Requests preempted so far because the KV pool ran out (vLLM's
    /// `num_preemptions`); always 0 without a pool (`kv_cache_cells`).
    pub preemptions: u64,
    /// Output tokens generated so far (vLLM's `generation_tokens`); its
    /// rise over an interval is the engine's output tok/s.
    pub generation_tokens: u64,
    /// TTFT, time per output token, queue time and end-to-end latency of
    /// the requests finished so far.
    pub latency: LatencyStats,
}

/// Upper bounds, in seconds, of vLLM's `time_to_first_token_seconds` buckets.
const TTFT_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// Upper bounds of vLLM's `time_per_output_token_seconds` buckets.
const TPOT_BOUNDS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// Upper bounds of vLLM's request-level buckets (queue time, end-to-end).
const REQUEST_BOUNDS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A fixed-bucket histogram of seconds.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, then the overflow (+Inf) bucket.
    counts: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    fn observe(&self, seconds: f64) {
        let seconds = seconds.max(0.0);
        let at = self.bounds.partition_point(|&b| b < seconds);
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }

    fn snapshot(&self) -> HistogramSnapshot {
        let buckets = self
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect::<Vec<_>>();
        HistogramSnapshot {
            count: buckets.iter().map(|(_, n)| n).sum(),
            sum: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
            buckets,
        }
    }
}

/// A histogram at one moment: `(upper bound in seconds, observations in
/// this bucket)`, the last bound +Inf; counts are per bucket, not cumulative.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

impl HistogramSnapshot {
    /// The smallest bucket bound below which at least `q` of the
    /// observations fall (an upper estimate of the quantile).
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let want = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        self.buckets.iter().find_map(|&(bound, n)| {
            seen += n;
            (seen >= want).then_some(bound)
        })
    }
}

/// The engine's request latency histograms.
#[derive(Debug)]
pub(super) struct Latencies {
    ttft: Histogram,
    tpot: Histogram,
    queue: Histogram,
    e2e: Histogram,
}

impl Default for Latencies {
    fn default() -> Self {
        Self {
            ttft: Histogram::new(TTFT_BOUNDS),
            tpot: Histogram::new(TPOT_BOUNDS),
            queue: Histogram::new(REQUEST_BOUNDS),
            e2e: Histogram::new(REQUEST_BOUNDS),
        }
    }
}

impl Latencies {
    /// Records a finished request.
    pub(super) fn observe(&self, t: &Timing) {
        self.queue.observe(t.queue_ms / 1e3);
        self.e2e.observe(t.e2e_ms / 1e3);
        if let Some(ms) = t.ttft_ms {
            self.ttft.observe(ms / 1e3);
        }
        if let Some(ms) = t.tpot_ms {
            self.tpot.observe(ms / 1e3);
        }
    }

    pub(super) fn snapshot(&self) -> LatencyStats {
        LatencyStats {
            time_to_first_token: self.ttft.snapshot(),
            time_per_output_token: self.tpot.snapshot(),
            queue_time: self.queue.snapshot(),
            e2e_latency: self.e2e.snapshot(),
        }
    }
}

/// Snapshots of the engine's latency histograms since it started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyStats {
    pub time_to_first_token: HistogramSnapshot,
    pub time_per_output_token: HistogramSnapshot,
    pub queue_time: HistogramSnapshot,
    pub e2e_latency: HistogramSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.1); // a bound is inclusive, as in Prometheus
        h.observe(0.5);
        h.observe(3.0);
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(0.1, 2), (1.0, 1), (f64::INFINITY, 1)]);
        assert_eq!(s.count, 4);
        assert!((s.sum - 3.65).abs() < 1e-6, "{}", s.sum);
        assert_eq!(s.quantile_bound(0.5), Some(0.1));
        assert_eq!(s.quantile_bound(0.75), Some(1.0));
        assert_eq!(s.quantile_bound(0.99), Some(f64::INFINITY));
        assert_eq!(HistogramSnapshot::default().quantile_bound(0.5), None);
    }

    #[test]
    fn a_request_without_tokens_has_no_ttft() {
        let l = Latencies::default();
        l.observe(&Timing {
            queue_ms: 20.0,
            ttft_ms: None,
            tpot_ms: None,
            e2e_ms: 30.0,
        });
        let s = l.snapshot();
        assert_eq!(s.queue_time.count, 1);
        assert_eq!(s.e2e_latency.count, 1);
        assert_eq!(s.time_to_first_token.count, 0);
        assert_eq!(s.time_per_output_token.count, 0);
    }
}
