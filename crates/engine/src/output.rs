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
    /// The steps inside this attempt (an agent's model and tool calls),
    /// each recorded as its own span and itemised on the receipt.
    pub steps: Steps,
}

/// A node's [`Step`]s: one pointer when there are none (most nodes), so
/// outputs stay small.
#[derive(Debug, Clone, Default)]
// A thin pointer (a `Vec` is three words): `NodeOutput` is moved through
// every attempt, and only agents have steps.
#[allow(clippy::box_collection)]
pub struct Steps(Option<Box<Vec<Step>>>);

impl Steps {
    pub fn push(&mut self, step: Step) {
        self.0.get_or_insert_default().push(step);
    }
}

impl From<Vec<Step>> for Steps {
    fn from(steps: Vec<Step>) -> Steps {
        Steps((!steps.is_empty()).then(|| Box::new(steps)))
    }
}

impl std::ops::Deref for Steps {
    type Target = [Step];

    fn deref(&self) -> &[Step] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

/// One step inside a node's attempt: an agent's model call or tool call
/// (or a tool call its model repeated, answered from the earlier result,
/// or the embedding model's pick of the tools offered).
/// The engine records it as a span of role `step` (node `ID#N`, kind
/// `KIND.model`, `KIND.tool`, `KIND.repeat` or `KIND.pick`, tag `iteration`, and tag
/// `model` or `tool` naming what ran) with its arguments and
/// result as the span's input and output (summarised, and redacted by the
/// store like every summary), and bills it on its own receipt lines.
#[derive(Debug, Clone)]
pub struct Step {
    /// `model`, `tool`, `repeat` or `pick`.
    pub kind: &'static str,
    /// The model or the tool that ran (tag `model` or `tool`).
    pub name: String,
    /// The loop iteration it belongs to, from 1.
    pub iteration: u32,
    pub started: std::time::Instant,
    pub ended: std::time::Instant,
    /// What the step was given (a tool's arguments, a model's last turn).
    pub input: Value,
    /// What it gave back (a tool's result, a model's reply).
    pub output: Value,
    /// Why it failed, when it did (a tool that answered an error).
    pub error: Option<String>,
    /// Model tokens `(input, output)`, priced at the node's token prices;
    /// they are part of the node's own `tokens`.
    pub tokens: Option<(u64, u64)>,
    /// What it cost beyond the node's prices (a tool topology's receipt
    /// total); added to the node's attempt cost.
    pub cost: Option<rust_decimal::Decimal>,
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

    /// Adds a step (see [`Step`]).
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
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
