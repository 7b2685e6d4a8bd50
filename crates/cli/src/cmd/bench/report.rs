//! What `glassbox bench` prints as a table (the JSON document is the
//! library's `glassbox_bench::load::Report` as it is).

use std::fmt::Write as _;

use glassbox_bench::load::{Arrivals, Report};

use crate::out::table::{Align, Table};

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

/// One decimal, or three below 1 req/s (model-backed topologies).
fn rps(v: f64) -> String {
    if v > 0.0 && v < 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.1}")
    }
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// The human-readable report.
pub fn table(rep: &Report) -> String {
    let s = &rep.summary;
    let c = &s.counts;
    let mut out = String::new();
    let mode = match (rep.rate, rep.concurrency) {
        (Some(r), _) => format!(
            "open loop, {} arrivals at {r} req/s, {} senders",
            match rep.arrivals {
                Some(Arrivals::Fixed) => "fixed",
                _ => "poisson",
            },
            rep.max_in_flight.unwrap_or(0)
        ),
        (None, Some(c)) => format!("closed loop, concurrency {c}"),
        (None, None) => "closed loop".into(),
    };
    let _ = writeln!(out, "{} at {}: {mode}", rep.topology, rep.url);
    if rep.warmup_requests > 0 {
        let _ = writeln!(
            out,
            "warm-up      {:.1} s, {} requests (left out)",
            rep.warmup_s, rep.warmup_requests
        );
    }
    let _ = writeln!(
        out,
        "throughput   offered {} req/s, achieved {} req/s (2xx), {} req/s ok, over {:.2} s",
        rps(s.offered_rps),
        rps(s.achieved_rps),
        rps(s.success_rps),
        s.elapsed_s
    );
    let _ = writeln!(
        out,
        "requests     {} offered, {} sent, {} ok ({}), {} rejected 429 ({}), {} errors ({})",
        c.offered,
        c.sent,
        c.ok,
        pct(s.rates.success),
        c.rejected,
        pct(s.rates.rejected),
        c.errors(),
        pct(s.rates.error)
    );
    if c.errors() > 0 {
        let mut parts = Vec::new();
        if c.run_failed > 0 {
            parts.push(format!("run failed {}", c.run_failed));
        }
        parts.extend(c.http_errors.iter().map(|(k, v)| format!("http {k}: {v}")));
        parts.extend(c.transport_errors.iter().map(|(k, v)| format!("{k}: {v}")));
        if c.not_sent > 0 {
            parts.push(format!("not sent (client saturated): {}", c.not_sent));
        }
        let _ = writeln!(out, "errors       {}", parts.join(", "));
    }
    let l = &s.latency_ms;
    let _ = writeln!(
        out,
        "latency 2xx  P50 {} ms, P95 {} ms, P99 {} ms, max {} ms ({} answers)",
        ms(l.p50),
        ms(l.p95),
        ms(l.p99),
        ms(l.max),
        l.count
    );
    if s.rejected_latency_ms.count > 0 {
        let r = &s.rejected_latency_ms;
        let _ = writeln!(
            out,
            "latency 429  P50 {} ms, P99 {} ms",
            ms(r.p50),
            ms(r.p99)
        );
    }
    let header = [
        "input chars",
        "offered",
        "ok",
        "429",
        "errors",
        "P50 ms",
        "P95 ms",
        "P99 ms",
        "max ms",
    ];
    let rows: Vec<Vec<String>> = s
        .by_input_length
        .iter()
        .map(|b| {
            vec![
                b.bucket.clone(),
                b.counts.offered.to_string(),
                b.counts.ok.to_string(),
                b.counts.rejected.to_string(),
                b.counts.errors().to_string(),
                ms(b.latency_ms.p50),
                ms(b.latency_ms.p95),
                ms(b.latency_ms.p99),
                ms(b.latency_ms.max),
            ]
        })
        .collect();
    if s.by_input_length.len() > 1 {
        out.push('\n');
        // Indented by one; the first column left-aligned, the figures right.
        let mut align = vec![Align::Right; header.len()];
        align[0] = Align::Left;
        out.push_str(
            &Table::new(&header)
                .indent(" ")
                .align(&align)
                .rows(rows)
                .render(),
        );
    }
    if let Some(t) = &rep.traces {
        out.push('\n');
        let _ = writeln!(
            out,
            "traces       {} request ids checked, {} found, {} missing{}{}",
            t.checked,
            t.found,
            t.missing,
            if t.without_id > 0 {
                format!(", {} answers without a request id", t.without_id)
            } else {
                String::new()
            },
            if t.lookup_errors.is_empty() {
                String::new()
            } else {
                format!(", lookup errors {:?}", t.lookup_errors)
            }
        );
        if !t.missing_ids.is_empty() {
            let _ = writeln!(out, "missing      {}", t.missing_ids.join(", "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use glassbox_bench::load::TraceCheck;
    use glassbox_bench::stats::{Buckets, Outcome, Sample, summarize};

    use super::*;

    #[test]
    fn the_table_shows_buckets_errors_and_traces() {
        let b = Buckets::new(vec![64]).unwrap();
        let samples = vec![
            Sample {
                bucket: 0,
                latency_us: 2000,
                done_us: 2000,
                outcome: Outcome::Ok,
            },
            Sample {
                bucket: 1,
                latency_us: 100,
                done_us: 100,
                outcome: Outcome::Rejected,
            },
            Sample {
                bucket: 1,
                latency_us: 0,
                done_us: 0,
                outcome: Outcome::NotSent,
            },
        ];
        let rep = Report {
            url: "http://127.0.0.1:1".into(),
            topology: "moderation".into(),
            mode: "open",
            rate: Some(3.0),
            arrivals: Some(Arrivals::Poisson),
            concurrency: None,
            max_in_flight: Some(16),
            warmup_s: 0.0,
            warmup_requests: 0,
            summary: summarize(&samples, &b, 1.0),
            traces: Some(TraceCheck {
                checked: 1,
                found: 0,
                missing: 1,
                missing_ids: vec!["r1".into()],
                ..TraceCheck::default()
            }),
        };
        let t = table(&rep);
        assert!(t.contains("offered 3.0 req/s"), "{t}");
        assert_eq!(
            (rps(0.0271), rps(0.0), rps(1918.26)),
            ("0.027".into(), "0.0".into(), "1918.3".into())
        );
        assert!(t.contains("1 rejected 429 (33.3%)"), "{t}");
        assert!(t.contains("not sent (client saturated): 1"), "{t}");
        assert!(t.contains(" <64 "), "{t}");
        assert!(t.contains(" ≥64 "), "{t}");
        assert!(t.contains("1 missing"), "{t}");
        assert!(t.contains("P50 2.0 ms"), "{t}");
        let json = serde_json::to_value(&rep).unwrap();
        assert_eq!(json["counts"]["offered"], 3);
        assert_eq!(json["by_input_length"][1]["counts"]["rejected"], 1);
        assert_eq!(json["traces"]["missing"], 1);
    }
}
