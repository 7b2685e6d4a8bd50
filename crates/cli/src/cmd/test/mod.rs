//! `glassbox test TOPOLOGY [CASES...] [--replay]`: regression tests for a
//! topology, for CI.
//!
//! The work is library code, `glassbox_app::regress`: cases (YAML,
//! `cases`) each give an input and what the run must show: the path and
//! labels, the guard outcome, checks on the answer (contains, regex, JSON
//! schema), cost and latency bounds (`expect`); they run into suites
//! (`suite`). `--replay` runs stored requests again through this topology
//! and reports every one whose path, guard outcome or cost changed
//! (`replay`). The pipeline is read and validated once and built once, the
//! way `glassbox run` builds it (`glassbox_app::Local`), and runs
//! in-process; test runs are recorded in the trace store only with
//! `--record` (for `trace show` on a failing case). This module
//! resolves the flags, calls those, and prints.
//!
//! Results print as a table (or JSON) and, with `--junit FILE`, as JUnit XML
//! (`glassbox_app::regress::junit`). Exit codes: 0 every case passed and no replayed request
//! changed, 1 a case failed or a request changed, 2 usage, 69 a model or
//! the store is unavailable, 78 an invalid topology, case file or option.

use std::process::ExitCode;

use glassbox_app::local::Warning;
use glassbox_app::regress::replay::{self, ReplayError, ReplayOptions};
use glassbox_app::regress::suite::{self, CaseResult, Suite};
use glassbox_app::regress::{cases, junit};
use glassbox_app::{Local, LocalOptions, Record};
use glassbox_topology::Source;
use serde_json::json;

use super::common::OutputFormat;
use super::run::local_error;
use super::store::{FilterArgs, StoreArg, store_error};
use crate::exit::{self, Coded};
use crate::out::table::{Align, Table};
use crate::out::{self, Out};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 every case passed (and no replayed request changed), \
                        1 a case failed or a replayed request changed, 2 usage, 69 a model or the \
                        store is unavailable, 78 an invalid topology, case file or option."
)]
pub struct Args {
    /// Topology file (JSON or YAML) under test.
    #[arg(value_name = "TOPOLOGY")]
    pub file: String,
    /// Case files (YAML or JSON) with `cases:`; see docs/lifecycle.md.
    #[arg(required_unless_present = "replay")]
    pub cases: Vec<String>,
    /// Also run the stored requests of this topology id again and report
    /// each whose path, labels, status, guard outcome or cost changed.
    #[arg(long)]
    pub replay: bool,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Most stored requests replayed (newest first).
    #[arg(long, default_value_t = 200, requires = "replay")]
    pub limit: u32,
    /// A replayed request's total cost counts as changed beyond this
    /// relative difference (CPU-time prices vary from run to run; call and
    /// token prices are compared exactly).
    #[arg(
        long,
        default_value_t = 0.25,
        value_name = "FRACTION",
        requires = "replay"
    )]
    pub cost_tolerance: f64,
    /// Record the cases' runs in the trace store (`--store`), so that
    /// `glassbox trace show REQUEST_ID` opens a case's whole trace (every
    /// span, a tool's answer included). Best kept to a store of its own:
    /// recorded cases are stored requests like any other, for replay and
    /// drift alerts alike.
    #[arg(long, conflicts_with = "replay")]
    pub record: bool,
    /// Also write the results as JUnit XML to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let output = Out::new(args.format);
    if !(args.cost_tolerance.is_finite() && args.cost_tolerance >= 0.0) {
        return Err(Coded::invalid(format!(
            "`--cost-tolerance {}` must be a fraction of zero or more (0.25 is 25%)",
            args.cost_tolerance
        )));
    }
    let registry = glassbox_nodes::registry();
    // Read and validated once. Case files are read against the validated
    // topology before anything is built, so a typo in a case never waits
    // for a model to load.
    let validated = Local::validate(&args.file, &registry).map_err(local_error)?;
    if !validated.report.diagnostics.is_empty() {
        out::diagnostics(&validated.report);
    }
    let topology = &validated.topology;
    let mut files = Vec::new();
    let mut bad = Vec::new();
    for path in &args.cases {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Coded::invalid(format!(
                "cannot read case file `{path}`: {e} (check the path)"
            ))
        })?;
        match cases::read(Source::new(path.as_str(), text), topology) {
            Ok(c) => files.push((path.clone(), c)),
            Err(report) => {
                out::diagnostics(&report);
                bad.push(format!(
                    "`{path}` is not a valid case file ({})",
                    report.summary()
                ));
            }
        }
    }
    if !bad.is_empty() {
        return Err(Coded::invalid(bad.join("; ")));
    }
    // Warnings were printed above; test runs are recorded only when asked.
    let record = if args.record {
        Record::Store(args.store.store.clone())
    } else {
        Record::Nowhere
    };
    let local = Local::build(
        validated,
        &args.file,
        &registry,
        LocalOptions {
            record,
            calibrated: false,
            warn: &|w| {
                if let Warning::Calibration(text) = w {
                    out::warn(&text);
                }
            },
        },
    )
    .map_err(local_error)?;
    let mut suites = suite::run_cases(&local, &files);
    if args.replay {
        suites.push(replay_stored(&local, &args)?);
    }
    drop(local);
    if let Some(file) = &args.junit {
        std::fs::write(file, junit::render(&suites)).map_err(|e| {
            Coded::invalid(format!("cannot write the JUnit report to `{file}`: {e}"))
        })?;
    }
    output.result(&to_json(&suites), || render(&suites))?;
    let (_, failed, _) = suite::totals(&suites);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::FAILED)
    })
}

/// `--replay`: the store and filter resolved from the flags, the stored
/// requests replayed (a warning when none matched).
fn replay_stored(local: &Local, args: &Args) -> anyhow::Result<Suite> {
    let mut store = args.store.open()?;
    let options = ReplayOptions {
        filter: args.filter.filter(None)?,
        limit: args.limit,
        cost_tolerance: args.cost_tolerance,
    };
    let suite = replay::replay(local, &mut *store, &options).map_err(|e| match e {
        ReplayError::Store(e) => store_error(e),
        missing @ ReplayError::Missing(_) => Coded::invalid(missing.to_string()),
    })?;
    if suite.results.is_empty() {
        let topology = options
            .filter
            .topology
            .as_deref()
            .unwrap_or(&local.topology.id);
        out::warn(&format!(
            "no stored requests of `{topology}` match, so nothing was replayed \
             (hint: `glassbox trace list` shows what the store holds; `--store` picks the store)"
        ));
    }
    Ok(suite)
}

fn to_json(suites: &[Suite]) -> serde_json::Value {
    let results = |s: &Suite| {
        s.results
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "location": r.location,
                    "passed": r.passed(),
                    "failures": r.failures,
                    "skipped": r.skipped,
                    "request_id": r.request_id,
                    "path": r.path,
                    "cost": r.cost,
                    "seconds": r.seconds,
                })
            })
            .collect::<Vec<_>>()
    };
    let (passed, failed, skipped) = suite::totals(suites);
    json!({
        "passed": passed,
        "failed": failed,
        "skipped": skipped,
        "suites": suites.iter().map(|s| json!({"name": s.name, "results": results(s)})).collect::<Vec<_>>(),
    })
}

/// The terminal report: one table per suite, each miss under its case.
fn render(suites: &[Suite]) -> String {
    let mut out = String::new();
    for s in suites {
        out.push_str(&format!("{}\n", s.name));
        let rows: Vec<Vec<String>> = s
            .results
            .iter()
            .map(|r| {
                let result = if r.skipped.is_some() {
                    "skip"
                } else if r.failures.is_empty() {
                    "pass"
                } else {
                    "FAIL"
                };
                vec![
                    result.to_string(),
                    r.name.clone(),
                    r.path.clone(),
                    r.cost.clone(),
                    format!("{:.1} ms", r.seconds * 1000.0),
                ]
            })
            .collect();
        if rows.is_empty() {
            out.push_str("  (nothing to run)\n");
        } else {
            let table = Table::new(&["RESULT", "CASE", "PATH", "COST", "TOOK"])
                .indent("  ")
                .align(&[
                    Align::Left,
                    Align::Left,
                    Align::Left,
                    Align::Right,
                    Align::Right,
                ])
                .rows(rows)
                .render();
            // The header, then each case's row followed by its misses, so
            // long misses do not widen the table.
            let mut lines = table.lines();
            if let Some(header) = lines.next() {
                out.push_str(&format!("{header}\n"));
            }
            for (line, r) in lines.zip(&s.results) {
                out.push_str(&format!("{line}\n"));
                for f in r.failures.iter().chain(&r.skipped) {
                    out.push_str(&format!("          {f}\n"));
                }
            }
        }
        out.push('\n');
    }
    let all: Vec<&CaseResult> = suites.iter().flat_map(|s| &s.results).collect();
    let failed = all.iter().filter(|r| !r.failures.is_empty()).count();
    let skipped = all.iter().filter(|r| r.skipped.is_some()).count();
    out.push_str(&format!(
        "{} run: {} passed, {failed} failed, {skipped} skipped\n",
        all.len(),
        all.len() - failed - skipped,
    ));
    out
}
