//! `wasm`: a custom step, written in any language, compiled to a
//! WebAssembly component that implements `crates/nodes/wit/step.wit`, and
//! run by wasmtime in a sandbox: nothing granted unless the topology says
//! so (no files, network, clock or environment), fuel and memory limits,
//! and an interruption when the node's time or the request's runs out.
//!
//! The component is named by path and SHA-256 in the config, and describes
//! itself: a JSON Schema for its `settings` (checked by `glassbox validate`,
//! [`inspect`]), one for its output (checked on every call, [`run`]), and
//! the labels it may return, which drive edges as a router's do. Facts it
//! returns join the explanation. Each call's CPU time is measured by the
//! engine and priced like any CPU node's; its fuel is a span tag.
//!
//! Docs: docs/custom-steps.md. Why wasmtime, and its cost: ADR 0011.

pub mod config;
pub mod host;
mod inspect;
pub mod run;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Labels, Topology, Value};

use crate::resources::{BuildContext, Resources};

pub use config::WasmConfig;
pub use run::codes;

/// The `wasm` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Wasm;

impl TypedKind<Resources> for Wasm {
    type Config = WasmConfig;

    fn name(&self) -> &'static str {
        "wasm"
    }

    fn summary(&self) -> &'static str {
        "runs a custom step: a sandboxed WebAssembly component (any language) named by path and SHA-256"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> WasmConfig {
        config::check(config, cx)
    }

    /// The labels are the component's to declare; reading them is I/O, so
    /// validation checks bare-label edges in [`inspect`] instead.
    fn labels(&self, _config: &WasmConfig) -> Labels {
        Labels::Dynamic
    }

    fn inspect(
        &self,
        config: &WasmConfig,
        node: &glassbox_topology::Node,
        raw: Option<&Value>,
        topology: &Topology,
        cx: &mut Cx<'_>,
    ) {
        inspect::inspect(config, node, raw, topology, cx);
    }

    /// A step may stream text (`host.emit`), so serving treats it as a
    /// kind that streams: an output guard after it buffers what it emits,
    /// and when it is the last such node its text is what a chat streams.
    fn streams_text(&self) -> bool {
        true
    }

    fn secret_fields(&self) -> &'static [&'static str] {
        // Values of `grant.env` may be secret references (`${env:NAME}`).
        &["grant"]
    }

    fn build(
        &self,
        config: &WasmConfig,
        _node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, cx).map(|n| Arc::new(n) as Arc<dyn Node>)
    }
}
