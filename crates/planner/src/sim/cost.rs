//! What one engine step costs: the simulator's only view of the hardware.
//!
//! The simulator asks a [`StepCost`] for the duration of each step it
//! schedules. [`EstimatorCost`] answers from the planner's per-step model
//! ([`Estimator::tpot_s`] for a decode step at a batch and context,
//! [`Estimator::ttft_s`] for a prefill pass), so improvements to that model
//! reach the simulator without a second copy of its formulas. A step that
//! mixes decode and a prefill chunk (chunked prefill) costs the decode step
//! plus the prefill chunk's *extra* time: the chunk's pass minus a one-token
//! decode step, which is the weight read and fixed overhead both already pay.

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
    /// memory headroom), 0 when the model does not fit.
    pub fn kv_tokens(&self) -> u64 {
        let per_token = self.scenario.kv_bytes_per_token();
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
        let prefill =
            (step.prefill_tokens > 0).then(|| self.est.ttft_s(s, step.prefill_tokens as f64));
        match (decode, prefill) {
            (Some(d), None) => d,
            (None, Some(p)) => p,
            (Some(d), Some(p)) => d + (p - self.est.tpot_s(s, 1.0, 1.0)).max(0.0),
            (None, None) => 0.0,
        }
    }
}
