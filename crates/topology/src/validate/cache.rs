//! Response-cache checks: the similarity model names an embedding node of
//! this topology, and the text to compare is an expression that compiles.
//! Ranges (`ttl_s`, `max_entries`, `threshold`) were checked by the decoder.

use std::collections::HashMap;
use std::time::Duration;

use crate::condition::Expr;
use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::model::{CachePolicy, DEFAULT_CACHE_ENTRIES, DEFAULT_CACHE_TTL, NodeId, Similarity};

use super::{Checker, node_path};

impl Checker<'_> {
    /// Each node's resolved cache (by position in `spec.nodes`), reporting
    /// every problem.
    pub(super) fn check_caches(
        &mut self,
        index: &HashMap<String, NodeId>,
    ) -> Vec<Option<CachePolicy>> {
        let nodes = &self.spec.nodes;
        let mut out = Vec::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            let Some(spec) = &node.cache else {
                out.push(None);
                continue;
            };
            let mut similarity = None;
            if let Some(sim) = &spec.similarity {
                let path = node_path(node, "cache.similarity");
                let target = match index.get(&sim.embedding.value) {
                    // Missing: reported by the decoder.
                    None if sim.embedding.value.is_empty() => None,
                    None => {
                        let hint = did_you_mean(&sim.embedding.value, index.keys().map(String::as_str))
                            .unwrap_or_else(|| {
                                "name an `embedding` node of this topology; its model compares the texts"
                                    .into()
                            });
                        self.push(
                            Diagnostic::error(
                                Code::UnknownNode,
                                sim.embedding.span,
                                format!(
                                    "cache similarity model `{}` is not a node",
                                    sim.embedding.value
                                ),
                            )
                            .at(format!("{path}.embedding"))
                            .hint(hint),
                        );
                        None
                    }
                    Some(&t) => {
                        let kind = &nodes[t.0].kind.value;
                        let embeds = self.kinds.get(kind).is_some_and(|k| k.embeds());
                        if t.0 == i || !embeds {
                            let embedders: Vec<&str> = nodes
                                .iter()
                                .filter(|n| {
                                    self.kinds.get(&n.kind.value).is_some_and(|k| k.embeds())
                                })
                                .map(|n| n.id.value.as_str())
                                .collect();
                            let hint = if embedders.is_empty() {
                                "add an `embedding` node upstream of this one and name it here"
                                    .to_string()
                            } else {
                                format!("embedding nodes here: {}", embedders.join(", "))
                            };
                            self.push(
                                Diagnostic::error(
                                    Code::BadCache,
                                    sim.embedding.span,
                                    if t.0 == i {
                                        format!(
                                            "node `{}` names itself as its cache similarity model",
                                            sim.embedding.value
                                        )
                                    } else {
                                        format!(
                                            "cache similarity model `{}` is a `{kind}` node, which does not embed text",
                                            sim.embedding.value
                                        )
                                    },
                                )
                                .at(format!("{path}.embedding"))
                                .hint(hint),
                            );
                            None
                        } else {
                            Some(t)
                        }
                    }
                };
                let text = sim.text.as_ref().and_then(|t| match Expr::compile(&t.value) {
                    Ok(e) => Some(Some(e)),
                    Err(err) => {
                        self.push(
                            Diagnostic::error(
                                Code::BadCache,
                                t.span,
                                format!("cache text `{}` does not parse: {}", t.value, err.message),
                            )
                            .at(format!("{path}.text"))
                            .hint("write a CEL expression that yields a string, e.g. `input.question`"),
                        );
                        None
                    }
                });
                let text_ok = sim.text.is_none() || text.is_some();
                if let (Some(embedding), true) = (target, text_ok) {
                    similarity = Some(Similarity {
                        embedding,
                        threshold: sim.threshold.value,
                        text: text.flatten(),
                    });
                }
            }
            out.push(Some(CachePolicy {
                ttl: spec
                    .ttl_s
                    .as_ref()
                    .map_or(DEFAULT_CACHE_TTL, |t| Duration::from_secs(t.value)),
                max_entries: spec
                    .max_entries
                    .as_ref()
                    .map_or(DEFAULT_CACHE_ENTRIES, |m| m.value as usize),
                similarity,
            }));
        }
        out
    }
}
