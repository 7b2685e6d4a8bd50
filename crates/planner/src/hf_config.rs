//! Model specs from a Hugging Face `config.json`.
//!
//! Reads the keys the llama, mistral, qwen2/qwen3(-moe), mixtral, gemma and
//! deepseek_v2/v3 configs use. Multimodal configs that nest the language model
//! under `text_config` are unwrapped.

use std::path::Path;

use serde_json::Value;

use crate::error::PlannerError;
use crate::model::{Mla, ModelSpec, Moe, validate_spec};
use crate::window::SlidingWindow;

/// Refuse configs larger than this: real ones are a few KiB.
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads and converts a `config.json` file.
pub fn read_file(path: &Path) -> Result<ModelSpec, PlannerError> {
    let io = |source| PlannerError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    let origin = path.display().to_string();
    if len > MAX_CONFIG_BYTES {
        return Err(PlannerError::HfConfig {
            origin,
            message: format!("file is {len} bytes, more than the {MAX_CONFIG_BYTES} allowed"),
        });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    let root: Option<Value> = serde_json::from_str(&text).ok();
    let id = model_name(root.as_ref(), path);
    from_str(&text, &id, &origin)
}

/// What a config file's model is called, most specific first: the config's
/// own `_name_or_path` (its last path segment), else the file's stem
/// (`configs/llama-3-8b.json` → `llama-3-8b`), else — for a file called
/// `config.json`, the Hugging Face layout — the folder it sits in, else the
/// first of `architectures`, else `model_type`.
pub fn model_name(config: Option<&Value>, path: &Path) -> String {
    let field = |k: &str| {
        config
            .and_then(|c| c.get(k))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    if let Some(n) = field("_name_or_path") {
        let last = n.trim_end_matches(['/', '\\']).rsplit(['/', '\\']).next();
        if let Some(last) = last.filter(|l| !l.is_empty()) {
            return last.to_string();
        }
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .filter(|s| !s.is_empty());
    if let Some(stem) = stem
        .as_deref()
        .filter(|s| !s.eq_ignore_ascii_case("config"))
    {
        return stem.to_string();
    }
    if let Some(dir) = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|s| s.to_string_lossy().to_string())
    {
        return dir;
    }
    let arch = config
        .and_then(|c| c.get("architectures"))
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    arch.or_else(|| field("model_type"))
        .unwrap_or("model")
        .to_string()
}

/// Converts `config.json` text; `id` names the model in output.
pub fn from_str(text: &str, id: &str, origin: &str) -> Result<ModelSpec, PlannerError> {
    let err = |message: String| PlannerError::HfConfig {
        origin: origin.to_string(),
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
    let cfg = match root.get("text_config") {
        Some(t) if root.get("hidden_size").is_none() => t,
        _ => &root,
    };
    let get = |k: &str| cfg.get(k).and_then(Value::as_u64);
    let need = |k: &str| get(k).ok_or_else(|| err(format!("missing integer key `{k}`")));

    let hidden = need("hidden_size")?;
    let layers = need("num_hidden_layers")?;
    let heads = need("num_attention_heads")?;
    let kv_heads = get("num_key_value_heads").unwrap_or(heads);
    // Gemma 3's multimodal configs leave these to Gemma3TextConfig's defaults.
    let gemma3 = cfg.get("model_type").and_then(Value::as_str) == Some("gemma3_text");
    let vocab = match get("vocab_size") {
        None if gemma3 => 262_208,
        _ => need("vocab_size")?,
    };
    let expert_or_dense_ffn = need("intermediate_size")?;
    // Llama 4 keeps its dense layers' width apart (`intermediate_size` is an expert's).
    let ffn = get("intermediate_size_mlp").unwrap_or(expert_or_dense_ffn);
    let head_dim = get("head_dim").unwrap_or(if gemma3 { 256 } else { hidden / heads.max(1) });
    let tied = cfg
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let sliding_window = sliding_window(cfg, layers);
    let experts = get("num_local_experts")
        .or(get("num_experts"))
        .or(get("n_routed_experts"));
    let moe = match experts {
        Some(e) if e > 1 => {
            // gpt-oss names it `experts_per_token`.
            let active = get("num_experts_per_tok")
                .or(get("experts_per_token"))
                .ok_or_else(|| err("missing integer key `num_experts_per_tok`".into()))?;
            // Llama 4: every `interleave_moe_layer_step`-th layer has experts
            // (all of them in Scout, every second in Maverick), each with one
            // shared expert; the others are dense at `intermediate_size_mlp`.
            let step = get("interleave_moe_layer_step").filter(|s| *s > 0);
            let (shared, dense_layers) = match step {
                Some(step) => (1, layers - layers / step),
                None => (
                    get("n_shared_experts").unwrap_or(0).min(1024),
                    get("first_k_dense_replace").unwrap_or(0).min(layers),
                ),
            };
            Some(Moe {
                experts: u32::try_from(e).map_err(|_| err(format!("`num_experts` {e} too big")))?,
                active: u32::try_from(active)
                    .map_err(|_| err(format!("`num_experts_per_tok` {active} too big")))?,
                shared: shared as u32,
                expert_ffn: get("moe_intermediate_size").unwrap_or(expert_or_dense_ffn),
                dense_layers: dense_layers as u32,
            })
        }
        _ => None,
    };
    let mla = match get("kv_lora_rank") {
        Some(rank) => Some(Mla {
            kv_lora_rank: rank,
            qk_rope_head_dim: need("qk_rope_head_dim")?,
            qk_nope_head_dim: need("qk_nope_head_dim")?,
            v_head_dim: need("v_head_dim")?,
            q_lora_rank: get("q_lora_rank"),
        }),
        None => None,
    };
    let (kv_heads, head_dim) = match &mla {
        Some(m) => (heads, m.qk_nope_head_dim + m.qk_rope_head_dim),
        None => (kv_heads, head_dim),
    };
    let spec = ModelSpec {
        id: id.to_string(),
        name: cfg
            .get("_name_or_path")
            .and_then(Value::as_str)
            .unwrap_or(id)
            .to_string(),
        aliases: vec![],
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        ffn,
        vocab,
        tied_embeddings: tied,
        context: get("max_position_embeddings"),
        params_b: None,
        moe,
        mla,
        native_quant: native_quant(&root),
        fp8_block: fp8_block(&root),
        sliding_window,
        source: origin.to_string(),
        measured_params: None,
    };
    validate_spec(&spec, origin)?;
    Ok(spec)
}

/// The published weight format from `quantization_config`: `mxfp4`
/// (gpt-oss), `fp8` (DeepSeek-V3, Qwen's FP8 releases), 4-bit AWQ / GPTQ as
/// `int4`; none for 16-bit checkpoints and methods the planner has no
/// format for.
fn native_quant(root: &Value) -> Option<String> {
    let q = root
        .get("quantization_config")
        .or_else(|| root.get("text_config")?.get("quantization_config"))?;
    let method = q.get("quant_method")?.as_str()?.to_ascii_lowercase();
    let bits = q.get("bits").and_then(Value::as_u64);
    match method.as_str() {
        "mxfp4" => Some("mxfp4".into()),
        "fp8" => Some("fp8".into()),
        "awq" | "gptq" if bits.is_none_or(|b| b == 4) => Some("int4".into()),
        _ => None,
    }
}

/// Whether an FP8 `quantization_config` scales its weights per block
/// (`weight_block_size`, DeepSeek-V3's `[128, 128]`).
fn fp8_block(root: &Value) -> bool {
    root.get("quantization_config")
        .or_else(|| root.get("text_config")?.get("quantization_config"))
        .is_some_and(|q| {
            q.get("quant_method").and_then(Value::as_str) == Some("fp8")
                && q.get("weight_block_size").is_some_and(|b| !b.is_null())
        })
}

/// The layers that attend over a window, from the keys the configs use:
/// `layer_types` (`sliding_attention` / `chunked_attention` against
/// `full_attention`: gpt-oss and recent Gemma and Cohere configs), else a
/// period (`sliding_window_pattern`: Gemma 3, Cohere 2; Gemma 2 alternates;
/// Llama 4 chunks the layers `no_rope_layers` marks, three of every four by
/// default). A bare `sliding_window` with none of these (Mistral 7B v0.1) is
/// not taken: llama.cpp and other runtimes attend over the whole context.
fn sliding_window(cfg: &Value, layers: u64) -> Option<SlidingWindow> {
    let get = |k: &str| cfg.get(k).and_then(Value::as_u64);
    let model_type = cfg.get("model_type").and_then(Value::as_str).unwrap_or("");
    let window = get("sliding_window").filter(|w| *w > 0);
    if let Some(types) = cfg.get("layer_types").and_then(Value::as_array) {
        let count = |name: &str| types.iter().filter(|t| t.as_str() == Some(name)).count() as u64;
        let (sliding, chunked) = (count("sliding_attention"), count("chunked_attention"));
        let (window, local) = if chunked > 0 {
            (get("attention_chunk_size"), chunked)
        } else {
            (window, sliding)
        };
        return window
            .filter(|w| *w > 0 && local > 0)
            .map(|window| SlidingWindow {
                window,
                layers: local.min(layers),
            });
    }
    if let Some(chunk) = get("attention_chunk_size").filter(|c| *c > 0) {
        let local = match cfg.get("no_rope_layers").and_then(Value::as_array) {
            Some(flags) => flags.iter().filter(|f| f.as_u64() == Some(1)).count() as u64,
            None => layers - layers / 4,
        };
        return (local > 0).then_some(SlidingWindow {
            window: chunk,
            layers: local.min(layers),
        });
    }
    let period = get("sliding_window_pattern").or(match model_type {
        "gemma2" => Some(2),
        "gemma3" | "gemma3_text" => Some(6),
        _ => None,
    })?;
    SlidingWindow::interleaved(window?, layers, period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_config() {
        let text = r#"{"architectures":["LlamaForCausalLM"],"hidden_size":4096,
            "intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,
            "num_key_value_heads":8,"vocab_size":128256,"tie_word_embeddings":false,
            "max_position_embeddings":131072}"#;
        let s = from_str(text, "llama", "t").unwrap();
        assert!((s.total_params() / 1e9 - 8.03).abs() < 0.01);
        assert_eq!(s.kv_bytes_per_token(2.0), 131072.0);
    }

    #[test]
    fn deepseek_v2_lite_config_is_mla_and_moe() {
        let text = r#"{"hidden_size":2048,"intermediate_size":10944,"moe_intermediate_size":1408,
            "num_attention_heads":16,"num_hidden_layers":27,"num_key_value_heads":16,
            "vocab_size":102400,"n_routed_experts":64,"num_experts_per_tok":6,
            "n_shared_experts":2,"first_k_dense_replace":1,"kv_lora_rank":512,
            "qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,"q_lora_rank":null}"#;
        let s = from_str(text, "dsv2l", "t").unwrap();
        assert!(
            (s.total_params() / 1e9 - 15.7).abs() < 0.2,
            "{}",
            s.total_params()
        );
        assert_eq!(s.kv_bytes_per_token(2.0), 27.0 * 576.0 * 2.0);
        assert!(!s.fp8_block, "a BF16 checkpoint");
        // The same shapes as DeepSeek-V3 publishes them: FP8, 128 × 128 blocks.
        let fp8 = text.replace(
            "\"q_lora_rank\":null}",
            r#""q_lora_rank":null,"quantization_config":{"quant_method":"fp8",
                "weight_block_size":[128,128]}}"#,
        );
        let s = from_str(&fp8, "dsv2l", "t").unwrap();
        assert_eq!(s.native_quant.as_deref(), Some("fp8"));
        assert!(s.fp8_block);
    }

    #[test]
    fn a_config_file_is_named_after_its_model_not_its_folder() {
        let name = |cfg: &str, path: &str| {
            let v: Value = serde_json::from_str(cfg).unwrap();
            model_name(Some(&v), Path::new(path))
        };
        // The bug: `configs/llama-3-8b.json` was called "configs".
        assert_eq!(name("{}", "configs/llama-3-8b.json"), "llama-3-8b");
        assert_eq!(
            name(
                r#"{"_name_or_path":"meta-llama/Meta-Llama-3-8B"}"#,
                "configs/x.json"
            ),
            "Meta-Llama-3-8B"
        );
        // A Hugging Face snapshot's config.json: the folder is the model.
        assert_eq!(name("{}", "models/Qwen2.5-7B/config.json"), "Qwen2.5-7B");
        assert_eq!(
            name(r#"{"architectures":["LlamaForCausalLM"]}"#, "config.json"),
            "LlamaForCausalLM"
        );
    }

    #[test]
    fn gpt_oss_config_reads_layer_types_and_experts_per_token() {
        let types: Vec<&str> = (0..36)
            .map(|i| {
                if i % 2 == 0 {
                    "sliding_attention"
                } else {
                    "full_attention"
                }
            })
            .collect();
        let text = serde_json::json!({
            "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
            "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
            "num_hidden_layers": 36, "vocab_size": 201088, "num_local_experts": 128,
            "experts_per_token": 4, "sliding_window": 128, "layer_types": types,
            "tie_word_embeddings": false,
            "quantization_config": {"quant_method": "mxfp4",
                "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]}
        })
        .to_string();
        let s = from_str(&text, "gpt-oss-120b", "t").unwrap();
        assert!(
            (s.total_params() / 1e9 - 116.8).abs() < 0.5,
            "{}",
            s.total_params()
        );
        assert_eq!(s.native_quant.as_deref(), Some("mxfp4"));
        assert!(!s.fp8_block, "MXFP4 is not block-scaled FP8");
        assert_eq!(s.moe.as_ref().unwrap().active, 4);
        let w = s.sliding_window.unwrap();
        assert_eq!((w.window, w.layers), (128, 18));
        // At 128k tokens the cache is about half the all-global one.
        let held = s.attended_keys(131_072.0) / 131_072.0;
        assert!((held - 0.5).abs() < 0.01, "{held}");
    }

    #[test]
    fn llama_4_config_reads_interleaved_experts_and_chunks() {
        let text = r#"{"model_type":"llama4","text_config":{"model_type":"llama4_text",
            "hidden_size":5120,"intermediate_size":8192,"intermediate_size_mlp":16384,
            "num_attention_heads":40,"num_key_value_heads":8,"head_dim":128,
            "num_hidden_layers":48,"vocab_size":202048,"num_local_experts":128,
            "num_experts_per_tok":1,"interleave_moe_layer_step":2,
            "attention_chunk_size":8192}}"#;
        let s = from_str(text, "maverick", "t").unwrap();
        assert!(
            (s.total_params() / 1e9 - 400.0).abs() < 4.0,
            "{}",
            s.total_params()
        );
        let m = s.moe.as_ref().unwrap();
        assert_eq!((m.shared, m.dense_layers, m.expert_ffn), (1, 24, 8192));
        assert_eq!(s.ffn, 16384);
        let w = s.sliding_window.unwrap();
        assert_eq!((w.window, w.layers), (8192, 36));
    }

    #[test]
    fn gemma_3_text_config_takes_its_pattern_and_defaults() {
        // The multimodal 12B config leaves `head_dim`, `vocab_size` and the
        // pattern to Gemma3TextConfig's defaults.
        let text = r#"{"model_type":"gemma3","text_config":{"model_type":"gemma3_text",
            "hidden_size":3840,"intermediate_size":15360,"num_attention_heads":16,
            "num_hidden_layers":48,"num_key_value_heads":8,"sliding_window":1024}}"#;
        let s = from_str(text, "gemma-3-12b", "t").unwrap();
        assert_eq!((s.head_dim, s.vocab), (256, 262_208));
        let w = s.sliding_window.unwrap();
        assert_eq!((w.window, w.layers), (1024, 40));
        // Mistral 7B v0.1's bare `sliding_window` is not a layer pattern.
        let text = r#"{"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,
            "num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
            "vocab_size":32000,"sliding_window":4096}"#;
        assert_eq!(from_str(text, "m", "t").unwrap().sliding_window, None);
    }

    #[test]
    fn missing_key_is_named() {
        let e = from_str(r#"{"hidden_size":8}"#, "x", "c.json").unwrap_err();
        assert!(e.to_string().contains("num_hidden_layers"), "{e}");
        assert!(from_str("not json", "x", "c.json").is_err());
    }
}
