//! The estimate: memory, prefill, decode, TTFT/TPOT, tensor parallelism,
//! for one scenario, with the lines that explain it.
//!
//! The roofline terms are in [`crate::roofline`], the per-step model in
//! [`crate::estimator`], batched serving in [`crate::batching`].

use serde::Serialize;

use crate::batching;
use crate::error::PlannerError;
pub use crate::estimator::Estimator;
use crate::explain::{Line, num};
use crate::hardware::Hardware;
use crate::quant::{ComputeDtype, Quant};
pub use crate::roofline::*;

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
    /// The clock the GPU computes at where it holds one below its
    /// datasheet's under dense matrix work ([`Hardware::matrix_clock_mhz`]),
    /// in one line; `None` where the datasheet peak holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_clock: Option<String>,
    /// The bandwidth memory-bound terms use, where a published streaming
    /// measurement puts it below the datasheet's ([`crate::stream`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_stream: Option<String>,
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

impl Estimator {
    pub fn estimate(&self, s: &Scenario) -> Result<Estimate, PlannerError> {
        s.validate()?;
        let (pf, df) = self.factors_for(s);
        let (p, d) = (pf.factor, df.factor);
        let mut explain = Vec::new();
        let bpw = s.quant.bits_per_weight;
        let params = s.model.total_params();
        let weights = s.weight_bytes();
        let routed = s.model.all_routed_expert_params();
        explain.push(if s.quant.experts_only && routed > 0.0 {
            let rest = s.engine.experts_only_rest_bytes();
            let kept = if rest < 2.0 {
                "the engine's file keeps attention, router, embeddings and LM head in Q8_0"
            } else {
                "attention, router, embeddings and LM head stay BF16"
            };
            Line::new(
                "weights",
                weights / 1e9,
                "GB",
                format!(
                    "routed experts × bits_per_weight / 8 + other weights × bytes (the format covers the experts; {kept})"
                ),
                format!(
                    "{} × {} / 8 + {} × {} ({})",
                    num(routed),
                    num(bpw),
                    num(params - routed),
                    num(rest),
                    s.quant.name
                ),
            )
        } else {
            Line::new(
                "weights",
                weights / 1e9,
                "GB",
                "total_params × bits_per_weight / 8",
                format!("{} × {} / 8 ({})", num(params), num(bpw), s.quant.name),
            )
        });
        let kvt = s.kv_bytes_per_token();
        let copies = s.model.kv_copies(s.tp);
        let (formula, inputs) = if copies > 1.0 {
            (
                format!(
                    "{}, × copies: tp ranks / KV shards (each rank holds the KV heads its query heads read)",
                    s.model.kv_formula()
                ),
                format!(
                    "b = {} B/element; {} copies = tp {} / {} shard(s)",
                    num(s.kv_bytes),
                    num(copies),
                    s.tp,
                    s.model.kv_shards(s.tp)
                ),
            )
        } else {
            (
                s.model.kv_formula(),
                format!("b = {} B/element", num(s.kv_bytes)),
            )
        };
        explain.push(Line::new("kv_bytes_per_token", kvt, "B", formula, inputs));
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
        explain.push(max_seqs_line(s, max_seqs, cap, kvt));

        let prompt = s.prompt_tokens as f64;
        // Named in the formulas where the checkpoint's GEMMs have floors.
        let floors = if s.block_fp8_floors_s(1.0) > 0.0 {
            " + block-FP8 GEMM floors"
        } else {
            ""
        };
        // Named where a build before b3216 dequantises the weights to F16 first.
        let dequant = if s.f16_dequant_s(prompt) > 0.0 {
            " + F16 dequantising kernel"
        } else {
            ""
        };
        // The bandwidth the memory-bound terms were computed at.
        let gbps = s.bandwidth() / 1e9;
        let pt = prefill_terms(s, prompt, 1.0);
        // The prompt's pass on the GPU; a client also waits for the server path.
        let pass = prefill_time(&pt, p, d);
        let server = self.server_path_s(s, prompt);
        let ttft = pass + server;
        explain.push(Line::new(
            "ttft",
            ttft * 1e3,
            "ms",
            format!("max(FLOPs/(peak·η_p), weight bytes/(BW·η_d)) + scores written by unfused attention/(BW·η_d) + c_p + allreduce + kernel boundaries{floors}{dequant} + server path"),
            format!(
                "max({} / ({} T·{}), {} GB / ({} GB/s·{})) + {} GB scores + {} ms + {} ms + {} ms ({})",
                num(pt.flops),
                num(s.hw.peak_tflops(s.weight_compute())),
                num(p.efficiency),
                num((pt.memory_s - pt.kv_memory_s) * gbps),
                num(gbps),
                num(d.efficiency),
                num(pt.kv_memory_s * gbps),
                num(p.overhead_ms),
                num(pt.comm_s * 1e3),
                num(server * 1e3),
                if self.server_path_ms.is_some() && !self.factors.is_baseline() {
                    "the server path given with the plan, plus the engine's cost per prompt token"
                } else if server > 0.0 {
                    "HTTP, tokenising, hand-off to the engine loop and streaming back"
                } else {
                    "no published figure for this engine"
                }
            ),
        ));
        if let Some(line) = expert_tiles_line(s, prompt) {
            explain.push(line);
        }
        let prefill_tok_s = prompt / pass;
        explain.push(Line::new(
            "prefill_tok_s",
            prefill_tok_s,
            "tok/s",
            "prompt_tokens / prefill pass (ttft less the server path)",
            format!("{} / {} ms", s.prompt_tokens, num(pass * 1e3)),
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
        // Named where the engine replays a one-token step as a CUDA graph.
        let graphs = if s.cuda_graph_saving_s(running) > 0.0 {
            " − launches the step's CUDA graph saves"
        } else if s.f16_dequant_s(running) > 0.0 {
            " + F16 dequantising kernel"
        } else {
            ""
        };
        explain.push(Line::new(
            "tpot",
            tpot * 1e3,
            "ms",
            format!("matmuls max(weights/(BW·η_d), (n + prompt tok) matmul FLOPs/(peak·η_p)) + attention max((n·ctx·kv + scores written by unfused attention)/(BW·η_d), score FLOPs/(peak_kv·η_p)) + c_d + n·c_seq + allreduce + kernel boundaries{floors}{graphs}"),
            format!(
                "max({} GB, {} + {} prompt tok × {} FLOP) + max({} GB KV{}, attention) at {} GB/s·{} and {} T·{}, + {} ms; n = {}, ctx = {}",
                num((dt.memory_s - dt.kv_memory_s) * gbps),
                num(dt.flops),
                num(bt.prefill_tokens_per_step),
                num(s.model.forward_flops(prompt, 0.0) / prompt / s.tp()),
                num(dt.kv_memory_s * gbps),
                if s.kv_passes() > 1.0 {
                    format!(
                        ", the cache moved {} times: grown by concatenation",
                        s.kv_passes()
                    )
                } else {
                    String::new()
                },
                num(gbps),
                num(d.efficiency),
                num(s.hw.peak_tflops(s.weight_compute())),
                num(p.efficiency),
                num((bt.overhead_s + bt.comm_s) * 1e3),
                num(running),
                match s.model.sliding_window {
                    Some(_) => format!(
                        "{} ({} keys a layer on average: windowed layers read their window)",
                        num(ctx),
                        num(s.model.attended_keys(ctx))
                    ),
                    None => num(ctx),
                }
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
        let output_tok_s = batching::closed_loop_tok_s(self, s, running, tpot, pass, output);
        explain.push(Line::new(
            "output_tok_s",
            output_tok_s,
            "tok/s",
            "min(running_seqs × gen / (gen × tpot + prefill pass), gen / front-end time per request)",
            format!(
                "{} × {} / ({} × {} ms + {} ms)",
                num(running),
                s.gen_tokens,
                s.gen_tokens,
                num(tpot * 1e3),
                num(pass * 1e3)
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
            "fp32", "fp16", "fp8", "int8", "int4", "mxfp4", "q8_0", "q6_k", "q5_k_m", "q4_k_m",
            "q4_1", "q4_0",
        ]
        .iter()
        .filter_map(|n| Quant::parse(n).ok())
        .map(|q| WeightRow {
            gb: s.model.weight_bytes(&q, s.engine) / 1e9,
            bits_per_weight: q.bits_per_weight,
            quant: q.name,
        })
        .collect();
        Ok(Estimate {
            model: s.model.id.clone(),
            gpu: s.hw.id.clone(),
            quant: s.quant.name.clone(),
            engine: s.engine.to_string(),
            engine_profile: match (s.ubatch, s.prompt_micro_batches()) {
                (Some(_), Some((n_batch, n_ubatch))) => format!(
                    "{}; prompts in micro-batches of {n_ubatch} tokens (--ubatch), logical batches of {n_batch}",
                    s.engine.describe()
                ),
                _ => s.engine.describe().to_string(),
            },
            compute_clock: compute_clock(s.hw),
            memory_stream: crate::stream::note(s.hw),
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

/// The `max_concurrent_seqs` line: sequences of the scenario's context that
/// fit in the KV capacity, with the windowed layers' share where the engine
/// stores only the window.
fn max_seqs_line(s: &Scenario, max_seqs: u64, cap: f64, kvt: f64) -> Line {
    let ctx = s.context as f64;
    let held = s.kv_tokens_held(ctx);
    let cap_gb = num(cap.max(0.0) / 1e9);
    let (formula, inputs) = match &s.model.sliding_window {
        Some(w) if held < ctx => {
            let local = w.layers.min(s.model.layers);
            (
                "floor(kv_capacity / (kv_bytes_per_token × held)), held = (full layers × context + windowed layers × min(context, window)) / layers: the engine keeps only the window of a sliding-window layer",
                format!(
                    "{cap_gb} GB / ({} B × {}); held = ({} × {} + {local} × {}) / {}",
                    num(kvt),
                    num(held),
                    s.model.layers - local,
                    s.context,
                    w.window.min(s.context),
                    s.model.layers
                ),
            )
        }
        Some(_) if !s.engine.windowed_kv_cache() => (
            "floor(kv_capacity / (kv_bytes_per_token × context)): this engine is taken to keep every token of its sliding-window layers",
            format!("{cap_gb} GB / ({} B × {})", num(kvt), s.context),
        ),
        _ => (
            "floor(kv_capacity / (kv_bytes_per_token × context))",
            format!("{cap_gb} GB / ({} B × {})", num(kvt), s.context),
        ),
    };
    Line::new(
        "max_concurrent_seqs",
        max_seqs as f64,
        "seqs",
        formula,
        inputs,
    )
}

/// The prompt's routed-expert work as a multiple of its tokens' own, where
/// the engine computes each expert's tokens in whole tiles
/// ([`Scenario::expert_tile_flops`]); `None` where nothing is padded.
fn expert_tiles_line(s: &Scenario, prompt: f64) -> Option<Line> {
    let extra = s.expert_tile_flops(prompt);
    let moe = s.model.moe.as_ref()?;
    let tile = s.engine.moe_prompt_tile(s.hw.class)?;
    let (_, ubatch) = s.prompt_micro_batches()?;
    let useful = 2.0 * s.model.routed_expert_params(f64::from(moe.active)) * prompt / s.tp();
    if extra <= 0.0 || useful <= 0.0 {
        return None;
    }
    let u = prompt.min(f64::from(ubatch));
    Some(Line::new(
        "expert_tiles",
        1.0 + extra / useful,
        "×",
        "E·w·E[⌈X/w⌉] / (u·k), X ~ Binomial(u, k/E): the routed experts' prompt FLOPs, each expert's share of a u-token micro-batch computed in whole tiles of w tokens (in ttft's FLOPs)",
        format!(
            "E = {}, k = {}, u = {}, w = {} ({})",
            moe.experts,
            moe.active,
            num(u),
            num(crate::expert_tiles::tile_width(u, tile)),
            s.engine
        ),
    ))
}

/// One line on the clock `hw` computes at under dense matrix work, where its
/// vendor or a published measurement puts it below the datasheet's.
fn compute_clock(hw: &Hardware) -> Option<String> {
    let c = hw.matrix_clock_mhz?;
    let rate = |d: ComputeDtype| {
        format!(
            "{} of {} TFLOPS",
            num(hw.peak_tflops(d)),
            num(hw.datasheet_tflops(d))
        )
    };
    Some(format!(
        "{} holds {} MHz (16-bit; {}) and {} MHz (8-bit) under dense matrix work, not the datasheet's {} MHz: compute-bound terms use those rates",
        hw.id,
        num(c.fp16),
        rate(ComputeDtype::Fp16),
        num(c.fp8),
        num(c.boost)
    ))
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
