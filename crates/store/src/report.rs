//! Reports over stored requests: cost, latency percentiles, per-node time and
//! cost shares, path mix and failure rates, per topology and group.
//!
//! Both stores stream narrow rows ([`RequestFacts`], [`SpanFacts`]) into the
//! same aggregator, so SQLite and PostgreSQL give identical numbers (one
//! percentile definition, nearest rank, exact). Memory is one `f64` per
//! request per metric, which is 16 MB for a million requests.
//!
//! With per-node numbers, a group also says which nodes were most often on
//! the critical path and what share of the latency they set, and (with
//! input buckets) each node's latency by input length ([`lifecycle`]).
//! Input length is the whole input's (schema 5 on), not its summary's.

mod lifecycle;
mod measure;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::Result;
use crate::query::{Filter, RequestFacts, SpanFacts, TraceStore};
pub use crate::time::{civil_from_days, days_from_civil};
use lifecycle::SpanExtras;
pub use lifecycle::{CriticalShare, NodeBucketReport};
use measure::{BUCKETS, bucket_of};
pub use measure::{Percentiles, percentiles};

/// How to slice requests within a topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// One group per topology.
    #[default]
    All,
    /// UTC calendar day, `2026-11-30`.
    Day,
    /// ISO week, `2026-W48`.
    Week,
    /// Topology version.
    Version,
    /// The models (and versions) a request used, `llm=chat-7b@3.2.1`.
    Model,
    /// Fixed time buckets of this many seconds (one of [`INTERVALS`]),
    /// named by their start in UTC, `2026-12-01T19:25:00Z`. Days start at
    /// midnight UTC, weeks on Monday.
    Every(u64),
}

/// The time buckets [`GroupBy::Every`] offers, from a minute to a week:
/// (name in the API and the dashboard, seconds).
pub const INTERVALS: &[(&str, u64)] = &[
    ("1m", 60),
    ("5m", 300),
    ("15m", 900),
    ("1h", 3_600),
    ("6h", 21_600),
    ("1d", 86_400),
    ("1w", 604_800),
];

/// The bucket size named `name` (`1m` … `1w`), in seconds.
pub fn interval(name: &str) -> Option<u64> {
    INTERVALS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// Weeks start on Monday: 1970-01-05 was the first Monday after the epoch.
const WEEK_ORIGIN_S: i64 = 4 * 86_400;

/// The start (Unix seconds) of the `secs`-long bucket holding `us`.
pub fn bucket_start(us: i64, secs: u64) -> i64 {
    let secs = i64::try_from(secs.max(1)).unwrap_or(i64::MAX);
    let t = us.div_euclid(1_000_000);
    let origin = if secs % 604_800 == 0 {
        WEEK_ORIGIN_S
    } else {
        0
    };
    (t - origin).div_euclid(secs) * secs + origin
}

/// `2026-12-01T19:25:00Z` for Unix seconds.
pub fn utc_key(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// What to compute.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportOptions {
    pub filter: Filter,
    pub group_by: GroupBy,
    /// Per-node latency and cost shares (reads every span).
    pub nodes: bool,
    /// Latency by input-length bucket (with `nodes`, per node too).
    pub input_buckets: bool,
}

/// How often one value occurs in a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    pub key: String,
    pub count: u64,
    pub share: f64,
}

/// One node's numbers in a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeReport {
    pub node: String,
    pub spans: u64,
    pub latency_ms: Percentiles,
    pub cost_total: f64,
    /// This node's part of the group's total cost.
    pub cost_share: f64,
    /// Share of attempts that ended in error or timeout.
    pub error_rate: f64,
}

/// Latency of requests whose input falls in one length bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketReport {
    pub bucket: String,
    pub requests: u64,
    pub latency_ms: Percentiles,
}

/// One topology × group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReport {
    pub topology_id: String,
    pub group: String,
    pub requests: u64,
    pub cost: Percentiles,
    pub cost_total: f64,
    pub latency_ms: Percentiles,
    pub error_rate: f64,
    pub timeout_rate: f64,
    pub fallback_rate: f64,
    /// Paths taken, most frequent first.
    pub paths: Vec<Share>,
    /// Which node was the most expensive, across requests.
    pub top_cost_nodes: Vec<Share>,
    pub nodes: Vec<NodeReport>,
    pub input_buckets: Vec<BucketReport>,
    /// Nodes on the critical path, most often first (with per-node numbers).
    pub critical_path: Vec<CriticalShare>,
    /// Per-node latency by input-length bucket (with per-node numbers and
    /// input buckets), by node then bucket.
    pub node_input_buckets: Vec<NodeBucketReport>,
}

/// The whole report, groups sorted by topology then group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub group_by: &'static str,
    pub groups: Vec<GroupReport>,
}

#[derive(Default)]
struct Acc {
    durations: Vec<f64>,
    costs: Vec<f64>,
    errors: u64,
    timeouts: u64,
    fallbacks: u64,
    paths: HashMap<String, u64>,
    top: HashMap<String, u64>,
    buckets: Vec<Vec<f64>>,
    /// Requests written with their input length (schema 5 on): those whose
    /// critical path was recorded too.
    recorded: u64,
}

#[derive(Default)]
struct NodeAcc {
    durations: Vec<f64>,
    cost: f64,
    errors: u64,
}

fn days(us: i64) -> i64 {
    us.div_euclid(86_400_000_000)
}

/// `2026-11-30` for a time in microseconds since the epoch (UTC).
pub fn day_key(us: i64) -> String {
    let (y, m, d) = civil_from_days(days(us));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `2026-W48`: the ISO week of a time (UTC).
pub fn week_key(us: i64) -> String {
    let day = days(us);
    let weekday = (day + 3).rem_euclid(7); // 0 = Monday; 1970-01-01 was a Thursday
    let thursday = day - weekday + 3;
    let (year, _, _) = civil_from_days(thursday);
    let jan1 = days_from_civil(year, 1, 1);
    let week = (thursday - jan1) / 7 + 1;
    format!("{year:04}-W{week:02}")
}

/// A request's group before it is named: days and weeks stay numbers, so
/// rows of the same group compare without formatting a date.
enum GroupId<'a> {
    All,
    Day(i64),
    Week(i64),
    /// A time bucket, by its start in Unix seconds.
    Every(i64),
    Text(std::borrow::Cow<'a, str>),
}

impl<'a> GroupId<'a> {
    fn of(by: GroupBy, started_us: i64, version: &'a str, model_key: &'a str) -> Self {
        match by {
            GroupBy::All => GroupId::All,
            GroupBy::Day => GroupId::Day(days(started_us)),
            GroupBy::Week => {
                let day = days(started_us);
                GroupId::Week(day - (day + 3).rem_euclid(7))
            }
            GroupBy::Every(secs) => GroupId::Every(bucket_start(started_us, secs)),
            GroupBy::Version => GroupId::Text(version.into()),
            GroupBy::Model => GroupId::Text(if model_key.is_empty() {
                "(no model)".into()
            } else {
                model_key.into()
            }),
        }
    }

    fn matches(&self, other: &GroupId<'_>) -> bool {
        match (self, other) {
            (GroupId::All, GroupId::All) => true,
            (GroupId::Day(a), GroupId::Day(b))
            | (GroupId::Week(a), GroupId::Week(b))
            | (GroupId::Every(a), GroupId::Every(b)) => a == b,
            (GroupId::Text(a), GroupId::Text(b)) => a == b,
            _ => false,
        }
    }

    fn owned(&self) -> GroupId<'static> {
        match self {
            GroupId::All => GroupId::All,
            GroupId::Day(d) => GroupId::Day(*d),
            GroupId::Week(w) => GroupId::Week(*w),
            GroupId::Every(t) => GroupId::Every(*t),
            GroupId::Text(t) => GroupId::Text(t.to_string().into()),
        }
    }

    fn name(&self) -> String {
        const US_PER_DAY: i64 = 86_400_000_000;
        match self {
            GroupId::All => "all".to_string(),
            GroupId::Day(d) => day_key(d * US_PER_DAY),
            GroupId::Week(monday) => week_key(monday * US_PER_DAY),
            GroupId::Every(start) => utc_key(*start),
            GroupId::Text(t) => t.to_string(),
        }
    }
}

fn shares(counts: HashMap<String, u64>, total: u64) -> Vec<Share> {
    let mut v: Vec<Share> = counts
        .into_iter()
        .map(|(key, count)| Share {
            key,
            count,
            share: ratio(count, total),
        })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    v
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Computes the report from a store.
pub fn build(store: &mut dyn TraceStore, options: &ReportOptions) -> Result<Report> {
    let by = options.group_by;
    // Rows come in no particular order but mostly in runs of the same
    // topology and group, so the last key is remembered and the maps are
    // only searched (and keys only allocated) when it changes.
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut accs: Vec<Acc> = Vec::new();
    let mut last: Option<(String, GroupId<'static>, usize)> = None;
    store.scan_requests(&options.filter, &mut |r: RequestFacts<'_>| {
        let gid = GroupId::of(by, r.started_at_us, r.version, r.model_key);
        let i = match &last {
            Some((t, g, i)) if t == r.topology_id && g.matches(&gid) => *i,
            _ => {
                let key = (r.topology_id.to_string(), gid.name());
                let i = *index.entry(key).or_insert_with(|| {
                    accs.push(Acc::default());
                    accs.len() - 1
                });
                last = Some((r.topology_id.to_string(), gid.owned(), i));
                i
            }
        };
        let acc = &mut accs[i];
        let ms = r.duration_us as f64 / 1000.0;
        acc.durations.push(ms);
        acc.costs.push(r.cost);
        acc.errors += u64::from(r.status == "failed");
        acc.timeouts += u64::from(r.timeouts > 0);
        acc.fallbacks += u64::from(r.degraded);
        match acc.paths.get_mut(r.path_key) {
            Some(c) => *c += 1,
            None => {
                acc.paths.insert(r.path_key.to_string(), 1);
            }
        }
        if let Some(top) = r.top_node {
            match acc.top.get_mut(top) {
                Some(c) => *c += 1,
                None => {
                    acc.top.insert(top.to_string(), 1);
                }
            }
        }
        if options.input_buckets {
            if acc.buckets.is_empty() {
                acc.buckets = vec![Vec::new(); BUCKETS.len()];
            }
            acc.buckets[bucket_of(r.input_length())].push(ms);
        }
        acc.recorded += u64::from(r.input_len.is_some());
    })?;

    // Per-node accumulators, by group index (as `accs`). Spans of groups no
    // reported request falls into are not reported, so they are skipped.
    let mut nodes: Vec<BTreeMap<String, NodeAcc>> = Vec::new();
    nodes.resize_with(accs.len(), BTreeMap::new);
    let mut extras: Vec<SpanExtras> = Vec::new();
    extras.resize_with(accs.len(), SpanExtras::default);
    if options.nodes {
        let mut filter = options.filter.clone();
        filter.status = None;
        // Same run-of-keys shortcut as the request scan: no allocation per span.
        let mut last: Option<(String, GroupId<'static>, Option<usize>)> = None;
        store.scan_spans(&filter, &mut |s: SpanFacts<'_>| {
            let gid = GroupId::of(by, s.req_started_at_us, s.version, s.model_key);
            let i = match &last {
                Some((t, g, i)) if t == s.topology_id && g.matches(&gid) => *i,
                _ => {
                    let i = index.get(&(s.topology_id.to_string(), gid.name())).copied();
                    last = Some((s.topology_id.to_string(), gid.owned(), i));
                    i
                }
            };
            let Some(per_node) = i.and_then(|i| nodes.get_mut(i)) else {
                return;
            };
            if let Some(extra) = i.and_then(|i| extras.get_mut(i)) {
                extra.add(&s, options.input_buckets);
            }
            let acc = match per_node.get_mut(s.node) {
                Some(acc) => acc,
                None => per_node.entry(s.node.to_string()).or_default(),
            };
            acc.durations.push(s.duration_us as f64 / 1000.0);
            acc.cost += s.cost;
            acc.errors += u64::from(s.status == "error" || s.status == "timeout");
        })?;
    }

    let mut accs: Vec<Option<Acc>> = accs.into_iter().map(Some).collect();
    let mut out: Vec<GroupReport> = index
        .into_iter()
        .filter_map(|(key, i)| Some((key, i, accs.get_mut(i)?.take()?)))
        .map(|((topology_id, group), i, mut acc)| {
            let n = acc.durations.len() as u64;
            let cost_total: f64 = acc.costs.iter().sum();
            let node_accs = nodes.get_mut(i).map(std::mem::take).unwrap_or_default();
            let (critical_path, node_input_buckets) = extras
                .get_mut(i)
                .map(std::mem::take)
                .unwrap_or_default()
                .finish(acc.recorded);
            let node_cost: f64 = node_accs.values().map(|a| a.cost).sum();
            let mut node_reports: Vec<NodeReport> = node_accs
                .into_iter()
                .map(|(node, mut a)| NodeReport {
                    spans: a.durations.len() as u64,
                    error_rate: ratio(a.errors, a.durations.len() as u64),
                    latency_ms: percentiles(&mut a.durations),
                    cost_share: if node_cost > 0.0 {
                        a.cost / node_cost
                    } else {
                        0.0
                    },
                    cost_total: a.cost,
                    node,
                })
                .collect();
            node_reports.sort_by(|a, b| b.latency_ms.p95.total_cmp(&a.latency_ms.p95));
            let input_buckets = acc
                .buckets
                .iter_mut()
                .zip(BUCKETS)
                .filter(|(v, _)| !v.is_empty())
                .map(|(v, (_, name))| BucketReport {
                    bucket: (*name).to_string(),
                    requests: v.len() as u64,
                    latency_ms: percentiles(v),
                })
                .collect();
            GroupReport {
                requests: n,
                cost: percentiles(&mut acc.costs),
                cost_total,
                latency_ms: percentiles(&mut acc.durations),
                error_rate: ratio(acc.errors, n),
                timeout_rate: ratio(acc.timeouts, n),
                fallback_rate: ratio(acc.fallbacks, n),
                paths: shares(acc.paths, n),
                top_cost_nodes: shares(acc.top, n),
                nodes: node_reports,
                input_buckets,
                critical_path,
                node_input_buckets,
                topology_id,
                group,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.topology_id
            .cmp(&b.topology_id)
            .then_with(|| a.group.cmp(&b.group))
    });
    Ok(Report {
        group_by: match by {
            GroupBy::All => "all",
            GroupBy::Day => "day",
            GroupBy::Week => "week",
            GroupBy::Version => "version",
            GroupBy::Model => "model",
            GroupBy::Every(secs) => INTERVALS
                .iter()
                .find(|(_, s)| *s == secs)
                .map_or("interval", |(n, _)| *n),
        },
        groups: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = percentiles(&mut v);
        assert_eq!((p.p50, p.p95, p.p99), (50.0, 95.0, 99.0));
        assert_eq!(p.mean, 50.5);
        assert_eq!(percentiles(&mut [7.0]).p99, 7.0);
        assert_eq!(percentiles(&mut []), Percentiles::default());
    }

    #[test]
    fn time_buckets_from_a_minute_to_a_week() {
        // 2026-12-01 19:27:42.5 UTC, a Tuesday.
        let us = 1_796_153_262_500_000;
        let key = |name| utc_key(bucket_start(us, interval(name).unwrap()));
        assert_eq!(utc_key(us / 1_000_000), "2026-12-01T19:27:42Z");
        assert_eq!(key("1m"), "2026-12-01T19:27:00Z");
        assert_eq!(key("5m"), "2026-12-01T19:25:00Z");
        assert_eq!(key("15m"), "2026-12-01T19:15:00Z");
        assert_eq!(key("1h"), "2026-12-01T19:00:00Z");
        assert_eq!(key("6h"), "2026-12-01T18:00:00Z");
        assert_eq!(key("1d"), "2026-12-01T00:00:00Z");
        assert_eq!(key("1w"), "2026-11-30T00:00:00Z", "weeks start on Monday");
        assert_eq!(interval("2m"), None);
        // Before the epoch too (div_euclid, not truncation).
        assert_eq!(utc_key(bucket_start(-1, 60)), "1969-12-31T23:59:00Z");
    }

    #[test]
    fn calendar_keys() {
        assert_eq!(day_key(0), "1970-01-01");
        // 2024-02-29 12:00 UTC
        assert_eq!(day_key(1_709_208_000_000_000), "2024-02-29");
        // 2021-01-03 (Sunday) belongs to 2020-W53; 2021-01-04 starts 2021-W01.
        assert_eq!(week_key(1_609_675_200_000_000), "2020-W53");
        assert_eq!(week_key(1_609_761_600_000_000), "2021-W01");
        // 2026-11-30 is a Monday of ISO week 49.
        assert_eq!(week_key(1_796_040_000_000_000), "2026-W49");
    }
}
