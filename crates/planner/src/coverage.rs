//! Whether the public rows behind the accuracy bands hold measurements of a
//! plan's setup.
//!
//! The bands ([`crate::accuracy`]) say how far held-out public rows were
//! from their predictions. They are read per GPU or hardware class, so a
//! plan for a setup no public row resembles (another GPU vendor, an engine
//! whose kernels no row ran, a weight format no row used, a parallel split
//! no row measured, a model architecture no row ran) still gets a band,
//! from other setups. On such setups the sealed holdouts were far further
//! off than the bands (docs/planner.md, "Sealed holdouts"), so a plan names
//! what the rows do not cover.

use std::sync::OnceLock;

use serde::Serialize;

use crate::engine::Engine;
use crate::error::PlannerError;
use crate::hardware::{Hardware, HardwareCatalogue};
use crate::measurements::all_public;
use crate::model::{ModelCatalogue, ModelSpec};

/// How many public rows share each part of a plan's setup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Public rows in all.
    pub rows: usize,
    /// Rows on the plan's GPU.
    pub gpu: usize,
    /// The GPU's vendor (the first word of its catalogue name) and the rows
    /// on any GPU of that vendor.
    pub vendor: String,
    pub vendor_rows: usize,
    /// Rows from the plan's engine (at its version range), and from any
    /// engine running the same kernels ([`Engine::family`]).
    pub engine: usize,
    pub engine_family: usize,
    /// Rows in the plan's weight format (FP16 and BF16 count as one).
    pub quant: usize,
    /// Rows at the plan's tensor-parallel degree.
    pub tp: usize,
    /// Rows on the plan's model, and its architecture ([`Architecture`])
    /// with the rows on any model of that architecture.
    pub model: usize,
    pub architecture: Architecture,
    pub architecture_rows: usize,
    /// Rows on models with sliding-window layers ([`crate::window`]), when
    /// the plan's model has them; `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windowed_rows: Option<usize>,
    /// What no row covers, in words; empty when every part has rows.
    pub uncovered: Vec<String>,
}

/// What a model's step is made of, as far as the planner's terms differ:
/// dense layers, routed experts (the weights a step reads depend on how
/// many experts its tokens reach), or DeepSeek's multi-head latent
/// attention (a compressed KV every head reads, absorbed projections; in
/// the catalogue always over routed experts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Architecture {
    Dense,
    MixtureOfExperts,
    LatentAttention,
}

impl Architecture {
    pub fn of(model: &ModelSpec) -> Self {
        match (&model.mla, &model.moe) {
            (Some(_), _) => Self::LatentAttention,
            (None, Some(_)) => Self::MixtureOfExperts,
            (None, None) => Self::Dense,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dense => "dense",
            Self::MixtureOfExperts => "mixture-of-experts",
            Self::LatentAttention => "latent-attention (MLA)",
        }
    }
}

/// The vendor of `hw`: the first word of its name (`NVIDIA`, `AMD`, `Apple`).
fn vendor(hw: &Hardware) -> String {
    hw.name.split_whitespace().next().unwrap_or("").to_string()
}

/// A weight format as coverage compares it.
fn quant_class(q: &str) -> String {
    let q = q.to_ascii_lowercase();
    if q == "bf16" { "fp16".into() } else { q }
}

/// What coverage reads of one public row: its GPU and that GPU's vendor,
/// engine, weight format (as [`quant_class`] compares it) and tp.
#[derive(Debug)]
struct Row {
    gpu: String,
    model: String,
    architecture: Option<Architecture>,
    windowed: bool,
    vendor: String,
    engine: Engine,
    quant: String,
    tp: u32,
}

/// The public rows ([`crate::measurements::all_public`]), read once per
/// process: a `--compare` over many GPUs plans each against the same rows.
fn public() -> Result<&'static [Row], PlannerError> {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    if let Some(rows) = ROWS.get() {
        return Ok(rows);
    }
    let catalogue = HardwareCatalogue::builtin()?;
    let models = ModelCatalogue::builtin()?;
    let rows = all_public()?
        .into_iter()
        .map(|m| {
            let spec = models.get(&m.model).ok();
            Row {
                vendor: catalogue.get(&m.gpu).map(vendor).unwrap_or_default(),
                model: spec.map_or_else(|| m.model.clone(), |s| s.id.clone()),
                architecture: spec.map(Architecture::of),
                windowed: spec.is_some_and(|s| s.sliding_window.is_some()),
                gpu: m.gpu,
                engine: m.engine,
                quant: quant_class(&m.quant),
                tp: m.tp,
            }
        })
        .collect();
    Ok(ROWS.get_or_init(|| rows))
}

/// The coverage of `model` on `gpu` × `engine` × `quant` at `tp` by the
/// public rows.
pub fn of(
    model: &ModelSpec,
    gpu: &Hardware,
    engine: Engine,
    quant: &str,
    tp: u32,
) -> Result<Coverage, PlannerError> {
    let rows = public()?;
    let vendor = vendor(gpu);
    let architecture = Architecture::of(model);
    let count = |f: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| f(r)).count();
    let quant_class = quant_class(quant);
    let c = Coverage {
        rows: rows.len(),
        gpu: count(&|r| r.gpu.eq_ignore_ascii_case(&gpu.id)),
        vendor_rows: count(&|r| r.vendor.eq_ignore_ascii_case(&vendor)),
        vendor,
        engine: count(&|r| r.engine == engine),
        engine_family: count(&|r| r.engine.family() == engine.family()),
        quant: count(&|r| r.quant == quant_class),
        tp: count(&|r| r.tp == tp),
        model: count(&|r| r.model == model.id),
        architecture,
        architecture_rows: count(&|r| r.architecture == Some(architecture)),
        windowed_rows: model
            .sliding_window
            .is_some()
            .then(|| count(&|r| r.windowed)),
        uncovered: Vec::new(),
    };
    let mut uncovered = Vec::new();
    if c.vendor_rows == 0 {
        uncovered.push(format!("no row on any {} GPU", c.vendor));
    } else if c.gpu == 0 {
        uncovered.push(format!("no row on the {}", gpu.id));
    }
    if c.engine_family == 0 {
        uncovered.push(format!(
            "no row from {} or an engine of its kernels",
            engine.as_str()
        ));
    } else if c.engine == 0 {
        // The engines (or versions of this one) whose rows stand in.
        let mut kin: Vec<&str> = rows
            .iter()
            .filter(|r| r.engine.family() == engine.family())
            .map(|r| r.engine.as_str())
            .collect();
        kin.sort_unstable();
        kin.dedup();
        uncovered.push(format!(
            "no row from {} itself (rows from {} stand in)",
            engine.as_str(),
            kin.join(", ")
        ));
    }
    if c.quant == 0 {
        uncovered.push(format!("no row in {quant}"));
    }
    if c.tp == 0 {
        uncovered.push(format!("no row at tp {tp}"));
    }
    if c.architecture_rows == 0 {
        uncovered.push(format!("no row on a {} model", architecture.as_str()));
    }
    if c.windowed_rows == Some(0) {
        uncovered.push("no row on a model with sliding-window layers".to_string());
    }
    Ok(Coverage { uncovered, ..c })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn coverage(gpu: &str, engine: &str, quant: &str, tp: u32) -> Coverage {
        coverage_of("llama-3.1-8b", gpu, engine, quant, tp)
    }

    fn coverage_of(model: &str, gpu: &str, engine: &str, quant: &str, tp: u32) -> Coverage {
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let engine = Engine::parse(engine).unwrap();
        of(
            models.get(model).unwrap(),
            hw.get(gpu).unwrap(),
            engine,
            quant,
            tp,
        )
        .unwrap()
    }

    #[test]
    fn a_setup_the_public_rows_measured_is_covered() {
        let c = coverage("h100-sxm", "vllm", "bf16", 1);
        assert!(c.uncovered.is_empty(), "{c:?}");
        assert!(
            c.gpu > 0 && c.engine > 0 && c.quant > 0 && c.tp > 0,
            "{c:?}"
        );
        assert!(c.gpu <= c.vendor_rows && c.vendor_rows <= c.rows, "{c:?}");
        assert_eq!(c.vendor, "NVIDIA");
        assert_eq!(c.architecture, Architecture::Dense);
        assert!(c.model > 0 && c.model <= c.architecture_rows, "{c:?}");
    }

    #[test]
    fn sliding_window_models_are_named_when_no_row_ran_one() {
        let models = ModelCatalogue::builtin().unwrap();
        let hw = HardwareCatalogue::builtin().unwrap();
        let h100 = hw.get("h100-sxm").unwrap();
        let oss = models.get("gpt-oss-120b").unwrap();
        let c = of(oss, h100, Engine::Vllm, "mxfp4", 1).unwrap();
        assert_eq!(c.windowed_rows, Some(0));
        assert!(
            c.uncovered.iter().any(|u| u.contains("sliding-window")),
            "{c:?}"
        );
        let llama = models.get("llama-3.1-8b").unwrap();
        let c = of(llama, h100, Engine::Vllm, "bf16", 1).unwrap();
        assert_eq!(c.windowed_rows, None);
    }

    #[test]
    fn an_architecture_no_public_row_ran_is_named() {
        // Routed experts have public rows (Mixtral, Qwen3-30B-A3B on
        // TensorRT-LLM); DeepSeek's latent attention has none, and the
        // eleventh sealed file found DeepSeek-R1 3-8x over-predicted.
        let moe = coverage_of("mixtral-8x7b", "h100-sxm", "trt-llm", "fp8", 2);
        assert_eq!(moe.architecture, Architecture::MixtureOfExperts);
        assert!(moe.architecture_rows > 0, "{moe:?}");
        assert!(
            !moe.uncovered.iter().any(|u| u.contains("model")),
            "{moe:?}"
        );
        let mla = coverage_of("deepseek-v3", "h200", "vllm", "fp8", 8);
        assert_eq!(mla.architecture, Architecture::LatentAttention);
        assert_eq!((mla.model, mla.architecture_rows), (0, 0), "{mla:?}");
        assert!(
            mla.uncovered
                .iter()
                .any(|u| u.contains("latent-attention (MLA) model")),
            "{mla:?}"
        );
        // A dense model nobody measured is still covered by its architecture.
        let dense = coverage_of("phi-4", "h100-sxm", "vllm", "bf16", 1);
        assert_eq!(dense.model, 0);
        assert!(dense.uncovered.is_empty(), "{dense:?}");
    }

    #[test]
    fn an_unmeasured_vendor_engine_and_split_are_named() {
        // No public row is on an AMD GPU (the sealed MI300X files are not
        // public rows).
        let c = coverage("mi300x", "vllm", "fp8", 8);
        assert_eq!((c.vendor.as_str(), c.vendor_rows, c.gpu), ("AMD", 0, 0));
        assert!(c.uncovered[0].contains("any AMD GPU"), "{c:?}");
        // NeMo's export has no rows of its own; TensorRT-LLM's stand in.
        let c = coverage("a100-sxm-80gb", "nemo", "fp16", 1);
        assert_eq!(c.engine, 0);
        assert!(c.engine_family > 0);
        assert!(
            c.uncovered
                .iter()
                .any(|u| u.contains("nemo itself") && u.contains("trt-llm")),
            "{c:?}"
        );
        // Today's llama.cpp (flash attention) has no rows; the rows of the
        // builds before it stand in, and the plan names them.
        let c = coverage("rtx-4090", "llama.cpp", "q4_k_m", 1);
        assert!(
            c.uncovered
                .iter()
                .any(|u| u.contains("llama.cpp itself") && u.contains("llama.cpp@b3215")),
            "{c:?}"
        );
    }
}
