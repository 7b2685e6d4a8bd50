//! Edge checks: both ends exist, and each condition parses, names only
//! known variables and compares labels a router can produce.

use std::collections::HashMap;

use crate::condition::{Condition, VARIABLES};
use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::kind::Labels;
use crate::model::NodeId;
use crate::source::Span;

use super::{CheckedEdge, Checker, sorted};

impl Checker<'_> {
    /// Edge ends, self-loops, duplicates, conditions and labels. Returns the
    /// edges whose ends both exist, with their parsed conditions.
    pub(super) fn check_edges(
        &mut self,
        index: &HashMap<String, NodeId>,
        labels: &[Labels],
    ) -> Vec<CheckedEdge> {
        let mut out = Vec::new();
        let mut seen: HashMap<(String, String, Option<String>), Span> = HashMap::new();
        let ids: Vec<&str> = index.keys().map(String::as_str).collect();
        for edge in &self.spec.edges {
            let path = |f: &str| format!("edges[{}].{f}", edge.index);
            let mut ends = [None, None];
            for (slot, (end, field)) in [(&edge.from, "from"), (&edge.to, "to")]
                .into_iter()
                .enumerate()
            {
                match index.get(&end.value) {
                    Some(&id) => ends[slot] = Some(id),
                    None => {
                        let hint = did_you_mean(&end.value, ids.iter().copied())
                            .unwrap_or_else(|| format!("known nodes: {}", sorted(&ids).join(", ")));
                        self.push(
                            Diagnostic::error(
                                Code::UnknownNode,
                                end.span,
                                format!("unknown node `{}` in edge {}", end.value, edge.index),
                            )
                            .at(path(field))
                            .hint(hint),
                        );
                    }
                }
            }
            let key = (
                edge.from.value.clone(),
                edge.to.value.clone(),
                edge.condition.as_ref().map(|c| c.value.clone()),
            );
            if let Some(&first) = seen.get(&key) {
                self.push(
                    Diagnostic::error(
                        Code::DuplicateEdge,
                        edge.span,
                        format!(
                            "edge `{}` → `{}` is declared twice",
                            edge.from.value, edge.to.value
                        ),
                    )
                    .at(format!("edges[{}]", edge.index))
                    .related(first, "first declared here")
                    .hint("remove the duplicate"),
                );
            } else {
                seen.insert(key, edge.span);
            }
            if edge.from.value == edge.to.value && ends[0].is_some() && edge.bound.is_none() {
                self.push(
                    Diagnostic::error(
                        Code::SelfLoop,
                        edge.span,
                        format!("edge from `{}` to itself", edge.from.value),
                    )
                    .at(format!("edges[{}]", edge.index))
                    .hint("to run a node again while a condition holds, bound the edge: `loop: {max_iterations: 3}`; to repeat a failed call, use `retries`"),
                );
                continue;
            }
            let condition = edge
                .condition
                .as_ref()
                .and_then(|c| self.check_condition(c, &path("condition"), ends[0], labels));
            if let [Some(from), Some(to)] = ends {
                out.push(CheckedEdge {
                    from,
                    to,
                    condition,
                    spec_index: edge.index,
                    span: edge.span,
                    description: edge.description.as_ref().map(|d| d.value.clone()),
                    bound: edge.bound.as_ref().map(|b| crate::model::LoopBound {
                        max_iterations: u32::try_from(b.max_iterations.value).unwrap_or(u32::MAX),
                        max_tokens: b.max_tokens.as_ref().map(|t| t.value),
                        max_cost: b.max_cost.as_ref().map(|c| c.value),
                        max_time: b
                            .max_time_ms
                            .as_ref()
                            .map(|t| std::time::Duration::from_millis(t.value)),
                    }),
                    bound_span: edge.bound.as_ref().map(|b| b.span),
                });
            }
        }
        out
    }

    pub(super) fn check_condition(
        &mut self,
        text: &crate::decode::Spanned<String>,
        path: &str,
        from: Option<NodeId>,
        labels: &[Labels],
    ) -> Option<Condition> {
        let inner = self.string_content_start(text.span);
        match Condition::parse(&text.value) {
            Err(err) => {
                let lead = text.value.len() - text.value.trim_start().len();
                let at = if err.line == 1 {
                    inner + lead + err.column - 1
                } else {
                    inner
                };
                let at = at.min(text.span.end.saturating_sub(1)).max(text.span.start);
                self.push(
                    Diagnostic::error(
                        Code::BadCondition,
                        Span::new(at, at + 1),
                        format!("condition `{}` does not parse: {}", text.value, err.message),
                    )
                    .at(path)
                    .hint("a condition is a bare label (`need_retrieval`) or a CEL expression such as `size(outputs.retrieve.hits) > 5`"),
                );
                None
            }
            Ok(Condition::Label(label)) => {
                let from = from?;
                let source = &self.spec.nodes[from.0];
                match &labels[from.0] {
                    Labels::Dynamic => {}
                    Labels::None => self.push(
                        Diagnostic::error(
                            Code::UnknownLabel,
                            text.span,
                            format!(
                                "condition `{label}` is a label, but node `{}` (type `{}`) emits no labels",
                                source.id.value, source.kind.value
                            ),
                        )
                        .at(path)
                        .hint("route with a `router` node, or write a CEL expression over `outputs`"),
                    ),
                    Labels::Declared(known) if !known.contains(&label) => {
                        let mut hint = format!("`{}` emits: {}", source.id.value, known.join(", "));
                        if let Some(m) = did_you_mean(&label, known.iter().map(String::as_str)) {
                            hint = format!("{m} ({hint})");
                        }
                        self.push(
                            Diagnostic::error(
                                Code::UnknownLabel,
                                text.span,
                                format!("node `{}` never emits the label `{label}`", source.id.value),
                            )
                            .at(path)
                            .hint(hint),
                        );
                    }
                    Labels::Declared(_) => {}
                }
                Some(Condition::Label(label))
            }
            Ok(Condition::Expr(expr)) => {
                for var in expr.variables() {
                    if !VARIABLES.contains(&var.as_str()) {
                        let mut hint = format!(
                            "conditions can read {}",
                            VARIABLES.map(|v| format!("`{v}`")).join(", ")
                        );
                        if let Some(m) = did_you_mean(var, VARIABLES) {
                            hint = format!("{m} ({hint})");
                        }
                        self.push(
                            Diagnostic::error(
                                Code::UnknownVariable,
                                text.span,
                                format!("condition reads `{var}`, which is not defined"),
                            )
                            .at(path)
                            .hint(hint),
                        );
                    }
                }
                Some(Condition::Expr(expr))
            }
        }
    }

    /// Byte offset of a string's content (past an opening quote).
    pub(super) fn string_content_start(&self, span: Span) -> usize {
        match self.source.text().as_bytes().get(span.start) {
            Some(b'"' | b'\'') => span.start + 1,
            _ => span.start,
        }
    }
}
