//! # glassbox-nodes
//!
//! The built-in node kinds. Each kind lives in its own module and checks its
//! `config` purely (no I/O) through `glassbox_topology::KindSchema`, so
//! `glassbox validate` catches config mistakes with exact locations before
//! anything runs. Kinds are registered explicitly in [`builtin_kinds`]: the
//! binary decides what exists, and tests can register their own.

pub mod check;
pub mod embedding;
pub mod guard;
pub mod http;
pub mod llm;
pub mod router;
pub mod template;
pub mod vector_search;

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
