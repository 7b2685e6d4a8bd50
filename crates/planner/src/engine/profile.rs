//! What an engine does per step and at serving time: how it launches a
//! decode step's kernels ([`StepLaunch`]), the fixed step overheads that
//! follow, and its serving defaults ([`EngineProfile`]).

use serde::Serialize;

use super::Engine;
use crate::hardware::{Hardware, HardwareClass};
use crate::phase::Phase;

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
    /// Kernels launched one by one from a C++ loop that queues them ahead
    /// of the GPU (no Python between them): the launch cost hides behind
    /// the running kernels, as with a graph.
    HostLoop,
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

/// The host part of [`GRAPH_REPLAY_STEP_OVERHEAD_MS`], milliseconds: what is
/// left of it for an engine whose gaps between kernels are counted per layer
/// instead ([`Engine::kernel_boundaries_per_layer`], [`KERNEL_BUBBLE_S`]).
pub const GRAPH_REPLAY_HOST_MS: f64 = 0.5;

/// Host time per decoder layer that llama.cpp's CUDA graphs take off a
/// one-token step, seconds ([`Engine::replays_one_token_steps_as_cuda_graphs`]).
/// Three published before/after pairs of Llama-2-7B (32 layers) decoding at
/// batch 1: NVIDIA's proposal (ggml-org/llama.cpp#6763, Q4_K_M on an H100
/// PCIe, 143.35 → 163.83 tok/s, 0.87 ms a token less) and the pull request's
/// review (ggml-org/llama.cpp#6766, Q4_0: RTX 3090 116.31 → 128.27 tok/s,
/// 0.80 ms; RTX 4090 138.31 → 146.81, 0.42 ms). The median, 0.80 ms over 32
/// layers: 25 µs a layer. The shipped llama.cpp fits come from builds before
/// the graphs (XiongjieDai's 2023–24 runs, `llama.cpp@b3215`), so their step
/// overhead still holds these launches.
pub const LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S: f64 = 0.80e-3 / 32.0;

/// Time a kernel boundary costs a forward pass on a GPU, seconds: the setup
/// and teardown around each of a forward pass's small kernels in which no
/// weights load. Hazy Research, "Look Ma, No Bubbles!" (2025-05-27), on one
/// H100 at batch 1 with Llama-3.2-1B (2.47 GB of BF16 weights): vLLM and
/// SGLang split the forward pass into "around a hundred" kernels; a
/// megakernel without boundaries streams the weights at 78% of bandwidth and
/// runs over 1.5× SGLang's step. So SGLang's step is about 1.42 ms where
/// streaming at 78% takes 0.95 ms: ~0.47 ms over ~100 boundaries, ~5 µs each
/// (launch alone ~1.3 µs with CUDA graphs, the post says; the rest is the
/// memory pipeline draining and refilling).
pub const KERNEL_BUBBLE_S: f64 = 5e-6;

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
    /// every TTFT, occupying no GPU time, as a loaded run measured it. Used
    /// by the serving simulator ([`crate::sim`]); 0 where no published figure
    /// separates it.
    pub request_overhead_ms: f64,
    /// The same path at one client, milliseconds: what a lone request's TTFT
    /// holds besides the prompt's pass, `server_path_ms +
    /// server_path_ms_per_prompt_token · prompt` (the prompt is rendered,
    /// tokenised and hashed on the host before the engine sees it). Used by
    /// a plan's TTFT ([`crate::Estimator::server_path_s`]); 0 where no
    /// published figure separates it.
    pub server_path_ms: f64,
    /// See [`Self::server_path_ms`]: the host's cost per prompt token, ms.
    pub server_path_ms_per_prompt_token: f64,
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
    /// batch. The engines added for issue 37 (docs/planner.md, "Engines,
    /// versions and parallelism"):
    /// - vLLM before 0.6: `max_num_seqs` 256 on every device (the large-device
    ///   rule is V1's), chunked prefill off (V0's `enable_chunked_prefill`
    ///   default), so `max_num_batched_tokens` is the whole prompt; 0.1 ms of
    ///   host time per running sequence per step (vllm-project/vllm#6801,
    ///   August 2024, v0.5: ~20 ms between steps at 200 running sequences;
    ///   the 0.6 release blog measured the GPU busy 38% of the time for
    ///   Llama 3 8B on one H100, the rest API server and scheduling).
    /// - Ollama: llama.cpp's profile with `OLLAMA_NUM_PARALLEL` slots,
    ///   auto-selected 4 or 1 by free memory since ollama/ollama#4218; the
    ///   profile takes the low end, one running sequence.
    /// - gpt-fast: one static batch of what it is given (`--batch_size`,
    ///   default 1), prompts as passes of their own.
    /// - ExLlamaV2's dynamic generator: continuous batching limited by its
    ///   cache, prompts chunked at `max_chunk_size` 2048.
    /// - LMDeploy TurboMind: persistent (continuous) batching,
    ///   `max_batch_size` 256 on datacenter GPUs (128 elsewhere),
    ///   `cache_max_entry_count` 0.8 of the memory left after the weights,
    ///   prompts split at `max_prefill_token_num` 8192.
    /// - FasterTransformer: a static batch, prompts as a pass of their own.
    /// - NeMo's TensorRT-LLM export (`nemo.export.trt_llm`, 2023–24): its
    ///   `tensorrt_llm_run.py` calls `GenerationSession.setup(batch_size, ...)`
    ///   and `decode` on the whole batch, a static batch with the prompts as
    ///   one context pass; per running sequence it is TensorRT-LLM's figure.
    pub fn profile(self, hw: &Hardware) -> EngineProfile {
        let memory_gb = hw.memory_gb;
        let vllm_large = memory_gb >= 70.0 && !hw.is_a100();
        let datacenter = hw.class == HardwareClass::Datacenter;
        let (max_running, per_seq_overhead_ms, memory_reserve, chunked_prefill) = match self {
            Self::Vllm => (Some(if vllm_large { 1024 } else { 256 }), 0.02, 0.10, true),
            Self::VllmV0 => (Some(256), VLLM_V0_PER_SEQ_MS, 0.10, false),
            Self::Sglang => (None, 0.01, 0.12, true),
            Self::TrtLlm => (Some(2048), 0.004, 0.10, true),
            Self::Tgi => (Some(128), 0.02, 0.10, true),
            Self::LlamaCpp | Self::LlamaCppNoFa | Self::LlamaCppCublas => (None, 0.03, 0.0, true),
            Self::Ollama => (Some(OLLAMA_NUM_PARALLEL), 0.03, 0.0, true),
            Self::Mlc => (None, 0.02, 0.10, true),
            Self::Transformers => (None, 0.10, 0.0, false),
            Self::GptFast => (None, 0.02, 0.0, false),
            Self::ExLlamaV2 => (None, 0.03, 0.0, true),
            // 0.2 of what the weights leave, counted here over the whole
            // device: a little more reserve than LMDeploy keeps.
            Self::Lmdeploy => (Some(if datacenter { 256 } else { 128 }), 0.004, 0.20, true),
            Self::FasterTransformer | Self::Nemo => (None, 0.004, 0.0, false),
        };
        let max_batched_tokens = match self {
            Self::Vllm if vllm_large => 8192,
            Self::Vllm => 2048,
            Self::Sglang if memory_gb < 35.0 => 2048,
            Self::Sglang if memory_gb < 60.0 => 4096,
            Self::Sglang if memory_gb >= 160.0 => 16384,
            Self::Sglang | Self::TrtLlm | Self::Lmdeploy => 8192,
            Self::Tgi => 4096,
            Self::LlamaCpp | Self::LlamaCppNoFa | Self::LlamaCppCublas | Self::Ollama => 512,
            Self::Mlc | Self::ExLlamaV2 => 2048,
            // Whole prompts in one pass of their own.
            Self::Transformers
            | Self::VllmV0
            | Self::GptFast
            | Self::FasterTransformer
            | Self::Nemo => u32::MAX,
        };
        EngineProfile {
            max_running,
            per_seq_overhead_ms,
            memory_reserve,
            chunked_prefill,
            max_batched_tokens,
            request_overhead_ms: self.request_overhead_ms(),
            server_path_ms: match self {
                Self::Vllm | Self::VllmV0 => VLLM_SERVER_PATH_MS,
                Self::Sglang => SGLANG_SERVER_PATH_MS,
                _ => 0.0,
            },
            // SGLang renders and tokenises prompts with the same Hugging
            // Face tokenizers on the host: vLLM's figure stands for it.
            server_path_ms_per_prompt_token: match self {
                Self::Vllm | Self::VllmV0 | Self::Sglang => VLLM_SERVER_PATH_MS_PER_PROMPT_TOKEN,
                _ => 0.0,
            },
            frontend_ms_per_request: match self {
                Self::Vllm | Self::VllmV0 => VLLM_FRONTEND_MS_PER_REQUEST,
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
            Self::Vllm | Self::VllmV0 => VLLM_REQUEST_OVERHEAD_MS,
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

/// Passes over the KV cache of a decode step in an engine that grows the
/// cache by concatenation ([`Engine::concatenates_kv_cache`]): `torch.cat`
/// reads the old cache and writes it to the new tensor, then attention reads
/// it, where a paged cache is read once.
pub const KV_CONCAT_PASSES: f64 = 3.0;

/// vLLM's per-request server latency, ms (`Engine::request_overhead_ms`).
const VLLM_REQUEST_OVERHEAD_MS: f64 = 30.0;

/// vLLM's server path at one client, ms ([`EngineProfile::server_path_ms`]):
/// pegainfer-project/pegainfer's RTX 5090 ledger (vLLM 0.22.1, Qwen3-4B,
/// commit 414b6476) re-sends a prompt already in the prefix cache with
/// `max_tokens = 1`, so the GPU computes one token: 13.3 ms p50 at 256
/// prompt tokens, less one decode step (the same host's one-client TPOT,
/// 6.65 ms), is 6.7 ms; less 256 tokens at the rate below, 5.5 ms. Used
/// for vLLM before 0.6 too, which has no figure of its own.
pub const VLLM_SERVER_PATH_MS: f64 = 5.5;

/// vLLM's host cost per prompt token at one client, ms
/// ([`EngineProfile::server_path_ms_per_prompt_token`]): the same sweep
/// grows from 13.3 ms at 256 tokens to 90.8 ms at 16,384; less the longer
/// KV read (2.4 GB, 1.3 ms), 4.7 µs a token.
pub const VLLM_SERVER_PATH_MS_PER_PROMPT_TOKEN: f64 = 0.0047;

/// SGLang's server path at one client, ms ([`EngineProfile::server_path_ms`]):
/// tenstorrent/tt-inference-server#3560 ran SGLang's HTTP server, tokenizer
/// manager, scheduler and detokenizer around a mock forward pass that
/// busy-waits 2.632 ms (one client, 128-token random chat prompts): median
/// TTFT 9.54 ms, 6.9 ms besides the forward pass; less 128 tokens at
/// [`VLLM_SERVER_PATH_MS_PER_PROMPT_TOKEN`], 6.3 ms.
pub const SGLANG_SERVER_PATH_MS: f64 = 6.3;

/// Host time one request holds vLLM's API server, ms
/// ([`EngineProfile::frontend_ms_per_request`]): pull request
/// vllm-project/vllm#17546 (May 2025) ran one API-server process in front of
/// two data-parallel engines (2×A100, Llama-3.2-1B, ShareGPT, offered 120
/// req/s) and completed 10,000 requests in 130.7 s, 76.5 req/s: 13 ms each.
pub const VLLM_FRONTEND_MS_PER_REQUEST: f64 = 13.0;

/// Host time per running sequence per step of vLLM before 0.6, ms
/// ([`Engine::profile`]).
pub const VLLM_V0_PER_SEQ_MS: f64 = 0.1;

/// Ollama's default `OLLAMA_NUM_PARALLEL` ([`Engine::profile`]).
pub const OLLAMA_NUM_PARALLEL: u32 = 1;

impl Engine {
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
    ///   per operator; Ollama is llama.cpp.
    /// - vLLM before 0.6 already replayed decode as CUDA graphs (since
    ///   0.2.x, `enforce_eager` off); its host cost was per sequence.
    /// - gpt-fast compiles decoding with `torch.compile(mode=
    ///   "reduce-overhead")`, which captures CUDA graphs (its README).
    /// - LMDeploy's TurboMind and FasterTransformer launch kernels from a
    ///   C++ loop that runs ahead of the GPU ([`StepLaunch::HostLoop`]).
    /// - ExLlamaV2 launches its kernels from Python each step.
    /// - NeMo's TensorRT-LLM export (2023–24) runs the engine from
    ///   TensorRT-LLM's Python `GenerationSession` (`nemo/export/trt_llm/
    ///   tensorrt_llm_run.py`), created without `cuda_graph_mode` (default
    ///   `False`): each step the Python loop binds the engine's inputs and
    ///   outputs, enqueues it, runs the sampling and checks the stop
    ///   condition on the host before the next step, so nothing hides the
    ///   host time and it pays the class's per-kernel overhead.
    pub fn step_launch(self) -> StepLaunch {
        match self {
            Self::Vllm | Self::VllmV0 | Self::Sglang | Self::TrtLlm | Self::Tgi | Self::GptFast => {
                StepLaunch::GraphReplay
            }
            Self::Lmdeploy | Self::FasterTransformer => StepLaunch::HostLoop,
            Self::LlamaCpp
            | Self::LlamaCppNoFa
            | Self::LlamaCppCublas
            | Self::Ollama
            | Self::Mlc
            | Self::Transformers
            | Self::ExLlamaV2
            | Self::Nemo => StepLaunch::PerKernel,
        }
    }

    /// The engine captures a step that computes one token as a CUDA graph
    /// and replays it, where the GPU allows (llama.cpp from
    /// ggml-org/llama.cpp#6766, May 2024, on by default in CUDA builds).
    /// `ggml-cuda.cu` turns the graph off for a step of more than one token
    /// (an `ADD` whose second operand has more than one row: "batch size >
    /// 1"), for weights split by rows over GPUs (`--split-mode row`, the
    /// split buffer type), and below compute capability 8.0 (Volta and Turing,
    /// `disable_due_to_gpu_arch`); HIP builds leave graphs off unless built
    /// with `GGML_HIP_GRAPHS`. llama.cpp from b3216 on (`llama.cpp` and
    /// `llama.cpp@b6326`, seven weeks or more after the graphs were merged);
    /// not `llama.cpp@b3215`, which spans builds before and after them, nor
    /// Ollama, which builds ggml with its own options. See
    /// [`crate::Scenario::cuda_graph_saving_s`].
    pub fn replays_one_token_steps_as_cuda_graphs(self) -> bool {
        matches!(self, Self::LlamaCpp | Self::LlamaCppNoFa)
    }

    /// Kernel boundaries per decoder layer in a forward pass, for the engines
    /// Hazy Research counted ("around a hundred" kernels for the 16 layers of
    /// Llama-3.2-1B in vLLM and SGLang: about 6 a layer once the embedding,
    /// final norm, LM head and sampling are set aside); each costs
    /// [`KERNEL_BUBBLE_S`]. Tensor parallelism does not shorten them, so at
    /// TP 8 they are a large part of a step. `None` for engines without a
    /// count (their fitted overheads hold what their gaps cost).
    pub fn kernel_boundaries_per_layer(self) -> Option<f64> {
        matches!(self, Self::Vllm | Self::VllmV0 | Self::Sglang).then_some(6.0)
    }

    /// Kernel boundaries a layer with routed experts adds to
    /// [`Self::kernel_boundaries_per_layer`], for the same engines. A dense
    /// MLP is three kernels (gate-up GEMM, activation, down GEMM); vLLM's
    /// `fused_experts` (and SGLang's fused_moe_triton, its port) runs six:
    /// `topk_softmax` for the router, `moe_align_block_size` to group the
    /// tokens by expert, the two grouped GEMMs with the activation between
    /// them, and `moe_sum` to add the experts' outputs. The kernel
    /// microbenchmarks of vLLM and SGLang pull requests (`benchmark_moe.py`,
    /// replayed in a CUDA graph) show the floor this leaves at one token:
    /// 30–44 µs a layer where the experts read are only 16–38 MB
    /// (Qwen3-235B-A22B at TP 8 on an H200, 31.7 µs, sgl-project/sglang#11730;
    /// Qwen3-Next at TP 2, 27–30 µs, vllm-project/vllm#36559; Qwen3-30B-A3B FP8
    /// on an H100, 40–44 µs, vllm-project/vllm#24700), about what six
    /// boundaries ([`KERNEL_BUBBLE_S`]) and the read cost.
    pub fn moe_extra_boundaries_per_layer(self) -> Option<f64> {
        self.kernel_boundaries_per_layer().map(|_| 3.0)
    }

    /// The most fixed decode-step overhead (ms) the engine is assumed to pay
    /// on `class` when it has no fitted overhead of its own: for engines
    /// that replay decode steps as CUDA graphs on a GPU (or queue them from
    /// a C++ loop), [`GRAPH_REPLAY_STEP_OVERHEAD_MS`]; otherwise no bound (the pooled fit
    /// or the class prior stands). `None` for `class` means any class (a
    /// level pooled over classes).
    pub fn step_overhead_cap_ms(self, class: Option<HardwareClass>, phase: Phase) -> Option<f64> {
        let gpu = class.is_none_or(HardwareClass::is_gpu);
        let cap = match self {
            Self::Vllm | Self::VllmV0 => VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS,
            // Its kernel gaps are counted per layer: the host part is left.
            _ if self.kernel_boundaries_per_layer().is_some() => GRAPH_REPLAY_HOST_MS,
            _ => GRAPH_REPLAY_STEP_OVERHEAD_MS,
        };
        (phase == Phase::Decode && gpu && self.step_launch() != StepLaunch::PerKernel)
            .then_some(cap)
    }
}
