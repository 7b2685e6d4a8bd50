//! `glassbox run`: run one request through a topology and show its path,
//! receipt and explanation.

use std::process::ExitCode;
use std::time::Duration;

use glassbox_app::local::Warning;
use glassbox_app::{Local, LocalError, LocalOptions, Record};
use glassbox_engine::trace::{Lang, RequestRecord, SpanRecord};
use glassbox_engine::{BuildError, Outcome, PipelineError, RunOptions};
use serde_json::{Value, json};

use super::common::{LangArg, OutputFormat, topology_error};
use super::store::{StoreArg, store_error};
use crate::exit::{self, Coded};
use crate::out::table::Table;
use crate::out::{self, Out};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok, 1 the run failed (the trace is still printed), \
                        2 usage, 69 a node kind cannot run here yet, 78 invalid topology or input."
)]
pub struct Args {
    /// Topology file (JSON or YAML).
    pub file: String,
    /// The question, sent as `{"question": TEXT}`.
    #[arg(
        long,
        short = 'q',
        conflicts_with = "input",
        required_unless_present = "input"
    )]
    pub question: Option<String>,
    /// The request input as a JSON object.
    #[arg(long)]
    pub input: Option<String>,
    /// Language of the explanation.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    /// Request deadline in milliseconds (overrides the topology's `deadline_ms`).
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    #[command(flatten)]
    pub store: StoreArg,
    /// Do not record the request in the trace store.
    #[arg(long, conflicts_with = "store")]
    pub no_store: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let input = super::common::request_input(args.question.as_deref(), args.input.as_deref())?;
    let registry = glassbox_nodes::registry();
    let record = if args.no_store {
        Record::Nowhere
    } else {
        Record::Store(args.store.store.clone())
    };
    let local = Local::open(
        &args.file,
        &registry,
        LocalOptions {
            record,
            calibrated: true,
            warn: &warn,
        },
    )
    .map_err(local_error)?;
    let lang = match args.lang {
        LangArg::En => Lang::En,
        LangArg::Zh => Lang::Zh,
    };
    let run_options = RunOptions {
        deadline: args.deadline_ms.map(Duration::from_millis),
        lang,
        ..RunOptions::default()
    };
    let outcome = local.run(input, run_options);
    // Age, hardware and version were told before the run.
    for w in local.record_warnings(&outcome) {
        out::warn(&w);
    }
    match local.close() {
        Some((url, Ok(_))) if args.format == OutputFormat::Table => {
            out::status(&format!(
                "recorded as {} in {url}",
                outcome.trace.record.request_id
            ));
        }
        Some((url, Err(e))) => out::warn(&format!("the trace was not recorded in {url}: {e}")),
        _ => {}
    }
    Out::new(args.format).result(&to_json(&outcome), || render_table(&outcome))?;
    match &outcome.result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            out::status(&format!("error: {err} [{}]", err.code()));
            Ok(ExitCode::from(exit::FAILED))
        }
    }
}

/// Prints a local run's warning on standard error.
pub(crate) fn warn(w: Warning<'_>) {
    match w {
        Warning::Topology(report) => out::diagnostics(report),
        Warning::Calibration(text) => out::warn(&text),
    }
}

/// Maps why a local run could not be set up onto documented exit codes.
pub(crate) fn local_error(err: LocalError) -> anyhow::Error {
    match err {
        LocalError::Topology(e) => topology_error(e),
        LocalError::Build(e) => build_error(e),
        LocalError::Store(e) => store_error(e),
        LocalError::Runtime(e) => anyhow::Error::new(e),
    }
}

pub(crate) fn build_error(err: PipelineError) -> anyhow::Error {
    let code = if err
        .errors
        .iter()
        .all(|e| matches!(e.error, BuildError::Unavailable { .. }))
    {
        exit::UNAVAILABLE
    } else {
        exit::INVALID
    };
    let lines: Vec<String> = err.errors.iter().map(|e| format!("  {e}")).collect();
    anyhow::Error::new(Coded {
        code,
        message: format!("the pipeline cannot be built:\n{}", lines.join("\n")),
    })
}

/// The answer text: a string output, or its `text` field, or JSON.
fn answer(output: &Value) -> String {
    match glassbox_engine::text_of(output) {
        Some(t) => t.to_string(),
        None if output.is_null() => String::new(),
        None => serde_json::to_string_pretty(output).unwrap_or_default(),
    }
}

/// The `--format json` object.
pub fn to_json(outcome: &Outcome) -> Value {
    let r: &RequestRecord = &outcome.trace.record;
    let output = match &outcome.result {
        Ok(v) => v.clone(),
        Err(_) => Value::Null,
    };
    json!({
        "request_id": r.request_id,
        "topology_id": r.topology_id,
        "version": r.version,
        "status": r.status,
        "degraded": r.degraded,
        "error": r.error,
        "output": output,
        "answer": answer(&output),
        "duration_us": r.duration_us,
        "path": r.path,
        "labels": r.labels,
        "receipt": r.receipt,
        "explanation": r.explanation.text,
        "explanation_lang": r.explanation.lang,
        "facts": r.explanation.facts,
        "spans": outcome.trace.spans.iter().map(|s| &**s).collect::<Vec<&SpanRecord>>(),
    })
}

fn ms(us: Option<u64>) -> String {
    us.map_or_else(|| "-".to_string(), |u| format!("{:.3}", u as f64 / 1000.0))
}

/// The report's tables: indented, left-aligned, two spaces apart.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    Table::new(header).indent("  ").rows(rows).render()
}

/// The human-readable report.
pub fn render_table(outcome: &Outcome) -> String {
    let r = &outcome.trace.record;
    let mut out = String::new();
    match &outcome.result {
        Ok(v) => out.push_str(&format!(
            "Answer\n  {}\n\n",
            answer(v).replace('\n', "\n  ")
        )),
        Err(e) => out.push_str(&format!("Failed\n  {e}\n\n")),
    }
    out.push_str(&format!(
        "Request {}  topology {} v{}  status {}{}  {} ms\n\n",
        r.request_id,
        r.topology_id,
        r.version,
        r.status.as_str(),
        if r.degraded { " (degraded)" } else { "" },
        ms(Some(r.duration_us)),
    ));
    let nodes: Vec<Vec<String>> = r
        .path
        .nodes
        .iter()
        .map(|n| {
            let mut status = n.status.as_str().to_string();
            if let Some(f) = &n.fallback {
                status.push_str(&format!(" → {f}"));
            }
            vec![
                n.id.to_string(),
                n.kind.to_string(),
                status,
                n.attempts.to_string(),
                n.label.clone().unwrap_or_default(),
                ms(n.start_us),
                ms(n.duration_us),
            ]
        })
        .collect();
    out.push_str("Path\n");
    out.push_str(&table(
        &[
            "NODE", "TYPE", "STATUS", "ATTEMPTS", "LABEL", "START ms", "TOOK ms",
        ],
        nodes,
    ));
    let edges: Vec<Vec<String>> = r
        .path
        .edges
        .iter()
        .map(|e| {
            vec![
                format!("{} → {}", e.from, e.to),
                if e.taken { "yes" } else { "no" }.to_string(),
                e.why.to_string(),
            ]
        })
        .collect();
    out.push_str("\nEdges\n");
    out.push_str(&table(&["EDGE", "TAKEN", "WHY"], edges));
    let mut lines: Vec<Vec<String>> = r
        .receipt
        .lines
        .iter()
        .map(|l| {
            vec![
                // A line for one step of a node (an agent's call) names it.
                match &l.step {
                    Some(step) => format!("{} ({step})", l.node),
                    None => l.node.to_string(),
                },
                l.unit.to_string(),
                l.quantity.to_string(),
                l.unit_price.to_string(),
                l.amount.to_string(),
            ]
        })
        .collect();
    lines.push(vec![
        "TOTAL".into(),
        String::new(),
        String::new(),
        String::new(),
        r.receipt.total.to_string(),
    ]);
    out.push_str(&format!("\nReceipt ({})\n", r.receipt.currency));
    out.push_str(&table(
        &["NODE", "UNIT", "QUANTITY", "UNIT PRICE", "AMOUNT"],
        lines,
    ));
    if let Ok(v) = &outcome.result {
        out.push_str(&super::agent_steps::render(v));
    }
    out.push_str(&format!("\nExplanation\n  {}\n", r.explanation.text));
    out
}
