//! `embedding`: turns text into a vector (local MiniLM or an
//! OpenAI-compatible server). Its config is read once by [`config`] and
//! built by [`run`].

pub mod config;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Value};

use crate::resources::{BuildContext, Resources};

pub use config::EmbeddingConfig;

/// The `embedding` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Embedding;

impl TypedKind<Resources> for Embedding {
    type Config = EmbeddingConfig;

    fn name(&self) -> &'static str {
        "embedding"
    }

    fn summary(&self) -> &'static str {
        "embeds text with a local BERT-family model or an OpenAI-compatible `/v1/embeddings`"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> EmbeddingConfig {
        config::check(config, cx)
    }

    fn build(
        &self,
        config: &EmbeddingConfig,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, node, cx)
    }

    fn embeds(&self) -> bool {
        true
    }
}
