//! How far the planner's figures have been from published measurements it
//! had not seen, shipped with every plan.
//!
//! A capacity figure is only as useful as its error bar. The bands here come
//! from the leave-one-source-out evaluation ([`validate::held_out`]) over
//! every public row the project holds (`data/measurements.csv` and
//! `data/measurements-gpustack.csv`): each row predicted by factors fitted
//! without its whole source. For a metric, the band is the 10th and 90th
//! percentile of *measured / predicted* over those rows, so a prediction `x`
//! reads "80% of held-out measurements of this kind fell between `p10·x` and
//! `p90·x`". Bands are kept per engine family on one GPU, on a hardware
//! class and on every GPU, and over every row; a plan uses the narrowest
//! scope of its own engine with at least [`MIN_BAND_ROWS`] rows, so a vLLM
//! plan on an H100 shows vLLM's spread on the H100 where there is one, and
//! is never read against another engine's rows on its GPU (llama.cpp's on
//! an H100 PCIe say nothing about vLLM there); with no band of its engine,
//! the one over every row.
//!
//! The table is data (`data/accuracy.toml`), written by
//! `cargo run --release -p glassbox-planner --example accuracy -- --write-accuracy crates/planner/data/accuracy.toml`;
//! a test recomputes it and fails when the shipped file is stale.

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::error::PlannerError;
use crate::estimate::Estimate;
use crate::measurements::{Catalogues, Metric};
use crate::sealed::{Blind, SealedLog};
use crate::sim::nearest_rank;
use crate::validate::{HeldOut, HeldOutRow, Split, ape, median};

const SHIPPED: &str = include_str!("../data/accuracy.toml");

/// Fewest held-out rows a band is kept from: below it, the next wider scope
/// (class, then every GPU) is used.
pub const MIN_BAND_ROWS: usize = 8;

/// The spread of measured / predicted for one metric over one scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// `decode_tok_s`, `prefill_tok_s`, `ttft_ms` or `serving_tok_s`.
    pub metric: String,
    /// `*` (every GPU), a hardware class (`datacenter`), or a GPU id.
    pub scope: String,
    /// The engine family whose rows the band holds ([`Engine::family`]:
    /// `llama.cpp` also for Ollama and older builds), or `*` for every
    /// engine's.
    #[serde(default = "every_engine")]
    pub engine: String,
    pub rows: usize,
    pub sources: usize,
    /// Median absolute percentage error of the held-out predictions.
    pub mdape: f64,
    /// 10th, 50th and 90th percentile of measured / predicted.
    pub ratio_p10: f64,
    pub ratio_p50: f64,
    pub ratio_p90: f64,
}

/// Every band of one held-out evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccuracyTable {
    /// The evaluation the bands come from (`leave-one-source-out`).
    pub split: String,
    pub rows: usize,
    pub sources: usize,
    #[serde(rename = "band")]
    pub bands: Vec<Band>,
}

/// A prediction with the band it is read against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    pub metric: String,
    pub predicted: f64,
    /// `predicted × ratio_p10` and `predicted × ratio_p90`: for a time
    /// (`ttft_ms`) as for a rate, what 80% of held-out measurements were.
    pub low: f64,
    pub high: f64,
    pub band: Band,
    /// The same metric on the sealed holdouts when each was first scored
    /// ([`crate::sealed::Blind`]): sources nobody had looked at, so the
    /// honest figure for a setup the fit has no rows of.
    pub blind: Option<Blind>,
    /// The same over the sealed files holding rows of the plan's engine
    /// family, where there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blind_engine: Option<Blind>,
}

fn every_engine() -> String {
    "*".into()
}

/// The engine family of an engine name as rows and plans write it
/// (`llama.cpp@b6326` → `llama.cpp`); a name the planner does not know
/// stands for itself.
fn family(engine: &str) -> String {
    Engine::parse(engine).map_or_else(|_| engine.to_string(), |e| e.family().as_str().into())
}

impl Band {
    /// Where the band's rows come from, for people: `h100-sxm, vllm`,
    /// `datacenter, llama.cpp`, `vllm, every GPU`, `every GPU`.
    pub fn describe_scope(&self) -> String {
        match (self.scope.as_str(), self.engine.as_str()) {
            ("*", "*") => "every GPU".into(),
            ("*", e) => format!("{e}, every GPU"),
            (s, "*") => s.into(),
            (s, e) => format!("{s}, {e}"),
        }
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

impl AccuracyTable {
    /// The table shipped with the planner (`data/accuracy.toml`).
    pub fn shipped() -> Result<Self, PlannerError> {
        Self::from_toml(SHIPPED, "data/accuracy.toml")
    }

    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PlannerError> {
        let t: Self = toml::from_str(text).map_err(|e| PlannerError::Toml {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        for b in &t.bands {
            let ok = [b.ratio_p10, b.ratio_p50, b.ratio_p90, b.mdape]
                .iter()
                .all(|x| x.is_finite() && *x >= 0.0)
                && b.ratio_p10 <= b.ratio_p50
                && b.ratio_p50 <= b.ratio_p90
                && b.rows > 0;
            if !ok {
                return Err(PlannerError::invalid(
                    format!("{origin}: band {}/{}", b.metric, b.describe_scope()),
                    "needs rows > 0 and 0 <= ratio_p10 <= ratio_p50 <= ratio_p90",
                ));
            }
        }
        Ok(t)
    }

    pub fn to_toml(&self) -> Result<String, PlannerError> {
        toml::to_string(self).map_err(|e| PlannerError::Toml {
            origin: "accuracy table".into(),
            message: e.to_string(),
        })
    }

    /// Bands of a leave-one-source-out evaluation: per metric over every
    /// row, and per engine family over every GPU, per hardware class and per
    /// GPU, each kept when it has at least
    /// [`MIN_BAND_ROWS`] rows. Figures are rounded to four decimals so the
    /// written file is stable.
    pub fn from_held_out(h: &HeldOut, cat: Catalogues) -> Result<Self, PlannerError> {
        if h.split != Split::Source {
            return Err(PlannerError::invalid(
                "accuracy table",
                "bands come from the leave-one-source-out evaluation",
            ));
        }
        let class = |gpu: &str| -> Result<&'static str, PlannerError> {
            Ok(cat.hardware.get(gpu)?.class.as_str())
        };
        let mut bands = Vec::new();
        for metric in Metric::ALL {
            // Each row with its class and engine family, resolved once.
            let mut rows = Vec::new();
            for r in h.rows.iter().filter(|r| r.metric == metric) {
                rows.push((r, class(&r.gpu)?, family(&r.engine)));
            }
            let mut scopes: Vec<(String, String)> = vec![("*".into(), "*".into())];
            for (r, c, fam) in &rows {
                for s in ["*", c, r.gpu.as_str()] {
                    let key = (s.to_string(), fam.clone());
                    if !scopes.contains(&key) {
                        scopes.push(key);
                    }
                }
            }
            for (scope, engine) in scopes {
                let sel: Vec<&HeldOutRow> = rows
                    .iter()
                    .filter(|(r, c, fam)| {
                        (scope == "*" || scope == r.gpu || scope == *c)
                            && (engine == "*" || engine == *fam)
                    })
                    .map(|(r, _, _)| *r)
                    .collect();
                if sel.len() < MIN_BAND_ROWS {
                    continue;
                }
                let mut ratio: Vec<f64> = sel.iter().map(|r| r.measured / r.predicted).collect();
                ratio.sort_by(f64::total_cmp);
                let errs: Vec<f64> = sel.iter().map(|r| ape(r.predicted, r.measured)).collect();
                let mut srcs: Vec<&str> = sel.iter().map(|r| r.source.as_str()).collect();
                srcs.sort_unstable();
                srcs.dedup();
                bands.push(Band {
                    metric: metric.as_str().to_string(),
                    scope,
                    engine,
                    rows: sel.len(),
                    sources: srcs.len(),
                    mdape: round4(median(&errs)),
                    ratio_p10: round4(nearest_rank(&ratio, 0.10)),
                    ratio_p50: round4(nearest_rank(&ratio, 0.50)),
                    ratio_p90: round4(nearest_rank(&ratio, 0.90)),
                });
            }
        }
        let mut srcs: Vec<&str> = h.rows.iter().map(|r| r.source.as_str()).collect();
        srcs.sort_unstable();
        srcs.dedup();
        Ok(Self {
            split: h.split.as_str().to_string(),
            rows: h.rows.len(),
            sources: srcs.len(),
            bands,
        })
    }

    /// The band for `metric` from `engine` on `gpu` (of `class`): the
    /// engine family's on the GPU if it has one, else on the class, else on
    /// every GPU, else every row's.
    pub fn band(&self, metric: Metric, gpu: &str, class: &str, engine: &str) -> Option<&Band> {
        let (m, fam) = (metric.as_str(), family(engine));
        [(gpu, fam.as_str()), (class, &fam), ("*", &fam), ("*", "*")]
            .into_iter()
            .find_map(|(scope, e)| {
                self.bands.iter().find(|b| {
                    b.metric == m
                        && b.scope.eq_ignore_ascii_case(scope)
                        && b.engine.eq_ignore_ascii_case(e)
                })
            })
    }

    /// `predicted` with its band (none when the table has no band for the
    /// metric, or the prediction is not a positive number).
    pub fn range(
        &self,
        metric: Metric,
        gpu: &str,
        class: &str,
        engine: &str,
        predicted: f64,
    ) -> Option<Range> {
        if !(predicted.is_finite() && predicted > 0.0) {
            return None;
        }
        let band = self.band(metric, gpu, class, engine)?.clone();
        Some(Range {
            metric: metric.as_str().to_string(),
            predicted,
            low: predicted * band.ratio_p10,
            high: predicted * band.ratio_p90,
            band,
            blind: None,
            blind_engine: None,
        })
    }

    /// The bands of an estimate's headline figures on a GPU of `class`:
    /// prefill speed and TTFT always; single-stream decode at batch 1, the
    /// batched output throughput above it. Each carries its blind figure
    /// from `sealed` where a sealed file has rows of the metric.
    pub fn for_estimate(&self, e: &Estimate, class: &str, sealed: &SealedLog) -> Vec<Range> {
        let mut figures = vec![
            (Metric::PrefillTokS, e.prefill_tok_s),
            (Metric::TtftMs, e.ttft_ms),
        ];
        if e.batch <= 1 {
            figures.push((Metric::DecodeTokS, e.decode_tok_s));
        } else {
            figures.push((Metric::ServingTokS, e.output_tok_s));
        }
        figures
            .into_iter()
            .filter_map(|(m, v)| self.range(m, &e.gpu, class, &e.engine, v))
            .map(|r| Range {
                blind: sealed.blind(&r.metric),
                blind_engine: sealed.blind_for(&r.metric, &family(&e.engine)),
                ..r
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HardwareCatalogue, ModelCatalogue};

    fn row(source: &str, gpu: &str, metric: Metric, measured: f64, predicted: f64) -> HeldOutRow {
        HeldOutRow::for_test(source, gpu, metric, "bf16", measured, predicted)
    }

    #[test]
    fn bands_are_the_spread_of_measured_over_predicted_per_scope() {
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let cat = Catalogues {
            hardware: &hw,
            models: &models,
        };
        let mut rows = Vec::new();
        // Ten H100 rows measured at 0.5, 0.6, ..., 1.4 of the prediction.
        for i in 0..10 {
            let src = if i < 5 { "a.com" } else { "b.com" };
            rows.push(row(
                src,
                "h100-sxm",
                Metric::ServingTokS,
                50.0 + 10.0 * i as f64,
                100.0,
            ));
        }
        // Four A100 rows, all measured at the prediction: too few for a
        // band of their own, so the A100 reads its class's band.
        for _ in 0..4 {
            rows.push(row(
                "c.com",
                "a100-sxm-80gb",
                Metric::ServingTokS,
                100.0,
                100.0,
            ));
        }
        let h = HeldOut {
            split: Split::Source,
            rows,
            by_metric: Vec::new(),
            by_group: Vec::new(),
        };
        let t = AccuracyTable::from_held_out(&h, cat).unwrap();
        assert_eq!((t.rows, t.sources), (14, 3));
        let h100 = t
            .band(Metric::ServingTokS, "h100-sxm", "datacenter", "trt-llm")
            .unwrap();
        assert_eq!(
            (h100.scope.as_str(), h100.engine.as_str()),
            ("h100-sxm", "trt-llm")
        );
        assert_eq!((h100.rows, h100.sources), (10, 2));
        assert_eq!(
            (h100.ratio_p10, h100.ratio_p50, h100.ratio_p90),
            (0.5, 0.9, 1.3)
        );
        let a100 = t
            .band(
                Metric::ServingTokS,
                "a100-sxm-80gb",
                "datacenter",
                "trt-llm",
            )
            .unwrap();
        assert_eq!(a100.describe_scope(), "datacenter, trt-llm");
        assert_eq!(a100.rows, 14);
        assert!(
            t.band(Metric::DecodeTokS, "h100-sxm", "datacenter", "trt-llm")
                .is_none()
        );
        let b = t
            .band(Metric::ServingTokS, "rtx-4090", "consumer", "trt-llm")
            .unwrap();
        assert_eq!(b.describe_scope(), "trt-llm, every GPU");
        // LMDeploy is TensorRT-LLM's family: it reads the same bands.
        let lmdeploy = t.band(Metric::ServingTokS, "h100-sxm", "datacenter", "lmdeploy");
        assert_eq!(lmdeploy, Some(h100));
        // Another engine never reads TensorRT-LLM's bands on the H100: only
        // the one over every row.
        let vllm = t
            .band(Metric::ServingTokS, "h100-sxm", "datacenter", "vllm")
            .unwrap();
        assert_eq!(vllm.describe_scope(), "every GPU");

        let r = t
            .range(
                Metric::ServingTokS,
                "h100-sxm",
                "datacenter",
                "trt-llm",
                2000.0,
            )
            .unwrap();
        assert_eq!((r.low, r.high), (1000.0, 2600.0));
        assert!(
            t.range(
                Metric::ServingTokS,
                "h100-sxm",
                "datacenter",
                "trt-llm",
                f64::NAN
            )
            .is_none()
        );

        let back = AccuracyTable::from_toml(&t.to_toml().unwrap(), "t").unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn a_band_out_of_order_is_refused_with_its_name() {
        let text = r#"
split = "leave-one-source-out"
rows = 10
sources = 2
[[band]]
metric = "decode_tok_s"
scope = "*"
rows = 10
sources = 2
mdape = 8.0
ratio_p10 = 1.2
ratio_p50 = 1.0
ratio_p90 = 1.1
"#;
        let e = AccuracyTable::from_toml(text, "my.toml").unwrap_err();
        assert!(
            e.to_string()
                .contains("my.toml: band decode_tok_s/every GPU"),
            "{e}"
        );
    }

    #[test]
    fn the_shipped_table_parses_and_covers_every_metric() {
        let t = AccuracyTable::shipped().unwrap();
        for m in Metric::ALL {
            assert!(
                t.band(m, "no-such-gpu", "no-class", "no-engine").is_some(),
                "{m:?}"
            );
        }
        // The split is checked: a GPU-out evaluation is not a source of bands.
        let h = HeldOut {
            split: Split::Gpu,
            rows: Vec::new(),
            by_metric: Vec::new(),
            by_group: Vec::new(),
        };
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let cat = Catalogues {
            hardware: &hw,
            models: &models,
        };
        assert!(AccuracyTable::from_held_out(&h, cat).is_err());
    }
}
