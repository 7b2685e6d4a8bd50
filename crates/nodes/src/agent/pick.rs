//! `tool_retrieval`: offer the model only the tools whose descriptions are
//! closest to the question. A small model given several tools often calls
//! the wrong one (SmolLM2-135M looks an order up for a product question);
//! ranking the tools by a sentence embedding of "name: description"
//! against the question, and offering the `top_k` best, takes that choice
//! from the model's weakest skill to the embedding model's strongest. The
//! same trade-off as retrieval over many tools in other agent frameworks:
//! a tool that is not offered cannot be called in that run.
//!
//! The tools are embedded once when the node is built; each run embeds its
//! question once and keeps its choice for every model call of the run.

use std::sync::Arc;

use glassbox_models::Embedder;

use super::config::ToolConfig;

/// One tool's closeness to a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub tool: String,
    pub similarity: f32,
}

/// The tools a run is offered, best first, and those it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    pub offered: Vec<Score>,
    pub left_out: Vec<Score>,
}

impl Picked {
    /// The offered tools' names in the order the topology declares them
    /// (the model's prompt keeps the author's order).
    pub fn names_in(&self, declared: &[String]) -> Vec<String> {
        declared
            .iter()
            .filter(|d| self.offered.iter().any(|s| &s.tool == *d))
            .cloned()
            .collect()
    }

    /// One sentence on the choice, English and Chinese.
    pub fn explain(&self, model: &str) -> (String, String) {
        let list = |scores: &[Score]| {
            scores
                .iter()
                .map(|s| format!("{} {:.2}", s.tool, s.similarity))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let total = self.offered.len() + self.left_out.len();
        let offered = list(&self.offered);
        let left = list(&self.left_out);
        (
            format!(
                "Of its {total} tools the agent was offered the {} closest to the question by \
                 {model} ({offered}); not offered: {left}",
                self.offered.len()
            ),
            format!(
                "按 {model} 与问题的相似度，智能体从 {total} 个工具中只得到最接近的 {} 个\
                 （{offered}）；未提供：{left}",
                self.offered.len()
            ),
        )
    }
}

/// The tools' vectors and the model that made them.
pub struct ToolIndex {
    embedder: Arc<Embedder>,
    names: Vec<String>,
    vectors: Vec<Vec<f32>>,
    top_k: usize,
}

/// What a tool is, as embedded: its name in words and its description.
fn tool_text(t: &ToolConfig) -> String {
    format!("{}: {}", t.name.replace('_', " "), t.description)
}

impl ToolIndex {
    pub fn new(
        embedder: Arc<Embedder>,
        tools: &[ToolConfig],
        top_k: usize,
    ) -> Result<Self, glassbox_models::EmbedError> {
        let texts: Vec<String> = tools.iter().map(tool_text).collect();
        let vectors = embedder.embed(&texts)?;
        Ok(Self {
            embedder,
            names: tools.iter().map(|t| t.name.clone()).collect(),
            vectors,
            top_k,
        })
    }

    /// The embedding model's name, for spans and explanations.
    pub fn model(&self) -> &str {
        self.embedder.version()
    }

    /// The tools offered for `question`.
    pub fn pick(&self, question: &str) -> Result<Picked, glassbox_models::EmbedError> {
        let q = self.embedder.embed_one(question)?;
        Ok(rank(&q, &self.names, &self.vectors, self.top_k))
    }
}

/// Ranks tools by cosine similarity (the vectors are L2-normalised, so a
/// dot product); ties keep the declared order. The best `top_k` are
/// offered.
pub fn rank(question: &[f32], names: &[String], vectors: &[Vec<f32>], top_k: usize) -> Picked {
    let mut scores: Vec<Score> = names
        .iter()
        .zip(vectors)
        .map(|(name, v)| Score {
            tool: name.clone(),
            similarity: v.iter().zip(question).map(|(a, b)| a * b).sum(),
        })
        .collect();
    // Stable: equal scores stay in declared order.
    scores.sort_by(|a, b| b.similarity.total_cmp(&a.similarity));
    let left_out = scores.split_off(top_k.min(scores.len()));
    Picked {
        offered: scores,
        left_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_closest_tools_are_offered_and_the_rest_named() {
        let tools = names(&["lookup_order", "search_kb", "refund"]);
        let vectors = vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.6, 0.8]];
        let picked = rank(&[0.0, 1.0], &tools, &vectors, 2);
        let offered: Vec<&str> = picked.offered.iter().map(|s| s.tool.as_str()).collect();
        assert_eq!(offered, ["search_kb", "refund"]);
        assert_eq!(picked.left_out.len(), 1);
        assert_eq!(picked.left_out[0].tool, "lookup_order");
        // The prompt keeps the declared order.
        assert_eq!(picked.names_in(&tools), ["search_kb", "refund"]);
        let (en, zh) = picked.explain("all-minilm-l6-v2");
        assert!(
            en.contains("Of its 3 tools the agent was offered the 2 closest"),
            "{en}"
        );
        assert!(en.contains("not offered: lookup_order 0.00"), "{en}");
        assert!(zh.contains("3 个工具"), "{zh}");
    }

    #[test]
    fn top_k_beyond_the_tools_offers_them_all_and_ties_keep_declared_order() {
        let tools = names(&["a", "b"]);
        let vectors = vec![vec![0.5, 0.5], vec![0.5, 0.5]];
        let picked = rank(&[1.0, 0.0], &tools, &vectors, 5);
        let offered: Vec<&str> = picked.offered.iter().map(|s| s.tool.as_str()).collect();
        assert_eq!(offered, ["a", "b"]);
        assert!(picked.left_out.is_empty());
    }
}
