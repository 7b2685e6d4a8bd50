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
//! - [`NodeKind`] / [`Registry`]: kinds check config purely (via
//!   `KindSchema`) and build nodes with a [`BuildContext`]; the binary
//!   registers kinds explicitly.
//! - [`Pipeline`]: an `Arc<Topology>` plus built nodes and precomputed
//!   plans; [`Pipeline::run`] returns an [`Outcome`] (trace + result).
//! - [`RetryPolicy`], per-node timeouts, fallbacks, request deadlines and
//!   cancellation are separate small pieces composed in `node_run`.
//!
//! Why this shape: the topology is immutable and shared; all per-request
//! state lives in flat vectors owned by one executor future, so the hot
//! path allocates little and never clones the topology. Traces leave
//! through a [`TraceSink`](glassbox_trace::TraceSink) that must not block,
//! and are finalised on every exit, including a dropped future.

mod attempt;
pub mod cost;
pub mod cpu;
pub mod error;
pub mod executor;
pub mod explain;
mod finish;
pub mod kind;
pub mod node;
mod node_run;
pub mod pipeline;
mod request;
pub mod retry;
pub mod stream;
mod why;

pub use error::{BuildError, ExecError, NodeBuildError, NodeError, PipelineError};
pub use executor::{Outcome, Trace};
pub use kind::{BuildContext, NodeKind, Registry, Typed, TypedKind};
pub use node::{Call, Node, NodeCx, NodeFuture, NodeOutput, NodeResult, Tokens, text_of};
pub use node_run::MAX_RERUNS;
pub use pipeline::{Pipeline, PipelineOptions, RunOptions};
pub use retry::RetryPolicy;
pub use stream::{TokenChunk, TokenSink, TokenStream};

pub use glassbox_trace as trace;
pub use tokio_util::sync::CancellationToken;
