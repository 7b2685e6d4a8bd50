//! `vector_search`: nearest chunks from an on-disk ANN index.

use glassbox_topology::{Cx, KindSchema, Value};

use crate::check;

pub const FIELDS: &[&str] = &["index", "top_k", "min_score", "ef"];

/// The `vector_search` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct VectorSearch;

impl KindSchema for VectorSearch {
    fn name(&self) -> &'static str {
        "vector_search"
    }

    fn summary(&self) -> &'static str {
        "retrieves the `top_k` nearest chunks (title, chunk id, score, text) from an index built by `glassbox index build`"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let obj = check::config(config, cx);
        check::require(
            obj.as_ref(),
            cx,
            "index",
            "point at an index built by `glassbox index build DOCS --out INDEX`",
        );
        let Some(obj) = obj else { return };
        obj.deny_unknown(cx, FIELDS);
        obj.str(cx, "index");
        obj.uint(cx, "top_k", 1, 1000);
        obj.number(cx, "min_score", -1.0, 1.0);
        obj.uint(cx, "ef", 1, 100_000);
    }
}
