//! `glassbox calibrate TOPOLOGY`: measure each node on this machine and
//! price it from the resource's hourly price (DESIGN.md, cost model).
//!
//! The topology is run `--requests` times in this process (one warm-up run
//! first, not counted), traces kept in memory only. Each node's mean wall
//! and CPU time per call come from its spans, and its `cost_per_call` is:
//!
//! - `cpu` nodes: CPU-seconds per call × the price of a core-second
//!   (`--core-hourly / 3600`); wall time when the node reports no CPU time;
//! - `gpu` nodes: wall seconds per call × the device's price per second ÷
//!   `--gpu-concurrency` (calls sharing the device at saturation). The
//!   device is `--gpu-hourly`, else `--gpu ID`'s catalogue price, else this
//!   machine (all its cores at `--core-hourly`): a local model on the CPU
//!   holds every core while it runs.
//!
//! The result is a dated calibration file next to the topology
//! (`glassbox_engine::calibration`), which `run` and `serve` bill from and
//! warn about when it is stale.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use glassbox_app::{Local, LocalOptions, Record};
use glassbox_engine::RunOptions;
use glassbox_engine::calibration::{
    self, Calibration, NodeCalibration, date_of, this_machine, today_days,
};
use glassbox_topology::ResourceKind;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use super::common::OutputFormat;
use crate::exit::{self, Coded};
use crate::out;
use crate::out::table::{Align, Table};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes TOPOLOGY's calibration file (rag.yaml → rag.calibration.json); \
                  `glassbox run` and `serve` bill calibrated nodes from it and warn when it \
                  is older than 14 days or the hardware, version or a model changed."
)]
pub struct Args {
    /// Topology file (JSON or YAML).
    pub file: String,
    /// The question each run sends, as `{"question": TEXT}`.
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
    /// Runs measured (after one warm-up run).
    #[arg(long, short = 'n', default_value_t = 5)]
    pub requests: u32,
    /// Price of one CPU core for an hour, USD.
    #[arg(long, default_value_t = 0.04)]
    pub core_hourly: f64,
    /// Device of the `gpu` nodes: an id in the planner's catalogue (its hourly price).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Price of the `gpu` nodes' device for an hour, USD (overrides --gpu's).
    #[arg(long)]
    pub gpu_hourly: Option<f64>,
    /// Calls sharing one device at saturation (`gpu` nodes).
    #[arg(long, default_value_t = 1)]
    pub gpu_concurrency: u32,
    /// Where to write the calibration [default: next to the topology].
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

/// Today (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    date_of(today_days())
}

fn invalid(message: String) -> anyhow::Error {
    Coded::invalid(message)
}

/// Per node, summed over the measured runs.
#[derive(Default)]
struct Sums {
    calls: u64,
    wall_us: u64,
    cpu_us: u64,
    has_cpu: bool,
    /// What the topology's prices charged.
    charged: Decimal,
}

fn device_hourly(a: &Args) -> anyhow::Result<(f64, String)> {
    if let Some(h) = a.gpu_hourly {
        return Ok((h, format!("--gpu-hourly ${h}/h")));
    }
    if let Some(id) = &a.gpu {
        let hw = glassbox_planner::request::hardware_catalogue(None)
            .map_err(|e| invalid(e.to_string()))?;
        let dev = hw.get(id).map_err(|e| invalid(e.to_string()))?;
        let h = dev.hourly_usd.ok_or_else(|| {
            invalid(format!(
                "`{id}` has no hourly price in the catalogue; pass --gpu-hourly USD"
            ))
        })?;
        return Ok((h, format!("{id} at ${h}/h (catalogue)")));
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    Ok((
        cores * a.core_hourly,
        format!("this machine: {cores} cores × ${}/core-h", a.core_hourly),
    ))
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.requests == 0 || a.gpu_concurrency == 0 {
        return Err(invalid(
            "`--requests` and `--gpu-concurrency` must be at least 1".into(),
        ));
    }
    if !(a.core_hourly.is_finite() && a.core_hourly >= 0.0) {
        return Err(invalid(format!(
            "`--core-hourly` must be 0 or more, got {}",
            a.core_hourly
        )));
    }
    let input = super::common::request_input(a.question.as_deref(), a.input.as_deref())?;
    let (gpu_hourly, gpu_basis) = device_hourly(&a)?;
    let registry = glassbox_nodes::registry();
    let local = Local::open(
        &a.file,
        &registry,
        LocalOptions {
            record: Record::Nowhere,
            calibrated: false,
            warn: &super::run::warn,
        },
    )
    .map_err(super::run::local_error)?;
    let topology = local.topology.clone();
    let mut sums: BTreeMap<String, Sums> = BTreeMap::new();
    let mut models = BTreeMap::new();
    for i in 0..=a.requests {
        let outcome = local.run(input.clone(), RunOptions::default());
        if let Err(err) = &outcome.result {
            return Err(anyhow::Error::new(Coded {
                code: exit::FAILED,
                message: format!(
                    "run {i} of `{}` failed: {err}; calibrate with an input that succeeds",
                    a.file
                ),
            }));
        }
        if i == 0 {
            continue; // warm-up: caches, lazy loads
        }
        for m in &outcome.trace.record.models {
            let v = m.version.clone().unwrap_or_else(|| m.model.clone());
            models.insert(m.node.to_string(), v);
        }
        for span in &outcome.trace.spans {
            let s = sums.entry(span.node.to_string()).or_default();
            s.calls += 1;
            s.wall_us += span.usage.wall_us;
            if let Some(c) = span.usage.cpu_us {
                s.cpu_us += c;
                s.has_cpu = true;
            }
        }
        for line in &outcome.trace.record.receipt.lines {
            let s = sums.entry(line.node.to_string()).or_default();
            s.charged += line.amount;
        }
    }
    drop(local);
    let runs = f64::from(a.requests);
    let mut nodes = Vec::new();
    for node in &topology.nodes {
        let Some(s) = sums.get(&node.id) else {
            continue; // not on the path this input takes
        };
        let calls = s.calls.max(1) as f64;
        let wall_ms = s.wall_us as f64 / 1e3 / calls;
        let cpu_ms = s.has_cpu.then(|| s.cpu_us as f64 / 1e3 / calls);
        let (hourly, cost, basis) = match node.resource.kind {
            ResourceKind::Cpu => {
                let ms = cpu_ms.unwrap_or(wall_ms);
                (
                    a.core_hourly,
                    ms * a.core_hourly / 3.6e6,
                    format!(
                        "{} {ms:.3} ms × ${}/core-h",
                        if cpu_ms.is_some() { "CPU" } else { "wall" },
                        a.core_hourly
                    ),
                )
            }
            ResourceKind::Gpu => (
                gpu_hourly,
                wall_ms * gpu_hourly / 3.6e6 / f64::from(a.gpu_concurrency),
                format!(
                    "wall {wall_ms:.3} ms × {gpu_basis} ÷ {} concurrent",
                    a.gpu_concurrency
                ),
            ),
        };
        let cost_per_call = Decimal::try_from(cost)
            .map_err(|e| invalid(format!("node `{}`: cost {cost} ({e})", node.id)))?
            .round_dp(12)
            .normalize();
        nodes.push(NodeCalibration {
            id: node.id.clone(),
            resource: node.resource.kind.as_str().into(),
            calls: s.calls,
            wall_ms,
            cpu_ms,
            hourly_usd: hourly,
            basis,
            cost_per_call,
        });
    }
    let cal = Calibration {
        topology: topology.id.clone(),
        version: topology.version.clone(),
        date: today(),
        hardware: this_machine(),
        models,
        nodes,
    };
    let path = a
        .output
        .clone()
        .unwrap_or_else(|| calibration::path_for(Path::new(&a.file)));
    std::fs::write(&path, serde_json::to_string_pretty(&cal)? + "\n")
        .map_err(|e| invalid(format!("cannot write `{}`: {e}", path.display())))?;
    match a.format {
        OutputFormat::Json => out::print_json(&cal)?,
        OutputFormat::Table => out::print_text(&table(&cal, &sums, runs, &path))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn share(part: f64, total: f64) -> String {
    if total > 0.0 {
        format!("{:.1}%", part / total * 100.0)
    } else {
        "-".into()
    }
}

fn table(cal: &Calibration, sums: &BTreeMap<String, Sums>, runs: f64, path: &Path) -> String {
    let mut out = format!(
        "{} {} on {} ({}), {} measured runs\n",
        cal.topology, cal.version, cal.hardware, cal.date, runs
    );
    let wall_total: f64 = cal.nodes.iter().map(|n| n.wall_ms * n.calls as f64).sum();
    let new_total: f64 = cal
        .nodes
        .iter()
        .map(|n| n.cost_per_call.to_f64().unwrap_or(0.0) * n.calls as f64)
        .sum();
    let old_total: f64 = sums
        .values()
        .map(|s| s.charged.to_f64().unwrap_or(0.0))
        .sum();
    let rows = cal
        .nodes
        .iter()
        .map(|n| {
            let calls = n.calls as f64;
            let old = sums
                .get(&n.id)
                .map_or(0.0, |s| s.charged.to_f64().unwrap_or(0.0));
            vec![
                n.id.clone(),
                n.resource.clone(),
                format!("{:.2}", n.wall_ms),
                n.cpu_ms.map_or("-".into(), |c| format!("{c:.2}")),
                share(n.wall_ms * calls, wall_total),
                n.cost_per_call.to_string(),
                share(n.cost_per_call.to_f64().unwrap_or(0.0) * calls, new_total),
                share(old, old_total),
                n.basis.clone(),
            ]
        })
        .collect();
    let header = [
        "node",
        "resource",
        "wall ms",
        "cpu ms",
        "time",
        "cost_per_call",
        "cost (calibrated)",
        "cost (topology)",
        "basis",
    ];
    let mut align = vec![Align::Number; header.len()];
    align[0] = Align::Left;
    align[1] = Align::Left;
    align[8] = Align::Left;
    out.push_str(
        Table::new(&header)
            .rule()
            .align(&align)
            .rows(rows)
            .render()
            .trim_end(),
    );
    out.push_str(&format!(
        "\n\nwrote {} — `glassbox run` and `serve` bill these nodes from it\n",
        path.display()
    ));
    out
}
