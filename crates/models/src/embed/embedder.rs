//! The BERT embedder itself.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use super::{EmbedError, EmbedderOptions};
use crate::hash::file_sha256;

/// A sentence embedder: text in, L2-normalised vectors out.
///
/// `Send + Sync`: share it behind an `Arc` and call [`embed`](Self::embed) from
/// several threads (each call is CPU-bound; async callers use `spawn_blocking`).
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dim: usize,
    pad_id: u32,
    options: EmbedderOptions,
    version: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("version", &self.version)
            .field("dim", &self.dim)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn require(path: PathBuf) -> Result<PathBuf, EmbedError> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(EmbedError::ModelMissing { path })
    }
}

impl Embedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`
    /// (e.g. [`minilm_dir`](crate::minilm_dir)`(&models_dir())`).
    pub fn load(dir: &Path, options: EmbedderOptions) -> Result<Self, EmbedError> {
        if options.batch_size == 0 {
            return Err(EmbedError::InvalidOption {
                field: "batch_size",
                message: "must be at least 1, got 0".to_owned(),
            });
        }
        if options.max_tokens < 2 {
            return Err(EmbedError::InvalidOption {
                field: "max_tokens",
                message: format!("must be at least 2, got {}", options.max_tokens),
            });
        }
        let config_path = require(dir.join("config.json"))?;
        let tokenizer_path = require(dir.join("tokenizer.json"))?;
        let weights_path = require(dir.join("model.safetensors"))?;

        let config_text =
            std::fs::read_to_string(&config_path).map_err(|source| EmbedError::Io {
                path: config_path.clone(),
                source,
            })?;
        let config: Config =
            serde_json::from_str(&config_text).map_err(|e| EmbedError::Config {
                path: config_path.clone(),
                detail: e.to_string(),
            })?;
        let raw: serde_json::Value =
            serde_json::from_str(&config_text).map_err(|e| EmbedError::Config {
                path: config_path.clone(),
                detail: e.to_string(),
            })?;
        let dim = raw
            .get("hidden_size")
            .and_then(serde_json::Value::as_u64)
            .and_then(|d| usize::try_from(d).ok())
            .ok_or_else(|| EmbedError::Config {
                path: config_path.clone(),
                detail: "no `hidden_size`".to_owned(),
            })?;
        let max_positions = raw
            .get("max_position_embeddings")
            .and_then(serde_json::Value::as_u64)
            .map_or(usize::MAX, |p| usize::try_from(p).unwrap_or(usize::MAX));
        let max_tokens = options.max_tokens.min(max_positions);

        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbedError::Tokenizer {
                detail: format!("{}: {e}", tokenizer_path.display()),
            })?;
        let pad_id = tokenizer.get_padding().map_or(0, |p| p.pad_id);
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer {
                detail: e.to_string(),
            })?;

        let weights = std::fs::read(&weights_path).map_err(|source| EmbedError::Io {
            path: weights_path.clone(),
            source,
        })?;
        let device = Device::Cpu;
        let weights_err = |e: candle_core::Error| EmbedError::Weights {
            path: weights_path.clone(),
            detail: e.to_string(),
        };
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(weights_err)?;
        let model = BertModel::load(vb, &config).map_err(weights_err)?;

        let hash = file_sha256(&weights_path).map_err(|source| EmbedError::Io {
            path: weights_path.clone(),
            source,
        })?;
        let name = dir.file_name().map_or_else(
            || "embedder".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        );
        let version = format!("{name}@{}", &hash[..12]);
        Ok(Self {
            model,
            tokenizer,
            device,
            dim,
            pad_id,
            options: EmbedderOptions {
                max_tokens,
                ..options
            },
            version,
        })
    }

    /// The length of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The model's version tag: directory name and the first 12 hex digits of
    /// the weights' SHA-256.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn options(&self) -> &EmbedderOptions {
        &self.options
    }

    /// Token ids of `text` as the model sees it (`[CLS] ... [SEP]`, truncated).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer
            .encode_fast(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| EmbedError::Tokenizer {
                detail: e.to_string(),
            })
    }

    /// The text of token ids, special tokens skipped.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String, EmbedError> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| EmbedError::Tokenizer {
                detail: e.to_string(),
            })
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut out = self.embed(&[text])?;
        out.pop()
            .ok_or_else(|| EmbedError::Inference("no output".to_owned()))
    }

    /// Embeds `texts` in batches; vector `i` belongs to `texts[i]`. An empty
    /// slice gives an empty result; an empty string embeds `[CLS] [SEP]`.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encoded = Vec::with_capacity(texts.len());
        for text in texts {
            encoded.push(self.tokenize(text.as_ref())?);
        }
        // Longest first, so each batch pads to a length close to its members'.
        let mut order: Vec<usize> = (0..encoded.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encoded[i].len()));
        let mut out = vec![Vec::new(); encoded.len()];
        for batch in order.chunks(self.options.batch_size) {
            let ids: Vec<&[u32]> = batch.iter().map(|&i| encoded[i].as_slice()).collect();
            let vectors = self.forward(&ids)?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One forward pass over a batch of token-id sequences.
    fn forward(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = batch.len();
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for seq in batch {
            ids.extend_from_slice(seq);
            ids.extend(std::iter::repeat_n(self.pad_id, len - seq.len()));
            mask.extend(std::iter::repeat_n(1u32, seq.len()));
            mask.extend(std::iter::repeat_n(0u32, len - seq.len()));
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
        let type_ids = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (n, len, dim)
        // Masked mean pooling, then L2 normalisation.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, dim)
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        let normalised = mean.broadcast_div(&norm)?;
        Ok(normalised.to_vec2::<f32>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directory_names_the_file_and_the_fix() {
        let err = Embedder::load(Path::new("/nonexistent/minilm"), EmbedderOptions::default())
            .unwrap_err();
        assert_eq!(err.code(), "embed_model_missing");
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/minilm/config.json"), "{msg}");
        assert!(msg.contains("glassbox models fetch"), "{msg}");
    }

    #[test]
    fn zero_batch_size_is_rejected() {
        let err = Embedder::load(
            Path::new("/nonexistent"),
            EmbedderOptions {
                batch_size: 0,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(err.code(), "embed_invalid_option");
    }
}
