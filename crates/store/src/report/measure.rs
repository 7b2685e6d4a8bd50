//! What reports measure with: nearest-rank percentiles, and the
//! input-length buckets latencies are grouped by.

use serde::Serialize;

/// P50/P95/P99 (and mean) of a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// Input-length buckets (characters of the whole input).
pub(super) const BUCKETS: &[(i64, &str)] = &[
    (256, "<256"),
    (1024, "256-1k"),
    (4096, "1k-4k"),
    (16384, "4k-16k"),
    (i64::MAX, ">=16k"),
];

/// The bucket an input of `len` characters falls in.
pub(super) fn bucket_of(len: i64) -> usize {
    BUCKETS
        .iter()
        .position(|(limit, _)| len < *limit)
        .unwrap_or(BUCKETS.len() - 1)
}

/// Nearest-rank percentiles of `values` (sorted in place).
pub fn percentiles(values: &mut [f64]) -> Percentiles {
    if values.is_empty() {
        return Percentiles::default();
    }
    values.sort_unstable_by(f64::total_cmp);
    let n = values.len();
    let at = |p: f64| {
        let rank = (p * n as f64).ceil() as usize;
        values[rank.clamp(1, n) - 1]
    };
    Percentiles {
        mean: values.iter().sum::<f64>() / n as f64,
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
    }
}
