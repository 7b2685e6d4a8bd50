//! Accuracy against published measurements: in-sample, held-out and baseline.
//!
//! For every row the report holds four predictions: the fit on all rows
//! (what the shipped defaults are), a leave-one-out prediction (the row's
//! own measurement removed from the fit, so it is genuinely held out), the
//! plain baseline (constant 70% of bandwidth, 50% of compute, 3 ms per
//! decode step) and the documented priors alone (no data at all). The
//! summary is the median absolute percentage error (MdAPE) per metric.

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
}
