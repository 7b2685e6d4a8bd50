//! The serving simulator's check against the local engine (`glassbox
//! bench llm --rates`/`--loads`): the engine's step times profiled, the engine loaded
//! open loop at each rate, the same arrivals and token counts replayed in
//! the simulator, measured against simulated P50/P99 TTFT and E2E.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle};
use glassbox_planner::calibrate::BenchRun;
use glassbox_planner::sim::{
    self, Arrivals, Lengths, Limits, Percentiles, ProfiledCost, StepProfile, Traffic,
};
use serde::Serialize;

use crate::BenchError;

/// Context of the local engine for the benchmark.
pub(super) const N_CTX: u32 = 2048;
/// Prompt tokens the local engine evaluates in one batch.
pub(super) const N_BATCH: u32 = 512;

fn invalid(message: String) -> BenchError {
    BenchError::Invalid(message)
}

pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// What the check runs: the open loop's prompt and output lengths, the
/// engine's running sequences, the rates (or loads, fractions of the
/// profiled capacity), requests per rate and the arrivals' seed.
pub(super) struct Check<'a> {
    pub prompt_tokens: u64,
    pub gen_tokens: u32,
    pub max_num_seqs: u32,
    pub rates: &'a [f64],
    pub loads: &'a [f64],
    pub requests: usize,
    pub seed: u64,
}

/// The simulator's check: the engine's profiled steps, its capacity, and
/// measured against simulated at each rate.
#[derive(Debug, Serialize)]
pub struct Validation {
    pub prefill_ms_per_token: f64,
    /// Decode step at batch 1, 2, … at the open loop's context.
    pub decode_step_ms: Vec<f64>,
    /// Requests/s the profile says the engine sustains at --max-num-seqs.
    pub capacity_rps: f64,
    pub checks: Vec<RateCheck>,
}

/// Measured against simulated, at one rate.
#[derive(Debug, Serialize)]
pub struct RateCheck {
    pub rate: f64,
    /// The rate as a fraction of the profiled capacity (`--loads`).
    pub load: Option<f64>,
    pub requests: usize,
    pub measured_ttft_ms: Percentiles,
    pub simulated_ttft_ms: Percentiles,
    pub measured_e2e_ms: Percentiles,
    pub simulated_e2e_ms: Percentiles,
    /// (simulated − measured) / measured, P99 TTFT.
    pub ttft_p99_error: f64,
    pub e2e_p99_error: f64,
}

/// One open-loop request as the local engine timed it.
struct Timed {
    due_s: f64,
    prompt: u64,
    output: u64,
    ttft_ms: f64,
    e2e_ms: f64,
}

fn open_loop(llm: &LlmHandle, msgs: &[ChatMessage], max_tokens: u32, times: &[f64]) -> Vec<Timed> {
    let results = Mutex::new(Vec::with_capacity(times.len()));
    let start = Instant::now();
    std::thread::scope(|s| {
        for &due in times {
            let wait = Duration::from_secs_f64(due).saturating_sub(start.elapsed());
            std::thread::sleep(wait);
            let results = &results;
            let req = GenerateRequest {
                max_tokens,
                temperature: 0.0,
                ..GenerateRequest::chat(msgs.to_vec())
            };
            s.spawn(move || {
                let late_ms = (start.elapsed().as_secs_f64() - due).max(0.0) * 1e3;
                if let Ok(c) = llm.generate_blocking(req)
                    && let Ok(mut r) = results.lock()
                {
                    r.push(Timed {
                        due_s: due,
                        prompt: u64::from(c.usage.prompt_tokens),
                        output: u64::from(c.usage.completion_tokens).max(1),
                        ttft_ms: c.timing.ttft_ms.unwrap_or(c.timing.e2e_ms) + late_ms,
                        e2e_ms: c.timing.e2e_ms + late_ms,
                    });
                }
            });
        }
    });
    let mut v = results.into_inner().unwrap_or_default();
    v.sort_by(|a, b| a.due_s.total_cmp(&b.due_s));
    v
}

/// The simulator's check against the local engine: profile the engine's
/// step times, load it open loop at each rate, replay the same arrivals and
/// token counts in the simulator with the profiled steps, and compare.
pub(super) fn validate(
    a: &Check<'_>,
    llm: &LlmHandle,
    msgs: &[ChatMessage],
    runs: &[BenchRun],
) -> Result<Validation, BenchError> {
    let msgs = msgs.to_vec();
    let seqs = a.max_num_seqs.max(1);
    let (profile, cost) = profile_steps(llm, &msgs, seqs, a.gen_tokens, runs)?;
    let prompt = profile
        .prefill
        .last()
        .map_or(a.prompt_tokens as f64, |p| p.0);
    let capacity = cost.capacity_rps(seqs, prompt, f64::from(a.gen_tokens));
    let rates: Vec<(f64, Option<f64>)> = if a.loads.is_empty() {
        a.rates.iter().map(|&r| (r, None)).collect()
    } else {
        a.loads.iter().map(|&l| (l * capacity, Some(l))).collect()
    };
    // The local engine gives each running sequence a full context of KV.
    let limits = Limits {
        max_running: seqs,
        max_batched_tokens: N_BATCH,
        ..Limits::with_kv_tokens(u64::from(N_CTX) * u64::from(seqs))
    };
    let mut checks = Vec::new();
    for (i, &(rate, load)) in rates.iter().enumerate() {
        let mut rng = fastrand::Rng::with_seed(a.seed.wrapping_add(i as u64));
        let times = Arrivals::Poisson { rate }.times(a.requests, &mut rng);
        let timed = open_loop(llm, &msgs, a.gen_tokens, &times);
        if timed.len() < 10 {
            return Err(invalid(format!(
                "only {} of {} open-loop requests at {rate:.3}/s completed",
                timed.len(),
                a.requests
            )));
        }
        let warm = (timed.len() as f64 * sim::WARMUP_FRACTION).floor() as usize;
        let mut ttft: Vec<f64> = timed[warm..].iter().map(|t| t.ttft_ms).collect();
        let mut e2e: Vec<f64> = timed[warm..].iter().map(|t| t.e2e_ms).collect();
        let traffic = Traffic {
            arrivals: Arrivals::Replay {
                times_s: timed.iter().map(|t| t.due_s).collect(),
                speedup: 1.0,
            },
            prompt: Lengths::Empirical(timed.iter().map(|t| t.prompt.max(1)).collect()),
            output: Lengths::Empirical(timed.iter().map(|t| t.output).collect()),
            profile: sim::Profile::Chat,
            tasks: timed.len(),
            seed: a.seed,
        };
        let r = sim::simulate(&cost, limits, &traffic, 1, sim::SlaP99::default())
            .map_err(|e| invalid(e.to_string()))?;
        let (mt, me) = (Percentiles::of(&mut ttft), Percentiles::of(&mut e2e));
        checks.push(RateCheck {
            rate,
            load,
            requests: timed.len(),
            ttft_p99_error: (r.ttft_ms.p99 - mt.p99) / mt.p99.max(1e-9),
            e2e_p99_error: (r.e2e_ms.p99 - me.p99) / me.p99.max(1e-9),
            measured_ttft_ms: mt,
            simulated_ttft_ms: r.ttft_ms,
            measured_e2e_ms: me,
            simulated_e2e_ms: r.e2e_ms,
        });
    }
    Ok(Validation {
        prefill_ms_per_token: cost.prefill_s(1000.0) - cost.prefill_s(0.0),
        decode_step_ms: (1..=seqs)
            .map(|b| cost.decode_s(b, profile.decode_ctx) * 1e3)
            .collect(),
        capacity_rps: capacity,
        checks,
    })
}

/// Measures what the simulator needs of the engine: decode steps at every
/// batch size up to `seqs` (that many identical greedy requests at once, so
/// the batch stays whole; the median gap between streamed tokens is the
/// step),
/// and prompt passes at the calibration runs' lengths and the open loop's.
fn profile_steps(
    llm: &LlmHandle,
    msgs: &[ChatMessage],
    seqs: u32,
    gen_tokens: u32,
    runs: &[BenchRun],
) -> Result<(StepProfile, ProfiledCost), BenchError> {
    let mut p = StepProfile::default();
    for r in runs {
        if let Some(ms) = r.prefill_ms.filter(|ms| *ms > 0.0) {
            p.prefill.push((r.prompt_tokens as f64, ms / 1e3));
        }
        if let Some(tpot) = r.tpot_ms.filter(|t| *t > 0.0) {
            let ctx = r.prompt_tokens as f64 + r.gen_tokens as f64 / 2.0;
            p.single_stream.push((ctx, tpot / 1e3));
        }
    }
    // Long enough that the requests decode together for most of their
    // tokens even when their prompt passes, one after another on a slow
    // CPU, take longer than a short generation.
    let out_tokens = gen_tokens.max(64);
    for batch in 1..=seqs {
        let done: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..batch)
                .map(|_| {
                    s.spawn(|| {
                        let mut stream = llm.stream(GenerateRequest {
                            max_tokens: out_tokens,
                            temperature: 0.0,
                            ..GenerateRequest::chat(msgs.to_vec())
                        })?;
                        let mut arrivals = Vec::new();
                        while stream.next_blocking().is_some() {
                            arrivals.push(Instant::now());
                        }
                        stream.finish_blocking().map(|c| (c, arrivals))
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        // The step is the median gap between a request's tokens: a gap in
        // which another request's prompt pass ran is a prefill step, which
        // the simulator counts on its own, so a mean per-token time would
        // count it twice.
        let mut gaps = Vec::new();
        for c in done {
            let (c, arrivals) = c?;
            if batch == 1 {
                let prompt = f64::from(c.usage.prompt_tokens);
                p.prefill.push((prompt, c.prompt_ms / 1e3));
                p.decode_ctx = prompt + f64::from(c.usage.completion_tokens) / 2.0;
            }
            gaps.extend(
                arrivals
                    .windows(2)
                    .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3),
            );
        }
        if let Some(t) = median(gaps) {
            p.decode.push((batch, t / 1e3));
        }
    }
    let cost = ProfiledCost::fit(&p).map_err(|e| invalid(e.to_string()))?;
    Ok((p, cost))
}
