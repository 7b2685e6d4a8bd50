//! # glassbox-nodes
//!
//! The built-in node kinds, and the one way to turn a topology into a
//! runnable pipeline with them ([`assemble`]).
//!
//! Each kind lives in its own folder: `mod.rs` is the kind (its name, what
//! it does for serving: streams text? guards output? embeds?), `config.rs`
//! reads its `config` once, purely (no I/O), into a typed value with exact
//! locations for every problem, and `run.rs` builds a runnable node from
//! that value and runs it. Validation keeps the typed config in the
//! topology, so building never re-reads raw JSON.
//!
//! What the kinds share when they build is one typed struct,
//! [`Resources`] (model cache, outbound allowances, the registry for
//! sub-topologies, the cluster's dispatcher): GPU-tagged model nodes are
//! sent to cluster workers when it holds a [`cluster::Dispatcher`]
//! (`glassbox serve --cluster`).
//!
//! Kinds are registered explicitly, once, in [`registry`]: the binary
//! decides what exists, and tests can register their own. Adding a kind is
//! one folder and one line there (docs/kinds.md walks through it).

pub mod agent;
pub mod assemble;
pub mod check;
pub mod cluster;
pub mod embedding;
pub mod guard;
pub mod http;
pub mod llm;
pub mod model_cache;
pub mod openai;
pub mod outbound;
pub mod resources;
pub mod router;
pub mod schema_subset;
pub mod template;
pub mod vector_search;
pub mod wasm;

use glassbox_topology::KindSet;

pub use assemble::{AssembleError, Assembled, Assembly, TopologyInput, assemble};
pub use resources::{BuildContext, Registry, Resources};

/// docs/kinds.md ("Adding a node kind"), compiled and run as a doc test so
/// its worked example stays true to the kind API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/kinds.md")]
pub struct KindsGuide;

/// Every built-in kind, ready to validate topologies and build pipelines.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.add(router::Router)
        .add(template::Template)
        .add(embedding::Embedding)
        .add(vector_search::VectorSearch)
        .add(llm::LlmInference)
        .add(guard::OutputGuard)
        .add(http::Http)
        .add(wasm::Wasm)
        .add(agent::Agent);
    r
}

/// The built-in kinds as validation sees them (the same list as [`registry`]).
pub fn builtin_kinds() -> KindSet {
    registry().kind_set()
}
