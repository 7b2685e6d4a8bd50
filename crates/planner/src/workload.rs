//! Workload sizing (seed 001): traffic + SLA → devices, utilisation, cost.
//!
//! For each batch size the replica could run, the SLA is checked
//! (TTFT under load = prefill + one decode step; TPOT; end-to-end), and the
//! batch with the highest request rate that meets it is chosen. A replica
//! completes `b` requests in `b·prefill + out·step(b)` (prefills are
//! serialised, decode steps shared), so its rate is
//! `b / (b·prefill + out·step(b))`. Devices = replicas × tp × pp, with replicas
//! sized for the peak rate (and peak concurrency, if given) at
//! `1 − headroom` load. Seed 000's concurrency formula and seed 001's FLOPs
//! count are reported beside the result for comparison, and a mixed
//! online/offline pool is sized with seed 003's simultaneous-use coefficient.

use serde::Serialize;

use crate::defaults;
use crate::error::PlannerError;
use crate::estimate::{Estimator, Scenario};
use crate::explain::{Line, num};
use crate::hardware::Hardware;

const SECONDS_PER_DAY: f64 = 86_400.0;
/// Largest batch searched: beyond this the step time is compute-bound anyway.
const MAX_BATCH: u64 = 4096;

/// Latency targets (P99, milliseconds); `None` = no target.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sla {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

/// How devices are paid for.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Pricing {
    /// Per device per hour; overrides the catalogue's figure.
    pub hourly_usd: Option<f64>,
    /// Purchase price per device; used (amortised) when no hourly price.
    pub purchase_usd: Option<f64>,
    pub amortize_years: f64,
    pub usd_per_kwh: f64,
}

impl Default for Pricing {
    fn default() -> Self {
        Self {
            hourly_usd: None,
            purchase_usd: None,
            amortize_years: defaults::AMORTIZE_YEARS,
            usd_per_kwh: defaults::USD_PER_KWH,
        }
    }
}

/// Daily traffic, per seed 001.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Workload {
    pub requests_per_day: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Peak request rate ÷ average request rate.
    pub peak_factor: f64,
    /// Concurrent requests at peak, if known (overrides nothing; both must hold).
    pub peak_concurrency: Option<u64>,
    pub sla: Sla,
    /// Fraction of capacity kept free at peak (seed 001: ≥ 30%).
    pub headroom: f64,
    /// Offline (batch) tokens per day sharing the pool, seed 003.
    pub offline_tokens_per_day: f64,
    /// Fraction of a shared pool's capacity usable when online and offline
    /// work are mixed with priority preemption (seed 003: ~0.6).
    pub simultaneous_use: f64,
    pub pricing: Pricing,
    /// Utilisation assumed by seed 000's formula.
    pub seed000_utilisation: f64,
    /// Fewest replicas to size (data-parallel replicas the user fixed).
    pub min_replicas: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            requests_per_day: defaults::REQUESTS_PER_DAY,
            input_tokens: defaults::PROMPT_TOKENS,
            output_tokens: defaults::GEN_TOKENS,
            peak_factor: defaults::PEAK_FACTOR,
            peak_concurrency: None,
            sla: Sla::default(),
            headroom: defaults::HEADROOM,
            offline_tokens_per_day: defaults::OFFLINE_TOKENS_PER_DAY,
            simultaneous_use: defaults::SIMULTANEOUS_USE,
            pricing: Pricing::default(),
            seed000_utilisation: defaults::SEED000_UTILISATION,
            min_replicas: 1,
        }
    }
}

/// A mixed online/offline pool against separate pools.
#[derive(Debug, Clone, Serialize)]
pub struct MixedPool {
    pub offline_tokens_per_day: f64,
    pub separate_gpus: u64,
    pub separate_utilisation: f64,
    pub mixed_gpus: u64,
    pub mixed_utilisation: f64,
    pub simultaneous_use: f64,
}

/// The sizing result.
#[derive(Debug, Clone, Serialize)]
pub struct Sizing {
    pub gpu: String,
    pub meets_sla: bool,
    pub batch: u64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub e2e_ms: f64,
    pub requests_per_s_per_replica: f64,
    pub replicas: u64,
    pub gpus_needed: u64,
    pub utilisation: f64,
    pub tokens_per_day: f64,
    pub tokens_per_day_per_gpu: f64,
    pub capacity_tokens_per_day_per_gpu: f64,
    pub hourly_usd_per_gpu: f64,
    pub price_basis: String,
    pub cost_per_day_usd: f64,
    pub cost_per_1m_tokens: f64,
    pub cost_per_1m_output_tokens: f64,
    /// What limits the chosen batch: `memory`, `sla`, `compute` or `bandwidth`.
    pub binding_constraint: String,
    pub seed001_flops_per_day: f64,
    pub seed001_gpus_by_flops: f64,
    pub seed000_concurrency_per_gpu: f64,
    pub mixed_pool: Option<MixedPool>,
    pub explain: Vec<Line>,
}

/// More requests a day than any service serves (11.6 million a second):
/// past it a plan's GPU count stops being a number anyone can buy.
const MAX_REQUESTS_PER_DAY: f64 = 1e12;

/// Checks the traffic, prices and SLA a person gave.
pub(crate) fn validate(w: &Workload) -> Result<(), PlannerError> {
    let bad = |f: &str, m: String| Err(PlannerError::invalid(f, m));
    if !(w.requests_per_day.is_finite()
        && w.requests_per_day > 0.0
        && w.requests_per_day <= MAX_REQUESTS_PER_DAY)
    {
        return bad(
            "requests per day",
            format!(
                "must be above 0 and at most {MAX_REQUESTS_PER_DAY:e}, got {}",
                w.requests_per_day
            ),
        );
    }
    for (name, v) in [
        ("sla ttft", w.sla.ttft_ms),
        ("sla tpot", w.sla.tpot_ms),
        ("sla e2e", w.sla.e2e_ms),
    ] {
        if let Some(ms) = v.filter(|ms| !(ms.is_finite() && *ms > 0.0)) {
            return bad(name, format!("must be milliseconds above 0, got {ms}"));
        }
    }
    if w.input_tokens == 0 {
        return bad("input tokens", "must be >= 1 (`--prompt-tokens`)".into());
    }
    if !(w.peak_factor >= 1.0 && w.peak_factor.is_finite()) {
        return bad(
            "peak factor",
            format!("must be >= 1, got {}", w.peak_factor),
        );
    }
    if !(0.0..0.95).contains(&w.headroom) {
        return bad(
            "headroom",
            format!("must be in [0, 0.95), got {}", w.headroom),
        );
    }
    if !(w.simultaneous_use > 0.0 && w.simultaneous_use <= 1.0) {
        return bad(
            "simultaneous-use",
            format!("must be in (0, 1], got {}", w.simultaneous_use),
        );
    }
    if !(w.pricing.amortize_years.is_finite() && w.pricing.amortize_years > 0.0) {
        return bad(
            "amortize years",
            format!("must be > 0, got {}", w.pricing.amortize_years),
        );
    }
    // Prices and volumes: a finite amount, 0 allowed (hardware already paid
    // for, power at no charge, no offline work).
    let p = &w.pricing;
    for (name, v) in [
        ("price per hour", p.hourly_usd),
        ("purchase price", p.purchase_usd),
        ("usd per kwh", Some(p.usd_per_kwh)),
        ("offline tokens per day", Some(w.offline_tokens_per_day)),
    ] {
        if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
            return bad(
                name,
                format!("must be a finite amount of 0 or more, got {v}"),
            );
        }
    }
    if w.peak_concurrency == Some(0) {
        return bad(
            "peak concurrency",
            "must be 1 or more requests; leave `--peak-concurrency` out when it is not known"
                .into(),
        );
    }
    Ok(())
}

struct Point {
    batch: u64,
    ttft: f64,
    tpot: f64,
    e2e: f64,
    rps: f64,
    compute_bound: bool,
}

fn evaluate(est: &Estimator, s: &Scenario, w: &Workload, b: u64) -> Point {
    let prompt = w.input_tokens as f64;
    let out = w.output_tokens as f64;
    let prefill = est.prefill_pass_s(s, prompt);
    let ctx = prompt + out / 2.0;
    let tpot = est.tpot_s(s, b as f64, ctx);
    let ttft = prefill + tpot + est.server_path_s(s, prompt);
    let terms = crate::estimate::decode_terms(s, b as f64, ctx);
    let (pf, df) = est.factors_for(s);
    Point {
        batch: b,
        ttft,
        tpot,
        e2e: ttft + out * tpot,
        rps: b as f64 / (b as f64 * prefill + out.max(1.0) * tpot),
        compute_bound: terms.compute_s / pf.factor.efficiency
            > terms.memory_s / df.factor.efficiency,
    }
}

fn meets(p: &Point, sla: &Sla) -> bool {
    sla.ttft_ms.is_none_or(|t| p.ttft * 1e3 <= t)
        && sla.tpot_ms.is_none_or(|t| p.tpot * 1e3 <= t)
        && sla.e2e_ms.is_none_or(|t| p.e2e * 1e3 <= t)
}

/// Hourly cost per device and how it was derived.
pub fn hourly(s: &Scenario, p: &Pricing) -> Result<(f64, String), PlannerError> {
    device_hourly(s.hw, p)
}

/// Hourly cost of one `hw` device under `p`, and how it was derived.
pub fn device_hourly(hw: &Hardware, p: &Pricing) -> Result<(f64, String), PlannerError> {
    if let Some(h) = p.hourly_usd {
        return Ok((h, format!("given ${}/h", num(h))));
    }
    let power = hw.tdp_w / 1000.0 * p.usd_per_kwh;
    if let Some(buy) = p.purchase_usd {
        let h = buy / (p.amortize_years * 8760.0) + power;
        return Ok((
            h,
            format!(
                "${} / ({} y × 8760 h) + {} W × ${}/kWh",
                num(buy),
                num(p.amortize_years),
                num(hw.tdp_w),
                num(p.usd_per_kwh)
            ),
        ));
    }
    if let Some(h) = hw.hourly_usd {
        return Ok((h, format!("catalogue cloud price ${}/h", num(h))));
    }
    if let Some(buy) = hw.purchase_usd {
        let h = buy / (p.amortize_years * 8760.0) + power;
        return Ok((
            h,
            format!(
                "catalogue ${} / ({} y × 8760 h) + {} W × ${}/kWh",
                num(buy),
                num(p.amortize_years),
                num(hw.tdp_w),
                num(p.usd_per_kwh)
            ),
        ));
    }
    Err(PlannerError::invalid(
        "price",
        format!(
            "`{}` has no price in the catalogue; pass --price-per-hour or --purchase-price",
            hw.id
        ),
    ))
}

/// Sizes a deployment of scenario `s` for workload `w`.
pub fn size(est: &Estimator, s: &Scenario, w: &Workload) -> Result<Sizing, PlannerError> {
    s.validate()?;
    validate(w)?;
    let mem_cap = est.max_concurrent(s).min(MAX_BATCH);
    if mem_cap == 0 {
        return Err(PlannerError::DoesNotFit {
            message: format!(
                "{} GB of weights and one {}-token sequence do not fit in {} × {} GiB with {}% headroom",
                num(s.weight_bytes() / 1e9),
                s.context,
                s.tp,
                num(s.hw.memory_gb),
                num(s.memory_headroom * 100.0)
            ),
        });
    }
    // Batches 1..=64 one by one, then geometric steps: smooth enough and cheap.
    let mut candidates: Vec<u64> = (1..=mem_cap.min(64)).collect();
    let mut b = 64u64;
    while b < mem_cap {
        b = (b * 9 / 8).min(mem_cap);
        candidates.push(b);
    }
    let mut best: Option<Point> = None;
    let mut sla_cut = false;
    for &b in &candidates {
        let p = evaluate(est, s, w, b);
        if !meets(&p, &w.sla) {
            sla_cut = true;
            break;
        }
        if best.as_ref().is_none_or(|q| p.rps > q.rps) {
            best = Some(p);
        }
    }
    let meets_sla = best.is_some();
    let chosen = match best {
        Some(p) => p,
        None => evaluate(est, s, w, 1),
    };
    let binding = if !meets_sla || sla_cut {
        "sla"
    } else if chosen.batch >= mem_cap {
        "memory"
    } else if chosen.compute_bound {
        "compute"
    } else {
        "bandwidth"
    };

    let tokens_per_req = (w.input_tokens + w.output_tokens) as f64;
    let avg_rps = w.requests_per_day / SECONDS_PER_DAY;
    let peak_rps = avg_rps * w.peak_factor;
    let usable = 1.0 - w.headroom;
    let by_rate = (peak_rps / (chosen.rps * usable)).ceil().max(1.0);
    let by_conc = w.peak_concurrency.map_or(1.0, |c| {
        (c as f64 / (chosen.batch as f64 * usable)).ceil().max(1.0)
    });
    let replicas = (by_rate.max(by_conc) as u64).max(w.min_replicas.max(1));
    // GPUs one replica holds: tensor × pipeline stages.
    let tp = u64::from(s.tp) * u64::from(s.pp.max(1));
    let gpus = replicas * tp;
    let utilisation = avg_rps / (replicas as f64 * chosen.rps);
    let tokens_per_day = w.requests_per_day * tokens_per_req;
    let capacity_per_gpu = chosen.rps * SECONDS_PER_DAY * tokens_per_req / tp as f64;
    let (hour, basis) = hourly(s, &w.pricing)?;
    let cost_day = gpus as f64 * hour * 24.0;
    let out_per_day = w.requests_per_day * w.output_tokens as f64;

    // Seed 001: FLOPs from output tokens; cards at 40% of the datasheet peak.
    let params = s.model.active_params_b() * 1e9;
    let flops_day = 2.0 * params * w.requests_per_day * w.output_tokens as f64;
    let peak = s.hw.datasheet_tflops(s.weight_compute()) * 1e12;
    let gpus_by_flops = flops_day / (peak * 0.4 * SECONDS_PER_DAY);
    // Seed 000: (effective TOPS × utilisation) / (params × gen × 2 / latency).
    let latency_s = w.sla.e2e_ms.map_or(3.0, |ms| ms / 1e3);
    let need = params * w.output_tokens as f64 * 2.0 / latency_s;
    let seed000 = s.hw.best_tops() * 1e12 * w.seed000_utilisation / need.max(1.0);

    let mixed_pool = (w.offline_tokens_per_day > 0.0).then(|| {
        // Offline work runs at the largest batch memory allows, no SLA.
        let off = evaluate(est, s, w, mem_cap);
        let off_cap_per_gpu = off.rps * SECONDS_PER_DAY * tokens_per_req / tp as f64;
        let online_load = tokens_per_day / capacity_per_gpu;
        let offline_load = w.offline_tokens_per_day / off_cap_per_gpu;
        let offline_gpus = ((offline_load / usable).ceil() as u64).div_ceil(tp) * tp;
        let separate = gpus + offline_gpus;
        let mixed_needed = ((online_load + offline_load) / w.simultaneous_use).ceil() as u64;
        let mixed = mixed_needed.div_ceil(tp).max(replicas) * tp;
        MixedPool {
            offline_tokens_per_day: w.offline_tokens_per_day,
            separate_gpus: separate,
            separate_utilisation: (online_load + offline_load) / separate as f64,
            mixed_gpus: mixed,
            mixed_utilisation: (online_load + offline_load) / mixed as f64,
            simultaneous_use: w.simultaneous_use,
        }
    });

    let explain = vec![
        Line::new(
            "tokens_per_day",
            tokens_per_day,
            "tok",
            "requests/day × (in + out)",
            format!(
                "{} × ({} + {})",
                num(w.requests_per_day),
                w.input_tokens,
                w.output_tokens
            ),
        ),
        Line::new(
            "peak_rps",
            peak_rps,
            "req/s",
            "requests/day / 86400 × peak_factor",
            format!(
                "{} / 86400 × {}",
                num(w.requests_per_day),
                num(w.peak_factor)
            ),
        ),
        Line::new(
            "replica_rps",
            chosen.rps,
            "req/s",
            "b / (b × prefill + out × tpot(b))",
            format!(
                "b = {} (best batch meeting the SLA), tpot = {} ms",
                chosen.batch,
                num(chosen.tpot * 1e3)
            ),
        ),
        Line::new(
            "gpus_needed",
            gpus as f64,
            "gpus",
            "max(ceil(peak_rps / (replica_rps × (1 − headroom))), ceil(peak_conc / (b × (1 − headroom))), dp) × tp × pp",
            format!(
                "peak {} req/s, replica {} req/s, headroom {}, dp {}, tp {}, pp {}",
                num(peak_rps),
                num(chosen.rps),
                num(w.headroom),
                w.min_replicas.max(1),
                s.tp,
                s.pp
            ),
        ),
        Line::new(
            "utilisation",
            utilisation,
            "",
            "avg_rps / (replicas × replica_rps)",
            format!("{} / ({} × {})", num(avg_rps), replicas, num(chosen.rps)),
        ),
        Line::new(
            "cost_per_1m_tokens",
            cost_day / (tokens_per_day / 1e6),
            "USD",
            "gpus × hourly × 24 / (tokens/day / 1e6)",
            format!(
                "{} × {} ({basis}) × 24 / {}",
                gpus,
                num(hour),
                num(tokens_per_day / 1e6)
            ),
        ),
        Line::new(
            "seed001_flops_per_day",
            flops_day,
            "FLOP",
            "2 × params × requests/day × out",
            format!(
                "2 × {} × {} × {} → {} GPUs at 40% of {} TFLOPS",
                num(params),
                num(w.requests_per_day),
                w.output_tokens,
                num(gpus_by_flops),
                num(peak / 1e12)
            ),
        ),
        Line::new(
            "seed000_concurrency",
            seed000,
            "req/gpu",
            "effective TOPS × utilisation / (params × gen × 2 / latency)",
            format!(
                "{} T × {} / ({} × {} × 2 / {} s)",
                num(s.hw.best_tops()),
                num(w.seed000_utilisation),
                num(params),
                w.output_tokens,
                num(latency_s)
            ),
        ),
    ];
    Ok(Sizing {
        gpu: s.hw.id.clone(),
        meets_sla,
        batch: chosen.batch,
        ttft_ms: chosen.ttft * 1e3,
        tpot_ms: chosen.tpot * 1e3,
        e2e_ms: chosen.e2e * 1e3,
        requests_per_s_per_replica: chosen.rps,
        replicas,
        gpus_needed: gpus,
        utilisation,
        tokens_per_day,
        tokens_per_day_per_gpu: tokens_per_day / gpus as f64,
        capacity_tokens_per_day_per_gpu: capacity_per_gpu,
        hourly_usd_per_gpu: hour,
        price_basis: basis,
        cost_per_day_usd: cost_day,
        cost_per_1m_tokens: cost_day / (tokens_per_day / 1e6),
        cost_per_1m_output_tokens: cost_day / (out_per_day / 1e6).max(1e-12),
        binding_constraint: binding.to_string(),
        seed001_flops_per_day: flops_day,
        seed001_gpus_by_flops: gpus_by_flops,
        seed000_concurrency_per_gpu: seed000,
        mixed_pool,
        explain,
    })
}
