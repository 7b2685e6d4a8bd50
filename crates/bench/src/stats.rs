//! The numbers `glassbox bench` reports, computed from one sample per request.
//!
//! Percentiles come from the exact sorted latencies (nearest rank), not from
//! a histogram: a benchmark run holds at most a few hundred thousand samples,
//! sorting them costs milliseconds, and exact values leave nothing to argue
//! about when two runs are compared.

use std::collections::BTreeMap;

use serde::Serialize;

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer whose run did not fail.
    Ok,
    /// A 2xx answer whose body says the run failed (`"status": "error"`).
    RunFailed,
    /// 429: the topology's concurrency bound was reached.
    Rejected,
    /// Any other HTTP status.
    Status(u16),
    /// No HTTP answer: timeout, refused connection, reset, bad response.
    Transport(&'static str),
    /// Never sent: every client worker was busy when it was due (open loop).
    NotSent,
}

impl Outcome {
    /// Whether the server admitted the request (a 2xx answer).
    pub fn admitted(&self) -> bool {
        matches!(self, Outcome::Ok | Outcome::RunFailed)
    }
}

/// One request as the load generator saw it.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Index of the input-length bucket.
    pub bucket: usize,
    /// Microseconds from when the request was due to when its answer was read.
    pub latency_us: u64,
    /// Microseconds from the start of the measured window to the answer.
    pub done_us: u64,
    pub outcome: Outcome,
}

/// Input-length buckets by characters: boundaries `[64, 256, 1024]` make
/// `<64`, `64–255`, `256–1023` and `≥1024`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets {
    bounds: Vec<usize>,
}

impl Buckets {
    /// Boundaries must be positive and strictly increasing.
    pub fn new(mut bounds: Vec<usize>) -> Result<Self, String> {
        if bounds.contains(&0) {
            return Err("bucket boundaries must be positive".into());
        }
        let given = bounds.clone();
        bounds.sort_unstable();
        bounds.dedup();
        if bounds != given {
            return Err(format!(
                "bucket boundaries must be strictly increasing, got {given:?}"
            ));
        }
        Ok(Buckets { bounds })
    }

    /// How many buckets there are: one more than boundaries, so never 0.
    pub fn count(&self) -> usize {
        self.bounds.len() + 1
    }

    /// The bucket a length falls in.
    pub fn index(&self, chars: usize) -> usize {
        self.bounds.partition_point(|&b| b <= chars)
    }

    /// `(min, max)` characters of bucket `i`; `max` is `None` for the last.
    pub fn range(&self, i: usize) -> (usize, Option<usize>) {
        let min = if i == 0 { 0 } else { self.bounds[i - 1] };
        (min, self.bounds.get(i).map(|b| b - 1))
    }

    /// `<64`, `64–255`, `≥1024`.
    pub fn label(&self, i: usize) -> String {
        match (i, self.range(i)) {
            (_, (_, None)) if self.bounds.is_empty() => "all".into(),
            (0, (_, Some(max))) => format!("<{}", max + 1),
            (_, (min, None)) => format!("≥{min}"),
            (_, (min, Some(max))) => format!("{min}–{max}"),
        }
    }
}

/// Nearest-rank percentile of sorted values: the smallest value with at
/// least `p`% of the values at or below it.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

impl Latency {
    pub fn of(mut us: Vec<u64>) -> Self {
        us.sort_unstable();
        let ms = |v: Option<u64>| v.map(|u| u as f64 / 1000.0);
        let mean = (!us.is_empty())
            .then(|| us.iter().map(|&u| u as f64).sum::<f64>() / us.len() as f64 / 1000.0);
        Latency {
            count: us.len(),
            p50: ms(percentile(&us, 50.0)),
            p95: ms(percentile(&us, 95.0)),
            p99: ms(percentile(&us, 99.0)),
            max: ms(us.last().copied()),
            mean,
        }
    }
}

/// Requests by outcome. `offered = sent + not_sent` and
/// `sent = ok + run_failed + rejected + Σ http_errors + Σ transport_errors`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    pub offered: u64,
    pub sent: u64,
    pub not_sent: u64,
    pub ok: u64,
    pub run_failed: u64,
    pub rejected: u64,
    /// Other HTTP statuses, by code.
    pub http_errors: BTreeMap<u16, u64>,
    /// Requests with no HTTP answer, by kind (`timeout`, `connect`, `io`, ...).
    pub transport_errors: BTreeMap<&'static str, u64>,
}

impl Counts {
    pub fn add(&mut self, outcome: &Outcome) {
        self.offered += 1;
        if *outcome != Outcome::NotSent {
            self.sent += 1;
        }
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::RunFailed => self.run_failed += 1,
            Outcome::Rejected => self.rejected += 1,
            Outcome::Status(code) => *self.http_errors.entry(*code).or_default() += 1,
            Outcome::Transport(kind) => *self.transport_errors.entry(kind).or_default() += 1,
            Outcome::NotSent => self.not_sent += 1,
        }
    }

    /// Requests that failed for any reason other than a 429: run failures,
    /// other statuses, transport errors and requests never sent.
    pub fn errors(&self) -> u64 {
        self.run_failed
            + self.http_errors.values().sum::<u64>()
            + self.transport_errors.values().sum::<u64>()
            + self.not_sent
    }

    fn share(&self, n: u64) -> f64 {
        if self.offered == 0 {
            0.0
        } else {
            n as f64 / self.offered as f64
        }
    }
}

/// Shares of the offered requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rates {
    pub success: f64,
    pub rejected: f64,
    pub error: f64,
}

/// One input-length bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketReport {
    pub bucket: String,
    pub min_chars: usize,
    pub max_chars: Option<usize>,
    pub counts: Counts,
    /// Latency of admitted (2xx) requests.
    pub latency_ms: Latency,
}

/// Everything measured in the window (warm-up excluded).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Seconds from the start of the window to the last answer (or the end
    /// of the window, if later).
    pub elapsed_s: f64,
    /// Requests due per second (open loop: the arrival rate achieved by the
    /// generator; closed loop: requests sent per second).
    pub offered_rps: f64,
    /// Admitted (2xx) answers per second.
    pub achieved_rps: f64,
    /// Successful answers (2xx, run not failed) per second.
    pub success_rps: f64,
    pub counts: Counts,
    pub rates: Rates,
    /// Latency of admitted (2xx) requests.
    pub latency_ms: Latency,
    /// Latency of 429 answers: how fast overload is signalled.
    pub rejected_latency_ms: Latency,
    pub by_input_length: Vec<BucketReport>,
}

/// Summarises the measured samples. `window_s` is the span over which they
/// were due (the configured duration, or first to last arrival).
pub fn summarize(samples: &[Sample], buckets: &Buckets, window_s: f64) -> Summary {
    let mut counts = Counts::default();
    let mut admitted = Vec::new();
    let mut rejected = Vec::new();
    let mut per_bucket: Vec<(Counts, Vec<u64>)> = vec![Default::default(); buckets.count()];
    let mut last_done_us = 0;
    let mut first_due_us = u64::MAX;
    for s in samples {
        counts.add(&s.outcome);
        if s.outcome != Outcome::NotSent {
            last_done_us = last_done_us.max(s.done_us);
            first_due_us = first_due_us.min(s.done_us.saturating_sub(s.latency_us));
        }
        if let Some((c, lat)) = per_bucket.get_mut(s.bucket) {
            c.add(&s.outcome);
            if s.outcome.admitted() {
                lat.push(s.latency_us);
            }
        }
        if s.outcome.admitted() {
            admitted.push(s.latency_us);
        } else if s.outcome == Outcome::Rejected {
            rejected.push(s.latency_us);
        }
    }
    // From the first measured request, not the window's start: a closed
    // loop's workers start measuring only once their warm-up request is
    // answered, and that overrun is not part of the measured run.
    let first_s = if first_due_us == u64::MAX {
        0.0
    } else {
        first_due_us as f64 / 1e6
    };
    let elapsed_s = (last_done_us as f64 / 1e6 - first_s).max(window_s - first_s);
    let per_s = |n: u64| {
        if elapsed_s > 0.0 {
            n as f64 / elapsed_s
        } else {
            0.0
        }
    };
    let offered_rps = if window_s > 0.0 {
        counts.offered as f64 / window_s
    } else {
        per_s(counts.offered)
    };
    let rates = Rates {
        success: counts.share(counts.ok),
        rejected: counts.share(counts.rejected),
        error: counts.share(counts.errors()),
    };
    let by_input_length = per_bucket
        .into_iter()
        .enumerate()
        .map(|(i, (counts, lat))| {
            let (min_chars, max_chars) = buckets.range(i);
            BucketReport {
                bucket: buckets.label(i),
                min_chars,
                max_chars,
                counts,
                latency_ms: Latency::of(lat),
            }
        })
        .collect();
    Summary {
        elapsed_s,
        offered_rps,
        achieved_rps: per_s(counts.ok + counts.run_failed),
        success_rps: per_s(counts.ok),
        rates,
        latency_ms: Latency::of(admitted),
        rejected_latency_ms: Latency::of(rejected),
        by_input_length,
        counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(bucket: usize, latency_us: u64, outcome: Outcome) -> Sample {
        Sample {
            bucket,
            latency_us,
            done_us: latency_us,
            outcome,
        }
    }

    #[test]
    fn a_warm_up_overrun_is_not_counted_as_measured_time() {
        let b = Buckets::new(vec![64]).unwrap();
        // Both measured requests were sent 5 s into the window (a warm-up
        // request ran over) and took 1 s: 2 requests in 1 s.
        let late = |latency_us| Sample {
            done_us: 5_000_000 + latency_us,
            ..sample(0, latency_us, Outcome::Ok)
        };
        let s = summarize(&[late(1_000_000), late(1_000_000)], &b, 0.0);
        assert_eq!(s.elapsed_s, 1.0);
        assert_eq!(s.achieved_rps, 2.0);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 95.0), Some(95));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        // Ten values: P95 and P99 are both the largest, P50 the fifth.
        let v: Vec<u64> = (1..=10).map(|x| x * 10).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 95.0), Some(100));
        assert_eq!(percentile(&v, 90.0), Some(90));
    }

    #[test]
    fn latency_sorts_and_converts_to_ms() {
        let l = Latency::of(vec![3000, 1000, 2000, 10_000]);
        assert_eq!(l.count, 4);
        assert_eq!(l.p50, Some(2.0));
        assert_eq!(l.p99, Some(10.0));
        assert_eq!(l.max, Some(10.0));
        assert_eq!(l.mean, Some(4.0));
        assert_eq!(Latency::of(vec![]), Latency::default());
    }

    #[test]
    fn buckets_split_at_their_boundaries() {
        let b = Buckets::new(vec![64, 256, 1024]).unwrap();
        assert_eq!(b.count(), 4);
        assert_eq!(b.index(0), 0);
        assert_eq!(b.index(63), 0);
        assert_eq!(b.index(64), 1);
        assert_eq!(b.index(255), 1);
        assert_eq!(b.index(256), 2);
        assert_eq!(b.index(1023), 2);
        assert_eq!(b.index(1024), 3);
        assert_eq!(b.index(1_000_000), 3);
        let labels: Vec<String> = (0..b.count()).map(|i| b.label(i)).collect();
        assert_eq!(labels, ["<64", "64–255", "256–1023", "≥1024"]);
        assert_eq!(b.range(0), (0, Some(63)));
        assert_eq!(b.range(3), (1024, None));
        let one = Buckets::new(vec![]).unwrap();
        assert_eq!(
            (one.count(), one.index(5), one.label(0)),
            (1, 0, "all".into())
        );
    }

    #[test]
    fn bad_bucket_boundaries_are_refused() {
        assert!(Buckets::new(vec![256, 64]).is_err());
        assert!(Buckets::new(vec![64, 64]).is_err());
        assert!(Buckets::new(vec![0, 64]).is_err());
    }

    #[test]
    fn counts_add_up_and_latency_is_of_admitted_requests() {
        let b = Buckets::new(vec![64]).unwrap();
        let samples = vec![
            sample(0, 1000, Outcome::Ok),
            sample(0, 3000, Outcome::Ok),
            sample(1, 5000, Outcome::RunFailed),
            sample(1, 100, Outcome::Rejected),
            sample(0, 900_000, Outcome::Status(503)),
            sample(1, 2_000_000, Outcome::Transport("timeout")),
            sample(0, 0, Outcome::NotSent),
        ];
        let s = summarize(&samples, &b, 1.0);
        let c = &s.counts;
        assert_eq!((c.offered, c.sent, c.not_sent), (7, 6, 1));
        assert_eq!((c.ok, c.run_failed, c.rejected), (2, 1, 1));
        assert_eq!(c.http_errors.get(&503), Some(&1));
        assert_eq!(c.transport_errors.get("timeout"), Some(&1));
        assert_eq!(c.errors(), 4);
        assert_eq!(c.ok + c.rejected + c.errors(), c.offered);
        // The slowest answer ends 2 s in: throughput is over 2 s, not 1.
        assert_eq!(s.elapsed_s, 2.0);
        assert_eq!(s.offered_rps, 7.0);
        assert_eq!(s.achieved_rps, 1.5);
        assert_eq!(s.success_rps, 1.0);
        assert_eq!(s.latency_ms.count, 3);
        assert_eq!(s.latency_ms.max, Some(5.0));
        assert_eq!(s.rejected_latency_ms.count, 1);
        assert!((s.rates.success - 2.0 / 7.0).abs() < 1e-9);
        assert!((s.rates.rejected - 1.0 / 7.0).abs() < 1e-9);
        assert!((s.rates.error - 4.0 / 7.0).abs() < 1e-9);
        let short = &s.by_input_length[0];
        assert_eq!((short.bucket.as_str(), short.counts.offered), ("<64", 4));
        assert_eq!(short.latency_ms.count, 2);
        assert_eq!(short.latency_ms.p50, Some(1.0));
        let long = &s.by_input_length[1];
        assert_eq!((long.bucket.as_str(), long.counts.offered), ("≥64", 3));
        assert_eq!(long.latency_ms.count, 1);
    }

    #[test]
    fn an_empty_run_has_no_percentiles() {
        let s = summarize(&[], &Buckets::new(vec![64]).unwrap(), 0.0);
        assert_eq!(s.counts.offered, 0);
        assert_eq!(s.latency_ms.p50, None);
        assert_eq!(s.offered_rps, 0.0);
        assert_eq!(s.rates.success, 0.0);
    }
}
