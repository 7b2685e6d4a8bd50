//! A topology run where it is, in-process: what `glassbox run`, `test`,
//! `test --replay` and `calibrate` share.
//!
//! [`Local::open`] reads and validates the file once (or takes a topology
//! already validated, [`Local::build`]), prices its nodes from the
//! calibration beside it, opens the trace store only once the topology is
//! known to be valid (so an invalid file creates nothing), builds the
//! pipeline and a current-thread runtime to run it on. [`Local::close`]
//! waits until every recorded trace is durable.
//!
//! Warnings (validation warnings, a doubtful calibration) go to the
//! caller's `warn`; failures are [`LocalError`]s, which each door maps to
//! what it answers (the CLI: exit codes).

use std::path::Path;
use std::sync::Arc;

use glassbox_engine::calibration::Calibration;
use glassbox_engine::trace::{NoopSink, TraceSink};
use glassbox_engine::{Outcome, Pipeline, PipelineError, PipelineOptions, RunOptions};
use glassbox_nodes::Registry;
use glassbox_nodes::{AssembleError, Assembly, TopologyInput};
use glassbox_store::{StoreError, StoreUrl, StoreWriter, WriterOptions, WriterStats};
use glassbox_topology::{Report, Topology, TopologyError, Validated};
use serde_json::Value;

use crate::calibration;

/// Where a local run's traces go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Nowhere.
    Nowhere,
    /// The trace store at this URL, or the default store when `None`.
    Store(Option<String>),
}

/// Something the caller should tell its user; the run goes on.
#[derive(Debug)]
pub enum Warning<'a> {
    /// The topology is valid, with these warnings.
    Topology(&'a Report),
    /// A calibration doubt (age, machine, version, a changed model) or a
    /// calibration that cannot be read.
    Calibration(String),
}

/// How a local run is set up.
pub struct LocalOptions<'a> {
    /// Where its traces go.
    pub record: Record,
    /// Bill with the calibration beside the file, when there is one.
    pub calibrated: bool,
    /// Hears every [`Warning`].
    pub warn: &'a dyn Fn(Warning<'_>),
}

impl std::fmt::Debug for LocalOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOptions")
            .field("record", &self.record)
            .field("calibrated", &self.calibrated)
            .finish_non_exhaustive()
    }
}

/// Why a local run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The topology could not be read or is invalid.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A node could not be built.
    #[error(transparent)]
    Build(#[from] PipelineError),
    /// The trace store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl LocalError {
    /// Stable code for messages and exit-code mapping.
    pub fn code(&self) -> &'static str {
        match self {
            LocalError::Topology(e) => e.code(),
            LocalError::Build(_) => "build_failed",
            LocalError::Store(e) => e.code(),
            LocalError::Runtime(_) => "runtime",
        }
    }
}

/// A topology ready to run here.
pub struct Local {
    pub topology: Arc<Topology>,
    pub pipeline: Pipeline,
    /// The calibration its prices come from, if any.
    pub calibration: Option<Calibration>,
    runtime: tokio::runtime::Runtime,
    writer: Option<(Arc<StoreWriter>, StoreUrl)>,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local")
            .field("topology", &self.topology.id)
            .field("calibrated", &self.calibration.is_some())
            .finish_non_exhaustive()
    }
}

impl Local {
    /// Reads and validates the topology at `file` (`-`: standard input)
    /// against `registry`'s kinds, without building anything.
    pub fn validate(file: &str, registry: &Registry) -> Result<Validated, LocalError> {
        Ok(glassbox_topology::load_path(file, &registry.kind_set())?)
    }

    /// Reads, validates and builds the topology at `file`.
    pub fn open(
        file: &str,
        registry: &Registry,
        options: LocalOptions<'_>,
    ) -> Result<Local, LocalError> {
        Local::assemble(
            TopologyInput::Path(file.to_string()),
            file,
            registry,
            options,
        )
    }

    /// Builds a topology [`Local::validate`] read from `file`.
    pub fn build(
        validated: Validated,
        file: &str,
        registry: &Registry,
        options: LocalOptions<'_>,
    ) -> Result<Local, LocalError> {
        Local::assemble(
            TopologyInput::Validated(Box::new(validated)),
            file,
            registry,
            options,
        )
    }

    fn assemble(
        input: TopologyInput,
        file: &str,
        registry: &Registry,
        options: LocalOptions<'_>,
    ) -> Result<Local, LocalError> {
        let warn = options.warn;
        let calibration = if options.calibrated && file != "-" {
            calibration::beside(Path::new(file), &mut |w| warn(Warning::Calibration(w)))
        } else {
            None
        };
        // The store is opened once the topology is known to be valid.
        let writer = std::cell::OnceCell::new();
        let pipeline_options =
            |topology: &Topology, report: &Report| -> Result<PipelineOptions, LocalError> {
                if !report.diagnostics.is_empty() {
                    warn(Warning::Topology(report));
                }
                let sink: Arc<dyn TraceSink> = match &options.record {
                    Record::Nowhere => Arc::new(NoopSink),
                    Record::Store(url) => {
                        let url = StoreUrl::resolve(url.as_deref())?;
                        let opened =
                            Arc::new(glassbox_store::open_with(&url, WriterOptions::default())?);
                        writer.get_or_init(|| (opened.clone(), url));
                        opened
                    }
                };
                let prices = calibration::prices(calibration.as_ref(), topology, &mut |w| {
                    warn(Warning::Calibration(w))
                });
                Ok(PipelineOptions {
                    sink,
                    prices,
                    ..PipelineOptions::default()
                })
            };
        let assembly = Assembly {
            registry,
            options: &pipeline_options,
            outbound: None,
            models: None,
            cluster: None,
        };
        let assembled = glassbox_nodes::assemble(input, &assembly).map_err(|e| match e {
            AssembleError::Topology(err) => LocalError::Topology(err),
            AssembleError::Options(err) => err,
            AssembleError::Build(err) => LocalError::Build(err),
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(LocalError::Runtime)?;
        Ok(Local {
            topology: assembled.topology,
            pipeline: assembled.pipeline,
            calibration,
            runtime,
            writer: writer.into_inner(),
        })
    }

    /// Runs one request to its end.
    pub fn run(&self, input: Value, options: RunOptions) -> Outcome {
        self.runtime.block_on(self.pipeline.run(input, options))
    }

    /// The runtime the pipeline runs on (for callers that drive several
    /// runs themselves).
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    /// What the calibration says about the models a finished request ran
    /// (a node whose model changed since it was measured).
    pub fn record_warnings(&self, outcome: &Outcome) -> Vec<String> {
        self.calibration
            .as_ref()
            .map(|c| c.record_warnings(&outcome.trace.record))
            .unwrap_or_default()
    }

    /// Drops the pipeline (its nodes finish their work) and waits until
    /// every recorded trace is durable: the store it went to and how the
    /// writer ended, when it recorded.
    pub fn close(self) -> Option<(StoreUrl, Result<WriterStats, StoreError>)> {
        let Local {
            pipeline, writer, ..
        } = self;
        drop(pipeline);
        let (writer, url) = writer?;
        Some((url, writer.close()))
    }
}
