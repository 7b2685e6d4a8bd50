//! `vector_search`: nearest chunks from an on-disk ANN index. Its config is
//! read once by [`config`] and built by [`run`].

pub mod config;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Value};

use crate::resources::{BuildContext, Resources};

pub use config::VectorSearchConfig;

/// The `vector_search` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct VectorSearch;

impl TypedKind<Resources> for VectorSearch {
    type Config = VectorSearchConfig;

    fn name(&self) -> &'static str {
        "vector_search"
    }

    fn summary(&self) -> &'static str {
        "retrieves the `top_k` nearest chunks (title, chunk id, score, text) from an index built by `glassbox index build`"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> VectorSearchConfig {
        config::check(config, cx)
    }

    fn build(
        &self,
        config: &VectorSearchConfig,
        _node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, cx).map(|n| Arc::new(n) as Arc<dyn Node>)
    }
}
