//! `http`: calls a URL, only on hosts the config allows. Its config is read
//! once by [`config`] and built by [`run`].

pub mod config;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Value};

use crate::resources::{BuildContext, Resources};

pub use config::{HttpConfig, host_of};

/// The `http` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Http;

impl TypedKind<Resources> for Http {
    type Config = HttpConfig;

    fn name(&self) -> &'static str {
        "http"
    }

    fn summary(&self) -> &'static str {
        "calls a URL with a timeout; the host must be in `allow_hosts` (empty by default), internal addresses must be named there, redirects are off unless `max_redirects` is set"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> HttpConfig {
        config::check(config, cx)
    }

    fn build(
        &self,
        config: &HttpConfig,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, node.timeout, cx.resources.outbound())
            .map(|h| Arc::new(h) as Arc<dyn Node>)
    }
}
