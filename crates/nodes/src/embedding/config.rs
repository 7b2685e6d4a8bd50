//! The `embedding` config, read once.

use glassbox_topology::{Cx, Expr, Value};

use crate::check::{self, Backend};

pub const FIELDS: &[&str] = &[
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "allow_hosts",
    "text",
    "batch_size",
    "timeout_ms",
];

/// A checked `embedding` config.
#[derive(Clone, Default)]
pub struct EmbeddingConfig {
    pub backend: Backend,
    /// What to embed (CEL); default: the upstream text or `input.question`.
    pub text: Option<Expr>,
    pub batch_size: Option<u64>,
    pub timeout_ms: Option<u64>,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> EmbeddingConfig {
    let Some(obj) = check::config(config, cx) else {
        return EmbeddingConfig::default();
    };
    obj.deny_unknown(cx, FIELDS);
    let mut backend = check::backend(&obj, cx);
    backend.model = obj.str(cx, "model").map(|m| m.value);
    backend.allow_hosts = check::strings(obj.str_list(cx, "allow_hosts"));
    let text = obj.str(cx, "text").and_then(|text| {
        let path = cx.path_of("text");
        check::expr(&text, cx, &path)
    });
    EmbeddingConfig {
        backend,
        text,
        batch_size: obj.uint(cx, "batch_size", 1, 4096).map(|n| n.value),
        timeout_ms: obj.uint(cx, "timeout_ms", 1, 3_600_000).map(|n| n.value),
    }
}
