//! `llm_inference`: text generation, local (GGUF via llama.cpp) or remote
//! (any OpenAI-compatible server). Its config is read once by [`config`]
//! and built by [`run`].

pub mod config;
pub mod prewarm;
pub mod run;
pub mod tools;
pub mod turns;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Value};

use crate::resources::{BuildContext, Resources};

pub use config::LlmConfig;

/// The `llm_inference` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct LlmInference;

impl TypedKind<Resources> for LlmInference {
    type Config = LlmConfig;

    fn name(&self) -> &'static str {
        "llm_inference"
    }

    fn summary(&self) -> &'static str {
        "generates text with a local GGUF model (llama.cpp) or an OpenAI-compatible server"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> LlmConfig {
        config::check(config, cx)
    }

    fn build(
        &self,
        config: &LlmConfig,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, node, cx)
    }

    fn streams_text(&self) -> bool {
        true
    }
}
