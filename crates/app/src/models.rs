//! The models a cluster worker serves (`glassbox worker`, docs/cluster.md
//! "Membership"): registered by name and kind ([`Models::register`]),
//! looked up by the name a coordinator's call carries ([`Models::get`]:
//! an unknown name is a typed [`ModelError::Unknown`] that lists what is
//! served), and handed to the request service as the pipelines that run
//! them ([`Models::pipelines`]), built in memory: nothing is written to
//! disk, and nothing but this module knows how a model becomes a pipeline.
//!
//! Why here and not in the CLI: the worker is a door like the server and
//! the CLI; what it serves, and the checks on it, belong to the layer the
//! doors share, so the worker's command only turns flags into
//! registrations and the server only translates HTTP. Calls then go through
//! the request service ([`crate::service`]) like every other request:
//! admission, bounded queue, quotas, traces and drain are its.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::catalog::Given;

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
    #[error("this worker does not serve model `{name}`; it serves: {}", served.join(", "))]
    Unknown { name: String, served: Vec<String> },
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

    /// The pipeline each model runs on, for the request service's catalog
    /// ([`crate::catalog::Catalog::given`]), keyed by a name no file on
    /// disk can have, so nothing (a calibration) is looked up beside them.
    pub fn pipelines(&self) -> Given {
        self.models
            .iter()
            .map(|m| {
                let key = PathBuf::from(format!("<worker>/{}.json", m.name));
                (key, self.pipeline(m).to_string().into_bytes())
            })
            .collect()
    }

    /// The model's name as its pipeline's id, its one node the engine.
    fn pipeline(&self, m: &Model) -> Value {
        let node = match m.kind {
            ModelKind::Embedding => json!({"id": "embed", "type": "embedding",
                "resource": {"type": "gpu", "model": m.name},
                "config": {"backend": "local", "model": m.path, "text": "input.question"}}),
            ModelKind::Llm => {
                let mut config = json!({"backend": "local", "model": m.path,
                    "prompt": "{{ input.question }}", "max_tokens": self.llm.max_tokens});
                for (key, value) in [
                    ("threads", self.llm.threads),
                    ("context_size", self.llm.context_size),
                    ("max_num_seqs", self.llm.max_num_seqs),
                ] {
                    if let Some(v) = value {
                        config[key] = json!(v);
                    }
                }
                json!({"id": "llm", "type": "llm_inference",
                    "resource": {"type": "gpu", "model": m.name}, "config": config})
            }
        };
        json!({
            "topology_id": m.name,
            "version": "1.0.0",
            "description": format!("`glassbox worker` serving {} ({})", m.name, m.kind.node_kind()),
            "defaults": {"timeout_ms": 600000, "retries": 0},
            "nodes": [node],
            "edges": [],
        })
    }
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
