//! # glassbox-bench
//!
//! The load generators and benchmarks behind `glassbox bench`, as library
//! code that tests can call:
//!
//! - [`load`]: load on a server's run API (`POST /v1/topologies/{id}/runs`),
//!   closed loop (C clients back to back) or open loop (arrivals on their
//!   own clock, coordinated omission avoided), with the trace check of every
//!   admitted request;
//! - [`chat`]: streamed chat completions against any OpenAI-compatible
//!   server: TTFT, end-to-end latency, goodput within an SLO;
//! - [`llm`]: the calibration benchmark of one language model (local engine
//!   or an endpoint), written as the measurements `glassbox plan calibrate`
//!   fits, and the serving simulator's check against the local engine;
//! - [`stats`]: the figures every report shares (nearest-rank P50/P95/P99,
//!   counts by outcome, input-length buckets).
//!
//! Each benchmark takes a resolved, validated configuration and returns a
//! report (a serialisable value); the binary parses the flags into that
//! configuration, maps [`BenchError`] to exit codes and prints the report
//! as a table or JSON. Why a crate of its own: the measuring code (about
//! 2,000 lines) was written inside the command, reachable only through the
//! binary; here its logic is unit-tested directly, and nothing in it knows
//! of flags, terminals or exit codes.

pub mod chat;
mod error;
pub mod llm;
pub mod load;
pub mod stats;

pub use error::BenchError;
