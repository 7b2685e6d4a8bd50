//! The parts of a report read from each span beyond its own numbers: which
//! nodes were on the critical path and what share of the latency they set,
//! and per-node latency by the request's input length.
//!
//! Both read columns the writer fills from schema 5 on (`critical_us`,
//! `req_input_len`); spans written before have neither and are left out of
//! these two sections (their requests still count everywhere else).

use std::collections::BTreeMap;

use serde::Serialize;

use super::measure::{BUCKETS, Percentiles, bucket_of, percentiles};
use crate::query::SpanFacts;

/// How often one node was on the critical path, and what it set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalShare {
    pub node: String,
    /// Requests whose critical path went through this node.
    pub requests: u64,
    /// Of the requests whose critical path is known (written at schema 5
    /// or later).
    pub rate: f64,
    /// This node's part of the time critical paths took, summed over the
    /// group: how much of the latency it set.
    pub latency_share: f64,
    /// What it added to a request's latency when on the path, mean ms.
    pub added_ms_mean: f64,
}

/// One node's latency for requests in one input-length bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeBucketReport {
    pub node: String,
    pub bucket: String,
    pub spans: u64,
    pub latency_ms: Percentiles,
}

/// Per group: what the spans add up to.
#[derive(Default)]
pub(super) struct SpanExtras {
    /// node → (times on the path, added µs summed).
    critical: BTreeMap<String, (u64, f64)>,
    /// (node, bucket) → span latencies, ms.
    buckets: BTreeMap<(String, usize), Vec<f64>>,
}

impl SpanExtras {
    pub(super) fn add(&mut self, s: &SpanFacts<'_>, by_input: bool) {
        if let Some(added) = s.critical_us {
            let e = match self.critical.get_mut(s.node) {
                Some(e) => e,
                None => self.critical.entry(s.node.to_string()).or_default(),
            };
            e.0 += 1;
            e.1 += added as f64;
        }
        if by_input && let Some(len) = s.req_input_len {
            self.buckets
                .entry((s.node.to_string(), bucket_of(len)))
                .or_default()
                .push(s.duration_us as f64 / 1000.0);
        }
    }

    /// The two sections; `known` is the number of requests whose critical
    /// path was recorded.
    pub(super) fn finish(self, known: u64) -> (Vec<CriticalShare>, Vec<NodeBucketReport>) {
        let total: f64 = self.critical.values().map(|(_, us)| us).sum();
        let mut critical: Vec<CriticalShare> = self
            .critical
            .into_iter()
            .map(|(node, (n, us))| CriticalShare {
                node,
                requests: n,
                rate: if known == 0 {
                    0.0
                } else {
                    n as f64 / known as f64
                },
                latency_share: if total > 0.0 { us / total } else { 0.0 },
                added_ms_mean: if n == 0 { 0.0 } else { us / n as f64 / 1000.0 },
            })
            .collect();
        critical.sort_by(|a, b| {
            b.requests
                .cmp(&a.requests)
                .then_with(|| b.latency_share.total_cmp(&a.latency_share))
                .then_with(|| a.node.cmp(&b.node))
        });
        let buckets = self
            .buckets
            .into_iter()
            .map(|((node, b), mut v)| NodeBucketReport {
                node,
                bucket: BUCKETS[b].1.to_string(),
                spans: v.len() as u64,
                latency_ms: percentiles(&mut v),
            })
            .collect();
        (critical, buckets)
    }
}
