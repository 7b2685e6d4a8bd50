//! Batched serving: what one replica sustains with many sequences in flight.
//!
//! A single stream is bound by reading the weights once per token. At batch
//! `b` a serving engine (continuous batching) is limited by four more things,
//! each modelled here from first principles rather than fitted:
//!
//! 1. **How many sequences actually run.** The requested concurrency is
//!    capped by the KV cache (memory left after weights, at the engine's
//!    memory fraction or the plan's headroom, whichever keeps more free, each
//!    sequence reserving `prompt + generated` tokens) and by the engine's default
//!    cap on running sequences ([`crate::engine::EngineProfile::max_running`]). Requests
//!    beyond that wait; they add latency, not throughput.
//! 2. **What one step reads and computes.** The weights are read once per
//!    step for all sequences, the KV cache once per sequence
//!    (`running × context × KV bytes/token`, so long contexts and big batches
//!    turn decode into a KV-reading problem), and the FLOPs grow with the
//!    batch: past the device's ridge point (`peak / bandwidth` FLOPs per
//!    byte) the step is compute-bound. The matmuls compute whole 64-row
//!    tensor-core tiles, so the step's token rows (running sequences plus
//!    the prompt chunk) are padded once ([`tile_padded_tokens`]).
//! 3. **Prefill interleaved with decode.** At steady state every sequence
//!    that finishes is replaced by a new one whose prompt must be processed:
//!    from one sequence's view, the other `running − 1` sequences each bring
//!    one prompt of `P` tokens per `G` of its own output tokens. Engines that
//!    chunk prefill put those tokens in the same forward pass as the decode
//!    tokens (one weight read, FLOPs added); others run them as separate
//!    passes that stall decoding. The prompts come whole (or in chunks of
//!    what the step's token budget leaves), not as an even share of every
//!    step: the mean step mixes steps with and without a prompt, which is
//!    slower than one step with the mean load because a step's time is
//!    convex in its tokens.
//! 4. **Host cost per step**: `c0 + c1·n`, the decode factor's fitted
//!    fixed overhead plus a cost per running sequence (scheduling,
//!    sampling, detokenising) per engine.
//! 5. **The server front end**: an engine whose HTTP server is one process
//!    passes at most `1 / h` requests per second ([`frontend_req_s`]).
//!
//! The steady-state time per output token is therefore the matmuls'
//! roofline `max(weights/(BW·η_d), (decode + prompt-chunk) matmul FLOPs/(peak·η_p))`
//! plus attention's `max(running·ctx·KV/(BW·η_d), score FLOPs/(peak·η_p))`
//! (separate kernels, so the two do not overlap) `+ c_d + running·c_seq +
//! allreduce`, and the replica's output rate is `running / TPOT`. A single
//! stream (`running = 1`) reduces to the decode step of [`crate::estimate`].

use serde::Serialize;

use crate::estimator::Estimator;
use crate::roofline::{Scenario, Terms, decode_terms, decode_time, prefill_terms, prefill_time};

/// What set the number of running sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchLimit {
    /// The requested batch runs in full.
    Requested,
    /// The KV cache holds fewer sequences than requested.
    KvCapacity,
    /// The engine's default cap on running sequences.
    EngineCap,
}

impl BatchLimit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::KvCapacity => "kv_capacity",
            Self::EngineCap => "engine_cap",
        }
    }
}

/// One replica at steady state with `running` sequences.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Batching {
    pub requested: f64,
    pub running: f64,
    pub limit: BatchLimit,
    /// Sequences the KV cache holds (at the engine's memory fraction).
    pub kv_capacity_seqs: f64,
    /// Mean context a running sequence attends over, tokens.
    pub context: f64,
    /// Prompt tokens of other sequences processed per step.
    pub prefill_tokens_per_step: f64,
    /// Bytes term divided by the decode efficiency, seconds.
    pub memory_s: f64,
    /// Decode + interleaved prefill FLOPs divided by peak × η_p, seconds.
    pub compute_s: f64,
    /// Fixed step overhead plus the per-sequence host cost, seconds.
    pub overhead_s: f64,
    pub comm_s: f64,
    /// Time per output token of each sequence at steady state, seconds.
    pub step_s: f64,
    /// Output tokens per second of the replica (`running / step`).
    pub tok_s: f64,
    /// `bandwidth` or `compute`: which roofline term the step sits on.
    pub regime: &'static str,
}

/// How many of `batch` requested sequences run together, and why.
pub fn running_seqs(est: &Estimator, s: &Scenario, batch: f64) -> (f64, f64, BatchLimit) {
    let profile = s.engine.profile(s.hw);
    let headroom = s.memory_headroom.max(profile.memory_reserve);
    let engine_view = Scenario {
        memory_headroom: headroom,
        ubatch: None,
        ..s.clone()
    };
    let kv_seqs = est.max_concurrent(&engine_view) as f64;
    let cap = profile.max_running.map_or(f64::INFINITY, f64::from);
    let requested = batch.max(1.0);
    // A model that does not fit at all still runs one sequence in the
    // estimate; `fits` says it does not.
    let kv = kv_seqs.max(1.0);
    let (running, limit) = if requested <= kv.min(cap) {
        (requested, BatchLimit::Requested)
    } else if kv <= cap {
        (kv, BatchLimit::KvCapacity)
    } else {
        (cap, BatchLimit::EngineCap)
    };
    (running, kv_seqs, limit)
}

/// Steady-state continuous batching of up to `batch` sequences with
/// `prompt`-token prompts and `output` generated tokens each.
pub fn steady_state(
    est: &Estimator,
    s: &Scenario,
    batch: f64,
    prompt: f64,
    output: f64,
) -> Batching {
    let (running, kv_capacity_seqs, limit) = running_seqs(est, s, batch);
    let (pf, df) = est.factors_for(s);
    let (p, d) = (pf.factor, df.factor);
    let profile = s.engine.profile(s.hw);
    let per_seq_ms = if est.factors.is_baseline() {
        0.0
    } else {
        profile.per_seq_overhead_ms
    };
    let output = output.max(1.0);
    let prompt = prompt.max(1.0);
    let ctx = prompt + output / 2.0;
    // Pipeline stages that keep several micro-batches in flight: each
    // micro-batch's step runs the whole model (the stages in turn), and the
    // `mb` micro-batches advance together, one stage each.
    let mb = micro_batches(s, running);
    let running_total = running;
    let running = running / mb;
    let mut dt = decode_terms(s, running, ctx);
    let q = (running - 1.0).max(0.0) * prompt / output;
    let overhead_s = d.overhead_ms / 1e3 + running * per_seq_ms / 1e3;
    let (step_s, comm_s) = if profile.chunked_prefill {
        // The prompt chunk rides in the same pass: its matmul FLOPs share
        // the weight read, its attention runs beside the decode attention.
        // The matmuls compute the decode rows and the chunk's together,
        // padded to whole tiles once on GPUs (`Scenario::gemm_rows`).
        let c = s.forward_compute(prompt, 0.0);
        let with_chunk = |x: f64| {
            let mut t = dt;
            let rows = s.gemm_rows(running + x) - s.gemm_rows(running);
            t.compute_s += rows * c.linear_s / prompt + x / prompt * c.attn_s;
            t.attn_compute_s += x / prompt * c.attn_s;
            let scores_s = s.attention_scores_s(x, s.model.mean_causal_keys(prompt, 0.0));
            t.memory_s += scores_s;
            t.kv_memory_s += scores_s;
            t.comm_s = s.fixed_step_s(running + x);
            t
        };
        // Prompts arrive whole, not as `q` tokens every step: a step takes
        // `k` or `k + 1` chunks of `u` tokens (the prompt, or what the step's
        // token budget leaves beside the decode tokens), in the proportions
        // that average `q`. A step's time is convex in its tokens (flat on
        // the weight read, then rising with the FLOPs), so a step that
        // carries a prompt can be compute-bound while the average step
        // would not be.
        let budget = f64::from(profile.max_batched_tokens);
        let u = prompt.min((budget - running).max(1.0));
        let k = (q / u).floor();
        let f = q / u - k;
        let (lo, hi) = (with_chunk(k * u), with_chunk((k + 1.0) * u));
        let time = |t: &Terms| t.roofline_s(p, d) + t.comm_s;
        dt = lo.mix(&hi, f);
        (
            (1.0 - f) * time(&lo) + f * time(&hi) + overhead_s,
            dt.comm_s,
        )
    } else {
        let one = prefill_time(&prefill_terms(s, prompt, 1.0), p, d);
        let step = decode_time(&dt, p, d) + running * per_seq_ms / 1e3 + q / prompt * one;
        (step, dt.comm_s)
    };
    let memory_s = dt.memory_s / d.efficiency;
    let compute_s = dt.compute_s / p.efficiency;
    let regime = dt.regime(p, d);
    Batching {
        requested: batch,
        running: running_total,
        limit,
        kv_capacity_seqs,
        context: ctx,
        prefill_tokens_per_step: q,
        memory_s,
        compute_s,
        overhead_s,
        comm_s,
        step_s,
        tok_s: running_total / step_s,
        regime,
    }
}

/// Micro-batches in flight at once: the pipeline stages, for an engine that
/// pipelines micro-batches ([`crate::Engine::pipelines_micro_batches`]) and
/// has at least one sequence per stage; else 1 (a layer split that runs
/// its stages one after another, as llama.cpp's decode does).
pub fn micro_batches(s: &Scenario, running: f64) -> f64 {
    if s.pp > 1 && s.engine.pipelines_micro_batches() {
        f64::from(s.pp).min(running.floor()).max(1.0)
    } else {
        1.0
    }
}

/// Output tokens per second of a closed-loop benchmark that keeps `batch`
/// requests in flight: `running · G` tokens take `G` steady-state steps plus
/// the one prompt of each sequence not already counted in the steps (its
/// own TTFT). For a single stream this is `G / (TTFT + G · TPOT)`.
pub fn output_tok_s(est: &Estimator, s: &Scenario, batch: f64, prompt: f64, output: f64) -> f64 {
    let b = steady_state(est, s, batch, prompt, output);
    let ttft = est.prefill_pass_s(s, prompt.max(1.0));
    closed_loop_tok_s(est, s, b.running, b.step_s, ttft, output)
}

/// Output tokens per second of a replica running `running` sequences at
/// `step_s` per token after a `ttft_s` prompt pass each, `output` tokens
/// per request: `running · G / (G · step + TTFT)`, capped at what the
/// engine's server front end passes ([`frontend_req_s`] requests per
/// second, `G` tokens each).
pub fn closed_loop_tok_s(
    est: &Estimator,
    s: &Scenario,
    running: f64,
    step_s: f64,
    ttft_s: f64,
    output: f64,
) -> f64 {
    let output = output.max(1.0);
    let gpu = running * output / (output * step_s + ttft_s);
    gpu.min(frontend_req_s(est, s) * output)
}

/// Requests per second one replica's server front end can pass
/// ([`crate::efficiency::EngineProfile::frontend_ms_per_request`]); infinite
/// where the engine has no known limit and for the constant-efficiency
/// baseline.
pub fn frontend_req_s(est: &Estimator, s: &Scenario) -> f64 {
    let h = s.engine.profile(s.hw).frontend_ms_per_request;
    if est.factors.is_baseline() || h <= 0.0 {
        f64::INFINITY
    } else {
        1e3 / h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::efficiency::{EfficiencyTable, Engine};
    use crate::hardware::HardwareCatalogue;
    use crate::model::ModelCatalogue;
    use crate::quant::Quant;

    fn with<T>(gpu: &str, engine: Engine, f: impl FnOnce(&Scenario, &Estimator) -> T) -> T {
        let models = ModelCatalogue::builtin().unwrap();
        let hw = HardwareCatalogue::builtin().unwrap();
        let s = Scenario {
            model: models.get("llama-3.1-8b").unwrap(),
            hw: hw.get(gpu).unwrap(),
            quant: Quant::parse("fp16").unwrap(),
            kv_bytes: 2.0,
            engine,
            tp: 1,
            pp: 1,
            batch: 1,
            prompt_tokens: 1024,
            gen_tokens: 128,
            context: 1152,
            memory_headroom: 0.0,
            ubatch: None,
        };
        f(&s, &Estimator::new(EfficiencyTable::priors_only()))
    }

    #[test]
    fn one_stream_is_the_plain_decode_step_plus_its_host_cost() {
        with("h100-sxm", Engine::Vllm, |s, est| {
            let b = steady_state(est, s, 1.0, 1024.0, 128.0);
            assert_eq!(b.running, 1.0);
            assert_eq!(b.prefill_tokens_per_step, 0.0);
            let plain = est.tpot_s(s, 1.0, 1024.0 + 64.0);
            assert!((b.step_s - plain).abs() < 1e-9, "{} vs {plain}", b.step_s);
        });
    }

    #[test]
    fn interleaved_prefill_and_kv_reads_make_batching_sublinear() {
        with("h100-sxm", Engine::Vllm, |s, est| {
            let one = steady_state(est, s, 1.0, 1024.0, 128.0);
            let many = steady_state(est, s, 64.0, 1024.0, 128.0);
            // More throughput, but far from 64× one stream: every step also
            // reads 64 KV caches and carries 63 × 1024 / 128 prompt tokens.
            assert!(many.tok_s > 4.0 * one.tok_s);
            assert!(many.tok_s < 0.5 * 64.0 * one.tok_s, "{many:?}");
            assert!((many.prefill_tokens_per_step - 63.0 * 8.0).abs() < 1e-9);
            // Long prompts with short outputs are prefill-bound: compute.
            assert_eq!(many.regime, "compute");
        });
    }

    #[test]
    fn decode_rows_and_the_prompt_chunk_are_padded_to_tiles_together() {
        with("h100-sxm", Engine::Vllm, |s, est| {
            let (p, _) = est.factors_for(s);
            // 100 running, 99 × 1024 / 128 = 792 prompt tokens a step on
            // average: 792 / 1024 of the steps carry one whole prompt (100 +
            // 1024 rows, computed as 1152), the others only the decode rows
            // (128).
            let b = steady_state(est, s, 100.0, 1024.0, 128.0);
            assert_eq!(b.running, 100.0);
            let f = 792.0 / 1024.0;
            let one = s.forward_compute(1.0, b.context);
            let chunk = s.forward_compute(1024.0, 0.0);
            let decode = 100.0 * one.attn_s;
            let want = (1.0 - f) * (128.0 * one.linear_s + decode)
                + f * (1152.0 * one.linear_s + decode + chunk.attn_s);
            assert!(
                (b.compute_s * p.factor.efficiency - want).abs() < 1e-12,
                "{b:?} vs {want}"
            );
        });
    }

    #[test]
    fn a_step_that_carries_a_prompt_costs_more_than_the_average_step() {
        // 32 sequences of 256 in / 128 out on an RTX 4090: about a quarter
        // of the steps carry a whole 256-token prompt. Decoding alone sits
        // on the weight read; a step with a prompt is compute-bound.
        // Spreading the prompts evenly (62 tokens every step) would hide
        // them under the weight read.
        with("rtx-4090", Engine::Vllm, |s, est| {
            let (p, d) = est.factors_for(s);
            let b = steady_state(est, s, 32.0, 256.0, 128.0);
            assert!((b.prefill_tokens_per_step - 31.0 * 2.0).abs() < 1e-9);
            let per_seq = 32.0 * s.engine.profile(s.hw).per_seq_overhead_ms / 1e3;
            let overhead = d.factor.overhead_ms / 1e3 + per_seq;
            let smooth = {
                let mut t = decode_terms(s, 32.0, b.context);
                let c = s.forward_compute(256.0, 0.0);
                t.compute_s += (s.gemm_rows(94.0) - s.gemm_rows(32.0)) * c.linear_s / 256.0
                    + 62.0 / 256.0 * c.attn_s;
                t.attn_compute_s += 62.0 / 256.0 * c.attn_s;
                t.roofline_s(p.factor, d.factor) + overhead
            };
            assert!(b.step_s > 1.15 * smooth, "{} vs {smooth}", b.step_s);
        });
    }

    #[test]
    fn a_prompt_longer_than_the_step_budget_is_split() {
        // vLLM on an H100 computes 8192 tokens a step: beside `n` decode
        // tokens a 32,000-token prompt goes in chunks of 8192 − n, and a
        // step carries k or k + 1 of them so that the mean is
        // (n − 1) × 32,000 / 128 prompt tokens.
        with("h100-sxm", Engine::Vllm, |s, est| {
            let (p, _) = est.factors_for(s);
            let b = steady_state(est, s, 16.0, 32_000.0, 128.0);
            let n = b.running;
            assert!(n >= 2.0, "{b:?}");
            let q = (n - 1.0) * 32_000.0 / 128.0;
            let u = 8192.0 - n;
            let (k, f) = ((q / u).floor(), q / u - (q / u).floor());
            let one = s.forward_compute(1.0, b.context);
            let chunk = s.forward_compute(32_000.0, 0.0);
            let rows = |x: f64| s.gemm_rows(n + x) - s.gemm_rows(n);
            let extra = |x: f64| rows(x) * one.linear_s + x / 32_000.0 * chunk.attn_s;
            let want = s.gemm_rows(n) * one.linear_s
                + n * one.attn_s
                + (1.0 - f) * extra(k * u)
                + f * extra((k + 1.0) * u);
            let got = b.compute_s * p.factor.efficiency;
            assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
        });
    }

    #[test]
    fn running_sequences_are_capped_by_kv_memory_then_by_the_engine() {
        with("a10g", Engine::Vllm, |s, est| {
            // 24 GiB × 0.9 − 16 GB of weights leaves ~7.2 GB: ~47 sequences
            // of 1152 tokens × 128 KiB.
            let b = steady_state(est, s, 1000.0, 1024.0, 128.0);
            assert_eq!(b.limit, BatchLimit::KvCapacity);
            assert!((42.0..52.0).contains(&b.running), "{b:?}");
            let more = steady_state(est, s, 5000.0, 1024.0, 128.0);
            assert_eq!(more.tok_s, b.tok_s, "waiting requests add no throughput");
        });
        with("h200", Engine::Tgi, |s, est| {
            let b = steady_state(est, s, 1000.0, 128.0, 128.0);
            assert_eq!((b.limit, b.running), (BatchLimit::EngineCap, 128.0));
        });
    }

    #[test]
    fn host_cost_is_c0_plus_c1_per_running_sequence() {
        with("h100-sxm", Engine::Vllm, |s, est| {
            let (p, d) = est.factors_for(s);
            let c0 = d.factor.overhead_ms;
            let c1 = s.engine.profile(s.hw).per_seq_overhead_ms;
            assert!(c0 > 0.0 && c1 > 0.0, "{c0} {c1}");
            for n in [1.0, 16.0, 200.0] {
                let b = steady_state(est, s, n, 1024.0, 128.0);
                let want = (c0 + n * c1) / 1e3;
                assert!((b.overhead_s - want).abs() < 1e-12, "{n}: {b:?}");
            }
            // A step of 200 sequences pays 199 more per-sequence costs than
            // one sequence, on top of its roofline terms.
            let roof = |n| decode_time(&decode_terms(s, n, 1000.0), p.factor, d.factor);
            let extra = est.tpot_s(s, 200.0, 1000.0)
                - roof(200.0)
                - (est.tpot_s(s, 1.0, 1000.0) - roof(1.0));
            assert!((extra - 199.0 * c1 / 1e3).abs() < 1e-12, "{extra}");
        });
    }

    #[test]
    fn a_one_process_front_end_caps_closed_loop_throughput() {
        // 1000 short requests in flight: the GPU would serve far more than
        // vLLM's API server passes, 1000 / h requests per second × 4 tokens.
        with("h100-sxm", Engine::Vllm, |s, est| {
            let h = s.engine.profile(s.hw).frontend_ms_per_request;
            assert!(h > 0.0);
            let t = output_tok_s(est, s, 1000.0, 128.0, 4.0);
            assert!((t - 4.0 * 1e3 / h).abs() < 1e-9, "{t}");
            // One stream is far below the limit: unchanged.
            let b = steady_state(est, s, 1.0, 128.0, 4.0);
            let one = output_tok_s(est, s, 1.0, 128.0, 4.0);
            let ttft = est.prefill_pass_s(s, 128.0);
            assert!((one - 4.0 / (4.0 * b.step_s + ttft)).abs() < 1e-9);
        });
        // No known front-end limit (TensorRT-LLM), and the baseline: none.
        with("h100-sxm", Engine::TrtLlm, |s, est| {
            assert_eq!(frontend_req_s(est, s), f64::INFINITY);
            assert!(output_tok_s(est, s, 1000.0, 128.0, 4.0) > 4.0 * 1e3 / 13.0 * 2.0);
        });
        with("h100-sxm", Engine::Vllm, |s, _| {
            let baseline = Estimator::new(EfficiencyTable::baseline());
            assert_eq!(frontend_req_s(&baseline, s), f64::INFINITY);
        });
    }

    #[test]
    fn closed_loop_throughput_counts_each_prompt_once() {
        with("rtx-4090", Engine::LlamaCpp, |s, est| {
            let b = steady_state(est, s, 1.0, 1024.0, 128.0);
            let t = output_tok_s(est, s, 1.0, 1024.0, 128.0);
            let ttft = est.prefill_pass_s(s, 1024.0);
            assert!((t - 128.0 / (ttft + 128.0 * b.step_s)).abs() < 1e-9);
            assert!(t < b.tok_s);
        });
    }
    #[test]
    fn a_layer_split_holds_more_but_one_stream_is_no_faster_and_tensor_parallel_is() {
        with("rtx-4090", Engine::LlamaCpp, |s, est| {
            let one = est.tpot_s(s, 1.0, 1024.0);
            let layers = Scenario { pp: 2, ..s.clone() };
            let tensor = Scenario { tp: 2, ..s.clone() };
            let split = est.tpot_s(&layers, 1.0, 1024.0);
            // Same bytes read per token, plus one activation hand-off.
            assert!(split >= one && split < one * 1.01, "{split} vs {one}");
            assert!(est.tpot_s(&tensor, 1.0, 1024.0) < 0.7 * one);
            // Memory adds up over the stages.
            assert!(est.kv_capacity_bytes(&layers) > est.kv_capacity_bytes(s));
            assert_eq!(micro_batches(&layers, 32.0), 1.0);
        });
    }

    #[test]
    fn pipelining_engines_keep_every_stage_busy_at_batch_above_one() {
        with("h100-sxm", Engine::Vllm, |s, est| {
            let staged = Scenario { pp: 2, ..s.clone() };
            assert_eq!(micro_batches(&staged, 1.0), 1.0);
            assert_eq!(micro_batches(&staged, 64.0), 2.0);
            let one = steady_state(est, s, 256.0, 1024.0, 128.0);
            let two = steady_state(est, &staged, 256.0, 1024.0, 128.0);
            assert_eq!(two.running, one.running);
            // Two micro-batches of half the sequences each: more tokens a second.
            assert!(
                two.tok_s > 1.3 * one.tok_s,
                "{} vs {}",
                two.tok_s,
                one.tok_s
            );
            // One stream passes the stages in turn.
            let single = steady_state(est, &staged, 1.0, 1024.0, 128.0);
            let base = steady_state(est, s, 1.0, 1024.0, 128.0);
            assert!(single.tok_s <= base.tok_s);
        });
    }

    #[test]
    fn vllm_before_0_6_pays_its_host_cost_per_sequence_at_large_batch() {
        let est = Estimator::new(EfficiencyTable::priors_only());
        let models = ModelCatalogue::builtin().unwrap();
        let hw = HardwareCatalogue::builtin().unwrap();
        let s = Scenario {
            model: models.get("llama-3.1-8b").unwrap(),
            hw: hw.get("h100-sxm").unwrap(),
            quant: Quant::parse("fp16").unwrap(),
            kv_bytes: 2.0,
            engine: Engine::Vllm,
            tp: 1,
            pp: 1,
            batch: 1,
            prompt_tokens: 256,
            gen_tokens: 256,
            context: 512,
            memory_headroom: 0.1,
            ubatch: None,
        };
        let old = Scenario {
            engine: Engine::VllmV0,
            ..s.clone()
        };
        let (now, then) = (
            steady_state(&est, &s, 256.0, 256.0, 256.0),
            steady_state(&est, &old, 256.0, 256.0, 256.0),
        );
        assert!(
            then.tok_s < 0.8 * now.tok_s,
            "{} vs {}",
            then.tok_s,
            now.tok_s
        );
        // At one stream the difference is one sequence's host cost.
        let (a, b) = (
            steady_state(&est, &s, 1.0, 256.0, 256.0),
            steady_state(&est, &old, 1.0, 256.0, 256.0),
        );
        assert!(b.step_s - a.step_s < 0.2e-3, "{} vs {}", b.step_s, a.step_s);
    }
}
