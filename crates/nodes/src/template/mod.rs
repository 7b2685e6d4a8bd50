//! `template`: renders a prompt from the request input and upstream
//! outputs. Its config is read once by [`config`] and built by [`run`].

pub mod config;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Value};

use crate::resources::{BuildContext, Resources};

pub use config::TemplateConfig;

/// The `template` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Template;

impl TypedKind<Resources> for Template {
    type Config = TemplateConfig;

    fn name(&self) -> &'static str {
        "template"
    }

    fn summary(&self) -> &'static str {
        "renders a Jinja template over `input` and `outputs` (strict about undefined variables)"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> TemplateConfig {
        config::check(config, cx)
    }

    fn build(
        &self,
        config: &TemplateConfig,
        node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(&node.id, config).map(|t| Arc::new(t) as Arc<dyn Node>)
    }
}
