//! `glassbox plan`: capacity planning for LLM inference (memory, speed, GPUs, cost).
//!
//! A thin shell over `glassbox-planner`: the flags become a
//! [`PlanRequest`], the planner resolves it (model, format, engine and
//! every default) and plans it per GPU, and [`print`] shows the result as a
//! table with an "explain" section (every figure with its formula and
//! inputs) or as JSON. The catalogue listings and `calibrate` are in
//! [`catalogue`].

use std::process::ExitCode;

use glassbox_planner::request;
use glassbox_planner::{Estimator, ModelCatalogue};

use crate::cmd::common::OutputFormat;

/// Writes a line to stdout through the output layer (`crate::out::emit`),
/// ignoring a closed pipe (`glassbox plan ... | head`).
macro_rules! out {
    () => {{
        let _ = crate::out::emit("\n");
    }};
    ($($t:tt)*) => {{
        let _ = crate::out::emit(&format!("{}\n", format_args!($($t)*)));
    }};
}

mod args;
mod catalogue;
mod errors;
mod output;
mod pipeline;
mod print;
mod simulate;

pub use args::{Args, PlanArgs, Sub};
use catalogue::hardware;
use errors::{invalid, usage};

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Calibrate(a)) => catalogue::run_calibrate(a),
        Some(Sub::ListGpus(a)) => catalogue::list_gpus(a),
        Some(Sub::ListModels(a)) => catalogue::list_models(a),
        Some(Sub::Pipeline(a)) => pipeline::run(*a),
        None => run_plan(*args.plan),
    }
}

/// Flags → request → resolved request → a plan per GPU → printer.
fn run_plan(p: PlanArgs) -> anyhow::Result<ExitCode> {
    let model = p
        .model
        .as_deref()
        .ok_or_else(|| usage("`--model` is required"))?;
    let hw = hardware(p.hardware_file.as_deref())?;
    let models = ModelCatalogue::builtin().map_err(invalid)?;
    let resolved = p
        .request(model)
        .and_then(|r| r.resolve(&models))
        .map_err(invalid)?;
    let est = Estimator::new(request::efficiency_table(p.calibration.as_deref()).map_err(invalid)?)
        .with_server_path_ms(server_path_ms(p.server_path_ms)?);
    let plan_for = |gpu: &str| {
        let device = hw.get(gpu).map_err(invalid)?;
        resolved.plan(&est, device).map_err(invalid)
    };
    if !p.compare.is_empty() {
        if p.sim.wanted() {
            return Err(usage(
                "simulation (`--rate`, `--sla-*-p99`) sizes one GPU at a time: use `--gpu` instead of `--compare`",
            ));
        }
        let plans = p
            .compare
            .iter()
            .map(|g| plan_for(g))
            .collect::<anyhow::Result<Vec<_>>>()?;
        return print::print_compare(&plans, p.format);
    }
    let gpu = p
        .gpu
        .as_deref()
        .ok_or_else(|| usage("`--gpu` (or `--compare`) is required"))?;
    if p.sim.wanted() {
        let device = hw.get(gpu).map_err(invalid)?;
        return simulate::run(&p.sim, &resolved, &est, device, p.format);
    }
    let plan = plan_for(gpu)?;
    match p.format {
        OutputFormat::Json => out!(
            "{}",
            serde_json::to_string_pretty(&print::plan_json(&plan))?
        ),
        OutputFormat::Table => print::print_plan(
            &plan,
            &resolved.model.spec.name,
            resolved.model.origin,
            p.quant.is_none() && resolved.model.file_quant.is_some(),
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `--server-path-ms`, checked: a time in milliseconds a client could wait.
fn server_path_ms(ms: Option<f64>) -> anyhow::Result<Option<f64>> {
    match ms {
        Some(v) if !(v.is_finite() && (0.0..=60_000.0).contains(&v)) => Err(usage(&format!(
            "`--server-path-ms {v}` is not a time between 0 and 60000 ms (hint: a lone request's TTFT on your host less the prompt's pass, e.g. `--server-path-ms 12`)"
        ))),
        other => Ok(other),
    }
}
