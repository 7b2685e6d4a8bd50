//! Inference engines as the planner models them: what each one is built
//! on, how it batches by default, how it spreads one model over several
//! GPUs, and which of its versions behave differently.
//!
//! An engine here is a *profile of mechanisms*, not a fitted constant set:
//! whether decode steps replay as CUDA graphs, whether prompts are chunked
//! into decode steps, what caps the running sequences, what a sequence costs
//! the host per step, how GPUs are split. Engines built on another one share
//! its fitted efficiency factors ([`Engine::family`]): Ollama runs llama.cpp,
//! LMDeploy's TurboMind and TensorRT-LLM both grew out of FasterTransformer's
//! kernels. A version range gets a profile of its own only where the
//! engine's own release notes, code or docs show a mechanism change
//! (docs/planner.md, "Engines, versions and parallelism"); the default is
//! the current version.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{PlannerError, did_you_mean};

mod profile;
mod version;

pub use profile::{
    EngineProfile, GRAPH_REPLAY_HOST_MS, GRAPH_REPLAY_STEP_OVERHEAD_MS, KERNEL_BUBBLE_S,
    KV_CONCAT_PASSES, LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S, OLLAMA_NUM_PARALLEL,
    SCORE_BYTES_PER_ELEMENT, StepLaunch, VLLM_FRONTEND_MS_PER_REQUEST,
    VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS, VLLM_V0_PER_SEQ_MS,
};
pub use version::Version;

/// The first llama.cpp build whose `--flash-attn` defaults to `auto`
/// (b6327, 2025-08-31): [`Engine::LlamaCpp`] from it on,
/// [`Engine::LlamaCppNoFa`] before it (back to b3216).
pub const LLAMA_CPP_FLASH_ATTN_AUTO_BUILD: u32 = 6327;

/// The first llama.cpp build whose CUDA backend multiplies quantised
/// weights by a batch of tokens in its own int8 kernels (MMQ) instead of
/// dequantising them to F16 for cuBLAS (b3216, ggml-org/llama.cpp#8075,
/// 2024-06-24): [`Engine::LlamaCppCublas`] before it.
pub const LLAMA_CPP_MMQ_DEFAULT_BUILD: u32 = 3216;

/// Tokens up to which llama.cpp before b3216 multiplied quantised weights in
/// its own MMQ kernels on a tensor-core GPU (`MMQ_MAX_BATCH_SIZE`); larger
/// batches went to cuBLAS ([`Engine::dequantises_weights_for_cublas`]).
pub const LLAMA_CPP_MMQ_MAX_BATCH: f64 = 32.0;

/// Bytes an F16 weight takes: what llama.cpp's dequantising kernel writes
/// per weight before a cuBLAS GEMM.
pub const F16_DEQUANT_BYTES_PER_WEIGHT: f64 = 2.0;

/// Bytes a Q8_0 weight takes: blocks of 32 int8 weights with one F16 scale.
const Q8_0_BYTES_PER_WEIGHT: f64 = 34.0 / 32.0;

/// An inference engine (and, for vLLM, a version range with other mechanisms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Engine {
    /// vLLM 0.6 and later (the default for `vllm`).
    #[serde(rename = "vllm")]
    Vllm,
    /// vLLM before 0.6: scheduling, detokenising and the API server ran in
    /// the engine's one Python loop, not overlapped with the GPU, and
    /// chunked prefill was off by default.
    #[serde(rename = "vllm@0.5")]
    VllmV0,
    #[serde(rename = "sglang")]
    Sglang,
    #[serde(rename = "trt-llm")]
    TrtLlm,
    /// llama.cpp from build b6327 on (the default for `llama.cpp`): flash
    /// attention `auto`, on where the backend has it.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// llama.cpp builds b3216–b6326, or a later build run with flash
    /// attention off: the attention scores go through memory; quantised
    /// weights meet a batch of tokens in MMQ.
    #[serde(rename = "llama.cpp@b6326")]
    LlamaCppNoFa,
    /// llama.cpp before build b3216: flash attention off, and quantised
    /// weights dequantised to an F16 buffer before each cuBLAS GEMM of a
    /// batch of tokens on an NVIDIA GPU with tensor cores.
    #[serde(rename = "llama.cpp@b3215")]
    LlamaCppCublas,
    #[serde(rename = "mlc")]
    Mlc,
    #[serde(rename = "transformers")]
    Transformers,
    /// Hugging Face text-generation-inference.
    #[serde(rename = "tgi")]
    Tgi,
    /// Ollama: a server around llama.cpp.
    #[serde(rename = "ollama")]
    Ollama,
    /// PyTorch's gpt-fast: `torch.compile` with CUDA graphs, static batch.
    #[serde(rename = "gpt-fast")]
    GptFast,
    /// ExLlamaV2 (its dynamic generator).
    #[serde(rename = "exllamav2")]
    ExLlamaV2,
    /// LMDeploy with its TurboMind engine.
    #[serde(rename = "lmdeploy")]
    Lmdeploy,
    /// NVIDIA FasterTransformer (static batching; TensorRT-LLM's predecessor).
    #[serde(rename = "fastertransformer")]
    FasterTransformer,
    /// NeMo Framework's TensorRT-LLM export (`nemo.export`, 2023–24): a
    /// TensorRT-LLM engine built with the NCCL plugin and run by TensorRT-LLM's
    /// Python `GenerationSession`, one static batch, no CUDA graphs.
    #[serde(rename = "nemo")]
    Nemo,
}

/// How an engine spreads one replica over several GPUs when it is given
/// only a GPU count ([`Engine::multi_gpu_default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiGpu {
    /// Every layer's matmuls split over the GPUs (all-reduce per layer).
    Tensor,
    /// Consecutive layers on each GPU; one token passes through them in turn.
    Layer,
    /// One GPU when the model fits on one, else layers split (Ollama).
    OneThenLayer,
}

impl Engine {
    pub const ALL: [Self; 16] = [
        Self::Vllm,
        Self::VllmV0,
        Self::Sglang,
        Self::TrtLlm,
        Self::LlamaCpp,
        Self::LlamaCppNoFa,
        Self::LlamaCppCublas,
        Self::Mlc,
        Self::Transformers,
        Self::Tgi,
        Self::Ollama,
        Self::GptFast,
        Self::ExLlamaV2,
        Self::Lmdeploy,
        Self::FasterTransformer,
        Self::Nemo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::VllmV0 => "vllm@0.5",
            Self::Sglang => "sglang",
            Self::TrtLlm => "trt-llm",
            Self::LlamaCpp => "llama.cpp",
            Self::LlamaCppNoFa => "llama.cpp@b6326",
            Self::LlamaCppCublas => "llama.cpp@b3215",
            Self::Mlc => "mlc",
            Self::Transformers => "transformers",
            Self::Tgi => "tgi",
            Self::Ollama => "ollama",
            Self::GptFast => "gpt-fast",
            Self::ExLlamaV2 => "exllamav2",
            Self::Lmdeploy => "lmdeploy",
            Self::FasterTransformer => "fastertransformer",
            Self::Nemo => "nemo",
        }
    }

    /// The engine whose fitted efficiency factors this one shares: the same
    /// kernels underneath. Ollama runs llama.cpp; vLLM before 0.6 ran the
    /// same kernels as today's vLLM (its change was on the host); LMDeploy's
    /// TurboMind is "developed based on NVIDIA's FasterTransformer" (its
    /// docs, `turbomind.md`), whose kernels TensorRT-LLM also took over;
    /// NeMo's export builds a TensorRT-LLM engine.
    pub fn family(self) -> Self {
        match self {
            Self::Ollama | Self::LlamaCppNoFa | Self::LlamaCppCublas => Self::LlamaCpp,
            Self::VllmV0 => Self::Vllm,
            Self::Lmdeploy | Self::FasterTransformer | Self::Nemo => Self::TrtLlm,
            other => other,
        }
    }

    /// The names `--engine` takes (version ranges are spelled `name@version`).
    fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL
            .into_iter()
            .filter(|e| !e.is_version_range())
            .map(|e| e.as_str())
    }

    /// Parses an engine name, optionally with a version: `vllm`, `vllm@0.5`,
    /// `vllm@0.5.3`, `ollama@0.3`, `llama.cpp@b6327` (llama.cpp's versions
    /// are its build numbers). A version picks the profile of the range it
    /// falls in; engines without version ranges accept any well-formed
    /// version and use their current profile.
    pub fn parse(s: &str) -> Result<Self, PlannerError> {
        let text = s.trim().to_ascii_lowercase();
        let (name, version_text) = match text.split_once('@') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (text.as_str(), None),
        };
        let key = Self::canonical_key(name);
        if key == "llama.cpp" {
            return Ok(match version_text {
                Some(v) => match version::parse_build(v, s)? {
                    b if b < LLAMA_CPP_MMQ_DEFAULT_BUILD => Self::LlamaCppCublas,
                    b if b < LLAMA_CPP_FLASH_ATTN_AUTO_BUILD => Self::LlamaCppNoFa,
                    _ => Self::LlamaCpp,
                },
                None => Self::LlamaCpp,
            });
        }
        let version = version_text.map(|v| Version::parse(v, s)).transpose()?;
        let engine = Self::ALL
            .into_iter()
            .filter(|e| !e.is_version_range())
            .find(|e| e.as_str() == key)
            .ok_or_else(|| PlannerError::UnknownValue {
                what: "engine",
                value: s.to_string(),
                suggestion: did_you_mean(key, Self::names()),
                choices: Self::names().collect::<Vec<_>>().join(", "),
            })?;
        Ok(match (engine, version) {
            (Self::Vllm, Some(v)) if v < Version::new(0, 6) => Self::VllmV0,
            (e, _) => e,
        })
    }

    /// A profile reached only through a version (`vllm@0.5`,
    /// `llama.cpp@b6326`), not a name of its own.
    fn is_version_range(self) -> bool {
        matches!(
            self,
            Self::VllmV0 | Self::LlamaCppNoFa | Self::LlamaCppCublas
        )
    }

    /// The engine's own name for the aliases users type.
    fn canonical_key(name: &str) -> &str {
        match name {
            "tensorrt-llm" | "trtllm" | "tensorrt" => "trt-llm",
            "llamacpp" | "llama-cpp" | "llama-server" | "gguf" => "llama.cpp",
            "mlc-llm" => "mlc",
            "hf" | "huggingface" => "transformers",
            "text-generation-inference" | "tgi-server" => "tgi",
            "gptfast" | "gpt_fast" => "gpt-fast",
            "exllama" | "exllama2" | "exllama-v2" | "exl2" | "tabbyapi" => "exllamav2",
            "turbomind" => "lmdeploy",
            "faster-transformer" | "faster_transformer" | "ft" => "fastertransformer",
            "nemo-trtllm" | "nemo-trt-llm" | "nemo-export" | "nemo-framework" => "nemo",
            other => other,
        }
    }

    /// One line on what this profile is, for the plan's assumptions.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Vllm => {
                "vLLM ≥ 0.6 (current): host work overlapped with the GPU, chunked prefill"
            }
            Self::VllmV0 => {
                "vLLM < 0.6: scheduling and detokenising in the engine loop, not overlapped \
                 (0.1 ms per running sequence per step), no chunked prefill by default"
            }
            Self::Sglang => "SGLang (current)",
            Self::TrtLlm => "TensorRT-LLM (current)",
            Self::LlamaCpp => {
                "llama.cpp ≥ b6327 (current): flash attention `auto`, on where the backend has it"
            }
            Self::LlamaCppNoFa => {
                "llama.cpp b3216–b6326 (or flash attention off): attention scores go through memory"
            }
            Self::LlamaCppCublas => {
                "llama.cpp before b3216: attention scores go through memory; quantised weights \
                 dequantised to F16 for cuBLAS on NVIDIA tensor-core GPUs"
            }
            Self::Mlc => "MLC LLM",
            Self::Transformers => "eager PyTorch (transformers)",
            Self::Tgi => "text-generation-inference (current)",
            Self::Ollama => {
                "Ollama: llama.cpp underneath, OLLAMA_NUM_PARALLEL slots, layers spread over \
                 GPUs only when the model does not fit one"
            }
            Self::GptFast => "gpt-fast: torch.compile with CUDA graphs, one static batch",
            Self::ExLlamaV2 => "ExLlamaV2 dynamic generator: layers split over GPUs (gpu_split)",
            Self::Lmdeploy => "LMDeploy TurboMind: FasterTransformer kernels, persistent batching",
            Self::FasterTransformer => "FasterTransformer: static batches, no continuous batching",
            Self::Nemo => {
                "NeMo's TensorRT-LLM export (2023–24): Python GenerationSession, one static \
                 batch, no CUDA graphs, NCCL all-reduce"
            }
        }
    }

    /// Whether the engine writes attention scores to memory. llama.cpp
    /// without flash attention (the default of the builds before b6327, which
    /// the shipped measurements come from, and of `llama-bench`'s `-fa 0`)
    /// computes `Q·Kᵀ` into an F32 matrix of `tokens × context` per head,
    /// runs softmax over it in a kernel of its own and reads it back for
    /// `·V`. From b6327 (2025-08-31) `--flash-attn` defaults to `auto`, on
    /// where the backend supports it (CUDA, Metal, ROCm; ggml-org/llama.cpp
    /// #15746 shows the `flash_attn_type` default). Ollama keeps flash
    /// attention off unless `OLLAMA_FLASH_ATTENTION=1` (its FAQ). The other
    /// engines run fused (flash) attention kernels that keep the scores on
    /// chip. See [`SCORE_BYTES_PER_ELEMENT`].
    pub fn materialises_attention_scores(self) -> bool {
        matches!(
            self,
            Self::LlamaCppNoFa | Self::LlamaCppCublas | Self::Ollama
        )
    }

    /// Whether the engine grows each layer's KV cache by concatenation at
    /// every decode step: transformers' `DynamicCache.update` (and the tuple
    /// cache before it) does `torch.cat([past, new])`, which reads the whole
    /// cache and writes it again before attention reads it, so a step moves
    /// the cache three times ([`KV_CONCAT_PASSES`]). Engines with a paged or
    /// preallocated cache write only the new token's entries (as does
    /// transformers' `HybridCache` for sliding-window models).
    pub fn concatenates_kv_cache(self) -> bool {
        matches!(self, Self::Transformers)
    }

    /// Whether a batch of tokens meets quantised weights through an F16 copy:
    /// llama.cpp before b3216 on an NVIDIA GPU with tensor cores sent a
    /// matmul of more than [`LLAMA_CPP_MMQ_MAX_BATCH`] tokens to cuBLAS,
    /// after a kernel that dequantised the weight matrix into an F16 buffer
    /// (`ggml_cuda_op_mul_mat_cublas`, `to_fp16_cuda`).
    pub fn dequantises_weights_for_cublas(self) -> bool {
        matches!(self, Self::LlamaCppCublas)
    }

    /// Whether the engine's FP16 matmuls on CUDA accumulate in FP16:
    /// llama.cpp's prompt GEMMs (`CUBLAS_COMPUTE_16F`, ggml-org/llama.cpp
    /// #3412, #3776), and Ollama, which runs llama.cpp. PyTorch-based engines
    /// and TensorRT-LLM accumulate in FP32.
    pub fn accumulates_in_fp16(self) -> bool {
        matches!(
            self,
            Self::LlamaCpp | Self::LlamaCppNoFa | Self::LlamaCppCublas | Self::Ollama
        )
    }

    /// Whether the engine stores only the window of a sliding-window layer
    /// ([`crate::window`]): vLLM's V1 hybrid KV cache manager (native sliding
    /// window from v0.8.3, its release notes; the `vllm@0.5` profile is older),
    /// llama.cpp's SWA cache (`n_swa · n_seq_max + n_batch` cells,
    /// ggml-org/llama.cpp#13194, 2025; `llama.cpp@b6326` stands for the
    /// 2023–24 builds before it), TensorRT-LLM's cyclic per-window blocks
    /// (NVIDIA/TensorRT-LLM#6768 describes them), SGLang's hybrid SWA memory
    /// pool (on unless `--disable-hybrid-swa-memory`), Ollama's SWA cache and
    /// transformers' `HybridCache`. The others are assumed to hold every token
    /// of every layer: a larger, safe figure.
    pub fn windowed_kv_cache(self) -> bool {
        matches!(
            self,
            Self::Vllm
                | Self::Sglang
                | Self::TrtLlm
                | Self::LlamaCpp
                | Self::Ollama
                | Self::Transformers
        )
    }

    /// Prior adjustment for an engine with no data at the level used: eager
    /// PyTorch (`transformers`) launches many more kernels per token from
    /// Python, so it is assumed to pay 3× the class's step overhead. Its
    /// weight reads run at the class's efficiency: an unquantised linear
    /// layer in eager PyTorch is `torch.nn.functional.linear`, the same
    /// cuBLAS GEMV/GEMM that vLLM's `UnquantizedLinearMethod` calls, so
    /// what eager execution adds is host time between kernels, not a slower
    /// weight read (issue 37, docs/planner.md, "The seventh sealed file").
    /// Only a prior: calibrate to replace it.
    pub(crate) fn prior_adjust(self) -> (f64, f64) {
        match self {
            Self::Transformers => (1.0, 3.0),
            _ => (1.0, 1.0),
        }
    }

    /// Bytes a weight outside the routed experts takes where the format
    /// covers only the experts (MXFP4, [`crate::weights`]). The checkpoints
    /// the engines load keep those weights in BF16 (gpt-oss's
    /// `modules_to_not_convert`; Ollama's library files, 14 GB for
    /// gpt-oss:20b), except llama.cpp's MXFP4 GGUF: its file type
    /// `LLAMA_FTYPE_MOSTLY_MXFP4_MOE` stores "MoE tensors -> MXFP4, other
    /// tensors -> Q8_0" (`src/llama-quant.cpp`, `llama_tensor_get_type`), the
    /// 11.27 GiB of ggml-org's gpt-oss-20b file: 8.5 bits a weight.
    pub fn experts_only_rest_bytes(self) -> f64 {
        match self {
            Self::LlamaCpp | Self::LlamaCppNoFa | Self::LlamaCppCublas => Q8_0_BYTES_PER_WEIGHT,
            _ => 2.0,
        }
    }

    /// The share of its BF16 read rate that the engine's weight-only
    /// quantised matvec reaches on a GPU (1 where nothing is known). gpt-fast
    /// documents it: its README's benchmark table (Llama-2-7B at batch 1 on
    /// one A100 80GB) gives 1,397 GB/s for BF16, 1,069 for its int8
    /// weight-only path (0.77) and 863 for int4 with groups of 32 (0.62);
    /// its int8 mode is weight-only (`quantize.py --mode int8`,
    /// `WeightOnlyInt8Linear`), dequantised inside the compiled matmul.
    /// Applied to the decode step's reads ([`crate::Estimator::factors_for`])
    /// on datacenter GPUs, the HBM cards the figures come from (the README's
    /// MI250X rows agree: int8 0.68); on a consumer card's GDDR a plain
    /// matvec reaches most of the bandwidth, so no share is taken there.
    /// Formats computing in FP8 or FP4 are not gpt-fast's weight-only paths.
    pub fn quantised_read_share(self, quant: &crate::quant::Quant, datacenter: bool) -> f64 {
        use crate::quant::ComputeDtype;
        let weight_only = matches!(quant.compute, ComputeDtype::Fp16 | ComputeDtype::Int8);
        let bits = quant.bits_per_weight;
        match self {
            Self::GptFast if datacenter && weight_only && bits <= 5.0 => 863.0 / 1397.0,
            Self::GptFast if datacenter && weight_only && bits <= 8.0 => 1069.0 / 1397.0,
            _ => 1.0,
        }
    }

    /// The rate a scenario's weight matmuls compute at: the format's, except
    /// where the engine's int8 mode is weight-only. gpt-fast's is
    /// (`quantize.py --mode int8`, "Int8 Weight-Only Quantization" in its
    /// README): int8 weights are widened and multiplied with BF16
    /// activations, so it computes at the 16-bit rate, where `int8` is
    /// W8A8 (INT8 tensor cores) for the engines that run it.
    pub fn weight_compute(self, quant: &crate::quant::Quant) -> crate::quant::ComputeDtype {
        use crate::quant::ComputeDtype;
        match (self, quant.compute) {
            (Self::GptFast, ComputeDtype::Int8) => ComputeDtype::Fp16,
            (_, dtype) => dtype,
        }
    }

    /// What the engine does with several GPUs for one replica when the user
    /// gives only their number, from its docs:
    /// - llama.cpp splits layers (`--split-mode layer`, the default since
    ///   ggml-org/llama.cpp#4766, January 2024; `row` splits matrices). One
    ///   token passes the GPUs in turn, so one stream is no faster than on
    ///   one GPU; memory adds up.
    /// - ExLlamaV2 splits layers (`gpu_split`, or `autosplit` filling GPUs
    ///   in order).
    /// - Ollama loads a model on one GPU when it fits there and spreads its
    ///   layers over the GPUs otherwise (its FAQ, "How does Ollama load
    ///   models on multiple GPUs?").
    /// - transformers places whole layers on the GPUs in order
    ///   (`from_pretrained(device_map="auto")`, Accelerate's big-model
    ///   inference, huggingface/transformers#17341): one GPU works at a time.
    /// - vLLM, SGLang, TensorRT-LLM, TGI, LMDeploy, gpt-fast,
    ///   FasterTransformer and MLC shard each layer (tensor parallelism: the
    ///   `tensor_parallel_size` / `--tp` / `--num-shard` their multi-GPU
    ///   docs start from).
    pub fn multi_gpu_default(self) -> MultiGpu {
        match self {
            Self::LlamaCpp
            | Self::LlamaCppNoFa
            | Self::LlamaCppCublas
            | Self::ExLlamaV2
            | Self::Transformers => MultiGpu::Layer,
            Self::Ollama => MultiGpu::OneThenLayer,
            _ => MultiGpu::Tensor,
        }
    }

    /// Whether the engine keeps several micro-batches in flight across
    /// pipeline stages (`--pp`), so that at batch > 1 every stage works at
    /// once: vLLM (virtual engines, one per stage), SGLang, TensorRT-LLM and
    /// LMDeploy. llama.cpp's layer split overlaps micro-batches only within
    /// one large prompt batch (ggml-org/llama.cpp#6017, 2024-03); its decode
    /// steps run the stages one after another, as does every engine here at
    /// one stream.
    pub fn pipelines_micro_batches(self) -> bool {
        matches!(
            self,
            Self::Vllm | Self::VllmV0 | Self::Sglang | Self::TrtLlm | Self::Lmdeploy
        )
    }

    /// How the engine cuts one long prompt into micro-batches that flow
    /// through pipeline stages one after another, `(n_batch, n_ubatch)`:
    /// llama.cpp (ggml-org/llama.cpp#6017, March 2024) takes a prompt in
    /// logical batches of `n_batch` tokens (default 2048) and computes each
    /// as physical batches of `n_ubatch` (default 512); with layers split
    /// over GPUs, stage *k* works on one micro-batch while stage *k + 1*
    /// works on the one before. A prompt of one micro-batch (`pp 512`) gets
    /// no overlap. `None`: one prompt is one pass through the stages.
    pub fn prompt_micro_batches(self) -> Option<(u32, u32)> {
        (self.family() == Self::LlamaCpp).then_some((2048, 512))
    }

    /// The widest tile of token columns in which the engine's prompt runs an
    /// MoE layer's routed-expert GEMMs, on a device of `class`; `None` where
    /// an expert's GEMM is sized to its own tokens. ggml's CUDA and HIP
    /// backends (llama.cpp, Ollama) run `MUL_MAT_ID` as one MMQ launch over
    /// every expert since ggml-org/llama.cpp#13199 (b5237, 2025-04): the
    /// tokens are grouped by expert (`expert_bounds`) and each expert's share
    /// is computed in tiles of `mmq_x` columns, chosen for the whole
    /// micro-batch (`mul_mat_q_case` takes the width that needs fewest tiles
    /// for the micro-batch's tokens, up to 128 with Turing's int8 MMA or
    /// CDNA3's MFMA, `get_mmq_x_max_host`); a tile with no token is skipped,
    /// a partly filled one computes whole, only its write-back is masked.
    /// Metal's `kernel_mul_mm_id` computes 32-token tiles per expert
    /// (`BLOCK_SIZE_N`, the per-expert token lists of `kernel_mul_mm_id_map0`,
    /// ggml-org/llama.cpp#13388). See [`crate::ModelSpec::expert_tile_padding`].
    pub fn moe_prompt_tile(self, class: crate::hardware::HardwareClass) -> Option<f64> {
        use crate::hardware::HardwareClass;
        if self.family() != Self::LlamaCpp {
            return None;
        }
        match class {
            HardwareClass::Datacenter | HardwareClass::Consumer => Some(128.0),
            HardwareClass::Apple => Some(32.0),
            HardwareClass::Cpu | HardwareClass::Npu => None,
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests;
