//! The `vector_search` config, read once.

use glassbox_topology::{Cx, Value};

use crate::check;

pub const FIELDS: &[&str] = &["index", "top_k", "min_score", "ef"];

/// A checked `vector_search` config.
#[derive(Debug, Clone, Default)]
pub struct VectorSearchConfig {
    /// The index directory; required, absent in a sketch.
    pub index: Option<String>,
    pub top_k: Option<u64>,
    pub min_score: Option<f64>,
    pub ef: Option<u64>,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> VectorSearchConfig {
    let obj = check::config(config, cx);
    check::require(
        obj.as_ref(),
        cx,
        "index",
        "point at an index built by `glassbox index build DOCS --out INDEX`",
    );
    let Some(obj) = obj else {
        return VectorSearchConfig::default();
    };
    obj.deny_unknown(cx, FIELDS);
    VectorSearchConfig {
        index: obj.str(cx, "index").map(|s| s.value),
        top_k: obj.uint(cx, "top_k", 1, 1000).map(|n| n.value),
        min_score: obj.number(cx, "min_score", -1.0, 1.0).map(|n| n.value),
        ef: obj.uint(cx, "ef", 1, 100_000).map(|n| n.value),
    }
}
