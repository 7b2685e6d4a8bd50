//! Model specs: the shapes that decide memory, bytes moved and FLOPs.
//!
//! A spec comes from the built-in catalogue (`data/models.toml`), a Hugging
//! Face `config.json` ([`crate::hf_config`]) or a GGUF header
//! ([`crate::gguf`]). Parameter counts are derived from the shapes so the same
//! formulas serve all three, and MoE (active vs total) and MLA (compressed KV)
//! fall out of the shapes rather than special cases in the estimator.

use serde::{Deserialize, Serialize};

use crate::error::PlannerError;
use crate::names;
use crate::window::SlidingWindow;

const BUILTIN: &str = include_str!("../data/models.toml");

/// Mixture-of-experts layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Routed experts each token uses.
    pub active: u32,
    /// Always-on shared experts (DeepSeek).
    #[serde(default)]
    pub shared: u32,
    /// FFN width of one expert.
    pub expert_ffn: u64,
    /// Leading layers with a dense FFN instead of experts (DeepSeek `first_k_dense_replace`).
    #[serde(default)]
    pub dense_layers: u32,
}

/// Multi-head latent attention (DeepSeek-V2/V3): the KV cache stores one
/// compressed latent of `kv_lora_rank + qk_rope_head_dim` per token per layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    pub kv_lora_rank: u64,
    pub qk_rope_head_dim: u64,
    pub qk_nope_head_dim: u64,
    pub v_head_dim: u64,
    #[serde(default)]
    pub q_lora_rank: Option<u64>,
}

/// The architecture of one decoder-only transformer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// Dense FFN width (for MoE models: the width of the dense layers, if any).
    pub ffn: u64,
    pub vocab: u64,
    #[serde(default)]
    pub tied_embeddings: bool,
    #[serde(default)]
    pub context: Option<u64>,
    /// Published parameter count in billions, kept as a cross-check.
    #[serde(default)]
    pub params_b: Option<f64>,
    #[serde(default)]
    pub moe: Option<Moe>,
    #[serde(default)]
    pub mla: Option<Mla>,
    /// The weight format the model is published in where it is not 16-bit
    /// (gpt-oss: `mxfp4`, DeepSeek-V3: `fp8`): a plan's format when `--quant`
    /// is not given. From `quantization_config.quant_method` in a config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_quant: Option<String>,
    /// The FP8 checkpoint has one scale per 128 × 128 block (DeepSeek-V3):
    /// its GEMMs have a time floor at small batch (the `block_fp8` module).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_block: bool,
    /// Layers that attend over a window of recent tokens only (Gemma 2/3,
    /// gpt-oss, Llama 4's chunked layers): [`crate::window`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<SlidingWindow>,
    #[serde(default)]
    pub source: String,
    /// Parameters counted from a file's tensors, which beat the shape formula.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_params: Option<f64>,
}

impl ModelSpec {
    /// Attention projection parameters in one layer.
    pub fn attention_params_per_layer(&self) -> f64 {
        let h = self.hidden as f64;
        match &self.mla {
            Some(m) => {
                let heads = self.heads as f64;
                let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
                let q = match m.q_lora_rank {
                    Some(r) => h * r as f64 + r as f64 * heads * qk,
                    None => h * heads * qk,
                };
                let kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) as f64;
                let kv_b =
                    m.kv_lora_rank as f64 * heads * (m.qk_nope_head_dim + m.v_head_dim) as f64;
                let o = heads * m.v_head_dim as f64 * h;
                q + kv_a + kv_b + o
            }
            None => {
                let q = h * (self.heads * self.head_dim) as f64;
                let kv = 2.0 * h * (self.kv_heads * self.head_dim) as f64;
                q + kv + q
            }
        }
    }

    pub(crate) fn gated_ffn(&self, width: u64) -> f64 {
        3.0 * self.hidden as f64 * width as f64
    }

    /// Expected distinct routed experts one MoE layer touches for `batch`
    /// tokens with uniform routing: `E × (1 − (1 − k/E)^b)`. One token reads
    /// `k` experts; a large batch reads all of them.
    pub fn distinct_experts(&self, batch: f64) -> f64 {
        match &self.moe {
            Some(m) if m.experts > 0 => {
                let e = m.experts as f64;
                let k = (m.active as f64).min(e);
                e * (1.0 - (1.0 - k / e).powf(batch.max(1.0)))
            }
            _ => 0.0,
        }
    }

    /// Layers with routed experts (0 for a dense model).
    pub fn moe_layers(&self) -> u64 {
        self.moe.as_ref().map_or(0, |m| {
            self.layers - u64::from(m.dense_layers).min(self.layers)
        })
    }

    /// FFN parameters over all layers when `experts_used` routed experts per
    /// MoE layer are counted (total: all; per token: `active`).
    fn ffn_params(&self, experts_used: f64) -> f64 {
        match &self.moe {
            None => self.layers as f64 * self.gated_ffn(self.ffn),
            Some(m) => {
                let dense_layers = (m.dense_layers as u64).min(self.layers);
                let moe_layers = (self.layers - dense_layers) as f64;
                let expert = self.gated_ffn(m.expert_ffn);
                let router = self.hidden as f64 * m.experts as f64;
                dense_layers as f64 * self.gated_ffn(self.ffn)
                    + moe_layers * ((experts_used + m.shared as f64) * expert + router)
            }
        }
    }

    /// Embedding table (`vocab × hidden`).
    pub fn embedding_params(&self) -> f64 {
        (self.vocab * self.hidden) as f64
    }

    /// Total parameters: what has to sit in memory.
    pub fn total_params(&self) -> f64 {
        if let Some(p) = self.measured_params {
            return p;
        }
        let experts = self.moe.as_ref().map_or(0.0, |m| m.experts as f64);
        let lm_head = if self.tied_embeddings {
            0.0
        } else {
            self.embedding_params()
        };
        self.layers as f64 * self.attention_params_per_layer()
            + self.ffn_params(experts)
            + self.embedding_params()
            + lm_head
    }

    /// Parameters one token multiplies by (MoE: active experts only). The
    /// embedding lookup is free; the LM head matmul is not, tied or not.
    pub fn active_matmul_params(&self) -> f64 {
        let active = self.moe.as_ref().map_or(0.0, |m| m.active as f64);
        self.layers as f64 * self.attention_params_per_layer()
            + self.ffn_params(active)
            + self.embedding_params()
    }

    /// Parameters read from memory by one decode step over `batch` sequences:
    /// all layers (MoE: the experts the batch touches) plus the LM head. The
    /// input embedding table is not streamed (only `batch` rows of it are read).
    pub fn decode_read_params(&self, batch: f64) -> f64 {
        let experts = self.distinct_experts(batch);
        let computed = self.layers as f64 * self.attention_params_per_layer()
            + self.ffn_params(experts)
            + self.embedding_params();
        // A file's own count corrects the shape formula by the same ratio.
        match self.measured_params {
            Some(m) => computed * m / self.computed_total().max(1.0),
            None => computed,
        }
    }

    fn computed_total(&self) -> f64 {
        let mut s = self.clone();
        s.measured_params = None;
        s.total_params()
    }

    /// Active parameters in billions, the `params(B)` of seeds 000/001.
    pub fn active_params_b(&self) -> f64 {
        if self.moe.is_some() {
            let lm_head = if self.tied_embeddings {
                0.0
            } else {
                self.embedding_params()
            };
            (self.active_matmul_params() + self.embedding_params() - lm_head) / 1e9
        } else {
            self.total_params() / 1e9
        }
    }

    /// KV-cache bytes per token at `bytes_per_elem` (2 for FP16, 1 for FP8).
    /// GQA stores `kv_heads` heads; MLA stores one latent per layer.
    pub fn kv_bytes_per_token(&self, bytes_per_elem: f64) -> f64 {
        match &self.mla {
            Some(m) => {
                self.layers as f64 * (m.kv_lora_rank + m.qk_rope_head_dim) as f64 * bytes_per_elem
            }
            None => {
                2.0 * self.layers as f64 * (self.kv_heads * self.head_dim) as f64 * bytes_per_elem
            }
        }
    }

    /// How many distinct parts a KV cache splits into over `tp`
    /// tensor-parallel ranks. Each rank holds the KV heads its query heads
    /// read, so with fewer KV heads than ranks the heads are copied:
    /// vLLM's `QKVParallelLinear` keeps `tp / kv_heads` replicas of each
    /// (`num_kv_head_replicas`), and so do engines that split attention the
    /// same way. MLA's latent is one vector per token that every head reads,
    /// so every rank holds all of it (the duplication SGLang's data-parallel
    /// attention for DeepSeek exists to avoid).
    pub fn kv_shards(&self, tp: u32) -> u64 {
        let tp = u64::from(tp.max(1));
        match &self.mla {
            Some(_) => 1,
            None => tp.min(self.kv_heads.max(1)),
        }
    }

    /// Copies of each token's KV a `tp`-way replica holds: `tp / kv_shards`.
    pub fn kv_copies(&self, tp: u32) -> f64 {
        f64::from(tp.max(1)) / self.kv_shards(tp) as f64
    }

    /// The formula behind [`kv_bytes_per_token`](Self::kv_bytes_per_token), for explanations.
    pub fn kv_formula(&self) -> String {
        match &self.mla {
            Some(m) => format!(
                "layers × (kv_lora_rank + qk_rope_head_dim) × bytes = {} × ({} + {}) × b (MLA latent)",
                self.layers, m.kv_lora_rank, m.qk_rope_head_dim
            ),
            None => format!(
                "2 × layers × kv_heads × head_dim × bytes = 2 × {} × {} × {} × b",
                self.layers, self.kv_heads, self.head_dim
            ),
        }
    }

    /// Keys a token at position `ctx` attends over, averaged over the
    /// layers: `ctx`, less where layers attend over a window
    /// ([`SlidingWindow::mean_keys`]). Also the KV tokens an engine with a
    /// windowed cache holds for a sequence of `ctx` tokens.
    pub fn attended_keys(&self, ctx: f64) -> f64 {
        match &self.sliding_window {
            Some(w) => w.mean_keys(self.layers, ctx),
            None => ctx,
        }
    }

    /// KV tokens `engine` keeps for a sequence of `ctx` tokens, averaged
    /// over the layers: [`Self::attended_keys`] where the engine stores only
    /// the window of a windowed layer
    /// ([`Engine::windowed_kv_cache`](crate::Engine::windowed_kv_cache)),
    /// else `ctx`.
    pub fn kv_tokens_held(&self, ctx: f64, engine: crate::Engine) -> f64 {
        if engine.windowed_kv_cache() {
            self.attended_keys(ctx)
        } else {
            ctx
        }
    }

    /// Keys each of `tokens` new tokens after `past` cached ones attends
    /// over on average under a causal mask, averaged over the layers.
    pub fn mean_causal_keys(&self, tokens: f64, past: f64) -> f64 {
        match &self.sliding_window {
            Some(w) => w.mean_causal_keys(self.layers, tokens, past),
            None => past + (tokens + 1.0) / 2.0,
        }
    }

    /// Attention score FLOPs per layer for one query token over `context`
    /// keys: `2·ctx·heads·(d_qk + d_v)` (QKᵀ plus AV).
    pub fn attention_flops_per_token_layer(&self, context: f64) -> f64 {
        let (qk, v) = match &self.mla {
            Some(m) => (
                (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64,
                m.v_head_dim as f64,
            ),
            None => (self.head_dim as f64, self.head_dim as f64),
        };
        2.0 * context * self.heads as f64 * (qk + v)
    }

    /// Forward FLOPs for `tokens` new tokens after `past` cached ones:
    /// `2·P_active·n` for the matmuls plus causal attention.
    pub fn forward_flops(&self, tokens: f64, past: f64) -> f64 {
        2.0 * self.active_matmul_params() * tokens + self.attention_flops(tokens, past)
    }

    /// The attention-score part of [`forward_flops`](Self::forward_flops):
    /// causal attention of `tokens` new tokens over `past` cached ones.
    pub fn attention_flops(&self, tokens: f64, past: f64) -> f64 {
        // Mean context seen by the new tokens under a causal mask.
        let mean_ctx = self.mean_causal_keys(tokens, past);
        self.layers as f64 * tokens * self.attention_flops_per_token_layer(mean_ctx)
    }

    fn validate(&self, origin: &str) -> Result<(), PlannerError> {
        let fields = [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("vocab", self.vocab),
        ];
        for (name, v) in fields {
            if v == 0 || v > 1 << 24 {
                return Err(PlannerError::invalid(
                    format!("{origin}: model `{}`.{name}", self.id),
                    format!("must be between 1 and 16777216, got {v}"),
                ));
            }
        }
        if let Some(w) = &self.sliding_window
            && (w.window == 0 || w.layers == 0 || w.layers > self.layers)
        {
            return Err(PlannerError::invalid(
                format!("{origin}: model `{}`.sliding_window", self.id),
                format!(
                    "window must be >= 1 and layers between 1 and the model's {} layers, got window {} over {} layers",
                    self.layers, w.window, w.layers
                ),
            ));
        }
        if let Some(m) = &self.moe
            && (m.active == 0 || m.active > m.experts)
        {
            return Err(PlannerError::invalid(
                format!("{origin}: model `{}`.moe.active", self.id),
                format!(
                    "must be between 1 and experts ({}), got {}",
                    m.experts, m.active
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    model: Vec<ModelSpec>,
}

/// The built-in models.
#[derive(Debug, Clone)]
pub struct ModelCatalogue {
    models: Vec<ModelSpec>,
}

impl ModelCatalogue {
    pub fn builtin() -> Result<Self, PlannerError> {
        let file: CatalogueFile = toml::from_str(BUILTIN).map_err(|e| PlannerError::Toml {
            origin: "builtin models.toml".into(),
            message: e.to_string(),
        })?;
        for m in &file.model {
            m.validate("builtin models.toml")?;
        }
        Ok(Self { models: file.model })
    }

    pub fn all(&self) -> &[ModelSpec] {
        &self.models
    }

    /// Finds a model by id or alias, case-insensitively, else by the
    /// `names::model_key` of its id, aliases or name, so a Hugging Face
    /// repository id such as `meta-llama/Llama-3.1-8B-Instruct` finds
    /// `llama-3.1-8b`.
    pub fn get(&self, name: &str) -> Result<&ModelSpec, PlannerError> {
        names::find(&self.models, name, names::model_key).ok_or_else(|| {
            PlannerError::UnknownModel {
                name: name.to_string(),
                suggestion: names::suggestion(&self.models, name),
            }
        })
    }
}

impl names::Named for ModelSpec {
    fn id(&self) -> &str {
        &self.id
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn display_name(&self) -> &str {
        &self.name
    }
}

pub(crate) fn validate_spec(spec: &ModelSpec, origin: &str) -> Result<(), PlannerError> {
    spec.validate(origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> ModelCatalogue {
        ModelCatalogue::builtin().unwrap()
    }

    #[test]
    fn derived_counts_match_published_ones() {
        for m in cat().all() {
            let published = m.params_b.unwrap() * 1e9;
            let derived = m.total_params();
            let err = (derived - published).abs() / published;
            assert!(
                err < 0.04,
                "{}: derived {derived:.3e} vs published {published:.3e}",
                m.id
            );
        }
    }

    #[test]
    fn hugging_face_repository_ids_find_their_model() {
        let c = cat();
        for (name, id) in [
            ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
            ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3.1-8b"),
            ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),
            ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
            ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
            ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
            ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
            ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
            ("google/gemma-2-9b-it", "gemma-2-9b"),
            ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini"),
            ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m"),
            ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
            ("meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b"),
            ("Qwen/Qwen2.5-1.5B-Instruct", "qwen2.5-1.5b"),
            ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"),
            ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b"),
            ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "qwen2.5-32b"),
            ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-12b"),
            (
                "mistralai/Mistral-Small-24B-Instruct-2501",
                "mistral-small-24b",
            ),
            ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
            ("openai/gpt-oss-120b", "gpt-oss-120b"),
            ("openai/gpt-oss-20b", "gpt-oss-20b"),
            ("google/gemma-3-27b-it", "gemma-3-27b"),
            ("google/gemma-3-4b-it", "gemma-3-4b"),
            ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
            (
                "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
                "llama-4-maverick",
            ),
            ("mistralai/Mistral-Large-Instruct-2407", "mistral-large-2"),
            ("microsoft/Phi-3.5-mini-instruct", "phi-3-mini"),
            ("microsoft/phi-4", "phi-4"),
            ("codellama/CodeLlama-34b-Instruct-hf", "codellama-34b"),
        ] {
            assert_eq!(c.get(name).unwrap().id, id, "{name}");
        }
        // A quantised repository is not silently the base model.
        assert!(matches!(
            c.get("TheBloke/Llama-2-7B-GPTQ"),
            Err(PlannerError::UnknownModel { .. })
        ));
    }

    #[test]
    fn no_two_models_share_a_loose_name() {
        let mut seen = std::collections::HashMap::new();
        for m in cat().all() {
            for n in names::spellings(m) {
                let key = names::model_key(n);
                if let Some(other) = seen.insert(key.clone(), m.id.clone()) {
                    assert_eq!(other, m.id, "`{key}` names both {other} and {}", m.id);
                }
            }
        }
    }

    #[test]
    fn moe_active_is_smaller_than_total() {
        let c = cat();
        let mixtral = c.get("mixtral-8x7b").unwrap();
        assert!(
            (mixtral.active_params_b() - 12.9).abs() < 0.3,
            "{}",
            mixtral.active_params_b()
        );
        let q3 = c.get("qwen3-30b-a3b").unwrap();
        assert!(
            (q3.active_params_b() - 3.3).abs() < 0.3,
            "{}",
            q3.active_params_b()
        );
        // A batch of 64 touches nearly every Mixtral expert.
        assert!(mixtral.distinct_experts(1.0) == 2.0);
        assert!(mixtral.distinct_experts(64.0) > 7.9);
    }

    #[test]
    fn tensor_parallel_ranks_copy_kv_heads_they_cannot_split() {
        let c = cat();
        // Llama 3.1 70B: 8 KV heads, one per rank at tp 8.
        let llama = c.get("llama-3.1-70b").unwrap();
        assert_eq!((llama.kv_shards(8), llama.kv_copies(8)), (8, 1.0));
        // Qwen2.5-7B: 4 KV heads over 8 ranks, each held twice.
        let qwen = c.get("qwen2.5-7b").unwrap();
        assert_eq!(qwen.kv_heads, 4);
        assert_eq!((qwen.kv_shards(8), qwen.kv_copies(8)), (4, 2.0));
        assert_eq!(qwen.kv_copies(4), 1.0);
        // DeepSeek-V3's MLA latent: every rank holds all of it.
        let ds = c.get("deepseek-v3").unwrap();
        assert_eq!((ds.kv_shards(8), ds.kv_copies(8)), (1, 8.0));
        // One device holds one copy of anything.
        for m in c.all() {
            assert_eq!(m.kv_copies(1), 1.0, "{}", m.id);
        }
    }

    #[test]
    fn kv_cache_is_gqa_and_mla_aware() {
        let c = cat();
        // Llama-3.1-8B: 2 × 32 × 8 × 128 × 2 B = 128 KiB per token.
        assert_eq!(
            c.get("llama-3.1-8b").unwrap().kv_bytes_per_token(2.0),
            131072.0
        );
        // Llama-2-7B (MHA): 512 KiB per token.
        assert_eq!(
            c.get("llama-2-7b").unwrap().kv_bytes_per_token(2.0),
            524288.0
        );
        // DeepSeek-V3 (MLA): 61 × (512 + 64) × 2 B = 70,272 B, not 61 × 2 × 128 × 128 × 2.
        assert_eq!(
            c.get("deepseek-v3").unwrap().kv_bytes_per_token(2.0),
            70272.0
        );
    }

    #[test]
    fn unknown_model_suggests() {
        let e = cat().get("llama-3.1-8").unwrap_err();
        assert!(e.to_string().contains("did you mean"), "{e}");
    }

    #[test]
    fn catalogue_holds_dense_moe_and_mla_models() {
        let c = cat();
        // README and docs/planner.md count 36.
        assert!(c.all().len() >= 36, "{}", c.all().len());
        assert!(c.all().iter().any(|m| m.moe.is_some() && m.mla.is_none()));
        assert!(c.all().iter().any(|m| m.mla.is_some()));
    }
}
