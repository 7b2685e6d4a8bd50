//! What `glassbox plan` prints: one plan (estimate, formats, sizing) as text
//! or JSON, and the `--compare` ranking.

use std::process::ExitCode;

use glassbox_planner::explain::{Line, num};
use glassbox_planner::request::{Plan, rank};
use serde_json::json;

use super::output::print_table;
use crate::cmd::common::OutputFormat;

/// The `--format json` object of one plan.
pub fn plan_json(plan: &Plan) -> serde_json::Value {
    let e = &plan.estimate;
    let (gpus, cost, binding, sizing, sizing_error) = match &plan.sizing {
        Ok(s) => (
            json!(s.gpus_needed),
            json!(s.cost_per_1m_tokens),
            s.binding_constraint.clone(),
            serde_json::to_value(s).unwrap_or_default(),
            serde_json::Value::Null,
        ),
        Err(err) => (
            serde_json::Value::Null,
            serde_json::Value::Null,
            if e.fits {
                e.binding_constraint.clone()
            } else {
                "memory".into()
            },
            serde_json::Value::Null,
            json!({"code": err.code(), "message": err.to_string()}),
        ),
    };
    json!({
        "model": e.model, "gpu": e.gpu, "quant": e.quant, "engine": e.engine, "tp": e.tp,
        "pp": e.pp,
        "parallelism": serde_json::to_value(&plan.parallelism).unwrap_or_default(),
        "weights_gb": e.weights_gb,
        "kv_bytes_per_token": e.kv_bytes_per_token,
        "max_concurrent_seqs": e.max_concurrent_seqs,
        "prefill_tok_s": e.prefill_tok_s,
        "decode_tok_s": e.decode_tok_s,
        "ttft_ms": e.ttft_ms,
        "tpot_ms": e.tpot_ms,
        "gpus_needed": gpus,
        "cost_per_1m_tokens": cost,
        "binding_constraint": binding,
        "estimate": serde_json::to_value(e).unwrap_or_default(),
        "sizing": sizing,
        "sizing_error": sizing_error,
        "accuracy": serde_json::to_value(&plan.accuracy).unwrap_or_default(),
        "coverage": serde_json::to_value(&plan.coverage).unwrap_or_default(),
        "sealed_on_gpu": serde_json::to_value(&plan.sealed_on_gpu).unwrap_or_default(),
    })
}

/// Unit of a metric's figures.
fn unit(metric: &str) -> &'static str {
    if metric == "ttft_ms" { "ms" } else { "tok/s" }
}

/// The held-out accuracy of the plan's headline figures.
fn print_accuracy(plan: &Plan) {
    if plan.accuracy.is_empty() {
        return;
    }
    out!(
        "accuracy on public measurements the planner had not seen (each predicted with its whole source left out; docs/planner.md, \"Accuracy bands\"):"
    );
    let rows = plan
        .accuracy
        .iter()
        .map(|r| {
            let b = &r.band;
            let u = unit(&r.metric);
            let scope = b.describe_scope();
            vec![
                r.metric.clone(),
                format!("{} {u}", num(r.predicted)),
                format!("{}–{} {u}", num(r.low), num(r.high)),
                format!("{:.1}%", b.mdape),
                format!(
                    "{} rows, {} source{}",
                    b.rows,
                    b.sources,
                    if b.sources == 1 { "" } else { "s" }
                ),
                scope,
                blind_cell(r),
            ]
        })
        .collect();
    print_table(
        &[
            "figure",
            "predicted",
            "80% of measurements were",
            "median error",
            "held-out rows",
            "band from",
            "blind: median error on sealed sources",
        ],
        rows,
    );
    let c = &plan.coverage;
    out!(
        "public rows like this setup (of {}): {} on the {}, {} on {} GPUs, {} from {}, {} in {}, {} at tp {}, {} on {}, {} on {} models",
        c.rows,
        c.gpu,
        plan.estimate.gpu,
        c.vendor_rows,
        c.vendor,
        c.engine,
        plan.estimate.engine,
        c.quant,
        plan.estimate.quant,
        c.tp,
        plan.estimate.tp,
        c.model,
        plan.estimate.model,
        c.architecture_rows,
        c.architecture.as_str()
    );
    if let Some(n) = c.windowed_rows {
        out!("public rows on models with sliding-window layers: {n}");
    }
    if !c.uncovered.is_empty() {
        out!(
            "not covered by the public rows: {}; the band comes from other setups: expect the blind column's error",
            c.uncovered.join("; ")
        );
    }
    if !plan.sealed_on_gpu.is_empty() {
        let figures: Vec<String> = plan
            .sealed_on_gpu
            .iter()
            .map(|g| {
                format!(
                    "{} {:.2}× ({} {}rows{}, {} source{})",
                    g.metric,
                    g.measured_over_planned,
                    g.rows,
                    g.engine_family
                        .as_ref()
                        .map_or(String::new(), |f| format!("{f} ")),
                    g.batch_range
                        .map_or(String::new(), |(lo, hi)| format!(" at {lo}–{hi} in flight")),
                    g.sources,
                    if g.sources == 1 { "" } else { "s" }
                )
            })
            .collect();
        out!(
            "sealed rows on the {}, measured ÷ planned by this model (median): {}",
            plan.estimate.gpu,
            figures.join(", ")
        );
    }
    out!(
        "the band's rows were looked at while the model was built; the blind column is the same figure on sources scored once, before any change they prompted (docs/planner.md, \"Sealed holdouts\")"
    );
    out!();
}

fn explain_rows(lines: &[Line]) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|l| {
            vec![
                l.metric.clone(),
                format!("{} {}", num(l.value), l.unit),
                l.formula.clone(),
                l.inputs.clone(),
            ]
        })
        .collect()
}

/// One plan as text: the estimate with its formulas, the weight formats,
/// the workload sizing. `file_format`: the weight format is the model
/// file's own, not one `--quant` named.
pub fn print_plan(plan: &Plan, model_name: &str, origin: &str, file_format: bool) {
    let e = &plan.estimate;
    out!(
        "{model_name} ({origin}) on {} × {}, {}{} ({} bpw), engine {}, batch {}",
        e.tp * e.pp,
        e.gpu,
        e.quant,
        if file_format {
            ", the model's own format (--quant for another)"
        } else {
            ""
        },
        num(e.weights_gb * 8e9 / (e.total_params_b * 1e9)),
        e.engine,
        e.batch
    );
    out!("engine profile: {}", e.engine_profile);
    if let Some(clock) = &e.compute_clock {
        out!("compute clock: {clock}");
    }
    if let Some(stream) = &e.memory_stream {
        out!("memory bandwidth: {stream}");
    }
    let p = &plan.parallelism;
    out!(
        "GPUs: tp {} × pp {} per replica, dp {} replica(s) ({}): {}",
        p.tp,
        p.pp,
        p.dp,
        if p.assumed { "assumed" } else { "as given" },
        p.why
    );
    out!(
        "params {} B total, {} B active; factors: prefill η {} + {} ms ({}), decode η {} + {} ms ({})\n",
        num(e.total_params_b),
        num(e.active_params_b),
        num(e.factors.prefill_efficiency),
        num(e.factors.prefill_overhead_ms),
        e.factors.prefill_level,
        num(e.factors.decode_efficiency),
        num(e.factors.decode_overhead_ms),
        e.factors.decode_level
    );
    print_table(
        &["estimate", "value", "formula", "inputs"],
        explain_rows(&e.explain),
    );
    out!();
    print_accuracy(plan);
    let fmt_rows = e
        .weights_by_format
        .iter()
        .map(|w| vec![w.quant.clone(), num(w.bits_per_weight), num(w.gb)])
        .collect();
    print_table(&["format", "bits/weight", "weights GB"], fmt_rows);
    out!();
    match &plan.sizing {
        Ok(s) => {
            out!(
                "workload: {} GPU(s) ({} replica(s) × tp {} × pp {}), batch {}, utilisation {:.0}%, {} tokens/day/GPU, ${} per 1M tokens ({} per 1M output), SLA {}, binding: {}",
                s.gpus_needed,
                s.replicas,
                e.tp,
                e.pp,
                s.batch,
                s.utilisation * 100.0,
                num(s.tokens_per_day_per_gpu),
                num(s.cost_per_1m_tokens),
                num(s.cost_per_1m_output_tokens),
                if s.meets_sla { "met" } else { "NOT met" },
                s.binding_constraint
            );
            print_table(
                &["sizing", "value", "formula", "inputs"],
                explain_rows(&s.explain),
            );
            if let Some(m) = &s.mixed_pool {
                out!(
                    "\nmixed pool (seed 003): separate online+offline pools {} GPUs at {:.0}% vs one shared pool {} GPUs at {:.0}% (simultaneous-use {})",
                    m.separate_gpus,
                    m.separate_utilisation * 100.0,
                    m.mixed_gpus,
                    m.mixed_utilisation * 100.0,
                    num(m.simultaneous_use)
                );
            }
        }
        Err(err) => out!("workload sizing: {err}"),
    }
}

/// `--compare`: the plans ranked (SLA met first, then by cost per 1M tokens).
pub fn print_compare(plans: &[Plan], format: OutputFormat) -> anyhow::Result<ExitCode> {
    let ranked = rank(plans);
    if format == OutputFormat::Json {
        let v: Vec<_> = ranked.iter().map(|p| plan_json(p)).collect();
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows = ranked
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let e = &p.estimate;
            match &p.sizing {
                Ok(s) => vec![
                    if s.meets_sla {
                        (i + 1).to_string()
                    } else {
                        "-".into()
                    },
                    e.gpu.clone(),
                    if s.meets_sla {
                        "yes".into()
                    } else {
                        "no".into()
                    },
                    num(s.cost_per_1m_tokens),
                    s.gpus_needed.to_string(),
                    s.batch.to_string(),
                    num(s.ttft_ms),
                    num(s.tpot_ms),
                    format!("{:.0}%", s.utilisation * 100.0),
                    s.binding_constraint.clone(),
                ],
                Err(err) => vec![
                    "-".into(),
                    e.gpu.clone(),
                    "no".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    num(e.ttft_ms),
                    num(e.tpot_ms),
                    "-".into(),
                    err.code().trim_start_matches("planner.").to_string(),
                ],
            }
        })
        .collect();
    print_table(
        &[
            "rank", "gpu", "SLA", "$/1M tok", "GPUs", "batch", "TTFT ms", "TPOT ms", "util",
            "binding",
        ],
        rows,
    );
    Ok(ExitCode::SUCCESS)
}

/// The blind column: the first scores of the sealed files that hold rows of
/// the plan's engine where there are any, then those of every file.
fn blind_cell(r: &glassbox_planner::accuracy::Range) -> String {
    let all = r.blind.as_ref().map(|s| {
        format!(
            "{:.0}–{:.0}% over {} files, {} rows",
            s.lowest_pct, s.highest_pct, s.files, s.rows
        )
    });
    // Which way they missed: the plan's figure over what was measured.
    let way = |s: &glassbox_planner::sealed::Blind| {
        s.typical_ratio
            .map(|x| format!(", planned {x:.2}× of measured"))
            .unwrap_or_default()
    };
    match (&r.blind_engine, &r.blind, all) {
        (Some(own), _, Some(all)) => format!(
            "{:.0}% on the {} file{} with {} rows{} ({all})",
            own.typical_pct,
            own.files,
            if own.files == 1 { "" } else { "s" },
            own.engine.as_deref().unwrap_or("its engine's"),
            way(own),
        ),
        (None, Some(s), Some(all)) => format!("{:.0}%{} ({all})", s.typical_pct, way(s)),
        _ => "–".to_string(),
    }
}
