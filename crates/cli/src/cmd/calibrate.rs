//! `glassbox calibrate TOPOLOGY`: measure each node on this machine and
//! price it from the resource's hourly price (DESIGN.md, cost model).
//!
//! Flags → resolved (the request input; the `gpu` nodes' device: its
//! `--gpu-hourly`, else `--gpu ID`'s price in the planner's catalogue,
//! else this machine's cores at `--core-hourly`; the topology opened here
//! with no trace store) → the application layer's work
//! (`glassbox_app::calibrate::measure`: one warm-up run, `--requests`
//! measured, each node priced) → the calibration file next to the
//! topology, which `run` and `serve` bill from and warn about when it is
//! stale → one report, as a table or JSON.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use glassbox_app::calibrate::{CalibrateError, Device, Measured, Plan, measure, write};
use glassbox_app::{Local, LocalOptions, Record};
use glassbox_engine::calibration::{self, Calibration, date_of, today_days};
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

/// The `gpu` nodes' device, as the flags name it.
fn device(a: &Args) -> anyhow::Result<Device> {
    if let Some(h) = a.gpu_hourly {
        return Ok(Device {
            hourly: h,
            basis: format!("--gpu-hourly ${h}/h"),
        });
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
        return Ok(Device {
            hourly: h,
            basis: format!("{id} at ${h}/h (catalogue)"),
        });
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Ok(Device::this_machine(cores, a.core_hourly))
}

fn calibrate_error(e: CalibrateError) -> anyhow::Error {
    let code = match e {
        CalibrateError::RunFailed { .. } => exit::FAILED,
        CalibrateError::Invalid(_) | CalibrateError::Write { .. } => exit::INVALID,
    };
    anyhow::Error::new(Coded {
        code,
        message: e.to_string(),
    })
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let plan = Plan {
        requests: a.requests,
        core_hourly: a.core_hourly,
        device: device(&a)?,
        gpu_concurrency: a.gpu_concurrency,
    };
    plan.check().map_err(calibrate_error)?;
    let input = super::common::request_input(a.question.as_deref(), a.input.as_deref())?;
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
    let measured = measure(&local, &a.file, &input, &plan).map_err(calibrate_error)?;
    drop(local);
    let path = a
        .output
        .clone()
        .unwrap_or_else(|| calibration::path_for(Path::new(&a.file)));
    write(&measured.calibration, &path).map_err(calibrate_error)?;
    match a.format {
        OutputFormat::Json => out::print_json(&measured.calibration)?,
        OutputFormat::Table => out::print_text(&table(&measured, &path))?,
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

fn table(m: &Measured, path: &Path) -> String {
    let cal: &Calibration = &m.calibration;
    let mut out = format!(
        "{} {} on {} ({}), {} measured runs\n",
        cal.topology, cal.version, cal.hardware, cal.date, m.runs
    );
    let wall_total: f64 = cal.nodes.iter().map(|n| n.wall_ms * n.calls as f64).sum();
    let new_total: f64 = cal
        .nodes
        .iter()
        .map(|n| n.cost_per_call.to_f64().unwrap_or(0.0) * n.calls as f64)
        .sum();
    let old_total: f64 = m.charged.values().map(|c| c.to_f64().unwrap_or(0.0)).sum();
    let rows = cal
        .nodes
        .iter()
        .map(|n| {
            let calls = n.calls as f64;
            let old = m
                .charged
                .get(&n.id)
                .map_or(0.0, |c| c.to_f64().unwrap_or(0.0));
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
