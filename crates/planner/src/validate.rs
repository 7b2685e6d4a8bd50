//! Accuracy against published measurements: in-sample, held-out and baseline.
//!
//! For every row the report holds four predictions: the fit on all rows
//! (what the shipped defaults are), a leave-one-out prediction (the row's
//! own measurement removed from the fit, so it is genuinely held out), the
//! plain baseline (constant 70% of bandwidth, 50% of compute, 3 ms per
//! decode step) and the documented priors alone (no data at all). The
//! summary is the median absolute percentage error (MdAPE) per metric.
//!
//! A row-wise leave-one-out keeps a held-out row's siblings from the same
//! source in the fit, which flatters it. [`held_out`] is the honest test:
//! leave one *source* (publisher) or one *GPU* out ([`Split`]), refit the
//! factors on the rest and predict the whole group, next to the
//! constant-efficiency baseline, per metric, overall and per group.

use serde::Serialize;

use crate::calibrate;
use crate::efficiency::EfficiencyTable;
use crate::error::PlannerError;
use crate::estimate::Estimator;
use crate::measurements::{Catalogues, Measurement, Metric};

/// Predictions for one row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub id: String,
    pub metric: Metric,
    pub gpu: String,
    pub engine: String,
    pub model: String,
    pub quant: String,
    pub measured: f64,
    pub fitted: f64,
    pub held_out: f64,
    pub baseline: f64,
    pub priors: f64,
}

impl RowResult {
    pub fn metric_name(&self) -> &'static str {
        self.metric.as_str()
    }
}

/// MdAPE per metric, in percent.
#[derive(Debug, Clone, Serialize)]
pub struct MetricSummary {
    pub metric: Metric,
    pub rows: usize,
    pub fitted: f64,
    pub held_out: f64,
    pub baseline: f64,
    pub priors: f64,
}

impl MetricSummary {
    pub fn metric_name(&self) -> &'static str {
        self.metric.as_str()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<RowResult>,
    pub summary: Vec<MetricSummary>,
}

/// Absolute percentage error.
pub fn ape(predicted: f64, measured: f64) -> f64 {
    ((predicted - measured) / measured).abs() * 100.0
}

/// Median of a slice (NaN-free input assumed; empty → NaN).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs the full comparison on `rows`.
pub fn run(rows: &[Measurement], cat: Catalogues) -> Result<Report, PlannerError> {
    let fitted = Estimator::new(calibrate::fit(rows, cat)?);
    let baseline = Estimator::new(EfficiencyTable::baseline());
    let priors = Estimator::new(EfficiencyTable::priors_only());
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let held_out = if r.metric.phase().is_some() {
            let rest: Vec<Measurement> = rows
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, m)| m.clone())
                .collect();
            r.predict(&Estimator::new(calibrate::fit(&rest, cat)?), cat)?
        } else {
            // Never fitted: the in-sample prediction is already out of sample.
            r.predict(&fitted, cat)?
        };
        out.push(RowResult {
            id: r.id.clone(),
            metric: r.metric,
            gpu: r.gpu.clone(),
            engine: r.engine.to_string(),
            model: r.model.clone(),
            quant: r.quant.clone(),
            measured: r.value,
            fitted: r.predict(&fitted, cat)?,
            held_out,
            baseline: r.predict(&baseline, cat)?,
            priors: r.predict(&priors, cat)?,
        });
    }
    let summary = Metric::ALL
        .into_iter()
        .filter_map(|m| {
            let sel: Vec<&RowResult> = out.iter().filter(|r| r.metric == m).collect();
            if sel.is_empty() {
                return None;
            }
            let md = |f: fn(&RowResult) -> f64| {
                median(
                    &sel.iter()
                        .map(|r| ape(f(r), r.measured))
                        .collect::<Vec<_>>(),
                )
            };
            Some(MetricSummary {
                metric: m,
                rows: sel.len(),
                fitted: md(|r| r.fitted),
                held_out: md(|r| r.held_out),
                baseline: md(|r| r.baseline),
                priors: md(|r| r.priors),
            })
        })
        .collect();
    Ok(Report { rows: out, summary })
}

/// How rows are grouped for a held-out evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Leave one source (publisher, [`Measurement::source_key`]) out.
    Source,
    /// Leave one GPU out.
    Gpu,
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Source => "leave-one-source-out",
            Self::Gpu => "leave-one-gpu-out",
        }
    }

    /// The group a row belongs to under this split.
    pub fn key(self, m: &Measurement) -> String {
        match self {
            Self::Source => m.source_key(),
            Self::Gpu => m.gpu.to_ascii_lowercase(),
        }
    }
}

/// One fold: the group held out and the indices of its rows. Every other
/// row is the fold's training set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fold {
    pub group: String,
    pub test: Vec<usize>,
}

/// The folds of `split` over `rows`, in first-seen order of their groups.
pub fn folds(rows: &[Measurement], split: Split) -> Vec<Fold> {
    let mut out: Vec<Fold> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let key = split.key(r);
        match out.iter_mut().find(|f| f.group == key) {
            Some(f) => f.test.push(i),
            None => out.push(Fold {
                group: key,
                test: vec![i],
            }),
        }
    }
    out
}

/// A row predicted by a model fitted without its whole group.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutRow {
    pub id: String,
    pub group: String,
    /// The row's publisher ([`Measurement::source_key`]), whatever the split.
    pub source: String,
    pub metric: Metric,
    pub gpu: String,
    pub engine: String,
    pub quant: String,
    pub measured: f64,
    pub predicted: f64,
    pub baseline: f64,
}

/// Median absolute percentage errors of one slice of a held-out run.
#[derive(Debug, Clone, Serialize)]
pub struct Slice {
    /// A metric name, a group, or `overall`.
    pub name: String,
    pub rows: usize,
    pub planner: f64,
    pub baseline: f64,
    /// Median of predicted / measured (1 = unbiased).
    pub median_ratio: f64,
}

/// The result of one held-out evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    pub split: Split,
    pub rows: Vec<HeldOutRow>,
    /// Per metric, then `overall` (every row pooled).
    pub by_metric: Vec<Slice>,
    /// Per held-out group.
    pub by_group: Vec<Slice>,
}

fn slice(name: String, sel: &[&HeldOutRow]) -> Slice {
    let col = |f: fn(&HeldOutRow) -> f64| sel.iter().map(|r| f(r)).collect::<Vec<_>>();
    Slice {
        name,
        rows: sel.len(),
        planner: median(&col(|r| ape(r.predicted, r.measured))),
        baseline: median(&col(|r| ape(r.baseline, r.measured))),
        median_ratio: median(&col(|r| r.predicted / r.measured)),
    }
}

/// Fits on everything outside each group of `split` and predicts the group:
/// no row of the held-out source (or GPU) informs its own prediction. The
/// model's structure and priors are fixed code; only the efficiency factors
/// are refitted per fold ([`calibrate::fit`]).
pub fn held_out(
    rows: &[Measurement],
    cat: Catalogues,
    split: Split,
) -> Result<HeldOut, PlannerError> {
    let baseline = Estimator::new(EfficiencyTable::baseline());
    let mut out: Vec<(usize, HeldOutRow)> = Vec::with_capacity(rows.len());
    for fold in folds(rows, split) {
        let train: Vec<Measurement> = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| !fold.test.contains(i))
            .map(|(_, m)| m.clone())
            .collect();
        let est = Estimator::new(calibrate::fit(&train, cat)?);
        for &i in &fold.test {
            let r = &rows[i];
            out.push((
                i,
                HeldOutRow {
                    id: r.id.clone(),
                    group: fold.group.clone(),
                    source: r.source_key(),
                    metric: r.metric,
                    gpu: r.gpu.clone(),
                    engine: r.engine.to_string(),
                    quant: r.quant.to_ascii_lowercase(),
                    measured: r.value,
                    predicted: r.predict(&est, cat)?,
                    baseline: r.predict(&baseline, cat)?,
                },
            ));
        }
    }
    out.sort_by_key(|(i, _)| *i);
    let rows_out: Vec<HeldOutRow> = out.into_iter().map(|(_, r)| r).collect();
    let groups = folds(rows, split).into_iter().map(|f| f.group).collect();
    Ok(summarise(split, rows_out, groups))
}

/// Held-out rows summarised per metric, overall, and per group (in the
/// order of `groups`).
pub fn summarise(split: Split, rows: Vec<HeldOutRow>, groups: Vec<String>) -> HeldOut {
    let mut by_metric: Vec<Slice> = Metric::ALL
        .into_iter()
        .filter_map(|m| {
            let sel: Vec<&HeldOutRow> = rows.iter().filter(|r| r.metric == m).collect();
            (!sel.is_empty()).then(|| slice(m.as_str().to_string(), &sel))
        })
        .collect();
    by_metric.push(slice(
        "overall".to_string(),
        &rows.iter().collect::<Vec<_>>(),
    ));
    let by_group = groups
        .into_iter()
        .map(|g| {
            let sel: Vec<&HeldOutRow> = rows.iter().filter(|r| r.group == g).collect();
            slice(g, &sel)
        })
        .collect();
    HeldOut {
        split,
        rows,
        by_metric,
        by_group,
    }
}

/// One setup (metric, engine, GPU, weight precision) that rows of two or
/// more sources measure, with each source's rows and median
/// predicted/measured.
#[derive(Debug, Clone, Serialize)]
pub struct SharedSetup {
    pub metric: Metric,
    pub engine: String,
    pub gpu: String,
    /// `16-bit` for FP16 and BF16 (the same tensor-core rate), else the format.
    pub precision: String,
    /// `(source, rows, median predicted/measured)`, in first-seen order.
    pub sources: Vec<(String, usize, f64)>,
}

impl SharedSetup {
    /// Largest over smallest of the sources' median ratios: 1 when the
    /// sources agree with each other about this setup, whatever the model.
    pub fn spread(&self) -> f64 {
        let r = self.sources.iter().map(|s| s.2);
        let (lo, hi) = r.fold((f64::INFINITY, 0.0_f64), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
        hi / lo
    }
}

/// Sources measured against each other through the model: for every setup
/// that rows of two or more sources cover, the median held-out
/// predicted/measured of each. One model predicts them all, so when one
/// source sits near 1 and another far from it on the same engine, GPU and
/// precision, the two sources disagree with each other about that setup;
/// no efficiency factor can fit both.
pub fn shared_setups(h: &HeldOut) -> Vec<SharedSetup> {
    let precision = |q: &str| match q {
        "fp16" | "bf16" | "f16" => "16-bit".to_string(),
        other => other.to_string(),
    };
    let mut keys: Vec<(Metric, &str, &str, String)> = Vec::new();
    for r in &h.rows {
        let k = (
            r.metric,
            r.engine.as_str(),
            r.gpu.as_str(),
            precision(&r.quant),
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(metric, engine, gpu, prec)| {
            let sel: Vec<&HeldOutRow> = h
                .rows
                .iter()
                .filter(|r| {
                    r.metric == metric
                        && r.engine == engine
                        && r.gpu == gpu
                        && precision(&r.quant) == prec
                })
                .collect();
            let mut sources: Vec<(String, usize, f64)> = Vec::new();
            for r in &sel {
                if !sources.iter().any(|s| s.0 == r.source) {
                    let mine: Vec<f64> = sel
                        .iter()
                        .filter(|x| x.source == r.source)
                        .map(|x| x.predicted / x.measured)
                        .collect();
                    sources.push((r.source.clone(), mine.len(), median(&mine)));
                }
            }
            (sources.len() >= 2).then(|| SharedSetup {
                metric,
                engine: engine.to_string(),
                gpu: gpu.to_string(),
                precision: prec,
                sources,
            })
        })
        .collect()
}

#[cfg(test)]
impl HeldOutRow {
    /// A held-out row for unit tests: its own source's group, engine
    /// `trt-llm`, the baseline equal to the prediction.
    pub(crate) fn for_test(
        source: &str,
        gpu: &str,
        metric: Metric,
        quant: &str,
        measured: f64,
        predicted: f64,
    ) -> Self {
        Self {
            id: format!("{source}-{gpu}-{quant}-{measured}-{predicted}"),
            group: source.to_string(),
            source: source.to_string(),
            metric,
            gpu: gpu.to_string(),
            engine: "trt-llm".to_string(),
            quant: quant.to_string(),
            measured,
            predicted,
            baseline: predicted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_ape() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        // Relative to the measured value, in percent, either side.
        assert!((ape(110.0, 100.0) - 10.0).abs() < 1e-9);
        assert!((ape(90.0, 100.0) - 10.0).abs() < 1e-9);
        assert!((ape(100.0, 50.0) - 100.0).abs() < 1e-9);
        assert!((ape(50.0, 100.0) - 50.0).abs() < 1e-9);
        assert_eq!(ape(100.0, 100.0), 0.0);
    }

    fn row(source: &str, gpu: &str, quant: &str, measured: f64, predicted: f64) -> HeldOutRow {
        HeldOutRow::for_test(source, gpu, Metric::ServingTokS, quant, measured, predicted)
    }

    #[test]
    fn shared_setups_compare_sources_on_the_same_engine_gpu_and_precision() {
        let h = HeldOut {
            split: Split::Source,
            rows: vec![
                // Both sources on the A100 at 16 bits (FP16 and BF16 pool).
                row("a.com", "a100", "fp16", 100.0, 95.0),
                row("b.com", "a100", "bf16", 100.0, 92.0),
                row("b.com", "a100", "bf16", 50.0, 46.0),
                // Both on the H100 in FP8: b is predicted 2.3x its figures.
                row("a.com", "h100", "fp8", 100.0, 103.0),
                row("b.com", "h100", "fp8", 100.0, 234.0),
                // Only one source: nothing to compare.
                row("b.com", "h100", "bf16", 100.0, 180.0),
                row("a.com", "b200", "nvfp4", 100.0, 156.0),
            ],
            by_metric: Vec::new(),
            by_group: Vec::new(),
        };
        let s = shared_setups(&h);
        assert_eq!(s.len(), 2, "{s:?}");
        let a100 = s.iter().find(|x| x.gpu == "a100").unwrap();
        assert_eq!(a100.precision, "16-bit");
        assert_eq!(a100.sources[0], ("a.com".to_string(), 1, 0.95));
        assert_eq!(a100.sources[1].0, "b.com");
        assert_eq!(a100.sources[1].1, 2);
        assert!((a100.sources[1].2 - 0.92).abs() < 1e-12);
        assert!((a100.spread() - 0.95 / 0.92).abs() < 1e-12);
        let h100 = s.iter().find(|x| x.gpu == "h100").unwrap();
        assert_eq!(h100.precision, "fp8");
        assert!((h100.spread() - 2.34 / 1.03).abs() < 1e-12);
    }
}
