//! `glassbox alerts`: drift alerts over the trace store.
//!
//! The last `--window` of traffic against the `--baseline` just before it,
//! per topology: route-ratio shifts, per-node P99 regressions and
//! cost-per-request jumps, each with its evidence (baseline and current
//! numbers, sample sizes, the test and its p-value). The thresholds are
//! `glassbox_store::drift::Thresholds`, the same the server's `[alerts]`
//! config section sets.

use std::fmt::Write as _;
use std::process::ExitCode;

use glassbox_store::drift::{self, DriftOptions, Evaluation, Thresholds};
use glassbox_store::time::parse_duration;

use super::common::OutputFormat;
use super::store::{StoreArg, format_time, store_error};
use crate::exit::{self, Coded};
use crate::out;
use crate::out::table::{Align, Table};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 ok (with --check: no alert fires), 1 a store error \
                        (with --check: an alert fires), 2 usage, 69 the store cannot be \
                        reached, 78 a bad store URL, window or threshold."
)]
pub struct Args {
    #[command(flatten)]
    pub store: StoreArg,
    /// Only this topology id.
    #[arg(long)]
    pub topology: Option<String>,
    /// The window checked: the last 30m, 1h, 1d, ...
    #[arg(long, default_value = "1h", value_name = "LENGTH")]
    pub window: String,
    /// The baseline: this long just before the window.
    #[arg(long, default_value = "24h", value_name = "LENGTH")]
    pub baseline: String,
    /// Fewest requests (or a node's spans) each window needs to be compared.
    #[arg(long)]
    pub min_samples: Option<u64>,
    /// Significance level per topology (split over its comparisons).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Smallest move of a path's share that fires (0.10 = ten points).
    #[arg(long)]
    pub route_shift: Option<f64>,
    /// Smallest current/baseline P99 ratio that fires.
    #[arg(long)]
    pub p99_ratio: Option<f64>,
    /// And the smallest P99 growth, in milliseconds.
    #[arg(long)]
    pub p99_min_ms: Option<f64>,
    /// Smallest current/baseline mean cost per request ratio that fires.
    #[arg(long)]
    pub cost_ratio: Option<f64>,
    /// Exit 1 when any alert fires (for cron jobs and CI).
    #[arg(long)]
    pub check: bool,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

fn invalid(message: String) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::INVALID,
        message,
    })
}

impl Args {
    /// The thresholds: the defaults with the flags given applied; every bad
    /// value is named.
    pub fn thresholds(&self) -> anyhow::Result<Thresholds> {
        let mut t = Thresholds::default();
        if let Some(v) = self.min_samples {
            t.min_samples = v;
        }
        if let Some(v) = self.alpha {
            t.alpha = v;
        }
        if let Some(v) = self.route_shift {
            t.route_shift = v;
        }
        if let Some(v) = self.p99_ratio {
            t.p99_ratio = v;
        }
        if let Some(v) = self.p99_min_ms {
            t.p99_min_ms = v;
        }
        if let Some(v) = self.cost_ratio {
            t.cost_ratio = v;
        }
        let problems = t.problems();
        if !problems.is_empty() {
            return Err(invalid(format!(
                "bad alert thresholds: {} (the flags are named after the fields, e.g. \
                 `--route-shift` sets `route_shift`)",
                problems.join("; ")
            )));
        }
        Ok(t)
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let length =
        |flag: &str, v: &str| parse_duration(v).map_err(|e| invalid(format!("`--{flag}`: {e}")));
    let options = DriftOptions {
        topology: args.topology.clone().filter(|t| !t.is_empty()),
        now_us: glassbox_trace::unix_micros_now(),
        window_us: length("window", &args.window)?,
        baseline_us: length("baseline", &args.baseline)?,
        thresholds: args.thresholds()?,
    };
    let mut store = args.store.open()?;
    let ev = drift::evaluate(&mut *store, &options).map_err(store_error)?;
    match args.format {
        OutputFormat::Json => out::print_json(&ev)?,
        OutputFormat::Table => out::print_text(&table(&ev))?,
    }
    Ok(if args.check && !ev.alerts.is_empty() {
        ExitCode::from(exit::FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn at(us: u64) -> String {
    format_time(i64::try_from(us).unwrap_or(i64::MAX))
}

fn value(kind: drift::AlertKind, v: f64) -> String {
    match kind {
        drift::AlertKind::RouteShift => format!("{:.1}%", v * 100.0),
        drift::AlertKind::P99Regression => format!("{v:.1} ms"),
        drift::AlertKind::CostJump => format!("{v:.6}"),
    }
}

/// The human-readable list.
pub fn table(ev: &Evaluation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "window    {} → {} UTC  ({} requests)\nbaseline  {} → {} UTC  ({} requests)",
        at(ev.window_from_us),
        at(ev.until_us),
        ev.current_requests,
        at(ev.baseline_from_us),
        at(ev.window_from_us),
        ev.baseline_requests
    );
    if ev.alerts.is_empty() {
        out.push_str("\nno alerts firing\n");
        return out;
    }
    let _ = writeln!(out, "\n{} alert(s) firing", ev.alerts.len());
    let rows = ev
        .alerts
        .iter()
        .map(|a| {
            vec![
                a.kind.as_str().to_string(),
                a.topology.clone(),
                a.node.replace('>', "→"),
                format!(
                    "{} → {}",
                    value(a.kind, a.baseline.value),
                    value(a.kind, a.current.value)
                ),
                format!("{} / {}", a.baseline.samples, a.current.samples),
                format!("{:.1e} < {:.1e}", a.p_value, a.level),
            ]
        })
        .collect();
    out.push_str(
        &Table::new(&[
            "kind",
            "topology",
            "node / path",
            "baseline → now",
            "n",
            "p",
        ])
        .indent("  ")
        .gap(2)
        .align(&[
            Align::Left,
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
        ])
        .rows(rows)
        .render(),
    );
    out.push('\n');
    for a in &ev.alerts {
        let _ = writeln!(out, "  {} [{}]", a.message, a.test);
    }
    out
}
