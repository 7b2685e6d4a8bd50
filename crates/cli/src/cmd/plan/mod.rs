//! `glassbox plan`: capacity planning for LLM inference (memory, speed, GPUs, cost).
//!
//! A thin shell over `glassbox-planner`: parse flags, resolve the model and
//! device, run the estimator and the workload sizing, print a table with an
//! "explain" section (every figure with its formula and inputs) or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use glassbox_planner::estimate::Estimate;
use glassbox_planner::explain::{Line, num};
use glassbox_planner::measurements::{self, Catalogues};
use glassbox_planner::workload::{self, Pricing, Sizing, Sla, Workload};
use glassbox_planner::{
    EfficiencyTable, Engine, Estimator, HardwareCatalogue, ModelCatalogue, PlannerError, Quant,
    Scenario, calibrate, model, validate,
};
use serde_json::json;

use crate::exit::{self, Coded};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
}

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 ok, 2 usage, 78 unknown model/GPU or invalid input.\n\
                  Method and defaults: docs/planner.md."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// Boxed: the flags are many, and `Command` holds every subcommand's args inline.
    #[command(flatten)]
    pub plan: Box<PlanArgs>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Fit efficiency factors from your measurements CSV (format: docs/planner.md).
    Calibrate(CalibrateArgs),
    /// List the GPUs in the catalogue (plus --hardware-file entries).
    ListGpus(ListArgs),
    /// List the built-in models.
    ListModels(ListArgs),
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Extra or overriding GPU entries (TOML, same schema as the catalogue).
    #[arg(long)]
    pub hardware_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Measurements CSV (`id,metric,value,gpu,tp,engine,model,quant,kv_dtype,batch,prompt_tokens,gen_tokens,source,notes`).
    pub measurements: PathBuf,
    /// Write the fitted table here (TOML) for `glassbox plan --calibration FILE`; stdout if absent.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[arg(long)]
    pub hardware_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Model: a catalogue name (`glassbox plan list-models`), a config.json or a .gguf file.
    #[arg(long)]
    pub model: Option<String>,
    /// GPU id or alias (`glassbox plan list-gpus`).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Weight format: fp16, bf16, fp8, int8, int4, q4_0, q4_k_m, q8_0, ... (default: the file's, else fp16).
    #[arg(long)]
    pub quant: Option<String>,
    /// KV-cache dtype: fp16 or fp8.
    #[arg(long, default_value = "fp16")]
    pub kv_dtype: String,
    /// Engine: vllm, sglang, trt-llm, llama.cpp, mlc, transformers (default: llama.cpp for GGUF, else vllm).
    #[arg(long)]
    pub engine: Option<String>,
    /// Concurrent sequences for the single-scenario estimate.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Prompt (input) tokens per request.
    #[arg(long, default_value_t = 1500)]
    pub prompt_tokens: u64,
    /// Generated (output) tokens per request.
    #[arg(long, default_value_t = 300)]
    pub gen_tokens: u64,
    /// Context length each sequence may reach (KV capacity); default prompt + gen.
    #[arg(long)]
    pub context: Option<u64>,
    /// Tensor-parallel degree (GPUs per replica).
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    /// GPU memory kept free (seed 001: at least 20%).
    #[arg(long, default_value_t = 0.2)]
    pub memory_headroom: f64,
    /// Requests per day (seed 001's example: 50,000).
    #[arg(long, default_value_t = 50_000.0)]
    pub requests_per_day: f64,
    /// Peak request rate ÷ average rate.
    #[arg(long, default_value_t = 3.0)]
    pub peak_factor: f64,
    /// Concurrent requests at peak, if known.
    #[arg(long)]
    pub peak_concurrency: Option<u64>,
    /// SLA: P99 time to first token, ms.
    #[arg(long)]
    pub sla_ttft_ms: Option<f64>,
    /// SLA: P99 time per output token, ms.
    #[arg(long)]
    pub sla_tpot_ms: Option<f64>,
    /// SLA: P99 end-to-end latency, ms.
    #[arg(long)]
    pub sla_e2e_ms: Option<f64>,
    /// Capacity kept free at peak (seed 001: at least 30%).
    #[arg(long, default_value_t = 0.3)]
    pub headroom: f64,
    /// Price per GPU-hour (overrides the catalogue).
    #[arg(long)]
    pub price_per_hour: Option<f64>,
    /// Purchase price per GPU, amortised over --amortize-years plus power.
    #[arg(long)]
    pub purchase_price: Option<f64>,
    #[arg(long, default_value_t = 3.0)]
    pub amortize_years: f64,
    #[arg(long, default_value_t = 0.12)]
    pub usd_per_kwh: f64,
    /// Offline (batch) tokens per day sharing the pool (seed 003).
    #[arg(long, default_value_t = 0.0)]
    pub offline_tokens_per_day: f64,
    /// Simultaneous-use coefficient of a mixed online/offline pool (seed 003).
    #[arg(long, default_value_t = 0.6)]
    pub simultaneous_use: f64,
    /// Rank these GPUs by cost per 1M tokens among those meeting the SLA.
    #[arg(long, num_args = 1..)]
    pub compare: Vec<String>,
    /// Extra or overriding GPU entries (TOML, same schema as the catalogue).
    #[arg(long)]
    pub hardware_file: Option<PathBuf>,
    /// Efficiency factors from `glassbox plan calibrate` (override the shipped fit).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Writes a line to stdout, ignoring a closed pipe (`glassbox plan ... | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// Planner errors are problems with the input: exit 78 with the message.
fn invalid(e: PlannerError) -> anyhow::Error {
    Coded::invalid(e.to_string())
}

fn usage(message: &str) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: exit::USAGE,
        message: message.to_string(),
    })
}

fn hardware(file: Option<&PathBuf>) -> anyhow::Result<HardwareCatalogue> {
    let mut hw = HardwareCatalogue::builtin().map_err(invalid)?;
    if let Some(path) = file {
        hw.merge_file(path).map_err(invalid)?;
    }
    Ok(hw)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Calibrate(a)) => run_calibrate(a),
        Some(Sub::ListGpus(a)) => list_gpus(a),
        Some(Sub::ListModels(a)) => list_models(a),
        None => run_plan(*args.plan),
    }
}

fn list_gpus(a: ListArgs) -> anyhow::Result<ExitCode> {
    let hw = hardware(a.hardware_file.as_ref())?;
    if a.format == Format::Json {
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

fn list_models(a: ListArgs) -> anyhow::Result<ExitCode> {
    let models = ModelCatalogue::builtin().map_err(invalid)?;
    if a.format == Format::Json {
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
        ],
        rows,
    );
    Ok(ExitCode::SUCCESS)
}

fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let hw = hardware(a.hardware_file.as_ref())?;
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
            eprintln!("wrote {} (use with --calibration)", path.display());
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
    eprintln!("median absolute percentage error:");
    eprint!(
        "{}",
        render_table(
            &["metric", "rows", "fitted", "held-out (LOO)", "baseline"],
            summary
        )
    );
    Ok(ExitCode::SUCCESS)
}

struct Plan {
    estimate: Estimate,
    sizing: Result<Sizing, PlannerError>,
}

fn run_plan(p: PlanArgs) -> anyhow::Result<ExitCode> {
    let model_arg = p
        .model
        .as_deref()
        .ok_or_else(|| usage("`--model` is required"))?;
    let hw = hardware(p.hardware_file.as_ref())?;
    let models = ModelCatalogue::builtin().map_err(invalid)?;
    let resolved = model::resolve(model_arg, &models).map_err(invalid)?;
    let quant = match (&p.quant, &resolved.file_quant) {
        (Some(q), _) => Quant::parse(q).map_err(invalid)?,
        (None, Some(q)) => q.clone(),
        (None, None) => Quant::parse("fp16").map_err(invalid)?,
    };
    let engine = match (&p.engine, resolved.origin) {
        (Some(e), _) => Engine::parse(e).map_err(invalid)?,
        (None, "gguf") => Engine::LlamaCpp,
        (None, _) => Engine::Vllm,
    };
    let kv_bytes = match p.kv_dtype.to_ascii_lowercase().as_str() {
        "fp16" | "f16" | "bf16" => 2.0,
        "fp8" | "int8" => 1.0,
        "fp32" | "f32" => 4.0,
        other => {
            return Err(Coded::invalid(format!(
                "unknown kv dtype `{other}` (fp16, fp8 or fp32)"
            )));
        }
    };
    let mut factors = EfficiencyTable::defaults().map_err(invalid)?;
    if let Some(path) = &p.calibration {
        factors.overlay(&EfficiencyTable::load(path).map_err(invalid)?);
    }
    let est = Estimator::new(factors);
    let workload = Workload {
        requests_per_day: p.requests_per_day,
        input_tokens: p.prompt_tokens,
        output_tokens: p.gen_tokens,
        peak_factor: p.peak_factor,
        peak_concurrency: p.peak_concurrency,
        sla: Sla {
            ttft_ms: p.sla_ttft_ms,
            tpot_ms: p.sla_tpot_ms,
            e2e_ms: p.sla_e2e_ms,
        },
        headroom: p.headroom,
        offline_tokens_per_day: p.offline_tokens_per_day,
        simultaneous_use: p.simultaneous_use,
        pricing: Pricing {
            hourly_usd: p.price_per_hour,
            purchase_usd: p.purchase_price,
            amortize_years: p.amortize_years,
            usd_per_kwh: p.usd_per_kwh,
        },
        ..Workload::default()
    };
    let plan_for = |gpu: &str| -> anyhow::Result<Plan> {
        let device = hw.get(gpu).map_err(invalid)?;
        let s = Scenario {
            model: &resolved.spec,
            hw: device,
            quant: quant.clone(),
            kv_bytes,
            engine,
            tp: p.tp,
            batch: p.batch,
            prompt_tokens: p.prompt_tokens,
            gen_tokens: p.gen_tokens,
            context: p.context.unwrap_or(p.prompt_tokens + p.gen_tokens),
            memory_headroom: p.memory_headroom,
        };
        let estimate = est.estimate(&s).map_err(invalid)?;
        Ok(Plan {
            estimate,
            sizing: workload::size(&est, &s, &workload),
        })
    };

    if !p.compare.is_empty() {
        let plans = p
            .compare
            .iter()
            .map(|g| plan_for(g))
            .collect::<anyhow::Result<Vec<_>>>()?;
        return print_compare(plans, p.format);
    }
    let gpu = p
        .gpu
        .as_deref()
        .ok_or_else(|| usage("`--gpu` (or `--compare`) is required"))?;
    let plan = plan_for(gpu)?;
    match p.format {
        Format::Json => out!("{}", serde_json::to_string_pretty(&plan_json(&plan))?),
        Format::Table => print_plan(&plan, &resolved.spec.name, resolved.origin),
    }
    Ok(ExitCode::SUCCESS)
}

fn plan_json(plan: &Plan) -> serde_json::Value {
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
    })
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

fn print_plan(plan: &Plan, model_name: &str, origin: &str) {
    let e = &plan.estimate;
    out!(
        "{model_name} ({origin}) on {} × {}, {} ({} bpw), engine {}, batch {}",
        e.tp,
        e.gpu,
        e.quant,
        num(e.weights_gb * 8e9 / (e.total_params_b * 1e9)),
        e.engine,
        e.batch
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
                "workload: {} GPU(s) ({} replica(s) × tp {}), batch {}, utilisation {:.0}%, {} tokens/day/GPU, ${} per 1M tokens ({} per 1M output), SLA {}, binding: {}",
                s.gpus_needed,
                s.replicas,
                e.tp,
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

fn print_compare(plans: Vec<Plan>, format: Format) -> anyhow::Result<ExitCode> {
    let mut ranked: Vec<&Plan> = plans.iter().collect();
    let key = |p: &Plan| match &p.sizing {
        Ok(s) if s.meets_sla => (0, s.cost_per_1m_tokens),
        Ok(s) => (1, s.cost_per_1m_tokens),
        Err(_) => (2, f64::INFINITY),
    };
    ranked.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    if format == Format::Json {
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

/// Left-aligned text, right-aligned numbers, two spaces between columns.
fn render_table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    // A number, optionally with a unit: `4.87 GB`, `$0.18`, `-`.
    let is_num = |s: &str| {
        let mut words = s.split_whitespace();
        let first = words.next().unwrap_or("");
        words.count() <= 1
            && (first == "-"
                || first
                    .trim_start_matches('$')
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .is_ok())
    };
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            let pad = w.saturating_sub(c.chars().count());
            let last = i + 1 == cells.len();
            if is_num(c) && !last {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            } else {
                out.push_str(c);
                if !last {
                    out.push_str(&" ".repeat(pad));
                }
            }
            if !last {
                out.push_str("  ");
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    out!("{}", render_table(headers, rows).trim_end());
}
