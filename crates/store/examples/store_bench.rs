//! Trace-store benchmarks and seeding (see docs/BENCHMARKS.md, "Trace store").
//!
//! ```text
//! cargo run --release -p glassbox-store --example store_bench -- ingest sqlite [REQUESTS] [DAYS]
//! cargo run --release -p glassbox-store --example store_bench -- ingest postgres [REQUESTS] [DAYS]
//! cargo run --release -p glassbox-store --example store_bench -- seed URL REQUESTS [DAYS]
//! cargo run --release -p glassbox-store --example store_bench -- report URL
//! cargo run --release -p glassbox-store --example store_bench -- encode [REQUESTS]
//! ```
//!
//! `ingest` pushes synthetic requests (6 spans each) through the real
//! `StoreWriter` (queue, batching, redaction, commit) into a fresh store and
//! reports spans per second from the first send to the final flush. With
//! DAYS = 1 (the default) requests arrive in start-time order, as a live
//! writer receives them; DAYS > 1 deals them round-robin over that many days,
//! so every batch inserts at DAYS places in each time-ordered index (a
//! harder case: a backfill or several clocks).
//! `encode` times the writer's encoding step alone (one thread).
//! `seed` writes REQUESTS requests spread over DAYS days (for `glassbox
//! report` timing), directly in large transactions.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use glassbox_store::pg_temp::{TempPostgres, TempPostgresOptions};
use glassbox_store::row::encode;
use glassbox_store::synth::{SynthRequest, build};
use glassbox_store::{
    PostgresStore, RedactOptions, Redactor, SqliteStore, StoreUrl, StoreWriter, TraceStore,
    WriterOptions, open_store,
};
use glassbox_trace::TraceSink;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const T0: u64 = 1_795_996_800_000_000;

fn synth(i: u64, days: u64) -> SynthRequest {
    let day = i % days.max(1);
    let mut r = SynthRequest::new(i + 1, T0 + day * 86_400_000_000 + i);
    // A mix like the seeds': a quarter direct, 2% fallbacks, 1% failures,
    // LLM time spread with a long tail.
    r.retrieval = !i.is_multiple_of(4);
    r.fallback = i % 50 == 7;
    r.failed = i % 100 == 13;
    let spread = i.wrapping_mul(2_654_435_761) % 1000;
    r.llm_us = 50_000 + spread * 300 + if spread > 990 { 5_000_000 } else { 0 };
    r.output_tokens = 32 + spread % 256;
    if i.is_multiple_of(3) {
        r.version = "3.3.0".into();
    }
    r
}

fn ingest(kind: &str, n: u64, days: u64) {
    let dir = tempfile::tempdir().unwrap();
    let _pg;
    let store: Box<dyn TraceStore> = match kind {
        // What `open_with` (the product's path) opens for a writer.
        "sqlite" => Box::new(
            SqliteStore::open(&dir.path().join("bench.db"))
                .unwrap()
                .with_background_checkpoints()
                .unwrap(),
        ),
        "postgres" => {
            let pg = TempPostgres::start(TempPostgresOptions { durable: true }).unwrap();
            let url = pg.create_database("bench").unwrap();
            _pg = pg;
            Box::new(PostgresStore::connect(&url).unwrap())
        }
        other => panic!("unknown store `{other}` (sqlite|postgres)"),
    };
    // Build the records first: the benchmark measures the store, not synth.
    let records: Vec<_> = (0..n)
        .map(|i| {
            let (r, s) = build(&synth(i, days));
            (Arc::new(r), s.into_iter().map(Arc::new).collect::<Vec<_>>())
        })
        .collect();
    let spans: u64 = records.iter().map(|(_, s)| s.len() as u64).sum();
    let writer = StoreWriter::spawn(store, WriterOptions::default()).unwrap();
    let cpu_start = cpu_secs();
    let start = Instant::now();
    for (r, s) in &records {
        for span in s {
            writer.span(span.clone());
        }
        writer.request(r.clone());
    }
    writer.flush().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let stats = writer.close().unwrap();
    let cpu = cpu_secs() - cpu_start;
    println!(
        "{kind} ({days} day(s)): {n} requests, {spans} spans in {secs:.2} s = {:.0} spans/s ({:.0} requests/s); \
         batches {}, mean commit {:.1} ms, max commit {:.1} ms, max queue depth {}, back-pressure waits {}; \
         cpu {cpu:.3} s = {:.1} cpu-ms per 1000 spans",
        spans as f64 / secs,
        n as f64 / secs,
        stats.batches,
        stats.write_us_total as f64 / stats.batches.max(1) as f64 / 1000.0,
        stats.write_us_max as f64 / 1000.0,
        stats.max_queue_depth,
        stats.backpressure_waits,
        cpu * 1e6 / spans as f64,
    );
}

/// CPU seconds (user + system) this process has used so far, every thread
/// (the writer's included); NaN where the kernel will not say.
fn cpu_secs() -> f64 {
    glassbox_engine::cpu::process_cpu_time().map_or(f64::NAN, |t| t.as_secs_f64())
}

fn seed(url: &str, n: u64, days: u64) {
    let mut store = open_store(&StoreUrl::parse(url).unwrap()).unwrap();
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let start = Instant::now();
    let chunk = 20_000u64;
    let mut i = 0;
    while i < n {
        let mut reqs = Vec::new();
        let mut spans = Vec::new();
        for j in i..(i + chunk).min(n) {
            let (r, s) = build(&synth(j, days));
            let s: Vec<_> = s.into_iter().map(Arc::new).collect();
            let (row, rows) = encode(&r, &s, &red);
            reqs.push(row);
            spans.extend(rows);
        }
        store.write(&reqs, &spans).unwrap();
        i += chunk;
        eprint!("\rseeded {} / {n}", i.min(n));
    }
    eprintln!();
    println!(
        "seeded {n} requests over {days} days in {:.1} s; counts {:?}",
        start.elapsed().as_secs_f64(),
        store.counts().unwrap()
    );
}

/// Times the writer's encoding step alone (redaction, JSON, rows), one
/// thread: the part of ingest that runs beside the commits.
fn encode_timing(n: u64) {
    let red = Redactor::new(&RedactOptions::default()).unwrap();
    let records: Vec<_> = (0..n)
        .map(|i| {
            let (r, s) = build(&synth(i, 7));
            (r, s.into_iter().map(Arc::new).collect::<Vec<_>>())
        })
        .collect();
    let start = Instant::now();
    let mut spans = 0;
    for (r, s) in &records {
        let (_row, rows) = encode(r, s, &red);
        spans += rows.len();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "encode: {n} requests, {spans} spans in {secs:.2} s = {:.1} µs per request",
        secs * 1e6 / n as f64
    );
}

/// Times `glassbox report --group-by day` (the same `report::build` call),
/// with and without the per-node section, best of three each.
fn report_timing(url: &str) {
    use glassbox_store::report::{GroupBy, ReportOptions, build};
    let mut store = open_store(&StoreUrl::parse(url).unwrap()).unwrap();
    let (requests, spans) = store.counts().unwrap();
    for nodes in [false, true] {
        let options = ReportOptions {
            group_by: GroupBy::Day,
            nodes,
            ..ReportOptions::default()
        };
        let mut best = f64::MAX;
        let mut groups = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let rep = build(&mut *store, &options).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            groups = rep.groups.len();
        }
        println!(
            "report --group-by day{}: {requests} requests, {spans} spans, {groups} groups: {best:.3} s (best of 3)",
            if nodes { "" } else { " --no-nodes" },
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    match args.first().map(String::as_str) {
        Some("ingest") => ingest(
            args.get(1).map_or("sqlite", String::as_str),
            num(2, 200_000),
            num(3, 1),
        ),
        Some("seed") => seed(
            args.get(1).expect("seed URL REQUESTS [DAYS]"),
            num(2, 1_000_000),
            num(3, 30),
        ),
        Some("report") => report_timing(args.get(1).expect("report URL")),
        Some("encode") => encode_timing(num(1, 100_000)),
        _ => eprintln!(
            "usage: store_bench ingest sqlite|postgres [REQUESTS] [DAYS] | seed URL REQUESTS [DAYS] | report URL | encode [REQUESTS]"
        ),
    }
}
