//! What a node produced: its [`NodeOutput`] (value, label, facts, tags,
//! tokens). Kept apart from the [`Node`](crate::Node) trait because the
//! request state stores outputs and the node context reads that state: with
//! outputs here, `request` and `node` depend on this module and not on each
//! other.

use glassbox_trace::{Fact, Tags};
use serde_json::Value;

/// Tokens a model node used (the engine prices them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: Option<u64>,
    pub output: Option<u64>,
    /// The same tokens by price class, when the model reported them.
    pub classes: Option<glassbox_trace::TokenUsage>,
}

/// What a node produced.
#[derive(Debug, Clone, Default)]
pub struct NodeOutput {
    /// The value downstream nodes and conditions read as `outputs.<id>`.
    pub value: Value,
    /// The label this node emitted (routers), read by bare-label conditions.
    pub label: Option<String>,
    /// Structured statements for the explanation.
    pub facts: Vec<Fact>,
    /// Short tags for the span (template id, model version, rules hit...).
    pub tags: Tags,
    pub tokens: Tokens,
}

impl NodeOutput {
    pub fn new(value: Value) -> NodeOutput {
        NodeOutput {
            value,
            ..NodeOutput::default()
        }
    }

    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn fact(mut self, fact: Fact) -> Self {
        self.facts.push(fact);
        self
    }

    pub fn tag(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    pub fn tokens(mut self, input: u64, output: u64) -> Self {
        self.tokens = Tokens {
            input: Some(input),
            output: Some(output),
            classes: None,
        };
        self
    }

    /// The tokens by price class (cached, reasoning, audio...): billed at
    /// the node's price for each class. Sets the input and output totals.
    pub fn token_classes(mut self, classes: glassbox_trace::TokenUsage) -> Self {
        self.tokens = Tokens {
            input: Some(classes.prompt_total()),
            output: Some(classes.completion_total()),
            classes: (!classes.is_plain()).then_some(classes),
        };
        self
    }

    /// The rule behind this node's label, from its `Routed` fact.
    pub fn rule(&self) -> Option<&str> {
        self.facts.iter().find_map(|f| match f {
            Fact::Routed { rule, .. } => rule.as_deref(),
            _ => None,
        })
    }
}

/// The text in a value: a string, or an object's `text` field.
pub fn text_of(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        Value::Object(m) => m.get("text").and_then(Value::as_str),
        _ => None,
    }
}
