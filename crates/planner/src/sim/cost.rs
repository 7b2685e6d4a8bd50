//! What one engine step costs: the simulator's only view of the hardware.
//!
//! The simulator asks a [`StepCost`] for the duration of each step it
//! schedules. [`EstimatorCost`] answers from the planner's per-step model
//! ([`Estimator::tpot_s`] for a decode step at a batch and context,
//! [`Estimator::prefill_pass_s`] for a prefill pass), so improvements to that model
//! reach the simulator without a second copy of its formulas. A step that
//! mixes decode and a prefill chunk (chunked prefill) costs the decode step
//! plus the prefill chunk's *extra* time: the chunk's pass minus a one-token
//! decode step, which is the weight read and fixed overhead both already pay.

use serde::Serialize;

use crate::estimate::{Estimator, Scenario};

/// What one engine step computes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Step {
    /// Sequences generating one token each.
    pub decode_seqs: u32,
    /// Mean context (tokens in the KV cache) of those sequences.
    pub decode_ctx: f64,
    /// Prompt tokens computed in this step (all chunks together).
    pub prefill_tokens: u64,
    /// Sequences those prompt tokens belong to.
    pub prefill_seqs: u32,
}

/// Duration of one engine step, seconds (positive and finite).
pub trait StepCost {
    fn step_s(&self, step: &Step) -> f64;

    /// Seconds each request spends in the server outside the engine's steps
    /// (HTTP, prompt rendering and tokenising, hand-off to the engine loop,
    /// detokenising and streaming the first token back): added to every
    /// call's TTFT and E2E, occupying no step. 0 unless the cost knows it.
    fn request_overhead_s(&self) -> f64 {
        0.0
    }

    /// Seconds each request holds the server's front end where that is one
    /// process per replica (parsing, tokenising, streaming the tokens back):
    /// a replica takes in at most `1 / frontend_s` requests per second.
    /// 0 (the default): no front-end limit.
    fn frontend_s(&self) -> f64 {
        0.0
    }

    /// The engine forms step *k + 1*'s batch when step *k* starts (overlap
    /// scheduling), so a request queued during step *k* waits for *k + 2*.
    /// `false` (the default): each batch is formed when the step before it
    /// ends.
    fn overlap_schedule(&self) -> bool {
        false
    }
}

/// [`StepCost`] from the planner's estimator for one scenario (model,
/// device, format, engine, tensor parallelism).
#[derive(Debug, Clone)]
pub struct EstimatorCost<'a> {
    est: &'a Estimator,
    scenario: Scenario<'a>,
}

impl<'a> EstimatorCost<'a> {
    pub fn new(est: &'a Estimator, scenario: Scenario<'a>) -> Self {
        Self { est, scenario }
    }

    /// KV-cache capacity of one replica in tokens (after weights and the
    /// memory headroom), 0 when the model does not fit. With windowed layers
    /// a token costs what it costs in a sequence of the scenario's context
    /// ([`Scenario::kv_bytes_per_seq`] / context).
    pub fn kv_tokens(&self) -> u64 {
        let ctx = self.scenario.context.max(1) as f64;
        let per_token = self.scenario.kv_bytes_per_seq(ctx) / ctx;
        let cap = self.est.kv_capacity_bytes(&self.scenario);
        if per_token <= 0.0 || cap <= 0.0 {
            0
        } else {
            (cap / per_token).floor() as u64
        }
    }

    pub fn scenario(&self) -> &Scenario<'a> {
        &self.scenario
    }
}

impl StepCost for EstimatorCost<'_> {
    fn step_s(&self, step: &Step) -> f64 {
        let s = &self.scenario;
        let decode = (step.decode_seqs > 0).then(|| {
            self.est
                .tpot_s(s, f64::from(step.decode_seqs), step.decode_ctx.max(1.0))
        });
        let prefill = (step.prefill_tokens > 0)
            .then(|| self.est.prefill_pass_s(s, step.prefill_tokens as f64));
        match (decode, prefill) {
            (Some(d), None) => d,
            (None, Some(p)) => p,
            (Some(d), Some(p)) => d + (p - self.est.tpot_s(s, 1.0, 1.0)).max(0.0),
            (None, None) => 0.0,
        }
    }

    /// The engine's per-request server latency
    /// ([`crate::efficiency::EngineProfile::request_overhead_ms`]); none for
    /// the constant-efficiency baseline, which models the engine step only.
    fn request_overhead_s(&self) -> f64 {
        if self.est.factors.is_baseline() {
            return 0.0;
        }
        let s = &self.scenario;
        s.engine.profile(s.hw).request_overhead_ms / 1e3
    }

    /// The engine's front-end time per request
    /// ([`crate::efficiency::EngineProfile::frontend_ms_per_request`]), the
    /// same limit [`crate::batching::frontend_req_s`] puts on the analytic
    /// throughput; none for the baseline.
    fn frontend_s(&self) -> f64 {
        1.0 / crate::batching::frontend_req_s(self.est, &self.scenario)
    }

    /// The engine's overlap scheduling
    /// ([`crate::efficiency::EngineProfile::overlap_schedule`]); none for the
    /// baseline.
    fn overlap_schedule(&self) -> bool {
        let s = &self.scenario;
        !self.est.factors.is_baseline() && s.engine.profile(s.hw).overlap_schedule
    }
}

/// [`StepCost`] from step times measured on the target engine itself
/// (`glassbox bench llm --local` profiles them before its open-loop check):
/// the way to simulate hardware that is at hand, where the roofline's
/// efficiencies would be a guess (a 2-core VM is nothing like the
/// catalogue's CPU socket). Like profiling-based simulators, it replays
/// what the engine did rather than deriving it:
///
/// - prefill: `fixed + per_token × tokens`, least squares over measured
///   prompt passes;
/// - decode: the measured step time at each batch size (linear between
///   them, the last slope beyond), plus `ctx_slope × batch × (ctx − ctx_ref)`
///   for contexts other than the profiled one, the slope from single-stream
///   runs at two contexts;
/// - a step that decodes and also evaluates prompts pays both (the local
///   engine makes two calls).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfiledCost {
    prefill_fixed_s: f64,
    prefill_per_token_s: f64,
    /// Decode step seconds at batch 1, 2, … (index + 1).
    decode_step_s: Vec<f64>,
    decode_ctx_ref: f64,
    ctx_slope_s: f64,
}

/// What a profile run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepProfile {
    /// (prompt tokens, seconds) of prompt passes.
    pub prefill: Vec<(f64, f64)>,
    /// (batch, seconds) of decode steps at the profile's context.
    pub decode: Vec<(u32, f64)>,
    /// The context (tokens per sequence, mean over the run) of `decode`.
    pub decode_ctx: f64,
    /// (context, seconds) of single-stream decode steps at other contexts,
    /// for the context slope (optional).
    pub single_stream: Vec<(f64, f64)>,
}

impl ProfiledCost {
    /// Fits the profile; an error names what is missing.
    pub fn fit(p: &StepProfile) -> Result<Self, crate::PlannerError> {
        let bad = |what: &str| crate::PlannerError::invalid("step profile", what.to_string());
        let prefill: Vec<(f64, f64)> = p
            .prefill
            .iter()
            .copied()
            .filter(|(n, s)| *n > 0.0 && s.is_finite() && *s > 0.0)
            .collect();
        if prefill.is_empty() {
            return Err(bad("no prompt pass was measured"));
        }
        let (fixed, per_token) = line_fit(&prefill);
        let (fixed, per_token) = if per_token > 0.0 && fixed >= 0.0 {
            (fixed, per_token)
        } else {
            // One length, or a noisy pair: all of it per token.
            let (n, s): (f64, f64) = prefill
                .iter()
                .fold((0.0, 0.0), |(a, b), (n, s)| (a + n, b + s));
            (0.0, s / n)
        };
        let mut decode: Vec<(u32, f64)> = p
            .decode
            .iter()
            .copied()
            .filter(|(b, s)| *b > 0 && s.is_finite() && *s > 0.0)
            .collect();
        decode.sort_by_key(|(b, _)| *b);
        decode.dedup_by_key(|(b, _)| *b);
        if decode.first().is_none_or(|(b, _)| *b != 1) {
            return Err(bad("no decode step at batch 1 was measured"));
        }
        // Steps at every batch up to the largest measured, interpolated.
        let last = decode.last().map_or(1, |(b, _)| *b);
        let steps = (1..=last)
            .map(|b| {
                let hi = decode.iter().position(|(x, _)| *x >= b).unwrap_or(0);
                let (b1, s1) = decode[hi];
                if b1 == b || hi == 0 {
                    return s1;
                }
                let (b0, s0) = decode[hi - 1];
                s0 + (s1 - s0) * f64::from(b - b0) / f64::from(b1 - b0)
            })
            .collect();
        let single: Vec<(f64, f64)> = p
            .single_stream
            .iter()
            .copied()
            .filter(|(c, s)| *c > 0.0 && s.is_finite() && *s > 0.0)
            .collect();
        let ctx_slope_s = if single.len() >= 2 {
            line_fit(&single).1.max(0.0)
        } else {
            0.0
        };
        Ok(Self {
            prefill_fixed_s: fixed,
            prefill_per_token_s: per_token,
            decode_step_s: steps,
            decode_ctx_ref: p.decode_ctx.max(1.0),
            ctx_slope_s,
        })
    }

    /// Seconds of a prompt pass of `tokens` tokens.
    pub fn prefill_s(&self, tokens: f64) -> f64 {
        self.prefill_fixed_s + self.prefill_per_token_s * tokens
    }

    /// Seconds of a decode step over `batch` sequences of mean context `ctx`.
    pub fn decode_s(&self, batch: u32, ctx: f64) -> f64 {
        let n = self.decode_step_s.len();
        let b = batch.max(1) as usize;
        let at = if b <= n {
            self.decode_step_s[b - 1]
        } else {
            let slope = if n >= 2 {
                self.decode_step_s[n - 1] - self.decode_step_s[n - 2]
            } else {
                self.decode_step_s[0]
            };
            self.decode_step_s[n - 1] + slope.max(0.0) * (b - n) as f64
        };
        (at + self.ctx_slope_s * f64::from(batch) * (ctx - self.decode_ctx_ref)).max(at * 0.5)
    }

    /// Requests per second the engine sustains at `batch` running sequences,
    /// each with `prompt` tokens in and `output` out: its capacity.
    pub fn capacity_rps(&self, batch: u32, prompt: f64, output: f64) -> f64 {
        let b = batch.max(1);
        let ctx = prompt + output / 2.0;
        let per_request = self.prefill_s(prompt) + output * self.decode_s(b, ctx) / f64::from(b);
        1.0 / per_request.max(1e-9)
    }
}

impl StepCost for ProfiledCost {
    fn step_s(&self, step: &Step) -> f64 {
        let decode =
            (step.decode_seqs > 0).then(|| self.decode_s(step.decode_seqs, step.decode_ctx));
        let prefill = (step.prefill_tokens > 0).then(|| self.prefill_s(step.prefill_tokens as f64));
        decode.unwrap_or(0.0) + prefill.unwrap_or(0.0)
    }
}

/// Least-squares line `y = a + b·x`; `(mean y, 0)` when x does not vary.
fn line_fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return (my, 0.0);
    }
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = sxy / sxx;
    (my - b * mx, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> StepProfile {
        StepProfile {
            prefill: vec![(100.0, 0.11), (500.0, 0.51)],
            decode: vec![(1, 0.010), (2, 0.018), (4, 0.034)],
            decode_ctx: 300.0,
            single_stream: vec![(100.0, 0.009), (600.0, 0.014)],
        }
    }

    #[test]
    fn prefill_is_the_line_through_the_measured_passes() {
        let c = ProfiledCost::fit(&profile()).unwrap();
        assert!((c.prefill_s(100.0) - 0.11).abs() < 1e-9);
        assert!((c.prefill_s(300.0) - 0.31).abs() < 1e-9);
    }

    #[test]
    fn decode_interpolates_between_measured_batches_and_follows_context() {
        let c = ProfiledCost::fit(&profile()).unwrap();
        assert!((c.decode_s(2, 300.0) - 0.018).abs() < 1e-12);
        assert!((c.decode_s(3, 300.0) - 0.026).abs() < 1e-12);
        // Beyond the profile: the last slope (0.008 per sequence).
        assert!((c.decode_s(6, 300.0) - 0.050).abs() < 1e-12);
        // 1e-5 s per token of context per sequence.
        assert!((c.decode_s(1, 400.0) - 0.011).abs() < 1e-9);
        assert!((c.decode_s(2, 400.0) - 0.020).abs() < 1e-9);
    }

    #[test]
    fn a_mixed_step_pays_both_calls() {
        let c = ProfiledCost::fit(&profile()).unwrap();
        let s = Step {
            decode_seqs: 2,
            decode_ctx: 300.0,
            prefill_tokens: 100,
            prefill_seqs: 1,
        };
        assert!((c.step_s(&s) - (0.018 + 0.11)).abs() < 1e-9);
    }

    #[test]
    fn capacity_counts_prefill_and_the_shared_decode_steps() {
        let c = ProfiledCost::fit(&StepProfile {
            single_stream: vec![],
            ..profile()
        })
        .unwrap();
        // 0.11 s prefill + 100 tokens × 0.034/4 s = 0.96 s per request.
        assert!((c.capacity_rps(4, 100.0, 100.0) - 1.0 / 0.96).abs() < 1e-9);
    }

    #[test]
    fn a_profile_without_batch_one_is_refused() {
        let p = StepProfile {
            decode: vec![(2, 0.01)],
            ..profile()
        };
        let e = ProfiledCost::fit(&p).unwrap_err().to_string();
        assert!(e.contains("batch 1"), "{e}");
    }
}
