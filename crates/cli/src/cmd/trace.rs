//! `glassbox trace list | show | export | diff`: read the stored traces
//! (`diff` is drawn in `trace_diff`; the `--store` and filter flags every
//! store-reading command shares are in `store`).

use std::fmt::Write as _;
use std::process::ExitCode;

use glassbox_store::otlp::{OtlpExporter, Protocol};
use glassbox_store::{ListQuery, RequestSummary, Sort, StoredTrace};
use glassbox_trace::SpanRole;
use serde_json::json;

use super::common::OutputFormat;
use super::store::{FilterArgs, StoreArg, format_time, load_trace, ms, store_error};
use crate::out::table::{Align, Table};
use crate::out::{self, Out};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 a store error, 2 usage, 69 the store cannot be \
                        reached, 78 a bad store URL, filter or id."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {
    /// List stored requests, newest (or slowest, or most expensive) first.
    List(ListArgs),
    /// Show one request: a waterfall of its path, its receipt, its explanation.
    Show(ShowArgs),
    /// Send stored requests to an OpenTelemetry collector (OTLP/HTTP JSON).
    Export(ExportArgs),
    /// Two requests side by side: path, edges, node data, timings, tokens,
    /// costs, and where they first differ, in plain words.
    Diff(super::trace_diff::DiffArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortArg {
    Recent,
    Slowest,
    Costliest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusArg {
    Ok,
    Failed,
    Cancelled,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Only requests that ended so.
    #[arg(long, value_enum)]
    pub status: Option<StatusArg>,
    /// Order.
    #[arg(long, value_enum, default_value_t = SortArg::Recent)]
    pub sort: SortArg,
    /// Most rows shown.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Request id (as printed by `glassbox run` and `trace list`).
    pub id: String,
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// OTLP/HTTP endpoint, e.g. `http://127.0.0.1:4318` (`/v1/traces` is added).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub endpoint: String,
    /// `service.name` of the exported resource.
    #[arg(long, default_value = "glassbox")]
    pub service: String,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Most requests exported (newest first).
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
    /// Body encoding.
    #[arg(long, value_enum, default_value_t = ProtocolArg::HttpProtobuf)]
    pub protocol: ProtocolArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProtocolArg {
    /// OTLP/HTTP with protobuf bodies (what every collector accepts).
    HttpProtobuf,
    /// OTLP/HTTP with JSON bodies.
    HttpJson,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        TraceCommand::List(a) => list(a),
        TraceCommand::Show(a) => show(a),
        TraceCommand::Export(a) => export(a),
        TraceCommand::Diff(a) => super::trace_diff::run(a),
    }
}

fn list(a: ListArgs) -> anyhow::Result<ExitCode> {
    let mut store = a.store.open()?;
    let status = a.status.map(|s| {
        match s {
            StatusArg::Ok => "ok",
            StatusArg::Failed => "failed",
            StatusArg::Cancelled => "cancelled",
        }
        .to_string()
    });
    let query = ListQuery {
        filter: a.filter.filter(status)?,
        sort: match a.sort {
            SortArg::Recent => Sort::Recent,
            SortArg::Slowest => Sort::Slowest,
            SortArg::Costliest => Sort::Costliest,
        },
        limit: a.limit,
    };
    let rows = store.list(&query).map_err(store_error)?;
    Out::new(a.format).result(&rows, || list_table(&rows))?;
    Ok(ExitCode::SUCCESS)
}

pub fn list_table(rows: &[RequestSummary]) -> String {
    let cells = rows
        .iter()
        .map(|r| {
            let status = if r.degraded && r.status == "ok" {
                "degraded".to_string()
            } else {
                r.status.clone()
            };
            vec![
                r.request_id.clone(),
                format_time(r.started_at_us),
                format!("{}@{}", r.topology_id, r.version),
                status,
                ms(r.duration_us),
                r.cost.clone(),
                r.path.replace('>', "→"),
            ]
        })
        .collect();
    let mut out = Table::new(&[
        "REQUEST",
        "STARTED (UTC)",
        "TOPOLOGY@VERSION",
        "STATUS",
        "DURATION",
        "COST",
        "PATH",
    ])
    .min_width(&[36, 23, 20, 9, 10, 10])
    .align(&[
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Right,
        Align::Right,
    ])
    .rows(cells)
    .render();
    if rows.is_empty() {
        out.push_str("(no stored requests match)\n");
    }
    out
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let mut store = a.store.open()?;
    let trace = load_trace(&mut *store, &a.id)?;
    Out::new(a.format).result(&with_critical(&trace), || waterfall(&trace, 40))?;
    Ok(ExitCode::SUCCESS)
}

/// The stored trace as JSON, with its critical path (computed from the path
/// and spans, so records stored before it existed have one too).
pub fn with_critical(trace: &StoredTrace) -> serde_json::Value {
    let mut v = serde_json::to_value(trace).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        let cp = glassbox_trace::critical_path(&trace.record.path, &trace.spans);
        obj.insert(
            "critical_path".into(),
            serde_json::to_value(cp).unwrap_or_default(),
        );
    }
    v
}

/// The critical path section of `trace show`: the chain, what each step
/// added, and the nodes that ran alongside it.
fn critical_section(out: &mut String, trace: &StoredTrace) {
    let cp = glassbox_trace::critical_path(&trace.record.path, &trace.spans);
    if cp.steps.is_empty() {
        return;
    }
    let millis = glassbox_trace::explain::millis;
    let chain: Vec<&str> = cp.steps.iter().map(|s| &*s.node).collect();
    let _ = writeln!(
        out,
        "\ncritical path ({}; the nodes' own times add up to {})\n  {}",
        millis(cp.end_us),
        millis(cp.nodes_total_us),
        chain.join(" → ")
    );
    let total = cp.end_us.max(1) as f64;
    for s in &cp.steps {
        let retries = if s.attempts > 1 {
            format!("  ({} attempts)", s.attempts)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<16} {:>10} {:>6.1}%{retries}",
            s.node,
            millis(s.added_us),
            s.added_us as f64 / total * 100.0
        );
    }
    if !cp.off_path.is_empty() {
        let off: Vec<&str> = cp.off_path.iter().map(|n| &**n).collect();
        let _ = writeln!(out, "  off the path (ran alongside): {}", off.join(", "));
    }
}

/// The terminal view of one request: header, waterfall, critical path,
/// edges, receipt, explanation.
pub fn waterfall(trace: &StoredTrace, width: usize) -> String {
    let r = &trace.record;
    let mut out = String::new();
    let _ = writeln!(out, "request   {}", r.request_id);
    let _ = writeln!(out, "topology  {}@{}", r.topology_id, r.version);
    let _ = writeln!(
        out,
        "started   {} UTC   duration {}   status {}{}",
        format_time(i64::try_from(r.started_at_us).unwrap_or(i64::MAX)),
        ms(i64::try_from(r.duration_us).unwrap_or(i64::MAX)),
        r.status.as_str(),
        if r.degraded {
            " (degraded: a fallback ran)"
        } else {
            ""
        }
    );
    if let Some(e) = &r.error {
        let _ = writeln!(out, "error     {} [{}]", e.message, e.code);
    }
    let total = r.duration_us.max(1) as f64;
    let _ = writeln!(out, "\nwaterfall ({} attempts)", trace.spans.len());
    let mut spans: Vec<_> = trace.spans.iter().collect();
    spans.sort_by_key(|s| (s.start_us, s.end_us));
    let name_w = spans
        .iter()
        .map(|s| s.node.chars().count() + 3)
        .max()
        .unwrap_or(8)
        .max(8);
    for s in spans {
        let from = ((s.start_us as f64 / total) * width as f64).floor() as usize;
        let to = ((s.end_us as f64 / total) * width as f64).ceil() as usize;
        let from = from.min(width.saturating_sub(1));
        let len = to.saturating_sub(from).clamp(1, width - from);
        let bar = format!(
            "{}{}{}",
            " ".repeat(from),
            "█".repeat(len),
            " ".repeat(width - from - len)
        );
        let name = if s.attempt > 1 {
            format!("{} #{}", s.node, s.attempt)
        } else {
            s.node.to_string()
        };
        let role = match &s.role {
            SpanRole::Primary => String::new(),
            SpanRole::Fallback { replaces } => format!("  (fallback for {replaces})"),
            SpanRole::Rerun { by } => format!("  (rerun by {by})"),
            SpanRole::Step { .. } => match s.tags.get("iteration") {
                Some(i) => format!("  ({} step, iteration {i})", s.kind),
                None => format!("  ({} step)", s.kind),
            },
        };
        let status = glassbox_store::row::status_str(s.status);
        let err = s
            .error
            .as_ref()
            .map(|e| format!("  {}", e.message))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {name:<name_w$} |{bar}| {:>9} {:>8}  {status}{role}{err}",
            ms(i64::try_from(s.duration_us()).unwrap_or(i64::MAX)),
            s.cost.normalize().to_string(),
        );
    }
    critical_section(&mut out, trace);
    if !r.path.edges.is_empty() {
        let _ = writeln!(out, "\nedges");
        for e in &r.path.edges {
            let _ = writeln!(
                out,
                "  {} {} → {}  {}",
                if e.taken { "✓" } else { "·" },
                e.from,
                e.to,
                e.why
            );
        }
    }
    let _ = writeln!(out, "\nreceipt ({})", r.receipt.currency);
    for l in &r.receipt.lines {
        let _ = writeln!(
            out,
            "  {:<14} {:>10} {:<16} × {:>10} = {:>10}",
            match &l.step {
                Some(step) => format!("{} ({step})", l.node),
                None => l.node.to_string(),
            },
            l.quantity.to_string(),
            l.unit.as_str(),
            l.unit_price.to_string(),
            l.amount.to_string()
        );
    }
    let _ = writeln!(out, "  {:<14} {:>54}", "total", r.receipt.total.to_string());
    if !r.input_summary.is_empty() || !r.output_summary.is_empty() {
        let _ = writeln!(out, "\ninput     {}", r.input_summary);
        let _ = writeln!(out, "output    {}", r.output_summary);
    }
    if !r.explanation.text.is_empty() {
        let _ = writeln!(
            out,
            "\nexplanation ({})\n  {}",
            r.explanation.lang, r.explanation.text
        );
    }
    out
}

fn export(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let mut store = a.store.open()?;
    let rows = store
        .list(&ListQuery {
            filter: a.filter.filter(None)?,
            sort: Sort::Recent,
            limit: a.limit,
        })
        .map_err(store_error)?;
    let protocol = match a.protocol {
        ProtocolArg::HttpProtobuf => Protocol::HttpProtobuf,
        ProtocolArg::HttpJson => Protocol::HttpJson,
    };
    let exporter = OtlpExporter::new(&a.endpoint, &a.service, protocol);
    let mut sent = 0usize;
    for chunk in rows.chunks(100) {
        let mut traces = Vec::with_capacity(chunk.len());
        for r in chunk {
            traces.push(load_trace(&mut *store, &r.request_id)?);
        }
        exporter.export(&traces).map_err(store_error)?;
        sent += traces.len();
    }
    out::status(&format!("exported {sent} request(s) to {}", a.endpoint));
    out::print_text(&format!("{}\n", json!({ "exported": sent })))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use glassbox_store::time::parse_time;

    #[test]
    fn parses_times() {
        let now = 1_796_040_000_000_000u64;
        assert_eq!(
            parse_time("2026-11-30", now).unwrap(),
            1_795_996_800_000_000
        );
        assert_eq!(
            parse_time("2026-11-30T12:00:00Z", now).unwrap(),
            1_796_040_000_000_000
        );
        assert_eq!(parse_time("24h", now).unwrap(), 1_795_953_600_000_000);
        assert_eq!(
            parse_time("1796040000", now).unwrap(),
            1_796_040_000_000_000
        );
        assert!(parse_time("yesterday", now).is_err());
        assert_eq!(
            format_time(1_796_040_000_123_000),
            "2026-11-30 12:00:00.123"
        );
    }

    #[test]
    fn shows_a_waterfall_with_receipt_and_explanation() {
        use glassbox_store::synth::{SynthRequest, build};
        let mut req = SynthRequest::new(1, 1_796_040_000_000_000);
        req.fallback = true;
        let (record, spans) = build(&req);
        let text = waterfall(&StoredTrace { record, spans }, 40);
        assert!(text.contains("rag-chat@3.2.1"), "{text}");
        assert!(text.contains("llm_small"), "{text}");
        assert!(text.contains("(fallback for llm)"), "{text}");
        assert!(text.contains("receipt (USD)"), "{text}");
        assert!(text.contains("explanation (en)"), "{text}");
        assert!(text.contains('█'), "{text}");
        // The LLM timed out and its fallback stood in: both on the path.
        assert!(
            text.contains("route → embed → retrieve → prompt → llm → llm_small → validate"),
            "{text}"
        );
    }

    #[test]
    fn json_carries_the_critical_path() {
        use glassbox_store::synth::{SynthRequest, build};
        let mut req = SynthRequest::new(2, 1_796_040_000_000_000);
        req.retrieval = false;
        let (record, spans) = build(&req);
        let v = with_critical(&StoredTrace { record, spans });
        let steps: Vec<&str> = v["critical_path"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["node"].as_str().unwrap())
            .collect();
        assert_eq!(steps, ["route", "prompt", "llm", "validate"]);
        assert_eq!(v["record"]["request_id"], req.id.to_string());
    }
}
