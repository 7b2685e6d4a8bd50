//! `router` at run time: ordered CEL rules over `input`, `outputs` and
//! `labels`; the first rule that holds emits its label, else `default`.
//!
//! Rules are compiled once, when the config is checked. Evaluation is cheap and runs
//! inline. A rule that cannot be evaluated (it reads a missing field) fails
//! the node with `bad_input` rather than silently falling through: use
//! `has(input.x) && ...` for optional fields.
//!
//! With `examples` (label → sample questions), a request that no rule
//! matched is routed to the label of its most similar example, by cosine
//! similarity of MiniLM embeddings (`embedding` names another local model),
//! when that similarity reaches `min_similarity` (default 0.3); else
//! `default`. Examples are embedded once at build time; the question is
//! embedded per request on the blocking pool.

use std::collections::BTreeMap;
use std::sync::Arc;

use glassbox_engine::explain::NEAREST_EXAMPLE;
use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput, NodeResult};
use glassbox_models::{Embedder, cosine};
use serde_json::{Map, Value, json};

use super::config::{RouterConfig, Rule};
use crate::model_cache::locate;
use crate::resources::BuildContext;

/// Nearest-labelled-example routing.
struct Examples {
    embedder: Arc<Embedder>,
    /// (label, example text, unit vector)
    items: Vec<(String, String, Vec<f32>)>,
    min_similarity: f32,
}

/// Similarity below which an example does not count, unless configured.
const DEFAULT_MIN_SIMILARITY: f32 = 0.3;

/// A built router.
pub struct RouterNode {
    rules: Vec<Rule>,
    default: String,
    /// Whether any rule reads `outputs` or `labels` (else skip building them).
    reads_upstream: bool,
    examples: Option<Arc<Examples>>,
}

/// Builds a router from its checked config; with `examples`, embeds them
/// once now.
pub(super) fn build(config: &RouterConfig, cx: &BuildContext) -> Result<RouterNode, BuildError> {
    let mut router = build_rules(config)?;
    if let Some(examples) = &config.examples {
        router.examples = Some(Arc::new(build_examples(config, examples, cx)?));
    }
    Ok(router)
}

fn build_examples(
    config: &RouterConfig,
    examples: &BTreeMap<String, Vec<String>>,
    cx: &BuildContext,
) -> Result<Examples, BuildError> {
    let model = config
        .embedding
        .as_deref()
        .unwrap_or(crate::embedding::run::DEFAULT_MODEL);
    let embedder = cx.resources.models().embedder(&locate(cx, model))?;
    let mut labelled = Vec::new();
    for (label, texts) in examples {
        for text in texts {
            labelled.push((label.clone(), text.clone()));
        }
    }
    if labelled.is_empty() {
        return Err(BuildError::config(
            "`examples` has no example texts: give each label a list of sample questions",
        ));
    }
    let texts: Vec<&str> = labelled.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = embedder
        .embed(&texts)
        .map_err(|e| BuildError::Unavailable {
            message: format!("embedding the router's examples: {e}"),
            source: Some(Box::new(e)),
        })?;
    let min_similarity = config
        .min_similarity
        .map_or(DEFAULT_MIN_SIMILARITY, |v| v as f32);
    Ok(Examples {
        embedder,
        items: labelled
            .into_iter()
            .zip(vectors)
            .map(|((label, text), v)| (label, text, v))
            .collect(),
        min_similarity,
    })
}

fn build_rules(config: &RouterConfig) -> Result<RouterNode, BuildError> {
    let default = config
        .default
        .clone()
        .ok_or_else(|| BuildError::config("`default` label is missing"))?;
    let rules: Vec<Rule> = config.rules.clone();
    let reads_upstream = rules.iter().any(|r| {
        r.expr
            .variables()
            .iter()
            .any(|v| v == "outputs" || v == "labels")
    });
    Ok(RouterNode {
        rules,
        default,
        reads_upstream,
        examples: None,
    })
}

impl RouterNode {
    /// The first rule that holds, if any.
    fn by_rules(&self, cx: &NodeCx) -> Result<Option<NodeOutput>, NodeError> {
        let (outputs, labels) = if self.reads_upstream {
            (cx.outputs_json(), cx.labels_json())
        } else {
            (Map::new(), Map::new())
        };
        for rule in &self.rules {
            let hit = rule
                .expr
                .evaluate(cx.input(), &outputs, &labels)
                .map_err(|e| NodeError::BadInput(format!("router rule `{}`: {e}", rule.name)))?;
            if hit {
                let reason = format!("`{}` holds", rule.expr.source);
                return Ok(Some(emit(&rule.label, Some(&rule.name), reason)));
            }
        }
        Ok(None)
    }

    fn fallthrough_reason(&self) -> String {
        if self.rules.is_empty() {
            "no rules; default label".to_string()
        } else {
            format!("none of {} rules matched; default label", self.rules.len())
        }
    }
}

impl Examples {
    /// Routes `question` to its nearest example's label, or `default`.
    fn route(&self, question: &str, default: &str, rules_note: &str) -> NodeResult {
        let tokens = self
            .embedder
            .tokenize(question)
            .map_or(0, |t| t.len() as u64);
        let v = self
            .embedder
            .embed_one(question)
            .map_err(|e| NodeError::failed(format!("embedding the question: {e}")))?;
        let best = self
            .items
            .iter()
            .map(|(label, text, e)| (label, text, cosine(&v, e)))
            .max_by(|a, b| a.2.total_cmp(&b.2));
        let out = match best {
            Some((label, text, sim)) if sim >= self.min_similarity => {
                let reason = format!("nearest example “{text}”, similarity {sim:.2}");
                emit(label, Some(NEAREST_EXAMPLE), reason).tag("similarity", format!("{sim:.3}"))
            }
            Some((label, _, sim)) => {
                let reason = format!(
                    "{rules_note}; nearest example (label {label}) is only {sim:.2} similar, below {:.2}; default label",
                    self.min_similarity
                );
                emit(default, None, reason).tag("similarity", format!("{sim:.3}"))
            }
            None => emit(default, None, rules_note.to_string()),
        };
        Ok(out.tokens(tokens, 0))
    }
}

/// The text examples are compared with: `input.question`, or a string input.
fn question_of(input: &Value) -> Option<&str> {
    input
        .get("question")
        .and_then(Value::as_str)
        .or_else(|| input.as_str())
}

fn emit(label: &str, rule: Option<&str>, reason: String) -> NodeOutput {
    NodeOutput::new(json!({ "label": label, "rule": rule, "reason": reason }))
        .label(label)
        .tag("label", label)
        .tag("rule", rule.unwrap_or("default"))
        .fact(Fact::Routed {
            label: label.into(),
            rule: rule.map(str::to_string),
            reason,
        })
}

impl Node for RouterNode {
    fn call(&self, cx: NodeCx) -> Call {
        match self.by_rules(&cx) {
            Err(e) => Call::Ready(Err(e)),
            Ok(Some(out)) => Call::Ready(Ok(out)),
            Ok(None) => {
                let note = self.fallthrough_reason();
                let Some(examples) = self.examples.clone() else {
                    return Call::Ready(Ok(emit(&self.default, None, note)));
                };
                let Some(question) = question_of(cx.input()).map(str::to_string) else {
                    return Call::Ready(Err(NodeError::BadInput(
                        "example routing needs `question` (a string) in the input".into(),
                    )));
                };
                let default = self.default.clone();
                Call::blocking(move || examples.route(&question, &default, &note))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_needs_a_default() {
        let config = crate::check::typed(&super::super::Router, "rules: []");
        let err = build_rules(&config).err().unwrap();
        assert_eq!(err.code(), "bad_config");
        assert!(err.to_string().contains("default"), "{err}");
    }
}
