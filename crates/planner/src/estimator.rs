//! The estimator's per-step model: the efficiency factors a scenario gets,
//! the time of one prefill and one decode step with them, and the KV-cache
//! capacity. What batching builds on and the full estimate sums up.

use crate::efficiency::{EfficiencyTable, Phase, Resolved};
use crate::hardware::HardwareClass;
use crate::roofline::{Scenario, decode_terms, decode_time, prefill_terms, prefill_time};

/// Computes estimates with one efficiency table.
#[derive(Debug, Clone)]
pub struct Estimator {
    pub factors: EfficiencyTable,
    /// The server path the user measured on their own host, ms, in place of
    /// the engine's published fixed part ([`Self::server_path_s`]); `None`:
    /// the published figure.
    pub server_path_ms: Option<f64>,
}

impl Estimator {
    pub fn new(factors: EfficiencyTable) -> Self {
        Self {
            factors,
            server_path_ms: None,
        }
    }

    /// The same estimator with the user's own one-client server path, ms
    /// (`glassbox plan --server-path-ms`): what their clients wait for
    /// besides the prompt's pass depends on the host and the client, which
    /// no published figure knows (docs/planner.md, "A one-client server
    /// path"). The engine's cost per prompt token stays on top of it.
    pub fn with_server_path_ms(mut self, ms: Option<f64>) -> Self {
        self.server_path_ms = ms;
        self
    }

    /// (prefill, decode) factors for a scenario.
    /// The decode factor's efficiency is scaled by the share of its BF16
    /// read rate that the engine's quantised kernels reach
    /// ([`crate::Engine::quantised_read_share`]; not for the baseline).
    pub fn factors_for(&self, s: &Scenario) -> (Resolved, Resolved) {
        let class = s.factor_class();
        // Say so where the factors are not the card's own class's.
        let borrowed = |mut r: Resolved| {
            if class != s.hw.class {
                r.level = format!("{}, as the {} is a GeForce die", r.level, s.hw.id);
            }
            r
        };
        let mut decode = borrowed(self.factors.lookup(class, s.engine, Phase::Decode));
        let datacenter = s.hw.class == HardwareClass::Datacenter;
        let share = s.engine.quantised_read_share(&s.quant, datacenter);
        if share < 1.0 && !self.factors.is_baseline() {
            decode.factor.efficiency *= share;
            decode.level = format!(
                "{} × {share:.2} ({}'s {} weight reads, its own figure)",
                decode.level, s.engine, s.quant.name
            );
        }
        (
            borrowed(self.factors.lookup(class, s.engine, Phase::Prefill)),
            decode,
        )
    }

    /// The GPU pass over one request's `prompt` tokens, seconds: what the
    /// prompt rate, the batching model and the simulator's prefill steps use.
    /// A served request's TTFT adds [`Self::server_path_s`] to it.
    pub fn prefill_pass_s(&self, s: &Scenario, prompt: f64) -> f64 {
        let (p, d) = self.factors_for(s);
        prefill_time(&prefill_terms(s, prompt, 1.0), p.factor, d.factor)
    }

    /// The server path of one served request with a `prompt`-token prompt,
    /// seconds, at one client: what its TTFT holds besides the prefill pass
    /// (HTTP, prompt rendering, tokenising and block hashing, the hand-off to
    /// the engine loop, detokenising and streaming the first token back),
    /// [`crate::efficiency::EngineProfile::server_path_ms`] (or the user's
    /// [`Self::server_path_ms`]) plus its cost per prompt token. It occupies
    /// no GPU time. Zero for engines without a published figure unless the
    /// user gives one, and always for the constant-efficiency baseline. (The
    /// serving simulator delays requests by the loaded run's
    /// [`crate::efficiency::EngineProfile::request_overhead_ms`] instead.)
    pub fn server_path_s(&self, s: &Scenario, prompt: f64) -> f64 {
        if self.factors.is_baseline() {
            return 0.0;
        }
        let p = s.engine.profile(s.hw);
        let fixed = self.server_path_ms.unwrap_or(p.server_path_ms);
        (fixed + p.server_path_ms_per_prompt_token * prompt.max(0.0)) / 1e3
    }

    /// One decode step at `batch` and context `ctx`, seconds: the roofline
    /// step plus the engine's host cost per running sequence
    /// ([`crate::efficiency::EngineProfile::per_seq_overhead_ms`]). Prefill of
    /// other sequences is not in it; [`crate::batching::steady_state`] adds it.
    pub fn tpot_s(&self, s: &Scenario, batch: f64, ctx: f64) -> f64 {
        let (p, d) = self.factors_for(s);
        decode_time(&decode_terms(s, batch, ctx), p.factor, d.factor)
            + batch * self.per_seq_overhead_s(s)
    }

    /// Host time per running sequence per decode step, seconds (zero for
    /// the constant-efficiency baseline).
    pub fn per_seq_overhead_s(&self, s: &Scenario) -> f64 {
        if self.factors.is_baseline() {
            0.0
        } else {
            s.engine.profile(s.hw).per_seq_overhead_ms / 1e3
        }
    }

    /// KV-cache memory per replica after weights and headroom, bytes.
    pub fn kv_capacity_bytes(&self, s: &Scenario) -> f64 {
        let usable = s.hw.memory_bytes() * (1.0 - s.memory_headroom) * s.devices();
        usable - s.weight_bytes()
    }

    /// Sequences of `context` tokens that fit in the KV capacity.
    pub fn max_concurrent(&self, s: &Scenario) -> u64 {
        let cap = self.kv_capacity_bytes(s);
        let per_seq = s.kv_bytes_per_seq(s.context as f64);
        if cap <= 0.0 || per_seq <= 0.0 {
            0
        } else {
            (cap / per_seq).floor() as u64
        }
    }
}
