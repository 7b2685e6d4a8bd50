//! The flags of `glassbox plan` and its subcommands, and the planner
//! request they make (nothing resolved yet).

use std::path::PathBuf;

use glassbox_planner::PlannerError;
use glassbox_planner::parallel::{ParallelRequest, SplitMode};
use glassbox_planner::request::{PlanRequest, defaults};
use glassbox_planner::workload::{Pricing, Sla, Workload};

use super::{pipeline, simulate};
use crate::cmd::common::OutputFormat;

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    // `--price-per-hour -3` reaches the plan's own check ("must be a finite
    // amount of 0 or more") instead of clap's "unexpected argument '-3'".
    allow_negative_numbers = true,
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
    /// Plan a whole pipeline from a topology and its stored traces: CPU cores,
    /// GPUs per model, cost per request and per day, with what-ifs.
    Pipeline(Box<pipeline::PipelineArgs>),
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
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
    /// Model: a catalogue name (`glassbox plan list-models`) or a Hugging Face repository id
    /// naming one (`meta-llama/Llama-3.1-8B-Instruct`), a config.json or a .gguf file.
    #[arg(long)]
    pub model: Option<String>,
    /// GPU id or alias (`glassbox plan list-gpus`), or the name nvidia-smi prints
    /// (`"NVIDIA A100-SXM4-80GB"`).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Weight format: fp16, bf16, fp8, int8, int4, q4_0, q4_k_m, q8_0, exl2-4.65, ... (default: the file's, else the model's published format (gpt-oss: mxfp4, DeepSeek-V3: fp8, a config.json's quantization_config), else fp16).
    #[arg(long)]
    pub quant: Option<String>,
    /// KV-cache dtype: fp16 or fp8.
    #[arg(long, default_value = defaults::KV_DTYPE)]
    pub kv_dtype: String,
    /// Engine, optionally `@version`: vllm, sglang, trt-llm, tgi, llama.cpp, ollama, mlc, lmdeploy, exllamav2, gpt-fast, fastertransformer, nemo (NeMo's 2023–24 TensorRT-LLM export), transformers; `vllm@0.5` = vLLM before 0.6, `llama.cpp@b6326` = a build before b6327 (no flash attention), `llama.cpp@b3215` = one before b3216 (also quantised weights dequantised to F16 for cuBLAS) (default: llama.cpp for GGUF, else vllm).
    #[arg(long)]
    pub engine: Option<String>,
    /// Concurrent sequences for the single-scenario estimate.
    #[arg(long, default_value_t = defaults::BATCH)]
    pub batch: u32,
    /// Prompt (input) tokens per request.
    #[arg(long, default_value_t = defaults::PROMPT_TOKENS)]
    pub prompt_tokens: u64,
    /// Generated (output) tokens per request.
    #[arg(long, default_value_t = defaults::GEN_TOKENS)]
    pub gen_tokens: u64,
    /// Context length each sequence may reach (KV capacity); default prompt + gen.
    #[arg(long)]
    pub context: Option<u64>,
    /// GPUs in all; split the way the engine splits them unless --tp/--pp/--dp/--split-mode say otherwise.
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Tensor-parallel degree (each layer sharded over this many GPUs).
    #[arg(long)]
    pub tp: Option<u32>,
    /// Pipeline stages (layers split over this many GPUs; one stream is no faster).
    #[arg(long)]
    pub pp: Option<u32>,
    /// Data-parallel replicas (whole copies of the model), at least this many.
    #[arg(long)]
    pub dp: Option<u32>,
    /// llama.cpp's --split-mode with --gpus: layer (its default) or row.
    #[arg(long)]
    pub split_mode: Option<String>,
    /// llama.cpp's --ubatch-size: prompt tokens computed in one pass (default 512). Sets how
    /// many tokens an MoE prompt's experts get per pass and the micro-batches layer-split
    /// GPUs overlap.
    #[arg(long)]
    pub ubatch: Option<u32>,
    /// GPU memory kept free (seed 001: at least 20%).
    #[arg(long, default_value_t = defaults::MEMORY_HEADROOM)]
    pub memory_headroom: f64,
    /// Requests per day (seed 001's example: 50,000).
    #[arg(long, default_value_t = defaults::REQUESTS_PER_DAY)]
    pub requests_per_day: f64,
    /// Peak request rate ÷ average rate.
    #[arg(long, default_value_t = defaults::PEAK_FACTOR)]
    pub peak_factor: f64,
    /// Concurrent requests at peak, if known.
    #[arg(long)]
    pub peak_concurrency: Option<u64>,
    /// SLA: P99 time to first token, ms.
    #[arg(long, value_parser = positive_ms)]
    pub sla_ttft_ms: Option<f64>,
    /// SLA: P99 time per output token, ms.
    #[arg(long, value_parser = positive_ms)]
    pub sla_tpot_ms: Option<f64>,
    /// SLA: P99 end-to-end latency, ms.
    #[arg(long, value_parser = positive_ms)]
    pub sla_e2e_ms: Option<f64>,
    /// Capacity kept free at peak (seed 001: at least 30%).
    #[arg(long, default_value_t = defaults::HEADROOM)]
    pub headroom: f64,
    /// Price per GPU-hour (overrides the catalogue).
    #[arg(long)]
    pub price_per_hour: Option<f64>,
    /// Purchase price per GPU, amortised over --amortize-years plus power.
    #[arg(long)]
    pub purchase_price: Option<f64>,
    #[arg(long, default_value_t = defaults::AMORTIZE_YEARS)]
    pub amortize_years: f64,
    #[arg(long, default_value_t = defaults::USD_PER_KWH)]
    pub usd_per_kwh: f64,
    /// Offline (batch) tokens per day sharing the pool (seed 003).
    #[arg(long, default_value_t = defaults::OFFLINE_TOKENS_PER_DAY)]
    pub offline_tokens_per_day: f64,
    /// Simultaneous-use coefficient of a mixed online/offline pool (seed 003).
    #[arg(long, default_value_t = defaults::SIMULTANEOUS_USE)]
    pub simultaneous_use: f64,
    /// Rank these GPUs by cost per 1M tokens among those meeting the SLA
    /// (space- or comma-separated: `--compare h100-sxm l40s` or `h100-sxm,l40s`).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub compare: Vec<String>,
    /// Extra or overriding GPU entries (TOML, same schema as the catalogue).
    #[arg(long)]
    pub hardware_file: Option<PathBuf>,
    /// Efficiency factors from `glassbox plan calibrate` (override the shipped fit).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Your server's own path at one client, ms: what a lone request's TTFT holds besides
    /// the prompt's pass on your host and client (HTTP, prompt rendering, hand-off, streaming
    /// back). Replaces the engine's published figure (vLLM 5.5, SGLang 6.3) in the plan's
    /// TTFT and SLA check; the engine's cost per prompt token stays on top, and `--rate`
    /// simulations keep the engine's loaded figure.
    #[arg(long)]
    pub server_path_ms: Option<f64>,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub sim: simulate::SimArgs,
}

impl PlanArgs {
    /// The flags as a planner request (nothing resolved yet).
    pub(super) fn request(&self, model: &str) -> Result<PlanRequest, PlannerError> {
        Ok(PlanRequest {
            model: model.to_string(),
            quant: self.quant.clone(),
            kv_dtype: self.kv_dtype.clone(),
            engine: self.engine.clone(),
            batch: self.batch,
            prompt_tokens: self.prompt_tokens,
            gen_tokens: self.gen_tokens,
            context: self.context,
            parallel: ParallelRequest {
                gpus: self.gpus,
                tp: self.tp,
                pp: self.pp,
                dp: self.dp,
                split_mode: self
                    .split_mode
                    .as_deref()
                    .map(SplitMode::parse)
                    .transpose()?,
            },
            memory_headroom: self.memory_headroom,
            ubatch: self.ubatch,
            workload: Workload {
                requests_per_day: self.requests_per_day,
                peak_factor: self.peak_factor,
                peak_concurrency: self.peak_concurrency,
                sla: Sla {
                    ttft_ms: self.sla_ttft_ms,
                    tpot_ms: self.sla_tpot_ms,
                    e2e_ms: self.sla_e2e_ms,
                },
                headroom: self.headroom,
                offline_tokens_per_day: self.offline_tokens_per_day,
                simultaneous_use: self.simultaneous_use,
                pricing: Pricing {
                    hourly_usd: self.price_per_hour,
                    purchase_usd: self.purchase_price,
                    amortize_years: self.amortize_years,
                    usd_per_kwh: self.usd_per_kwh,
                },
                ..Workload::default()
            },
        })
    }
}

/// An SLA bound: a finite number of milliseconds above 0.
pub(super) fn positive_ms(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of milliseconds"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("must be a number of milliseconds above 0, got {s}"))
    }
}
