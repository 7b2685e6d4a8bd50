//! A plan as a person asks for it, and what the planner makes of it.
//!
//! [`PlanRequest`] holds what was given — names and optional settings, the
//! way `glassbox plan` flags arrive — and [`PlanRequest::resolve`] turns it
//! into a [`ResolvedRequest`]: the model loaded, the weight format, engine,
//! KV-cache width and context chosen. Every default the planner applies
//! lives here ([`defaults`], and the rules in `resolve`), so a front end only
//! collects input and prints results: request → resolved request →
//! [`Plan`] per device (estimate + workload sizing) → printer.

use std::path::Path;

use crate::accuracy::{AccuracyTable, Range};
use crate::coverage::{self, Coverage};
pub use crate::defaults;
use crate::efficiency::{EfficiencyTable, Engine};
use crate::error::PlannerError;
use crate::estimate::{Estimate, Estimator, Scenario};
use crate::hardware::{Hardware, HardwareCatalogue};
use crate::model::{ModelCatalogue, ModelSpec};
use crate::model_source::{self, ResolvedModel};
use crate::parallel::{ParallelRequest, Parallelism};
use crate::quant::Quant;
use crate::sealed::SealedLog;
use crate::workload::{self, Sizing, Workload};

/// A plan as asked for: names and optional settings, nothing resolved yet.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// A catalogue name, a `config.json` or a `.gguf` path.
    pub model: String,
    /// Weight format; default: the model file's, else [`defaults::QUANT`].
    pub quant: Option<String>,
    /// KV-cache dtype: `fp16`/`f16`/`bf16`, `fp8`/`int8` or `fp32`/`f32`.
    pub kv_dtype: String,
    /// Engine; default: llama.cpp for a GGUF file, else vLLM.
    pub engine: Option<String>,
    pub batch: u32,
    pub prompt_tokens: u64,
    pub gen_tokens: u64,
    /// Context each sequence may reach; default prompt + generated tokens.
    pub context: Option<u64>,
    /// GPUs and how they are split; what is not given follows the engine
    /// ([`crate::parallel`]).
    pub parallel: ParallelRequest,
    pub memory_headroom: f64,
    /// llama.cpp's `--ubatch-size` (tokens of a prompt computed in one
    /// pass); `None`: the engine's default.
    pub ubatch: Option<u32>,
    /// Traffic, SLA and pricing. Its token counts are taken from
    /// `prompt_tokens` and `gen_tokens` when resolving.
    pub workload: Workload,
}

impl PlanRequest {
    /// A request for `model` with every other setting at its default.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            quant: None,
            kv_dtype: defaults::KV_DTYPE.to_string(),
            engine: None,
            batch: defaults::BATCH,
            prompt_tokens: defaults::PROMPT_TOKENS,
            gen_tokens: defaults::GEN_TOKENS,
            context: None,
            parallel: ParallelRequest::default(),
            memory_headroom: defaults::MEMORY_HEADROOM,
            ubatch: None,
            workload: Workload::default(),
        }
    }

    /// Loads the model and applies the defaults. Fails on an unknown model,
    /// weight format, engine or KV dtype.
    pub fn resolve(&self, models: &ModelCatalogue) -> Result<ResolvedRequest, PlannerError> {
        let model = model_source::resolve(&self.model, models)?;
        let quant = match (&self.quant, &model.file_quant) {
            (Some(q), _) => Quant::parse(q)?,
            (None, Some(q)) => q.clone(),
            (None, None) => Quant::parse(defaults::QUANT)?,
        };
        let engine = match (&self.engine, model.origin) {
            (Some(e), _) => Engine::parse(e)?,
            (None, "gguf") => Engine::LlamaCpp,
            (None, _) => Engine::Vllm,
        };
        let kv_bytes = kv_dtype_bytes(&self.kv_dtype)?;
        if let Some(u) = self.ubatch {
            check_ubatch(u, engine)?;
        }
        let context = self
            .context
            .unwrap_or(self.prompt_tokens.saturating_add(self.gen_tokens));
        check_context(&model.spec, self.prompt_tokens, self.gen_tokens, context)?;
        let workload = Workload {
            input_tokens: self.prompt_tokens,
            output_tokens: self.gen_tokens,
            ..self.workload
        };
        workload::validate(&workload)?;
        Ok(ResolvedRequest {
            model,
            quant,
            engine,
            kv_bytes,
            batch: self.batch,
            prompt_tokens: self.prompt_tokens,
            gen_tokens: self.gen_tokens,
            context,
            parallel: self.parallel,
            memory_headroom: self.memory_headroom,
            ubatch: self.ubatch,
            workload,
        })
    }
}

/// The largest `--ubatch` taken: llama.cpp's context default and more.
const MAX_UBATCH: u32 = 1 << 16;

/// A user's micro-batch: llama.cpp's flag, so only for its family, and a
/// token count it can run.
fn check_ubatch(u: u32, engine: Engine) -> Result<(), PlannerError> {
    if engine.prompt_micro_batches().is_none() {
        return Err(PlannerError::invalid(
            "ubatch",
            format!(
                "`--ubatch` is llama.cpp's `--ubatch-size`; engine `{engine}` does not take it (hint: drop it, or use `--engine llama.cpp`)"
            ),
        ));
    }
    if u == 0 || u > MAX_UBATCH {
        return Err(PlannerError::invalid(
            "ubatch",
            format!("must be 1-{MAX_UBATCH} tokens, got {u} (hint: llama.cpp's default is 512)"),
        ));
    }
    Ok(())
}

/// A sequence's tokens fit the context it is given, and that context fits
/// the model's own (`max_position_embeddings`): engines refuse a request
/// past either (vLLM checks prompt + `max_tokens` against `max_model_len`,
/// and `max_model_len` against the model's config).
fn check_context(
    spec: &ModelSpec,
    prompt: u64,
    generated: u64,
    context: u64,
) -> Result<(), PlannerError> {
    let tokens = prompt.saturating_add(generated);
    if context < tokens {
        return Err(PlannerError::invalid(
            "context",
            format!(
                "{prompt} prompt + {generated} generated tokens do not fit a context of {context} (hint: `--context {tokens}` or more, or fewer tokens)"
            ),
        ));
    }
    match spec.context {
        Some(max) if context > max => Err(PlannerError::invalid(
            "context",
            format!(
                "{} takes at most {max} tokens a sequence (its max_position_embeddings), {context} asked (hint: fewer tokens, or a config.json whose RoPE scaling extends the context)",
                spec.name
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether the model takes the split `p`. No engine runs more pipeline
/// stages than the model has layers. Engines that shard attention by heads
/// (all but llama.cpp's row split, which cuts matrices by rows) need the
/// query heads to divide among the GPUs, and the KV heads to divide among
/// them or be replicated to them whole: vLLM's `verify_with_parallel_config`
/// ("Total number of attention heads must be divisible by tensor parallel
/// size") and `QKVParallelLinear`, and the same rule in SGLang and
/// TensorRT-LLM. MLA's one latent is replicated, so only the query heads count.
fn check_split(spec: &ModelSpec, engine: Engine, p: &Parallelism) -> Result<(), PlannerError> {
    if u64::from(p.pp) > spec.layers {
        return Err(PlannerError::invalid(
            "pp",
            format!(
                "{} has {} layers, so at most {} pipeline stages, got {} (hint: `--pp {}` or fewer)",
                spec.name, spec.layers, spec.layers, p.pp, spec.layers
            ),
        ));
    }
    if !shards_heads(spec, engine, p.tp) {
        let fits: Vec<String> = (1..=crate::parallel::MAX_GPUS)
            .filter(|&t| shards_heads(spec, engine, t))
            .map(|t| t.to_string())
            .collect();
        return Err(PlannerError::invalid(
            "tp",
            format!(
                "{} has {} attention heads and {} KV heads, which {} GPUs cannot share evenly: {engine} shards attention by heads (hint: `--tp` one of {}, with `--pp` for more GPUs)",
                spec.name,
                spec.heads,
                spec.kv_heads,
                p.tp,
                fits.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Whether `tp` GPUs can share the model's attention heads under `engine`.
fn shards_heads(spec: &ModelSpec, engine: Engine, tp: u32) -> bool {
    let tp = u64::from(tp);
    if tp <= 1 || engine.family() == Engine::LlamaCpp {
        return true;
    }
    let kv = spec.kv_heads.max(1);
    let kv_ok = spec.mla.is_some()
        || if tp >= kv {
            tp.is_multiple_of(kv)
        } else {
            kv.is_multiple_of(tp)
        };
    spec.heads.is_multiple_of(tp) && kv_ok
}

/// Bytes per KV-cache element for a dtype name.
pub fn kv_dtype_bytes(dtype: &str) -> Result<f64, PlannerError> {
    match dtype.to_ascii_lowercase().as_str() {
        "fp16" | "f16" | "bf16" => Ok(2.0),
        "fp8" | "int8" => Ok(1.0),
        "fp32" | "f32" => Ok(4.0),
        other => Err(PlannerError::UnknownKvDtype {
            value: other.to_string(),
        }),
    }
}

/// A request with its model loaded and every default applied.
#[derive(Debug, Clone)]
pub struct ResolvedRequest {
    pub model: ResolvedModel,
    pub quant: Quant,
    pub engine: Engine,
    /// KV-cache bytes per element.
    pub kv_bytes: f64,
    pub batch: u32,
    pub prompt_tokens: u64,
    pub gen_tokens: u64,
    pub context: u64,
    pub parallel: ParallelRequest,
    pub memory_headroom: f64,
    /// llama.cpp's `--ubatch-size`, checked against the engine.
    pub ubatch: Option<u32>,
    pub workload: Workload,
}

impl ResolvedRequest {
    /// How the GPUs are split on `hw`: as given, else the engine's default
    /// for a GPU count, with the reason.
    pub fn parallelism(&self, hw: &Hardware) -> Result<Parallelism, PlannerError> {
        let spec = &self.model.spec;
        let weights = spec.weight_bytes(&self.quant, self.engine);
        let held = spec.kv_tokens_held(self.context as f64, self.engine);
        let kv = spec.kv_bytes_per_token(self.kv_bytes) * held;
        // A group the heads cannot be shared over is not one the model fits.
        let fits_on = |n: u32| {
            shards_heads(spec, self.engine, n)
                && weights + kv * spec.kv_copies(n)
                    <= hw.memory_bytes() * (1.0 - self.memory_headroom) * f64::from(n)
        };
        let p = self.parallel.resolve(self.engine, fits_on)?;
        check_split(spec, self.engine, &p)?;
        Ok(p)
    }

    /// The estimator's view of one replica of this request on `hw`, split
    /// as `p` says.
    pub fn scenario<'a>(&'a self, hw: &'a Hardware, p: &Parallelism) -> Scenario<'a> {
        Scenario {
            model: &self.model.spec,
            hw,
            quant: self.quant.clone(),
            kv_bytes: self.kv_bytes,
            engine: self.engine,
            tp: p.tp,
            pp: p.pp,
            batch: self.batch,
            prompt_tokens: self.prompt_tokens,
            gen_tokens: self.gen_tokens,
            context: self.context,
            memory_headroom: self.memory_headroom,
            ubatch: self.ubatch,
        }
    }

    /// Estimates this request on `hw` and sizes its workload. An estimate
    /// that cannot be made is an error; a workload that cannot be sized
    /// (the model does not fit, say) is part of the plan. Data-parallel
    /// replicas given (`--dp`, or a `--gpus` count beyond one replica) are
    /// the fewest replicas the sizing returns.
    pub fn plan(&self, est: &Estimator, hw: &Hardware) -> Result<Plan, PlannerError> {
        let parallelism = self.parallelism(hw)?;
        let s = self.scenario(hw, &parallelism);
        let estimate = est.estimate(&s)?;
        let accuracy = AccuracyTable::shipped()?.for_estimate(
            &estimate,
            hw.class.as_str(),
            &SealedLog::shipped()?,
        );
        let coverage = coverage::of(
            &self.model.spec,
            hw,
            self.engine,
            &self.quant.name,
            parallelism.tp,
        )?;
        let sealed_on_gpu = crate::sealed_gpu::on_gpu(hw, self.engine, self.batch, est)?;
        let workload = Workload {
            min_replicas: u64::from(parallelism.dp),
            ..self.workload
        };
        Ok(Plan {
            sizing: workload::size(est, &s, &workload),
            estimate,
            accuracy,
            coverage,
            sealed_on_gpu,
            parallelism,
        })
    }
}

/// One device's answer: the estimate and the workload sizing.
#[derive(Debug)]
pub struct Plan {
    pub estimate: Estimate,
    pub sizing: Result<Sizing, PlannerError>,
    /// How far such figures were from held-out public measurements
    /// ([`crate::accuracy`]).
    pub accuracy: Vec<Range>,
    /// How many public rows share the setup's GPU, vendor, engine, weight
    /// format and split, and what none covers ([`crate::coverage`]).
    pub coverage: Coverage,
    /// Measured / planned on the sealed rows of the plan's GPU, per metric
    /// ([`crate::sealed_gpu`]); empty where too few rows are on it.
    pub sealed_on_gpu: Vec<crate::sealed_gpu::SealedOnGpu>,
    /// How the GPUs are split, and whether that was assumed.
    pub parallelism: Parallelism,
}

impl Plan {
    /// Order for comparing devices: those meeting the SLA first, then those
    /// that do not, then those that could not be sized; cheapest first within each.
    fn rank_key(&self) -> (u8, f64) {
        match &self.sizing {
            Ok(s) if s.meets_sla => (0, s.cost_per_1m_tokens),
            Ok(s) => (1, s.cost_per_1m_tokens),
            Err(_) => (2, f64::INFINITY),
        }
    }
}

/// `plans` best first (see [`Plan`]'s ranking); ties keep their order.
pub fn rank(plans: &[Plan]) -> Vec<&Plan> {
    let mut ranked: Vec<&Plan> = plans.iter().collect();
    ranked.sort_by(|a, b| {
        let (ka, kb) = (a.rank_key(), b.rank_key());
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    ranked
}

/// The built-in GPU catalogue, with `file`'s entries added or overriding.
pub fn hardware_catalogue(file: Option<&Path>) -> Result<HardwareCatalogue, PlannerError> {
    let mut hw = HardwareCatalogue::builtin()?;
    if let Some(path) = file {
        hw.merge_file(path)?;
    }
    Ok(hw)
}

/// The shipped efficiency factors, with a calibration file's on top.
pub fn efficiency_table(calibration: Option<&Path>) -> Result<EfficiencyTable, PlannerError> {
    let mut factors = EfficiencyTable::defaults()?;
    if let Some(path) = calibration {
        factors.overlay(&EfficiencyTable::load(path)?);
    }
    Ok(factors)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_follow_the_model_source() {
        let models = ModelCatalogue::builtin().unwrap();
        let r = PlanRequest::new("llama-3.1-8b").resolve(&models).unwrap();
        assert_eq!(r.model.origin, "catalogue");
        assert_eq!(r.quant.name, "fp16");
        assert_eq!(r.engine, Engine::Vllm);
        assert_eq!(r.kv_bytes, 2.0);
        assert_eq!(r.context, defaults::PROMPT_TOKENS + defaults::GEN_TOKENS);
        assert_eq!(r.workload.input_tokens, defaults::PROMPT_TOKENS);

        let mut req = PlanRequest::new("llama-3.1-8b");
        req.quant = Some("q4_k_m".into());
        req.engine = Some("sglang".into());
        req.kv_dtype = "FP8".into();
        req.prompt_tokens = 100;
        req.gen_tokens = 20;
        req.context = Some(8192);
        let r = req.resolve(&models).unwrap();
        assert_eq!(r.quant.name, "q4_k_m");
        assert_eq!(r.engine, Engine::Sglang);
        assert_eq!(r.kv_bytes, 1.0);
        assert_eq!(r.context, 8192);
        assert_eq!(
            (r.workload.input_tokens, r.workload.output_tokens),
            (100, 20)
        );
    }

    #[test]
    fn unknown_settings_are_refused_with_their_value() {
        let models = ModelCatalogue::builtin().unwrap();
        let mut req = PlanRequest::new("llama-3.1-8b");
        req.kv_dtype = "fp4".into();
        let err = req.resolve(&models).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown kv dtype `fp4` (fp16, fp8 or fp32)"
        );
        assert_eq!(kv_dtype_bytes("f32").unwrap(), 4.0);
        req.kv_dtype = "fp16".into();
        req.engine = Some("nope".into());
        assert_eq!(
            req.resolve(&models).unwrap_err().code(),
            "planner.unknown_value"
        );
    }

    #[test]
    fn ranking_puts_sla_met_and_cheap_first() {
        let models = ModelCatalogue::builtin().unwrap();
        let hw = hardware_catalogue(None).unwrap();
        let est = Estimator::new(efficiency_table(None).unwrap());
        let mut req = PlanRequest::new("llama-3.1-8b");
        req.workload.sla.tpot_ms = Some(40.0);
        let r = req.resolve(&models).unwrap();
        let plans: Vec<Plan> = ["l4", "h100-sxm", "a100-sxm-80gb", "rtx-4090"]
            .iter()
            .map(|g| r.plan(&est, hw.get(g).unwrap()).unwrap())
            .collect();
        let ranked = rank(&plans);
        assert_eq!(ranked.len(), plans.len());
        let keys: Vec<(u8, f64)> = ranked.iter().map(|p| p.rank_key()).collect();
        for w in keys.windows(2) {
            assert!(
                w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 <= w[1].1),
                "{keys:?}"
            );
        }
    }
    #[test]
    fn a_gpu_count_follows_the_engine_and_replicas_are_a_floor_for_the_sizing() {
        let models = ModelCatalogue::builtin().unwrap();
        let hw = hardware_catalogue(None).unwrap();
        let est = Estimator::new(efficiency_table(None).unwrap());
        let mut req = PlanRequest::new("llama-3.1-8b");
        req.engine = Some("llama.cpp".into());
        req.quant = Some("q4_k_m".into());
        req.parallel.gpus = Some(2);
        let r = req.resolve(&models).unwrap();
        let plan = r.plan(&est, hw.get("rtx-4090").unwrap()).unwrap();
        assert_eq!((plan.parallelism.tp, plan.parallelism.pp), (1, 2));
        assert_eq!(plan.estimate.pp, 2);
        // Replicas given are the fewest the sizing returns, each of tp × pp GPUs.
        req.parallel = ParallelRequest {
            dp: Some(3),
            ..ParallelRequest::default()
        };
        req.engine = Some("vllm".into());
        let r = req.resolve(&models).unwrap();
        let plan = r.plan(&est, hw.get("h100-sxm").unwrap()).unwrap();
        let sizing = plan.sizing.unwrap();
        assert!(sizing.replicas >= 3, "{}", sizing.replicas);
        assert_eq!(sizing.gpus_needed, sizing.replicas);
    }

    #[test]
    fn splits_and_contexts_engines_refuse_are_refused_with_a_hint() {
        let models = ModelCatalogue::builtin().unwrap();
        let hw = hardware_catalogue(None).unwrap();
        let h100 = hw.get("h100-sxm").unwrap();
        let split = |model: &str, engine: &str, parallel: ParallelRequest| {
            let mut req = PlanRequest::new(model);
            req.engine = Some(engine.into());
            req.parallel = parallel;
            req.resolve(&models).unwrap().parallelism(h100)
        };
        // 28 query heads and 4 KV heads (Qwen2.5-7B): vLLM cannot shard them over 8.
        let err = split("qwen2.5-7b", "vllm", ParallelRequest::tensor(8)).unwrap_err();
        assert_eq!(err.code(), "planner.invalid");
        assert!(err.to_string().contains("one of 1, 2, 4, 28"), "{err}");
        assert_eq!(
            split("qwen2.5-7b", "vllm", ParallelRequest::tensor(4))
                .unwrap()
                .tp,
            4
        );
        // llama.cpp's row split cuts matrices by rows: any count goes.
        let rows = ParallelRequest {
            gpus: Some(3),
            split_mode: Some(crate::parallel::SplitMode::Row),
            ..ParallelRequest::default()
        };
        assert_eq!(split("llama-3.1-8b", "llama.cpp", rows).unwrap().tp, 3);
        // More pipeline stages than layers.
        let deep = ParallelRequest {
            pp: Some(33),
            ..ParallelRequest::default()
        };
        let err = split("llama-3.1-8b", "vllm", deep).unwrap_err();
        assert!(
            err.to_string().contains("at most 32 pipeline stages"),
            "{err}"
        );
        // A GPU count alone: 70B in FP16 needs a group of four H100s, and
        // SmolLM2 (9 heads) runs one GPU a replica.
        let gpus = |n| ParallelRequest {
            gpus: Some(n),
            ..ParallelRequest::default()
        };
        let big = split("llama-3.1-70b", "vllm", gpus(8)).unwrap();
        assert_eq!((big.tp, big.dp), (4, 2));
        let small = split("smollm2-135m", "vllm", gpus(2)).unwrap();
        assert_eq!((small.tp, small.dp), (1, 2));

        // Contexts: shorter than the tokens, or longer than the model's.
        let mut req = PlanRequest::new("llama-2-7b");
        req.context = Some(1000);
        let err = req.resolve(&models).unwrap_err();
        assert!(
            err.to_string().contains("`--context 1800` or more"),
            "{err}"
        );
        req.context = None;
        req.prompt_tokens = 4000;
        let err = req.resolve(&models).unwrap_err();
        assert!(err.to_string().contains("at most 4096 tokens"), "{err}");
        req.prompt_tokens = 3796;
        assert_eq!(req.resolve(&models).unwrap().context, 4096);
    }
}
