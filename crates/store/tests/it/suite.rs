//! The one test suite every store passes. `store_suite!(open_fn)` makes a
//! `#[test]` per case for a backend.

use std::sync::Arc;

use glassbox_store::report::{self, GroupBy, ReportOptions};
use glassbox_store::row::encode;
use glassbox_store::synth::{SynthRequest, build};
use glassbox_store::{
    Filter, ListQuery, RedactOptions, Redactor, Sort, StoreWriter, TraceStore, WriterOptions,
};
use glassbox_trace::{RequestId, TraceSink};

use crate::fixture::Fixture;

macro_rules! store_suite {
    ($open:path) => {
        #[test]
        fn schema_is_versioned_and_migrations_are_idempotent() {
            crate::suite::schema_is_versioned(&mut $open())
        }
        #[test]
        fn records_round_trip() {
            crate::suite::records_round_trip(&mut $open())
        }
        #[test]
        fn list_filters_and_sorts() {
            crate::suite::list_filters_and_sorts(&mut $open())
        }
        #[test]
        fn rewriting_a_request_replaces_it() {
            crate::suite::rewriting_replaces(&mut $open())
        }
        #[test]
        fn large_batches_round_trip() {
            crate::suite::large_batches_round_trip(&mut $open())
        }
        #[test]
        fn report_numbers() {
            crate::suite::report_numbers(&mut $open())
        }
        #[test]
        fn report_time_buckets() {
            crate::suite::report_time_buckets(&mut $open())
        }
        #[test]
        fn compare_marks_no_difference_between_alike_versions() {
            crate::compare::same_versions_get_no_mark(&mut *$open().store)
        }
        #[test]
        fn compare_marks_real_differences() {
            crate::compare::real_differences_are_marked(&mut *$open().store)
        }
        #[test]
        fn input_length_and_critical_path_reports() {
            crate::suite::input_length_and_critical_path(&mut $open())
        }
        #[test]
        fn writer_persists_redacted_records() {
            crate::suite::writer_persists_redacted(&mut $open())
        }
    };
}
pub(crate) use store_suite;

const DAY: u64 = 86_400_000_000;
/// 2026-11-30 00:00:00 UTC.
pub const T0: u64 = 1_795_996_800_000_000;

pub fn put(store: &mut dyn TraceStore, req: &SynthRequest) {
    let (record, spans) = build(req);
    let spans: Vec<_> = spans.into_iter().map(Arc::new).collect();
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let (row, span_rows) = encode(&record, &spans, &red);
    store.write(&[row], &span_rows).unwrap();
}

/// Each request reads back as built, except what rows written before schema
/// 5 do not have (the real input length).
pub fn assert_stored_before_5(store: &mut dyn TraceStore, reqs: &[SynthRequest]) {
    for r in reqs {
        let (mut record, spans) = build(r);
        record.input_chars = None;
        record.input_tokens = None;
        let got = store.get(r.id).unwrap().expect("stored request");
        assert_eq!(got.record, record);
        assert_eq!(got.spans, spans);
    }
}

/// Regression (issue 16, item 8): requests are grouped by the length of
/// their whole input, not of the stored summary (cut to 200 characters, so
/// every request used to land in `<256`); per-node latency by input length;
/// the nodes most often on the critical path.
pub fn input_length_and_critical_path(f: &mut Fixture) {
    // 12 short questions, 8 long (3,000 characters) answered more slowly.
    let mut reqs = Vec::new();
    for i in 0..20u64 {
        let mut r = SynthRequest::new(300 + i, T0 + i);
        let long = i >= 12;
        r.input = if long {
            "q".repeat(3_000)
        } else {
            format!("short {i}")
        };
        r.llm_us = if long { 400_000 } else { 100_000 };
        r.retrieval = i % 2 == 0;
        put(&mut *f.store, &r);
        reqs.push(r);
    }
    // The record reads back as built, with the real length (`input_chars`).
    for r in &reqs {
        let got = f.store.get(r.id).unwrap().expect("stored request");
        assert_eq!(got.record, build(r).0);
    }
    let got = f
        .store
        .get(SynthRequest::new(319, T0 + 19).id)
        .unwrap()
        .unwrap();
    assert_eq!(got.record.input_chars, Some(3_000));
    assert!(got.record.input_summary.chars().count() <= 201);
    let rep = report::build(
        &mut *f.store,
        &ReportOptions {
            nodes: true,
            input_buckets: true,
            ..ReportOptions::default()
        },
    )
    .unwrap();
    let g = &rep.groups[0];
    let buckets: Vec<(&str, u64)> = g
        .input_buckets
        .iter()
        .map(|b| (b.bucket.as_str(), b.requests))
        .collect();
    assert_eq!(buckets, [("<256", 12), ("1k-4k", 8)]);
    let llm = |bucket: &str| {
        g.node_input_buckets
            .iter()
            .find(|b| b.node == "llm" && b.bucket == bucket)
            .unwrap()
    };
    assert_eq!((llm("<256").spans, llm("<256").latency_ms.p99), (12, 100.0));
    assert_eq!(
        (llm("1k-4k").spans, llm("1k-4k").latency_ms.p50),
        (8, 400.0)
    );
    // Every request's critical path runs through route, prompt, llm and
    // validate; retrieval only for half of them. The LLM sets most of it.
    let crit = |node: &str| g.critical_path.iter().find(|c| c.node == node).unwrap();
    assert_eq!((crit("llm").requests, crit("llm").rate), (20, 1.0));
    assert_eq!((crit("embed").requests, crit("embed").rate), (10, 0.5));
    assert!(crit("llm").latency_share > 0.9, "{:?}", g.critical_path);
    let shares: f64 = g.critical_path.iter().map(|c| c.latency_share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    assert_eq!(g.critical_path[0].requests, 20);
}

pub fn schema_is_versioned(f: &mut Fixture) {
    assert_eq!(f.store.schema_version().unwrap(), 5);
    put(&mut *f.store, &SynthRequest::new(1, T0));
    // Opening again migrates nothing and keeps the data.
    let mut again = f.reopen();
    assert_eq!(again.schema_version().unwrap(), 5);
    assert_eq!(again.counts().unwrap().0, 1);
    again.integrity_check().unwrap();
}

pub fn records_round_trip(f: &mut Fixture) {
    let mut req = SynthRequest::new(7, T0 + 5);
    req.fallback = true;
    let (record, spans) = build(&req);
    put(&mut *f.store, &req);
    let got = f.store.get(req.id).unwrap().expect("stored");
    assert_eq!(got.record, record);
    assert_eq!(got.spans, spans);
    assert_eq!(got.record.receipt.total, got.record.receipt.sum_of_lines());
    assert!(f.store.get(RequestId(42)).unwrap().is_none());
    assert_eq!(f.store.counts().unwrap(), (1, spans.len() as u64));
    f.store.integrity_check().unwrap();
}

fn mixed(store: &mut dyn TraceStore) {
    for i in 0..10u64 {
        let mut r = SynthRequest::new(i + 1, T0 + i * 1000);
        r.llm_us = 100_000 + i * 10_000;
        r.retrieval = i % 2 == 0;
        r.failed = i == 3;
        if i >= 8 {
            r.version = "3.3.0".into();
        }
        if i == 9 {
            r.topology = "summarise".into();
        }
        put(store, &r);
    }
}

pub fn list_filters_and_sorts(f: &mut Fixture) {
    mixed(&mut *f.store);
    let all = f.store.list(&ListQuery::default()).unwrap();
    assert_eq!(all.len(), 10);
    assert!(
        all.windows(2)
            .all(|w| w[0].started_at_us >= w[1].started_at_us)
    );

    let q = |filter: Filter| ListQuery {
        filter,
        ..ListQuery::default()
    };
    let rag = f
        .store
        .list(&q(Filter {
            topology: Some("rag-chat".into()),
            ..Filter::default()
        }))
        .unwrap();
    assert_eq!(rag.len(), 9);
    let v = f
        .store
        .list(&q(Filter {
            version: Some("3.3.0".into()),
            ..Filter::default()
        }))
        .unwrap();
    assert_eq!(v.len(), 2);
    let failed = f
        .store
        .list(&q(Filter {
            status: Some("failed".into()),
            ..Filter::default()
        }))
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].error_code.as_deref(), Some("guard_failed"));
    let window = f
        .store
        .list(&q(Filter {
            since_us: Some((T0 + 2000) as i64),
            until_us: Some((T0 + 5000) as i64),
            ..Filter::default()
        }))
        .unwrap();
    assert_eq!(window.len(), 3);

    let slowest = f
        .store
        .list(&ListQuery {
            sort: Sort::Slowest,
            limit: 3,
            ..ListQuery::default()
        })
        .unwrap();
    assert_eq!(slowest.len(), 3);
    assert!(
        slowest
            .windows(2)
            .all(|w| w[0].duration_us >= w[1].duration_us)
    );
    // i = 8: 180 ms of LLM plus retrieval beats i = 9's 190 ms direct path.
    assert_eq!(
        slowest[0].request_id,
        SynthRequest::new(9, T0 + 8000).id.to_string()
    );

    let costliest = f
        .store
        .list(&ListQuery {
            sort: Sort::Costliest,
            limit: 1,
            ..ListQuery::default()
        })
        .unwrap();
    // Retrieval requests cost more (embed + retrieve); the first is id 1.
    assert!(costliest[0].path.contains("retrieve"), "{costliest:?}");
}

pub fn rewriting_replaces(f: &mut Fixture) {
    let req = SynthRequest::new(3, T0);
    put(&mut *f.store, &req);
    put(&mut *f.store, &req);
    assert_eq!(f.store.counts().unwrap(), (1, 6));
}

/// One write of many rows (SQLite inserts them 16 to a statement), with a
/// request repeated inside the batch: every row lands, the later copy wins.
pub fn large_batches_round_trip(f: &mut Fixture) {
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let mut rows = Vec::new();
    let mut span_rows = Vec::new();
    let mut expected = Vec::new();
    for i in 0..37u64 {
        let mut req = SynthRequest::new(100 + i, T0 + i * 10);
        req.retrieval = i % 3 != 0;
        req.fallback = i % 5 == 1;
        let (record, spans) = build(&req);
        let spans: Vec<_> = spans.into_iter().map(Arc::new).collect();
        let (row, srows) = encode(&record, &spans, &red);
        rows.push(row);
        span_rows.extend(srows);
        expected.push((req, record, spans));
    }
    // Request 100 again, now failed: same id, same span keys.
    let mut again = SynthRequest::new(100, T0);
    again.failed = true;
    let (failed, failed_spans) = build(&again);
    let failed_spans: Vec<_> = failed_spans.into_iter().map(Arc::new).collect();
    let (row, srows) = encode(&failed, &failed_spans, &red);
    rows.push(row);
    span_rows.extend(srows);
    assert!(span_rows.len() > 100, "{}", span_rows.len());
    f.store.write(&rows, &span_rows).unwrap();

    for (req, record, spans) in &expected[1..] {
        let got = f.store.get(req.id).unwrap().expect("stored");
        assert_eq!(&got.record, record);
        let spans: Vec<_> = spans.iter().map(|s| (**s).clone()).collect();
        assert_eq!(got.spans, spans);
    }
    let got = f.store.get(again.id).unwrap().expect("stored");
    assert_eq!(got.record, failed);
    let (_, first_spans) = build(&SynthRequest::new(100, T0));
    let kept = first_spans.len().max(failed_spans.len());
    let total: usize = expected[1..].iter().map(|(_, _, s)| s.len()).sum::<usize>() + kept;
    assert_eq!(f.store.counts().unwrap(), (37, total as u64));
}

pub fn report_numbers(f: &mut Fixture) {
    // Day 1: 20 requests, 10 ms .. 200 ms of LLM; every 4th direct; one
    // failure, two fallbacks. Day 2: 5 requests on version 3.3.0.
    for i in 0..20u64 {
        let mut r = SynthRequest::new(100 + i, T0 + i);
        r.llm_us = (i + 1) * 10_000;
        r.retrieval = i % 4 != 0;
        r.failed = i == 5;
        r.fallback = i == 6 || i == 7;
        r.input = "x".repeat(if i < 10 { 100 } else { 2000 });
        put(&mut *f.store, &r);
    }
    for i in 0..5u64 {
        let mut r = SynthRequest::new(200 + i, T0 + DAY + i);
        r.version = "3.3.0".into();
        put(&mut *f.store, &r);
    }
    let rep = report::build(
        &mut *f.store,
        &ReportOptions {
            group_by: GroupBy::Day,
            nodes: true,
            input_buckets: true,
            ..ReportOptions::default()
        },
    )
    .unwrap();
    assert_eq!(rep.groups.len(), 2);
    let g = &rep.groups[0];
    assert_eq!(
        (g.topology_id.as_str(), g.group.as_str()),
        ("rag-chat", "2026-11-30")
    );
    assert_eq!(g.requests, 20);
    assert_eq!(g.error_rate, 0.05);
    assert_eq!(g.fallback_rate, 0.1);
    assert_eq!(g.timeout_rate, 0.1);
    // 5 direct of 20.
    let direct = g
        .paths
        .iter()
        .find(|p| !p.key.contains("retrieve"))
        .unwrap();
    assert_eq!((direct.count, direct.share), (5, 0.25));
    // The LLM is the most expensive node of every request but the fallbacks'.
    assert_eq!(g.top_cost_nodes[0].key, "llm");
    // Latency percentiles are exact nearest-rank over request durations.
    let mut durations: Vec<f64> = (0..20u64)
        .map(|i| {
            let r = {
                let mut r = SynthRequest::new(100 + i, T0 + i);
                r.llm_us = (i + 1) * 10_000;
                r.retrieval = i % 4 != 0;
                r.failed = i == 5;
                r.fallback = i == 6 || i == 7;
                r
            };
            build(&r).0.duration_us as f64 / 1000.0
        })
        .collect();
    let expect = report::percentiles(&mut durations);
    assert_eq!(g.latency_ms, expect);
    assert!(g.cost.p95 >= g.cost.p50 && g.cost.mean > 0.0);
    // Node shares add up to one, and the LLM dominates.
    let total: f64 = g.nodes.iter().map(|n| n.cost_share).sum();
    assert!((total - 1.0).abs() < 1e-9, "{total}");
    let llm = g.nodes.iter().find(|n| n.node == "llm").unwrap();
    assert_eq!(llm.spans, 20);
    assert!(llm.cost_share > 0.5);
    assert_eq!(llm.error_rate, 0.1);
    assert_eq!(g.input_buckets.len(), 2);
    assert_eq!(g.input_buckets[0].bucket, "<256");
    assert_eq!(g.input_buckets[0].requests, 10);

    let by_version = report::build(
        &mut *f.store,
        &ReportOptions {
            group_by: GroupBy::Version,
            ..ReportOptions::default()
        },
    )
    .unwrap();
    let keys: Vec<(&str, u64)> = by_version
        .groups
        .iter()
        .map(|g| (g.group.as_str(), g.requests))
        .collect();
    assert_eq!(keys, [("3.2.1", 20), ("3.3.0", 5)]);
    assert!(by_version.groups[0].nodes.is_empty());

    let filtered = report::build(
        &mut *f.store,
        &ReportOptions {
            filter: Filter {
                since_us: Some((T0 + DAY) as i64),
                ..Filter::default()
            },
            group_by: GroupBy::Week,
            nodes: true,
            ..ReportOptions::default()
        },
    )
    .unwrap();
    assert_eq!(filtered.groups.len(), 1);
    assert_eq!(filtered.groups[0].group, "2026-W49");
    assert_eq!(filtered.groups[0].requests, 5);
    let spans: u64 = filtered.groups[0].nodes.iter().map(|n| n.spans).sum();
    assert_eq!(spans, 30);
}

/// Requests grouped in time buckets from a minute to a week, each named
/// by its start in UTC.
pub fn report_time_buckets(f: &mut Fixture) {
    const SEC: u64 = 1_000_000;
    // 00:00:10, 00:01:10 and 00:02:10 on 2026-11-30 (a Monday), and one a day later.
    for (i, t) in [10 * SEC, 70 * SEC, 130 * SEC, DAY + 10 * SEC]
        .into_iter()
        .enumerate()
    {
        put(&mut *f.store, &SynthRequest::new(300 + i as u64, T0 + t));
    }
    let groups = |f: &mut Fixture, name: &str| -> Vec<(String, u64)> {
        let rep = report::build(
            &mut *f.store,
            &ReportOptions {
                group_by: GroupBy::Every(report::interval(name).unwrap()),
                ..ReportOptions::default()
            },
        )
        .unwrap();
        assert_eq!(rep.group_by, name);
        rep.groups
            .iter()
            .map(|g| (g.group.clone(), g.requests))
            .collect()
    };
    let key = |s: &str, n: u64| (s.to_string(), n);
    assert_eq!(
        groups(f, "1m"),
        [
            key("2026-11-30T00:00:00Z", 1),
            key("2026-11-30T00:01:00Z", 1),
            key("2026-11-30T00:02:00Z", 1),
            key("2026-12-01T00:00:00Z", 1),
        ]
    );
    assert_eq!(
        groups(f, "5m"),
        [
            key("2026-11-30T00:00:00Z", 3),
            key("2026-12-01T00:00:00Z", 1)
        ]
    );
    assert_eq!(groups(f, "1w"), [key("2026-11-30T00:00:00Z", 4)]);
}

pub fn writer_persists_redacted(f: &mut Fixture) {
    let fresh = f.reopen();
    let store = std::mem::replace(&mut f.store, fresh);
    let writer = StoreWriter::spawn(
        store,
        WriterOptions {
            queue_capacity: 4,
            max_batch: 3,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut ids = Vec::new();
    for i in 0..25u64 {
        let mut r = SynthRequest::new(500 + i, T0 + i);
        r.input = format!("mail me at user{i}@example.com, key sk-abcdefghijklmnopqrstu{i}");
        let (record, spans) = build(&r);
        for s in spans {
            writer.span(Arc::new(s));
        }
        writer.request(Arc::new(record));
        ids.push(r.id);
    }
    writer.flush().unwrap();
    let stats = writer.close().unwrap();
    assert_eq!(stats.requests_written, 25);
    assert_eq!(stats.spans_written, 150);
    assert_eq!(stats.queue_depth, 0);
    assert_eq!(stats.failed_records, 0);
    // Queue bound, plus one sender waiting and one message being taken.
    assert!(stats.max_queue_depth <= 4 + 2, "{stats:?}");
    assert!(stats.batches >= 9, "{stats:?}");
    for id in ids {
        let t = f.store.get(id).unwrap().expect("written");
        assert!(!t.record.input_summary.contains("example.com"));
        assert!(t.record.input_summary.contains("[REDACTED:email]"));
        assert!(t.record.input_summary.contains("[REDACTED:api_key]"));
        assert!(t.spans.iter().all(|s| !s.input_summary.contains("sk-abc")));
        assert_eq!(t.spans.len(), 6);
    }
}
