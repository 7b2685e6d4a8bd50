//! `router` at run time: ordered CEL rules over `input`, `outputs` and
//! `labels`; the first rule that holds emits its label, else `default`.
//!
//! Rules are compiled once at build time. Evaluation is cheap and runs
//! inline. A rule that cannot be evaluated (it reads a missing field) fails
//! the node with `bad_input` rather than silently falling through: use
//! `has(input.x) && ...` for optional fields.

use std::sync::Arc;

use glassbox_engine::trace::Fact;
use glassbox_engine::{
    BuildContext, BuildError, Call, Node, NodeCx, NodeError, NodeKind, NodeOutput,
};
use glassbox_topology::Expr;
use serde_json::{Map, Value, json};

use crate::router::Router;

struct Rule {
    name: String,
    label: String,
    expr: Expr,
}

/// A built router.
pub struct RouterNode {
    rules: Vec<Rule>,
    default: String,
    /// Whether any rule reads `outputs` or `labels` (else skip building them).
    reads_upstream: bool,
}

impl NodeKind for Router {
    fn build(
        &self,
        node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        build(&node.config).map(|r| Arc::new(r) as Arc<dyn Node>)
    }
}

fn build(config: &Value) -> Result<RouterNode, BuildError> {
    if config.get("examples").is_some_and(|e| !e.is_null()) {
        return Err(BuildError::NotWired {
            kind: "router".into(),
            hint: "nearest-example routing (`examples`) needs the embedding runtime, which is not \
                   wired into the engine yet; use ordered `rules` for now"
                .into(),
        });
    }
    let default = config
        .get("default")
        .and_then(Value::as_str)
        .ok_or_else(|| BuildError::config("`default` label is missing"))?
        .to_string();
    let mut rules = Vec::new();
    for (i, rule) in config
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let when = rule.get("when").and_then(Value::as_str).unwrap_or_default();
        let expr = Expr::compile(when).map_err(|e| {
            BuildError::config(format!("rules[{i}].when does not parse: {}", e.message))
        })?;
        let label = rule
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = rule
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| format!("rules[{i}]"), str::to_string);
        rules.push(Rule { name, label, expr });
    }
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
    })
}

impl RouterNode {
    fn route(&self, cx: &NodeCx) -> Result<NodeOutput, NodeError> {
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
                return Ok(emit(&rule.label, Some(&rule.name), reason));
            }
        }
        let reason = if self.rules.is_empty() {
            "no rules; default label".to_string()
        } else {
            format!("none of {} rules matched; default label", self.rules.len())
        };
        Ok(emit(&self.default, None, reason))
    }
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
        Call::Ready(self.route(&cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_not_wired_yet() {
        let err = build(&json!({"default": "a", "examples": {"a": ["x"]}}))
            .err()
            .unwrap();
        assert_eq!(err.code(), "not_wired");
        assert!(build(&json!({"rules": []})).is_err());
    }
}
