use std::sync::Arc;

use glassbox_engine::{Pipeline, PipelineError, PipelineOptions};
use glassbox_nodes::BuildContext;
use glassbox_topology::Source;

/// Validates and builds a topology with the built-in kinds.
pub fn try_build(name: &str, text: &str) -> Result<Pipeline, PipelineError> {
    try_build_with(name, text, glassbox_nodes::outbound::ServerAllow::default())
}

/// [`try_build`] with what the server operator allows (ranges, secrets),
/// as `glassbox serve` puts it into the build context.
pub fn try_build_with(
    name: &str,
    text: &str,
    allow: glassbox_nodes::outbound::ServerAllow,
) -> Result<Pipeline, PipelineError> {
    let registry = glassbox_nodes::registry();
    let v = match glassbox_topology::load_source(Source::new(name, text), &registry.kind_set()) {
        Ok(v) => v,
        Err(glassbox_topology::TopologyError::Invalid(r)) => panic!("{}", r.render(false)),
        Err(e) => panic!("{e}"),
    };
    let topology = Arc::new(v.topology);
    let secrets = allow.secrets.clone();
    let mut cx = BuildContext::with(
        topology.clone(),
        glassbox_nodes::Resources {
            // As `glassbox_nodes::assemble` does: an agent builds its tool
            // topologies with the same kinds.
            registry: Some(registry.clone()),
            outbound: Some(Arc::new(allow)),
            ..Default::default()
        },
    );
    cx.secrets = secrets;
    Pipeline::build(topology, &registry, &cx, PipelineOptions::default())
}

pub fn build(name: &str, text: &str) -> Pipeline {
    try_build(name, text).unwrap()
}

/// A one-node topology: an `http` node `fetch` with this config (a YAML flow mapping).
pub fn http_topology(config: &str) -> String {
    format!(
        r#"
topology_id: h
version: "1"
nodes:
  - id: fetch
    type: http
    config: {config}
"#
    )
}
