//! Integration tests for glassbox-nodes: the built-in runtimes inside real
//! pipelines (router, template, output_guard, http) and the model-backed
//! kinds with the real local models, and custom steps (`wasm`) built from
//! the examples.

#![allow(clippy::unwrap_used)]

mod agent;
mod agent_pick;
mod guard;
mod http;
mod models;
mod moderation;
mod outbound;
mod prewarm;
mod secrets;
mod support;
mod template;
mod usage;
mod wasm;
