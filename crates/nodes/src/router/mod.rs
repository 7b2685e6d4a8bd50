//! `router`: picks one label per request, by ordered CEL rules or by the
//! nearest labelled example. Its config is read once by [`config`] and
//! built into a runnable node by [`run`].

pub mod config;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Labels, Value};

use crate::resources::{BuildContext, Resources};

pub use config::RouterConfig;

/// The `router` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Router;

impl TypedKind<Resources> for Router {
    type Config = RouterConfig;

    fn name(&self) -> &'static str {
        "router"
    }

    fn summary(&self) -> &'static str {
        "emits one label per request: the first rule whose CEL `when` holds, the nearest labelled example, or `default`"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> RouterConfig {
        config::check(config, cx)
    }

    fn labels(&self, config: &RouterConfig) -> Labels {
        config.labels()
    }

    fn build(
        &self,
        config: &RouterConfig,
        _node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, cx).map(|r| Arc::new(r) as Arc<dyn Node>)
    }
}
