//! One scenario (a model on one kind of device, with an engine, a weight
//! format and a parallel split) and the roofline terms of its steps.
//!
//! Every time is a roofline term divided by a fitted efficiency plus a fixed
//! overhead ([`crate::efficiency`]):
//!
//! - decode step  = max(bytes / (BW·η_d), FLOPs / (peak·η_p)) + c_d + allreduce + kernel boundaries
//! - prefill pass = max(FLOPs / (peak·η_p), bytes / (BW·η_d)) + c_p + allreduce + kernel boundaries
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

use crate::efficiency::{Engine, Factor, SCORE_BYTES_PER_ELEMENT};
use crate::engine::KV_CONCAT_PASSES;
use crate::error::PlannerError;
use crate::hardware::{Hardware, HardwareClass};
use crate::model::ModelSpec;
use crate::quant::{ComputeDtype, Quant};

/// Latency of one hand-off between pipeline stages (launch +
/// synchronisation), seconds; all-reduce latency is [`crate::collective`]'s.
pub const ALLREDUCE_LATENCY_S: f64 = crate::collective::ONE_SHOT_LATENCY_S;
/// The most sequences in flight a scenario takes (`--batch`): 2^20, far
/// past any engine's cap on running sequences.
pub const MAX_BATCH: u32 = 1 << 20;

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
    /// llama.cpp's `--ubatch-size` where the user gives one; else the
    /// engine's default ([`Engine::prompt_micro_batches`]).
    pub ubatch: Option<u32>,
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
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(PlannerError::invalid(
                "batch",
                format!(
                    "must be 1-{MAX_BATCH} sequences in flight, got {}",
                    self.batch
                ),
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

    pub(crate) fn tp(&self) -> f64 {
        f64::from(self.tp)
    }

    /// Devices one replica holds: `tp · pp`.
    pub fn devices(&self) -> f64 {
        f64::from(self.tp) * f64::from(self.pp.max(1))
    }

    /// Weights of one replica, bytes.
    pub fn weight_bytes(&self) -> f64 {
        self.model.weight_bytes(&self.quant, self.engine)
    }

    /// KV bytes one token takes across the replica: the model's per-token
    /// KV times the copies its tensor-parallel ranks hold
    /// ([`ModelSpec::kv_copies`](crate::ModelSpec::kv_copies): KV heads
    /// fewer than ranks, or MLA's latent, are held by every rank that needs
    /// them). Divided by `tp` it is what one device stores and reads.
    pub fn kv_bytes_per_token(&self) -> f64 {
        self.model.kv_bytes_per_token(self.kv_bytes) * self.model.kv_copies(self.tp)
    }

    /// KV tokens one sequence of `ctx` tokens keeps per layer, averaged over
    /// the layers ([`ModelSpec::kv_tokens_held`] on this engine).
    pub fn kv_tokens_held(&self, ctx: f64) -> f64 {
        self.model.kv_tokens_held(ctx, self.engine)
    }

    /// KV bytes one sequence of `ctx` tokens holds over the replica:
    /// [`Self::kv_bytes_per_token`] × [`Self::kv_tokens_held`].
    pub fn kv_bytes_per_seq(&self, ctx: f64) -> f64 {
        self.kv_bytes_per_token() * self.kv_tokens_held(ctx)
    }

    /// Times a decode step moves the KV cache: once, or
    /// [`KV_CONCAT_PASSES`] where the engine grows it by concatenation
    /// ([`Engine::concatenates_kv_cache`]). A model with sliding-window
    /// layers gets transformers' `HybridCache`, preallocated, instead.
    pub fn kv_passes(&self) -> f64 {
        if self.engine.concatenates_kv_cache() && self.model.sliding_window.is_none() {
            KV_CONCAT_PASSES
        } else {
            1.0
        }
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

    /// The hardware class whose efficiency factors the scenario takes: the
    /// catalogue's, except that llama.cpp (every build, and Ollama) on a
    /// datacenter card built on a GeForce die
    /// ([`Hardware::is_geforce_die_datacenter_card`]) takes the consumer
    /// factors, its kernels running there as on the GeForce siblings.
    pub fn factor_class(&self) -> HardwareClass {
        if self.engine.family() == Engine::LlamaCpp && self.hw.is_geforce_die_datacenter_card() {
            HardwareClass::Consumer
        } else {
            self.hw.class
        }
    }

    pub(crate) fn peak_flops(&self) -> f64 {
        self.rate_tflops(self.weight_compute()) * 1e12
    }

    /// The rate the weight matmuls compute at ([`Engine::weight_compute`]).
    pub fn weight_compute(&self) -> ComputeDtype {
        self.engine.weight_compute(&self.quant)
    }

    /// The device's rate for `dtype` as this engine's kernels see it
    /// ([`Hardware::fp16_tflops_for`]).
    fn rate_tflops(&self, dtype: ComputeDtype) -> f64 {
        self.hw
            .fp16_tflops_for(dtype, self.engine.accumulates_in_fp16())
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
        let attn_peak = self.rate_tflops(attn_dtype) * 1e12;
        let tp = self.tp();
        Compute {
            linear_flops: linear / tp,
            linear_s: linear / self.peak_flops() / tp,
            attn_flops: attn / tp,
            attn_s: attn / attn_peak / tp,
        }
    }

    pub(crate) fn bandwidth(&self) -> f64 {
        crate::stream::read_gbps(self.hw) * 1e9
    }

    /// The per-step time that tensor parallelism does not shorten: the
    /// all-reduces of `tokens` tokens ([`Self::allreduce_s`]), the
    /// boundaries between the step's kernels ([`Self::kernel_bubbles_s`])
    /// and block-FP8 GEMMs' floors ([`Self::block_fp8_floors_s`]), less the
    /// launches a CUDA graph saves a one-token step
    /// ([`Self::cuda_graph_saving_s`]).
    pub fn fixed_step_s(&self, tokens: f64) -> f64 {
        self.allreduce_s(tokens) + self.kernel_bubbles_s() + self.block_fp8_floors_s(tokens)
            - self.cuda_graph_saving_s(tokens)
            + self.f16_dequant_s(tokens)
    }

    /// Time of the kernels that dequantise the weights to F16 before each
    /// cuBLAS GEMM where the engine does that
    /// ([`Engine::dequantises_weights_for_cublas`]): a step of more than
    /// [`LLAMA_CPP_MMQ_MAX_BATCH`] tokens on an NVIDIA GPU with tensor cores
    /// (compute capability 7.0 or later) with weights in a GGUF block
    /// format. Each micro-batch of the engine's
    /// [`EngineProfile::max_batched_tokens`] reads every weight it multiplies
    /// once more in its quantised form and writes it in F16
    /// ([`F16_DEQUANT_BYTES_PER_WEIGHT`]), at the device's stream bandwidth,
    /// after the GEMMs' own work.
    ///
    /// [`LLAMA_CPP_MMQ_MAX_BATCH`]: crate::engine::LLAMA_CPP_MMQ_MAX_BATCH
    /// [`F16_DEQUANT_BYTES_PER_WEIGHT`]: crate::engine::F16_DEQUANT_BYTES_PER_WEIGHT
    /// [`EngineProfile::max_batched_tokens`]: crate::engine::EngineProfile::max_batched_tokens
    pub fn f16_dequant_s(&self, tokens: f64) -> f64 {
        let applies = self.engine.dequantises_weights_for_cublas()
            && tokens > crate::engine::LLAMA_CPP_MMQ_MAX_BATCH
            && self.hw.compute_capability.is_some_and(|cc| cc >= 7.0)
            && self.quant.is_gguf_block_format();
        if !applies {
            return 0.0;
        }
        let ubatch = f64::from(self.engine.profile(self.hw).max_batched_tokens);
        let passes = (tokens / ubatch).ceil();
        let params = self.model.decode_read_params(tokens.min(ubatch));
        let per_weight =
            crate::engine::F16_DEQUANT_BYTES_PER_WEIGHT + self.quant.bytes_per_weight();
        passes * params * per_weight / self.tp() / self.bandwidth()
    }

    /// Host time a pass of `tokens` tokens saves where the engine replays it
    /// as a CUDA graph ([`Engine::replays_one_token_steps_as_cuda_graphs`]):
    /// layers × [`LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S`] for one token on
    /// an NVIDIA GPU of compute capability 8.0 or later with the weights not
    /// split by rows (`tp` 1); 0 otherwise.
    ///
    /// [`LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S`]: crate::engine::LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S
    pub fn cuda_graph_saving_s(&self, tokens: f64) -> f64 {
        let replayed = self.engine.replays_one_token_steps_as_cuda_graphs()
            && tokens <= 1.0
            && self.tp <= 1
            && self.hw.is_nvidia_ampere_or_newer();
        if replayed {
            self.model.layers as f64 * crate::engine::LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S
        } else {
            0.0
        }
    }

    /// What block-FP8 GEMMs' time floors add to a pass of `tokens` tokens
    /// ([`crate::block_fp8::extra_s`]); 0 where they do not apply.
    pub fn block_fp8_floors_s(&self, tokens: f64) -> f64 {
        let pass = crate::block_fp8::Pass {
            tokens,
            tp: self.tp(),
            bandwidth: self.bandwidth(),
            peak_flops: self.peak_flops(),
        };
        let gpu = self.hw.class.is_gpu();
        crate::block_fp8::extra_s(self.model, &self.quant, self.engine, gpu, pass)
    }

    /// Kernel boundaries of one forward pass on a GPU, seconds: `(layers ×`
    /// [`Engine::kernel_boundaries_per_layer`] `+ MoE layers ×`
    /// [`Engine::moe_extra_boundaries_per_layer`]`) ×`
    /// [`KERNEL_BUBBLE_S`](crate::engine::KERNEL_BUBBLE_S); 0 for engines
    /// without a count and off GPUs.
    pub fn kernel_bubbles_s(&self) -> f64 {
        match self.engine.kernel_boundaries_per_layer() {
            Some(per_layer) if self.hw.class.is_gpu() => {
                let moe = self.engine.moe_extra_boundaries_per_layer().unwrap_or(0.0)
                    * self.model.moe_layers() as f64;
                (self.model.layers as f64 * per_layer + moe) * crate::engine::KERNEL_BUBBLE_S
            }
            _ => 0.0,
        }
    }

    /// How the engine cuts a prompt, `(n_batch, n_ubatch)`
    /// ([`Engine::prompt_micro_batches`]), with the user's `--ubatch-size`
    /// where given (a logical batch is never smaller than its micro-batch).
    pub fn prompt_micro_batches(&self) -> Option<(u32, u32)> {
        let (n_batch, n_ubatch) = self.engine.prompt_micro_batches()?;
        Some(match self.ubatch {
            Some(u) => (n_batch.max(u), u),
            None => (n_batch, n_ubatch),
        })
    }

    /// Routed-expert FLOPs a prompt pass of `tokens` tokens (every sequence
    /// in it) computes beyond its own, per device, where the engine runs
    /// each expert's tokens in whole tiles ([`Engine::moe_prompt_tile`]): the
    /// pass is cut into micro-batches ([`Engine::prompt_micro_batches`]) and
    /// each pays [`ModelSpec::expert_tile_padding`] on its routed experts'
    /// FLOPs.
    /// 0 for a dense model or an engine whose expert GEMMs fit their tokens.
    pub fn expert_tile_flops(&self, tokens: f64) -> f64 {
        let Some(tile) = self.engine.moe_prompt_tile(self.hw.class) else {
            return 0.0;
        };
        let Some((_, ubatch)) = self.prompt_micro_batches() else {
            return 0.0;
        };
        let Some(active) = self.model.moe.as_ref().map(|m| f64::from(m.active)) else {
            return 0.0;
        };
        let ubatch = f64::from(ubatch);
        let full = (tokens / ubatch).floor();
        let rest = tokens - full * ubatch;
        let mut extra_tokens = full * ubatch * (self.model.expert_tile_padding(ubatch, tile) - 1.0);
        if rest >= 1.0 {
            extra_tokens += rest * (self.model.expert_tile_padding(rest, tile) - 1.0);
        }
        2.0 * self.model.routed_expert_params(active) * extra_tokens / self.tp()
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
    /// What tensor parallelism does not shorten: all-reduces and kernel
    /// boundaries ([`Scenario::fixed_step_s`]).
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
    let weights = s.model.read_bytes(batch, &s.quant, s.engine);
    // Windowed layers read at most their window, whatever the cache keeps.
    let keys = s.model.attended_keys(ctx);
    let kv = batch * keys * s.kv_bytes_per_token() * s.kv_passes()
        + s.attention_scores_bytes(batch, keys);
    let bytes = (weights + kv) / s.tp();
    let c = s.forward_compute(1.0, ctx);
    let rows = s.gemm_rows(batch);
    Terms {
        bytes,
        flops: rows * c.linear_flops + batch * c.attn_flops,
        memory_s: bytes / s.bandwidth(),
        compute_s: rows * c.linear_s + batch * c.attn_s,
        comm_s: s.fixed_step_s(batch),
        kv_memory_s: kv / s.tp() / s.bandwidth(),
        attn_compute_s: batch * c.attn_s,
    }
}

/// One prefill pass over `tokens` prompt tokens (all sequences together).
pub fn prefill_terms(s: &Scenario, tokens: f64, seqs: f64) -> Terms {
    let per_seq = (tokens / seqs.max(1.0)).max(1.0);
    let weights = s.model.read_bytes(tokens, &s.quant, s.engine);
    let seqs = seqs.max(1.0);
    // Causal: the prompt's tokens attend over (n + 1) / 2 positions on
    // average (fewer in windowed layers).
    let keys = s.model.mean_causal_keys(per_seq, 0.0);
    let scores = seqs * s.attention_scores_bytes(per_seq, keys) / s.tp();
    let bytes = weights / s.tp() + scores;
    let mut c = s.forward_compute(per_seq, 0.0);
    // The sequences' tokens share the pass's micro-batches, and so their
    // experts' tiles.
    let tiles = s.expert_tile_flops(tokens) / seqs;
    c.linear_flops += tiles;
    c.linear_s += tiles / s.peak_flops();
    // Pipeline stages overlap the micro-batches of one prompt where the
    // engine cuts it into them; the roofline times shrink by that overlap.
    let k = if seqs <= 1.0 {
        prompt_overlap(s, tokens)
    } else {
        1.0
    };
    Terms {
        bytes,
        flops: seqs * (c.linear_flops + c.attn_flops),
        memory_s: k * bytes / s.bandwidth(),
        compute_s: k * seqs * (c.linear_s + c.attn_s),
        comm_s: s.fixed_step_s(tokens),
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

/// Fraction of a one-stage-at-a-time prompt pass left when `s.pp` stages
/// overlap the prompt's micro-batches ([`Scenario::prompt_micro_batches`]):
/// a logical batch of `u` micro-batches through `p` stages takes
/// `u + p − 1` stage-times instead of `u · p`, so its time is
/// `(u + p − 1) / (u · p)` of the sequential pass. Averaged over the
/// prompt's logical batches by their tokens; 1 with one stage, one
/// micro-batch, or an engine that does not cut prompts this way.
pub fn prompt_overlap(s: &Scenario, tokens: f64) -> f64 {
    let Some((n_batch, n_ubatch)) = s.prompt_micro_batches() else {
        return 1.0;
    };
    if s.pp <= 1 || tokens <= 0.0 {
        return 1.0;
    }
    let (n_batch, n_ubatch, stages) = (f64::from(n_batch), f64::from(n_ubatch), f64::from(s.pp));
    let mut left = tokens;
    let mut weighted = 0.0;
    while left > 0.0 {
        let chunk = left.min(n_batch);
        let u = (chunk / n_ubatch).ceil();
        weighted += chunk * (u + stages - 1.0) / (u * stages);
        left -= chunk;
    }
    weighted / tokens
}
