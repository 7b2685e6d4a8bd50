//! From a topology source to a runnable [`Pipeline`], in one place: read and
//! validate it against the built-in kinds, then build every node with the
//! shared resources (model cache, outbound allowances) in the build context.
//! `glassbox run` and the server both call [`assemble`]; how each reports
//! the problems (exit codes, masked messages) stays with them.

use std::convert::Infallible;
use std::sync::Arc;

use glassbox_engine::{Pipeline, PipelineError, PipelineOptions};
use glassbox_topology::{Report, Source, Topology, TopologyError, Validated};

use crate::model_cache::ModelCache;
use crate::outbound::ServerAllow;
use crate::resources::{BuildContext, Registry, Resources};

/// Where the topology comes from.
#[derive(Debug)]
pub enum TopologyInput {
    /// A file (`-`: standard input).
    Path(String),
    /// Text already in memory.
    Source(Source),
    /// A topology already validated against the same registry (a caller
    /// that read it first, e.g. to check files written against it before
    /// anything is built): not read or validated again.
    Validated(Box<Validated>),
}

/// What a pipeline is assembled with, besides its topology.
pub struct Assembly<'a, E = Infallible> {
    /// The kinds topologies are validated against and built with.
    pub registry: &'a Registry,
    /// The pipeline's options, given the validated topology and its
    /// warnings (e.g. a trace sink labelled with the topology id). Called
    /// only for a valid topology, before any node is built, so an invalid
    /// one opens nothing (no trace store); its error is returned as
    /// [`AssembleError::Options`].
    pub options: &'a dyn Fn(&Topology, &Report) -> Result<PipelineOptions, E>,
    /// Address ranges outbound calls may reach despite the deny list, and
    /// the secrets topologies may read.
    pub outbound: Option<Arc<ServerAllow>>,
    /// Models and indexes to share; the process-wide cache when absent.
    pub models: Option<Arc<ModelCache>>,
    /// The cluster's dispatcher (`glassbox serve --cluster`): GPU-tagged
    /// model nodes are placed on its workers instead of running here.
    pub cluster: Option<Arc<crate::cluster::Dispatcher>>,
}

impl<E> std::fmt::Debug for Assembly<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembly")
            .field("registry", self.registry)
            .field("outbound", &self.outbound)
            .finish_non_exhaustive()
    }
}

/// A validated topology and its built pipeline.
#[derive(Debug)]
pub struct Assembled {
    pub topology: Arc<Topology>,
    pub pipeline: Pipeline,
    /// Warnings found while validating (no errors).
    pub report: Report,
}

/// Why a pipeline could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError<E = Infallible> {
    /// The topology could not be read or is invalid.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The pipeline's options could not be made.
    #[error("{0}")]
    Options(E),
    /// The topology is valid but some nodes could not be built.
    #[error(transparent)]
    Build(#[from] PipelineError),
}

/// Reads and validates a topology, then builds its pipeline.
pub fn assemble<E>(
    input: TopologyInput,
    with: &Assembly<'_, E>,
) -> Result<Assembled, AssembleError<E>> {
    let kinds = with.registry.kind_set();
    let validated = match input {
        TopologyInput::Path(path) => glassbox_topology::load_path(&path, &kinds)?,
        TopologyInput::Source(source) => glassbox_topology::load_source(source, &kinds)?,
        TopologyInput::Validated(validated) => *validated,
    };
    let topology = Arc::new(validated.topology);
    let mut cx = BuildContext::with(
        topology.clone(),
        Resources {
            // Kinds that build sub-topologies (an agent's tools) build them
            // with the same kinds.
            registry: Some(with.registry.clone()),
            outbound: with.outbound.clone(),
            models: with.models.clone(),
            cluster: with.cluster.clone(),
        },
    );
    if let Some(outbound) = &with.outbound {
        // The engine resolves config secrets with it (crate::secret_access).
        cx.secrets = outbound.secrets.clone();
    }
    let options = (with.options)(&topology, &validated.report).map_err(AssembleError::Options)?;
    let pipeline = Pipeline::build(topology.clone(), with.registry, &cx, options)?;
    Ok(Assembled {
        topology,
        pipeline,
        report: validated.report,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    const TEMPLATE: &str = "topology_id: t\nversion: 1.0.0\nnodes:\n  - id: p\n    type: template\n    config: { template: 'hi {{ input.question }}' }\n";

    fn source(text: &str) -> TopologyInput {
        TopologyInput::Source(Source::new("t.yaml", text))
    }

    #[test]
    fn a_valid_source_becomes_a_pipeline_of_typed_nodes() {
        let registry = crate::registry();
        let calls = Cell::new(0);
        let options = |t: &Topology, _: &Report| {
            calls.set(calls.get() + 1);
            assert_eq!(t.id, "t");
            Ok::<_, Infallible>(PipelineOptions::default())
        };
        let with = Assembly {
            registry: &registry,
            options: &options,
            outbound: None,
            models: None,
            cluster: None,
        };
        let assembled = assemble(source(TEMPLATE), &with).unwrap();
        assert_eq!(calls.get(), 1);
        let node = &assembled.topology.nodes[0];
        let typed = node.typed_config.as_ref().unwrap();
        let config = typed.get::<crate::template::TemplateConfig>().unwrap();
        assert_eq!(config.template.as_deref(), Some("hi {{ input.question }}"));
    }

    #[test]
    fn an_invalid_source_is_reported_before_options_are_made() {
        let registry = crate::registry();
        let calls = Cell::new(0);
        let options = |_: &Topology, _: &Report| {
            calls.set(calls.get() + 1);
            Ok::<_, Infallible>(PipelineOptions::default())
        };
        let with = Assembly {
            registry: &registry,
            options: &options,
            outbound: None,
            models: None,
            cluster: None,
        };
        let err = assemble(source(&TEMPLATE.replace("template", "templte")), &with).unwrap_err();
        assert!(matches!(err, AssembleError::Topology(_)), "{err}");
        assert_eq!(calls.get(), 0);
        // A valid topology whose node cannot build: a build error.
        let bad = TEMPLATE.replace("'hi {{ input.question }}'", "'{{ unclosed'");
        let err = assemble(source(&bad), &with).unwrap_err();
        assert!(matches!(err, AssembleError::Build(_)), "{err}");
    }

    #[test]
    fn kinds_answer_what_they_do() {
        let r = crate::registry();
        let kinds: Vec<&str> = r.names().collect();
        let streams: Vec<&str> = kinds
            .iter()
            .copied()
            .filter(|k| r.streams_text(k))
            .collect();
        let guards: Vec<&str> = kinds
            .iter()
            .copied()
            .filter(|k| r.guards_output(k))
            .collect();
        let embeds: Vec<&str> = kinds.iter().copied().filter(|k| r.embeds(k)).collect();
        assert_eq!(streams, ["llm_inference", "wasm"]);
        assert_eq!(guards, ["output_guard"]);
        assert_eq!(embeds, ["embedding"]);
        assert!(!r.streams_text("no_such_kind"));
    }
}
