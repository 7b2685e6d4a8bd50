//! Efficiency factors: how far below the roofline real engines run.
//!
//! A roofline says a decode step cannot beat `bytes / bandwidth` and a prefill
//! cannot beat `FLOPs / peak`; real engines reach a fraction of that plus a
//! fixed cost per step (kernel launches, sampling, scheduling). Those two
//! numbers, an efficiency `η` and an overhead `c`, depend on the hardware
//! class, the engine and the phase, so they are kept per
//! (class, engine, phase) and fitted from measurements
//! ([`crate::calibrate`]). The shipped defaults (`data/efficiency.toml`) are
//! that fit on `data/measurements.csv`; anything without data falls back to
//! a coarser level and finally to the documented priors below.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{PlannerError, did_you_mean};
use crate::hardware::{Hardware, HardwareClass};

const DEFAULTS: &str = include_str!("../data/efficiency.toml");

/// An inference engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Engine {
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "sglang")]
    Sglang,
    #[serde(rename = "trt-llm")]
    TrtLlm,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    #[serde(rename = "mlc")]
    Mlc,
    #[serde(rename = "transformers")]
    Transformers,
    /// Hugging Face text-generation-inference.
    #[serde(rename = "tgi")]
    Tgi,
}

impl Engine {
    pub const ALL: [Self; 7] = [
        Self::Vllm,
        Self::Sglang,
        Self::TrtLlm,
        Self::LlamaCpp,
        Self::Mlc,
        Self::Transformers,
        Self::Tgi,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::Sglang => "sglang",
            Self::TrtLlm => "trt-llm",
            Self::LlamaCpp => "llama.cpp",
            Self::Mlc => "mlc",
            Self::Transformers => "transformers",
            Self::Tgi => "tgi",
        }
    }

    pub fn parse(s: &str) -> Result<Self, PlannerError> {
        let key = s.trim().to_ascii_lowercase();
        let key = match key.as_str() {
            "tensorrt-llm" | "trtllm" | "tensorrt" => "trt-llm",
            "llamacpp" | "llama-cpp" | "ollama" | "gguf" => "llama.cpp",
            "mlc-llm" => "mlc",
            "hf" | "huggingface" => "transformers",
            "text-generation-inference" | "tgi-server" => "tgi",
            other => other,
        };
        Self::ALL
            .into_iter()
            .find(|e| e.as_str() == key)
            .ok_or_else(|| PlannerError::UnknownValue {
                what: "engine",
                value: s.to_string(),
                suggestion: did_you_mean(key, Self::ALL.iter().map(|e| e.as_str())),
            })
    }

    /// Whether the engine writes attention scores to memory. llama.cpp
    /// without flash attention (the default of `llama-bench` and the server
    /// in the 2023–24 builds the shipped measurements come from; `-fa` turns
    /// flash attention on) computes `Q·Kᵀ` into an F32 matrix of `tokens ×
    /// context` per head, runs softmax over it in a kernel of its own and
    /// reads it back for `·V`. The other engines run fused (flash) attention
    /// kernels that keep the scores on chip. See [`SCORE_BYTES_PER_ELEMENT`].
    pub fn materialises_attention_scores(self) -> bool {
        matches!(self, Self::LlamaCpp)
    }

    /// Prior adjustment for an engine with no data at the level used: eager
    /// PyTorch (`transformers`) launches many more kernels per token and does
    /// not fuse attention, so it is assumed to reach 60% of the class's
    /// efficiency at 3× its overhead. Only a prior: calibrate to replace it.
    fn prior_adjust(self) -> (f64, f64) {
        match self {
            Self::Transformers => (0.6, 3.0),
            _ => (1.0, 1.0),
        }
    }

    /// How the engine runs the kernels of one decode step on a GPU, from
    /// its documentation (docs/planner.md, "Host cost per step and the server front end").
    ///
    /// - vLLM captures the decoder's forward pass as CUDA graphs at a set of
    ///   batch sizes and replays them for decode steps unless started with
    ///   `enforce_eager` (its CUDA-graphs design notes; `cudagraph_mode` in
    ///   the compilation config).
    /// - SGLang enables decode CUDA graphs by default up to
    ///   `--cuda-graph-max-bs` (`--disable-cuda-graph` turns them off).
    /// - TensorRT-LLM replays generation steps as CUDA graphs
    ///   (`cuda_graph_config` in the LLM API, a CUDA-graph option of the
    ///   older C++ runtime) and runs a compiled engine of fused kernels.
    /// - TGI's launcher captures graphs for small decode batches by default
    ///   (`--cuda-graphs`).
    /// - llama.cpp's CUDA backend, as in the 2023–24 builds the shipped
    ///   measurements come from, launches every kernel of its graph from the
    ///   host each token (later builds capture single-sequence decode as
    ///   CUDA graphs: calibrate on your build). MLC LLM is not assumed
    ///   either way (its own consumer fit decides), eager PyTorch launches
    ///   per operator.
    pub fn step_launch(self) -> StepLaunch {
        match self {
            Self::Vllm | Self::Sglang | Self::TrtLlm | Self::Tgi => StepLaunch::GraphReplay,
            Self::LlamaCpp | Self::Mlc | Self::Transformers => StepLaunch::PerKernel,
        }
    }

    /// The most fixed decode-step overhead (ms) the engine is assumed to pay
    /// on `class` when it has no fitted overhead of its own: for engines
    /// that replay decode steps as CUDA graphs on a GPU,
    /// [`GRAPH_REPLAY_STEP_OVERHEAD_MS`]; otherwise no bound (the pooled fit
    /// or the class prior stands). `None` for `class` means any class (a
    /// level pooled over classes).
    pub fn step_overhead_cap_ms(self, class: Option<HardwareClass>, phase: Phase) -> Option<f64> {
        let gpu =
            class.is_none_or(|c| matches!(c, HardwareClass::Datacenter | HardwareClass::Consumer));
        let cap = match self {
            Self::Vllm => VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS,
            _ => GRAPH_REPLAY_STEP_OVERHEAD_MS,
        };
        (phase == Phase::Decode && gpu && self.step_launch() == StepLaunch::GraphReplay)
            .then_some(cap)
    }
}

/// How an engine issues one decode step's kernels ([`Engine::step_launch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepLaunch {
    /// Every kernel launched from the host each step: the host cost (graph
    /// build, one launch per kernel, sampling) grows with the kernel count
    /// and sits between the GPU's kernels.
    PerKernel,
    /// The step captured once as a CUDA graph and replayed with one launch.
    GraphReplay,
}

/// Prior fixed overhead of one decode step, milliseconds, for an engine that
/// replays the step as a CUDA graph (set from how such a step runs, before
/// any evaluation; not fitted). What is left once the per-kernel launches
/// are gone: one graph launch (tens of µs); gaps of about a microsecond
/// between the graph's few hundred kernels on the GPU (~0.3–0.5 ms for a
/// 7–8B model); and the host work outside the graph that the engine does
/// not overlap with the GPU (preparing the step's inputs, sampling, reading
/// back the tokens; vLLM V1, SGLang and TensorRT-LLM schedule the next step
/// while the current one runs), about half a millisecond. The pooled
/// datacenter fit (~4 ms) is mostly llama.cpp builds of 2023 that launch
/// every kernel from the host, which is why it is not inherited.
pub const GRAPH_REPLAY_STEP_OVERHEAD_MS: f64 = 1.0;

/// vLLM's decode-step overhead prior, milliseconds: vllm-project/vllm#17866
/// (V1, Llama-3.2-1B) reports a TPOT of 2.73 ms at light load, about 1 ms of
/// it the GPU's, so at most 1.5 ms of fixed host time per step.
pub const VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS: f64 = 1.5;

/// How an engine batches at serving time, from its documented defaults:
/// what caps the sequences it runs together, what each running sequence
/// costs the host per step, how much memory it leaves unused, and whether
/// prompts are chunked into decode steps. These are documented constants
/// (docs/planner.md, "Batched serving"), not fitted values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EngineProfile {
    /// Default cap on sequences running together (vLLM `max_num_seqs`,
    /// TensorRT-LLM `max_batch_size`, TGI `max_concurrent_requests`); `None`
    /// when only KV-cache memory limits it (SGLang, llama.cpp slots as given).
    pub max_running: Option<u32>,
    /// Host time per running sequence per step (scheduling, sampling,
    /// detokenising, output processing), milliseconds.
    pub per_seq_overhead_ms: f64,
    /// Fraction of device memory the engine leaves unused by default
    /// (`1 − gpu_memory_utilization`; SGLang `1 − mem_fraction_static`).
    pub memory_reserve: f64,
    /// Prompts are split into chunks that ride in the same forward pass as
    /// the running sequences' decode tokens (one weight read for both);
    /// otherwise a prefill is a pass of its own that stalls decoding.
    pub chunked_prefill: bool,
    /// Default cap on the tokens one step computes (vLLM
    /// `max_num_batched_tokens`, SGLang `chunked_prefill_size`, TensorRT-LLM
    /// `max_num_tokens`, TGI `max_batch_prefill_tokens`, llama.cpp
    /// `n_ubatch`): a prompt longer than what is left of it after the
    /// decode tokens is split over several steps.
    pub max_batched_tokens: u32,
    /// Latency each request spends in the server outside the engine's steps
    /// (HTTP, prompt rendering and tokenising, hand-off to the engine loop,
    /// detokenising and streaming the first token back), milliseconds: in
    /// every TTFT, occupying no GPU time. Used by the serving simulator
    /// ([`crate::sim`]); 0 where no published figure separates it.
    pub request_overhead_ms: f64,
    /// Host time each request holds the engine's HTTP server where that
    /// server is one process (parsing, chat template, tokenising, streaming
    /// the tokens back), milliseconds: a replica takes in at most
    /// `1000 / frontend_ms_per_request` requests per second whatever the GPU
    /// does. Used by [`crate::batching::frontend_req_s`] and the serving
    /// simulator; 0 where no limit is known.
    pub frontend_ms_per_request: f64,
    /// The scheduler forms the next batch while the current one runs
    /// (overlap scheduling: SGLang, TensorRT-LLM's PyTorch backend), so a
    /// request reaching the queue during step *k* joins step *k + 2* at the
    /// earliest; an idle engine starts it at once. Used by the serving
    /// simulator ([`crate::sim`]); see docs/planner.md, "Validation of the
    /// simulator".
    pub overlap_schedule: bool,
}

impl Engine {
    /// The engine's serving defaults on `hw`. vLLM V1's OpenAI server raises
    /// `max_num_seqs` from 256 to 1024 and `max_num_batched_tokens` from 2048
    /// to 8192 on devices with at least 70 GiB, except the A100, which keeps
    /// the small defaults (vLLM's `test_defaults_with_usage_context` pins
    /// both); SGLang sizes `chunked_prefill_size` by memory (2048 under 35
    /// GiB, 4096 under 60, 16384 from 160, else 8192); TensorRT-LLM's LLM
    /// API defaults `max_batch_size` to 2048 and `max_num_tokens` to 8192;
    /// TGI's router admits 128 concurrent requests and 4096 prefill tokens a
    /// batch.
    pub fn profile(self, hw: &Hardware) -> EngineProfile {
        let memory_gb = hw.memory_gb;
        let vllm_large = memory_gb >= 70.0 && !hw.is_a100();
        let (max_running, per_seq_overhead_ms, memory_reserve, chunked_prefill) = match self {
            Self::Vllm => (Some(if vllm_large { 1024 } else { 256 }), 0.02, 0.10, true),
            Self::Sglang => (None, 0.01, 0.12, true),
            Self::TrtLlm => (Some(2048), 0.004, 0.10, true),
            Self::Tgi => (Some(128), 0.02, 0.10, true),
            Self::LlamaCpp => (None, 0.03, 0.0, true),
            Self::Mlc => (None, 0.02, 0.10, true),
            Self::Transformers => (None, 0.10, 0.0, false),
        };
        let max_batched_tokens = match self {
            Self::Vllm if vllm_large => 8192,
            Self::Vllm => 2048,
            Self::Sglang if memory_gb < 35.0 => 2048,
            Self::Sglang if memory_gb < 60.0 => 4096,
            Self::Sglang if memory_gb >= 160.0 => 16384,
            Self::Sglang | Self::TrtLlm => 8192,
            Self::Tgi => 4096,
            Self::LlamaCpp => 512,
            Self::Mlc => 2048,
            // Whole prompts in one pass of their own.
            Self::Transformers => u32::MAX,
        };
        EngineProfile {
            max_running,
            per_seq_overhead_ms,
            memory_reserve,
            chunked_prefill,
            max_batched_tokens,
            request_overhead_ms: self.request_overhead_ms(),
            frontend_ms_per_request: match self {
                Self::Vllm => VLLM_FRONTEND_MS_PER_REQUEST,
                _ => 0.0,
            },
            // sgl-project/sglang#2067 (default since November 2024),
            // NVIDIA/TensorRT-LLM#4174 (default since May 2025).
            overlap_schedule: matches!(self, Self::Sglang | Self::TrtLlm),
        }
    }

    /// See [`EngineProfile::request_overhead_ms`]. vLLM's OpenAI server
    /// and its engine core are separate processes (tokenising and
    /// detokenising in the API server, requests and outputs passed between
    /// them). kvcached PR 331's H100 run of Qwen3-0.6B at 16 req/s (vLLM
    /// 0.19, 512-token prompts) has a mean TTFT of 38.9 ms, of which the
    /// engine's own steps (the prefill pass and the wait for the step in
    /// flight, as the simulator models them) explain 8.5 ms: the rest,
    /// rounded, is this constant. Checked, not fitted, on GPUStack's Qwen3-8B
    /// H100 run (vLLM 0.11): 51.6 ms simulated against 64.0 published
    /// (docs/planner.md, "Validation of the simulator"). Other engines: no
    /// published figure separates it yet.
    fn request_overhead_ms(self) -> f64 {
        match self {
            Self::Vllm => VLLM_REQUEST_OVERHEAD_MS,
            _ => 0.0,
        }
    }
}

/// Memory traffic per attention score of an engine that materialises them
/// ([`Engine::materialises_attention_scores`]), bytes: four passes over an
/// F32 element, written by the `Q·Kᵀ` matmul, read and written by softmax,
/// read by the `·V` matmul. (llama.cpp's CUDA build also converts the
/// probabilities to F16 for cuBLAS, a further 4 + 2 + 2 bytes not counted.)
pub const SCORE_BYTES_PER_ELEMENT: f64 = 16.0;

/// vLLM's per-request server latency, ms (`Engine::request_overhead_ms`).
const VLLM_REQUEST_OVERHEAD_MS: f64 = 30.0;

/// Host time one request holds vLLM's API server, ms
/// ([`EngineProfile::frontend_ms_per_request`]): pull request
/// vllm-project/vllm#17546 (May 2025) ran one API-server process in front of
/// two data-parallel engines (2×A100, Llama-3.2-1B, ShareGPT, offered 120
/// req/s) and completed 10,000 requests in 130.7 s, 76.5 req/s: 13 ms each.
pub const VLLM_FRONTEND_MS_PER_REQUEST: f64 = 13.0;

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Prefill (prompt processing, compute-bound) or decode (one token per
/// sequence per step, bandwidth-bound at small batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Prefill,
    Decode,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prefill => "prefill",
            Self::Decode => "decode",
        }
    }
}

/// One fitted or prior pair: `time = roofline / efficiency + overhead`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    /// Fraction of the roofline reached (bandwidth for decode, compute for prefill).
    pub efficiency: f64,
    /// Fixed cost per step (decode) or per prefill pass, milliseconds.
    pub overhead_ms: f64,
}

/// A table entry; `*` in `class` or `engine` is a pooled (coarser) level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub class: String,
    pub engine: String,
    pub phase: Phase,
    pub efficiency: f64,
    pub overhead_ms: f64,
    /// Measurements behind the fit (0 for a hand-set value).
    #[serde(default)]
    pub rows: usize,
    /// Whether `overhead_ms` was fitted (true) or inherited from the parent level.
    #[serde(default)]
    pub overhead_fitted: bool,
}

/// A factor together with the level it came from, for explanations.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub factor: Factor,
    pub level: String,
}

/// Documented priors by class and phase (used only when no table level has
/// data). Decode: consumer/datacenter GPUs reach 80-90% of bandwidth in good
/// kernels, Apple ~75%, CPUs and NPUs less; prefill: tensor-core GEMMs reach
/// 50-70% of dense peak end to end.
pub fn prior(class: HardwareClass, phase: Phase) -> Factor {
    let (efficiency, overhead_ms) = match (class, phase) {
        (HardwareClass::Datacenter, Phase::Decode) => (0.80, 4.0),
        (HardwareClass::Consumer, Phase::Decode) => (0.85, 3.0),
        (HardwareClass::Apple, Phase::Decode) => (0.75, 5.0),
        (HardwareClass::Cpu, Phase::Decode) => (0.60, 5.0),
        (HardwareClass::Npu, Phase::Decode) => (0.60, 6.0),
        (HardwareClass::Datacenter, Phase::Prefill) => (0.55, 5.0),
        (HardwareClass::Consumer, Phase::Prefill) => (0.70, 2.0),
        (HardwareClass::Apple, Phase::Prefill) => (0.60, 5.0),
        (HardwareClass::Cpu, Phase::Prefill) => (0.40, 10.0),
        (HardwareClass::Npu, Phase::Prefill) => (0.40, 10.0),
    };
    Factor {
        efficiency,
        overhead_ms,
    }
}

/// Efficiency factors with hierarchical fallback.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EfficiencyTable {
    #[serde(default, rename = "factor")]
    pub entries: Vec<Entry>,
    /// Set for the fixed-constant baseline: every lookup returns these.
    #[serde(skip)]
    constant: Option<(Factor, Factor)>,
}

impl EfficiencyTable {
    /// Whether this is the constant-efficiency baseline (no engine
    /// per-sequence costs: a plain roofline plus a fixed step overhead).
    pub fn is_baseline(&self) -> bool {
        self.constant.is_some()
    }
}

impl EfficiencyTable {
    /// The shipped defaults: the fit on `data/measurements.csv`.
    pub fn defaults() -> Result<Self, PlannerError> {
        Self::from_toml(DEFAULTS, "builtin efficiency.toml")
    }

    /// A table with no entries: priors only.
    pub fn priors_only() -> Self {
        Self::default()
    }

    /// The plain baseline of issue 7: 70% of bandwidth with 3 ms per decode
    /// step, 50% of peak compute, for every class and engine.
    pub fn baseline() -> Self {
        Self {
            entries: vec![],
            constant: Some((
                Factor {
                    efficiency: 0.5,
                    overhead_ms: 0.0,
                },
                Factor {
                    efficiency: 0.7,
                    overhead_ms: 3.0,
                },
            )),
        }
    }

    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PlannerError> {
        let t: Self = toml::from_str(text).map_err(|e| PlannerError::Toml {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        for e in &t.entries {
            let ok = e.efficiency.is_finite()
                && e.efficiency > 0.0
                && e.efficiency <= 2.0
                && e.overhead_ms.is_finite()
                && e.overhead_ms >= 0.0;
            if !ok {
                return Err(PlannerError::invalid(
                    format!(
                        "{origin}: factor {}/{}/{}",
                        e.class,
                        e.engine,
                        e.phase.as_str()
                    ),
                    format!(
                        "efficiency must be in (0, 2] and overhead_ms >= 0, got {} and {}",
                        e.efficiency, e.overhead_ms
                    ),
                ));
            }
        }
        Ok(t)
    }

    pub fn load(path: &Path) -> Result<Self, PlannerError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlannerError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    pub fn to_toml(&self) -> Result<String, PlannerError> {
        toml::to_string(self).map_err(|e| PlannerError::Toml {
            origin: "efficiency table".into(),
            message: e.to_string(),
        })
    }

    /// Entries from `other` replace or extend this table's.
    pub fn overlay(&mut self, other: &Self) {
        for e in &other.entries {
            match self
                .entries
                .iter_mut()
                .find(|x| x.class == e.class && x.engine == e.engine && x.phase == e.phase)
            {
                Some(slot) => *slot = e.clone(),
                None => self.entries.push(e.clone()),
            }
        }
    }

    fn find(&self, class: &str, engine: &str, phase: Phase) -> Option<Factor> {
        self.entries
            .iter()
            .find(|e| e.class == class && e.engine == engine && e.phase == phase)
            .map(|e| Factor {
                efficiency: e.efficiency,
                overhead_ms: e.overhead_ms,
            })
    }

    /// The factor for (class, engine, phase): exact entry, else the engine
    /// pooled over classes, else the class pooled over engines, else the
    /// prior. The last two get the engine's prior adjustment and, for an
    /// engine that replays decode steps as CUDA graphs on a GPU, a decode
    /// step overhead of at most [`GRAPH_REPLAY_STEP_OVERHEAD_MS`]
    /// ([`Engine::step_overhead_cap_ms`]): a pooled overhead is other
    /// engines' host cost, not this one's.
    pub fn lookup(&self, class: HardwareClass, engine: Engine, phase: Phase) -> Resolved {
        if let Some((prefill, decode)) = self.constant {
            let factor = if phase == Phase::Prefill {
                prefill
            } else {
                decode
            };
            return Resolved {
                factor,
                level: "baseline constant".into(),
            };
        }
        let (c, e) = (class.as_str(), engine.as_str());
        if let Some(f) = self.find(c, e, phase) {
            return Resolved {
                factor: f,
                level: format!("fit {c}/{e}"),
            };
        }
        if let Some(f) = self.find("*", e, phase) {
            return Resolved {
                factor: f,
                level: format!("fit */{e} (no {c} data)"),
            };
        }
        let (k_eff, k_over) = engine.prior_adjust();
        let cap = engine.step_overhead_cap_ms(Some(class), phase);
        let adjust = |f: Factor, level: String| {
            let overhead = f.overhead_ms * k_over;
            let (overhead_ms, level) = match cap {
                Some(cap) if cap < overhead => (cap, format!("{level}, CUDA-graph step prior")),
                _ => (overhead, level),
            };
            Resolved {
                factor: Factor {
                    efficiency: f.efficiency * k_eff,
                    overhead_ms,
                },
                level,
            }
        };
        match self.find(c, "*", phase) {
            Some(f) => adjust(f, format!("fit {c}/* (no {e} data)")),
            None => adjust(prior(class, phase), format!("prior {c}")),
        }
    }
}

#[cfg(test)]
#[path = "efficiency_tests.rs"]
mod tests;
