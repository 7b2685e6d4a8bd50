//! The models a cluster worker serves (`glassbox worker`, docs/cluster.md
//! "Membership"): registered by name and kind ([`Models::register`]),
//! looked up by the name a coordinator's call carries ([`Models::get`]:
//! an unknown name is a typed [`ModelError::Unknown`] that lists what is
//! served), and served straight from their engines by the model door
//! ([`door::ModelDoor`]): admission, then a llama.cpp generation or an
//! embedding, with no topology or pipeline built for them.
//!
//! Why here and not in the CLI: the worker is a door like the server and
//! the CLI; what it serves, and the checks on it, belong to the layer the
//! doors share, so the worker's command only turns flags into
//! registrations and the server's worker routes only translate HTTP.
//! Why not through the request service: a worker's call is one model
//! call that a coordinator's pipeline already traces, prices and explains;
//! running it as a one-node pipeline of its own would record it twice and
//! put a topology between the caller and the engine for nothing.

pub mod door;

use std::path::{Path, PathBuf};

/// What a model does, and the node kind that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModelKind {
    /// Chat completions (`llm_inference`, llama.cpp).
    Llm,
    /// Embeddings (`embedding`, ONNX Runtime).
    Embedding,
}

impl ModelKind {
    /// The node kind that runs it, as worker records name it.
    pub fn node_kind(self) -> &'static str {
        match self {
            ModelKind::Llm => "llm_inference",
            ModelKind::Embedding => "embedding",
        }
    }
}

/// How the worker's LLM engines run (`--threads`, `--context-size`,
/// `--max-num-seqs`, `--max-tokens`); unset ones keep the engine's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LlmSettings {
    pub max_tokens: u64,
    pub threads: Option<u64>,
    pub context_size: Option<u64>,
    pub max_num_seqs: Option<u64>,
}

/// One served model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// The name calls ask for (`model` in the OpenAI API).
    pub name: String,
    pub kind: ModelKind,
    /// As given: absolute, or relative to the models directory.
    pub path: String,
}

/// Why a model cannot be registered or found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("a model needs a name and a path (got name `{name}`, path `{path}`)")]
    Empty { name: String, path: String },
    #[error("model name `{0}` is given twice")]
    Duplicate(String),
    #[error("this worker does not serve model `{name}`; it serves: {}", served_list(.served))]
    Unknown { name: String, served: Vec<String> },
}

fn served_list(served: &[String]) -> String {
    if served.is_empty() {
        "nothing".to_owned()
    } else {
        served.join(", ")
    }
}

/// The models one worker serves, in the order registered.
#[derive(Debug, Clone, Default)]
pub struct Models {
    models: Vec<Model>,
    llm: LlmSettings,
}

impl Models {
    pub fn new(llm: LlmSettings) -> Models {
        Models {
            models: Vec::new(),
            llm,
        }
    }

    /// Adds a model, refusing an empty or repeated name and an empty path.
    pub fn register(
        &mut self,
        name: &str,
        kind: ModelKind,
        path: &str,
    ) -> Result<&Model, ModelError> {
        if name.is_empty() || path.is_empty() {
            return Err(ModelError::Empty {
                name: name.to_owned(),
                path: path.to_owned(),
            });
        }
        if self.models.iter().any(|m| m.name == name) {
            return Err(ModelError::Duplicate(name.to_owned()));
        }
        self.models.push(Model {
            name: name.to_owned(),
            kind,
            path: path.to_owned(),
        });
        Ok(&self.models[self.models.len() - 1])
    }

    /// The model a call names.
    pub fn get(&self, name: &str) -> Result<&Model, ModelError> {
        self.models
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| ModelError::Unknown {
                name: name.to_owned(),
                served: self.names(),
            })
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Model> {
        self.models.iter()
    }

    pub fn names(&self) -> Vec<String> {
        self.models.iter().map(|m| m.name.clone()).collect()
    }

    /// The node kinds served, sorted, each once (a worker record's
    /// `node_kinds`).
    pub fn node_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<ModelKind> = self.models.iter().map(|m| m.kind).collect();
        kinds.sort();
        kinds.dedup();
        let mut names: Vec<String> = kinds.iter().map(|k| k.node_kind().to_owned()).collect();
        names.sort();
        names
    }

    /// How its LLM engines run.
    pub fn llm_settings(&self) -> LlmSettings {
        self.llm
    }
}

impl Model {
    /// Where its files are: the path as given when absolute, else inside
    /// the models directory (`glassbox models fetch` fills it).
    pub fn location(&self) -> PathBuf {
        let path = Path::new(&self.path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            glassbox_models::models_dir().join(path)
        }
    }
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
