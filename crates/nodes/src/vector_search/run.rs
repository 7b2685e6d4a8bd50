//! `vector_search` at run time: the `top_k` nearest chunks to the upstream
//! embedding in an index built by `glassbox index build`.
//!
//! Output: `{"hits": [{"title", "doc_id", "chunk_id", "score", "text"}], "count"}`;
//! the explanation lists the distinct document titles.

use std::sync::Arc;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput};
use glassbox_models::VectorIndex;
use serde_json::{Value, json};

use super::config::VectorSearchConfig;
use crate::resources::BuildContext;

pub struct VectorSearchNode {
    index: Arc<VectorIndex>,
    top_k: usize,
    min_score: f32,
}

/// Opens the index (shared through the model cache).
pub(super) fn build(
    config: &VectorSearchConfig,
    cx: &BuildContext,
) -> Result<VectorSearchNode, BuildError> {
    let path = config.index.as_deref().ok_or_else(|| {
        BuildError::config(
            "`index` is missing: build one with `glassbox index build DOCS --out INDEX`",
        )
    })?;
    let index = cx
        .resources
        .models()
        .index(&cx.topology.resolve_path(path))?;
    Ok(VectorSearchNode {
        index,
        top_k: config.top_k.map_or(5, |k| k as usize),
        min_score: config.min_score.map_or(-1.0, |s| s as f32),
    })
}

impl VectorSearchNode {
    fn query(cx: &NodeCx) -> Result<Vec<f32>, NodeError> {
        let upstream = cx.upstream();
        let vector = upstream
            .iter()
            .find_map(|(_, out)| out.value.get("vector").and_then(Value::as_array))
            .ok_or_else(|| {
                NodeError::BadInput(
                    "no upstream `vector`: connect an `embedding` node to this one".into(),
                )
            })?;
        Ok(vector
            .iter()
            .filter_map(Value::as_f64)
            .map(|x| x as f32)
            .collect())
    }

    fn search(&self, cx: &NodeCx) -> Result<NodeOutput, NodeError> {
        let query = Self::query(cx)?;
        if query.len() != self.index.dim() {
            return Err(NodeError::BadInput(format!(
                "query vector has {} dimensions, the index {} (was it built with another embedding model?)",
                query.len(),
                self.index.dim()
            )));
        }
        let hits = self
            .index
            .search(&query, self.top_k, self.min_score)
            .map_err(|e| NodeError::failed(e.to_string()))?;
        let mut titles: Vec<String> = Vec::new();
        for h in &hits {
            if !titles.contains(&h.title) {
                titles.push(h.title.clone());
            }
        }
        let count = hits.len();
        let best = hits.first().map_or(0.0, |h| h.score);
        let hits: Vec<Value> = hits
            .into_iter()
            .map(|h| json!({ "title": h.title, "doc_id": h.doc_id, "chunk_id": h.chunk_id, "score": h.score, "text": h.text }))
            .collect();
        Ok(NodeOutput::new(json!({ "hits": hits, "count": count }))
            .tag("hits", count.to_string())
            .tag("best_score", format!("{best:.3}"))
            // Exact on a small index (every vector compared), else the graph.
            .tag(
                "search",
                if self.index.full_scan() {
                    "exact"
                } else {
                    "hnsw"
                }
                .to_owned(),
            )
            .fact(Fact::Retrieved { count, titles }))
    }
}

impl Node for VectorSearchNode {
    fn call(&self, cx: NodeCx) -> Call {
        Call::Ready(self.search(&cx))
    }
}
