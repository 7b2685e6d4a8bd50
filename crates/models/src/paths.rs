//! Where the models live on disk.

use std::path::{Path, PathBuf};

/// The SmolLM2 GGUF, relative to the models directory.
pub const SMOLLM2_FILE: &str = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The all-MiniLM-L6-v2 directory (safetensors, config, tokenizer), relative to
/// the models directory.
pub const MINILM_DIR: &str = "all-minilm-l6-v2";
/// The ONNX Runtime library (from the `onnxruntime` wheel) that runs the
/// embedder, relative to the models directory.
pub const ONNXRUNTIME_LIB: &str = "onnxruntime/libonnxruntime.so.1.31.1";

/// The models directory: `$GLASSBOX_MODELS`, else `$XDG_CACHE_HOME/glassbox/models`,
/// else `$HOME/.cache/glassbox/models`, else `./.glassbox-models` when neither
/// variable is set (a container with no home).
pub fn models_dir() -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("GLASSBOX_MODELS") {
        return PathBuf::from(dir);
    }
    if let Some(cache) = non_empty("XDG_CACHE_HOME") {
        return PathBuf::from(cache).join("glassbox").join("models");
    }
    if let Some(home) = non_empty("HOME") {
        return PathBuf::from(home)
            .join(".cache")
            .join("glassbox")
            .join("models");
    }
    PathBuf::from(".glassbox-models")
}

/// The SmolLM2 GGUF file inside `models`.
pub fn smollm2_path(models: &Path) -> PathBuf {
    models.join(SMOLLM2_FILE)
}

/// The MiniLM directory inside `models`.
pub fn minilm_dir(models: &Path) -> PathBuf {
    models.join(MINILM_DIR)
}

/// The ONNX Runtime library inside `models`.
pub fn onnxruntime_path(models: &Path) -> PathBuf {
    models.join(ONNXRUNTIME_LIB)
}

/// The hint every "model missing" error carries.
pub(crate) const FETCH_HINT: &str = "run `glassbox models fetch` to download the local models";
