//! The BERT embedder itself.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use tokenizers::{Tokenizer, TruncationParams};

use super::batch::{BatchStats, Coalescer};
use super::onnx::{self, BertConfig};
use super::{EmbedError, EmbedderOptions};
use crate::hash::file_sha256;
use crate::paths::{ONNXRUNTIME_LIB, models_dir};

/// A sentence embedder: text in, L2-normalised vectors out.
///
/// `Send + Sync`: share it behind an `Arc` and call [`embed`](Self::embed) from
/// several threads (each call is CPU-bound and uses the session's threads;
/// async callers use `spawn_blocking`). Small concurrent calls are batched
/// into shared forward passes (see [`batch_stats`](Self::batch_stats)).
pub struct Embedder {
    session: Mutex<Session>,
    coalescer: Coalescer,
    tokenizer: Tokenizer,
    dim: usize,
    pad_id: u32,
    options: EmbedderOptions,
    version: String,
    runtime: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("version", &self.version)
            .field("dim", &self.dim)
            .field("options", &self.options)
            .field("runtime", &self.runtime)
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

/// Where the ONNX Runtime library is: `$GLASSBOX_ONNXRUNTIME`, else beside the
/// model directory in the models directory, else in [`models_dir()`].
fn runtime_library(model_dir: &Path) -> Result<PathBuf, EmbedError> {
    let chosen = std::env::var_os("GLASSBOX_ONNXRUNTIME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    find_runtime(chosen, model_dir, &models_dir())
}

fn find_runtime(
    chosen: Option<PathBuf>,
    model_dir: &Path,
    models: &Path,
) -> Result<PathBuf, EmbedError> {
    if let Some(path) = chosen {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(EmbedError::RuntimeMissing {
                path,
                hint: "`GLASSBOX_ONNXRUNTIME` names a file that does not exist; unset it to use \
                       the library `glassbox models fetch` brings",
            })
        };
    }
    let beside = model_dir.parent().map(|m| m.join(ONNXRUNTIME_LIB));
    let default = models.join(ONNXRUNTIME_LIB);
    beside
        .iter()
        .chain(std::iter::once(&default))
        .find(|p| p.is_file())
        .cloned()
        .ok_or(EmbedError::RuntimeMissing {
            path: beside.unwrap_or(default),
            hint: crate::paths::FETCH_HINT,
        })
}

/// The process-wide ONNX Runtime environment, loaded from `library` on first use.
fn environment(library: &Path) -> Result<&'static Environment, EmbedError> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        ort::init_from(library)
            .map_err(|e| e.to_string())?
            .with_name("glassbox")
            .with_telemetry(false)
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|detail| EmbedError::Runtime {
        path: library.to_path_buf(),
        detail: detail.clone(),
    })
}

impl Embedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`
    /// (e.g. [`minilm_dir`](crate::minilm_dir)`(&models_dir())`) and ONNX
    /// Runtime from the models directory.
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
        let runtime = runtime_library(dir)?;

        let config_text =
            std::fs::read_to_string(&config_path).map_err(|source| EmbedError::Io {
                path: config_path.clone(),
                source,
            })?;
        let config: BertConfig =
            serde_json::from_str(&config_text).map_err(|e| EmbedError::Config {
                path: config_path.clone(),
                detail: e.to_string(),
            })?;
        let dim = config.hidden_size;
        let max_tokens = options.max_tokens.min(config.max_position_embeddings);

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
        let attention = match std::env::var("GLASSBOX_EMBED_ATTENTION").as_deref() {
            Ok("standard") => onnx::Attention::Standard,
            _ => options.attention,
        };
        let model =
            onnx::bert_model(&config, &weights, attention).map_err(|e| EmbedError::Weights {
                path: weights_path.clone(),
                detail: e.to_string(),
            })?;
        drop(weights);
        let env = environment(&runtime)?;
        let session_err = |e: String| EmbedError::Runtime {
            path: runtime.clone(),
            detail: e,
        };
        let mut builder = Session::builder(env)
            .map_err(|e| session_err(e.to_string()))?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| session_err(e.to_string()))?
            .with_inter_threads(1)
            .map_err(|e| session_err(e.to_string()))?
            // Idle threads sleep instead of spinning: the embedder shares the
            // cores with llama.cpp (costs ~2% of embedding throughput).
            .with_intra_op_spinning(false)
            .map_err(|e| session_err(e.to_string()))?;
        if options.threads > 0 {
            builder = builder
                .with_intra_threads(options.threads)
                .map_err(|e| session_err(e.to_string()))?;
        }
        let session = builder
            .commit_from_memory(&model)
            .map_err(|e| session_err(e.to_string()))?;

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
            session: Mutex::new(session),
            coalescer: Coalescer::new(options.batch_size, options.batch_window),
            tokenizer,
            dim,
            pad_id,
            options: EmbedderOptions {
                max_tokens,
                attention,
                ..options
            },
            version,
            runtime,
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

    /// The ONNX Runtime library this embedder runs on.
    pub fn runtime(&self) -> &Path {
        &self.runtime
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

    /// Forward passes run and texts embedded by dynamic batching (calls
    /// smaller than a batch), since load: `rows / passes` is the mean batch.
    pub fn batch_stats(&self) -> BatchStats {
        self.coalescer.stats()
    }

    /// Embeds `texts` in batches; vector `i` belongs to `texts[i]`. An empty
    /// slice gives an empty result; an empty string embeds `[CLS] [SEP]`.
    /// A call smaller than a batch shares its forward pass with concurrent
    /// calls.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encoded = Vec::with_capacity(texts.len());
        for text in texts {
            encoded.push(self.tokenize(text.as_ref())?);
        }
        if encoded.is_empty() {
            return Ok(Vec::new());
        }
        if encoded.len() < self.options.batch_size {
            return self.coalescer.embed(encoded, &|batch| self.forward(batch));
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

    /// One forward pass over a batch of token-id sequences: masked mean
    /// pooling of the last hidden states, then L2 normalisation.
    fn forward(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = batch.len();
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(n * len);
        for seq in batch {
            ids.extend(seq.iter().map(|&t| i64::from(t)));
            ids.extend(std::iter::repeat_n(i64::from(self.pad_id), len - seq.len()));
        }
        let positions: Vec<i64> = (0..len as i64).collect();
        let err = |e: ort::Error| EmbedError::Inference(e.to_string());
        let mut inputs = ort::inputs![
            "input_ids" => Tensor::from_array(([n, len], ids)).map_err(err)?,
            "positions" => Tensor::from_array(([len], positions)).map_err(err)?,
        ];
        let mut session = self
            .session
            .lock()
            .map_err(|_| EmbedError::Inference("an earlier call panicked".to_owned()))?;
        if self.options.attention == onnx::Attention::Fused {
            let lengths: Vec<i32> = batch
                .iter()
                .map(|seq| i32::try_from(seq.len()).unwrap_or(i32::MAX))
                .collect();
            inputs.push((
                "lengths".into(),
                Tensor::from_array(([n], lengths)).map_err(err)?.into(),
            ));
        } else {
            let mut bias = Vec::with_capacity(n * len);
            for seq in batch {
                bias.extend(std::iter::repeat_n(0.0f32, seq.len()));
                bias.extend(std::iter::repeat_n(onnx::MASKED, len - seq.len()));
            }
            inputs.push((
                "mask_bias".into(),
                Tensor::from_array(([n, 1, 1, len], bias))
                    .map_err(err)?
                    .into(),
            ));
        }
        let outputs = session.run(inputs).map_err(err)?;
        let (shape, hidden) = outputs["hidden"].try_extract_tensor::<f32>().map_err(err)?;
        let dim = self.dim;
        if shape.iter().map(|&d| d as usize).collect::<Vec<_>>() != [n, len, dim] {
            return Err(EmbedError::Inference(format!(
                "output shape {shape:?}, expected [{n}, {len}, {dim}]"
            )));
        }
        let mut vectors = Vec::with_capacity(n);
        for (row, seq) in batch.iter().enumerate() {
            let tokens = seq.len().max(1);
            let mut mean = vec![0.0f32; dim];
            for t in 0..seq.len() {
                let start = (row * len + t) * dim;
                for (m, h) in mean.iter_mut().zip(&hidden[start..start + dim]) {
                    *m += h;
                }
            }
            let inv = 1.0 / tokens as f32;
            mean.iter_mut().for_each(|m| *m *= inv);
            let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            mean.iter_mut().for_each(|m| *m /= norm);
            vectors.push(mean);
        }
        Ok(vectors)
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
    fn runtime_is_found_beside_the_model_or_named_by_the_variable() {
        let models = tempfile::tempdir().unwrap();
        let model_dir = models.path().join("all-minilm-l6-v2");
        let lib = models.path().join(ONNXRUNTIME_LIB);
        let err = find_runtime(None, &model_dir, Path::new("/nonexistent")).unwrap_err();
        assert_eq!(err.code(), "embed_runtime_missing");
        let msg = err.to_string();
        assert!(msg.contains(&lib.display().to_string()), "{msg}");
        assert!(msg.contains("glassbox models fetch"), "{msg}");

        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"").unwrap();
        assert_eq!(
            find_runtime(None, &model_dir, Path::new("/nonexistent")).unwrap(),
            lib
        );
        let err = find_runtime(
            Some("/nonexistent/libonnxruntime.so".into()),
            &model_dir,
            models.path(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("GLASSBOX_ONNXRUNTIME"), "{err}");
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
