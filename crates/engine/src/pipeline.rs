//! A [`Pipeline`]: the public handle on a built pipeline (the shared
//! topology, one runnable node per topology node, and everything a request
//! needs precomputed once). Building resolves config secrets and reports
//! every node that fails; running hands a request to the executor.

use std::borrow::Cow;
use std::sync::Arc;

use glassbox_topology::Topology;
use serde_json::Value;

use crate::built::BuiltPipeline;
use crate::error::{BuildError, NodeBuildError, PipelineError};
use crate::executor;
use crate::kind::{BuildContext, NodeKind, Registry};
use crate::node::Node;
pub use crate::options::{PipelineOptions, RunOptions};
use crate::outcome::Outcome;

/// A topology with its nodes built, ready to run requests. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    built: Arc<BuiltPipeline>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("topology", &self.built.topology.id)
            .field("version", &self.built.topology.version)
            .finish()
    }
}

/// The node with the secret references of its config (`${env:NAME}`,
/// `${file:/path}`) resolved, for its kind to build from: only in fields
/// meant for secrets (its kind declares its own), only from what the
/// build context's [`SecretAccess`](glassbox_topology::secret_access::SecretAccess)
/// allows. The references are resolved first and the kind then types the
/// resolved config, so the build takes a typed config like every other
/// node's. The copy lives only as long as the build: the topology keeps
/// the references.
fn with_secrets<'a, R>(
    node: &'a glassbox_topology::Node,
    kind: &dyn NodeKind<R>,
    cx: &BuildContext<R>,
) -> Result<Cow<'a, glassbox_topology::Node>, BuildError> {
    if !glassbox_topology::secret::holds_reference(&node.config) {
        return Ok(Cow::Borrowed(node));
    }
    let mut resolved = node.clone();
    resolved.config = cx.secrets.resolve(&node.config, kind.secret_fields())?;
    resolved.typed_config = Some(kind.check_resolved(&resolved.config)?);
    Ok(Cow::Owned(resolved))
}

impl Pipeline {
    /// Builds every node with its registered kind. Reports every node that
    /// fails to build, not just the first.
    pub fn build<R: 'static>(
        topology: Arc<Topology>,
        registry: &Registry<R>,
        cx: &BuildContext<R>,
        options: PipelineOptions,
    ) -> Result<Pipeline, PipelineError> {
        let topology = with_prices(topology, &options.prices);
        let mut nodes = Vec::with_capacity(topology.nodes.len());
        let mut errors = Vec::new();
        for node in &topology.nodes {
            let built = match registry.get(&node.kind) {
                Some(kind) => {
                    with_secrets(node, kind.as_ref(), cx).and_then(|n| kind.build(&n, cx))
                }
                None => Err(BuildError::UnknownKind {
                    kind: node.kind.clone(),
                }),
            };
            match built {
                Ok(n) => nodes.push(n),
                Err(error) => errors.push(NodeBuildError {
                    node: node.id.clone(),
                    kind: node.kind.clone(),
                    error,
                }),
            }
        }
        if !errors.is_empty() {
            return Err(PipelineError { errors });
        }
        Ok(Pipeline::from_nodes(topology, nodes, options))
    }

    /// Assembles a pipeline from nodes built elsewhere, one per topology
    /// node in order (tests, embedding applications).
    pub fn from_nodes(
        topology: Arc<Topology>,
        nodes: Vec<Arc<dyn Node>>,
        options: PipelineOptions,
    ) -> Pipeline {
        Pipeline {
            built: Arc::new(BuiltPipeline::new(topology, nodes, options)),
        }
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.built.topology
    }

    pub fn options(&self) -> &PipelineOptions {
        &self.built.options
    }

    /// Runs one request to completion. Always returns a complete trace; the
    /// result is the output or an error naming node, attempt and cause.
    /// Dropping the future cancels the request and still records its trace
    /// (status `cancelled`) to the sink.
    pub async fn run(&self, input: Value, options: RunOptions) -> Outcome {
        executor::execute(&self.built, input, options).await
    }
}

/// The topology with the calibrated nodes' prices replaced (unchanged, and
/// not copied, when there are none).
fn with_prices(
    topology: Arc<Topology>,
    prices: &std::collections::BTreeMap<String, glassbox_topology::Prices>,
) -> Arc<Topology> {
    if prices.is_empty() || !topology.nodes.iter().any(|n| prices.contains_key(&n.id)) {
        return topology;
    }
    let mut t = (*topology).clone();
    for node in &mut t.nodes {
        if let Some(p) = prices.get(&node.id) {
            node.resource.prices = p.clone();
        }
    }
    Arc::new(t)
}
