//! Sealed holdouts: new measurement sources scored once, before any model
//! change, and that first score kept (ADR 0010).
//!
//! Leave-one-source-out stops being blind once its rows have been looked at
//! and the model changed with them in view. So new public measurements go
//! into a *sealed* CSV of their own (`data/sealed/*.csv`) before anyone
//! looks at the planner's predictions for them. The first run of
//! `accuracy -- --sealed FILE` scores the shipped model on it and records
//! that score, with the file's SHA-256, in a committed log
//! (`data/sealed-scores.toml`). Later runs print the recorded first score
//! beside the current one and never overwrite it; a sealed file whose bytes
//! changed after its first score is refused (new rows go into a new file).
//! The docs report the first score, next to any later one.
//!
//! A sealed row must come from a source the model was not fitted on: the
//! score is of the model as it ships, so a source already in the public
//! rows would not be held out.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::calibrate;
use crate::error::PlannerError;
use crate::estimate::Estimator;
use crate::measurements::{Catalogues, Measurement};
use crate::validate::{self, HeldOut, HeldOutRow, Split};

const SHIPPED: &str = include_str!("../data/sealed-scores.toml");

/// SHA-256 of a sealed file's bytes, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Scores `sealed` rows with `est` (the shipped model), each source a
/// group, next to the constant-efficiency baseline. Fails when a sealed
/// row's source is among `seen`, the rows the model was fitted on or
/// checked against.
pub fn score(
    file: &str,
    sealed: &[Measurement],
    seen: &[Measurement],
    est: &Estimator,
    cat: Catalogues,
) -> Result<HeldOut, PlannerError> {
    if sealed.is_empty() {
        return Err(PlannerError::Sealed {
            file: file.to_string(),
            message: "no rows (hint: one measurement a line, in the measurements CSV format)"
                .into(),
        });
    }
    let known: BTreeSet<String> = seen.iter().map(Measurement::source_key).collect();
    if let Some(r) = sealed.iter().find(|r| known.contains(&r.source_key())) {
        return Err(PlannerError::Sealed {
            file: file.to_string(),
            message: format!(
                "line {}: source `{}` is already in the public rows the model is fitted on, so it is not held out (hint: move the row to measurements.csv, or seal only new sources)",
                r.line,
                r.source_key()
            ),
        });
    }
    let baseline = Estimator::new(crate::EfficiencyTable::baseline());
    let mut rows = Vec::with_capacity(sealed.len());
    let mut groups: Vec<String> = Vec::new();
    for r in sealed {
        let group = r.source_key();
        if !groups.contains(&group) {
            groups.push(group.clone());
        }
        rows.push(HeldOutRow {
            id: r.id.clone(),
            group,
            source: r.source_key(),
            metric: r.metric,
            gpu: r.gpu.clone(),
            engine: r.engine.to_string(),
            quant: r.quant.to_ascii_lowercase(),
            measured: r.value,
            predicted: r.predict(est, cat)?,
            baseline: r.predict(&baseline, cat)?,
        });
    }
    Ok(validate::summarise(Split::Source, rows, groups))
}

/// One metric's figures in a recorded score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricScore {
    /// A metric name or `overall`.
    pub name: String,
    pub rows: usize,
    /// Median absolute percentage error of the planner, percent.
    pub planner_pct: f64,
    /// The same for the constant-efficiency roofline baseline, percent.
    pub baseline_pct: f64,
    /// Median predicted / measured.
    pub median_ratio: f64,
}

/// The first score of one sealed file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstScore {
    /// The file as given, relative to the repository root.
    pub file: String,
    pub sha256: String,
    /// UTC date of the first score, `YYYY-MM-DD`.
    pub date: String,
    pub rows: usize,
    pub sources: Vec<String>,
    pub metric: Vec<MetricScore>,
}

impl FirstScore {
    /// The record of `h`, a score of `file` whose bytes hash to `sha256`.
    pub fn new(file: &str, sha256: &str, date: &str, h: &HeldOut) -> Self {
        Self {
            file: file.to_string(),
            sha256: sha256.to_string(),
            date: date.to_string(),
            rows: h.rows.len(),
            sources: h.by_group.iter().map(|g| g.name.clone()).collect(),
            metric: h
                .by_metric
                .iter()
                .map(|m| MetricScore {
                    name: m.name.clone(),
                    rows: m.rows,
                    planner_pct: round(m.planner),
                    baseline_pct: round(m.baseline),
                    median_ratio: round(m.median_ratio),
                })
                .collect(),
        }
    }
}

/// Two decimals: the log is read by people and diffed.
fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Every sealed file's first score (`data/sealed-scores.toml`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SealedLog {
    #[serde(default)]
    pub score: Vec<FirstScore>,
}

/// What recording a score did.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// The first score of this file: added to the log.
    First,
    /// The file was scored before; its first score stands (returned).
    Earlier(FirstScore),
}

impl SealedLog {
    pub fn parse(text: &str, origin: &str) -> Result<Self, PlannerError> {
        toml::from_str(text).map_err(|e| PlannerError::Toml {
            origin: origin.to_string(),
            message: e.to_string(),
        })
    }

    pub fn to_toml(&self) -> Result<String, PlannerError> {
        toml::to_string(self).map_err(|e| PlannerError::Toml {
            origin: "sealed log".into(),
            message: e.to_string(),
        })
    }

    /// Adds `score` unless its file was scored before. The same bytes
    /// (under any name) keep their first score; the same name with other
    /// bytes is refused: a sealed file is never edited after its first score.
    pub fn record(&mut self, score: FirstScore) -> Result<Recorded, PlannerError> {
        if let Some(first) = self.score.iter().find(|s| s.sha256 == score.sha256) {
            return Ok(Recorded::Earlier(first.clone()));
        }
        if let Some(first) = self.score.iter().find(|s| s.file == score.file) {
            return Err(PlannerError::Sealed {
                file: score.file,
                message: format!(
                    "its bytes changed after its first score on {} (sha256 {} then, {} now); a sealed file is never edited (hint: restore it, and put new rows in a new sealed file)",
                    first.date, first.sha256, score.sha256
                ),
            });
        }
        self.score.push(score);
        Ok(Recorded::First)
    }
}

/// How one metric fared on the sealed files when each was first scored:
/// the blind figure a plan shows beside its leave-one-source-out band
/// (`crate::accuracy`), which has been looked at and so is narrower than a
/// new source's error is likely to be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blind {
    /// Sealed files with rows of the metric.
    pub files: usize,
    /// Their rows of the metric, in all.
    pub rows: usize,
    /// The lowest and highest first score (median absolute percentage
    /// error of one file's rows), percent.
    pub lowest_pct: f64,
    pub highest_pct: f64,
    /// The row-weighted median of the files' first scores, percent: the
    /// first score a row of this metric most typically came with.
    pub typical_pct: f64,
    /// The row-weighted median of the files' median predicted/measured
    /// ratios: which way the first scores missed (below 1, the plan came
    /// under what was measured); `None` where no file recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typical_ratio: Option<f64>,
    /// The engine family the files were chosen for (they hold rows of it),
    /// `None` for every file ([`SealedLog::blind_for`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl SealedLog {
    /// The log shipped with the planner (`data/sealed-scores.toml`).
    pub fn shipped() -> Result<Self, PlannerError> {
        Self::parse(SHIPPED, "data/sealed-scores.toml")
    }

    /// The first scores of `metric` (a metric name or `overall`) over every
    /// file with rows of it; `None` when no file has one.
    pub fn blind(&self, metric: &str) -> Option<Blind> {
        self.blind_over(metric, None)
    }

    /// The same over the files holding rows of `metric` from engine family
    /// `family` ([`crate::sealed_files::engines_of`]): the blind figure
    /// nearest a plan's own engine. A file's first score covers all its
    /// rows of the metric, its other engines' too. `None` when no shipped
    /// file has such rows.
    pub fn blind_for(&self, metric: &str, family: &str) -> Option<Blind> {
        self.blind_over(metric, Some(family))
    }

    fn blind_over(&self, metric: &str, family: Option<&str>) -> Option<Blind> {
        let holds = |f: &FirstScore| {
            family.is_none_or(|fam| {
                crate::sealed_files::engines_of(&f.file).contains(&(metric.into(), fam.into()))
            })
        };
        let scores: Vec<&MetricScore> = self
            .score
            .iter()
            .filter(|f| holds(f))
            .flat_map(|f| f.metric.iter())
            .filter(|m| m.name == metric && m.rows > 0 && m.planner_pct.is_finite())
            .collect();
        if scores.is_empty() {
            return None;
        }
        // The first score, and the ratio, under which half of the rows
        // (counted once each) lie.
        let mut pcts: Vec<(f64, f64)> = scores
            .iter()
            .map(|m| (m.planner_pct, m.rows as f64))
            .collect();
        let mut ratios: Vec<(f64, f64)> = scores
            .iter()
            .filter(|m| m.median_ratio.is_finite())
            .map(|m| (m.median_ratio, m.rows as f64))
            .collect();
        Some(Blind {
            files: scores.len(),
            rows: scores.iter().map(|m| m.rows).sum(),
            lowest_pct: scores
                .iter()
                .map(|m| m.planner_pct)
                .fold(f64::INFINITY, f64::min),
            highest_pct: scores
                .iter()
                .map(|m| m.planner_pct)
                .fold(f64::NEG_INFINITY, f64::max),
            typical_pct: calibrate::weighted_median(&mut pcts),
            typical_ratio: (!ratios.is_empty()).then(|| calibrate::weighted_median(&mut ratios)),
            engine: family.map(str::to_string),
        })
    }
}

/// Today's UTC date as `YYYY-MM-DD`, from days since 1970-01-01 (the
/// proleptic Gregorian calendar's civil-from-days conversion).
pub fn utc_date(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::measurements::{builtin, parse_csv};
    use crate::{EfficiencyTable, HardwareCatalogue, ModelCatalogue};

    const HEADER: &str = "id,metric,value,gpu,tp,engine,model,quant,kv_dtype,batch,prompt_tokens,gen_tokens,source,notes\n";

    fn first(file: &str, sha: &str) -> FirstScore {
        FirstScore {
            file: file.into(),
            sha256: sha.into(),
            date: "2026-12-03".into(),
            rows: 1,
            sources: vec!["example.org/a".into()],
            metric: vec![],
        }
    }

    #[test]
    fn the_first_score_stands_and_an_edited_file_is_refused() {
        let mut log = SealedLog::default();
        assert_eq!(log.record(first("a.csv", "11")).unwrap(), Recorded::First);
        let mut later = first("a.csv", "11");
        later.date = "2026-12-24".into();
        // Same bytes: the first score is returned, the log unchanged.
        match log.record(later).unwrap() {
            Recorded::Earlier(f) => assert_eq!(f.date, "2026-12-03"),
            other => panic!("{other:?}"),
        }
        assert_eq!(log.score.len(), 1);
        let e = log.record(first("a.csv", "22")).unwrap_err();
        assert_eq!(e.code(), "planner.sealed");
        assert!(e.to_string().contains("never edited"), "{e}");
        assert_eq!(log.record(first("b.csv", "33")).unwrap(), Recorded::First);
        let text = log.to_toml().unwrap();
        assert_eq!(SealedLog::parse(&text, "log").unwrap(), log);
    }

    #[test]
    fn a_source_the_model_was_fitted_on_is_not_a_holdout() {
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let cat = Catalogues {
            hardware: &hw,
            models: &models,
        };
        let seen = builtin().unwrap();
        let est = Estimator::new(EfficiencyTable::defaults().unwrap());
        let old = format!(
            "{HEADER}x1,decode_tok_s,120,rtx-4090,1,llama.cpp,llama-2-7b,q4_0,,1,0,128,https://github.com/XiongjieDai/GPU-Benchmarks-on-LLM-Inference,\n"
        );
        let rows = parse_csv(&old, "sealed.csv").unwrap();
        let e = score("sealed.csv", &rows, &seen, &est, cat).unwrap_err();
        assert!(
            e.to_string().contains("line 2") && e.to_string().contains("xiongjiedai"),
            "{e}"
        );
        let new = format!(
            "{HEADER}n1,decode_tok_s,120,rtx-4090,1,llama.cpp,llama-2-7b,q4_0,,1,0,128,https://example.org/new-bench,\n"
        );
        let rows = parse_csv(&new, "sealed.csv").unwrap();
        let h = score("sealed.csv", &rows, &seen, &est, cat).unwrap();
        assert_eq!(h.rows.len(), 1);
        assert_eq!(h.by_group[0].name, "example.org/new-bench");
        // The prediction is the shipped model's, not a refit.
        let want = rows[0].predict(&est, cat).unwrap();
        assert_eq!(h.rows[0].predicted, want);
        assert!(score("sealed.csv", &[], &seen, &est, cat).is_err());
    }

    fn scored(pct: &[(&str, f64, usize)]) -> FirstScore {
        let mut f = first("x.csv", "00");
        f.metric = pct
            .iter()
            .map(|&(name, planner_pct, rows)| MetricScore {
                name: name.into(),
                rows,
                planner_pct,
                baseline_pct: 0.0,
                median_ratio: 1.0,
            })
            .collect();
        f
    }

    #[test]
    fn the_blind_figure_spans_the_files_first_scores_weighted_by_rows() {
        let log = SealedLog {
            score: vec![
                scored(&[("decode_tok_s", 20.0, 10), ("overall", 20.0, 10)]),
                scored(&[("decode_tok_s", 60.0, 3), ("serving_tok_s", 5.0, 4)]),
                scored(&[("decode_tok_s", 12.0, 2)]),
            ],
        };
        let b = log.blind("decode_tok_s").unwrap();
        assert_eq!((b.files, b.rows), (3, 15));
        assert_eq!((b.lowest_pct, b.highest_pct), (12.0, 60.0));
        // Rows by score: 2 at 12%, 10 at 20%, 3 at 60%: the 8th of 15 is at 20%.
        assert_eq!(b.typical_pct, 20.0);
        assert_eq!(log.blind("serving_tok_s").unwrap().files, 1);
        assert!(log.blind("ttft_ms").is_none());
        // The shipped log has blind figures for every metric a plan shows a band of.
        let shipped = SealedLog::shipped().unwrap();
        for m in ["decode_tok_s", "prefill_tok_s", "ttft_ms", "serving_tok_s"] {
            let b = shipped.blind(m).unwrap();
            assert!(
                b.lowest_pct <= b.typical_pct && b.typical_pct <= b.highest_pct,
                "{m}: {b:?}"
            );
        }
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_256_000), "2026-12-03");
    }

    #[test]
    fn every_sealed_file_is_byte_for_byte_the_one_first_scored() {
        let log = SealedLog::shipped().unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for s in &log.score {
            let bytes = std::fs::read(root.join(&s.file)).unwrap();
            assert_eq!(
                sha256_hex(&bytes),
                s.sha256,
                "{} changed after its first score",
                s.file
            );
        }
    }
}
