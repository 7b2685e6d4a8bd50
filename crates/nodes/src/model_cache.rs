//! Loaded models and indexes, shared by every node (and pipeline) that
//! names the same file, so two nodes on one model load it once.
//!
//! A pipeline may bring its own cache (`Resources::models`); otherwise the
//! process-wide one is used, which is what a long-running server wants.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use glassbox_engine::{BuildContext, BuildError};
use glassbox_models::{Embedder, EmbedderOptions, LlmHandle, LlmOptions, VectorIndex};

#[derive(Default)]
pub struct ModelCache {
    llms: Mutex<HashMap<LlmOptions, Arc<LlmHandle>>>,
    embedders: Mutex<HashMap<PathBuf, Arc<Embedder>>>,
    indexes: Mutex<HashMap<PathBuf, Arc<VectorIndex>>>,
}

impl std::fmt::Debug for ModelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCache").finish_non_exhaustive()
    }
}

/// The process-wide cache (what a build uses unless its context has one).
pub fn global() -> Arc<ModelCache> {
    static GLOBAL: OnceLock<Arc<ModelCache>> = OnceLock::new();
    GLOBAL
        .get_or_init(|| Arc::new(ModelCache::default()))
        .clone()
}

fn unavailable(what: String, err: impl std::error::Error + Send + Sync + 'static) -> BuildError {
    BuildError::Unavailable {
        message: what,
        source: Some(Box::new(err)),
    }
}

fn get_or_load<K: std::hash::Hash + Eq + Clone, V>(
    map: &Mutex<HashMap<K, Arc<V>>>,
    key: K,
    load: impl FnOnce() -> Result<V, BuildError>,
) -> Result<Arc<V>, BuildError> {
    // Loading happens under the lock on purpose: two nodes naming one
    // model must not load it twice.
    let mut map = map
        .lock()
        .map_err(|_| BuildError::config("model cache lock poisoned"))?;
    if let Some(v) = map.get(&key) {
        return Ok(v.clone());
    }
    let v = Arc::new(load()?);
    map.insert(key, v.clone());
    Ok(v)
}

impl ModelCache {
    /// Waits (up to `limit`) until no local LLM has a request running or
    /// waiting. A request that was abandoned (timed out, cancelled) leaves
    /// its model's batch at the next step; a process should let that step
    /// finish before it exits, since exiting tears down llama.cpp's global
    /// state under a decode still in flight. Returns whether all are idle.
    pub fn wait_idle(&self, limit: std::time::Duration) -> bool {
        let started = std::time::Instant::now();
        loop {
            let busy = self
                .llm_loads()
                .iter()
                .any(|(_, load)| load.running > 0 || load.waiting > 0);
            if !busy {
                return true;
            }
            if started.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The load of every local LLM loaded so far, by model version (for
    /// metrics: requests running and waiting, KV cells reserved).
    pub fn llm_loads(&self) -> Vec<(String, glassbox_models::EngineLoad)> {
        let Ok(map) = self.llms.lock() else {
            return Vec::new();
        };
        map.values()
            .map(|h| (h.version().to_owned(), h.engine_load()))
            .collect()
    }

    /// The model `options` name, loaded once per distinct set of options
    /// (two nodes with the same model and options share one engine).
    pub fn llm(&self, options: LlmOptions) -> Result<Arc<LlmHandle>, BuildError> {
        let path = options.model_path.clone();
        get_or_load(&self.llms, options.clone(), || {
            LlmHandle::load(options).map_err(|e| {
                let message = hinted(
                    format!("cannot load model `{}`: {e}", path.display()),
                    "run `glassbox models fetch`",
                );
                unavailable(message, e)
            })
        })
    }

    pub fn embedder(&self, dir: &Path) -> Result<Arc<Embedder>, BuildError> {
        get_or_load(&self.embedders, dir.to_path_buf(), || {
            Embedder::load(dir, EmbedderOptions::default()).map_err(|e| {
                let message = hinted(
                    format!("cannot load embedding model `{}`: {e}", dir.display()),
                    "run `glassbox models fetch`",
                );
                unavailable(message, e)
            })
        })
    }

    pub fn index(&self, dir: &Path) -> Result<Arc<VectorIndex>, BuildError> {
        get_or_load(&self.indexes, dir.to_path_buf(), || {
            VectorIndex::load(dir).map_err(|e| {
                // A missing index says how to build one; other failures
                // (unreadable, wrong dimensions) are fixed by a rebuild.
                let message = hinted(
                    format!("cannot open index `{}`: {e}", dir.display()),
                    &format!(
                        "rebuild it with `glassbox index build DOCS --out {}`",
                        dir.display()
                    ),
                );
                unavailable(message, e)
            })
        })
    }
}

/// `message` with `; hint: HINT` added, unless the error it quotes already
/// carries a hint (a missing model file says to fetch the models).
fn hinted(message: String, hint: &str) -> String {
    if message.contains("hint:") {
        message
    } else {
        format!("{message}; hint: {hint}")
    }
}

/// Where a model named in a config lives: an existing path (relative to the
/// topology file, or absolute) wins; otherwise it is looked up in the models
/// directory (`GLASSBOX_MODELS`).
pub fn locate<R>(cx: &BuildContext<R>, name: &str) -> PathBuf {
    let local = cx.topology.resolve_path(name);
    if local.exists() {
        return local;
    }
    glassbox_models::models_dir().join(name)
}
