//! Planner accuracy on published measurements.
//!
//! `cargo run --release -p glassbox-planner --example accuracy -- --loso [--rows]`
//!
//! `--loso` prints the held-out evaluation of issue 17: leave-one-source-out
//! and leave-one-GPU-out (every row predicted by factors fitted without its
//! whole source, or GPU), median absolute percentage error (MdAPE) per
//! metric, overall and per source, next to the constant-efficiency roofline
//! baseline. Without `--loso` it prints the older row-wise table (in-sample
//! fit, leave-one-row-out, baseline, priors). `--rows` adds predicted vs
//! measured for every row. `--write-defaults PATH` writes the fit as an
//! efficiency table (how `data/efficiency.toml` is made). `--extra FILE`
//! (repeatable) adds a measurements CSV's rows to the evaluation, e.g.
//! `data/measurements-gpustack.csv`, which is kept out of the shipped set
//! (docs/planner.md, "GPUStack's serving rows"). `--write-accuracy PATH`
//! writes the accuracy bands every plan shows (`data/accuracy.toml`, from
//! the leave-one-source-out run over every public row).
//!
//! Each held-out table is followed by its split into where each source
//! sits as a whole and how its rows spread around that
//! (`glassbox_planner::source_level`).
//!
//! `--sealed FILE [--log PATH]` scores a sealed holdout (crate::sealed, ADR
//! 0010): the shipped model on measurements from sources it was never
//! fitted on. The first score of a file is recorded with the file's SHA-256
//! in `crates/planner/data/sealed-scores.toml` (or `--log PATH`); later runs
//! print it beside the current score and never overwrite it.

use std::error::Error;

use glassbox_planner::accuracy::AccuracyTable;
use glassbox_planner::measurements::{self, Catalogues};
use glassbox_planner::sealed::{self, FirstScore, Recorded, SealedLog};
use glassbox_planner::source_level;
use glassbox_planner::validate::{self, HeldOut, Split, ape};
use glassbox_planner::{EfficiencyTable, Estimator, HardwareCatalogue, ModelCatalogue, calibrate};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hardware = HardwareCatalogue::builtin()?;
    let models = ModelCatalogue::builtin()?;
    let cat = Catalogues {
        hardware: &hardware,
        models: &models,
    };
    if let Some(i) = args.iter().position(|a| a == "--sealed") {
        let path = args.get(i + 1).ok_or("--sealed needs a measurements CSV")?;
        let log = match args.iter().position(|a| a == "--log") {
            Some(j) => args.get(j + 1).ok_or("--log needs a path")?.as_str(),
            None => "crates/planner/data/sealed-scores.toml",
        };
        return score_sealed(path, log, cat, args.iter().any(|a| a == "--rows"));
    }
    let mut rows = measurements::builtin()?;
    let mut extra = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == "--extra" {
            let path = args.get(i + 1).ok_or("--extra needs a measurements CSV")?;
            rows.extend(measurements::read_csv(std::path::Path::new(path))?);
            extra.push(path.as_str());
        }
    }
    if let Some(i) = args.iter().position(|a| a == "--write-defaults") {
        if !extra.is_empty() {
            return Err("--write-defaults fits the shipped measurements only; drop --extra".into());
        }
        let path = args.get(i + 1).ok_or("--write-defaults needs a path")?;
        let table = calibrate::fit(&rows, cat)?;
        let header = "# Shipped efficiency factors: the least-squares fit of `glassbox plan calibrate`\n\
                      # on crates/planner/data/measurements.csv (see docs/planner.md, Calibration).\n\
                      # Regenerate: cargo run --release -p glassbox-planner --example accuracy -- --write-defaults crates/planner/data/efficiency.toml\n\n";
        std::fs::write(path, format!("{header}{}", table.to_toml()?))?;
        println!("wrote {path}");
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--write-accuracy") {
        let path = args.get(i + 1).ok_or("--write-accuracy needs a path")?;
        let public = measurements::all_public()?;
        let h = validate::held_out(&public, cat, Split::Source)?;
        let table = AccuracyTable::from_held_out(&h, cat)?;
        let header = "# Held-out accuracy bands shown with every plan (crate::accuracy): leave-one-source-out over\n\
                      # crates/planner/data/measurements.csv + measurements-gpustack.csv; ratio = measured / predicted.\n\
                      # Regenerate: cargo run --release -p glassbox-planner --example accuracy -- --write-accuracy crates/planner/data/accuracy.toml\n\n";
        std::fs::write(path, format!("{header}{}", table.to_toml()?))?;
        println!("wrote {path}: {} bands", table.bands.len());
        return Ok(());
    }
    if args.iter().any(|a| a == "--loso") {
        let show_rows = args.iter().any(|a| a == "--rows");
        println!(
            "{} published measurements from {} sources (crates/planner/data/measurements.csv{})\n",
            rows.len(),
            validate::folds(&rows, Split::Source).len(),
            extra.iter().map(|p| format!(" + {p}")).collect::<String>()
        );
        for split in [Split::Source, Split::Gpu] {
            let h = validate::held_out(&rows, cat, split)?;
            print_held_out(&h, show_rows);
            if split == Split::Source {
                print_shared_setups(&h);
            }
        }
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

/// Scores the sealed file at `path` with the shipped model and records its
/// first score in the log at `log` (never overwriting one).
fn score_sealed(
    path: &str,
    log: &str,
    cat: Catalogues,
    show_rows: bool,
) -> Result<(), Box<dyn Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    let sha = sealed::sha256_hex(&bytes);
    let rows = measurements::parse_csv(&String::from_utf8(bytes)?, path)?;
    let est = Estimator::new(EfficiencyTable::defaults()?);
    let h = sealed::score(path, &rows, &measurements::all_public()?, &est, cat)?;
    println!(
        "sealed holdout {path} (sha256 {sha}): {} rows, {} sources, shipped model\n",
        h.rows.len(),
        h.by_group.len()
    );
    print_held_out(&h, show_rows);
    let mut book = match std::fs::read_to_string(log) {
        Ok(text) => SealedLog::parse(&text, log)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => SealedLog::default(),
        Err(e) => return Err(format!("cannot read `{log}`: {e}").into()),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    match book.record(FirstScore::new(path, &sha, &sealed::utc_date(now), &h))? {
        Recorded::First => {
            let header = "# First scores of sealed holdout files (crate::sealed, ADR 0010). Written by\n\
                          # `cargo run --release -p glassbox-planner --example accuracy -- --sealed FILE`; never edited by hand.\n\n";
            std::fs::write(log, format!("{header}{}", book.to_toml()?))?;
            println!("first score recorded in {log}: this is the figure the docs report");
        }
        Recorded::Earlier(first) => {
            println!(
                "scored before, on {}: that first score stands (not overwritten)\n",
                first.date
            );
            println!("| metric | rows | first score | now | baseline |");
            println!("|---|---:|---:|---:|---:|");
            for m in &first.metric {
                let now = h
                    .by_metric
                    .iter()
                    .find(|s| s.name == m.name)
                    .map_or(f64::NAN, |s| s.planner);
                println!(
                    "| {} | {} | {:.1}% | {:.1}% | {:.1}% |",
                    m.name, m.rows, m.planner_pct, now, m.baseline_pct
                );
            }
        }
    }
    Ok(())
}

fn print_held_out(h: &HeldOut, show_rows: bool) {
    println!("{} (median absolute percentage error)\n", h.split.as_str());
    if show_rows {
        println!(
            "{:<44} {:<13} {:>10} {:>10} {:>6} {:>10} {:>6}  group",
            "row", "metric", "measured", "held-out", "err%", "baseline", "err%"
        );
        for r in &h.rows {
            println!(
                "{:<44} {:<13} {:>10.1} {:>10.1} {:>6.1} {:>10.1} {:>6.1}  {}",
                r.id,
                r.metric.as_str(),
                r.measured,
                r.predicted,
                ape(r.predicted, r.measured),
                r.baseline,
                ape(r.baseline, r.measured),
                r.group
            );
        }
        println!();
    }
    println!(
        "| metric | rows | planner (held out) | roofline baseline | median predicted/measured |"
    );
    println!("|---|---:|---:|---:|---:|");
    for s in &h.by_metric {
        println!(
            "| {} | {} | {:.1}% | {:.1}% | {:.2} |",
            s.name, s.rows, s.planner, s.baseline, s.median_ratio
        );
    }
    println!(
        "\nwhere each source sits (level: every row at its source's median predicted/measured; within: that level divided out)\n"
    );
    println!(
        "| metric | rows | source groups | planner | level | within | baseline level | baseline within |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for s in source_level::split(h) {
        println!(
            "| {} | {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.1}% |",
            s.name,
            s.rows,
            s.sources,
            s.planner,
            s.level,
            s.within,
            s.baseline_level,
            s.baseline_within
        );
    }
    let what = match h.split {
        Split::Source => "source held out",
        Split::Gpu => "GPU held out",
    };
    println!("\n| {what} | rows | planner | baseline | median predicted/measured |");
    println!("|---|---:|---:|---:|---:|");
    for s in &h.by_group {
        println!(
            "| {} | {} | {:.1}% | {:.1}% | {:.2} |",
            s.name, s.rows, s.planner, s.baseline, s.median_ratio
        );
    }
    println!();
}

/// Setups that two or more sources measure: do the sources agree with
/// each other (through the same model) about them?
fn print_shared_setups(h: &HeldOut) {
    let shared = validate::shared_setups(h);
    if shared.is_empty() {
        return;
    }
    println!(
        "setups measured by more than one source (held-out median predicted/measured per source)\n"
    );
    println!(
        "| metric | engine | GPU | precision | per source: rows, predicted/measured | spread |"
    );
    println!("|---|---|---|---|---|---:|");
    for s in &shared {
        let per: Vec<String> = s
            .sources
            .iter()
            .map(|(src, n, r)| format!("{src}: {n}, {r:.2}"))
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {:.2} |",
            s.metric.as_str(),
            s.engine,
            s.gpu,
            s.precision,
            per.join("; "),
            s.spread()
        );
    }
    println!();
}
