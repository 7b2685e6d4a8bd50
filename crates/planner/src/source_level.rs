//! What a held-out error is made of: where each source sits as a whole,
//! and how its rows spread around that.
//!
//! A source's rows share conditions its columns do not state (the harness,
//! the request mix, the driver, the build, how a figure was averaged), so a
//! model that gets every trend right can still sit above or below the whole
//! source. The split takes, for each source and metric, the median of
//! predicted / measured over its rows (its *level*) and reports two
//! medians of absolute percentage error over the same rows:
//!
//! - **level**: each row's error were it exactly its source's level, the
//!   part no within-source shape can remove;
//! - **within**: each row's error once its source's level is divided out,
//!   the part a perfect per-source calibration would leave.
//!
//! Neither is the held-out error, which mixes both; together they show
//! whether a target is out of reach of shape alone (docs/planner.md,
//! "Where each source sits").

use serde::Serialize;

use crate::measurements::Metric;
use crate::validate::{HeldOut, HeldOutRow, ape, median};

/// The split of one metric's (or every row's) held-out error.
#[derive(Debug, Clone, Serialize)]
pub struct LevelSplit {
    /// A metric name, or `overall`.
    pub name: String,
    pub rows: usize,
    /// Source-and-metric groups among the rows.
    pub sources: usize,
    /// The held-out error, as in [`HeldOut::by_metric`].
    pub planner: f64,
    /// Median error were every row at its source's level.
    pub level: f64,
    /// Median error with each source's level divided out.
    pub within: f64,
    /// `level` and `within` of the roofline baseline.
    pub baseline_level: f64,
    pub baseline_within: f64,
}

/// The split per metric with rows, then `overall`.
pub fn split(h: &HeldOut) -> Vec<LevelSplit> {
    let mut out: Vec<LevelSplit> = Metric::ALL
        .into_iter()
        .filter_map(|m| {
            let sel: Vec<&HeldOutRow> = h.rows.iter().filter(|r| r.metric == m).collect();
            (!sel.is_empty()).then(|| of(m.as_str(), &sel))
        })
        .collect();
    if !h.rows.is_empty() {
        out.push(of("overall", &h.rows.iter().collect::<Vec<_>>()));
    }
    out
}

fn of(name: &str, sel: &[&HeldOutRow]) -> LevelSplit {
    let mut groups: Vec<(&str, Metric)> = Vec::new();
    for r in sel {
        if !groups.contains(&(r.source.as_str(), r.metric)) {
            groups.push((r.source.as_str(), r.metric));
        }
    }
    let parts = |ratio: fn(&HeldOutRow) -> f64| {
        let (mut level, mut within) = (Vec::new(), Vec::new());
        for &(source, metric) in &groups {
            let mine: Vec<f64> = sel
                .iter()
                .filter(|r| r.source == source && r.metric == metric)
                .map(|r| ratio(r))
                .collect();
            let at = median(&mine);
            for x in mine {
                level.push(ape(at, 1.0));
                within.push(ape(x / at, 1.0));
            }
        }
        (median(&level), median(&within))
    };
    let (level, within) = parts(|r| r.predicted / r.measured);
    let (baseline_level, baseline_within) = parts(|r| r.baseline / r.measured);
    LevelSplit {
        name: name.to_string(),
        rows: sel.len(),
        sources: groups.len(),
        planner: median(
            &sel.iter()
                .map(|r| ape(r.predicted, r.measured))
                .collect::<Vec<_>>(),
        ),
        level,
        within,
        baseline_level,
        baseline_within,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Split;

    fn row(source: &str, metric: Metric, measured: f64, predicted: f64) -> HeldOutRow {
        HeldOutRow::for_test(source, "h100", metric, "fp16", measured, predicted)
    }

    fn held_out(rows: Vec<HeldOutRow>) -> HeldOut {
        HeldOut {
            split: Split::Source,
            rows,
            by_metric: Vec::new(),
            by_group: Vec::new(),
        }
    }

    #[test]
    fn a_source_off_as_a_whole_is_level_and_a_spread_source_is_within() {
        use Metric::*;
        // a.com: every row predicted 1.3x, a pure level error; b.com:
        // centred on 1, spread 0.9 / 1.0 / 1.1, within only.
        let a = [100.0, 200.0, 50.0].map(|m| row("a.com", ServingTokS, m, 1.3 * m));
        let b = [0.9, 1.0, 1.1].map(|r| row("b.com", ServingTokS, 100.0, 100.0 * r));
        let h = held_out(a.into_iter().chain(b).collect());
        let s = split(&h);
        assert_eq!(s.len(), 2, "one metric, then overall");
        let serving = &s[0];
        assert_eq!(
            (serving.name.as_str(), serving.rows, serving.sources),
            ("serving_tok_s", 6, 2)
        );
        // Levels 30, 30, 30, 0, 0, 0; within 0, 0, 0, 10, 0, 10.
        assert!((serving.level - 15.0).abs() < 1e-9, "{serving:?}");
        assert!((serving.within - 0.0).abs() < 1e-9, "{serving:?}");
        // Held out: 30, 30, 30, 10, 0, 10.
        assert!((serving.planner - 20.0).abs() < 1e-9, "{serving:?}");
        assert_eq!(s[1].name, "overall");
        assert!((s[1].level - serving.level).abs() < 1e-12);
    }

    #[test]
    fn levels_are_per_source_and_metric() {
        use Metric::*;
        // One source, decode predicted 2x and prefill 0.5x: two levels, each
        // exact, so nothing is left within.
        let h = held_out(vec![
            row("a.com", DecodeTokS, 10.0, 20.0),
            row("a.com", DecodeTokS, 30.0, 60.0),
            row("a.com", PrefillTokS, 100.0, 50.0),
        ]);
        let s = split(&h);
        let overall = s.last().unwrap();
        assert_eq!(overall.sources, 2);
        assert!(overall.within.abs() < 1e-12, "{overall:?}");
        assert!((overall.level - 100.0).abs() < 1e-9, "{overall:?}");
        assert!(split(&held_out(Vec::new())).is_empty());
    }
}
