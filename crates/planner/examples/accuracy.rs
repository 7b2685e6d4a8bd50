//! Planner accuracy on published measurements.
//!
//! `cargo run --release -p glassbox-planner --example accuracy [-- --rows]`
//!
//! Prints the median absolute percentage error (MdAPE) per metric for the
//! fitted planner (in-sample = shipped defaults), leave-one-out held-out
//! predictions, the plain baseline and the uncalibrated priors; `--rows`
//! adds predicted vs measured for every row. `--write-defaults PATH` writes
//! the fit as an efficiency table (how `data/efficiency.toml` is made).

use std::error::Error;

use glassbox_planner::measurements::{self, Catalogues};
use glassbox_planner::validate::{self, ape};
use glassbox_planner::{HardwareCatalogue, ModelCatalogue, calibrate};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hardware = HardwareCatalogue::builtin()?;
    let models = ModelCatalogue::builtin()?;
    let cat = Catalogues {
        hardware: &hardware,
        models: &models,
    };
    let rows = measurements::builtin()?;
    if let Some(i) = args.iter().position(|a| a == "--write-defaults") {
        let path = args.get(i + 1).ok_or("--write-defaults needs a path")?;
        let table = calibrate::fit(&rows, cat)?;
        let header = "# Shipped efficiency factors: the least-squares fit of `glassbox plan calibrate`\n\
                      # on crates/planner/data/measurements.csv (see docs/planner.md, Calibration).\n\
                      # Regenerate: cargo run --release -p glassbox-planner --example accuracy -- --write-defaults crates/planner/data/efficiency.toml\n\n";
        std::fs::write(path, format!("{header}{}", table.to_toml()?))?;
        println!("wrote {path}");
        return Ok(());
    }
    let report = validate::run(&rows, cat)?;
    if args.iter().any(|a| a == "--rows") {
        println!(
            "{:<44} {:<13} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>6}",
            "row", "metric", "measured", "fitted", "err%", "held-out", "err%", "baseline", "err%"
        );
        for r in &report.rows {
            println!(
                "{:<44} {:<13} {:>10.1} {:>10.1} {:>6.1} {:>10.1} {:>6.1} {:>10.1} {:>6.1}",
                r.id,
                r.metric_name(),
                r.measured,
                r.fitted,
                ape(r.fitted, r.measured),
                r.held_out,
                ape(r.held_out, r.measured),
                r.baseline,
                ape(r.baseline, r.measured)
            );
        }
        println!();
    }
    println!(
        "{} published measurements (crates/planner/data/measurements.csv)",
        rows.len()
    );
    println!(
        "| metric | rows | planner fitted (in-sample) | planner held-out (LOO) | baseline | priors only |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for s in &report.summary {
        println!(
            "| {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% |",
            s.metric_name(),
            s.rows,
            s.fitted,
            s.held_out,
            s.baseline,
            s.priors
        );
    }
    Ok(())
}
