//! The estimator: memory, prefill, decode, TTFT/TPOT, tensor parallelism.
//!
//! Every time is a roofline term divided by a fitted efficiency plus a fixed
//! overhead ([`crate::efficiency`]):
//!
//! - decode step  = max(bytes / (BW·η_d), FLOPs / (peak·η_p)) + c_d + allreduce
//! - prefill pass = max(FLOPs / (peak·η_p), bytes / (BW·η_d)) + c_p + allreduce
//!
//! where bytes are the weights one step reads (MoE: the experts the batch
//! touches) plus the KV cache it reads, and FLOPs are `2·P_active` per token
//! plus attention (a batched step's matmuls padded to whole 64-row tiles,
//! [`tile_padded_tokens`]). Tensor parallelism splits bytes and FLOPs over `tp`
//! devices and adds two ring all-reduces per layer. Pipeline (layer) stages
//! (`pp`) hold a share of the layers each: memory adds up over `tp · pp`
//! devices, but a token passes the stages in turn, so a step's time is that
//! of the whole model on `tp` devices plus one activation hand-off per stage
//! boundary ([`crate::parallel`]).

use serde::Serialize;

use crate::batching;
use crate::efficiency::{
    EfficiencyTable, Engine, Factor, Phase, Resolved, SCORE_BYTES_PER_ELEMENT,
};
use crate::error::PlannerError;
use crate::explain::{Line, num};
use crate::hardware::{Hardware, HardwareClass};
use crate::model::ModelSpec;
use crate::quant::{ComputeDtype, Quant};

/// Latency of one hand-off between pipeline stages (launch +
/// synchronisation), seconds; all-reduce latency is [`crate::collective`]'s.
pub const ALLREDUCE_LATENCY_S: f64 = crate::collective::ONE_SHOT_LATENCY_S;

/// What to estimate: one model on one kind of device.
#[derive(Debug, Clone)]
pub struct Scenario<'a> {
    pub model: &'a ModelSpec,
    pub hw: &'a Hardware,
    pub quant: Quant,
    /// KV-cache bytes per element (2 = FP16, 1 = FP8/INT8).
    pub kv_bytes: f64,
    pub engine: Engine,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline (layer-split) stages; a replica holds `tp · pp` devices.
    pub pp: u32,
    /// Concurrent sequences decoded together.
    pub batch: u32,
    pub prompt_tokens: u64,
    pub gen_tokens: u64,
    /// Context length each sequence may reach, for KV capacity.
    pub context: u64,
    /// Fraction of device memory left free (seed 001: at least 20%).
    pub memory_headroom: f64,
}

impl Scenario<'_> {
    pub fn validate(&self) -> Result<(), PlannerError> {
        if self.tp == 0 || self.tp > 64 {
            return Err(PlannerError::invalid(
                "tp",
                format!("must be 1-64, got {}", self.tp),
            ));
        }
        if self.pp == 0 || self.tp.saturating_mul(self.pp) > 64 {
            return Err(PlannerError::invalid(
                "pp",
                format!("tp × pp must be 1-64, got {} × {}", self.tp, self.pp),
            ));
        }
        if self.batch == 0 || self.batch > 1 << 20 {
            return Err(PlannerError::invalid(
                "batch",
                format!("must be >= 1, got {}", self.batch),
            ));
        }
        if !(0.0..0.95).contains(&self.memory_headroom) {
            return Err(PlannerError::invalid(
                "memory headroom",
                format!("must be in [0, 0.95), got {}", self.memory_headroom),
            ));
        }
        if self.context == 0 || self.prompt_tokens == 0 {
            return Err(PlannerError::invalid(
                "tokens",
                "prompt and context must be >= 1",
            ));
        }
        Ok(())
    }

    fn tp(&self) -> f64 {
        f64::from(self.tp)
    }

    /// Devices one replica holds: `tp · pp`.
    pub fn devices(&self) -> f64 {
        f64::from(self.tp) * f64::from(self.pp.max(1))
    }

    /// Weights of one replica, bytes.
    pub fn weight_bytes(&self) -> f64 {
        self.model.total_params() * self.quant.bytes_per_weight()
    }

    pub fn kv_bytes_per_token(&self) -> f64 {
        self.model.kv_bytes_per_token(self.kv_bytes)
    }

    /// Attention-score traffic of `tokens` new tokens attending over a mean
    /// of `ctx` positions each, over the whole replica, bytes: zero for
    /// engines with fused attention, else one score per head, layer, token
    /// and position at [`SCORE_BYTES_PER_ELEMENT`]. Memory-bound work in the
    /// attention kernels, so it joins the KV read in their roofline.
    pub fn attention_scores_bytes(&self, tokens: f64, ctx: f64) -> f64 {
        if !self.engine.materialises_attention_scores() {
            return 0.0;
        }
        let m = &self.model;
        tokens * ctx * (m.heads * m.layers) as f64 * SCORE_BYTES_PER_ELEMENT
    }

    /// [`Self::attention_scores_bytes`] per device at full bandwidth, seconds.
    pub fn attention_scores_s(&self, tokens: f64, ctx: f64) -> f64 {
        self.attention_scores_bytes(tokens, ctx) / self.tp() / self.bandwidth()
    }

    fn peak_flops(&self) -> f64 {
        self.hw.peak_tflops(self.quant.compute) * 1e12
    }

    /// FLOPs and their time at 100% of peak for `tokens` new tokens after
    /// `past` cached ones, per device, split into the weight matmuls (at the
    /// weight format's rate) and attention (scores × cached K/V, at the KV
    /// cache's rate: FP8 KV computes at FP8, otherwise FP16; FP4 weights do
    /// not make attention FP4).
    pub fn forward_compute(&self, tokens: f64, past: f64) -> Compute {
        let attn = self.model.attention_flops(tokens, past);
        let linear = self.model.forward_flops(tokens, past) - attn;
        let attn_dtype = if self.kv_bytes <= 1.0 {
            ComputeDtype::Fp8
        } else {
            ComputeDtype::Fp16
        };
        let attn_peak = self.hw.peak_tflops(attn_dtype) * 1e12;
        let tp = self.tp();
        Compute {
            linear_flops: linear / tp,
            linear_s: linear / self.peak_flops() / tp,
            attn_flops: attn / tp,
            attn_s: attn / attn_peak / tp,
        }
    }

    fn bandwidth(&self) -> f64 {
        self.hw.bandwidth_gbps * 1e9
    }

    /// Communication of one forward pass over `tokens` tokens. Tensor
    /// parallel: two ring all-reduces per layer of `tokens × hidden` FP16
    /// activations, each moving `2(N−1)/N` of the message over the link,
    /// plus a latency. Pipeline stages: the activations handed from one
    /// stage to the next at each of the `pp − 1` boundaries, plus a latency.
    pub fn allreduce_s(&self, tokens: f64) -> f64 {
        let msg = tokens * self.model.hidden as f64 * 2.0;
        let link = (self.hw.interconnect.gbps * 1e9).max(1e6);
        let hops = f64::from(self.pp.max(1) - 1) * (msg / link + ALLREDUCE_LATENCY_S);
        if self.tp <= 1 {
            return hops;
        }
        let n = self.tp();
        let per_call = 2.0 * (n - 1.0) / n * msg / link
            + crate::collective::latency_s(self.engine, self.tp, &self.hw.interconnect);
        2.0 * self.model.layers as f64 * per_call + hops
    }
}

/// Work of a forward pass per device: weight matmuls and attention.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Compute {
    pub linear_flops: f64,
    /// `linear_flops` at the weight format's peak, seconds.
    pub linear_s: f64,
    pub attn_flops: f64,
    /// `attn_flops` at the KV dtype's peak, seconds.
    pub attn_s: f64,
}

/// Roofline times of one step at 100% efficiency, seconds. `memory_s` and
/// `compute_s` are totals; the attention part of each (`kv_memory_s`: the KV
/// cache read; `attn_compute_s`: score FLOPs) runs in kernels of its own,
/// after the weight matmuls, so the two parts have separate rooflines.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Terms {
    pub bytes: f64,
    pub flops: f64,
    pub memory_s: f64,
    pub compute_s: f64,
    pub comm_s: f64,
    pub kv_memory_s: f64,
    pub attn_compute_s: f64,
}

impl Terms {
    /// The average of `self` (weight `1 − f`) and `other` (weight `f`),
    /// field by field: the mean step of a mix of two kinds of step.
    pub fn mix(&self, other: &Terms, f: f64) -> Terms {
        let m = |a: f64, b: f64| (1.0 - f) * a + f * b;
        Terms {
            bytes: m(self.bytes, other.bytes),
            flops: m(self.flops, other.flops),
            memory_s: m(self.memory_s, other.memory_s),
            compute_s: m(self.compute_s, other.compute_s),
            comm_s: m(self.comm_s, other.comm_s),
            kv_memory_s: m(self.kv_memory_s, other.kv_memory_s),
            attn_compute_s: m(self.attn_compute_s, other.attn_compute_s),
        }
    }

    /// Time with factors applied: the matmuls' roofline plus attention's,
    /// each `max(bytes/(BW·η_d), FLOPs/(peak·η_p))`.
    pub fn roofline_s(&self, prefill: Factor, decode: Factor) -> f64 {
        let gemm = ((self.memory_s - self.kv_memory_s) / decode.efficiency)
            .max((self.compute_s - self.attn_compute_s) / prefill.efficiency);
        let attn =
            (self.kv_memory_s / decode.efficiency).max(self.attn_compute_s / prefill.efficiency);
        gemm + attn
    }

    /// `compute` or `bandwidth`: what the matmuls (most of the step) sit on.
    pub fn regime(&self, prefill: Factor, decode: Factor) -> &'static str {
        let compute = (self.compute_s - self.attn_compute_s) / prefill.efficiency;
        if compute > (self.memory_s - self.kv_memory_s) / decode.efficiency {
            "compute"
        } else {
            "bandwidth"
        }
    }
}

/// Rows of the smallest tensor-core GEMM tile: Hopper's warpgroup MMA has
/// `m = 64`, and CUTLASS / cuBLAS thread-block tiles on Ampere and Ada are 64
/// or 128 rows (docs/planner.md, "Tile padding of a batched step's matmuls").
pub const GEMM_TILE_ROWS: f64 = 64.0;

/// Token rows a batched step's weight matmuls compute: a tensor-core GEMM
/// computes whole tiles, so `m > 1` tokens are padded to a multiple of
/// [`GEMM_TILE_ROWS`] (NVIDIA's "tile quantization"). One token (a single
/// stream) runs a matrix-vector kernel and is not padded.
pub fn tile_padded_tokens(m: f64) -> f64 {
    if m <= 1.0 {
        m
    } else {
        (m / GEMM_TILE_ROWS).ceil() * GEMM_TILE_ROWS
    }
}

impl Scenario<'_> {
    /// Token rows the weight matmuls of a step over `m` tokens compute:
    /// padded to whole tiles ([`tile_padded_tokens`]) on GPUs, whose batched
    /// matmuls run on tensor-core tiles; as many as there are on CPUs, Apple
    /// silicon and NPUs, whose kernels do not pad a few rows to 64.
    pub fn gemm_rows(&self, m: f64) -> f64 {
        match self.hw.class {
            HardwareClass::Datacenter | HardwareClass::Consumer => tile_padded_tokens(m),
            HardwareClass::Apple | HardwareClass::Cpu | HardwareClass::Npu => m,
        }
    }
}

/// One decode step for `batch` sequences at context `ctx`. The weight
/// matmuls compute [`Scenario::gemm_rows`]`(batch)` rows.
pub fn decode_terms(s: &Scenario, batch: f64, ctx: f64) -> Terms {
    let weights = s.model.decode_read_params(batch) * s.quant.bytes_per_weight();
    let kv = batch * ctx * s.kv_bytes_per_token() + s.attention_scores_bytes(batch, ctx);
    let bytes = (weights + kv) / s.tp();
    let c = s.forward_compute(1.0, ctx);
    let rows = s.gemm_rows(batch);
    Terms {
        bytes,
        flops: rows * c.linear_flops + batch * c.attn_flops,
        memory_s: bytes / s.bandwidth(),
        compute_s: rows * c.linear_s + batch * c.attn_s,
        comm_s: s.allreduce_s(batch),
        kv_memory_s: kv / s.tp() / s.bandwidth(),
        attn_compute_s: batch * c.attn_s,
    }
}

/// One prefill pass over `tokens` prompt tokens (all sequences together).
pub fn prefill_terms(s: &Scenario, tokens: f64, seqs: f64) -> Terms {
    let per_seq = (tokens / seqs.max(1.0)).max(1.0);
    let weights = s.model.decode_read_params(tokens) * s.quant.bytes_per_weight();
    let seqs = seqs.max(1.0);
    // Causal: the prompt's tokens attend over (n + 1) / 2 positions on average.
    let scores = seqs * s.attention_scores_bytes(per_seq, (per_seq + 1.0) / 2.0) / s.tp();
    let bytes = weights / s.tp() + scores;
    let c = s.forward_compute(per_seq, 0.0);
    // Pipeline stages overlap the micro-batches of one prompt where the
    // engine cuts it into them; the roofline times shrink by that overlap.
    let k = if seqs <= 1.0 {
        crate::parallel::prompt_overlap(s, tokens)
    } else {
        1.0
    };
    Terms {
        bytes,
        flops: seqs * (c.linear_flops + c.attn_flops),
        memory_s: k * bytes / s.bandwidth(),
        compute_s: k * seqs * (c.linear_s + c.attn_s),
        comm_s: s.allreduce_s(tokens),
        kv_memory_s: k * scores / s.bandwidth(),
        attn_compute_s: k * seqs * c.attn_s,
    }
}

/// Decode step time with factors applied.
pub fn decode_time(t: &Terms, prefill: Factor, decode: Factor) -> f64 {
    t.roofline_s(prefill, decode) + decode.overhead_ms / 1e3 + t.comm_s
}

/// Prefill pass time with factors applied.
pub fn prefill_time(t: &Terms, prefill: Factor, decode: Factor) -> f64 {
    t.roofline_s(prefill, decode) + prefill.overhead_ms / 1e3 + t.comm_s
}

/// The factors used, with their provenance.
#[derive(Debug, Clone, Serialize)]
pub struct UsedFactors {
    pub prefill_efficiency: f64,
    pub prefill_overhead_ms: f64,
    pub prefill_level: String,
    pub decode_efficiency: f64,
    pub decode_overhead_ms: f64,
    pub decode_level: String,
}

/// Weight memory of the model in one format.
#[derive(Debug, Clone, Serialize)]
pub struct WeightRow {
    pub quant: String,
    pub bits_per_weight: f64,
    pub gb: f64,
}

/// The estimate for one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub model: String,
    pub gpu: String,
    pub quant: String,
    pub engine: String,
    /// What the engine profile assumes, in one line ([`Engine::describe`]).
    pub engine_profile: String,
    pub tp: u32,
    /// Pipeline (layer-split) stages.
    pub pp: u32,
    pub batch: u32,
    pub prompt_tokens: u64,
    pub gen_tokens: u64,
    pub context: u64,
    pub total_params_b: f64,
    pub active_params_b: f64,
    pub weights_gb: f64,
    pub weights_gb_per_gpu: f64,
    pub kv_bytes_per_token: f64,
    pub kv_capacity_gb: f64,
    pub max_concurrent_seqs: u64,
    pub fits: bool,
    pub prefill_tok_s: f64,
    pub ttft_ms: f64,
    /// Time per output token of each sequence at steady state at `batch`.
    pub tpot_ms: f64,
    /// Aggregate decode throughput at `batch` (output tokens/s over all
    /// running sequences at steady state: `running_seqs / tpot`). At batch 1
    /// the single-stream decode speed; above it, continuous batching with
    /// the running sequences capped by KV memory and the engine, and other
    /// sequences' prompts interleaved ([`crate::batching`]).
    pub decode_tok_s: f64,
    pub decode_tok_s_per_seq: f64,
    /// Sequences that actually run together (≤ `batch`).
    pub running_seqs: u64,
    /// What set `running_seqs`: `requested`, `kv_capacity` or `engine_cap`.
    pub batch_limit: String,
    /// Closed-loop output throughput counting each request's own prompt:
    /// `running × gen / (gen × tpot + ttft)`.
    pub output_tok_s: f64,
    pub e2e_ms: f64,
    /// What limits throughput at `batch`: `memory` (does not fit, or KV
    /// capacity caps the running sequences), `engine_cap`, `bandwidth` or `compute`.
    pub binding_constraint: String,
    pub factors: UsedFactors,
    pub weights_by_format: Vec<WeightRow>,
    pub explain: Vec<Line>,
}

/// Computes estimates with one efficiency table.
#[derive(Debug, Clone)]
pub struct Estimator {
    pub factors: EfficiencyTable,
}

impl Estimator {
    pub fn new(factors: EfficiencyTable) -> Self {
        Self { factors }
    }

    /// (prefill, decode) factors for a scenario.
    pub fn factors_for(&self, s: &Scenario) -> (Resolved, Resolved) {
        (
            self.factors.lookup(s.hw.class, s.engine, Phase::Prefill),
            self.factors.lookup(s.hw.class, s.engine, Phase::Decode),
        )
    }

    /// TTFT of one request of `prompt` tokens, seconds.
    pub fn ttft_s(&self, s: &Scenario, prompt: f64) -> f64 {
        let (p, d) = self.factors_for(s);
        prefill_time(&prefill_terms(s, prompt, 1.0), p.factor, d.factor)
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
        let per_seq = s.kv_bytes_per_token() * s.context as f64;
        if cap <= 0.0 || per_seq <= 0.0 {
            0
        } else {
            (cap / per_seq).floor() as u64
        }
    }

    pub fn estimate(&self, s: &Scenario) -> Result<Estimate, PlannerError> {
        s.validate()?;
        let (pf, df) = self.factors_for(s);
        let (p, d) = (pf.factor, df.factor);
        let mut explain = Vec::new();
        let bpw = s.quant.bits_per_weight;
        let params = s.model.total_params();
        let weights = s.weight_bytes();
        explain.push(Line::new(
            "weights",
            weights / 1e9,
            "GB",
            "total_params × bits_per_weight / 8",
            format!("{} × {} / 8 ({})", num(params), num(bpw), s.quant.name),
        ));
        let kvt = s.kv_bytes_per_token();
        explain.push(Line::new(
            "kv_bytes_per_token",
            kvt,
            "B",
            s.model.kv_formula(),
            format!("b = {} B/element", num(s.kv_bytes)),
        ));
        let cap = self.kv_capacity_bytes(s);
        explain.push(Line::new(
            "kv_capacity",
            cap.max(0.0) / 1e9,
            "GB",
            "tp × pp × memory × (1 − headroom) − weights",
            format!(
                "{} × {} × {} GiB × (1 − {}) − {} GB",
                s.tp,
                s.pp,
                num(s.hw.memory_gb),
                num(s.memory_headroom),
                num(weights / 1e9)
            ),
        ));
        let max_seqs = self.max_concurrent(s);
        explain.push(Line::new(
            "max_concurrent_seqs",
            max_seqs as f64,
            "seqs",
            "floor(kv_capacity / (kv_bytes_per_token × context))",
            format!(
                "{} GB / ({} B × {})",
                num(cap.max(0.0) / 1e9),
                num(kvt),
                s.context
            ),
        ));

        let prompt = s.prompt_tokens as f64;
        let pt = prefill_terms(s, prompt, 1.0);
        let ttft = prefill_time(&pt, p, d);
        explain.push(Line::new(
            "ttft",
            ttft * 1e3,
            "ms",
            "max(FLOPs/(peak·η_p), weight bytes/(BW·η_d)) + scores written by unfused attention/(BW·η_d) + c_p + allreduce",
            format!(
                "max({} / ({} T·{}), {} GB / ({} GB/s·{})) + {} GB scores + {} ms + {} ms",
                num(pt.flops),
                num(s.hw.peak_tflops(s.quant.compute)),
                num(p.efficiency),
                num((pt.memory_s - pt.kv_memory_s) * s.hw.bandwidth_gbps),
                num(s.hw.bandwidth_gbps),
                num(d.efficiency),
                num(pt.kv_memory_s * s.hw.bandwidth_gbps),
                num(p.overhead_ms),
                num(pt.comm_s * 1e3)
            ),
        ));
        let prefill_tok_s = prompt / ttft;
        explain.push(Line::new(
            "prefill_tok_s",
            prefill_tok_s,
            "tok/s",
            "prompt_tokens / ttft",
            format!("{} / {} ms", s.prompt_tokens, num(ttft * 1e3)),
        ));
        let output = s.gen_tokens as f64;
        let bt = batching::steady_state(self, s, f64::from(s.batch), prompt, output);
        let running = bt.running;
        explain.push(Line::new(
            "running_seqs",
            running,
            "seqs",
            "min(batch, KV capacity at the engine's memory fraction, engine cap)",
            format!(
                "min({}, {}, {}) → {}",
                s.batch,
                num(bt.kv_capacity_seqs),
                s.engine
                    .profile(s.hw)
                    .max_running
                    .map_or("none".to_string(), |c| c.to_string()),
                bt.limit.as_str()
            ),
        ));
        let ctx = bt.context;
        let dt = decode_terms(s, running, ctx);
        let tpot = bt.step_s;
        explain.push(Line::new(
            "tpot",
            tpot * 1e3,
            "ms",
            "matmuls max(weights/(BW·η_d), (n + prompt tok) matmul FLOPs/(peak·η_p)) + attention max((n·ctx·kv + scores written by unfused attention)/(BW·η_d), score FLOPs/(peak_kv·η_p)) + c_d + n·c_seq + allreduce",
            format!(
                "max({} GB, {} + {} prompt tok × {} FLOP) + max({} GB KV, attention) at {} GB/s·{} and {} T·{}, + {} ms; n = {}, ctx = {}",
                num((dt.memory_s - dt.kv_memory_s) * s.hw.bandwidth_gbps),
                num(dt.flops),
                num(bt.prefill_tokens_per_step),
                num(s.model.forward_flops(prompt, 0.0) / prompt / s.tp()),
                num(dt.kv_memory_s * s.hw.bandwidth_gbps),
                num(s.hw.bandwidth_gbps),
                num(d.efficiency),
                num(s.hw.peak_tflops(s.quant.compute)),
                num(p.efficiency),
                num((bt.overhead_s + bt.comm_s) * 1e3),
                num(running),
                num(ctx)
            ),
        ));
        let decode_tok_s = bt.tok_s;
        explain.push(Line::new(
            "decode_tok_s",
            decode_tok_s,
            "tok/s",
            "running_seqs / tpot",
            format!("{} / {} ms", num(running), num(tpot * 1e3)),
        ));
        let output_tok_s = batching::closed_loop_tok_s(self, s, running, tpot, ttft, output);
        explain.push(Line::new(
            "output_tok_s",
            output_tok_s,
            "tok/s",
            "min(running_seqs × gen / (gen × tpot + ttft), gen / front-end time per request)",
            format!(
                "{} × {} / ({} × {} ms + {} ms)",
                num(running),
                s.gen_tokens,
                s.gen_tokens,
                num(tpot * 1e3),
                num(ttft * 1e3)
            ),
        ));
        let e2e = ttft + s.gen_tokens as f64 * tpot;
        explain.push(Line::new(
            "e2e",
            e2e * 1e3,
            "ms",
            "ttft + gen_tokens × tpot",
            format!(
                "{} + {} × {} ms",
                num(ttft * 1e3),
                s.gen_tokens,
                num(tpot * 1e3)
            ),
        ));
        let fits = cap > 0.0 && max_seqs >= 1;
        let binding = match bt.limit {
            _ if !fits => "memory",
            batching::BatchLimit::KvCapacity => "memory",
            batching::BatchLimit::EngineCap => "engine_cap",
            batching::BatchLimit::Requested if u64::from(s.batch) > max_seqs => "memory",
            batching::BatchLimit::Requested => bt.regime,
        };
        let weights_by_format = [
            "fp32", "fp16", "fp8", "int8", "int4", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_1",
            "q4_0",
        ]
        .iter()
        .filter_map(|n| Quant::parse(n).ok())
        .map(|q| WeightRow {
            gb: params * q.bytes_per_weight() / 1e9,
            bits_per_weight: q.bits_per_weight,
            quant: q.name,
        })
        .collect();
        Ok(Estimate {
            model: s.model.id.clone(),
            gpu: s.hw.id.clone(),
            quant: s.quant.name.clone(),
            engine: s.engine.to_string(),
            engine_profile: s.engine.describe().to_string(),
            tp: s.tp,
            pp: s.pp,
            batch: s.batch,
            prompt_tokens: s.prompt_tokens,
            gen_tokens: s.gen_tokens,
            context: s.context,
            total_params_b: params / 1e9,
            active_params_b: s.model.active_params_b(),
            weights_gb: weights / 1e9,
            weights_gb_per_gpu: weights / 1e9 / s.devices(),
            kv_bytes_per_token: kvt,
            kv_capacity_gb: cap.max(0.0) / 1e9,
            max_concurrent_seqs: max_seqs,
            fits,
            prefill_tok_s,
            ttft_ms: ttft * 1e3,
            tpot_ms: tpot * 1e3,
            decode_tok_s,
            decode_tok_s_per_seq: 1.0 / tpot,
            running_seqs: running as u64,
            batch_limit: bt.limit.as_str().to_string(),
            output_tok_s,
            e2e_ms: e2e * 1e3,
            binding_constraint: binding.to_string(),
            factors: UsedFactors {
                prefill_efficiency: p.efficiency,
                prefill_overhead_ms: p.overhead_ms,
                prefill_level: pf.level,
                decode_efficiency: d.efficiency,
                decode_overhead_ms: d.overhead_ms,
                decode_level: df.level,
            },
            weights_by_format,
            explain,
        })
    }
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
