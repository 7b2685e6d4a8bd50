//! `glassbox report`: cost and latency per topology from the trace store.
//!
//! Per topology and group (day, week, topology version or model version):
//! average and P95 cost per request, P50/P95/P99 latency per request and per
//! node, each node's share of cost and how often it was the most expensive,
//! the path mix (direct vs retrieval) and error / timeout / fallback rates;
//! the nodes most often on the critical path and their share of latency;
//! optionally latency by input-length bucket (per request and per node).
//!
//! `--compare A B` instead puts two versions of one topology side by side
//! and marks the differences larger than noise ([`compare`]).

mod compare;

use std::fmt::Write as _;
use std::process::ExitCode;

use glassbox_store::report::{self, GroupBy, GroupReport, Percentiles, Report, ReportOptions};

use super::store::{FilterArgs, StoreArg, store_error};
use crate::out;
use crate::out::table::{Align, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupArg {
    /// One group per topology.
    All,
    Day,
    Week,
    /// Topology version.
    Version,
    /// Model (and model version) used.
    Model,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum ReportFormat {
    #[default]
    Table,
    Json,
    /// One row per topology × group (per-node numbers in `node:` columns
    /// are left out; use JSON for them).
    Csv,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 a store error, 2 usage, 69 the store cannot be \
                        reached, 78 a bad store URL or filter."
)]
pub struct Args {
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// How to group requests within a topology.
    #[arg(long, value_enum, default_value_t = GroupArg::All)]
    pub group_by: GroupArg,
    /// Leave out per-node latency and cost shares (faster: spans are not read).
    #[arg(long)]
    pub no_nodes: bool,
    /// Add latency by input-length bucket (characters of the whole input),
    /// per request and per node.
    #[arg(long)]
    pub by_input_length: bool,
    #[arg(long, value_enum, default_value_t)]
    pub format: ReportFormat,
    /// Compare two versions of the `--topology` side by side: cost, latency
    /// P50/P95/P99 per request and node, path mix, guard failures and error
    /// rates; differences larger than noise are marked `*` (Mann-Whitney U,
    /// two-proportion z, chi-square, Holm-corrected).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<String>>,
    /// Significance level of `--compare` (family-wise, across all its tests).
    #[arg(long, default_value_t = glassbox_store::compare::DEFAULT_ALPHA, requires = "compare")]
    pub alpha: f64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(versions) = &args.compare {
        return run_compare(&args, versions);
    }
    let mut store = args.store.open()?;
    let options = ReportOptions {
        filter: args.filter.filter(None)?,
        group_by: match args.group_by {
            GroupArg::All => GroupBy::All,
            GroupArg::Day => GroupBy::Day,
            GroupArg::Week => GroupBy::Week,
            GroupArg::Version => GroupBy::Version,
            GroupArg::Model => GroupBy::Model,
        },
        nodes: !args.no_nodes,
        input_buckets: args.by_input_length,
    };
    let rep = report::build(&mut *store, &options).map_err(store_error)?;
    match args.format {
        ReportFormat::Json => out::print_json(&rep)?,
        ReportFormat::Csv => out::print_text(&csv(&rep))?,
        ReportFormat::Table => out::print_text(&table(&rep))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compare(args: &Args, versions: &[String]) -> anyhow::Result<ExitCode> {
    let usage = |message: String| {
        anyhow::Error::new(crate::exit::Coded {
            code: crate::exit::USAGE,
            message,
        })
    };
    let [a, b] = versions else {
        return Err(usage(
            "`--compare` takes two versions: --compare A B".into(),
        ));
    };
    if args.format == ReportFormat::Csv {
        return Err(usage(
            "`--format csv` is not available with `--compare` (use table or json)".into(),
        ));
    }
    if !(args.alpha > 0.0 && args.alpha <= 0.5) {
        return Err(usage(format!(
            "`--alpha {}` is not a significance level (use a value above 0 and at most 0.5, e.g. 0.05)",
            args.alpha
        )));
    }
    let filter = args.filter.filter(None)?;
    let Some(topology) = filter.topology.clone() else {
        return Err(usage(
            "`--compare` needs `--topology ID` (the topology whose versions to compare)".into(),
        ));
    };
    let registry = glassbox_nodes::registry();
    let options = glassbox_store::compare::CompareOptions {
        topology,
        a: a.clone(),
        b: b.clone(),
        filter,
        guard_kinds: registry
            .names()
            .filter(|k| registry.guards_output(k))
            .map(str::to_string)
            .collect(),
        alpha: args.alpha,
    };
    let mut store = args.store.open()?;
    let c = glassbox_store::compare::compare(&mut *store, &options).map_err(store_error)?;
    match args.format {
        ReportFormat::Json => out::print_json(&c)?,
        _ => out::print_text(&compare::table(&c))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn lat(p: &Percentiles) -> String {
    format!("{:.1} / {:.1} / {:.1} ms", p.p50, p.p95, p.p99)
}

fn top(shares: &[report::Share], n: usize) -> String {
    shares
        .iter()
        .take(n)
        .map(|s| format!("{} {}", s.key.replace('>', "→"), pct(s.share)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The human-readable report.
pub fn table(rep: &Report) -> String {
    let mut out = String::new();
    if rep.groups.is_empty() {
        out.push_str("(no stored requests match)\n");
        return out;
    }
    for g in &rep.groups {
        group_table(&mut out, g, rep.group_by);
    }
    out
}

fn group_table(out: &mut String, g: &GroupReport, by: &str) {
    let label = if by == "all" {
        g.topology_id.clone()
    } else {
        format!("{}  [{by} {}]", g.topology_id, g.group)
    };
    let _ = writeln!(out, "{label}");
    let _ = writeln!(out, "  requests        {}", g.requests);
    let _ = writeln!(
        out,
        "  cost/request    avg {:.6}  p95 {:.6}  total {:.4}",
        g.cost.mean, g.cost.p95, g.cost_total
    );
    let _ = writeln!(
        out,
        "  latency         p50 / p95 / p99  {}",
        lat(&g.latency_ms)
    );
    let _ = writeln!(
        out,
        "  rates           error {}  timeout {}  fallback {}",
        pct(g.error_rate),
        pct(g.timeout_rate),
        pct(g.fallback_rate)
    );
    let _ = writeln!(out, "  paths           {}", top(&g.paths, 4));
    if !g.top_cost_nodes.is_empty() {
        let _ = writeln!(out, "  most expensive  {}", top(&g.top_cost_nodes, 4));
    }
    if !g.nodes.is_empty() {
        let rows = g
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.node.clone(),
                    n.spans.to_string(),
                    lat(&n.latency_ms),
                    pct(n.cost_share),
                    pct(n.error_rate),
                ]
            })
            .collect();
        let nodes = Table::new(&["node", "spans", "p50 / p95 / p99", "cost", "errors"])
            .indent("  ")
            .gap(1)
            .min_width(&[16, 8, 28, 10, 8])
            .align(&[
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
            ])
            .rows(rows);
        out.push_str(&nodes.render());
    }
    if !g.critical_path.is_empty() {
        let crit = g
            .critical_path
            .iter()
            .take(5)
            .map(|c| {
                format!(
                    "{} {} of requests, {} of latency",
                    c.node,
                    pct(c.rate),
                    pct(c.latency_share)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(out, "  critical path   {crit}");
    }
    for b in &g.input_buckets {
        let _ = writeln!(
            out,
            "  input {:<9} {:>8} requests  {}",
            b.bucket,
            b.requests,
            lat(&b.latency_ms)
        );
    }
    if !g.node_input_buckets.is_empty() {
        let rows = g
            .node_input_buckets
            .iter()
            .map(|b| {
                vec![
                    b.node.clone(),
                    b.bucket.clone(),
                    b.spans.to_string(),
                    lat(&b.latency_ms),
                ]
            })
            .collect();
        let t = Table::new(&["node", "input", "spans", "p50 / p95 / p99"])
            .indent("  ")
            .gap(1)
            .min_width(&[16, 8, 8, 28])
            .align(&[Align::Left, Align::Left, Align::Right, Align::Right])
            .rows(rows);
        out.push_str(&t.render());
    }
    out.push('\n');
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per topology × group.
pub fn csv(rep: &Report) -> String {
    let mut out = String::from(
        "topology_id,group_by,group,requests,cost_mean,cost_p95,cost_total,latency_p50_ms,\
         latency_p95_ms,latency_p99_ms,error_rate,timeout_rate,fallback_rate,top_path,\
         top_path_share,top_cost_node,top_cost_node_share,top_critical_node,\
         top_critical_node_rate,top_critical_node_latency_share\n",
    );
    for g in &rep.groups {
        let path = g.paths.first();
        let node = g.top_cost_nodes.first();
        let crit = g.critical_path.first();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&g.topology_id),
            rep.group_by,
            csv_field(&g.group),
            g.requests,
            g.cost.mean,
            g.cost.p95,
            g.cost_total,
            g.latency_ms.p50,
            g.latency_ms.p95,
            g.latency_ms.p99,
            g.error_rate,
            g.timeout_rate,
            g.fallback_rate,
            csv_field(path.map_or("", |p| p.key.as_str())),
            path.map_or(0.0, |p| p.share),
            csv_field(node.map_or("", |n| n.key.as_str())),
            node.map_or(0.0, |n| n.share),
            csv_field(crit.map_or("", |c| c.node.as_str())),
            crit.map_or(0.0, |c| c.rate),
            crit.map_or(0.0, |c| c.latency_share),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use glassbox_store::row::encode;
    use glassbox_store::synth::{SynthRequest, build};
    use glassbox_store::{RedactOptions, Redactor, SqliteStore, TraceStore};
    use std::sync::Arc;

    #[test]
    fn renders_table_and_csv() {
        let dir = std::env::temp_dir().join(format!("gb-report-{}", std::process::id()));
        let mut store = SqliteStore::open(&dir.join("t.db")).unwrap();
        let red = Redactor::new(&RedactOptions::default()).unwrap();
        for i in 0..8u64 {
            let mut r = SynthRequest::new(i + 1, 1_796_040_000_000_000 + i);
            r.retrieval = i % 2 == 0;
            let (rec, spans) = build(&r);
            let spans: Vec<_> = spans.into_iter().map(Arc::new).collect();
            let (row, rows) = encode(&rec, &spans, &red);
            store.write(&[row], &rows).unwrap();
        }
        let rep = report::build(
            &mut store,
            &ReportOptions {
                group_by: GroupBy::Day,
                nodes: true,
                ..ReportOptions::default()
            },
        )
        .unwrap();
        let t = table(&rep);
        assert!(t.contains("rag-chat  [day 2026-11-30]"), "{t}");
        // Every request's path ends in the LLM and the guard.
        assert!(t.contains("critical path   llm 100.0% of requests"), "{t}");
        assert!(t.contains("50.0%"), "{t}");
        assert!(t.contains("llm"), "{t}");
        let c = csv(&rep);
        assert_eq!(c.lines().count(), 2, "{c}");
        assert!(
            c.lines()
                .nth(1)
                .unwrap()
                .starts_with("rag-chat,day,2026-11-30,8,"),
            "{c}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
