//! The accuracy targets on the shipped measurements, and drift of the
//! shipped efficiency table from a fresh fit.

use glassbox_planner::measurements::{self, Catalogues, Metric};
use glassbox_planner::{EfficiencyTable, HardwareCatalogue, ModelCatalogue, calibrate, validate};

#[test]
fn planner_meets_targets_and_beats_the_baseline() {
    let hw = HardwareCatalogue::builtin().unwrap();
    let models = ModelCatalogue::builtin().unwrap();
    let cat = Catalogues {
        hardware: &hw,
        models: &models,
    };
    let rows = measurements::builtin().unwrap();
    let report = validate::run(&rows, cat).unwrap();
    for s in &report.summary {
        let target = match s.metric {
            Metric::DecodeTokS => 10.0,
            Metric::PrefillTokS | Metric::TtftMs => 20.0,
            Metric::ServingTokS => s.baseline,
        };
        assert!(
            s.held_out <= target,
            "{:?}: held-out MdAPE {:.1}% > {target}%",
            s.metric,
            s.held_out
        );
        assert!(s.fitted < s.baseline && s.held_out < s.baseline, "{s:?}");
    }
    assert_eq!(report.summary.len(), 4);
}

#[test]
fn shipped_defaults_are_the_fit_on_the_shipped_measurements() {
    let hw = HardwareCatalogue::builtin().unwrap();
    let models = ModelCatalogue::builtin().unwrap();
    let cat = Catalogues {
        hardware: &hw,
        models: &models,
    };
    let fresh = calibrate::fit(&measurements::builtin().unwrap(), cat).unwrap();
    let shipped = EfficiencyTable::defaults().unwrap();
    assert_eq!(
        shipped.entries, fresh.entries,
        "data/efficiency.toml is stale: cargo run --release -p glassbox-planner --example accuracy -- --write-defaults crates/planner/data/efficiency.toml"
    );
}
