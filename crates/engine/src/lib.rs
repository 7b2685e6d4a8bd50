//! # glassbox-engine
//!
//! Runs topologies. For each request the engine *generates the path* while it
//! runs: entry nodes start, edges resolve as their sources finish (bare
//! labels by string compare, expressions by CEL), joins wait for every
//! incoming edge, dead paths are skipped transitively, and independent
//! branches run concurrently. Every node attempt is timed (wall and thread
//! CPU time), priced and recorded as a span; the request ends with a record
//! holding the path and *why* each edge was or was not taken, an exact
//! [`Receipt`](glassbox_trace::Receipt) and a plain-language explanation.
//!
//! Main types:
//! - [`Node`] / [`Call`]: what a built node does for one attempt, and where
//!   that work runs (inline, blocking pool, or async I/O).
//! - [`TypedKind`] / [`Registry`]: the one trait a kind author writes
//!   (check the config purely into the kind's own type, then build a node
//!   from it with a [`BuildContext`] of typed resources); the binary
//!   registers kinds explicitly.
//! - [`Pipeline`]: an `Arc<Topology>` plus built nodes and precomputed
//!   plans; [`Pipeline::run`] returns an [`Outcome`] (trace + result).
//! - [`RetryPolicy`], per-node timeouts, fallbacks, request deadlines and
//!   cancellation are separate small pieces composed in `node_run`; the
//!   response cache (`cache`) is one more, consulted as an attempt begins.
//!
//! Why this shape: the topology is immutable and shared; all per-request
//! state lives in flat vectors owned by one executor future, so the hot
//! path allocates little and never clones the topology. Traces leave
//! through a [`TraceSink`](glassbox_trace::TraceSink) that must not block,
//! and are finalised on every exit, including a dropped future.
//!
//! Modules depend one way (`tests/it/layering.rs` checks it): `pipeline`
//! uses `executor`, which uses `node_run` (which uses `attempt`) and
//! `finish`; those use `built` (the pipeline's shared tables), `run_state`
//! and `request`; `node` uses `request`, and both use `output`. `options`,
//! `outcome` and the small pieces (`cost`, `cpu`, `retry`, `stream`,
//! `error`) sit below them all.

mod attempt;
mod built;
pub mod cache;
pub mod calibration;
pub mod cost;
pub mod cpu;
pub mod error;
mod executor;
mod finish;
pub mod kind;
mod loops;
pub mod node;
mod node_run;
mod options;
pub mod outcome;
pub mod output;
pub mod pipeline;
mod request;
pub mod retry;
mod run_state;
mod steps;
pub mod stream;
mod why;

pub use error::{BuildError, ExecError, NodeBuildError, NodeError, PipelineError};
pub use kind::{BuildContext, NodeKind, Registry, Typed, TypedKind};
pub use node::{Call, Node, NodeCx, NodeFuture, NodeResult};
pub use node_run::MAX_RERUNS;
pub use options::ModelAsk;
pub use outcome::{Outcome, Trace};
pub use output::{NodeOutput, Step, Steps, Tokens, text_of};
pub use pipeline::{Pipeline, PipelineOptions, RunOptions};
pub use retry::RetryPolicy;
pub use stream::{TokenChunk, TokenSink, TokenStream};

pub use glassbox_trace as trace;
pub use glassbox_trace::Priority;
/// Explanations are composed from trace types alone, so they live in
/// `glassbox-trace`; re-exported here for the nodes and the CLI.
pub use glassbox_trace::explain;
pub use tokio_util::sync::CancellationToken;
