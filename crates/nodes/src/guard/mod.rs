//! `output_guard`: checks an upstream output (blocklist, regex rules,
//! length, JSON Schema) and fails, replaces or re-runs on violation. Its
//! config is read once by [`config`] and built by [`run`].

pub mod config;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Value};

use crate::resources::{BuildContext, Resources};

pub use config::GuardConfig;

/// The `output_guard` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct OutputGuard;

impl TypedKind<Resources> for OutputGuard {
    type Config = GuardConfig;

    fn name(&self) -> &'static str {
        "output_guard"
    }

    fn summary(&self) -> &'static str {
        "checks output against a blocklist, regex rules, a length limit and a JSON Schema; fails, replaces or re-runs"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> GuardConfig {
        config::check(config, cx)
    }

    fn build(
        &self,
        config: &GuardConfig,
        _node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config).map(|g| Arc::new(g) as Arc<dyn Node>)
    }

    fn guards_output(&self) -> bool {
        true
    }
}
