//! `glassbox run`: run one request through a topology and show its path,
//! receipt and explanation.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use glassbox_engine::trace::{Lang, NoopSink, RequestRecord, SpanRecord, TraceSink};
use glassbox_engine::{BuildError, Outcome, PipelineError, PipelineOptions, RunOptions};
use glassbox_nodes::{AssembleError, Assembly, TopologyInput};
use serde_json::{Value, json};

use super::common::{LangArg, OutputFormat, color, topology_error};
use super::trace::{StoreArg, store_error};
use crate::exit::{self, Coded};
use crate::table::Table;

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
    let calibration = calibration_for(&args.file);
    // The request is recorded off the request path by the store's writer;
    // `close` below waits until it is durable. The store is opened once the
    // topology is known to be valid.
    let writer = std::cell::OnceCell::new();
    let options = |topology: &glassbox_topology::Topology,
                   warnings: &glassbox_topology::Report|
     -> anyhow::Result<PipelineOptions> {
        if !warnings.diagnostics.is_empty() {
            eprint!("{}", warnings.render(color(false)));
        }
        let sink: Arc<dyn TraceSink> = if args.no_store {
            Arc::new(NoopSink)
        } else {
            let url = glassbox_store::StoreUrl::resolve(args.store.store.as_deref())
                .map_err(store_error)?;
            let opened = glassbox_store::open_with(&url, glassbox_store::WriterOptions::default())
                .map_err(store_error)?;
            let opened = Arc::new(opened);
            writer.get_or_init(|| (opened.clone(), url));
            opened
        };
        let prices = match &calibration {
            Some(c) => {
                let today = glassbox_engine::calibration::today_days();
                let machine = glassbox_engine::calibration::this_machine();
                let none = std::collections::BTreeMap::new();
                for w in c.warnings(today, &machine, &topology.version, &none) {
                    eprintln!("warning: {w}");
                }
                c.prices()
            }
            None => Default::default(),
        };
        Ok(PipelineOptions {
            sink,
            prices,
            ..PipelineOptions::default()
        })
    };
    let assembly = Assembly {
        registry: &registry,
        options: &options,
        outbound: None,
        models: None,
        cluster: None,
    };
    let assembled = glassbox_nodes::assemble(TopologyInput::Path(args.file.clone()), &assembly)
        .map_err(|e| match e {
            AssembleError::Topology(err) => topology_error(err),
            AssembleError::Options(err) => err,
            AssembleError::Build(err) => build_error(err),
        })?;
    let pipeline = assembled.pipeline;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let lang = match args.lang {
        LangArg::En => Lang::En,
        LangArg::Zh => Lang::Zh,
    };
    let run_options = RunOptions {
        deadline: args.deadline_ms.map(Duration::from_millis),
        lang,
        ..RunOptions::default()
    };
    let outcome = runtime.block_on(pipeline.run(input, run_options));
    drop(pipeline);
    if let Some(c) = &calibration {
        // Age, hardware and version were told before the run.
        for w in c.record_warnings(&outcome.trace.record) {
            eprintln!("warning: {w}");
        }
    }
    if let Some((writer, url)) = writer.into_inner() {
        match writer.close() {
            Ok(_) if args.format == OutputFormat::Table => {
                eprintln!("recorded as {} in {url}", outcome.trace.record.request_id);
            }
            Ok(_) => {}
            Err(e) => eprintln!("warning: the trace was not recorded in {url}: {e}"),
        }
    }
    match args.format {
        OutputFormat::Json => crate::exit::emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&to_json(&outcome))?
        ))?,
        OutputFormat::Table => crate::exit::emit(&render_table(&outcome))?,
    }
    match &outcome.result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("error: {err} [{}]", err.code());
            Ok(ExitCode::from(exit::FAILED))
        }
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
                l.node.to_string(),
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

/// The calibration beside the topology file (`glassbox calibrate`), if
/// any; one that cannot be read is reported and not used.
fn calibration_for(file: &str) -> Option<glassbox_engine::calibration::Calibration> {
    if file == "-" {
        return None;
    }
    match glassbox_engine::calibration::Calibration::find(std::path::Path::new(file))? {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("warning: {e}; billing with the topology's prices");
            None
        }
    }
}
