//! From a topology source to a runnable [`Pipeline`], in one place: read and
//! validate it against the built-in kinds, then build every node with the
//! shared resources (model cache, outbound allowances) in the build context.
//! `glassbox run` and the server both call [`assemble`]; how each reports
//! the problems (exit codes, masked messages) stays with them.

use std::convert::Infallible;
use std::sync::Arc;

use glassbox_engine::{BuildContext, Pipeline, PipelineError, PipelineOptions, Registry};
use glassbox_topology::{Report, Source, Topology, TopologyError};

use crate::model_cache::ModelCache;
use crate::outbound::ServerAllow;

/// Where the topology comes from.
#[derive(Debug)]
pub enum TopologyInput {
    /// A file (`-`: standard input).
    Path(String),
    /// Text already in memory.
    Source(Source),
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
    /// Address ranges outbound calls may reach despite the deny list.
    pub outbound: Option<Arc<ServerAllow>>,
    /// Models and indexes to share; the process-wide cache when absent.
    pub models: Option<Arc<ModelCache>>,
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
    };
    let topology = Arc::new(validated.topology);
    let mut cx = BuildContext::new(topology.clone());
    if let Some(outbound) = &with.outbound {
        cx.insert(outbound.clone());
    }
    if let Some(models) = &with.models {
        cx.insert(models.clone());
    }
    let options = (with.options)(&topology, &validated.report).map_err(AssembleError::Options)?;
    let pipeline = Pipeline::build(topology.clone(), with.registry, &cx, options)?;
    Ok(Assembled {
        topology,
        pipeline,
        report: validated.report,
    })
}
