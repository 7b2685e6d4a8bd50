//! # glassbox-nodes
//!
//! The built-in node kinds. Each kind lives in its own module and checks its
//! `config` purely (no I/O) through `glassbox_topology::KindSchema`, so
//! `glassbox validate` catches config mistakes with exact locations before
//! anything runs. Kinds are registered explicitly in [`builtin_kinds`]: the
//! binary decides what exists, and tests can register their own.
//!
//! Run-time behaviour lives next to each kind in a `*_run.rs` module that
//! implements `glassbox_engine::NodeKind` (build) and `Node` (call);
//! [`registry`] returns every built-in kind ready to build pipelines.

pub mod check;
pub mod embedding;
pub mod embedding_run;
pub mod guard;
pub mod guard_run;
pub mod http;
pub mod http_run;
pub mod llm;
pub mod llm_run;
pub mod model_cache;
pub mod openai;
pub mod outbound;
pub mod router;
pub mod router_run;
pub mod schema_subset;
pub mod template;
pub mod template_run;
pub mod vector_search;
pub mod vector_search_run;

use std::sync::Arc;

use glassbox_topology::KindSet;

/// Every built-in kind, for validation.
pub fn builtin_kinds() -> KindSet {
    let mut kinds = KindSet::new();
    kinds
        .register(Arc::new(router::Router))
        .register(Arc::new(template::Template))
        .register(Arc::new(embedding::Embedding))
        .register(Arc::new(vector_search::VectorSearch))
        .register(Arc::new(llm::LlmInference))
        .register(Arc::new(guard::OutputGuard))
        .register(Arc::new(http::Http));
    kinds
}

/// Every built-in kind, for building and running pipelines.
/// (`llm_inference`, `embedding` and `vector_search` report "not wired yet"
/// when built, until the model runtimes are wired in.)
pub fn registry() -> glassbox_engine::Registry {
    let mut r = glassbox_engine::Registry::new();
    r.register(Arc::new(router::Router))
        .register(Arc::new(template::Template))
        .register(Arc::new(embedding::Embedding))
        .register(Arc::new(vector_search::VectorSearch))
        .register(Arc::new(llm::LlmInference))
        .register(Arc::new(guard::OutputGuard))
        .register(Arc::new(http::Http));
    r
}
