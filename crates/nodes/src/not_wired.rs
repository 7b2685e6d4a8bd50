//! Builds for the model-backed kinds until the model runtimes
//! (glassbox-models) are wired in: registry construction and validation
//! work, and running a topology that uses them fails at build time with a
//! clear message instead of at the first request.

use std::sync::Arc;

use glassbox_engine::{BuildContext, BuildError, Node, NodeKind};

use crate::embedding::Embedding;
use crate::llm::LlmInference;
use crate::vector_search::VectorSearch;

fn not_wired(kind: &str, what: &str) -> BuildError {
    BuildError::NotWired {
        kind: kind.to_string(),
        hint: format!("the {what} runtime (glassbox-models) is not wired into the engine yet"),
    }
}

impl NodeKind for LlmInference {
    fn build(
        &self,
        _node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Err(not_wired("llm_inference", "LLM"))
    }
}

impl NodeKind for Embedding {
    fn build(
        &self,
        _node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Err(not_wired("embedding", "embedding"))
    }
}

impl NodeKind for VectorSearch {
    fn build(
        &self,
        _node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Err(not_wired("vector_search", "vector index"))
    }
}
