//! Fitting efficiency factors to measurements.
//!
//! Method (docs/planner.md, "Calibration"): rows are grouped by
//! (hardware class, engine, phase). For each group, the model
//! `t = max(X·a, Y) + c + comm` is fitted, where `X` is the row's primary
//! roofline time (bytes/BW for decode, FLOPs/peak for prefill), `Y` the other
//! roofline term at the other phase's current factor, `a = 1/η`, and `c` the
//! fixed overhead. `a` is found by a coarse-to-fine search over a log grid,
//! and for each `a` the overhead is the value minimising the sum of absolute
//! relative errors (the `1/t`-weighted median of `t − g`, clamped at 0): an
//! L1 fit, so a 10 ms row and a 500 ms row count the same and one odd run
//! in a group moves it little. Each group's result is then shrunk toward
//! what the group would fall back to without it, with weight
//! `n / (n + SHRINK_ROWS)` on the fit.
//!
//! The overhead is fitted only when a group has at least
//! [`MIN_ROWS_FOR_OVERHEAD`] rows whose roofline times span at least
//! [`MIN_SPREAD_FOR_OVERHEAD`]×; otherwise slope and intercept are not
//! separable and the group inherits the overhead of its parent level
//! (class pooled over engines, then everything for the phase). Pooled levels
//! are fitted the same way, so a new engine or class with no rows falls back
//! to data rather than to a guess, but only where the pooled level really
//! pools two or more engines (classes): one engine's fit is not borrowed for
//! another; the documented prior is used instead. Decode and prefill depend on each other
//! only through the rarely-binding `Y` term; two alternating passes settle it.
//!
//! Serving-throughput rows mix both phases and are never fitted: they stay
//! out-of-sample for validation.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::efficiency::{EfficiencyTable, Engine, Entry, Factor, Phase, prior};
use crate::error::PlannerError;
use crate::estimate::{Estimator, decode_terms, prefill_terms};
use crate::hardware::HardwareClass;
use crate::measurements::{Catalogues, Measurement};

pub const MIN_ROWS_FOR_OVERHEAD: usize = 4;
pub const MIN_SPREAD_FOR_OVERHEAD: f64 = 1.5;
/// Rows at which a group's own fit and its fallback weigh the same.
pub const SHRINK_ROWS: f64 = 8.0;
/// Efficiency search range: 3% to 150% of the roofline (above 100% absorbs
/// peak figures that understate what a kernel reaches, e.g. FP16 accumulate).
const ETA_MIN: f64 = 0.03;
const ETA_MAX: f64 = 1.5;
/// Coarse log-grid steps over [ETA_MIN, ETA_MAX], then as many again
/// between the best coarse point's neighbours (resolution ~0.2%).
const GRID: usize = 60;

/// One row reduced to what the fit needs.
#[derive(Debug, Clone, Copy)]
struct Point {
    /// Primary roofline time at 100% efficiency, seconds.
    x: f64,
    /// The other term, already divided by the other phase's efficiency.
    y: f64,
    comm: f64,
    /// Measured time, seconds.
    t: f64,
}

/// The result of fitting one group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupFit {
    pub factor: Factor,
    pub overhead_fitted: bool,
    pub loss: f64,
}

fn fit_group(points: &[Point], inherited_overhead_s: f64) -> Option<GroupFit> {
    if points.is_empty() {
        return None;
    }
    let (lo, hi) = points
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.x), hi.max(p.x)));
    let fit_c =
        points.len() >= MIN_ROWS_FOR_OVERHEAD && hi / lo.max(1e-12) >= MIN_SPREAD_FOR_OVERHEAD;
    let evaluate = |eta: f64| -> (f64, f64, f64) {
        let a = 1.0 / eta;
        let g: Vec<f64> = points.iter().map(|p| (p.x * a).max(p.y) + p.comm).collect();
        let c = if fit_c {
            // Σ |g + c − t| / t is smallest at the 1/t-weighted median of t − g.
            let mut r: Vec<(f64, f64)> = points
                .iter()
                .zip(&g)
                .map(|(p, gi)| (p.t - gi, 1.0 / p.t))
                .collect();
            weighted_median(&mut r).max(0.0)
        } else {
            inherited_overhead_s
        };
        let loss: f64 = points
            .iter()
            .zip(&g)
            .map(|(p, gi)| ((gi + c - p.t) / p.t).abs())
            .sum();
        (eta, c, loss)
    };
    let span = (ETA_MAX / ETA_MIN).ln();
    let at = |u: f64| ETA_MIN * (span * u).exp();
    let mut best: Option<(f64, f64, f64)> = None;
    let mut best_i = 0;
    for i in 0..=GRID {
        let e = evaluate(at(i as f64 / GRID as f64));
        if best.is_none_or(|(_, _, l)| e.2 < l) {
            best = Some(e);
            best_i = i;
        }
    }
    let lo = best_i.saturating_sub(1) as f64 / GRID as f64;
    let hi = (best_i + 1).min(GRID) as f64 / GRID as f64;
    for k in 0..=GRID {
        let e = evaluate(at(lo + (hi - lo) * k as f64 / GRID as f64));
        if best.is_none_or(|(_, _, l)| e.2 < l) {
            best = Some(e);
        }
    }
    best.map(|(eta, c, loss)| GroupFit {
        factor: Factor {
            efficiency: eta,
            overhead_ms: c * 1e3,
        },
        overhead_fitted: fit_c,
        loss,
    })
}

/// The weighted median of `(value, weight)` pairs: the first value, in
/// order, at which half the weight is reached (sorts them; empty → 0).
pub(crate) fn weighted_median(v: &mut [(f64, f64)]) -> f64 {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|x| x.1).sum();
    let mut acc = 0.0;
    for &(value, w) in v.iter() {
        acc += w;
        if acc >= total / 2.0 {
            return value;
        }
    }
    v.last().map_or(0.0, |x| x.0)
}

/// A fit on `n` rows blended with the factor its level would fall back to
/// without it: weight `n / (n + SHRINK_ROWS)` on the fit (geometric for the
/// efficiency, linear for the overhead). Few rows move a group a little,
/// many rows a lot; one source's odd runs cannot swing a small group.
fn shrink(fit: Factor, toward: Option<Factor>, n: usize) -> Factor {
    let Some(t) = toward else { return fit };
    let w = n as f64 / (n as f64 + SHRINK_ROWS);
    Factor {
        efficiency: (w * fit.efficiency.ln() + (1.0 - w) * t.efficiency.ln()).exp(),
        overhead_ms: w * fit.overhead_ms + (1.0 - w) * t.overhead_ms,
    }
}

/// What a level falls back to when it has no entry of its own.
fn fallback(table: &EfficiencyTable, class: &str, engine: &str, phase: Phase) -> Option<Factor> {
    let entry = |c: &str, e: &str| {
        table
            .entries
            .iter()
            .find(|x| x.class == c && x.engine == e && x.phase == phase)
            .map(|x| Factor {
                efficiency: x.efficiency,
                overhead_ms: x.overhead_ms,
            })
    };
    match (class, engine) {
        ("*", "*") => None,
        ("*", _) => entry("*", "*"),
        (c, "*") => HardwareClass::parse(c).ok().map(|k| prior(k, phase)),
        (c, e) => {
            let (k, en) = (HardwareClass::parse(c).ok()?, Engine::parse(e).ok()?);
            let mut without = table.clone();
            without
                .entries
                .retain(|x| !(x.class == c && x.engine == e && x.phase == phase));
            Some(without.lookup(k, en, phase).factor)
        }
    }
}

fn upsert(table: &mut EfficiencyTable, e: Entry) {
    match table
        .entries
        .iter_mut()
        .find(|x| x.class == e.class && x.engine == e.engine && x.phase == e.phase)
    {
        Some(slot) => *slot = e,
        None => table.entries.push(e),
    }
}

/// Fits an efficiency table to `rows` (serving rows are ignored).
pub fn fit(rows: &[Measurement], cat: Catalogues) -> Result<EfficiencyTable, PlannerError> {
    let usable: Vec<&Measurement> = rows.iter().filter(|r| r.metric.phase().is_some()).collect();
    // Resolve classes once; unknown names are errors, not silently dropped.
    let mut keyed = Vec::with_capacity(usable.len());
    for r in &usable {
        let s = r.scenario(cat)?;
        keyed.push((
            s.factor_class().as_str().to_string(),
            r.engine.family().as_str().to_string(),
            *r,
        ));
    }
    let mut groups: BTreeSet<(String, String)> = BTreeSet::new();
    for (c, e, _) in &keyed {
        groups.insert((c.clone(), e.clone()));
    }
    // Coarse to fine, so children can inherit a fitted overhead.
    let mut levels: Vec<(String, String)> = vec![("*".into(), "*".into())];
    levels.extend(
        groups
            .iter()
            .map(|(c, _)| (c.clone(), "*".to_string()))
            .collect::<BTreeSet<_>>(),
    );
    levels.extend(
        groups
            .iter()
            .map(|(_, e)| ("*".to_string(), e.clone()))
            .collect::<BTreeSet<_>>(),
    );
    levels.extend(groups.iter().cloned());

    let mut table = EfficiencyTable::priors_only();
    for _pass in 0..2 {
        for phase in [Phase::Decode, Phase::Prefill] {
            for (lc, le) in &levels {
                let members: Vec<&Measurement> = keyed
                    .iter()
                    .filter(|(c, e, r)| {
                        r.metric.phase() == Some(phase)
                            && (lc == "*" || lc == c)
                            && (le == "*" || le == e)
                            && borrowable(lc, le, e)
                    })
                    .map(|(_, _, r)| *r)
                    .collect();
                if members.is_empty() || !pools_enough(lc, le, &keyed, phase) {
                    continue;
                }
                let est = Estimator::new(table.clone());
                let mut points = Vec::with_capacity(members.len());
                for r in &members {
                    points.push(point(r, phase, &est, cat)?);
                }
                let inherited = parent_overhead(&table, lc, le, phase, &members, cat)?;
                if let Some(mut g) = fit_group(&points, inherited) {
                    g.factor = shrink(g.factor, fallback(&table, lc, le, phase), members.len());
                    upsert(
                        &mut table,
                        Entry {
                            class: lc.clone(),
                            engine: le.clone(),
                            phase,
                            efficiency: round(g.factor.efficiency, 4),
                            overhead_ms: round(g.factor.overhead_ms, 3),
                            rows: members.len(),
                            overhead_fitted: g.overhead_fitted,
                        },
                    );
                }
            }
        }
    }
    Ok(table)
}

/// Whether rows of engine family `family` enter level `(class, engine)`.
/// A class's pooled level (`(class, *)`) is what an engine without rows of
/// its own on that class borrows ([`EfficiencyTable::lookup`]); llama.cpp
/// has rows, and so a fit of its own, on every class it runs on, so its rows
/// there would only lend other engines the efficiency of ggml's kernels:
/// quantised weights dequantised before each GEMM, FP16 accumulation,
/// unfused normalisation and attention. They stay out of it.
fn borrowable(class: &str, engine: &str, family: &str) -> bool {
    !(class != "*" && engine == "*" && family == Engine::LlamaCpp.as_str())
}

/// A pooled level stands for "this class, any engine" (or "this engine, any
/// class") only if it pools at least two engines (classes) in this phase;
/// otherwise it is one engine's fit under another name, and a different
/// engine is better served by the documented prior than by borrowing it.
fn pools_enough(
    class: &str,
    engine: &str,
    keyed: &[(String, String, &Measurement)],
    phase: Phase,
) -> bool {
    let in_phase = keyed
        .iter()
        .filter(|(_, e, r)| r.metric.phase() == Some(phase) && borrowable(class, engine, e));
    match (class, engine) {
        ("*", "*") => true,
        (c, "*") => {
            let engines: BTreeSet<&str> = in_phase
                .filter(|(k, _, _)| k == c)
                .map(|(_, e, _)| e.as_str())
                .collect();
            engines.len() >= 2
        }
        ("*", e) => {
            let classes: BTreeSet<&str> = in_phase
                .filter(|(_, k, _)| k == e)
                .map(|(c, _, _)| c.as_str())
                .collect();
            classes.len() >= 2
        }
        _ => true,
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (v * k).round() / k
}

/// Overhead (seconds) a group inherits when it cannot fit its own.
fn parent_overhead(
    table: &EfficiencyTable,
    class: &str,
    engine: &str,
    phase: Phase,
    members: &[&Measurement],
    cat: Catalogues,
) -> Result<f64, PlannerError> {
    let find = |c: &str, e: &str| {
        table
            .entries
            .iter()
            .find(|x| x.class == c && x.engine == e && x.phase == phase)
            .map(|x| x.overhead_ms / 1e3)
    };
    let parent = match (class, engine) {
        ("*", "*") => None,
        (c, e) if c != "*" && e != "*" => find(c, "*").or_else(|| find("*", "*")),
        _ => find("*", "*"),
    };
    // A pooled overhead is other engines' host cost: an engine that replays
    // decode steps as CUDA graphs inherits at most its own prior, as
    // `EfficiencyTable::lookup` gives it with no entry of its own.
    let cap_s = match (Engine::parse(engine), class) {
        (Ok(e), "*") => e.step_overhead_cap_ms(None, phase),
        (Ok(e), c) => HardwareClass::parse(c)
            .ok()
            .and_then(|k| e.step_overhead_cap_ms(Some(k), phase)),
        (Err(_), _) => None,
    }
    .map(|ms| ms / 1e3);
    if let Some(p) = parent {
        return Ok(cap_s.map_or(p, |cap| p.min(cap)));
    }
    // Top level with too little data: the documented prior of the first row's class.
    let first = members.first().map(|r| r.scenario(cat)).transpose()?;
    Ok(first.map_or(0.003, |s| {
        EfficiencyTable::priors_only()
            .lookup(s.factor_class(), s.engine, phase)
            .factor
            .overhead_ms
            / 1e3
    }))
}

fn point(
    r: &Measurement,
    phase: Phase,
    est: &Estimator,
    cat: Catalogues,
) -> Result<Point, PlannerError> {
    let s = r.scenario(cat)?;
    let (pf, df) = est.factors_for(&s);
    let prompt = r.prompt_tokens as f64;
    Ok(match phase {
        Phase::Decode => {
            let t = decode_terms(&s, f64::from(r.batch), r.decode_ctx());
            Point {
                x: t.memory_s,
                y: t.compute_s / pf.factor.efficiency,
                comm: t.comm_s + f64::from(r.batch) * est.per_seq_overhead_s(&s),
                t: 1.0 / r.value,
            }
        }
        Phase::Prefill => {
            let t = prefill_terms(&s, prompt.max(1.0), 1.0);
            Point {
                x: t.compute_s,
                y: t.memory_s / df.factor.efficiency,
                comm: t.comm_s + r.server_path_s(est, &s),
                t: r.measured_time_s(),
            }
        }
    })
}

/// One run of the calibration benchmark on the target (`glassbox bench
/// llm`): one request alone, its token counts and timings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRun {
    /// `seed001-200` (a short prompt, 200 tokens out) or `seed000-512x256`.
    pub name: String,
    pub prompt_tokens: u64,
    pub gen_tokens: u64,
    /// Submission to first token, ms.
    pub ttft_ms: f64,
    /// Prompt processing alone, ms, when the engine reports it.
    pub prefill_ms: Option<f64>,
    /// Mean time between output tokens after the first, ms.
    pub tpot_ms: Option<f64>,
}

/// What a benchmark ran on, in the planner's names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchTarget {
    /// Device id in the hardware catalogue (or a `--hardware-file`).
    pub gpu: String,
    pub engine: String,
    /// Model id in the planner's catalogue.
    pub model: String,
    pub quant: String,
    pub kv_dtype: String,
    /// Where the rows came from (command, date, model version).
    pub source: String,
}

fn csv_field(v: &str) -> String {
    if v.contains([',', '"']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// The runs as a measurements CSV (the format of `data/measurements.csv`,
/// read by `glassbox plan calibrate`): per run a `decode_tok_s` row (from
/// TPOT), a `prefill_tok_s` row (from the prefill time, else TTFT) and a
/// `ttft_ms` row. The decode row keeps the prompt, so the fit reads the
/// KV the steps really attended to. Runs with no output tokens give no
/// decode row.
pub fn bench_csv(target: &BenchTarget, runs: &[BenchRun]) -> String {
    let mut out = String::from(
        "id,metric,value,gpu,tp,engine,model,quant,kv_dtype,batch,prompt_tokens,gen_tokens,source,notes\n",
    );
    let mut row = |id: &str, metric: &str, value: f64, prompt: u64, gen_tokens: u64| {
        out.push_str(&format!(
            "{},{metric},{value:.4},{},1,{},{},{},{},1,{prompt},{gen_tokens},{},measured by glassbox bench llm\n",
            csv_field(id),
            csv_field(&target.gpu),
            csv_field(&target.engine),
            csv_field(&target.model),
            csv_field(&target.quant),
            csv_field(&target.kv_dtype),
            csv_field(&target.source),
        ));
    };
    for r in runs {
        if let Some(tpot) = r.tpot_ms.filter(|t| *t > 0.0)
            && r.gen_tokens > 1
        {
            row(
                &format!("{}-tg", r.name),
                "decode_tok_s",
                1e3 / tpot,
                r.prompt_tokens,
                r.gen_tokens,
            );
        }
        let prefill_ms = r.prefill_ms.unwrap_or(r.ttft_ms);
        if prefill_ms > 0.0 && r.prompt_tokens > 0 {
            row(
                &format!("{}-pp", r.name),
                "prefill_tok_s",
                r.prompt_tokens as f64 / (prefill_ms / 1e3),
                r.prompt_tokens,
                0,
            );
            row(
                &format!("{}-ttft", r.name),
                "ttft_ms",
                r.ttft_ms,
                r.prompt_tokens,
                1,
            );
        }
    }
    out
}

#[cfg(test)]
#[path = "calibrate_tests.rs"]
mod tests;
