//! `glassbox plan list-gpus | list-models | calibrate`: the catalogues and
//! the efficiency fit.

use std::process::ExitCode;

use anyhow::Context;
use glassbox_planner::explain::num;
use glassbox_planner::measurements::{self, Catalogues};
use glassbox_planner::{ModelCatalogue, calibrate, validate};

use super::args::{CalibrateArgs, ListArgs};
use super::errors::invalid;
use super::output::{planner_table, print_table};
use crate::cmd::common::OutputFormat;
use glassbox_planner::HardwareCatalogue;
use glassbox_planner::request;
use std::path::Path;

pub fn list_gpus(a: ListArgs) -> anyhow::Result<ExitCode> {
    let hw = hardware(a.hardware_file.as_deref())?;
    if a.format == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(hw.all())?);
        return Ok(ExitCode::SUCCESS);
    }
    let opt = |v: Option<f64>| v.map_or("-".to_string(), num);
    let rows = hw
        .all()
        .iter()
        .map(|g| {
            vec![
                g.id.clone(),
                g.class.to_string(),
                num(g.memory_gb),
                num(g.bandwidth_gbps),
                num(g.fp16_tflops),
                opt(g.fp8_tflops),
                opt(g.int8_tops),
                num(g.tdp_w),
                opt(g.hourly_usd),
                opt(g.purchase_usd),
            ]
        })
        .collect();
    print_table(
        &[
            "gpu",
            "class",
            "mem GB",
            "BW GB/s",
            "FP16 TF",
            "FP8 TF",
            "INT8 TOPS",
            "TDP W",
            "$/h",
            "buy $",
        ],
        rows,
    );
    Ok(ExitCode::SUCCESS)
}

pub fn list_models(a: ListArgs) -> anyhow::Result<ExitCode> {
    let models = ModelCatalogue::builtin().map_err(invalid)?;
    if a.format == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(models.all())?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows = models
        .all()
        .iter()
        .map(|m| {
            let kind = match (&m.moe, &m.mla) {
                (Some(_), Some(_)) => "MoE+MLA",
                (Some(_), None) => "MoE",
                _ => "dense",
            };
            vec![
                m.id.clone(),
                kind.to_string(),
                num(m.total_params() / 1e9),
                num(m.active_params_b()),
                m.layers.to_string(),
                m.hidden.to_string(),
                format!("{}/{}", m.heads, m.kv_heads),
                num(m.kv_bytes_per_token(2.0) / 1024.0),
                match &m.sliding_window {
                    Some(w) => format!("{} of {} layers: {}", w.layers, m.layers, w.window),
                    None => "-".to_string(),
                },
            ]
        })
        .collect();
    print_table(
        &[
            "model",
            "kind",
            "params B",
            "active B",
            "layers",
            "hidden",
            "heads/kv",
            "KV KiB/tok",
            "window",
        ],
        rows,
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let hw = hardware(a.hardware_file.as_deref())?;
    let models = ModelCatalogue::builtin().map_err(invalid)?;
    let cat = Catalogues {
        hardware: &hw,
        models: &models,
    };
    let rows = measurements::read_csv(&a.measurements).map_err(invalid)?;
    let table = calibrate::fit(&rows, cat).map_err(invalid)?;
    let report = validate::run(&rows, cat).map_err(invalid)?;
    let text = table.to_toml().map_err(invalid)?;
    match &a.output {
        Some(path) => {
            let header = format!(
                "# Efficiency factors fitted by `glassbox plan calibrate` from {} ({} rows).\n\n",
                a.measurements.display(),
                rows.len()
            );
            std::fs::write(path, header + &text)
                .with_context(|| format!("writing `{}`", path.display()))?;
            crate::out::status(&format!(
                "wrote {} (use with --calibration)",
                path.display()
            ));
        }
        None => out!("{}", text.trim_end()),
    }
    let summary = report
        .summary
        .iter()
        .map(|s| {
            vec![
                s.metric_name().to_string(),
                s.rows.to_string(),
                format!("{:.1}%", s.fitted),
                format!("{:.1}%", s.held_out),
                format!("{:.1}%", s.baseline),
            ]
        })
        .collect();
    crate::out::status("median absolute percentage error:");
    crate::out::note(
        &planner_table(&["metric", "rows", "fitted", "held-out (LOO)", "baseline"])
            .rows(summary)
            .render(),
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn hardware(file: Option<&Path>) -> anyhow::Result<HardwareCatalogue> {
    request::hardware_catalogue(file).map_err(invalid)
}
