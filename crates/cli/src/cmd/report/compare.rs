//! `glassbox report --compare A B`: two versions of one topology side by
//! side, differences larger than noise marked `*` (the tests are named in
//! the header; see `glassbox_store::compare`).

use std::fmt::Write as _;

use glassbox_store::compare::{Comparison, Diff, Dist, Rate};
use glassbox_store::stats::TestResult;

use crate::out::table::{Align, Table};

fn lat(d: &Dist) -> String {
    format!("{:.1} / {:.1} / {:.1}", d.p.p50, d.p.p95, d.p.p99)
}

fn money(d: &Dist) -> String {
    format!("{:.6} / {:.6}", d.p.mean, d.p.p95)
}

fn pct(r: &Rate) -> String {
    format!("{:.1}% ({}/{})", r.rate * 100.0, r.hits, r.n)
}

/// Relative change of b against a, e.g. `+12.5%`.
fn change(a: f64, b: f64) -> String {
    if a == 0.0 {
        return if b == 0.0 { "0%".into() } else { "new".into() };
    }
    format!("{:+.1}%", (b - a) / a * 100.0)
}

fn p_value(t: Option<TestResult>) -> String {
    match t {
        None => "n/a".into(),
        Some(t) if t.p_value < 0.0001 => format!("{:.1e}", t.p_value),
        Some(t) => format!("{:.4}", t.p_value),
    }
}

fn mark(t: Option<TestResult>) -> String {
    if t.is_some_and(|t| t.significant) {
        "*".into()
    } else {
        String::new()
    }
}

fn dist_row(
    name: &str,
    d: &Diff<Dist>,
    show: fn(&Dist) -> String,
    at: fn(&Dist) -> f64,
) -> Vec<String> {
    vec![
        name.to_string(),
        show(&d.a),
        show(&d.b),
        change(at(&d.a), at(&d.b)),
        p_value(d.test),
        mark(d.test),
    ]
}

fn rate_row(name: &str, d: &Diff<Rate>) -> Vec<String> {
    vec![
        name.to_string(),
        pct(&d.a),
        pct(&d.b),
        format!("{:+.1} pt", (d.b.rate - d.a.rate) * 100.0),
        p_value(d.test),
        mark(d.test),
    ]
}

/// The comparison as a table.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}  {} → {}", c.topology_id, c.a, c.b);
    let _ = writeln!(
        out,
        "  * = larger than noise: {} (α = {})",
        c.method, c.alpha
    );
    if c.requests.a == 0 || c.requests.b == 0 {
        let _ = writeln!(
            out,
            "  requests: {} on {}, {} on {}: nothing to compare on the empty side (check the versions with `glassbox report --group-by version`)",
            c.requests.a, c.a, c.requests.b, c.b
        );
    }
    let mut rows = vec![
        vec![
            "requests".into(),
            c.requests.a.to_string(),
            c.requests.b.to_string(),
            String::new(),
            String::new(),
            String::new(),
        ],
        dist_row("latency p50/p95/p99 ms", &c.latency_ms, lat, |d| d.p.p50),
        dist_row("cost avg/p95", &c.cost, money, |d| d.p.mean),
    ];
    for r in &c.rates {
        rows.push(rate_row(&r.name.replace('_', " "), r));
    }
    rows.push(vec![
        "path mix".into(),
        String::new(),
        String::new(),
        String::new(),
        p_value(c.path_test),
        mark(c.path_test),
    ]);
    for p in c.paths.iter().take(6) {
        rows.push(vec![
            format!("  {}", p.path.replace('>', "→")),
            pct(&p.a),
            pct(&p.b),
            format!("{:+.1} pt", (p.b.rate - p.a.rate) * 100.0),
            String::new(),
            String::new(),
        ]);
    }
    for n in &c.nodes {
        rows.push(dist_row(
            &format!("node {} ms", n.node),
            &n.latency_ms,
            lat,
            |d| d.p.p50,
        ));
        if n.error_rate.a.hits + n.error_rate.b.hits > 0 {
            rows.push(rate_row(&format!("node {} errors", n.node), &n.error_rate));
        }
    }
    let t = Table::new(&["", c.a.as_str(), c.b.as_str(), "change", "p", ""])
        .indent("  ")
        .align(&[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Left,
        ])
        .rows(rows);
    out.push_str(&t.render());
    out
}
