//! What the model makes of the sealed holdout rows measured on a plan's GPU.
//!
//! The accuracy bands ([`crate::accuracy`]) come from public rows and are
//! read per GPU or class; the blind column beside them is the sealed files'
//! first scores per engine. Neither says how far off the planner is on the
//! plan's own GPU when no public row is on it: on the MI300X every sealed
//! source found the serving figures planned too high, more so at high
//! concurrency (docs/planner.md, "Where each source sits"). So a plan also
//! predicts, with its own estimator, the sealed rows measured on its GPU
//! ([`crate::sealed_files::rows`]) and reports per metric the median of
//! measured / planned, with how many rows and sources it rests on. The
//! rows of the plan's engine family are taken where there are enough of
//! them, else every engine's. This is today's model on rows it has been
//! scored on before, not a first score, and no figure of the plan changes.

use std::sync::OnceLock;

use serde::Serialize;

use crate::engine::Engine;
use crate::error::PlannerError;
use crate::estimator::Estimator;
use crate::hardware::{Hardware, HardwareCatalogue};
use crate::measurements::{Catalogues, Measurement, Metric};
use crate::model::ModelCatalogue;
use crate::validate::median;

/// Fewest rows a figure is given from.
pub const MIN_ROWS: usize = 3;

/// One metric's sealed rows on the plan's GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SealedOnGpu {
    pub metric: String,
    /// The plan's engine family where its rows were taken; `None`: every
    /// engine's rows on the GPU.
    pub engine_family: Option<String>,
    pub rows: usize,
    /// Publishers among the rows ([`Measurement::source_key`]).
    pub sources: usize,
    /// Median of measured / planned (above 1: the GPU did better than
    /// planned; for TTFT, took longer).
    pub measured_over_planned: f64,
    /// For batched throughput: the concurrency range the rows were taken
    /// from, where enough rows lie within 4× of the plan's batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_range: Option<(u32, u32)>,
}

/// The builtin catalogues the sealed rows are predicted against, and each
/// row's GPU as its catalogue id, resolved once per process: a `--compare`
/// plans every GPU against the same rows.
struct Resolved {
    hardware: HardwareCatalogue,
    models: ModelCatalogue,
    /// `(catalogue GPU id, row)` of every sealed row whose GPU is known.
    rows: Vec<(String, &'static Measurement)>,
}

fn resolved() -> Result<&'static Resolved, PlannerError> {
    static RESOLVED: OnceLock<Resolved> = OnceLock::new();
    if let Some(r) = RESOLVED.get() {
        return Ok(r);
    }
    let hardware = HardwareCatalogue::builtin()?;
    let models = ModelCatalogue::builtin()?;
    let rows = crate::sealed_files::rows()
        .iter()
        .filter_map(|r| Some((hardware.get(&r.gpu).ok()?.id.clone(), r)))
        .collect();
    Ok(RESOLVED.get_or_init(|| Resolved {
        hardware,
        models,
        rows,
    }))
}

/// The sealed rows on `hw`, per metric with at least [`MIN_ROWS`] rows,
/// predicted by `est`. Rows the estimator cannot predict (a model that
/// does not fit, say) are left out.
pub fn on_gpu(
    hw: &Hardware,
    engine: Engine,
    batch: u32,
    est: &Estimator,
) -> Result<Vec<SealedOnGpu>, PlannerError> {
    let r = resolved()?;
    let cat = Catalogues {
        hardware: &r.hardware,
        models: &r.models,
    };
    let on_this: Vec<&Measurement> = r
        .rows
        .iter()
        .filter(|(gpu, _)| *gpu == hw.id)
        .map(|(_, row)| *row)
        .collect();
    Ok(summarise(&on_this, engine, batch, |r| {
        r.predict(est, cat).ok()
    }))
}

/// The per-metric medians of `rows`, each predicted by `predict`: the
/// plan's engine family's rows where there are [`MIN_ROWS`], and for batched
/// throughput those within 4× of `batch` where there are as many (its
/// error grows with concurrency on some GPUs).
fn summarise(
    rows: &[&Measurement],
    engine: Engine,
    batch: u32,
    predict: impl Fn(&Measurement) -> Option<f64>,
) -> Vec<SealedOnGpu> {
    let family = engine.family();
    Metric::ALL
        .into_iter()
        .filter_map(|metric| {
            let of_metric: Vec<&&Measurement> =
                rows.iter().filter(|r| r.metric == metric).collect();
            let own: Vec<&&Measurement> = of_metric
                .iter()
                .copied()
                .filter(|r| r.engine.family() == family)
                .collect();
            let (picked, engine_family) = if own.len() >= MIN_ROWS {
                (own, Some(family.as_str().to_string()))
            } else {
                (of_metric, None)
            };
            let (lo, hi) = (batch.max(1).div_ceil(4), batch.max(1).saturating_mul(4));
            let near: Vec<&&Measurement> = picked
                .iter()
                .copied()
                .filter(|r| (lo..=hi).contains(&r.batch))
                .collect();
            let (picked, batch_range) = if metric == Metric::ServingTokS && near.len() >= MIN_ROWS {
                (near, Some((lo, hi)))
            } else {
                (picked, None)
            };
            let mut ratios = Vec::new();
            let mut sources: Vec<String> = Vec::new();
            for r in picked {
                let Some(p) = predict(r).filter(|p| p.is_finite() && *p > 0.0) else {
                    continue;
                };
                ratios.push(r.value / p);
                let key = r.source_key();
                if !sources.contains(&key) {
                    sources.push(key);
                }
            }
            (ratios.len() >= MIN_ROWS).then(|| SealedOnGpu {
                metric: metric.as_str().to_string(),
                engine_family,
                rows: ratios.len(),
                sources: sources.len(),
                measured_over_planned: median(&ratios),
                batch_range,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::efficiency::EfficiencyTable;
    use crate::measurements::parse_csv;

    const HEADER: &str = "id,metric,value,gpu,tp,engine,model,quant,kv_dtype,batch,prompt_tokens,gen_tokens,source,notes\n";

    fn rows(lines: &[&str]) -> Vec<Measurement> {
        parse_csv(&format!("{HEADER}{}\n", lines.join("\n")), "t.csv").unwrap()
    }

    #[test]
    fn the_plans_engine_family_is_read_first_and_medians_are_measured_over_planned() {
        let rows = rows(&[
            "a,serving_tok_s,100,h100-sxm,1,vllm,llama-3.1-8b,bf16,,8,100,100,https://github.com/a/r/blob/1/x,",
            "b,serving_tok_s,200,h100-sxm,1,vllm@0.6.3,llama-3.1-8b,bf16,,8,100,100,https://github.com/b/r/blob/1/x,",
            "c,serving_tok_s,300,h100-sxm,1,vllm,llama-3.1-8b,bf16,,8,100,100,https://github.com/b/r/blob/1/y,",
            "d,serving_tok_s,900,h100-sxm,1,sglang,llama-3.1-8b,bf16,,8,100,100,https://github.com/c/r/blob/1/x,",
            "e,decode_tok_s,50,h100-sxm,1,sglang,llama-3.1-8b,bf16,,1,0,100,https://github.com/c/r/blob/1/x,",
            "f,decode_tok_s,60,h100-sxm,1,sglang,llama-3.1-8b,bf16,,1,0,100,https://github.com/c/r/blob/1/x,",
            "g,decode_tok_s,70,h100-sxm,1,trt-llm,llama-3.1-8b,bf16,,1,0,100,https://github.com/d/r/blob/1/x,",
        ]);
        let refs: Vec<&Measurement> = rows.iter().collect();
        // Every row planned at 100: measured / planned is the value / 100.
        let s = summarise(&refs, Engine::Vllm, 8, |_| Some(100.0));
        assert_eq!(s.len(), 2, "{s:?}");
        let decode = &s[0];
        assert_eq!(decode.metric, "decode_tok_s");
        // Too few vLLM decode rows: every engine's, and no family named.
        assert_eq!((decode.engine_family.as_deref(), decode.rows), (None, 3));
        assert!((decode.measured_over_planned - 0.6).abs() < 1e-12);
        assert_eq!(decode.sources, 2);
        let serving = &s[1];
        assert_eq!(serving.metric, "serving_tok_s");
        // Three vLLM rows (versions fold into the family): SGLang's is left out.
        assert_eq!(serving.engine_family.as_deref(), Some("vllm"));
        assert_eq!((serving.rows, serving.sources), (3, 2));
        assert!((serving.measured_over_planned - 2.0).abs() < 1e-12);
        // Rows that cannot be predicted are not counted; under three, no figure.
        assert!(summarise(&refs, Engine::Vllm, 8, |r| (r.id == "a").then_some(1.0)).is_empty());
        // Batch 8 takes rows at 2–32 in flight; at batch 256 (64–1024) none
        // is near, so every vLLM row, with no range named.
        assert_eq!(s[1].batch_range, Some((2, 32)));
        let far = summarise(&refs, Engine::Vllm, 256, |_| Some(100.0));
        assert_eq!((far[1].batch_range, far[1].rows), (None, 3));
    }

    #[test]
    fn a_plan_on_a_gpu_with_sealed_rows_reads_them_and_one_without_reads_none() {
        let est = Estimator::new(EfficiencyTable::defaults().unwrap());
        let hw = HardwareCatalogue::builtin().unwrap();
        let mi300x = on_gpu(hw.get("mi300x").unwrap(), Engine::Vllm, 64, &est).unwrap();
        let serving = mi300x.iter().find(|s| s.metric == "serving_tok_s").unwrap();
        assert_eq!(serving.engine_family.as_deref(), Some("vllm"));
        assert!(
            serving.rows >= MIN_ROWS && serving.sources >= 2,
            "{serving:?}"
        );
        assert!(serving.measured_over_planned.is_finite() && serving.measured_over_planned > 0.0);
        // No sealed file has a row on the RTX 4060 Ti 8GB.
        assert!(
            on_gpu(hw.get("rtx-4060-ti").unwrap(), Engine::LlamaCpp, 1, &est)
                .unwrap()
                .is_empty()
        );
    }
}
